"""What the PostgreSQL lanes share: :class:`SqlLane`, a lane over one index table with one session.

The lane base class lives here, beside the lanes (pgvector, full text, trigram), not in the
connection module :mod:`workbench.engines.pg_client`: the core keeps connections and checks, the plug-ins keep
what a lane does with them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from pydantic import Field, field_validator

from workbench.engines import pg_client as pg
from workbench.engines import pg_index as indexer
from workbench.engines.pg_client import Session, first_line
from workbench.errors import ConfigError, PgError
from workbench.registry import Params, RetrieverKind
from workbench.text import doctext

#: The keys of :class:`ProductionTable` that name a schema, table or column.
_NAMES = ("name", "schema_name", "id", "vector", "tsvector", "text")


class ProductionTable(Params):
    """A team's own table, read where it is (``[lanes.NAME.table]``): the lane searches it instead of the
    workbench's index, read-only, and never creates, indexes or writes anything there.

    The rows' ids (``id`` as text: a uuid in its canonical lower-case form) are the dataset's ``doc_id`` s: bring the
    corpus as a ``files`` dataset exported from the same table (docs/how-to/your-data.md).
    """

    name: str = Field(description="the table (or view) holding the documents")
    schema_name: Optional[str] = Field(None, alias="schema",
                                       description="its schema (default: the connection's search_path)")
    dsn_env: Optional[str] = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                   description="environment variable holding the server's DSN (never written "
                                               "anywhere); default: the workbench's own server, as its reader role")
    id: str = Field("id", description="the id column (any type; read as text)")
    vector: Optional[str] = Field(None, description="pgvector lanes: the vector or halfvec column")
    tsvector: Optional[str] = Field(None, description="fulltext lanes: the tsvector column")
    ts_config: Optional[str] = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$",
                                     description="fulltext lanes: the text search configuration the tsvector column "
                                                 "was built with (russian, simple, public.pali …)")
    text: Optional[str] = Field(None, description="trigram lanes: the text column")
    max_unmapped: float = Field(0.5, ge=0.0, le=1.0, description="the largest share of returned ids that may name "
                                "no document of the dataset (more fails the eval)")

    model_config = Params.model_config | {"populate_by_name": True}

    @field_validator(*_NAMES)
    @classmethod
    def _sql_name(cls, v: Any) -> Any:
        """Any identifier PostgreSQL allows (the workbench quotes it, so case and spaces are kept), except ``%`` and
        NUL, which cannot travel in a driver's statement."""
        if isinstance(v, str) and not (0 < len(v.encode()) <= 63 and "%" not in v and "\x00" not in v):
            raise ValueError(f"must be a PostgreSQL name of 1 to 63 bytes without % or NUL, as the table has it "
                             f"(got {v!r})")
        return v

    def qualified(self) -> str:
        """``schema.name`` as written (for messages and the cache key)."""
        return f"{self.schema_name}.{self.name}" if self.schema_name else self.name

    def dsn(self, reader: Any = None) -> str:
        """The DSN the lane connects with: ``$dsn_env``, else ``reader()`` (the workbench's reader role).

        Raises:
            ConfigError: ``dsn_env`` names an unset or empty variable, or one whose value is not a DSN (its value is
                never shown: the driver's message quotes pieces of it, and a piece may be the password).
        """
        if self.dsn_env is None:
            return reader()
        value = os.environ.get(self.dsn_env, "")
        if not value.strip():
            raise ConfigError(f"table {self.qualified()}: environment variable {self.dsn_env} (dsn_env) is not set; "
                              f"export {self.dsn_env}='postgresql://USER@HOST/DB' before running")
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(value)
        except Exception as exc:  # psycopg.ProgrammingError: "missing "=" after "<a piece of the value>" …"
            text = str(exc).strip()
            why = text.splitlines()[0] if text.startswith("invalid connection option") else "it does not parse"
            raise ConfigError(f"table {self.qualified()}: environment variable {self.dsn_env} (dsn_env) does not hold "
                              f"a PostgreSQL DSN ({why}; the value is not shown: it may hold a password); write "
                              "postgresql://USER:PASSWORD@HOST:PORT/DB with @ : / % in the password percent-encoded, "
                              "or key=value pairs with a value holding spaces in single quotes") from None
        return value


