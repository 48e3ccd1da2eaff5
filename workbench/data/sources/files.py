"""``source = "files"``: a team's own corpus, queries and judgments, from files, with no code.

A section names the files and which of their fields are what (paths are relative to the ``datasets.toml`` that
holds the section)::

    [dataset.scifact]                   # a BEIR folder, read as it is
    source = "files"
    documents = "beir/scifact"          # corpus.jsonl, queries.jsonl, qrels/<split>.tsv
    language = "en"

    [dataset.kb]                        # any files
    source = "files"
    documents = "kb/docs.parquet"       # JSON lines, CSV, TSV (.gz allowed) or Parquet
    queries = "kb/queries.tsv"          # TSV/CSV with a header, JSON lines, TREC topics
    qrels = ["kb/qrels.txt"]            # TREC qrels or BEIR qrels TSVs (graded)
    id_field = "id"
    text_fields = { body = "en", body_ru = "ru" }   # each text field with its language
    title_field = "title"
    metadata_fields = ["author", "tags", "collection"]
    work_field = "track_id"             # the parent a document belongs to (the ``work`` facet)
    span = { parent = "track_id", start = "start_ms", end = "end_ms" }   # time-span documents (optional)

What each key means is in :data:`KEYS`; the section is parsed once into a :class:`FilesSpec`. The build reads the
documents twice, as streams: the first pass checks every record and keeps only the ids (the judgments are checked
against them), the second is written to ``documents.jsonl`` record by record, so a corpus of a million documents
costs the memory of its ids (:mod:`workbench.data.loaders.files`). A query without a ``split`` takes the split of
the BEIR qrels file that judges it, else the split its ``group`` (default: its id) hashes to
(:func:`workbench.data.querysets.split.assign_splits`, as for the built-in sets).

**Time-span documents** (a lecture transcript cut into passages): ``span`` names the fields of a document's parent
(a track id, as text), start and end (whole milliseconds from the start of the parent, ``0 <= start <= end``). They
are kept in the document's ``metadata`` under :data:`SPAN_PARENT`, :data:`SPAN_START` and :data:`SPAN_END`, so they
survive the build and :func:`workbench.eval.spans.spans_of` reads them from the built dataset; a bad value refuses
the build with one line naming the file, the line and the fix.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.data.definitions import Definitions, is_int, show, str_list
from workbench.data.sources.base import Built, Source, Step
from workbench.errors import ConfigError, DataError
from workbench.types import GRANULARITIES, QUERY_TYPES, SPLITS, UNANSWERABLE_QUERY_TYPES, Document, Qrel, Query, Text

#: The keys of a files section, and what they mean.
KEYS = {
    "documents": "the documents file (JSON lines, CSV or TSV, gzipped or not, or Parquet) or a BEIR folder",
    "queries": "the queries file (TSV/CSV with a header, JSON lines, TREC topics); a BEIR folder has its own",
    "qrels": "the judgments: a TREC qrels file or BEIR qrels TSV, or a list of them; a BEIR folder has its own",
    "format": "the documents' format when the name does not say it: beir, jsonl, csv, tsv or parquet",
    "id_field": "the documents' id field (default _id in a BEIR folder, else id)",
    "text_fields": "the text fields, each with its language: { body = \"en\", body_ru = \"ru\" } "
                   "(or a list of fields in `language`; default: text)",
    "title_field": "the title field (optional; a BEIR folder's title)",
    "metadata_fields": "fields kept as metadata (collection, book, chapter are filter facets; from CSV or TSV a "
                       "whole number without leading zeros is read as a number)",
    "work_field": "the field naming the work or parent a document belongs to (the work facet; default: its id)",
    "address_field": "the field a reader cites a document by (default: its id)",
    "language": "the language of the texts and queries that do not say theirs (ISO 639-1; default und)",
    "granularity": f"what a document is: one of {', '.join(GRANULARITIES)} (default passage)",
    "span": "a time-span document's fields: { parent = \"track_id\", start = \"start_ms\", end = \"end_ms\" } "
            "(its parent's id, its start and end in whole milliseconds; optional)",
    "max_unknown_qrels": "the largest share of judgments that may name an unknown query or document: they are "
                         "dropped and counted; more refuses the build (default 0.01)",
}
DEFAULT_MAX_UNKNOWN = 0.01
FORMATS = ("beir", "jsonl", "csv", "tsv", "parquet")
#: A whole number as CSV writes it (no leading zeros: ``007`` stays text, an id).
_WHOLE = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
#: Documents read between two progress lines.
PROGRESS_EVERY = 100_000
#: The ``metadata`` keys of a time-span document (``span`` in the section): its parent (text), its start and end
#: (int, milliseconds, ``0 <= start <= end``).
SPAN_PARENT, SPAN_START, SPAN_END = "span_parent", "span_start_ms", "span_end_ms"
#: The latest time a span may hold, in ms: 2**53 - 1, the largest integer a float (a JSON reader's number) keeps exactly.
MAX_SPAN_MS = 2**53 - 1
_SPAN_EXAMPLE = '{ parent = "track_id", start = "start_ms", end = "end_ms" }'


@dataclass(frozen=True)
class FilesSpec:
    """A ``source = "files"`` section, parsed once (:meth:`of`): resolved paths and field names.

    Attributes:
        documents: the documents file (for a BEIR folder: its ``corpus.jsonl``).
        fmt: its record format (``jsonl``, ``csv``, ``tsv``, ``parquet``).
        queries: the queries file.
        qrels: the judgment files, in the order given.
        beir: whether the section names a BEIR folder.
        id_field, title_field, work_field, address_field: field names (None: not used).
        text_fields: ``(field, language)`` pairs, in order.
        metadata_fields: fields kept in a document's ``metadata``.
        language: the default language.
        granularity: every document's granularity.
        max_unknown_qrels: the share of judgments naming unknown ids that is dropped with a note (above: refused).
        query_types: the query types kept (None: all).
        span: the ``(parent, start, end)`` fields of a time-span document (None: documents have no span).
    """

    documents: Path
    fmt: str
    queries: Path
    qrels: tuple[Path, ...]
    beir: bool
    id_field: str
    text_fields: tuple[tuple[str, str], ...]
    title_field: str | None
    metadata_fields: tuple[str, ...]
    work_field: str | None
    address_field: str | None
    language: str
    granularity: str
    max_unknown_qrels: float
    query_types: tuple[str, ...] | None
    span: tuple[str, str, str] | None = None

    @classmethod
    def of(cls, defn: dict[str, Any], base: Path) -> FilesSpec:
        """Parse a checked section (:func:`check`); relative paths resolve against ``base``.

        Raises:
            DataError: a BEIR folder lacks a file of its layout, or a named file is missing.
        """
        from workbench.data.loaders.files import beir_files, format_of

        docs = _path(base, defn["documents"])
        fmt = defn.get("format") or ("beir" if docs.is_dir() else format_of(docs))
        language = defn.get("language", "und")
        if fmt == "beir":
            corpus, queries, qrels = beir_files(docs)
            docs, fmt = corpus, "jsonl"
            queries = _path(base, defn["queries"]) if "queries" in defn else queries
            qrels = [_path(base, q) for q in _as_list(defn["qrels"])] if "qrels" in defn else qrels
            beir = True
        else:
            if fmt is None:
                raise DataError(f"{docs}: the name does not say the format; set format = \"jsonl\" (or csv, tsv, "
                                "parquet) in the section")
            if docs.is_dir():
                raise DataError(f"{docs} is a folder; name the documents file, or set format = \"beir\" for a BEIR "
                                "folder")
            queries, qrels = _path(base, defn["queries"]), [_path(base, q) for q in _as_list(defn["qrels"])]
            beir = False
        for p in (docs, queries, *qrels):
            if p.is_dir():
                raise DataError(f"{p} is a folder; name the file in it (queries, qrels: one file each, or a list)")
            if not p.is_file():
                raise DataError(f"{p}: no such file; fix the path in the section (relative paths start at {base})")
        texts = defn.get("text_fields", ["text"])
        pairs = tuple(texts.items()) if isinstance(texts, dict) else tuple((t, language) for t in texts)
        title = defn.get("title_field", "title" if beir else None)
        types = defn.get("query_types")
        span = defn.get("span")
        return cls(documents=docs, fmt=fmt, queries=queries, qrels=tuple(qrels), beir=beir,
                   id_field=defn.get("id_field", "_id" if beir else "id"), text_fields=pairs, title_field=title,
                   metadata_fields=tuple(defn.get("metadata_fields", ())), work_field=defn.get("work_field"),
                   address_field=defn.get("address_field"), language=language,
                   granularity=defn.get("granularity", "passage"),
                   max_unknown_qrels=float(defn.get("max_unknown_qrels", DEFAULT_MAX_UNKNOWN)),
                   query_types=tuple(types) if types else None,
                   span=(span["parent"], span["start"], span["end"]) if span else None)

    @property
    def columns(self) -> list[str]:
        """The document fields read (for Parquet's column selection), in order, once each."""
        names = [self.id_field, *(f for f, _ in self.text_fields), self.title_field, *self.metadata_fields,
                 self.work_field, self.address_field, *(self.span or ())]
        return list(dict.fromkeys(n for n in names if n))

    def inputs(self) -> list[Path]:
        """Every file the build reads (sorted), for the manifest's hashes."""
        return sorted({self.documents, self.queries, *self.qrels})


def _as_list(v: Any) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def _path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return (p if p.is_absolute() else base / p).resolve()


# ---------------------------------------------------------------- the section's checks

def _check(path: Path, where: str, d: dict[str, Any], datasets: dict[str, Any]) -> None:
    """Types and values of a files section's keys (files are looked for at build time)."""
    for key in ("filters", "negatives"):
        if key in d:
            raise ConfigError(f"{path}: {where}.{key}: a files dataset takes its queries as given; put filtered or "
                              "unanswerable queries in the queries file (a filter column, query_type = negative)")

    def text(key: str) -> None:
        if key in d and not (isinstance(d[key], str) and d[key].strip()):
            raise ConfigError(f"{path}: {where}.{key} must be a non-empty string ({KEYS[key]}), got {show(d[key])}")

    for key in ("documents", "queries", "id_field", "title_field", "work_field", "address_field", "language",
                "format", "granularity"):
        text(key)
    if "format" in d and d["format"] not in FORMATS:
        raise ConfigError(f"{path}: {where}.format must be one of {', '.join(FORMATS)}, got {show(d['format'])}")
    if "granularity" in d and d["granularity"] not in GRANULARITIES:
        raise ConfigError(f"{path}: {where}.granularity must be one of {', '.join(GRANULARITIES)}, "
                          f"got {show(d['granularity'])}")
    docs = _path(path.parent, d["documents"]) if isinstance(d.get("documents"), str) else None
    beir = d.get("format") == "beir" or ("format" not in d and docs is not None and docs.is_dir())
    if not beir and docs is not None and docs.exists():  # a missing path is said by the build, naming it
        absent = [k for k in ("queries", "qrels") if k not in d]
        if absent:
            raise ConfigError(f"{path}: {where} lacks {' and '.join(absent)}: name the file(s) "
                              f"(only a BEIR folder brings its own)")
    if "qrels" in d and not isinstance(d["qrels"], str):
        str_list(path, f"{where}.qrels", d["qrels"], nonempty=True, example='["qrels/test.tsv"]')
    elif "qrels" in d:
        text("qrels")
    texts = d.get("text_fields")
    if texts is not None:
        if isinstance(texts, dict):
            if not texts or not all(isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip()
                                    for k, v in texts.items()):
                raise ConfigError(f"{path}: {where}.text_fields must map each text field to its language, like "
                                  f'{{ body = "en", body_ru = "ru" }}, got {show(texts)}')
        else:
            str_list(path, f"{where}.text_fields", texts, nonempty=True, example='["text"]')
    if "metadata_fields" in d:
        str_list(path, f"{where}.metadata_fields", d["metadata_fields"], example='["author", "tags"]')
    m = d.get("max_unknown_qrels")
    if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m)
                          or not 0 <= m <= 1):
        raise ConfigError(f"{path}: {where}.max_unknown_qrels must be a share from 0 to 1 (0.01: 1 %), got {show(m)}")
    span = d.get("span")
    if span is not None and not (isinstance(span, dict) and set(span) == {"parent", "start", "end"}
                                 and all(isinstance(v, str) and v.strip() for v in span.values())):
        raise ConfigError(f"{path}: {where}.span must name the three fields of a document's span, like "
                          f"{_SPAN_EXAMPLE}, got {show(span)}")
    if "query_types" in d and is_int(d["query_types"]):
        raise ConfigError(f"{path}: {where}.query_types must be a list of query types")


