"""A team's own files, read as streams: records of documents (JSON lines, CSV/TSV, Parquet), queries (TSV, JSON
lines, BEIR's ``queries.jsonl``, TREC topics) and judgments (TREC qrels, BEIR's ``qrels/<split>.tsv``).

Every reader is a generator of ``(place, record)``: ``place`` is the 1-based line of a text file (the line a CSV
record starts on) or the row of a Parquet file, so every message can name the file and the line. Nothing is held
but the record in hand (Parquet: one batch of :data:`PARQUET_BATCH` rows), so a million-document file costs the
memory of one record.

The formats, as their owners define them:

* JSON lines: one JSON object per line (``.jsonl``, ``.ndjson``).
* CSV (RFC 4180: ``,``, fields quoted with ``"``, inner quotes doubled) and TSV (tab-separated, the same quoting
  rule), a header row naming the columns.
* Parquet: columns by name, read in batches with pyarrow.
* BEIR (Thakur et al., 2021, the ``beir`` package's ``GenericDataLoader``): a folder with ``corpus.jsonl``
  (``_id``, ``title``, ``text``, ``metadata``), ``queries.jsonl`` (``_id``, ``text``, ``metadata``) and
  ``qrels/<split>.tsv`` (header ``query-id corpus-id score``).
* TREC qrels: ``query_id iteration doc_id relevance``, whitespace-separated (trec_eval's format).
* TREC topics: the classic SGML (``<top> <num> Number: 301 <title> …``) or the XML of the later tracks
  (``<topic number="1"> <query>…</query>``).

Any of these files but Parquet (which compresses its own columns) may be gzip-compressed (found by its first two
bytes, whatever its name). A UTF-8 byte-order
mark is dropped. What cannot be read raises :class:`~workbench.errors.DataError` with ``file:line`` and the fix: a
line that is not UTF-8 (a file of mixed encodings), a UTF-16 file, a gzip stream cut short, a JSON line that does
not parse, a CSV quote that never closes, a row with more or fewer columns than the header.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import json
import re
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.data.loaders._io import _unreadable
from workbench.errors import DataError

#: Rows per Parquet batch.
PARQUET_BATCH = 4096
#: Document file formats by suffix (after a ``.gz``), and the formats :func:`records` reads.
SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
            ".txt": "tsv", ".parquet": "parquet", ".pq": "parquet"}
RECORD_FORMATS = ("jsonl", "csv", "tsv", "parquet")
#: The split a BEIR qrels file's name gives its queries.
QRELS_SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev", "val": "dev", "test": "test"}

#: The largest grade (in absolute value) a judgment may carry.
MAX_GRADE = 1_000_000
_GZIP = b"\x1f\x8b"
_UTF16 = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)

# CSV fields as long as a document: the csv module's default limit is 128 KiB
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def format_of(path: Path) -> str | None:
    """The record format a file's name says (:data:`SUFFIXES`, a trailing ``.gz`` ignored), or None."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return SUFFIXES.get(Path(name).suffix)


def lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for each line of a UTF-8 text file, gzip or not (the newline kept).

    Raises:
        DataError: the file cannot be opened, is UTF-16, holds a line that is not UTF-8, or is a gzip stream
            that is cut short or damaged; the message names the file (and line) and the fix.
    """
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    with raw:
        head = raw.read(2)
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw) if head == _GZIP else raw
        n = 0
        try:
            for n, b in enumerate(stream, start=1):
                if n == 1:
                    if b.startswith(_UTF16):
                        raise DataError(f"{path}: UTF-16 text; save it as UTF-8 (iconv -f utf-16 -t utf-8)")
                    if b.startswith(codecs.BOM_UTF8):
                        b = b[3:]
                try:
                    yield n, b.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(
                        f"{path}:{n}: not UTF-8 (byte 0x{b[exc.start]:02x} at column {exc.start + 1}): the file mixes "
                        "encodings; convert the whole file to UTF-8 (e.g. iconv -f cp1251 -t utf-8)") from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise DataError(f"{path}: the gzip stream is cut short or damaged after line {n} ({exc}); copy the file "
                            f"again (gzip -t checks a copy)") from None


def jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, object)`` for each non-blank line of a JSON-lines file.

    Raises:
        DataError: as :func:`lines`, or a line that is not a JSON object (a torn last line included).
    """
    for n, line in lines(path):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{n}: not a JSON object ({exc.msg.removesuffix(' at')} at column {exc.colno}); "
                            "write one JSON "
                            "object per line (a cut-off last line means the file is incomplete)") from None
        if not isinstance(rec, dict):
            raise DataError(f"{path}:{n}: a {type(rec).__name__}, not a JSON object; write one object per line")
        yield n, rec


