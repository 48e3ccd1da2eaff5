"""``workbench logs import``: UBI JSON lines into a log set of the home, with a counted list of what was skipped.

**Input.** Files or folders (a folder: every ``*.jsonl``, ``*.json``, ``*.ndjson`` file in it, gzipped or not,
rotated ``*.jsonl.N`` included, each stream oldest first). A file is read as JSON lines; each line is a UBI query or event
(:mod:`workbench.traffic.ubi`), or a hit of an OpenSearch export of the ``ubi_queries`` / ``ubi_events``
indexes (``{"_index": "ubi_queries", "_id": ..., "_source": {...}}``, as ``elasticdump`` and scroll exports write
them): the record is its ``_source``, its kind given by ``_index``. A file whose first line is not a JSON object
is tried as one JSON document: a ``_search`` answer (``{"hits": {"hits": [...]}}``) or a list of records.

**Skipped, counted, named.** Every line that cannot be read is skipped with its reason, counted per reason, with
its first :data:`EXAMPLES` places (``file:line``): not JSON; a torn last line (the last line of a file, cut
without its newline: a writer stopped mid-line); neither a query nor an event; an unknown action; no
``query_id`` / ``user_query``; a hit without an id; a bad timestamp or position; a query id given twice (the
first kept). One bad line never costs the others. Events whose query is not in the import are kept and
counted (their rank is what the event says).

**Output.** ``<home>/logs/<name>/queries.parquet`` and ``events.parquet`` (pyarrow) and ``import.json`` (the
report), written to a temporary folder and swapped in whole: an import that fails leaves the previous log set
as it was.

Tables: queries ``query_id, client_id, session_id, time (UTC, ms), user_query, hit_ids (list), application,
attributes (JSON text)``; events ``query_id, client_id, session_id, time, action, object_id, position,
application``.
"""

from __future__ import annotations

import gzip
import json
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from workbench.errors import ConfigError, DataError
from workbench.traffic.ubi import ACTIONS, Skip, UbiEvent, UbiQuery, kind_of, read_event, read_query

#: Places (file:line) named per skip reason.
EXAMPLES = 5
#: Suffixes read from a folder.
SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass
class ImportReport:
    """What an import read: files, lines, queries and events kept, and the skips per reason (count and the first
    :data:`EXAMPLES` places)."""

    name: str
    files: list[str] = field(default_factory=list)
    lines: int = 0
    queries: int = 0
    events: int = 0
    events_without_query: int = 0
    clients: int = 0
    sessions: int = 0
    first: str = ""
    last: str = ""
    actions: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)

    def skip(self, reason: str, where: str) -> None:
        entry = self.skipped.setdefault(reason, {"count": 0, "examples": []})
        entry["count"] += 1
        if len(entry["examples"]) < EXAMPLES:
            entry["examples"].append(where)

    def as_dict(self) -> dict[str, Any]:
        """The report, JSON-ready (``skipped`` sorted by count, largest first)."""
        out = dict(self.__dict__)
        out["skipped"] = dict(sorted(self.skipped.items(), key=lambda kv: (-kv[1]["count"], kv[0])))
        out["skipped_total"] = sum(v["count"] for v in self.skipped.values())
        return out


def log_dir(home: Path, name: str) -> Path:
    """The folder of log set ``name`` in ``home``."""
    return Path(home) / "logs" / name


def input_files(paths: Sequence[Path]) -> list[Path]:
    """The files ``paths`` name (a folder: its UBI files in name order).

    Raises:
        ConfigError: a path that does not exist, or a folder with no UBI file.
    """
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted((f for f in p.iterdir() if f.is_file() and _ubi_name(f.name)), key=_age_order)
            if not found:
                raise ConfigError(f"{p} holds no UBI file (*.jsonl, *.json, *.ndjson, gzipped or rotated .N); "
                                  "name the files")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError(f"{p}: no such file or folder; name UBI JSON-lines files or a folder of them")
    return out


