"""Reading and writing the interchange files: queries TSV, TREC qrels, documents JSONL.

All writers are deterministic (sorted rows, ``\\n`` line ends, UTF-8, no BOM), so two
builds from the same inputs give byte-identical files, and durable: each file is written
to a temporary file beside it, ``fsync``-ed and renamed into place
(:mod:`workbench._infra.durable`), so a crash or a full disk never leaves half a file, and a
write that fails raises :class:`~workbench.errors.StorageError` naming the path and the
fix. All readers raise :class:`~workbench.errors.DataError` naming the file and line on
malformed input.

* Queries: TSV with the header ``query_id  text  query_type  language  split  group``
  (tabs and newlines inside a text are replaced by spaces), written by the :mod:`csv`
  module (``QUOTE_MINIMAL``, ``\n`` line ends): a field holding ``"`` is wrapped in ``"``
  with its inner quotes doubled, so ``pandas.read_csv(path, sep="\t")`` and
  ``csv.reader(f, delimiter="\t")`` read every query back whole. :func:`read_queries`
  reads these and the older unquoted files (see there).
* Qrels: TREC format ``query_id 0 doc_id relevance`` (whitespace-separated, graded
  relevance as an integer). For binary measures a document counts as relevant when
  ``relevance >= 1`` (:data:`BINARY_THRESHOLD`).
* Documents: one JSON object per line (:meth:`Document.to_json`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from workbench._infra import durable
from workbench.errors import DataError
from workbench.types import QUERY_TYPES, SPLITS, Document, Qrel, Query

#: Graded relevance at or above this counts as relevant for binary measures (recall, MRR, P@k).
BINARY_THRESHOLD = 1

QUERY_COLUMNS = ("query_id", "text", "query_type", "language", "split", "group", "filter")


def _one_line(s: str) -> str:
    return " ".join(s.replace("\t", " ").splitlines()).strip()


def _quoted(v: str) -> str:
    """``v`` as ``csv.QUOTE_MINIMAL`` writes one tab-separated field (for a one-line ``v``)."""
    return '"' + v.replace('"', '""') + '"' if any(c in v for c in '"\t\r\n') else v


def _unquote(field: str) -> str:
    """A field of a queries TSV: unquoted when it is exactly how the writer quotes a value, else as it is.

    Files from before quoting hold raw texts (``Sanjaya replied: "The Prince…``); a raw
    field is read as it is unless it happens to be a canonical quoted value (starts and
    ends with ``"`` and every inner ``"`` is doubled), which texts of the older files are not.
    """
    if len(field) >= 2 and field[0] == field[-1] == '"':
        v = field[1:-1].replace('""', '"')
        if _quoted(v) == field:
            return v
    return field


def write_queries(path: Path, queries: Iterable[Query]) -> None:
    """Write queries as TSV sorted by query_id (atomically, see the module docstring). The ``filter`` column
    (canonical JSON, :mod:`workbench.io.facets`) is written only when some query has a filter, so a query set
    without filters keeps its bytes (and its hash, which keys every cached lane run).

    Raises:
        ValueError: a duplicate query_id or an empty text (nothing is written).
        StorageError: the file cannot be written (a full disk, a read-only folder).
    """
    rows = sorted(queries, key=lambda q: q.query_id)
    seen: set[str] = set()
    buf = io.StringIO()
    out = csv.writer(buf, delimiter="\t", quotechar='"', quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    columns = QUERY_COLUMNS if any(q.filter for q in rows) else QUERY_COLUMNS[:6]
    out.writerow(columns)
    for q in rows:
        if q.query_id in seen:
            raise ValueError(f"duplicate query_id {q.query_id!r}")
        seen.add(q.query_id)
        text = _one_line(q.text)
        if not text:
            raise ValueError(f"query {q.query_id!r} has an empty text")
        out.writerow((q.query_id, text, q.query_type, q.language, q.split, q.group, q.filter)[:len(columns)])
    durable.atomic_write_text(path, buf.getvalue())


def read_queries(path: Path, facet_values: Callable[[], Mapping[str, set]] | None = None,
                 dataset: str = "") -> list[Query]:
    """Read a queries TSV written by :func:`write_queries` (the ``group`` and ``filter`` columns are optional).

    A ``filter`` is parsed (:func:`workbench.io.facets.parse_filter`) and stored canonical; with
    ``facet_values`` (a function returning :func:`workbench.io.facets.facet_values` of the dataset's documents,
    called once, at the first filter) it is also checked against the documents
    (:func:`~workbench.io.facets.check_filter`).

    Reads both the quoted files (``csv`` ``QUOTE_MINIMAL``: a field with ``"`` is wrapped in
    quotes, inner quotes doubled) and the older unquoted ones: a field is unquoted only when
    it is exactly the writer's quoting of a value (:func:`_unquote`).

    Raises:
        DataError: missing file, wrong header, wrong column count, unknown query_type
            or split, duplicate query_id, a filter that does not parse or names a facet or value the documents
            lack (names the file and line).
    """
    from workbench.io.facets import check_filter, parse_filter

    values: Mapping[str, set] | None = None

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise DataError(f"queries file {path} is missing; run `workbench data build`") from exc
    if not lines:
        raise DataError(f"queries file {path} is empty; rebuild it with `workbench data build`")
    header = tuple(lines[0].split("\t"))
    if header[:5] != QUERY_COLUMNS[:5]:
        raise DataError(f"{path}:1: header must start with {' '.join(QUERY_COLUMNS[:5])} (tab-separated), got {header}")
    out, seen = [], set()
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cols = [_unquote(c) for c in line.split("\t")]
        if len(cols) != len(header):
            raise DataError(f"{path}:{n}: expected {len(header)} tab-separated columns, got {len(cols)}")
        qid, text, qtype, lang, split = cols[:5]
        group = cols[5] if len(cols) > 5 else ""
        flt = ""
        if len(cols) > 6 and cols[6].strip():
            try:
                parsed = parse_filter(cols[6])
            except ValueError as exc:
                raise DataError(f"{path}:{n}: query {qid}: {exc}") from None
            if parsed and facet_values is not None and values is None:
                values = facet_values()
            problem = check_filter(parsed, values, dataset or "the dataset") if parsed and values is not None else ""
            if problem:
                raise DataError(f"{path}:{n}: query {qid}: filter {cols[6][:120]}: {problem}")
            flt = parsed.text if parsed else ""
        if qtype not in QUERY_TYPES:
            raise DataError(f"{path}:{n}: unknown query_type {qtype!r}; expected one of {', '.join(QUERY_TYPES)}")
        if split not in SPLITS:
            raise DataError(f"{path}:{n}: unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        if qid in seen:
            raise DataError(f"{path}:{n}: duplicate query_id {qid!r}")
        seen.add(qid)
        out.append(Query(qid, text, qtype, lang, split, group, flt))
    return out


def write_qrels(path: Path, qrels: Iterable[Qrel]) -> None:
    """Write TREC qrels (``query_id 0 doc_id relevance``), sorted by query_id then doc_id (atomically).

    Raises:
        ValueError: a duplicate (query_id, doc_id) pair, whitespace inside an id, or a
            negative relevance (nothing is written).
        StorageError: the file cannot be written (a full disk, a read-only folder).
    """
    rows = sorted(qrels, key=lambda r: (r.query_id, r.doc_id))
    lines, prev = [], None
    for r in rows:
        if (r.query_id, r.doc_id) == prev:
            raise ValueError(f"duplicate judgment for query {r.query_id!r}, doc {r.doc_id!r}")
        prev = (r.query_id, r.doc_id)
        if any(c.isspace() for c in r.query_id + r.doc_id):
            raise ValueError(f"ids may not contain whitespace: {r.query_id!r} / {r.doc_id!r}")
        if r.relevance < 0:
            raise ValueError(f"negative relevance {r.relevance} for {r.query_id!r}/{r.doc_id!r}")
        lines.append(f"{r.query_id} 0 {r.doc_id} {r.relevance}")
    durable.atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def read_qrels(path: Path) -> list[Qrel]:
    """Read TREC qrels (4 whitespace-separated columns; the second is ignored).

    Raises:
        DataError: missing or empty file, wrong column count, non-integer relevance,
            duplicate (query_id, doc_id) (names the file and line).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise DataError(f"qrels file {path} is missing; run `workbench data build`") from exc
    out, seen = [], set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 4:
            raise DataError(f"{path}:{n}: a TREC qrels line has 4 columns (query_id 0 doc_id relevance), got {len(cols)}")
        try:
            rel = int(cols[3])
        except ValueError:
            raise DataError(f"{path}:{n}: relevance {cols[3]!r} is not an integer") from None
        key = (cols[0], cols[2])
        if key in seen:
            raise DataError(f"{path}:{n}: duplicate judgment for query {cols[0]!r}, doc {cols[2]!r}")
        seen.add(key)
        out.append(Qrel(cols[0], cols[2], rel))
    if not out:
        raise DataError(f"qrels file {path} holds no judgments")
    return out


def write_documents(path: Path, docs: Iterable[Document]) -> int:
    """Write documents as JSON lines in the given order (atomically); returns the count.

    Raises:
        ValueError: a duplicate doc_id (nothing is written).
        StorageError: the file cannot be written (a full disk, a read-only folder).
    """
    seen: set[str] = set()
    n = 0
    with durable.atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as fh:
        for d in docs:
            if d.doc_id in seen:
                raise ValueError(f"duplicate doc_id {d.doc_id!r}")
            seen.add(d.doc_id)
            fh.write(json.dumps(d.to_json(), ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    return n


def read_documents(path: Path) -> list[Document]:
    """Read documents written by :func:`write_documents`.

    Raises:
        DataError: missing file or a malformed line (names the file and line).
    """
    out = []
    try:
        fh = path.open(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(f"documents file {path} is missing; run `workbench data build`") from exc
    with fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append(Document.from_json(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise DataError(f"{path}:{n}: not a document record ({exc}); rebuild with `workbench data build`") from exc
    return out