def csv_records(path: Path, delimiter: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line the record starts on, {column: value})`` for each row of a CSV or TSV file with a header row.

    Raises:
        DataError: as :func:`lines`, an empty file, a header naming a column twice, a row with another number of
            columns than the header, or a quote that never closes.
    """
    kind = "TSV" if delimiter == "\t" else "CSV"
    source = (text for _n, text in lines(path))
    reader = csv.reader(source, delimiter=delimiter, quotechar='"', strict=True)
    start = 1
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: empty; a {kind} file starts with a header row naming its columns")
        header = [h.strip() for h in header]
        twice = sorted({h for h in header if header.count(h) > 1})
        if twice:
            raise DataError(f"{path}:1: the header names {twice} more than once; name each column once")
        start = reader.line_num + 1
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                start = reader.line_num + 1
                continue
            if len(row) != len(header):
                raise DataError(f"{path}:{start}: {len(row)} columns where the header has {len(header)}; "
                                f"{'quote fields that hold a comma' if kind == 'CSV' else 'a tab inside a field?'}")
            yield start, dict(zip(header, row))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"{path}:{start}: {exc}: a quote opened here never closes; close it, or double a quote "
                        "inside a quoted field (\"\")") from None


def parquet_records(path: Path, columns: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row, {column: value})`` for each row of a Parquet file (``columns`` only, when given), batch by batch.

    Raises:
        DataError: the file is not Parquet (or is damaged), or lacks a column asked for.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.name.lower().endswith(".gz"):
        raise DataError(f"{path}: a gzipped Parquet file; Parquet compresses its own columns: gunzip it (or write it "
                        "with compression='zstd')")
    try:
        pf = pq.ParquetFile(path)
    except OSError as exc:
        if not path.exists() or path.is_dir():
            raise _unreadable(path, exc) from exc
        raise DataError(f"{path}: not a readable Parquet file ({exc}); write it again (pandas: df.to_parquet), or "
                        "give its real format (format = \"csv\", …)") from None
    except pa.ArrowException as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc}); write it again (pandas: df.to_parquet), or "
                        "give its real format (format = \"csv\", …)") from None
    names = pf.schema_arrow.names
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise DataError(f"{path}: no column {missing[0]!r}; it has {names}: name one of them in the definition")
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH, columns=columns):
            for rec in batch.to_pylist():
                row += 1
                yield row, rec
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: damaged after row {row} ({exc}); write the file again") from None


def records(path: Path, fmt: str, columns: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of a ``jsonl``, ``csv``, ``tsv`` or ``parquet`` file (:data:`RECORD_FORMATS`).

    Raises:
        DataError: as the format's reader.
        ValueError: an unknown format.
    """
    if fmt == "jsonl":
        return jsonl_records(path)
    if fmt in ("csv", "tsv"):
        return csv_records(path, "," if fmt == "csv" else "\t")
    if fmt == "parquet":
        return parquet_records(path, columns)
    raise ValueError(f"unknown record format {fmt!r}; one of {', '.join(RECORD_FORMATS)}")


def place(path: Path, n: int, fmt: str) -> str:
    """``file:line`` (``file row n`` for Parquet) for messages."""
    return f"{path} row {n}" if fmt == "parquet" else f"{path}:{n}"