def _age_order(path: Path) -> tuple[str, int, int]:
    """Files of a folder oldest first per stream: ``x.jsonl.3``, ``x.jsonl.2``, ``x.jsonl.1``, then ``x.jsonl``
    (the writer's rotation: a higher number is older)."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    head, _, tail = name.rpartition(".")
    return (head, 0, -int(tail)) if tail.isdigit() else (name, 1, 0)


def _ubi_name(name: str) -> bool:
    base = name[:-3] if name.endswith(".gz") else name
    head, _, tail = base.rpartition(".")
    if tail.isdigit():  # ubi_events.jsonl.3
        base = head
    return base.endswith(SUFFIXES) and not name.startswith(".")


def _open_text(path: Path):
    with path.open("rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8-sig", newline="") if gz else \
        path.open("r", encoding="utf-8-sig", newline="")


def records(path: Path, report: ImportReport) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(kind, record, where)`` of every readable line of ``path`` (module docstring); the others are counted in
    ``report``.

    Raises:
        DataError: the file cannot be read at all (not UTF-8, a truncated gzip): names the file and the fix.
    """
    report.files.append(str(path))
    try:
        if _is_document(path):
            yield from _document(path, report)
            return
        with _open_text(path) as fh:
            pending: tuple[int, str] | None = None
            for line_no, raw in enumerate(fh, 1):
                if pending is not None:
                    yield from _line(pending[0], pending[1], path, report, last=False)
                pending = (line_no, raw)
            if pending is not None:
                yield from _line(pending[0], pending[1], path, report, last=True)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 (byte {exc.start}); convert it: iconv -f ENCODING -t UTF-8") from None
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        raise DataError(f"{path}: cannot be read ({type(exc).__name__}: {exc}); a truncated gzip is cut short: "
                        "export it again or gunzip what is there") from None


#: A file whose first line is not a whole JSON object is tried as one JSON document up to this size (bytes).
DOCUMENT_MAX_BYTES = 256 * 2**20


def _is_document(path: Path) -> bool:
    """Whether ``path`` is one JSON document (a ``_search`` answer, a list, pretty-printed) rather than JSON lines."""
    with _open_text(path) as fh:
        for raw in fh:
            line = raw.strip()
            if not line:
                continue
            if line.startswith("["):
                break
            if not line.startswith("{"):
                return False
            try:
                json.loads(line)
                return False
            except ValueError:
                break
        else:
            return False
    if path.stat().st_size > DOCUMENT_MAX_BYTES:
        return False
    try:
        with _open_text(path) as fh:
            json.load(fh)
        return True
    except ValueError:
        return False


def _line(no: int, raw: str, path: Path, report: ImportReport, *, last: bool):
    report.lines += 1
    where = f"{path.name}:{no}"
    text = raw.strip()
    if not text:
        report.lines -= 1
        return
    try:
        rec = orjson.loads(text)
    except ValueError:  # orjson.JSONDecodeError is one
        report.skip("a torn last line" if last and not raw.endswith("\n") else "not JSON", where)
        return
    yield from _record(rec, where, report)


def _record(rec: Any, where: str, report: ImportReport):
    if not isinstance(rec, dict):
        report.skip("not a JSON object", where)
        return
    index = ""
    if isinstance(rec.get("_source"), dict):  # an OpenSearch hit
        index = str(rec.get("_index") or "")
        rec = rec["_source"]
    kind = kind_of(rec, index)
    if not kind:
        report.skip("neither a query nor an event", where)
        return
    yield kind, rec, where


def _document(path: Path, report: ImportReport):
    try:
        with _open_text(path) as fh:
            doc = json.load(fh)
    except ValueError:
        report.lines += 1
        report.skip("not JSON", f"{path.name}:1")
        return
    items = doc.get("hits", {}).get("hits") if isinstance(doc, dict) and isinstance(doc.get("hits"), dict) else doc
    if not isinstance(items, list):
        report.lines += 1
        report.skip("neither a query nor an event", f"{path.name}:1")
        return
    for i, rec in enumerate(items, 1):
        report.lines += 1
        yield from _record(rec, f"{path.name}:item {i}", report)


