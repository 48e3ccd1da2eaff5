"""What a dataset source declares (:class:`Source`) and what its build returns (:class:`Built`).

A source is the value of ``source = "..."`` in a ``[dataset.NAME]`` section of
``datasets.toml``. Its module (one per source, beside this one) declares everything the
catalog and the build need to know about it in one :class:`Source`, and
:mod:`workbench.data.sources` lists those declarations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.data.definitions import Definitions
from workbench.types import Document, Qrel, Query

#: Where a build says what it does next (``"loading gita"``).
Step = Callable[[str], None]


@dataclass
class Built:
    """What one dataset build produced (before writing). ``documents``: a list, or an iterator read once as the
    file is written (a source that streams: ``files``). ``damage``: the known damage the source's
    texts show (:meth:`workbench.data.damage.DamageReport.to_json`; written to ``damage.json``), or None
    for a source without a damage check."""

    documents: Iterable[Document]
    queries: list[Query]
    qrels: list[Qrel]
    notes: dict[str, Any]
    damage: dict[str, Any] | None = None


@dataclass(frozen=True)
class Source:
    """One dataset source, declared once.

    Attributes:
        name: the ``source`` value in ``datasets.toml``.
        keys: the keys a ``[dataset.NAME]`` section of this source may hold (``source`` included).
        required_keys: the keys it must hold.
        query_types: the query types it can build, in build order; a section without
            ``query_types`` builds all of them. Empty: the section takes no ``query_types``.
        corpora: ``(defn, defs)`` → the folders under the data directory a build needs
            (what ``workbench data fetch`` / the data-directory check asks for).
        input_files: ``(defn, defs, data)`` → every corpus file the build reads, sorted
            (hashed into the manifest: a change makes the build stale).
        build: ``(defn, defs, data, step)`` → :class:`Built`. Raises ``ValueError`` for a
            definition the corpus contradicts and ``KeyError`` for a corpus record that
            lacks a key (the build turns them into ConfigError / DataError).
        check: ``(path, where, section, datasets)`` → checks the source's own keys
            beyond the generic ones (raises ConfigError naming ``path`` and the key), or None.
    """

    name: str
    keys: frozenset[str]
    corpora: Callable[[dict[str, Any], Definitions], tuple[str, ...]]
    input_files: Callable[[dict[str, Any], Definitions, Path], list[Path]]
    build: Callable[[dict[str, Any], Definitions, Path, Step], Built]
    required_keys: tuple[str, ...] = ()
    query_types: tuple[str, ...] = ()
    check: Callable[[Path, str, dict[str, Any], dict[str, Any]], None] | None = None

    def query_types_of(self, defn: dict[str, Any]) -> tuple[str, ...]:
        """The query types a section of this source builds (its ``query_types``, else all of :attr:`query_types`)."""
        return tuple(defn.get("query_types", self.query_types))


def tree(data: Path, *parts: str) -> list[Path]:
    """Every file under ``data/<parts>`` (sorted); empty when that folder is absent."""
    root = data.joinpath(*parts)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def strip_held_out(docs: list[Document], *, translators=(), languages=()) -> list[Document]:
    """``docs`` without the texts of the held-out translators (by ``source``) and languages."""
    out = []
    for d in docs:
        texts = tuple(t for t in d.texts if t.source not in translators and t.language not in languages)
        out.append(d if len(texts) == len(d.texts) else replace(d, texts=texts))
    return out