# ---------------------------------------------------------------- queries

#: Names a query file's id and text columns may have, in the order they are looked for.
QUERY_ID_KEYS = ("query_id", "_id", "id", "qid", "query-id", "query_number")
QUERY_TEXT_KEYS = ("text", "query", "title", "query_text")
#: The optional columns of a query file (also read from a BEIR query's ``metadata``).
QUERY_OPTIONAL = ("query_type", "language", "split", "group", "filter")


def _first(rec: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in rec), None)


def _topics(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """TREC topics: ``(line, {"query_id", "text"})`` per ``<top>`` (SGML) or ``<topic number=…>`` (XML)."""
    text = "".join(t for _n, t in lines(path))

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    found = False
    for m in re.finditer(r"<top>(.*?)</top>", text, flags=re.S | re.I):
        found = True
        body = m.group(1)
        num = re.search(r"<num>\s*(?:Number:)?\s*([^\s<]+)", body, flags=re.I)  # </num> may close it
        title = re.search(r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?=</?\w+>|$)", body, flags=re.S | re.I)
        if not num or not title:
            raise DataError(f"{path}:{line_of(m.start())}: a <top> without <num> or <title>; every topic needs both")
        yield line_of(m.start()), {"query_id": num.group(1), "text": " ".join(title.group(1).split())}
    for m in re.finditer(r"<topic\b([^>]*)>(.*?)</topic>", text, flags=re.S | re.I):
        found = True
        num = re.search(r"number\s*=\s*[\"']?([^\"'\s>]+)", m.group(1), flags=re.I)
        q = re.search(r"<(query|title)>\s*(.*?)\s*</\1>", m.group(2), flags=re.S | re.I)
        if not num or not q:
            raise DataError(f"{path}:{line_of(m.start())}: a <topic> without number=… or <query>/<title>; give both")
        yield line_of(m.start()), {"query_id": num.group(1), "text": " ".join(q.group(2).split())}
    if not found:
        raise DataError(f"{path}: no <top> or <topic> element; a TREC topics file holds <top><num>…<title>… blocks")


def is_topics(path: Path) -> bool:
    """Whether a query file is TREC topics (its first non-blank text starts with ``<``)."""
    for _n, text in lines(path):
        if text.strip():
            return text.lstrip().startswith("<")
    return False


def query_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, record)`` for each query of a file: ``record`` has ``query_id`` and ``text`` and any of
    :data:`QUERY_OPTIONAL` the file gives. JSON lines (BEIR's ``queries.jsonl``: ``_id``, ``text`` and the optional
    keys inside ``metadata`` too), TREC topics, or TSV/CSV: with a header row naming the columns, or two
    header-less columns ``id<TAB>text`` (MS MARCO's ``queries.tsv``).

    Raises:
        DataError: as the readers, or a record without an id or a text column (names the file, line and the
            names looked for).
    """
    fmt = format_of(path)
    if fmt not in ("jsonl", "csv") and is_topics(path):  # TREC topics files are often named .txt (read as tsv)
        yield from _topics(path)
        return
    if fmt == "jsonl":
        source: Iterator[tuple[int, dict[str, Any]]] = jsonl_records(path)
    else:
        delim = "," if fmt == "csv" else "\t"
        first = next((t for _n, t in lines(path) if t.strip()), "")
        cells = [c.strip().lower() for c in first.rstrip("\r\n").split(delim)]
        if not any(c in QUERY_ID_KEYS for c in cells):  # no header: id, text
            source = _headerless(path, delim)
        else:
            source = csv_records(path, delim)
    for n, rec in source:
        md = rec.get("metadata")
        if isinstance(md, dict):
            rec = {**{k: v for k, v in md.items() if k in QUERY_OPTIONAL}, **rec}
        idk, textk = _first(rec, QUERY_ID_KEYS), _first(rec, QUERY_TEXT_KEYS)
        if idk is None or textk is None:
            missing = "id" if idk is None else "text"
            names = QUERY_ID_KEYS if idk is None else QUERY_TEXT_KEYS
            raise DataError(f"{path}:{n}: no {missing} field (looked for {', '.join(names)}; the record has "
                            f"{sorted(rec)}); rename the column")
        out = {"query_id": rec[idk], "text": rec[textk]}
        out.update({k: rec[k] for k in QUERY_OPTIONAL if rec.get(k) not in (None, "")})
        yield n, out


def _headerless(path: Path, delim: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, text in lines(path):
        if not text.strip():
            continue
        cols = text.rstrip("\r\n").split(delim, 1)
        if len(cols) != 2:
            raise DataError(f"{path}:{n}: a query line without a header is id{'<TAB>' if delim == chr(9) else ','}"
                            "text; add the text, or a header row (query_id, text, …)")
        yield n, {"query_id": cols[0], "text": cols[1]}


# ---------------------------------------------------------------- qrels

def qrels_records(path: Path) -> Iterator[tuple[int, str, str, int]]:
    """``(line, query_id, doc_id, relevance)`` for each judgment of a TREC qrels file (``qid iter docid rel``) or
    a BEIR qrels TSV (header ``query-id corpus-id score``). A relevance written as a whole float (``1.0``) is read
    as that integer.

    Raises:
        DataError: as :func:`lines`, a line with another number of columns, or a relevance that is not a whole
            number (names the file, line and the format).
    """
    beir: bool | None = None
    for n, text in lines(path):
        if not text.strip():
            continue
        if beir is None:
            head = [c.strip().lower() for c in text.split("\t")]
            beir = head[:2] == ["query-id", "corpus-id"]
            if beir:
                continue
        cols = text.split("\t") if beir else text.split()
        cols = [c.strip() for c in cols]
        want = 3 if beir else 4
        if len(cols) != want:
            shape = "query-id<TAB>corpus-id<TAB>score (BEIR)" if beir else "query_id 0 doc_id relevance (TREC)"
            raise DataError(f"{path}:{n}: {len(cols)} columns; a judgment line is {shape}")
        qid, did, rel = (cols[0], cols[1], cols[2]) if beir else (cols[0], cols[2], cols[3])
        try:
            value = float(rel)
        except ValueError:
            value = float("nan")
        if not value.is_integer():
            raise DataError(f"{path}:{n}: relevance {rel!r} is not a whole number; grades are 0, 1, 2, …")
        if abs(value) > MAX_GRADE:  # trec_eval reads a grade into a C long, and grades this large are a mistake
            raise DataError(f"{path}:{n}: relevance {rel[:30]!r} is beyond {MAX_GRADE:,}; grades are small whole "
                            "numbers (0, 1, 2, …): is a column shifted?")
        yield n, qid, did, int(value)


def qrels_split(path: Path) -> str | None:
    """The split a BEIR qrels file's name gives (``qrels/test.tsv`` → ``test``; :data:`QRELS_SPLITS`), or None."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return QRELS_SPLITS.get(Path(name).stem)


def beir_files(folder: Path) -> tuple[Path, Path, list[Path]]:
    """A BEIR folder's ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/*.tsv`` (each may end in ``.gz``).

    Raises:
        DataError: a file of the layout is missing (names the folder and what it lacks).
    """
    def one(stem: str) -> Path:
        for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
            if (folder / name).is_file():
                return folder / name
        raise DataError(f"{folder}: no {stem}.jsonl; a BEIR folder holds corpus.jsonl, queries.jsonl and "
                        "qrels/<split>.tsv")

    corpus, queries = one("corpus"), one("queries")
    qrels = sorted(p for p in (folder / "qrels").glob("*.tsv*") if p.is_file()) if (folder / "qrels").is_dir() else []
    if not qrels:
        raise DataError(f"{folder}: no qrels/<split>.tsv; a BEIR folder holds its judgments in qrels/test.tsv "
                        "(and train.tsv, dev.tsv)")
    return corpus, queries, qrels