def production_problem(table: ProductionTable | None, column: str, kind: str) -> str:
    """What a ``kind`` lane's ``table`` lacks (``column``: the key it needs, ``vector`` …), or ``""``."""
    if table is None:
        return ""
    if getattr(table, column) is None:
        return f"table.{column} is required: the {kind} lane reads that column of {table.qualified()}"
    if kind == "fulltext" and table.ts_config is None:
        return (f"table.ts_config is required: the text search configuration {table.tsvector} was built with "
                "(the query is parsed with the same one)")
    return ""


@dataclass(frozen=True)
class Production:
    """A lane's view of a :class:`ProductionTable`: the SQL relation its statements read (a subquery renaming the
    team's columns to the workbench's: ``doc_id``, ``embedding``, ``tsv``, ``body``; PostgreSQL pulls it up into
    the outer query, so the table's own HNSW, GIN and trigram indexes serve it) and the DSN."""

    table: ProductionTable
    dsn: str
    columns: tuple[tuple[str, str], ...]  # (workbench name, team's column)

    @property
    def relation(self) -> str:
        """``(SELECT "id"::text AS doc_id, "embedding" AS embedding FROM "public"."chunks" WHERE "id" IS NOT NULL)``."""
        t = self.table
        cols = "".join(f", {_ident(col)} AS {wb}" for wb, col in self.columns)
        ident, rel = _ident(t.id), _regclass(t)
        # a row without an id maps to no document: it is skipped (and counted by check_production)
        return f"(SELECT {ident}::text AS doc_id{cols} FROM {rel} WHERE {ident} IS NOT NULL)"

    def describe(self) -> str:
        """One line: what is read, where, and that nothing is written."""
        return (f"reads the team's table {self.table.qualified()} at {pg.redact_dsn(self.dsn)} read-only "
                "(nothing created, indexed or written there)")


