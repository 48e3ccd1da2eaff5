"""The parsed ``datasets.toml`` (:class:`Definitions`) and the checks its values go through.

Kept below :mod:`workbench.data.catalog` (which reads the file) and
:mod:`workbench.data.sources` (whose modules check their own keys with :func:`str_list`,
:func:`show` and :func:`is_int`), so that both can use it without importing each other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError


@dataclass(frozen=True)
class Definitions:
    """The parsed ``datasets.toml``: global settings and one dict per dataset.

    Attributes:
        path: the file read.
        seed: the seed of every sampling and split.
        splits: the train/dev/test ratios (sum 1).
        max_queries_per_type: the cap per query type, or None for none.
        datasets: dataset name → its ``[dataset.NAME]`` section, as written.
    """

    path: Path
    seed: int
    splits: tuple[float, float, float]
    max_queries_per_type: int | None
    datasets: dict[str, dict[str, Any]]

    def definition(self, name: str) -> dict[str, Any]:
        """The dataset's section plus the global settings it is built with (what the manifest records).

        Raises:
            ConfigError: ``name`` is not defined (the message lists those that are).
        """
        if name not in self.datasets:
            raise ConfigError(f"unknown dataset {name!r}; {self.path} defines: {', '.join(self.datasets)}")
        return {"name": name, "seed": self.seed, "splits": list(self.splits),
                "max_queries_per_type": self.max_queries_per_type, **self.datasets[name]}


_EXAMPLE_LIST = '["..."]'


def show(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 1] + "…"


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string, for sections written into ``datasets.toml`` (``workbench data add``): JSON's
    escapes (``\\"``, ``\\\\``, ``\\n``, ``\\uXXXX``) are TOML's too (TOML 1.0, "Basic strings")."""
    return json.dumps(value, ensure_ascii=False)


def is_int(value: object) -> bool:
    """Whether ``value`` is an ``int`` (a ``bool`` is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def str_list(path: Path, key: str, value: object, *, known: tuple[str, ...] | None = None,
             nonempty: bool = False, example: str = "", suggest: tuple[str, ...] | None = None) -> list[str]:
    """Check that a definition value is a list of non-empty strings (from ``known``, no repeats); return it.

    ``suggest`` names the choices in messages where the caller checks membership itself.

    Raises:
        ConfigError: a single string, not a list of non-empty strings, empty when
            ``nonempty``, a value outside ``known``, or a value listed twice; the message
            names ``path`` and ``key``.
    """
    choices = f"; choose from {', '.join(known or suggest or ())}" if known or suggest else ""
    if isinstance(value, str) and value.strip():
        raise ConfigError(f"{path}: {key} must be a list of strings, not a single string: write "
                          f"{key.rsplit('.', 1)[-1]} = {json.dumps([value], ensure_ascii=False)}{choices}")
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        raise ConfigError(f"{path}: {key} must be a list of non-empty strings like {example or _EXAMPLE_LIST}, "
                          f"got {show(value)}{choices}")
    if nonempty and not value:
        options = known or suggest
        raise ConfigError(f"{path}: {key} is empty; list at least one " + (f"of {', '.join(options)}" if options else "value"))
    if known is not None:
        bad = [x for x in value if x not in known]
        if bad:
            raise ConfigError(f"{path}: {key} holds unknown value(s) {bad}{choices}")
    twice = sorted({x for x in value if value.count(x) > 1})
    if twice:
        raise ConfigError(f"{path}: {key} lists {twice} more than once; list each once")
    return value


#: What ``negatives`` may list: ``references`` (out-of-range references:
#: :func:`workbench.data.querysets.builders.negative_references`; ``negatives = true`` means these alone) and
#: ``absent_lemmas`` (DPD lemmas the corpus does not hold: :func:`workbench.data.querysets.builders.absent_lemmas`)
#: and ``gita_questions`` (the gita's verses asked of another corpus:
#: :func:`workbench.data.querysets.builders.gita_questions`).
NEGATIVE_KINDS = ("references", "absent_lemmas", "gita_questions")


def negative_kinds(defn: Mapping[str, Any]) -> tuple[str, ...]:
    """The kinds of unanswerable queries a dataset section draws (:data:`NEGATIVE_KINDS`): ``negatives = true`` →
    references; a list → those; absent or false → none."""
    neg = defn.get("negatives", False)
    if neg is True:
        return ("references",)
    return tuple(neg) if isinstance(neg, list) else ()
