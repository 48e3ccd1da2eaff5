"""The dataset sources, one module each, and :data:`SOURCES`, the registry the catalog and the build read.

Adding a source: a module here declaring a :class:`~workbench.data.sources.base.Source`
(its keys, required keys, query types, corpus folders, input files, build function and
key checks), and one entry in :data:`SOURCES`. Its loader goes in
:mod:`workbench.data.loaders` and its query builders in :mod:`workbench.data.querysets.builders`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.data.definitions import Definitions, negative_kinds
from workbench.data.sources import bilara, cst4, files, gita, passages
from workbench.data.sources.base import Built, Source
from workbench.errors import ConfigError

__all__ = ["SOURCES", "Built", "Source", "input_files", "query_types_of", "required_sources", "source_of"]

#: Source name (the ``source`` value in ``datasets.toml``) → its declaration, in the order messages list them.
SOURCES: dict[str, Source] = {s.name: s for s in (gita.SOURCE, bilara.SOURCE, passages.SOURCE, cst4.SOURCE,
                                              files.SOURCE)}


def source_of(defn: dict[str, Any]) -> Source:
    """The declaration of a dataset section's source.

    Raises:
        ConfigError: the source is not one of :data:`SOURCES`.
    """
    src = defn["source"]
    if src not in SOURCES:
        raise ConfigError(f"unknown source {src!r}")
    return SOURCES[src]


def query_types_of(defn: dict[str, Any]) -> tuple[str, ...]:
    """The query types a dataset section builds (its ``query_types``, else the source's default; empty for an
    unknown source)."""
    src = SOURCES.get(defn["source"])
    return src.query_types_of(defn) if src else tuple(defn.get("query_types", ()))


def required_sources(defn: dict[str, Any], defs: Definitions) -> tuple[str, ...]:
    """The data sources (folders under the data directory) a dataset's build reads.

    gita → ``gita``; bilara and bilara-passages → ``suttacentral-bilara``, plus ``ms-dpd``
    when the term query type is built; cst4 → ``cst4-tipitaka-xml``; ``ms-dpd`` too for a dataset whose
    ``negatives`` draw ``absent_lemmas``, and ``gita`` for ``gita_questions``. Optional sources
    (``suttacentral-bilara-ru-sv``) are not listed.

    Raises:
        ConfigError: an unknown source.
    """
    corpora = source_of(defn).corpora(defn, defs)
    if "absent_lemmas" in negative_kinds(defn) and "ms-dpd" not in corpora:
        corpora += ("ms-dpd",)
    if "gita_questions" in negative_kinds(defn) and "gita" not in corpora:
        corpora += ("gita",)
    return corpora


def input_files(defn: dict[str, Any], defs: Definitions, data: Path) -> list[Path]:
    """Every corpus file a dataset's build reads (sorted), for the manifest's hashes.

    Raises:
        ConfigError: an unknown source.
    """
    files = source_of(defn).input_files(defn, defs, data)
    from workbench.data.sources.base import tree

    for kind, corpus in (("absent_lemmas", "ms-dpd"), ("gita_questions", "gita")):  # what the negatives are drawn from
        if kind in negative_kinds(defn):
            files = sorted(set(files) | set(tree(data, corpus)))
    if defn.get("traffic_queries"):
        from workbench.data.querysets.traffic import paths

        files = sorted(set(files) | {p for p in paths(defn, defs.path.parent) if p.is_file()})
    return files
