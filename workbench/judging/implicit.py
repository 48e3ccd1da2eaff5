"""The ``implicit`` qrels layer's file: grades derived from readers' clicks (``workbench logs judge``), one file per
dataset in the home, with the provenance that made them.

``<home>/qrels/<dataset>/implicit.json``::

    {"dataset": ..., "provenance": {"log_set", "model", "min_impressions", "thresholds", "written_at", ...},
     "qrels": [[query_id, doc_id, grade], ...], "scores": [[query_id, doc_id, score, impressions, clicks], ...]}

Written whole (a temporary file renamed into place); the layer (:func:`workbench.judging.layers.load_layer`) reads
it. A pair's grade is on the scholars' 0-2 scale.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError
from workbench.types import Qrel


def path_of(home: Path, dataset: str) -> Path:
    """The implicit layer's file of ``dataset`` in ``home``."""
    return Path(home) / "qrels" / dataset / "implicit.json"


def write(home: Path, dataset: str, grades: Mapping[tuple[str, str], int],
          scores: Iterable[tuple[str, str, float, int, int]], provenance: Mapping[str, Any]) -> Path:
    """Write the layer's file (module docstring); returns its path.

    Raises:
        StorageError: the home cannot be written (the previous file stays).
    """
    from workbench._infra.durable import atomic_write_json

    body = {"dataset": dataset, "provenance": dict(provenance),
            "qrels": [[q, d, int(g)] for (q, d), g in sorted(grades.items())],
            "scores": [[q, d, float(s), int(n), int(c)] for q, d, s, n, c in sorted(scores)]}
    path = path_of(home, dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_json(path, body)


def read(home: Path, dataset: str) -> tuple[list[Qrel], dict[str, Any]]:
    """The layer's qrels and provenance.

    Raises:
        ConfigError: no file (names the command that makes one), or a file that is not the layer's.
    """
    path = path_of(home, dataset)
    if not path.is_file():
        raise ConfigError(f"dataset {dataset} has no implicit qrels in {path.parent}; derive them from a log set: "
                          f"workbench logs judge LOG_SET -d {dataset}")
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        qrels = [Qrel(str(q), str(d), int(g)) for q, d, g in body["qrels"]]
        provenance = dict(body.get("provenance") or {})
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is not an implicit qrels file ({type(exc).__name__}: {exc}); derive it again: "
                          f"workbench logs judge LOG_SET -d {dataset}") from None
    return qrels, provenance
