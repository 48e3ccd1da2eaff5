"""The pgvector lane: cosine nearest neighbours over an HNSW index (or an exact scan).

Raw score: **cosine similarity** = ``1 - (embedding <=> query)`` (pgvector's cosine
distance), in [-1, 1], higher is better.

Row count (pgvector's ``hnsw.ef_search`` caps what one HNSW scan returns): for a
search with depth ``k`` the lane sets ``hnsw.ef_search = min(max(ef_search, k), 1000)``
so a scan can yield ``k`` rows with iterative scan off; above 1000 (pgvector's maximum)
with iterative scan off it switches that search to ``strict_order`` iterative scan,
which keeps scanning past ``ef_search`` (up to ``hnsw.max_scan_tuples``). A query for
which the index still returns fewer than ``min(k, rows in the table)`` rows (an
unreachable part of the graph) is answered by an exact scan instead and listed in
``last_exact_fallbacks``. ``relaxed_order`` can return rows slightly out of order: the
run re-sorts by score (the tie-break rule), i.e. by distance.

``exact=True`` scans every row (``enable_indexscan = off``, ordered by distance then
``doc_id``): the ground truth to measure the ANN recall of the same table.

In ANN mode ``enable_seqscan`` is off for the session so that the planner uses the
HNSW index even on a small table (where a sequential scan looks cheaper).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, Optional

import numpy as np
from pydantic import Field

from retrievers import _sql
from retrievers._sql import ProductionTable, SqlKind, SqlLane, production_lane
from workbench.engines import pg_client as pg
from workbench.engines import pg_index as indexer
from workbench.errors import ConfigError
from workbench.registry import Params
from workbench.run import Run
from workbench.text import doctext
from workbench.types import Query

ITERATIVE_SCANS = ("relaxed_order", "strict_order", "off")
EF_SEARCH_MAX = 1000


class VectorLane(SqlLane):
    """Cosine search with pgvector (see the module docstring).

    Args:
        name: lane name.
        dsn: the read-only role's DSN or a connection factory.
        table: the :class:`~workbench.engines.pg_index.IndexInfo` or its table name.
        embedder: the embedder the table was built with (same ``model_id`` and ``dim``,
            checked on first search); queries go through ``embed_queries`` in one batch.
        ef_search: HNSW candidate list size, 1..1000 (raised to ``k`` per search).
        iterative_scan: ``relaxed_order``, ``strict_order`` or ``off``.
        max_scan_tuples: ``hnsw.max_scan_tuples``, the bound on an iterative scan.
        exact: exact scan instead of the index.
        production: a team's table (:class:`retrievers._sql.Production`) instead of ``table``: its vector column,
            whose dimension must be the embedder's (its HNSW index, if any, is the team's own).

    Attributes:
        last_latencies_ms: per query_id, ms: the query's SQL round trip plus an equal
            share of the batch's embedding time.
        last_embed_ms: ms spent embedding the last batch.
        last_exact_fallbacks: query_ids of the last batch answered by an exact scan
            because the index returned too few rows (unfiltered queries only).
        last_under_returned: query_ids of the last batch whose filtered HNSW scan returned fewer than ``k`` rows
            although the filter admits at least ``k`` (or fewer than all it admits): pgvector filters after the
            scan, and ``iterative_scan`` / ``max_scan_tuples`` decide how far it goes on; never papered over.

    Raises:
        ConfigError: a parameter out of range.
    """

    score_kind = "cosine similarity = 1 - pgvector cosine distance, in [-1, 1], higher is better"

    def __init__(self, name: str, dsn, table, embedder, *, ef_search: int = 100,
                 iterative_scan: str = "relaxed_order", max_scan_tuples: int = 20000, exact: bool = False,
                 production=None):
        super().__init__(name, dsn, table, production)
        if not isinstance(ef_search, int) or isinstance(ef_search, bool) or not 1 <= ef_search <= EF_SEARCH_MAX:
            raise ConfigError(f"lane {name}: ef_search must be an integer in 1..{EF_SEARCH_MAX}, got {ef_search!r}")
        if iterative_scan not in ITERATIVE_SCANS:
            raise ConfigError(f"lane {name}: iterative_scan must be one of {', '.join(ITERATIVE_SCANS)}, got {iterative_scan!r}")
        if not isinstance(max_scan_tuples, int) or max_scan_tuples < 1:
            raise ConfigError(f"lane {name}: max_scan_tuples must be a positive integer, got {max_scan_tuples!r}")
        self.embedder = embedder
        self.ef_search = ef_search
        self.iterative_scan = iterative_scan
        self.max_scan_tuples = max_scan_tuples
        self.exact = bool(exact)
        self.last_embed_ms = 0.0
        self.last_exact_fallbacks: list[str] = []
        self.last_under_returned: list[str] = []
        self._admitted_counts: dict = {}
        self._checked = False

    def config(self) -> dict[str, Any]:
        """Every engine parameter that shapes the ranking (keys the candidate cache)."""
        return {"kind": "pgvector", "table": self.table, "production": self.production is not None,
                "model_id": self.embedder.model_id, "dim": self.embedder.dim,
                "distance": "cosine", "exact": self.exact, "ef_search": self.ef_search,
                "ef_search_rule": f"min(max(ef_search, k), {EF_SEARCH_MAX})", "iterative_scan": self.iterative_scan,
                "max_scan_tuples": self.max_scan_tuples}

    def effective_settings(self, k: int) -> dict[str, str]:
        """The GUCs a search with depth ``k`` sets (see the module docstring)."""
        ef = min(max(self.ef_search, k), EF_SEARCH_MAX)
        it = self.iterative_scan
        if k > EF_SEARCH_MAX and it == "off":
            it = "strict_order"
        return {"hnsw.ef_search": str(ef), "hnsw.iterative_scan": it, "hnsw.max_scan_tuples": str(self.max_scan_tuples),
                "enable_indexscan": "off" if self.exact else "on", "enable_seqscan": "on" if self.exact else "off"}

    def index_info(self) -> Any:
        """The index's :class:`~workbench.engines.pg_index.IndexInfo`; on a team's table, what the check read:
        ``table``, ``vector_type``, ``dim``, ``doc_count`` and ``model_id`` (the lane's embedder: the team's
        vectors carry no model id, so only the dimension is checked)."""
        if self.production is None:
            return super().index_info()
        from types import SimpleNamespace

        facts = self.checked_production()
        return SimpleNamespace(table=self.table, vector_type=facts["vector_type"], dim=facts["dim"],
                               doc_count=facts["rows"], model_id=self.embedder.model_id)

    def _check_index(self) -> Any:
        info = self.index_info()
        if not self._checked:
            if info.model_id != self.embedder.model_id or info.dim != self.embedder.dim:
                raise ConfigError(f"lane {self.name}: table {self.table} holds {info.model_id} vectors (dim {info.dim}) "
                                  if self.production is None else
                                  f"lane {self.name}: column {self.production.table.vector} of {self.table} holds "
                                  f"vectors of dim {info.dim} "
                                  f"but the lane's embedder is {self.embedder.model_id} (dim {self.embedder.dim}); "
                                  "use the embedder the index was built with")
            self._checked = True
        return info

    def search(self, queries: Sequence[Query], k: int) -> Run:
        """Top ``k`` documents by cosine similarity for every query (empty ranking for an empty query).

        Raises:
            ValueError: ``k`` is not an integer >= 0.
            ConfigError: the embedder does not match the index, or returns a wrong shape.
            PgError: the table is missing or the server is unreachable.
        """
        from workbench.text.query import clean

        k = self._check_k(k)
        texts = list(dict.fromkeys(t for t in (clean(q.text or "") for q in queries) if t.strip()))
        self.last_exact_fallbacks = []
        self.last_under_returned = []
        self.last_embed_ms = 0.0
        if k == 0 or not texts:
            return self._run(queries, k, lambda conn, text, k: [])
        info = self._check_index()
        t0 = time.perf_counter()
        vecs = np.asarray(self.embedder.embed_queries(texts), dtype=np.float32)
        self.last_embed_ms = (time.perf_counter() - t0) * 1000.0
        if vecs.shape != (len(texts), info.dim):
            raise ConfigError(f"lane {self.name}: embedder {self.embedder.model_id} returned shape {vecs.shape} "
                              f"for {len(texts)} queries; expected ({len(texts)}, {info.dim})")
        literal = {t: "[" + ",".join(repr(float(x)) for x in v) + "]" for t, v in zip(texts, vecs)}
        vt = info.vector_type
        table = self.relation
        ann = (f"SELECT doc_id, embedding <=> %(v)s::{vt} AS d FROM {table} t {{where}}"
               f"ORDER BY embedding <=> %(v)s::{vt} LIMIT %(k)s")
        exact = (f"SELECT doc_id, embedding <=> %(v)s::{vt} AS d FROM {table} t {{where}}"
                 f"ORDER BY d, doc_id COLLATE \"C\" LIMIT %(k)s")
        fallbacks: list[str] = []
        under: list[str] = []

        def one(conn, text: str, k: int, where) -> list[tuple[str, float]]:
            params = {"v": literal[text], "k": k, **where[1]}
            cond = f"WHERE {where[0]} " if where[0] else ""
            rows = conn.execute((exact if self.exact else ann).replace("{where}", cond), params).fetchall()
            if not self.exact and where[0]:
                # a filtered HNSW scan returns what it returns: fewer than k rows is the under-return that
                # hnsw.iterative_scan exists to prevent, measured, not papered over by an exact scan
                if len(rows) < min(k, self._admitted(conn, where)):
                    under.append(text)
            elif not self.exact and len(rows) < min(k, info.doc_count):
                self._set(conn, {"enable_indexscan": "off", "enable_seqscan": "on"})
                rows = conn.execute(exact.replace("{where}", ""), params).fetchall()
                self._set(conn, {"enable_indexscan": "on", "enable_seqscan": "off"})
                fallbacks.append(text)
            return [(doc_id, 1.0 - float(d)) for doc_id, d in rows if d is not None and np.isfinite(d)]

        run = self._run(queries, k, one, before=lambda conn: self._set(conn, self.effective_settings(k)))
        share = self.last_embed_ms / len(texts)
        self.last_latencies_ms = {q: (ms + share if ms else ms) for q, ms in self.last_latencies_ms.items()}
        fb = set(fallbacks)
        self.last_exact_fallbacks = [q.query_id for q in queries if clean(q.text or "") in fb]
        short = set(under)
        self.last_under_returned = [q.query_id for q in queries if q.filter and clean(q.text or "") in short]
        return run

    def _admitted(self, conn, where) -> int:
        """How many rows of the table the filter ``where`` admits (counted once per filter)."""
        key = (where[0], repr(sorted(where[1].items())))
        if key not in self._admitted_counts:
            sql = f"SELECT count(*) FROM {self.relation} t WHERE {where[0]}"
            self._admitted_counts[key] = int(conn.execute(sql, where[1]).fetchone()[0])
        return self._admitted_counts[key]


class PgVectorParams(Params):
    """Parameters of a ``kind = "pgvector"`` lane (see :class:`VectorLane`)."""

    embedder: str = Field(min_length=1, description="the [embedders.NAME] whose vectors the lane searches")
    ef_search: int = Field(100, ge=1, le=EF_SEARCH_MAX, description="HNSW candidate list size (raised to the depth)")
    iterative_scan: Literal["relaxed_order", "strict_order", "off"] = Field(
        "relaxed_order", description="pgvector iterative index scan mode")
    exact: bool = Field(False, description="exact scan instead of the HNSW index (the ANN ground truth)")
    max_scan_tuples: int = Field(20000, ge=1, description="hnsw.max_scan_tuples, the bound on an iterative scan")
    table: Optional[ProductionTable] = Field(None, description="a team's own table, read-only (name, id, vector, "
                                             "dsn_env) instead of the workbench's index")


class PgVectorKind(SqlKind):
    """``pgvector``: cosine nearest neighbours over the dataset's HNSW index in PostgreSQL."""

    kind = "pgvector"
    summary = "pgvector HNSW cosine search (PostgreSQL); score: cosine similarity, higher is better"
    Params = PgVectorParams
    code = (_sql, pg, indexer, doctext)
    columns = (("embedding", "vector"),)

    def exact_twin(self, params: PgVectorParams) -> dict | None:
        """``exact = true``: every row scanned (None for a lane that is exact already). The HNSW settings an exact
        scan ignores are set to their defaults, so the twins of lanes that differ only in them are one cached
        run."""
        if params.exact:
            return None
        fields = PgVectorParams.model_fields
        return {"exact": True, **{key: fields[key].default for key in ("ef_search", "iterative_scan",
                                                                        "max_scan_tuples")}}

    def open(self, name: str, params: PgVectorParams, ds, res) -> VectorLane:
        """The lane on ``ds``'s index built with ``params.embedder`` (built when missing), or on the team's
        ``table`` (nothing built)."""
        kw = dict(ef_search=params.ef_search, iterative_scan=params.iterative_scan,
                  max_scan_tuples=params.max_scan_tuples, exact=params.exact)
        prod = self.production(params, res)
        if prod is not None:
            res.log(f"lane {name}: {prod.describe()}")
            return production_lane(VectorLane(name, None, None, res.embedder(params.embedder), production=prod, **kw),
                                   params.table, ds)
        info = res.pg_index(ds, params.embedder)
        return VectorLane(name, res.reader(), info.table, res.embedder(params.embedder), **kw)
