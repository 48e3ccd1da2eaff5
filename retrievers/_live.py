"""What the live lanes (``http``: :mod:`retrievers.http`, ``mcp``: :mod:`retrievers.mcp`) share: their common
parameters, the id mapping, and :class:`LiveLane` (concurrency, the rate limit, reading and mapping hits, failures).

A production search endpoint as a lane, over HTTP (``http``) or as an MCP tool (``mcp``).

A team's real system enters the workbench where any lane does (eval, fusion with local lanes, tuning of fusion
parameters over its cached candidates, judging pools, the gate, the dashboard), instead of only as a TREC file.
Templates, secrets, JMESPath hit reading and id mapping are :mod:`workbench.live.mapping`'s.

* ``http``: ``GET`` a URL template, or ``POST`` a JSON body template, per query; the transport is
  :class:`workbench.io.http.JsonClient` (a deadline per attempt, a response cap, retries honouring 429 and
  ``Retry-After``, no redirects followed).
* ``mcp``: one tool of an MCP server through the official ``mcp`` SDK, over streamable HTTP (``url``) or stdio
  (``command``); the tool's structured answer (or its first text content, as JSON) is read like an HTTP answer.

Both understand AICharya's envelope: an answer ``{"ok": false, "error": {"code": C, ...}}`` is a failure of
class ``C`` (``invalid_argument``, ``not_found``, ``dependency_failed``); ``{"ok": true, "result": ...}`` is read
with the ``hits`` expression as given (``result.hits``).

**Failures.** A query that fails (after the retries) gets an empty ranking, so it scores 0 and stays in every
mean; the lane records its class (``timeout``, ``http_500``, ``not_json``, ``dependency_failed`` …) in
``last_failures``; the runner counts them per class, names them in the report, and does not cache a run with a
failure (a later run asks again; nothing half-cached). Ids that map to no document are dropped and counted
(``last_unmapped``), and so are hits without a finite score when a ``score`` expression is set
(``last_unscored``). The raw answer of each query is kept in ``last_raw`` (clipped to 64 KB) for debugging.

**Snapshots.** A live system changes under the same URL. Each lane names a ``snapshot`` label the user sets
(a date, a release tag); it is one of the lane's parameters, so it keys the candidate cache: candidates of
another snapshot are never read, and a new label runs the endpoint again.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from workbench.errors import ConfigError, DataError
from workbench.live import mapping
from workbench.registry import Params
from workbench.run import Run
from workbench.types import Document, Query

#: The most of one raw answer kept for debugging, in characters.
RAW_KEEP = 64 * 1024
#: Unmapped ids a lane keeps to name in messages.
UNMAPPED_KEPT = 5


class LiveParams(Params):
    """The parameters every live lane has."""

    hits: str = Field(min_length=1, description="JMESPath to the list of hits in an answer, e.g. result.hits")
    id: str = Field("doc_id", min_length=1, description="JMESPath to a hit's id or address within the hit")
    score: Optional[str] = Field(None, min_length=1, description="JMESPath to a hit's score (unset: -rank, the "
                                                                 "system's order is the ranking)")
    id_map: str = Field("doc_id", description="how ids map to documents: doc_id, address, reference (the "
                                              "reference grammar: BG 2.47, бг 2.47), metadata:FIELD, or "
                                              "table:FILE (a crosswalk: CSV, TSV or JSON lines with doc_id and "
                                              "the system's id; relative to the experiment file)")
    id_rewrite: Optional[list[str]] = Field(None, min_length=2, max_length=2,
                                            description="[pattern, replacement]: a regular expression rewrite of "
                                                        "each id before id_map (Python's re.sub; a group is \\1 "
                                                        "in the replacement)")
    max_unmapped: float = Field(0.5, ge=0, le=1, description="the largest share of returned ids that may name no "
                                                             "document; above it the eval fails naming the lane and "
                                                             "the first ids (a wrong crosswalk is not a bad system); "
                                                             "lower it when the dataset holds the system's whole "
                                                             "corpus")
    snapshot: str = Field(min_length=1, max_length=200, description="a label for the system's state (a date, a "
                                                                    "release); it keys the candidate cache")
    concurrency: int = Field(4, ge=1, le=64, description="requests in flight at once")
    rate_limit: Optional[float] = Field(None, gt=0, le=10_000, description="requests per second at most (unset: "
                                                                           "no limit)")
    timeout_s: float = Field(30.0, gt=0, le=3600, description="the deadline of each attempt, in seconds")
    retries: int = Field(2, ge=0, le=20, description="further attempts after a connection error, a timeout, 429 "
                                                     "or 5xx")
    headers: dict[str, str] = Field(default_factory=dict, description="request headers; ${VAR} takes an "
                                                                      "environment variable (a key)")


def crosswalk_path(id_map: str, base: Path | None) -> Path | None:
    """The crosswalk file of ``id_map = "table:FILE"`` (relative to ``base``, the experiment file's folder), or
    None for another id_map."""
    if not id_map.startswith("table:"):
        return None
    p = Path(id_map[len("table:"):]).expanduser()
    return p if p.is_absolute() or base is None else (base / p).resolve()


def load_crosswalk(path: Path, doc_ids: set[str]) -> tuple[dict[str, str], int]:
    """A crosswalk table: the system's id → ``doc_id`` (many to one), and how many rows name a ``doc_id`` the
    dataset lacks (left out: a crosswalk may cover more than the dataset).

    The file is CSV, TSV (a header row) or JSON lines; each record has ``doc_id`` and exactly one other field,
    the system's id (``track_id``, ``resource_id``, any name). gzip is allowed
    (:mod:`workbench.data.loaders.files`).

    Raises:
        DataError: the file cannot be read; a record lacks ``doc_id`` or has not exactly one other field; an
            empty id; one system id mapped to two documents (names the file, line and fix).
    """
    from workbench.data.loaders.files import format_of, place, records

    fmt = format_of(path)
    if fmt not in ("csv", "tsv", "jsonl"):
        raise DataError(f"{path}: a crosswalk is a .csv, .tsv or .jsonl file (doc_id and the system's id); "
                        "rename or convert it")
    table: dict[str, str] = {}
    first: dict[str, str] = {}
    outside = 0
    for n, rec in records(path, fmt):
        where = place(path, n, fmt)
        others = [k for k in rec if k != "doc_id"]
        if "doc_id" not in rec or len(others) != 1:
            raise DataError(f"{where}: a crosswalk record has doc_id and one other field, the system's id; this one "
                            f"has {sorted(rec)}")
        sys_id, doc = str(rec[others[0]] if rec[others[0]] is not None else "").strip(), str(rec["doc_id"]).strip()
        if not sys_id or not doc:
            raise DataError(f"{where}: an empty id; every row maps a system id to a doc_id")
        if sys_id in table and table[sys_id] != doc:
            raise DataError(f"{where}: {others[0]} {sys_id!r} maps to {doc!r} here and to {table[sys_id]!r} at "
                            f"{first[sys_id]}; a system id names one document: keep one row")
        if doc not in doc_ids:
            outside += 1
            continue
        table[sys_id] = doc
        first.setdefault(sys_id, where)
    if not table:
        raise DataError(f"{path}: no row maps to a document of the dataset ({outside} rows name doc_ids it lacks); "
                        "check that the crosswalk belongs to this dataset")
    return table, outside


def experiment_folder(res: Any) -> Path | None:
    """The folder of the experiment file the runner ``res`` runs (what a relative ``table:FILE`` starts at)."""
    path = getattr(getattr(res, "exp", None), "path", None)
    return Path(path).resolve().parent if path else None


def crosswalk_extra(params: Any, res: Any) -> dict[str, Any]:
    """``{"crosswalk": sha256}`` of the ``table:FILE`` crosswalk (its rows shape the mapped candidates, so they key
    the cache), or ``{}`` for another id_map.

    Raises:
        DataError: the file cannot be read (names it and where relative paths start).
    """
    import hashlib

    path = crosswalk_path(params.id_map, experiment_folder(res))
    if path is None:
        return {}
    try:
        return {"crosswalk": hashlib.sha256(path.read_bytes()).hexdigest()}
    except OSError as exc:
        raise DataError(f"{path}: the crosswalk of id_map cannot be read ({exc.strerror or exc}); fix the path "
                        "(a relative one starts at the experiment file's folder)") from None


class IdMapper:
    """A system's ids or addresses → the dataset's ``doc_id`` (see the module docstring).

    Args:
        id_map: one of :data:`ID_MAPS` (``metadata:FIELD`` with a field name, ``table:FILE`` with a file).
        documents: the dataset's documents, in corpus order.
        base: the folder a relative ``table:FILE`` is read from (the experiment file's).
        rewrite: ``(pattern, replacement)``: each id is rewritten with :func:`re.sub` before it is mapped.

    Raises:
        ConfigError: an unknown ``id_map``, or a rewrite pattern that does not compile.
        DataError: a crosswalk file that cannot be read (:func:`load_crosswalk`).
    """

    def __init__(self, id_map: str, documents: Sequence[Document], base: Path | None = None,
                 rewrite: Sequence[str] | None = None) -> None:
        self.id_map = id_map
        self._table: dict[str, str] | None = None
        self._reference = None
        self._rewrite = None
        self.crosswalk_outside = 0
        if rewrite:
            try:
                self._rewrite = (re.compile(rewrite[0]), rewrite[1])
                self._rewrite[0].sub(rewrite[1], "")
            except re.error as exc:
                raise ConfigError(f"id_rewrite = {list(rewrite)!r}: {exc}; fix the regular expression or the "
                                  "replacement") from None
        if id_map.startswith("table:") and id_map[len("table:"):]:
            path = crosswalk_path(id_map, base)
            assert path is not None
            self._table, self.crosswalk_outside = load_crosswalk(path, {d.doc_id for d in documents})
        elif id_map == "doc_id":
            self._table = {d.doc_id: d.doc_id for d in documents}
        elif id_map == "address":
            from retrievers.reference import address_key

            self._key = address_key
            self._table = {}
            for d in documents:
                self._table.setdefault(address_key(d.address), d.doc_id)
        elif id_map.startswith("metadata:") and id_map[len("metadata:"):]:
            name = id_map[len("metadata:"):]
            self._table = {}
            for d in documents:
                v = d.metadata.get(name)
                if v is not None:
                    self._table.setdefault(str(v), d.doc_id)
            if not self._table:  # said before any query is sent, not as 100 % unmapped after all of them
                fields = sorted({k for d in documents for k in d.metadata})
                raise ConfigError(f"id_map = {id_map!r}: no document has the metadata field {name!r} (fields: "
                                  f"{', '.join(fields[:12]) or 'none'}); name one of them, or keep the system's ids "
                                  "as a metadata field of the dataset")
        elif id_map == "reference":
            from retrievers.reference import ReferenceLane

            self._reference = ReferenceLane("id_map", documents)
        else:
            raise ConfigError(f"id_map {id_map!r} is not one of {', '.join(mapping.ID_MAPS)}")

    def __call__(self, value: Any) -> str | None:
        """The ``doc_id`` ``value`` names, or None."""
        if value is None or isinstance(value, (dict, list, bool)):
            return None
        text = value if isinstance(value, str) else (str(int(value)) if isinstance(value, float) and value.is_integer()
                                                    else str(value))
        if self._rewrite is not None:
            text = self._rewrite[0].sub(self._rewrite[1], text)
        if self._reference is not None:
            exact = [d for d, s in self._reference.resolve(text) if s >= 2.0]  # the unit itself, not its surroundings
            return exact[0] if exact else None
        assert self._table is not None
        if self.id_map == "address":
            return self._table.get(self._key(text))
        return self._table.get(text)


def envelope_failure(answer: Any) -> tuple[str, str] | None:
    """``(code, message)`` when ``answer`` is an ``{"ok": false, "error": ...}`` envelope, else None."""
    if isinstance(answer, dict) and answer.get("ok") is False:
        err = answer.get("error")
        code = err.get("code") if isinstance(err, dict) else None
        message = err.get("message") if isinstance(err, dict) else err
        return (str(code) if code else "error_envelope"), str(message or "")[:200]
    return None


class _Limiter:
    """At most ``rate`` request starts per second, across threads (None: no limit)."""

    def __init__(self, rate: float | None) -> None:
        self.gap = 1.0 / rate if rate else 0.0
        self.next = 0.0
        self.lock = threading.Lock()

    def wait(self) -> None:
        if not self.gap:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.gap
        if start > now:
            time.sleep(start - now)


class LiveLane:
    """What both live lanes do per batch: concurrency, the rate limit, reading and mapping hits, failures.

    Subclasses implement :meth:`_fetch_all` (answers per query, or an exception per failed query).

    Attributes:
        last_failures: query_id → ``(error class, one-line message)`` of the last :meth:`search`.
        last_unmapped: ids of the last :meth:`search` that named no document (count).
        last_unmapped_ids: the first of them (at most :data:`UNMAPPED_KEPT`), for messages.
        last_unmapped_by_query: query_id → ``(unmapped ids, ids read)`` of its answer (ids read: mapped hits kept
            plus unmapped ones).
        last_unscored: hits of the last :meth:`search` dropped for a missing or non-finite score (count).
        last_notes: what the last :meth:`search` has to say about the system beyond single queries (one line
            each, e.g. a stdio server's noise on stdout).
        last_raw: query_id → the raw answer text (clipped to :data:`RAW_KEEP`).
    """

    score_kind = "the live system's own score (or -rank when it sends none), higher is better"

    def __init__(self, name: str, params: Any, ds: Any, where: str, base: Path | None = None) -> None:
        self.name = name
        self.params = params
        self.where = where
        self.reader = mapping.HitReader(params.hits, params.id, params.score,
                                        IdMapper(params.id_map, ds.documents, base, params.id_rewrite), where)
        self.limiter = _Limiter(params.rate_limit)
        self.last_latencies_ms: dict[str, float] = {}
        self.last_failures: dict[str, tuple[str, str]] = {}
        self.last_unmapped = 0
        self.last_unmapped_ids: list[str] = []
        self.last_unmapped_by_query: dict[str, tuple[int, int]] = {}
        self.last_unscored = 0
        self.last_notes: list[str] = []
        self.last_raw: dict[str, str] = {}

    def config(self) -> dict[str, Any]:
        """The parameters that shape the ranking (headers' values left out: they may hold keys)."""
        out = self.params.model_dump()
        out["headers"] = sorted(out.get("headers", {}))
        return out

    def values(self, q: Query, k: int) -> dict[str, Any]:
        """What the templates' placeholders take for query ``q``."""
        return {"query": q.text, "k": k, "filters": json.loads(q.filter) if getattr(q, "filter", "") else {}}

    def search(self, queries: Sequence[Query], k: int) -> Run:
        """Each query's top ``k`` from the live system (module docstring); never raises for one query."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        self.last_latencies_ms, self.last_failures, self.last_raw = {}, {}, {}
        self.last_unmapped = self.last_unscored = 0
        self.last_unmapped_ids, self.last_unmapped_by_query = [], {}
        self.last_notes = []
        asked = [q for q in queries if q.text.strip()]
        rows: dict[str, list] = {q.query_id: [] for q in queries}
        if k == 0 or not asked:
            return Run(rows, self.name)
        for q, got, ms in self._fetch_all(asked, k):
            self.last_latencies_ms[q.query_id] = ms
            if isinstance(got, BaseException):
                cls = getattr(got, "error_class", None) or type(got).__name__
                self.last_failures[q.query_id] = (cls, " ".join(str(got).split())[:300])
                continue
            self.last_raw[q.query_id] = clip_raw(got)
            failed = envelope_failure(got)
            if failed:
                self.last_failures[q.query_id] = failed
                continue
            try:
                ex = self.reader.read(got, k)
            except ValueError as exc:
                self.last_failures[q.query_id] = ("malformed", f"{self.where}: {exc}")
                continue
            self.last_unmapped += len(ex.unmapped)
            self.last_unscored += len(ex.unscored)
            self.last_unmapped_by_query[q.query_id] = (len(ex.unmapped), len(ex.unmapped) + len(ex.hits))
            self.last_unmapped_ids.extend(i for i in ex.unmapped[:UNMAPPED_KEPT] if i not in self.last_unmapped_ids)
            del self.last_unmapped_ids[UNMAPPED_KEPT:]
            rows[q.query_id] = ex.hits
        return Run(rows, self.name)

    def _fetch_all(self, queries: list[Query], k: int):
        raise NotImplementedError


def clip_raw(answer: Any) -> str:
    text = json.dumps(answer, ensure_ascii=False)
    return text if len(text) <= RAW_KEEP else text[:RAW_KEEP] + "…"


def reason(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    if inner:  # an ExceptionGroup from a task group: its first cause
        return reason(inner[0])
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def check_common(params: Any) -> str:
    if not (params.id_map in ("doc_id", "address", "reference")
            or any(params.id_map.startswith(p) and len(params.id_map) > len(p) for p in ("metadata:", "table:"))):
        return f"id_map = {params.id_map!r} is not one of {', '.join(mapping.ID_MAPS)}"
    if params.id_rewrite:
        try:
            re.compile(params.id_rewrite[0]).sub(params.id_rewrite[1], "")  # the replacement is parsed here too
        except re.error as exc:
            return (f"id_rewrite = {params.id_rewrite!r}: {exc}; fix the regular expression or the replacement "
                    "(a group of the pattern is \\1 .. \\N)")
    for key in ("hits", "id", "score"):
        expr = getattr(params, key)
        if expr:
            try:
                mapping.compile_path(expr, key)
            except ConfigError as exc:
                return str(exc)
    return ""


