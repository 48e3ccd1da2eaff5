"""``traffic_queries`` of a dataset section: query files drawn from readers' traffic (``workbench logs sample``),
appended to the dataset's queries without judgments, to be pooled and judged like any other.

A section names one file or a list (paths relative to ``datasets.toml``). Each file is a queries file as the
``files`` source reads them (TSV/CSV with a header, JSON lines; :func:`workbench.data.loaders.files.query_records`):
``query_id`` and ``text``, optional ``query_type`` (one of :data:`workbench.types.QUERY_TYPES`, else ``other``),
``language``, ``split`` and ``group``. A query without a split is split by hashing its group, per type, as the
built-in sets are (:func:`workbench.data.querysets.split.assign_splits`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError, DataError
from workbench.types import QUERY_TYPES, SPLITS, Query

#: The key of a dataset section.
KEY = "traffic_queries"


def paths(defn: dict[str, Any], base: Path) -> list[Path]:
    """The files a section's ``traffic_queries`` names, resolved against ``base`` (the definitions' folder)."""
    value = defn.get(KEY)
    if value is None:
        return []
    names = [value] if isinstance(value, str) else list(value)
    return [p if p.is_absolute() else (base / p).resolve() for p in map(Path, names)]


def check(path: Path, where: str, value: object) -> None:
    """A section's ``traffic_queries``: a non-empty path or a non-empty list of them.

    Raises:
        ConfigError: anything else (names the file, the key and an example).
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v.strip() for v in items):
        raise ConfigError(f"{path}: {where}.{KEY} must be a queries file or a list of them, e.g. "
                          f'{KEY} = "traffic/week49.tsv" (workbench logs sample writes one); got {value!r}')


def read(files: Iterable[Path], taken: set[str], seed: int, ratios: tuple[float, float, float]) -> list[Query]:
    """The queries of ``files``, in file order.

    Raises:
        DataError: a missing file; an id that is empty, repeated, or already a query of the dataset (``taken``);
            an empty text; a split that is not train, dev or test (names the file, the line and the fix).
    """
    from workbench.data.loaders.files import query_records
    from workbench.data.querysets.split import assign_splits
    from workbench.text.normalize import nfc

    rows: list[dict[str, str]] = []
    seen: dict[str, str] = {}
    for f in files:
        if not f.is_file():
            raise DataError(f"{f}: no such file ({KEY}); write it with workbench logs sample, or fix the path")
        for n, rec in query_records(f):
            where = f"{f}:{n}"
            qid = str(rec["query_id"]).strip()
            if not qid or any(c.isspace() for c in qid):
                raise DataError(f"{where}: query id {qid!r} is empty or holds whitespace; give each query an id")
            if qid in taken:
                raise DataError(f"{where}: query id {qid!r} is already a query of the dataset; traffic queries need "
                                "ids of their own (logs sample writes t-...)")
            if qid in seen:
                raise DataError(f"{where}: query id {qid!r} again (first at {seen[qid]}); give each query its own id")
            text = " ".join(nfc(str(rec["text"] or "")).split())
            if not text:
                raise DataError(f"{where}: query {qid} has an empty text; write it or leave the line out")
            qtype = str(rec.get("query_type", "")).strip()
            split = str(rec.get("split", "")).strip().lower()
            if split and split not in SPLITS:
                raise DataError(f"{where}: query {qid}: split {split!r} is not one of {', '.join(SPLITS)}; leave it "
                                "empty to have it hashed")
            seen[qid] = where
            rows.append({"query_id": qid, "text": text, "query_type": qtype if qtype in QUERY_TYPES else "other",
                         "language": str(rec.get("language", "")).strip() or "und", "split": split,
                         "group": str(rec.get("group", "")).strip() or qid})
    hashed: dict[str, list[str]] = {}
    for r in rows:
        if not r["split"]:
            hashed.setdefault(r["query_type"], []).append(r["group"])
    split_of = assign_splits(hashed, seed, ratios) if hashed else {}
    return [Query(r["query_id"], r["text"], r["query_type"], r["language"], r["split"] or split_of[r["group"]],
                  r["group"]) for r in rows]