# ---------------------------------------------------------------- records → documents, queries, judgments

def _value(rec: dict[str, Any], field: str) -> Any:
    """``rec[field]``, else the field inside the record's ``metadata`` object (BEIR); KeyError when neither."""
    if field in rec:
        return rec[field]
    md = rec.get("metadata")
    if isinstance(md, dict) and field in md:
        return md[field]
    raise KeyError(field)


def _json_safe(v: Any) -> Any:
    """A metadata value as JSON can hold it: dates as ISO text, non-finite floats as None, the rest as text."""
    import datetime
    import decimal

    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, decimal.Decimal):
        return _json_safe(float(v))
    if isinstance(v, (datetime.date, datetime.datetime, datetime.time)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    return str(v)


def _text_problem(text: str) -> str:
    """What makes ``text`` unstorable (a NUL, which PostgreSQL's text cannot hold; a lone UTF-16 surrogate, which is
    no character: JSON's ``\\ud800`` escape), or ``""``."""
    if "\x00" in text:
        return "a NUL character (\\u0000), which PostgreSQL cannot store: remove it"
    bad = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        return (f"a lone UTF-16 surrogate (\\u{ord(bad):04x}), which is no character: write the character itself or "
                "its surrogate pair")
    return ""


def _an_id(value: Any, what: str, where: str) -> str:
    """An id as text, refusing an empty one and whitespace (TREC runs and qrels split on it)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = "" if value is None else str(value).strip()
    if not text:
        raise DataError(f"{where}: an empty {what}; give every record an id")
    problem = _text_problem(text)
    if problem:
        raise DataError(f"{where}: the {what} holds {problem}")
    if any(c.isspace() for c in text):
        raise DataError(f"{where}: {what} {text[:60]!r} holds whitespace, which TREC run and qrels files cannot carry; "
                        "replace it (with _ for instance) in the file and in the judgments")
    return text


def to_document(rec: dict[str, Any], where: str, spec: FilesSpec) -> Document:
    """One document from one record (texts in NFC, each with its language and ISO 15924 script).

    Raises:
        DataError: the record lacks the id, a text field, the work or address field; the id is empty or holds
            whitespace; a text is not text; every text is empty or whitespace (names ``where`` and the fix).
    """
    from workbench.text.normalize import nfc
    from workbench.text.scripts import iso15924

    def need(field: str, key: str) -> Any:
        try:
            return _value(rec, field)
        except KeyError:
            fix = '["..."]' if key == "text_fields" else '"..."'
            raise DataError(f"{where}: no field {field!r} (the record has {sorted(rec)[:12]}); name the right one "
                            f"with {key} = {fix} in the section") from None

    doc_id = _an_id(need(spec.id_field, "id_field"), "document id", where)
    texts = []
    fields = [(f, lang, "text_fields") for f, lang in spec.text_fields]
    if spec.title_field:
        fields.insert(0, (spec.title_field, spec.language, "title_field"))
    for field, lang, key in fields:
        if key == "title_field":
            try:
                v = _value(rec, field)
            except KeyError:
                continue  # a title is optional
        else:
            v = need(field, key)
        if v is None:
            continue
        if not isinstance(v, str):
            if isinstance(v, (list, dict)):
                raise DataError(f"{where}: field {field!r} of document {doc_id} is a {type(v).__name__}, not text; "
                                "name a text field in text_fields")
            v = str(v)
        problem = _text_problem(v)
        if problem:
            raise DataError(f"{where}: field {field!r} of document {doc_id} holds {problem}")
        if v.strip():
            v = nfc(v)
            texts.append(Text("title" if key == "title_field" else field, lang, iso15924(v), v))
    if not any(t.field != "title" for t in texts):
        names = ", ".join(f for f, _ in spec.text_fields)
        raise DataError(f"{where}: document {doc_id} has no text ({names} empty or whitespace); fill it in or leave "
                        "the document out of the file")
    metadata = {}
    for field in spec.metadata_fields:
        try:
            v = _value(rec, field)
        except KeyError:
            continue
        if v not in (None, ""):
            if spec.fmt in ("csv", "tsv") and isinstance(v, str) and _WHOLE.fullmatch(v.strip()):
                v = int(v)  # CSV has no types: a whole number reads as one, as JSON and Parquet give it (chapter 3)
            metadata[field] = _json_safe(v)
    if spec.span:
        metadata.update(_span(rec, where, doc_id, spec.span))
    work = _an_id(need(spec.work_field, "work_field"), "work", where) if spec.work_field else doc_id
    address = str(need(spec.address_field, "address_field")).strip() if spec.address_field else ""
    return Document(doc_id, address or doc_id, work, spec.granularity, tuple(texts), metadata=metadata)


def _span(rec: dict[str, Any], where: str, doc_id: str, fields: tuple[str, str, str]) -> dict[str, Any]:
    """A document's span as metadata (:data:`SPAN_PARENT`, :data:`SPAN_START`, :data:`SPAN_END`).

    Raises:
        DataError: a span field is missing, the parent is empty, a time is not a whole number of milliseconds or
            is negative, or the start is after the end (names ``where``, the document and the fix).
    """
    values = []
    for field in fields:
        try:
            values.append(_value(rec, field))
        except KeyError:
            raise DataError(f"{where}: document {doc_id} has no field {field!r} (the record has {sorted(rec)[:12]}); "
                            f"every document of a span dataset needs its parent, start and end: add it, or name the "
                            f"right field in span = {_SPAN_EXAMPLE}") from None
    parent, start, end = values
    if isinstance(parent, float) and parent.is_integer():
        parent = int(parent)
    parent = "" if parent is None else str(parent).strip()
    if not parent or _text_problem(parent):
        raise DataError(f"{where}: document {doc_id} has an empty or unreadable parent {fields[0]!r} "
                        f"({show(values[0])}); give every document the id of the track it belongs to")
    times = []
    for field, v in zip(fields[1:], (start, end), strict=True):
        ms = v
        if isinstance(v, float) and v.is_integer():
            ms = int(v)
        elif isinstance(v, str) and _WHOLE.fullmatch(v.strip()):
            ms = int(v)
        if isinstance(ms, bool) or not isinstance(ms, int):
            raise DataError(f"{where}: document {doc_id}: {field} = {show(v)} is not a whole number of milliseconds; "
                            "write an integer (1.5 s is 1500)")
        if ms < 0:
            raise DataError(f"{where}: document {doc_id}: {field} = {ms} is negative; times are milliseconds from "
                            "the start of the track (0 or more)")
        if ms > MAX_SPAN_MS or isinstance(v, float) and v > MAX_SPAN_MS:
            raise DataError(f"{where}: document {doc_id}: {field} = {show(v)} is past {MAX_SPAN_MS} ms (285,000 "
                            "years); times are milliseconds from the start of the track: check the unit and the field")
        times.append(ms)
    if times[0] > times[1]:
        raise DataError(f"{where}: document {doc_id}: {fields[1]} {times[0]} is after {fields[2]} {times[1]}; a span "
                        "ends at or after its start: fix the times (or swap the two fields in span = {...})")
    return {SPAN_PARENT: parent, SPAN_START: times[0], SPAN_END: times[1]}


def documents(spec: FilesSpec, step: Step | None = None) -> Iterator[Document]:
    """The documents of the file, one record at a time (a progress line every :data:`PROGRESS_EVERY`).

    Raises:
        DataError: as :func:`to_document` and the file's reader.
    """
    from workbench.data.loaders.files import place, records

    t0 = time.perf_counter()
    for i, (n, rec) in enumerate(records(spec.documents, spec.fmt, spec.columns), start=1):
        yield to_document(rec, place(spec.documents, n, spec.fmt), spec)
        if step is not None and i % PROGRESS_EVERY == 0:
            rate = i / max(time.perf_counter() - t0, 1e-9)
            step(f"documents: {i:,} read ({rate:,.0f}/s)")


def document_ids(spec: FilesSpec, step: Step, facets: frozenset[str] = frozenset()) -> tuple[set[str], dict[str, set]]:
    """Every document id, and every value the documents take for each facet in ``facets`` (those the queries'
    filters name: :mod:`workbench.io.facets`): the first pass, each record checked, only these kept.

    Raises:
        DataError: a bad record (:func:`to_document`), or an id given twice (names both lines).
    """
    from workbench.data.loaders.files import place, records
    from workbench.io.facets import facets as facets_of

    ids: set[str] = set()
    values: dict[str, set] = {f: set() for f in facets}
    t0 = time.perf_counter()
    for i, (n, rec) in enumerate(records(spec.documents, spec.fmt, spec.columns), start=1):
        where = place(spec.documents, n, spec.fmt)
        doc = to_document(rec, where, spec)
        if doc.doc_id in ids:
            first = next(m for m, r in records(spec.documents, spec.fmt, spec.columns)
                         if _an_id(_value(r, spec.id_field), "document id", "") == doc.doc_id)
            raise DataError(f"{where}: document id {doc.doc_id!r} again (first at "
                            f"{place(spec.documents, first, spec.fmt)}); give each document its own id")
        ids.add(doc.doc_id)
        if facets:
            for facet, v in facets_of(doc).items():
                if facet in values:
                    values[facet].update(v if isinstance(v, list) else [v])
        if i % PROGRESS_EVERY == 0:
            step(f"checking documents: {i:,} ({i / max(time.perf_counter() - t0, 1e-9):,.0f}/s)")
    if not ids:
        raise DataError(f"{spec.documents}: no documents; the file holds no record")
    return ids, {f: v for f, v in values.items() if v}


def read_queries(spec: FilesSpec) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The queries file: one dict per query (``query_id``, ``text``, ``query_type``, ``language``, ``split``,
    ``group``, ``filter``; ``split`` may be ``""``) and query id → ``file:line``.

    Raises:
        DataError: an empty id or one with whitespace, an id given twice, an empty text, an unknown
            ``query_type`` or ``split``, a filter that does not parse (names the file, line and fix).
    """
    from workbench.data.loaders.files import query_records
    from workbench.io.facets import parse_filter
    from workbench.text.normalize import nfc

    out: list[dict[str, Any]] = []
    where_of: dict[str, str] = {}
    aliases = {"validation": "dev", "valid": "dev", "val": "dev"}
    for n, rec in query_records(spec.queries):
        where = f"{spec.queries}:{n}"
        qid = _an_id(rec["query_id"], "query id", where)
        if qid in where_of:
            raise DataError(f"{where}: query id {qid!r} again (first at {where_of[qid]}); give each query its own id")
        text = " ".join(nfc("" if rec["text"] is None else str(rec["text"])).split())  # JSON null: no text
        if not text:
            raise DataError(f"{where}: query {qid} has an empty text; write the query or leave the line out")
        problem = _text_problem(text)
        if problem:
            raise DataError(f"{where}: query {qid} holds {problem}")
        qtype = str(rec.get("query_type", "")).strip() or "other"
        if qtype not in QUERY_TYPES:
            raise DataError(f"{where}: query {qid}: query_type {qtype!r} is not one of {', '.join(QUERY_TYPES)}; "
                            "leave it empty for other")
        split = str(rec.get("split", "")).strip().lower()
        split = aliases.get(split, split)
        if split and split not in SPLITS:
            raise DataError(f"{where}: query {qid}: split {split!r} is not one of {', '.join(SPLITS)}; leave it "
                            "empty and the workbench assigns one by hashing the query's group")
        flt = ""
        if "filter" in rec:
            try:
                parsed = parse_filter(rec["filter"])
            except ValueError as exc:
                raise DataError(f"{where}: query {qid}: {exc}") from None
            flt = parsed.text if parsed else ""
        where_of[qid] = where
        out.append({"query_id": qid, "text": text, "query_type": qtype,
                    "language": str(rec.get("language", spec.language)).strip() or spec.language,
                    "split": split, "group": str(rec.get("group", "")).strip() or qid, "filter": flt})
    if not out:
        raise DataError(f"{spec.queries}: no queries; the file holds no record")
    return out, where_of


def read_judgments(spec: FilesSpec, queries: set[str], docs: set[str]) -> tuple[list[Qrel], dict[str, str],
                                                                                dict[str, Any]]:
    """The judgments of every qrels file, checked against the query and document ids.

    Returns:
        ``(qrels, split_of, notes)``: the judgments that name a known query and document; query id → the split its
        BEIR qrels file gives (``qrels/test.tsv``); and what was dropped (counts and first examples).

    Raises:
        DataError: a (query, document) pair judged twice (names both lines), a query judged in two splits' files,
            or more than ``max_unknown_qrels`` of the judgments naming an unknown query or document (the message
            gives the counts, the first unknown ids and the fix).
    """
    from workbench.data.loaders.files import qrels_records, qrels_split

    out: list[Qrel] = []
    seen: dict[tuple[str, str], str] = {}
    split_of: dict[str, str] = {}
    unknown_q: Counter[str] = Counter()
    unknown_d: Counter[str] = Counter()
    total = below_zero = 0
    for path in spec.qrels:
        split = qrels_split(path) if spec.beir or path.parent.name == "qrels" else None
        for n, qid, did, rel in qrels_records(path):
            total += 1
            where = f"{path}:{n}"
            if (qid, did) in seen:
                raise DataError(f"{where}: query {qid} and document {did} judged again (first at {seen[(qid, did)]}); "
                                "keep one grade per pair")
            seen[(qid, did)] = where
            if qid not in queries:
                unknown_q[qid] += 1
                continue
            if did not in docs:
                unknown_d[did] += 1
                continue
            if split is not None:
                if split_of.setdefault(qid, split) != split:
                    raise DataError(f"{where}: query {qid} is judged in the {split_of[qid]} and the {split} files; a "
                                    "query belongs to one split")
            if rel < 0:
                below_zero += 1
                rel = 0
            out.append(Qrel(qid, did, rel))
    if total == 0:
        raise DataError(f"{', '.join(map(str, spec.qrels))}: no judgments; a dataset needs qrels to be measured")
    dropped = sum(unknown_q.values()) + sum(unknown_d.values())
    notes = {"judgments_read": total, "judgments_dropped_unknown_query": sum(unknown_q.values()),
             "judgments_dropped_unknown_document": sum(unknown_d.values()),
             "unknown_queries": sorted(unknown_q)[:5], "unknown_documents": sorted(unknown_d)[:5],
             "relevance_below_zero_read_as_0": below_zero}
    if dropped / total > spec.max_unknown_qrels:
        parts = []
        if unknown_q:
            parts.append(f"{sum(unknown_q.values()):,} name a query the queries file lacks (e.g. "
                         f"{', '.join(sorted(unknown_q)[:3])})")
        if unknown_d:
            parts.append(f"{sum(unknown_d.values()):,} name a document the documents file lacks (e.g. "
                         f"{', '.join(sorted(unknown_d)[:3])})")
        raise DataError(f"{', '.join(map(str, spec.qrels))}: {dropped:,} of {total:,} judgments "
                        f"({dropped / total:.1%}) name unknown ids, more than max_unknown_qrels = "
                        f"{spec.max_unknown_qrels:g}: {'; '.join(parts)}. Check id_field and that the files belong "
                        "together (or raise max_unknown_qrels)")
    return out, split_of, notes


def _build(defn: dict[str, Any], defs: Definitions, data: Path, step: Step) -> Built:
    from workbench.data.querysets.split import assign_splits
    from workbench.io.facets import check_filter, parse_filter

    spec = FilesSpec.of(defn, defs.path.parent)
    step(f"reading queries ({spec.queries.name})")
    rows, _where = read_queries(spec)
    filters = {r["query_id"]: parse_filter(r["filter"]) for r in rows if r["filter"]}
    step(f"checking documents ({spec.documents.name})")
    ids, values = document_ids(spec, step, frozenset(c.facet for f in filters.values() if f for c in f.clauses))
    for qid, flt in filters.items():  # named at the team's own line, not in the build's queries.tsv at load
        problem = check_filter(flt, values, defn["name"]) if flt else ""
        if problem:
            raise DataError(f"{_where[qid]}: query {qid}: filter {flt}: {problem}")
    step("reading judgments")  # against every query of the file: a type left out by query_types is not unknown
    qrels, split_of, notes = read_judgments(spec, {r["query_id"] for r in rows}, ids)
    if spec.query_types is not None:
        rows = [r for r in rows if r["query_type"] in spec.query_types]
        wanted = {r["query_id"] for r in rows}
        qrels = [q for q in qrels if q.query_id in wanted]
    judged = {q.query_id for q in qrels}
    kept = [r for r in rows if r["query_id"] in judged or r["query_type"] in UNANSWERABLE_QUERY_TYPES]
    if not kept:
        raise DataError(f"{spec.queries}: no query has a judgment in {', '.join(map(str, spec.qrels))}; check "
                        "that the query ids of the two files agree")
    # one group, one split: a split given for one query of a group (its column, or its BEIR qrels file) holds
    # for the group's other queries; groups with none are hashed
    given: dict[str, tuple[str, str]] = {}
    for r in kept:
        split = r["split"] or split_of.get(r["query_id"], "")
        if split:
            first = given.setdefault(r["group"], (split, r["query_id"]))
            if first[0] != split:
                raise DataError(f"{_where[r['query_id']]}: query {r['query_id']} is in {split} but query {first[1]} "
                                f"of the same group {r['group']!r} is in {first[0]}; a group's queries share one split "
                                "(fix the split or the group)")
    hashed: dict[str, list[str]] = {}
    for r in kept:
        if r["group"] not in given:
            hashed.setdefault(r["query_type"], []).append(r["group"])
    split_of_group = {g: s for g, (s, _q) in given.items()}
    split_of_group.update(assign_splits(hashed, defs.seed, defs.splits) if hashed else {})
    queries = [Query(r["query_id"], r["text"], r["query_type"], r["language"], split_of_group[r["group"]],
                     r["group"], r["filter"]) for r in kept]
    notes.update({"documents_file": str(spec.documents), "format": "beir" if spec.beir else spec.fmt,
                  "queries_without_judgments_left_out": len(rows) - len(kept),
                  "splits_assigned_by_group_hash": sum(1 for r in kept if r["group"] not in given)})
    return Built(documents(spec, step), queries, qrels, notes)


SOURCE = Source(
    name="files",
    keys=frozenset({"source", "query_types", *KEYS}),
    required_keys=("documents",),
    query_types=QUERY_TYPES,
    corpora=lambda defn, defs: (),
    input_files=lambda defn, defs, data: FilesSpec.of(defn, defs.path.parent).inputs(),
    build=_build,
    check=_check,
)