def read_logs(paths: Sequence[Path], name: str, actions: frozenset[str] = ACTIONS,
              log: Callable[[str], None] = lambda _m: None) -> tuple[list[UbiQuery], list[UbiEvent], ImportReport]:
    """Read UBI files into queries and events, in time order (then file order), with the report.

    Raises:
        ConfigError: a path is missing. DataError: a file cannot be read at all.
    """
    report = ImportReport(name)
    queries: dict[str, UbiQuery] = {}
    events: list[UbiEvent] = []
    for path in input_files(paths):
        before = report.lines
        for kind, rec, where in records(path, report):
            try:
                if kind == "query":
                    q = read_query(rec)
                    if q.query_id in queries:
                        report.skip("a query id given twice", where)
                        continue
                    queries[q.query_id] = q
                else:
                    events.append(read_event(rec, actions))
            except Skip as exc:
                report.skip(exc.reason, where)
        log(f"{path}: {report.lines - before:,} lines")
    qs = sorted(queries.values(), key=lambda q: q.time)
    events.sort(key=lambda e: e.time)
    report.queries, report.events = len(qs), len(events)
    report.events_without_query = sum(1 for e in events if e.query_id not in queries)
    report.clients = len({q.client_id for q in qs} | {e.client_id for e in events} - {""})
    report.sessions = len({q.session_id for q in qs if q.session_id} | {e.session_id for e in events if e.session_id})
    for e in events:
        report.actions[e.action] = report.actions.get(e.action, 0) + 1
    times = [q.time for q in qs] + [e.time for e in events]
    if times:
        from workbench.traffic.ubi import utc_timestamp

        report.first, report.last = utc_timestamp(min(times)), utc_timestamp(max(times))
    return qs, events, report


def write_log_set(folder: Path, queries: Iterable[UbiQuery], events: Iterable[UbiEvent], report: ImportReport) -> Path:
    """Write the log set's Parquet tables and report into ``folder``, swapped in whole (module docstring).

    Raises:
        OSError: the home cannot be written (the previous log set stays).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    ts = pa.timestamp("ms", tz="UTC")
    qs, es = list(queries), list(events)
    qt = pa.table({
        "query_id": pa.array([q.query_id for q in qs], pa.string()),
        "client_id": pa.array([q.client_id for q in qs], pa.string()),
        "session_id": pa.array([q.session_id for q in qs], pa.string()),
        "time": pa.array([int(round(q.time * 1000)) for q in qs], pa.int64()).cast(ts),
        "user_query": pa.array([q.user_query for q in qs], pa.string()),
        "hit_ids": pa.array([list(q.hit_ids) for q in qs], pa.list_(pa.string())),
        "application": pa.array([q.application for q in qs], pa.string()),
        "attributes": pa.array([json.dumps(dict(q.attributes), ensure_ascii=False, default=str) for q in qs],
                               pa.string()),
    })
    et = pa.table({
        "query_id": pa.array([e.query_id for e in es], pa.string()),
        "client_id": pa.array([e.client_id for e in es], pa.string()),
        "session_id": pa.array([e.session_id for e in es], pa.string()),
        "time": pa.array([int(round(e.time * 1000)) for e in es], pa.int64()).cast(ts),
        "action": pa.array([e.action for e in es], pa.string()),
        "object_id": pa.array([e.object_id for e in es], pa.string()),
        "position": pa.array([e.position for e in es], pa.int32()),
        "application": pa.array([e.application for e in es], pa.string()),
    })
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.importing-{time.time_ns()}")
    tmp.mkdir(mode=0o700)
    try:
        pq.write_table(qt, tmp / "queries.parquet")
        pq.write_table(et, tmp / "events.parquet")
        from workbench._infra.jsonout import dumps

        (tmp / "import.json").write_text(dumps(report.as_dict(), indent=1, ensure_ascii=False), encoding="utf-8")
        old = folder.with_name(f".{folder.name}.old-{time.time_ns()}")
        if folder.exists():
            folder.replace(old)
        tmp.replace(folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def load_log_set(home: Path, name: str):
    """``(queries, events)`` of log set ``name`` as pandas DataFrames (the tables of the module docstring).

    Raises:
        ConfigError: no such log set (names the ones there are and how to import one).
    """
    import pyarrow.parquet as pq

    folder = log_dir(home, name)
    if not (folder / "queries.parquet").is_file():
        there = sorted(p.name for p in (Path(home) / "logs").iterdir() if p.is_dir() and not p.name.startswith(".")) \
            if (Path(home) / "logs").is_dir() else []
        raise ConfigError(f"no log set {name!r} in {home}/logs ({', '.join(there) or 'none yet'}); import one: "
                          f"workbench logs import {name} FILE...")
    return pq.read_table(folder / "queries.parquet").to_pandas(), pq.read_table(folder / "events.parquet").to_pandas()
