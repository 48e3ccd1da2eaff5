"""Round-trip parity: an exported artifact run on the real engine against the workbench's own fused ranking.

For every query of the chosen splits (dev and test by default) the exported statement (or hybrid query) is run
with the inputs the application would bind, and its ranked doc ids are compared with the workbench's fused run
of the same config over the cached lanes (before any rerank stage, which the export leaves to the application).

* **parity@k**: the share of queries whose top ``k`` doc ids are identical, in order (``k`` = the config's
  ``top_k``; also reported at 10);
* each query that differs is listed with its first differing rank, both doc ids and a **cause** found by
  looking deeper: a lane whose engine rows differ from the cached lane run (and how), a fused-score tie broken
  another way, or fused scores that differ (floating point);
* latency of the exported call per query: p50 / p95 / mean in milliseconds (inputs already computed; the
  embedding of the query is the application's and not counted).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass
class Difference:
    """One query whose top ``k`` differs: first differing ``rank`` (1-based), the doc ids there, and the cause."""

    query_id: str
    query: str
    rank: int
    workbench: str | None
    engine: str | None
    cause: str


@dataclass
class ParityReport:
    """What :func:`verify_postgres` measured (JSON-ready with :meth:`to_json`)."""

    engine: str
    config: str
    dataset: str
    splits: tuple[str, ...]
    k: int
    queries: int
    identical: int
    identical_at_10: int
    latency_ms: dict[str, float]
    differences: list[Difference] = field(default_factory=list)
    statement_checked: int = 0
    statement_mismatches: int = 0

    @property
    def parity(self) -> float:
        """parity@k: the share of queries with identical top ``k`` (1.0 when no query was compared)."""
        return self.identical / self.queries if self.queries else 1.0

    @property
    def parity_at_10(self) -> float:
        """The same at 10."""
        return self.identical_at_10 / self.queries if self.queries else 1.0

    def to_json(self) -> dict[str, Any]:
        """The report as JSON values (the export's provenance, the dashboard, the README)."""
        out = asdict(self)
        out["splits"] = list(self.splits)
        out[f"parity@{self.k}"] = round(self.parity, 6)
        out["parity@10"] = round(self.parity_at_10, 6)
        return out

    def summary(self) -> str:
        """One line: parity@k, the differences by cause, the latency."""
        causes: dict[str, int] = {}
        for d in self.differences:
            causes[d.cause.split(":")[0]] = causes.get(d.cause.split(":")[0], 0) + 1
        why = ("; differences: " + ", ".join(f"{c} {n}" for c, n in sorted(causes.items()))) if causes else ""
        at10 = f", parity@10 {self.parity_at_10:.4f}" if self.k != 10 else ""
        return (f"{self.engine} parity@{self.k} {self.parity:.4f} ({self.identical}/{self.queries} queries identical)"
                f"{at10}{why}; exported call p50 {self.latency_ms['p50']:.1f} ms, "
                f"p95 {self.latency_ms['p95']:.1f} ms")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks (numpy's default, ``linear``);
    0.0 for no values."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def first_difference(a: Sequence[str], b: Sequence[str]) -> int:
    """The 0-based index where ``a`` and ``b`` first differ (``len`` of the shorter when one is a prefix of the
    other and they differ in length), or -1 when identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return -1 if len(a) == len(b) else min(len(a), len(b))


def _explain_lanes(export, lane_rows: dict[int, list[str]], cached: dict[str, list[str]], qid: str) -> str | None:
    """The first lane whose engine rows differ from its cached run, as a cause; None when all agree."""
    for i, part in enumerate(export.lanes):
        mine, theirs = lane_rows.get(i, []), cached[part.name]
        j = first_difference(theirs, mine)
        if j < 0:
            continue
        short = len(mine) < len(theirs)
        how = (f"the engine returned {len(mine)} rows, the workbench's run has {len(theirs)}"
               + (" (a short HNSW scan the workbench answered by an exact scan)" if short and part.kind == "pgvector"
                  else "") if short and j == len(mine) else
               f"rank {j + 1}: workbench {theirs[j] if j < len(theirs) else None}, engine "
               f"{mine[j] if j < len(mine) else None}")
        return f"lane {part.name} ({part.kind}): {how}"
    return None


#: A planner setting's prefix → a statement that loads the extension's library (through the search_path, as the
#: exported function names its types and functions), so its parameters are known to the session.
_LIBRARY_PROBES = {"hnsw.": "SELECT '[1]'::vector", "pg_trgm.": "SELECT similarity('a', 'a')"}


def load_extension_libraries(conn, settings: Mapping[str, Any]) -> None:
    """Load the libraries of the extensions whose parameters ``settings`` names (``hnsw.*``: pgvector,
    ``pg_trgm.*``): until its library is loaded, a parameter is a placeholder, and PostgreSQL refuses a role that
    is not a superuser (a team's reader) a function whose ``SET`` names one ("permission denied to set parameter
    hnsw.ef_search"). A probe that fails is left to the function's own creation to report."""
    import psycopg

    for prefix, probe in _LIBRARY_PROBES.items():
        if any(key.startswith(prefix) for key in settings):
            try:
                with conn.transaction():  # a savepoint: a failed probe leaves the outer transaction usable
                    conn.execute(probe)
            except psycopg.Error:
                pass


def verify_postgres(export, exp, cfg, ds, engine, cache, *, splits: Sequence[str] = ("dev", "test"),
                    statement_sample: int = 20, log: Callable[[str], None] = lambda _m: None) -> ParityReport:
    """Run ``export`` (a :class:`~workbench.export.postgres.PostgresExport`) on the workbench's Postgres for every
    query of ``ds`` in ``splits`` and compare with the workbench's fused run of ``cfg`` (see the module docstring).

    It runs where the export's lanes read: the team's server when they name a team's table
    (``export.dsn``), else the workbench's Postgres. The function is created in the session's ``pg_temp`` inside one
    transaction that turns read-only before the first call and is rolled back at the end, so nothing is left on
    the server and no call can write; the first ``statement_sample`` queries also run as the plain statement with
    ``SET LOCAL`` (what a driver sends), whose answer must equal the function's.

    Raises:
        PgError: the server refuses the function (its message names the line), or is unreachable.
        ConfigError: no query of ``ds`` is in ``splits``.
    """
    import numpy as np
    import psycopg

    from workbench.engines import pg_client as pg
    from workbench.errors import ConfigError, PgError
    from workbench.experiment.runner import fused_run, lane_result
    from workbench.text.query import clean, query_forms

    queries = [q for q in ds.queries if q.split in splits]
    if not queries:
        raise ConfigError(f"dataset {ds.name} has no queries in splits {', '.join(splits)}; choose others with --splits")
    lanes = {ln: lane_result(exp.lanes[ln], ds, engine, cache, exp.depth, log) for ln in cfg.lanes}
    runs = {ln: lr.run for ln, lr in lanes.items()}
    expected = fused_run(replace(cfg, top_k=export.limit, rerank=None), runs)
    texts = {q.query_id: clean(q.text or "") for q in queries}
    vectors: dict[str, dict[str, str | None]] = {}
    for p in export.params:
        if p.name.startswith("p_vec_"):
            emb_name = next(exp.lanes[part.name].parsed().embedder for part in export.lanes
                            if part.kind == "pgvector" and f"%({p.name})s" in part.cte)
            todo = sorted({t for t in texts.values() if t.strip()})
            vecs: np.ndarray | list[Any] = (np.asarray(engine.embedder(emb_name).embed_queries(todo), dtype=np.float32)
                                            if todo else [])
            lit = {t: "[" + ",".join(repr(float(x)) for x in v) + "]" for t, v in zip(todo, vecs)}
            vectors[p.name] = {qid: lit.get(t) for qid, t in texts.items()}
    ref_lane = next((part.name for part in export.lanes if part.kind == "reference"), None)

    def inputs(q) -> dict[str, Any]:
        text = texts[q.query_id]
        out: dict[str, Any] = {}
        for p in export.params:
            if p.name == "p_query":
                out[p.name] = text
            elif p.name == "p_forms":
                out[p.name] = [f for f in query_forms(text) if f.strip()]
            elif p.name == "p_reference":
                out[p.name] = [h.doc_id for h in runs[ref_lane].get_hits(q.query_id)]
            else:
                out[p.name] = vectors[p.name][q.query_id]
        return out

    got: dict[str, list[str]] = {}
    lat: list[float] = []
    diffs: list[Difference] = []
    identical = identical10 = 0
    checked = mismatched = 0
    k = cfg.top_k
    where = "the team's server" if export.dsn is not None else "the workbench's Postgres"
    with pg.connect(export.dsn or engine.dsn()) as conn:
        standby = bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])
        if standby:
            log(f"{where} is a read-only standby, where no function can be created, not even in pg_temp: verifying "
                f"the plain statement ({cfg.name}.statement.sql, what a driver sends) on every query instead")

        def statement(args) -> list[str]:
            with conn.transaction(force_rollback=True):  # the SET LOCALs end with the savepoint
                for key, value in export.settings.items():
                    conn.execute("SELECT set_config(%s, %s, true)", (key, value))
                return [d for d, _s in conn.execute(export.body, args).fetchall()]

        # one transaction, rolled back: the function lives in the session's pg_temp, then the transaction turns
        # read-only before the first call, so nothing is left anywhere and the calls can write nothing
        with conn.transaction(force_rollback=True):
            try:
                if not standby:
                    # a reader role's default_transaction_read_only is lifted for this rolled-back transaction only:
                    # PostgreSQL refuses CREATE FUNCTION, even in pg_temp, in a read-only one
                    conn.execute("SET TRANSACTION READ WRITE")
                    load_extension_libraries(conn, export.settings)
                    conn.execute(export.function_sql(schema="pg_temp"))
                conn.execute("SET TRANSACTION READ ONLY")
            except psycopg.Error as exc:
                raise PgError(f"PostgreSQL ({where}) refused the exported function of {cfg.name}: "
                              f"{pg.first_line(exc)}") from None
            try:
                for n, q in enumerate(queries):
                    args = inputs(q)
                    t0 = time.perf_counter()
                    if standby:
                        got[q.query_id] = statement(args)
                    else:
                        got[q.query_id] = [d for d, _s in conn.execute(export.call_sql(schema="pg_temp"),
                                                                       args).fetchall()]
                    lat.append((time.perf_counter() - t0) * 1000.0)
                    if n < statement_sample and not standby:
                        checked += 1
                        mismatched += statement(args) != got[q.query_id]
                    want = [h.doc_id for h in expected.get_hits(q.query_id)]
                    same_k = want[:k] == got[q.query_id][:k]
                    identical += same_k
                    identical10 += want[:10] == got[q.query_id][:10]
                    if not same_k:
                        diffs.append(_difference(conn, export, cfg, runs, expected, q, want, got[q.query_id], args, k))
            except psycopg.Error as exc:  # installed, but a call fails (a limit out of range, a type the driver sent)
                raise PgError(f"the exported function of {cfg.name} failed when called for query {q.query_id}: "
                              f"{pg.first_line(exc)}; the export is not usable as it stands") from None
    return ParityReport("postgres", cfg.name, ds.name, tuple(splits), k, len(queries), identical, identical10,
                        {"p50": percentile(lat, 50), "p95": percentile(lat, 95),
                         "mean": statistics.fmean(lat) if lat else 0.0},
                        diffs, checked, mismatched)


def _difference(conn, export, cfg, runs, expected, q, want: list[str], got: list[str], args, k: int) -> Difference:
    """Where the exported ranking of query ``q`` first leaves the workbench's, and why (a lane, a tie, a score)."""
    j = first_difference(want[:k], got[:k])
    lane_rows: dict[int, list[str]] = {}
    for i, d, _s, _r in conn.execute(export.lanes_sql(), args).fetchall():
        lane_rows.setdefault(i, []).append(d)
    cause = _explain_lanes(export, lane_rows, {ln: [h.doc_id for h in runs[ln].get_hits(q.query_id)]
                                               for ln in cfg.lanes}, q.query_id)
    if cause is None:
        scores: dict[str | None, float] = {h.doc_id: h.score for h in expected.get_hits(q.query_id)}
        a = want[j] if j < len(want) else None
        b = got[j] if j < len(got) else None
        if a is not None and b is not None and scores.get(a) == scores.get(b):
            cause = f"tie: fused score {scores[a]!r} shared by {a} and {b}, broken another way"
        else:
            cause = (f"fused scores: workbench {a} {scores.get(a)!r}, engine {b} "
                     f"{scores.get(b) if b in scores else 'not in the workbench top'}")
    return Difference(q.query_id, q.text, j + 1, want[j] if j < len(want) else None, got[j] if j < len(got) else None,
                      cause)


def verify_run(search, engine_name: str, exp, cfg, ds, engine, cache, *, splits: Sequence[str] = ("dev", "test"),
               hints: dict[str, str] | None = None, log: Callable[[str], None] = lambda _m: None) -> ParityReport:
    """Parity of an artifact that answers a batch of queries: ``search(queries) -> (Run, latency ms per query)``
    (:meth:`workbench.export.opensearch.OpenSearchExport.search`), against the workbench's fused run of ``cfg``
    over the cached lanes. A difference's cause is one of ``tie`` (equal fused scores in the workbench, broken
    another way), ``depth`` (the engine ranked a document no lane's cached top depth holds), ``scores`` (both
    fused by the workbench, in the other order), each followed by ``hints[cause]``, the engine's reason.

    Raises:
        ConfigError: no query of ``ds`` is in ``splits``; the engine's errors as raised by ``search``.
    """
    from workbench.errors import ConfigError
    from workbench.experiment.runner import fused_run, lane_result

    queries = [q for q in ds.queries if q.split in splits]
    if not queries:
        raise ConfigError(f"dataset {ds.name} has no queries in splits {', '.join(splits)}; choose others with --splits")
    runs = {ln: lane_result(exp.lanes[ln], ds, engine, cache, exp.depth, log).run for ln in cfg.lanes}
    expected = fused_run(replace(cfg, rerank=None), runs)
    got, lat = search(queries)
    k, diffs, identical, identical10 = cfg.top_k, [], 0, 0
    for q in queries:
        want = [h.doc_id for h in expected.get_hits(q.query_id)][:k]
        mine = [h.doc_id for h in got.get_hits(q.query_id)][:k]
        identical += want == mine
        identical10 += want[:10] == mine[:10]
        if want == mine:
            continue
        j = first_difference(want, mine)
        a = want[j] if j < len(want) else None
        b = mine[j] if j < len(mine) else None
        scores: dict[str | None, float] = {h.doc_id: h.score for h in expected.get_hits(q.query_id)}
        pooled = {h.doc_id for r in runs.values() for h in r.get_hits(q.query_id)}
        if a is not None and b is not None and scores.get(a) == scores.get(b):
            kind, cause = "tie", f"tie: fused score {scores[a]!r} shared by {a} and {b}, broken another way"
        elif b is not None and b not in pooled:
            kind, cause = "depth", f"depth: the engine ranked {b}, which no lane's cached top {exp.depth} holds"
        elif b is not None and b not in scores:
            kind, cause = "depth", (f"depth: the engine ranked {b}, which the workbench fused below its top "
                                    f"{len(scores)} or outside a lane's depth")
        else:
            kind, cause = "scores", (f"scores: the workbench ranks {a} ({scores.get(a)!r}) above {b} "
                                     f"({scores.get(b)!r}); the engine's fused scores order them the other way")
        if hints and hints.get(kind):
            cause += f" ({hints[kind]})"
        diffs.append(Difference(q.query_id, q.text, j + 1, a, b, cause))
    ms = [lat.get(q.query_id, 0.0) for q in queries]
    return ParityReport(engine_name, cfg.name, ds.name, tuple(splits), k, len(queries), identical, identical10,
                        {"p50": percentile(ms, 50), "p95": percentile(ms, 95),
                         "mean": statistics.fmean(ms) if ms else 0.0}, diffs)