def check_production(conn, prod: Production, lane: str) -> dict[str, Any]:
    """Check the team's table before the first search and describe it: the session is read-only, the table
    and each named column exist, with the right types (the vector column's type and dimension are read, from the
    rows when the column declares none; the tsvector column is a tsvector, the trigram column text, ``ts_config``
    exists), the ids are unique; the rows with an id are counted, and those without one (skipped) reported on stderr,
    as is a table without rows.

    Returns:
        ``{"rows": int, "vector_type": "vector" | "halfvec" | None, "dim": int | None, "null_ids": int}``.

    Raises:
        PgError: the session is not read-only, the table or a column is missing or of the wrong type, the
            configuration is unknown, or an id repeats (one line naming it and the fix).
    """
    t = prod.table
    if conn.execute("SHOW transaction_read_only").fetchone()[0] != "on":
        raise PgError(f"lane {lane}: the session on {pg.redact_dsn(prod.dsn)} is not read-only; refusing to read "
                      f"{t.qualified()} through it")
    oid = conn.execute("SELECT to_regclass(%s)::oid", (_regclass(t),)).fetchone()[0]
    if oid is None:
        raise PgError(f"lane {lane}: table {t.qualified()} does not exist at {pg.redact_dsn(prod.dsn)} (or is not "
                      "visible to that role); check [lanes.NAME.table] name, schema and dsn_env")
    cols = dict(conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s "
                             "AND attnum > 0 AND NOT attisdropped", (oid,)).fetchall())
    for key, col in [("id", t.id)] + [(wb, c) for wb, c in prod.columns]:
        if col not in cols:
            raise PgError(f"lane {lane}: table {t.qualified()} has no column {col!r} (table.{_key(key)}); its columns: "
                          f"{', '.join(sorted(cols))}")
    vtype = dim = None
    named = dict(prod.columns)
    vec = named.get("embedding")
    if vec is not None:
        typ = cols[vec]
        base, _, rest = typ.partition("(")
        schema, dot, bare = base.rpartition(".")
        if dot and bare in ("vector", "halfvec"):  # format_type qualifies a type its search_path does not reach
            raise PgError(f"lane {lane}: column {vec} of {t.qualified()} is {typ}: pgvector lives in schema {schema}, "
                          "which is not on that role's search_path; add it (ALTER ROLE … SET search_path = "
                          f"\"$user\", public, {schema}, or options=-csearch_path=public,{schema} in the DSN)")
        if base not in ("vector", "halfvec") or not (rest == "" or rest.rstrip(")").isdigit()):
            raise PgError(f"lane {lane}: column {vec} of {t.qualified()} is {typ}, not a pgvector vector(N) or "
                          "halfvec(N) column")
        vtype = base
        if rest:
            dim = int(rest.rstrip(")"))
        else:  # a column declared without its dimension (``embedding vector``): read it from the rows
            lo, hi = conn.execute(f"SELECT min(vector_dims(t.embedding)), max(vector_dims(t.embedding)) "
                                  f"FROM {prod.relation} t").fetchone()
            if lo != hi:
                raise PgError(f"lane {lane}: column {vec} of {t.qualified()} holds vectors of dimensions {lo} to {hi}; "
                              "a lane searches one dimension: declare it (vector(N)) or name a view of one")
            dim = lo
    tsv = named.get("tsv")
    if tsv is not None and cols[tsv] != "tsvector":
        raise PgError(f"lane {lane}: column {tsv} of {t.qualified()} (table.tsvector) is {cols[tsv]}, not tsvector; "
                      "name the tsvector column, or search a text column with a trigram lane")
    body = named.get("body")
    if body is not None and cols[body].partition("(")[0] not in ("text", "character varying", "character", "citext"):
        raise PgError(f"lane {lane}: column {body} of {t.qualified()} (table.text) is {cols[body]}, not text; "
                      "name a text or varchar column")
    if tsv is not None and t.ts_config is not None:
        import psycopg

        try:  # resolved as the lane's statements resolve it (search_path, case folded); the session is autocommit
            conn.execute("SELECT %s::regconfig", (t.ts_config,))
        except (psycopg.errors.UndefinedObject, psycopg.errors.InvalidSchemaName):
            raise PgError(f"lane {lane}: text search configuration {t.ts_config!r} (table.ts_config) does not exist "
                          f"at {pg.redact_dsn(prod.dsn)}; name the one {tsv} was built with (\\dF lists them)") from None
    ident = _ident(t.id)
    rows, null_ids = conn.execute(f"SELECT count(*) FILTER (WHERE {ident} IS NOT NULL), count(*) FILTER (WHERE "
                                  f"{ident} IS NULL) FROM {_regclass(t)}").fetchone()
    unique = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                          "AND a.attnum = i.indkey[0] WHERE i.indrelid = %s AND i.indisunique AND i.indnkeyatts = 1 "
                          "AND i.indpred IS NULL AND a.attname = %s)", (oid, t.id)).fetchone()[0]
    if not unique:  # a view, or a column without a unique index: look (one scan, once per lane)
        dups, example = conn.execute(f"SELECT count(*), min(doc_id) FROM (SELECT doc_id FROM {prod.relation} t "
                                     "GROUP BY doc_id HAVING count(*) > 1) d").fetchone()
        if dups:
            raise PgError(f"lane {lane}: {dups} ids of {t.qualified()} appear on more than one row (e.g. {example}; "
                          f"table.id = {t.id!r}); a lane's hits must name each document once: name a unique column, "
                          "or a view keeping one row per id")
    if not rows:
        print(f"lane {lane}: table {t.qualified()} at {pg.redact_dsn(prod.dsn)} has no row with an id: every query "
              "gets an empty ranking; check table.dsn_env, schema and name", file=sys.stderr)
    if null_ids:
        print(f"lane {lane}: {null_ids} rows of {t.qualified()} have no {t.id} (table.id is NULL); they map to no "
              "document and are skipped", file=sys.stderr)
    return {"rows": int(rows), "vector_type": vtype, "dim": dim, "null_ids": int(null_ids)}


def _ident(name: str) -> str:
    from psycopg import sql

    return sql.Identifier(name).as_string(None)


def _base_relations(conn, oid: int) -> list[int]:
    """``oid`` itself, or for a view the relations it reads, views followed down to their tables (read from
    ``pg_rewrite`` and ``pg_depend``)."""
    out: list[int] = []
    todo, seen = [oid], set()
    while todo and len(seen) < 1000:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = %s", (rel,)).fetchone()
        if kind is None or kind[0] != "v":
            out.append(rel)
            continue
        todo.extend(r[0] for r in conn.execute(
            "SELECT DISTINCT d.refobjid::oid FROM pg_rewrite r JOIN pg_depend d ON d.objid = r.oid "
            "AND d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass "
            "WHERE r.ev_class = %s AND d.refobjid <> %s", (rel, rel)).fetchall())
    return sorted(out)


def team_error(exc: PgError, table: ProductionTable) -> PgError:
    """``exc`` with the fix it names pointed at the table's own DSN: the connection helpers name the workbench's
    ``WORKBENCH_PG_DSN``, which is not the variable a lane on a team's table connects with."""
    if table.dsn_env is None or pg.DSN_ENV not in str(exc):
        return exc
    msg = str(exc).replace(f"fix {pg.DSN_ENV} (unset it to use the embedded server)", f"fix {pg.DSN_ENV}")
    return PgError(msg.replace(pg.DSN_ENV, f"{table.dsn_env} (table.dsn_env)"))


