"""What the PostgreSQL lanes share: :class:`SqlLane`, a lane over one index table with one session.

The lane base class lives here, beside the lanes (pgvector, full text, trigram), not in the
connection module :mod:`workbench.engines.pg_client`: the core keeps connections and checks, the plug-ins keep
what a lane does with them.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from workbench.engines import pg_client as pg
from workbench.engines import pg_index as indexer
from workbench.engines.pg_client import Session, first_line
from workbench.errors import PgError
from workbench.registry import RetrieverKind
from workbench.text import doctext


class SqlLane:
    """Mechanics shared by the Postgres lanes (vector, full text, trigram).

    Holds a :class:`Session` and the index table; :meth:`_run` answers a batch of
    queries in one connection: each query's text is cleaned by the query normaliser
    (:func:`workbench.text.query.clean`: NFC, so NFD input ranks the same; invisible and
    control characters removed), an empty or whitespace-only query (or ``k == 0``) gets an empty ranking
    without a database call, every other query is answered by the subclass's
    ``one(conn, text, k, where)`` and timed; ``where`` is the query's filter as a SQL condition and its
    parameters (:func:`workbench.engines.pg_index.facets_sql`; ``("", {})`` without a filter), which the lane
    puts in its statement's ``WHERE`` (the filter is applied by Postgres, inside the index scan where it can be).
    ``last_latencies_ms`` maps each query_id of the last batch to its wall time in milliseconds (0.0 for a skipped query).

    Args:
        name: the lane's name.
        dsn: the read-only role's DSN (:func:`reader_dsn`) or a connection factory.
        table: an :class:`workbench.engines.pg_index.IndexInfo` or the table name (looked up
            in the registry on first use).
    """

    name: str
    score_kind: str

    def __init__(self, name: str, dsn, table):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a lane needs a non-empty name, got {name!r}")
        self.name = name
        self._session = Session(dsn)
        if isinstance(table, str):
            if not table:
                raise ValueError("table must be a non-empty table name or an IndexInfo")
            self.table, self._info = table, None
        else:
            self.table, self._info = table.table, table
        self.last_latencies_ms: dict[str, float] = {}

    def index_info(self):
        """The table's :class:`~workbench.engines.pg_index.IndexInfo` (from the registry when a name was given).

        Raises:
            PgError: the table is not a registered index on this server.
        """
        if self._info is None:
            from workbench.engines.pg_index import lookup_table

            conn = self._session.get()
            info = self._guard(lambda: lookup_table(conn, self.table))
            if info is None:
                raise PgError(f"lane {self.name}: table {self.table!r} is not a registered workbench index at "
                              f"{self._session.dsn}; run the indexer (workbench.engines.pg_index.index_dataset) first")
            self._info = info
        return self._info

    def close(self) -> None:
        """Close the lane's connection (it reopens on the next search)."""
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _guard(self, fn, data_errors: bool = False):
        """Run ``fn()``, turning database errors into :class:`PgError` naming the lane and table
        (with ``data_errors``, a :class:`psycopg.DataError` is raised as it is, for the caller to isolate)."""
        import psycopg

        try:
            return fn()
        except psycopg.errors.UndefinedTable:
            raise PgError(f"lane {self.name}: table {self.table!r} does not exist at {self._session.dsn}; "
                          "index the dataset first") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise PgError(f"lane {self.name}: no read access to {self.table!r} ({first_line(exc)}); "
                          "re-run ensure_reader (indexing does) as the indexing user") from None
        except psycopg.OperationalError as exc:
            self._session.close()
            raise PgError(f"lane {self.name}: lost the connection to {self._session.dsn}: {first_line(exc)}; "
                          "is the server running?") from None
        except psycopg.Error as exc:
            if data_errors and isinstance(exc, psycopg.DataError):
                raise
            raise PgError(f"lane {self.name}: query on {self.table!r} failed: {first_line(exc)}") from None

    def _where(self, q) -> tuple[str, dict]:
        """Query ``q``'s filter as ``(SQL condition, parameters)`` (``("", {})`` without one)."""
        from workbench.io.facets import parse_filter

        flt = getattr(q, "filter", "")
        return indexer.facets_sql(parse_filter(flt)) if flt else ("", {})

    @staticmethod
    def _check_k(k) -> int:
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ValueError(f"k must be an integer >= 0, got {k!r}")
        return k

    def _set(self, conn, settings: Mapping[str, Any]) -> None:
        """``set_config`` every GUC for the session (values as strings; SET takes no parameters)."""
        for key, value in settings.items():
            self._guard(lambda key=key, value=value: conn.execute("SELECT set_config(%s, %s, false)", (key, str(value))))

    def _run(self, queries, k: int, one, before=None, transliterate: bool = False):
        """Answer ``queries`` (see the class docstring); ``before(conn)`` runs once first.

        Each query's text is cleaned by :func:`workbench.text.query.clean`; with ``transliterate`` every form of
        :func:`workbench.text.query.query_forms` is searched and each document keeps its best score (the top
        ``k`` by best score is within the union of the forms' top ``k``). A query the server refuses as data
        (:class:`psycopg.DataError`) gets an empty ranking and a warning on stderr; the others are answered.
        """
        import time

        import psycopg

        from workbench.run import Run
        from workbench.text.query import clean, query_forms

        k = self._check_k(k)
        rows: dict[str, list[tuple[str, float]]] = {}
        lat: dict[str, float] = {}
        conn = None
        for q in queries:
            forms = query_forms(q.text or "") if transliterate else [clean(q.text or "")]
            forms = [f for f in forms if f.strip()]
            if k == 0 or not forms:
                rows[q.query_id], lat[q.query_id] = [], 0.0
                continue
            if conn is None:
                conn = self._session.get()
                if before is not None:
                    before(conn)
            t0 = time.perf_counter()
            best: dict[str, float] = {}
            where = self._where(q)
            for form in forms:
                try:
                    found = self._guard(lambda conn=conn, form=form, where=where: one(conn, form, k, where), data_errors=True)
                except psycopg.DataError as exc:
                    print(f"lane {self.name}: query {q.query_id} refused by the server ({first_line(exc)}); "
                          "it gets an empty ranking", file=sys.stderr)
                    found = []
                for d, s in found:
                    if s > best.get(d, float("-inf")):
                        best[d] = s
            ranked = sorted(best.items(), key=lambda ds: (-ds[1], ds[0]))
            rows[q.query_id] = ranked[:k]
            lat[q.query_id] = (time.perf_counter() - t0) * 1000.0
        self.last_latencies_ms = lat
        return Run(rows, self.name)


class TextIndexKind(RetrieverKind):
    """What the full-text and trigram kinds share: they open :attr:`lane_class` on the dataset's PostgreSQL
    text index (that of the experiment's first embedder), passing their parameters as keywords."""

    lane_class: type
    code = (sys.modules[__name__], pg, indexer, doctext)
    native_filters = True

    def open(self, name: str, params: Any, ds, res):
        """The lane on ``ds``'s text index."""
        info = res.pg_index(ds, None)
        return self.lane_class(name, res.reader(), info.table, **params.model_dump())