def _key(wb: str) -> str:
    return {"embedding": "vector", "tsv": "tsvector", "body": "text"}.get(wb, wb)


def _regclass(t: ProductionTable) -> str:
    from psycopg import sql

    return (sql.Identifier(t.schema_name, t.name) if t.schema_name else sql.Identifier(t.name)).as_string(None)


def production_fingerprint(prod: Production) -> dict[str, Any]:
    """What keys the candidate cache of a lane on a team's table: its name, the server and database, its row
    count, and the server's cumulative insert/update/delete counters for it (``pg_stat_all_tables``; flushed by
    PostgreSQL within about a second of a commit), so a table that changed is searched again, never read
    from a stale cache.

    Raises:
        PgError: the server cannot be reached or the table is missing.
    """
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(prod.dsn)
        server = f"{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"
        with pg.connect(prod.dsn) as conn:
            conn.execute("SET default_transaction_read_only = on")
            oid = conn.execute("SELECT to_regclass(%s)::oid", (_regclass(prod.table),)).fetchone()[0]
            if oid is None:
                raise PgError(f"table {prod.table.qualified()} does not exist at {pg.redact_dsn(prod.dsn)}; check "
                              "[lanes.NAME.table] name, schema and dsn_env")
            rows = int(conn.execute(f"SELECT count(*) FROM {prod.relation} t").fetchone()[0])
            # a view has no counters of its own: those of the tables under it (views on views followed)
            bases = _base_relations(conn, oid)
            stat = conn.execute("SELECT sum(coalesce(n_tup_ins, 0))::bigint, sum(coalesce(n_tup_upd, 0))::bigint, "
                                "sum(coalesce(n_tup_del, 0))::bigint FROM pg_stat_all_tables WHERE relid = ANY(%s)",
                                (bases,)).fetchone()
            if stat is not None and stat[0] is None:
                stat = None
    except PgError as exc:
        raise team_error(exc, prod.table) from None
    except Exception as exc:  # psycopg.Error: an invalid DSN, unreachable, no privilege
        import psycopg

        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            fix = "GRANT SELECT on it to that role, or name a DSN whose role may read it with table.dsn_env"
        elif isinstance(exc, psycopg.errors.UndefinedColumn):
            fix = "check the column names in [lanes.NAME.table]"
        else:
            fix = f"check {prod.table.dsn_env} (table.dsn_env)" if prod.table.dsn_env else "check the server"
        raise PgError(f"table {prod.table.qualified()} at {pg.redact_dsn(prod.dsn)}: {first_line(exc)}; "
                      f"{fix}") from None
    return {"production": {"table": prod.table.qualified(), "server": server, "rows": rows,
                           "changes": list(stat) if stat else None, "columns": [list(c) for c in prod.columns]}}


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

    def __init__(self, name: str, dsn, table, production: Production | None = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a lane needs a non-empty name, got {name!r}")
        self.name = name
        self.production = production
        self._session = Session(production.dsn if production is not None else dsn)
        if production is not None:
            self.table, self._info = production.table.qualified(), None
        elif isinstance(table, str):
            if not table:
                raise ValueError("table must be a non-empty table name or an IndexInfo")
            self.table, self._info = table, None
        else:
            self.table, self._info = table.table, table
        self.last_latencies_ms: dict[str, float] = {}
        #: On a team's table: the dataset's doc ids (set by the kind's ``open``); a hit whose id is not among them is
        #: dropped and counted, as the live and production OpenSearch lanes do (None: every id is kept).
        self.known_ids = None
        self.last_unmapped = 0
        self.last_unmapped_by_query: dict[str, tuple[int, int]] = {}
        self.last_unmapped_ids: list[str] = []

    @property
    def relation(self) -> str:
        """The SQL relation the lane's statements read: the index table's quoted name, or for a team's table
        the subquery of :attr:`Production.relation`; the statements alias it ``t``."""
        if self.production is not None:
            return self.production.relation
        from psycopg import sql

        return sql.Identifier(self.table).as_string(None)

    def checked_production(self) -> dict[str, Any]:
        """:func:`check_production` on the lane's session, once (its answer is kept)."""
        if getattr(self, "_prod_facts", None) is None:
            try:
                conn = self._session.get()
            except PgError as exc:
                raise team_error(exc, self.production.table) from None
            self._prod_facts = self._guard(lambda: check_production(conn, self.production, self.name))
        return self._prod_facts

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
            if self.production is not None:
                raise PgError(f"lane {self.name}: table {self.table!r} does not exist at {self._session.dsn}; check "
                              "[lanes.NAME.table]") from None
            raise PgError(f"lane {self.name}: table {self.table!r} does not exist at {self._session.dsn}; "
                          "index the dataset first") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            if self.production is not None:
                raise PgError(f"lane {self.name}: no read access to {self.table!r} at {self._session.dsn} "
                              f"({first_line(exc)}); GRANT SELECT on it to that role, or name a DSN whose role may "
                              "read it with table.dsn_env") from None
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
        """Query ``q``'s filter as ``(SQL condition, parameters)`` (``("", {})`` without one, and on a team's
        table, which has no ``facets`` column: the runner filters that lane's hits after the fact)."""
        from workbench.io.facets import parse_filter

        if self.production is not None:
            return "", {}
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
        self.last_unmapped, self.last_unmapped_by_query, self.last_unmapped_ids = 0, {}, []
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
            ranked = sorted(best.items(), key=lambda ds: (-ds[1], ds[0]))[:k]
            if self.known_ids is not None:
                missing = [d for d, _s in ranked if d not in self.known_ids]
                if missing:
                    ranked = [(d, s) for d, s in ranked if d in self.known_ids]
                    self.last_unmapped += len(missing)
                    self.last_unmapped_ids.extend(d for d in missing[:5] if d not in self.last_unmapped_ids)
                    del self.last_unmapped_ids[5:]
                self.last_unmapped_by_query[q.query_id] = (len(missing), len(ranked) + len(missing))
            rows[q.query_id] = ranked
            lat[q.query_id] = (time.perf_counter() - t0) * 1000.0
        self.last_latencies_ms = lat
        return Run(rows, self.name)


def production_lane(lane: SqlLane, table: ProductionTable, ds) -> SqlLane:
    """``lane`` on a team's table, told the dataset's doc ids (a hit naming none is dropped and counted) and the
    table's ``max_unmapped`` (read by the runner, as for a live lane: above it the eval fails naming the lane)."""
    lane.known_ids = {d.doc_id for d in ds.documents}
    lane.params = table  # type: ignore[attr-defined]
    return lane


class SqlKind(RetrieverKind):
    """What the PostgreSQL kinds share: a lane reads the workbench's index, or with ``table`` a team's own table
    (:class:`ProductionTable`), read-only; :attr:`columns` maps the workbench's column names to the table's keys."""

    code = (sys.modules[__name__], pg, indexer, doctext)
    native_filters = True
    #: (workbench column, ProductionTable key) the kind reads from a team's table.
    columns: tuple[tuple[str, str], ...] = ()

    def filters_natively(self, params: Any) -> bool:
        """A team's table has no ``facets`` column: the runner filters such a lane's hits after the fact."""
        return getattr(params, "table", None) is None

    def check(self, params: Any, experiment: Mapping[str, Any]) -> str:
        """``table`` names every column this kind reads."""
        return production_problem(getattr(params, "table", None), self.columns[0][1], self.kind)

    def production(self, params: Any, res) -> Production | None:
        """The lane's view of its ``table`` (None: the workbench's index)."""
        table = getattr(params, "table", None)
        if table is None:
            return None
        return Production(table, table.dsn(res.reader), tuple((wb, getattr(table, key)) for wb, key in self.columns))

    def cache_extra(self, params: Any, ds, res) -> dict[str, Any]:
        """Besides the default (the embedder's model id): a team's table's name, server, rows and change counters
        (:func:`production_fingerprint`)."""
        extra = super().cache_extra(params, ds, res)
        prod = self.production(params, res)
        if prod is not None:
            extra.pop("index", None)
            extra.update(production_fingerprint(prod))
        return extra


class TextIndexKind(SqlKind):
    """What the full-text and trigram kinds share: they open :attr:`lane_class` on the dataset's PostgreSQL
    text index (that of the experiment's first embedder), or on a team's table, passing their parameters as
    keywords."""

    lane_class: type

    def open(self, name: str, params: Any, ds, res):
        """The lane on ``ds``'s text index, or on the team's ``table`` (nothing built)."""
        prod = self.production(params, res)
        kw = params.model_dump(exclude={"table"})
        if prod is not None:
            res.log(f"lane {name}: {prod.describe()}")
            return production_lane(self.lane_class(name, None, None, production=prod, **kw), params.table, ds)
        info = res.pg_index(ds, None)
        return self.lane_class(name, res.reader(), info.table, **kw)
