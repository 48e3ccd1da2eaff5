"""A fused config as one PostgreSQL statement, and a function wrapping it (``workbench export --format postgres``).

What is written (:meth:`PostgresExport.files`):

* ``<name>.sql`` — ``CREATE OR REPLACE FUNCTION wb_search_<name>(…) RETURNS TABLE (doc_id text, score float8)``:
  install it once with ``psql -f``; the planner settings the lanes were evaluated with are the function's own
  ``SET`` clauses (``hnsw.ef_search``, ``hnsw.iterative_scan``, ``hnsw.max_scan_tuples``, the pg_trgm
  threshold), so they hold for the call only;
* ``<name>.statement.sql`` — the same statement for a driver: ``SET LOCAL`` lines for one transaction, then the
  ``SELECT`` with ``$1 … $n`` bound by the driver (the query text is never spliced into SQL).

The statement, lane by lane, as the workbench's lanes rank (:mod:`retrievers.pgvector`, :mod:`retrievers.fulltext`,
:mod:`retrievers.trigram`):

* every lane is a ``MATERIALIZED`` CTE of its top ``scan`` rows (the experiment's ``depth``: what the candidate
  cache holds) with ``rank`` = ``row_number() OVER (ORDER BY score DESC, doc_id COLLATE "C")`` — the workbench's
  tie rule; the fusion reads the ranks ``<= depth`` of each lane (the config's per-lane ``depth``);
* **pgvector**: ``1 - (embedding <=> $vec)`` over ``ORDER BY embedding <=> $vec LIMIT scan`` (the HNSW scan),
  re-sorted by score (``relaxed_order`` returns rows slightly out of order);
* **fulltext**: ``ts_rank_cd(tsv_<config>, tsquery, normalization)`` with the lane's query form (``or``: every
  lexeme of ``to_tsvector(config, query)`` joined by ``|``); the query cut at ``max_query_chars`` at a word
  boundary (:func:`workbench.text.query.cut`, in SQL);
* **trigram**: ``word_similarity`` / ``similarity`` under the lane's threshold (``<%`` / ``%``, which use the GIN
  index), the query cut at ``max_query_chars``, no answer above ``max_query_words`` nor for a form of fewer than 3
  letters and digits (:func:`workbench.text.query.trigram_chars`: ASCII punctuation and spaces removed);
* a lane with ``transliterate = true`` searches every form of ``$forms`` (the application computes them with
  :func:`workbench.text.query.query_forms`), each form's top ``scan``, each document keeping its best score;
* **reference**: the canonical-reference lane reads the query with the workbench's reference grammar, in Python:
  its answer is an input (``$reference``, doc ids in the lane's order) that the application computes; it may be
  fused by RRF (its ranks) and be the ``pin_lane``;
* scores are read as the workbench's driver reads them: ``ts_rank_cd`` and ``word_similarity`` return ``real``,
  which psycopg receives as text, so the SQL casts them ``::text::float8`` to fuse the same doubles, under
  ``extra_float_digits = 1`` (shortest exact text; set by the function, whatever the caller's session has).

Fusion (:mod:`workbench.eval.fusion`, the same formulas and the same floating-point order: each document's sum is
an ordered aggregate over the lanes in the config's order):

* ``rrf``: ``Σ w_l / (k + rank_l)``; ``weighted``: ``Σ w_l · norm_l(score)`` (min-max with a constant list → 1.0,
  z-score with a constant list → 0.0, constant within ``CONSTANT_RTOL``, or raw); ``combsum`` / ``combmnz``;
  ``none``: one lane as it is;
* ties by the ``tiebreak_lane``'s raw score (absent → last), then ``doc_id COLLATE "C"``; ``min_score`` on the
  fused score; ``pin_lane``: its documents first in its order, scoring ``max + n − i``; ``top_k`` last
  (``max(top_k, rerank depth)`` for a config with a rerank stage, which runs after the statement, in the
  application: the export says so and names the model).

What cannot be one statement raises :class:`~workbench.errors.ConfigError` naming the lane or the parameter
and what to export instead: a lane computed in Python (dictionary, lemma lanes), an OpenSearch or live lane,
an ``exact`` vector lane beside HNSW ones, two lanes needing different values of one planner setting, ranx's
fusion methods, a weighted or tie-break use of the reference lane (whose scores are the application's).

Known difference from the workbench (listed by :mod:`workbench.export.parity` when it decides a query): a
vector lane whose HNSW scan returns fewer rows than asked is answered by an exact scan in the workbench
(``last_exact_fallbacks``); the statement returns the short list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import ConfigError
from workbench.eval.fusion import CONSTANT_RTOL, RANX_METHODS, FusionSpec
from workbench.text.query import ASCII_NON_ALNUM_SQL, MIN_TRIGRAM_CHARS

#: Lane kinds the statement runs itself.
SQL_KINDS = ("pgvector", "fulltext", "trigram")
#: Lane kinds whose answer the application passes in (computed by the workbench's code, not by the engine).
INPUT_KINDS = ("reference",)
#: Whitespace Python's ``str.strip`` removes that SQL must too (ASCII; the query normaliser removes the rest).
_WS = r"E' \t\n\r\x0b\x0c'"
_PARAM = re.compile(r"%\((\w+)\)s|%%")


def _lit(value: Any) -> str:
    from psycopg import sql

    return sql.Literal(value).as_string(None)


def _ident(name: str) -> str:
    from psycopg import sql

    return sql.Identifier(name).as_string(None)


def _float(x: float) -> str:
    """A float8 literal that parses to exactly ``x`` (repr is the shortest round-trip form)."""
    return f"{float(x)!r}::float8"


def cut_sql(expr: str, limit: int) -> str:
    """SQL for :func:`workbench.text.query.cut`: ``expr`` cut to ``limit`` characters at the last space within
    ``limit + 1``, trailing whitespace dropped; a first word longer than ``limit`` cut inside it."""
    head = f"left({expr}, {int(limit) + 1})"
    return (f"CASE WHEN char_length({expr}) <= {int(limit)} THEN {expr} "
            f"WHEN position(' ' in btrim({head}, {_WS})) > 0 "
            f"THEN rtrim(regexp_replace({head}, ' [^ ]*$', ''), {_WS}) ELSE left({expr}, {int(limit)}) END")


def _or_tsquery(cfg: str, q: str) -> str:
    """The ``or`` form of :mod:`retrievers.fulltext`: every lexeme of ``to_tsvector(cfg, q)``, quoted, joined by ``|``."""
    return ("(SELECT string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | ' "
            f"ORDER BY lexeme) FROM unnest(to_tsvector({cfg}::regconfig, {q}::text)))::tsquery")


_TSQUERY = {
    "or": _or_tsquery,
    "and": lambda cfg, q: f"plainto_tsquery({cfg}::regconfig, {q}::text)",
    "phrase": lambda cfg, q: f"phraseto_tsquery({cfg}::regconfig, {q}::text)",
    "websearch": lambda cfg, q: f"websearch_to_tsquery({cfg}::regconfig, {q}::text)",
}


@dataclass(frozen=True)
class Param:
    """An input of the exported statement: ``name`` (``p_query``…), its SQL type, and how the application
    computes it (for the file's header)."""

    name: str
    sql_type: str
    how: str


@dataclass
class LanePart:
    """One lane of the statement: its CTE (columns ``doc_id``, ``score``, ``rank``; at most ``scan`` rows), the
    ranks that enter the fusion (``depth``), and the planner settings it needs."""

    name: str
    kind: str
    cte: str
    depth: int
    settings: dict[str, str] = field(default_factory=dict)


def _ranked(inner: str, scan: int) -> str:
    """``inner`` (``doc_id``, ``score``) ranked by the workbench's tie rule, cut at ``scan``."""
    return (f"SELECT doc_id, score, row_number() OVER (ORDER BY score DESC, doc_id COLLATE \"C\") AS rank "
            f"FROM ({inner}) s ORDER BY score DESC, doc_id COLLATE \"C\" LIMIT {int(scan)}")


def _forms(lane) -> str:
    """The forms a text lane searches: ``$forms`` with ``transliterate``, else the one cleaned query."""
    return "%(p_forms)s::text[]" if getattr(lane, "transliterate", False) else "ARRAY[%(p_query)s::text]"


def vector_part(name: str, lane, info, scan: int, depth: int, param: str) -> LanePart:
    """The CTE of a :class:`retrievers.pgvector.VectorLane` over ``info``'s table (see the module docstring).

    Raises:
        ConfigError: the lane scans exactly (``exact = true``): it cannot share a statement with HNSW lanes.
    """
    if lane.exact:
        raise ConfigError(f"lanes.{name}: exact = true (a sequential scan, the ANN ground truth) is not a production "
                          "lane; export the config with the HNSW lane (exact = false)")
    vt = info.vector_type
    vec = f"%({param})s::{vt}"
    inner = (f"SELECT doc_id, 1 - d AS score FROM (SELECT doc_id, embedding <=> {vec} AS d FROM {lane.relation} t "
             f"ORDER BY embedding <=> {vec} LIMIT {int(scan)}) ann WHERE abs(d) < 'Infinity'::float8")
    return LanePart(name, "pgvector", _ranked(inner, scan), depth, dict(lane.effective_settings(scan)))


def fulltext_part(name: str, lane, scan: int, depth: int) -> LanePart:
    """The CTE of a :class:`retrievers.fulltext.FullTextLane` (see the module docstring)."""
    col, cfg = _ident(lane.column), _lit(lane.ts_config)
    tsq = _TSQUERY[lane.form](cfg, "c.q")
    rank = f"ts_rank_cd(t.{col}, tq.tsq, {int(lane.normalization)})"
    inner = (f"SELECT x.doc_id, max(x.r)::text::float8 AS score FROM unnest({_forms(lane)}) AS f(form) "
             f"CROSS JOIN LATERAL (SELECT {cut_sql('f.form', lane.max_query_chars)} AS q) c "
             f"CROSS JOIN LATERAL (SELECT t.doc_id, {rank} AS r FROM (SELECT {tsq} AS tsq) tq, {lane.relation} t "
             f"WHERE f.form ~ '\\S' AND t.{col} @@ tq.tsq AND querytree(tq.tsq) <> 'T' "
             f"ORDER BY r DESC, t.doc_id COLLATE \"C\" LIMIT {int(scan)}) x GROUP BY x.doc_id")
    return LanePart(name, "fulltext", _ranked(inner, scan), depth)


_TRGM = {
    "word_similarity": ("word_similarity(c.q, t.body)", "c.q <%% t.body", "pg_trgm.word_similarity_threshold"),
    "similarity": ("similarity(t.body, c.q)", "t.body %% c.q", "pg_trgm.similarity_threshold"),
}


def trigram_part(name: str, lane, scan: int, depth: int) -> LanePart:
    """The CTE of a :class:`retrievers.trigram.TrigramLane` (see the module docstring)."""
    fn, op, guc = _TRGM[lane.function]
    words = ""
    if lane.max_query_words is not None:
        words = (f" AND cardinality(regexp_split_to_array(regexp_replace(f.form, '^\\s+|\\s+$', '', 'g'), '\\s+')) "
                 f"<= {int(lane.max_query_words)}")
    # a form too short for trigrams answers nothing (workbench.text.query.trigram_chars, the same rule)
    short = (f" AND length(regexp_replace(f.form, '{ASCII_NON_ALNUM_SQL}', '', 'g')) >= {int(MIN_TRIGRAM_CHARS)}")
    inner = (f"SELECT x.doc_id, max(x.r)::text::float8 AS score FROM unnest({_forms(lane)}) AS f(form) "
             f"CROSS JOIN LATERAL (SELECT {cut_sql('f.form', lane.max_query_chars)}::text AS q) c "
             f"CROSS JOIN LATERAL (SELECT t.doc_id, {fn} AS r FROM {lane.relation} t "
             f"WHERE f.form ~ '\\S'{words}{short} AND {op} ORDER BY r DESC, t.doc_id COLLATE \"C\" "
             f"LIMIT {int(scan)}) x GROUP BY x.doc_id")
    return LanePart(name, "trigram", _ranked(inner, scan), depth, {guc: repr(lane.threshold)})


def reference_part(name: str, scan: int, depth: int) -> LanePart:
    """The reference lane as an input: ``$reference`` (doc ids in the lane's order), ranked by position."""
    cte = (f"SELECT doc_id, NULL::float8 AS score, rank FROM unnest(%(p_reference)s::text[]) "
           f"WITH ORDINALITY AS r(doc_id, rank) WHERE rank <= {int(scan)}")
    return LanePart(name, "reference", cte, depth)


def _contribution(spec: FusionSpec, i: int, part: LanePart) -> str:
    """SQL of lane ``i``'s contribution to a document's fused score (alias ``l`` = the lane, ``s`` = its stats)."""
    w = _float(float((spec.weights or {}).get(part.name, 1.0)))
    if spec.method == "rrf":
        return f"{w} / ({_float(spec.k)} + l.rank)"
    norm = spec.norm if spec.method == "weighted" else "minmax"
    constant = f"(s.hi - s.lo <= {_float(CONSTANT_RTOL)} * greatest(abs(s.lo), abs(s.hi)))"
    if norm == "raw":
        return f"{w} * l.score"
    if norm == "minmax":
        return f"{w} * (CASE WHEN {constant} THEN 1::float8 ELSE (l.score - s.lo) / (s.hi - s.lo) END)"
    return f"{w} * (CASE WHEN {constant} THEN 0::float8 ELSE (l.score - s.mean) / d.sd END)"


@dataclass
class PostgresExport:
    """The exported statement of one config (see the module docstring).

    Attributes:
        name: the config's name; ``function`` the SQL function's name.
        params: the statement's inputs, in order (``$1`` …).
        settings: planner settings (``SET LOCAL`` / the function's ``SET``), name → value.
        body: the ``WITH … SELECT`` with psycopg placeholders ``%(p_…)s``.
        lanes: the lanes' parts, in the config's order.
        limit: rows returned (``top_k``, or the rerank depth when larger).
        notes: lines for the file's header (the rerank stage, the inputs the application computes).
        dsn: the team's server every lane reads (their tables' ``dsn_env``, resolved; never written to a file), or
            None: the workbench's own.
    """

    name: str
    function: str
    params: list[Param]
    settings: dict[str, str]
    body: str
    lanes: list[LanePart]
    limit: int
    notes: list[str] = field(default_factory=list)
    dsn: str | None = None

    def _render(self, ref) -> str:
        return _PARAM.sub(lambda m: "%" if m.group(0) == "%%" else ref(m.group(1)), self.body)

    def _qualified(self, schema: str | None) -> str:
        return (f"{schema}." if schema else "") + _ident(self.function)

    def function_sql(self, schema: str | None = None) -> str:
        """``CREATE OR REPLACE FUNCTION`` wrapping the statement, its settings as ``SET`` clauses, marked with a
        ``COMMENT`` naming its config; a guard before it refuses to replace a function of the same name in the
        current schema that another config's export made (two config names that meet in one identifier).
        ``schema = "pg_temp"``: the session's own copy, without the guard (what ``--verify`` runs)."""
        args = ", ".join(f"{p.name} {p.sql_type}" for p in self.params)
        sets = "".join(f"\n  SET {k} = {_lit(v)}" for k, v in self.settings.items())
        mark = f"workbench export of config {self.name}"
        guard = ("DECLARE other text; BEGIN SELECT obj_description(p.oid, 'pg_proc') INTO other FROM pg_proc p "
                 f"WHERE p.proname = {_lit(self.function)} AND p.pronamespace = current_schema()::regnamespace "
                 f"AND obj_description(p.oid, 'pg_proc') LIKE 'workbench export of config %' "
                 f"AND obj_description(p.oid, 'pg_proc') <> {_lit(mark)} LIMIT 1; "
                 f"IF FOUND THEN RAISE EXCEPTION '% already holds the %; rename one of the two configs', "
                 f"{_lit(self.function)}, other; END IF; END")
        fn = self._qualified(schema)
        return ("" if schema == "pg_temp" else f"DO {_lit(guard)};\n") + (
                f"CREATE OR REPLACE FUNCTION {fn}({args})\n"
                f"  RETURNS TABLE (doc_id text, score double precision)\n  LANGUAGE sql STABLE{sets}\n"
                f"AS $wb_export$\n{self._render(lambda n: n)}\n$wb_export$;\n"
                f"COMMENT ON FUNCTION {fn}({', '.join(p.sql_type for p in self.params)}) "
                f"IS {_lit(mark)};\n")

    def statement_sql(self) -> str:
        """The statement for a driver: ``SET LOCAL`` lines, then the ``SELECT`` with ``$1 … $n``."""
        pos = {p.name: i for i, p in enumerate(self.params, start=1)}
        lines = [f"SET LOCAL {k} = {_lit(v)};" for k, v in self.settings.items()]
        return "\n".join(lines + [self._render(lambda n: f"${pos[n]}") + ";"]) + "\n"

    def header(self, provenance: Mapping[str, Any] | None = None) -> str:
        """A comment block: what the file is, its inputs in order, the notes and the provenance."""
        from workbench.export.names import comment_text as text

        out = [f"-- {self.function}: config {text(self.name)}, exported by `workbench export --format postgres`",
               "-- Inputs, in order (bound by the driver, never spliced into SQL):"]
        out += [f"--   ${i} {p.name} {p.sql_type}: {text(p.how)}" for i, p in enumerate(self.params, start=1)]
        out += [f"-- {text(n)}" for n in self.notes]
        for key, value in (provenance or {}).items():
            out.append(f"-- {text(key)}: {text(value)}")  # a name holding a line break cannot end the comment
        return "\n".join(out) + "\n"

    def files(self, provenance: Mapping[str, Any] | None = None) -> dict[str, str]:
        """File name → text: ``<name>.sql`` (the function) and ``<name>.statement.sql``."""
        from workbench.export.names import file_stem

        head, stem = self.header(provenance), file_stem(self.name)
        return {f"{stem}.sql": head + "\n" + self.function_sql(),
                f"{stem}.statement.sql": head + "-- Run in one transaction: BEGIN; <this>; COMMIT;\n"
                + self.statement_sql()}

    def call_sql(self, schema: str | None = None) -> str:
        """``SELECT doc_id, score FROM function(%(p_…)s, …)``: the installed function called with psycopg
        (``schema``: the one it was created in, e.g. ``pg_temp``)."""
        args = ", ".join(f"%({p.name})s::{p.sql_type}" for p in self.params)
        return f"SELECT doc_id, score FROM {self._qualified(schema)}({args})"

    def lanes_sql(self) -> str:
        """Every lane's CTE rows (``lane``, ``doc_id``, ``score``, ``rank``) with psycopg placeholders: what parity
        reads to find which lane a difference comes from."""
        ctes = ",\n".join(f"{_ident('lane_' + str(i))} AS MATERIALIZED ({p.cte})" for i, p in enumerate(self.lanes))
        rows = " UNION ALL ".join(f"SELECT {i} AS lane, doc_id, score, rank FROM {_ident('lane_' + str(i))}"
                                  for i in range(len(self.lanes)))
        return f"WITH {ctes}\nSELECT * FROM ({rows}) r ORDER BY lane, rank"


def function_name(config: str) -> str:
    """``wb_search_<config>``: a lower-case identifier of at most 63 bytes (PostgreSQL's limit), distinct for
    distinct config names (:func:`workbench.export.names.sql_ident`)."""
    from workbench.export.names import sql_ident

    return sql_ident("wb_search_", config)


def build(cfg, exp, ds, engine) -> PostgresExport:
    """The statement of ``cfg`` (a :class:`~workbench.experiment.config.FusedConfig` of ``exp``) over ``ds``'s
    tables, opened through ``engine`` (:class:`~workbench.experiment.runner.Engine`: builds a missing index).

    Raises:
        ConfigError: a lane or a fusion parameter the statement cannot express (named, with what to export
            instead; see the module docstring).
    """
    method = cfg.method
    where = f"config {cfg.name}"
    if method in RANX_METHODS:
        raise ConfigError(f"{where}: fusion {method!r} is computed by ranx in Python; export a config fused by "
                          "rrf, weighted, combsum, combmnz or none, or use --format json")
    from workbench.export.names import distinct

    scan = exp.depth
    opened: list[Any] = []
    servers: set[str | None] = set()  # each lane's table.dsn_env (None: the workbench's own server)
    team_dsn: str | None = None
    parts: list[LanePart] = []
    params: dict[str, Param] = {}
    vec_names = distinct("p_vec_", sorted({exp.lanes[ln].parsed().embedder for ln in cfg.lanes
                                           if exp.lanes[ln].kind == "pgvector"}))
    for ln in cfg.lanes:
        spec = exp.lanes[ln]
        depth = scan if method == "none" else min(scan, (cfg.depth.get(ln) if isinstance(cfg.depth, Mapping)
                                                         else cfg.depth) or scan)
        if spec.kind not in SQL_KINDS + INPUT_KINDS:
            raise ConfigError(f"{where}: lane {ln} (kind {spec.kind}) is computed outside PostgreSQL, so the config "
                              "is not one SQL statement; export a config without it, or use --format json "
                              + ("(or --format opensearch for a config of OpenSearch lanes)" if spec.kind == "opensearch"
                                 else "(the workbench's own config, run by the workbench)"))
        if spec.kind == "reference":
            if ln in (cfg.lane_min_score or {}):
                raise ConfigError(f"{where}: lane_min_score.{ln}: the reference lane's answer is an input of the "
                                  "statement (doc ids in order, no scores), so it has no floor; drop it from "
                                  "lane_min_score")
            if method not in ("rrf", "none") and ln != cfg.pin_lane:
                raise ConfigError(f"{where}: lane {ln} (reference) is fused by {method}, which reads its scores; "
                                  "the statement takes its answer as an input (doc ids in order), so only rrf or "
                                  "pin_lane can use it")
            params["p_reference"] = Param("p_reference", "text[]", f"lane {ln}: the doc ids the canonical-reference "
                                          "lane answers, in its order (workbench.text.refs; empty when the query "
                                          "is not a reference)")
            parts.append(reference_part(ln, scan, depth))
            continue
        lane = engine.lane(ds, spec)
        opened.append(lane)
        server = lane.production.table.dsn_env if lane.production is not None else None
        if server is not None:
            team_dsn = lane.production.dsn
        if servers and server not in servers:
            raise ConfigError(f"{where}: lane {ln} reads {'the team table ' + lane.table if server else 'the workbench index'}"
                              f" on another server than lane {opened[0].name}; one SQL statement runs on one server: "
                              "export a config whose lanes read one server")
        servers.add(server)
        if getattr(lane, "transliterate", False):
            params["p_forms"] = Param("p_forms", "text[]", "the query's forms: workbench.text.query.query_forms("
                                      "query), empty ones left out")
        elif spec.kind != "pgvector":
            params["p_query"] = Param("p_query", "text", "the query as workbench.text.query.clean gives it "
                                      "(NFC, invisible characters removed)")
        if spec.kind == "pgvector":
            emb = spec.parsed().embedder
            pname = vec_names[emb]
            params[pname] = Param(pname, "vector", f"the query embedded by [embedders.{emb}] "
                                  f"({lane.embedder.model_id}, dim {lane.embedder.dim}; NULL for an empty query)")
            parts.append(vector_part(ln, lane, lane.index_info(), scan, depth, pname))
        elif spec.kind == "fulltext":
            parts.append(fulltext_part(ln, lane, scan, depth))
        else:
            parts.append(trigram_part(ln, lane, scan, depth))
    # real scores are read ::text::float8, as the workbench's driver reads them: shortest-exact text whatever the
    # caller's session says (a driver with extra_float_digits = 0 would round them to 6 digits and make ties)
    settings: dict[str, str] = {"extra_float_digits": "1"} if any(p.kind in ("fulltext", "trigram")
                                                                  for p in parts) else {}
    owner: dict[str, str] = {"extra_float_digits": "the export"}
    for p in parts:
        for key, value in p.settings.items():
            if key in settings and settings[key] != value:
                raise ConfigError(f"{where}: lanes {owner[key]} and {p.name} need {key} = {settings[key]} and {value}; "
                                  "one statement has one value of a setting: give them the same value")
            settings[key], owner[key] = value, p.name
    if cfg.tiebreak_lane is not None and exp.lanes[cfg.tiebreak_lane].kind == "reference":
        raise ConfigError(f"{where}: tiebreak_lane {cfg.tiebreak_lane} is the reference lane, whose scores the "
                          "statement does not have; break ties by a vector or text lane")
    order = ["p_query", "p_forms", *sorted(p for p in params if p.startswith("p_vec_")), "p_reference"]
    plist = [params[n] for n in order if n in params]
    limit = max(cfg.top_k, cfg.rerank.depth) if cfg.rerank is not None else cfg.top_k
    body = _statement(cfg, parts, limit)
    notes = []
    if cfg.rerank is not None:
        stage = exp.rerankers[cfg.rerank.reranker]
        notes.append(f"Rerank stage (not in the statement; run it in the application): reranker "
                     f"{cfg.rerank.reranker} (kind {stage.kind}, {dict(stage.params)}) rescoring the top "
                     f"{cfg.rerank.depth}, weight {cfg.rerank.weight} (workbench.reranking.stage.apply_rerank), then the "
                     f"top {cfg.top_k}. The statement returns the fused top {limit}.")
    teams = sorted({lane.production.table.qualified() for lane in opened if lane.production is not None})
    if teams:
        notes.append(f"Reads the team's own table{'s' if len(teams) > 1 else ''} {', '.join(teams)} as named in the "
                     "experiment's [lanes.NAME.table] (each a subquery renaming its columns, which PostgreSQL pulls "
                     "up, so the table's own indexes serve it); install it where those tables are.")
    if any(lane.production is None for lane in opened):
        notes.append("Tables are the workbench's index tables (columns doc_id, embedding, body, tsv_russian, "
                     "tsv_simple, tsv_fold; text search configuration wb_fold = simple + unaccent): rename them to "
                     "yours, or name your table in the experiment ([lanes.NAME.table]) and export again.")
    return PostgresExport(cfg.name, function_name(cfg.name), plist, settings, body, parts, limit, notes,
                          dsn=team_dsn)


def _floored(cte: str, floor: float) -> str:
    """A lane's CTE holding only its rows scoring at least ``floor``, ranked again in their order
    (:func:`workbench.eval.fusion.cut_lanes`)."""
    return (f"SELECT doc_id, score, row_number() OVER (ORDER BY rank) AS rank FROM ({cte}) c "
            f"WHERE score >= {_float(floor)} ORDER BY rank")


def _statement(cfg, parts: Sequence[LanePart], limit: int) -> str:
    """The ``WITH … SELECT`` of the fusion over the lanes' CTEs (see the module docstring)."""
    floors = cfg.lane_min_score or {}
    ctes = [f"lane_{i} AS MATERIALIZED ({_floored(p.cte, floors[p.name]) if p.name in floors else p.cte})"
            for i, p in enumerate(parts)]
    tb = ""
    if cfg.tiebreak_lane is not None:
        tb = f"lane_{[p.name for p in parts].index(cfg.tiebreak_lane)}"
    if cfg.method == "none":
        fused = "SELECT doc_id, score FROM lane_0"
    else:
        for i, p in enumerate(parts):
            if cfg.method != "rrf":
                ctes.append(f"stats_{i} AS (SELECT min(score) AS lo, max(score) AS hi, "
                            f"sum(score ORDER BY rank) / count(*) AS mean FROM lane_{i} WHERE rank <= {p.depth})")
                if cfg.method == "weighted" and cfg.norm == "zscore":
                    ctes.append(f"sd_{i} AS (SELECT sqrt(sum((l.score - s.mean) * (l.score - s.mean) ORDER BY l.rank) "
                                f"/ count(*)) AS sd FROM lane_{i} l, stats_{i} s WHERE l.rank <= {p.depth})")
        zscore = cfg.method == "weighted" and cfg.norm == "zscore"
        union = []
        for i, p in enumerate(parts):
            src = f"lane_{i} l" if cfg.method == "rrf" else f"lane_{i} l, stats_{i} s" + (f", sd_{i} d" if zscore else "")
            union.append(f"SELECT {i} AS lane_no, l.doc_id, {_contribution(cfg, i, p)} AS c FROM {src} "
                         f"WHERE l.rank <= {p.depth}")
        mnz = " * count(*)" if cfg.method == "combmnz" else ""
        fused = (f"SELECT doc_id, sum(c ORDER BY lane_no){mnz} AS score FROM ({' UNION ALL '.join(union)}) u "
                 "GROUP BY doc_id")
    ctes.append(f"fused AS ({fused})")
    tb_join = f" LEFT JOIN {tb} tb ON tb.doc_id = f.doc_id" if tb else ""
    tb_col = "tb.score" if tb else "NULL::float8"
    floor = f" AND f.score >= {_float(cfg.min_score)}" if cfg.min_score is not None else ""
    if cfg.pin_lane is None:
        select = (f"SELECT f.doc_id, f.score FROM fused f{tb_join} WHERE true{floor} "
                  f"ORDER BY f.score DESC, {tb_col} DESC NULLS LAST, f.doc_id COLLATE \"C\" LIMIT {int(limit)}")
    else:
        pin = [p.name for p in parts].index(cfg.pin_lane)
        ctes.append(f"pin AS (SELECT doc_id, rank AS ord FROM lane_{pin})")
        select = ("SELECT doc_id, score FROM ("
                  "SELECT p.doc_id, ((SELECT coalesce(max(score), 0::float8) FROM fused) + (SELECT count(*) FROM pin)) "
                  "- (p.ord - 1) AS score, NULL::float8 AS tb FROM pin p "
                  f"UNION ALL SELECT f.doc_id, f.score, {tb_col} FROM fused f{tb_join} "
                  f"WHERE f.doc_id NOT IN (SELECT doc_id FROM pin){floor}) r "
                  f"ORDER BY score DESC, tb DESC NULLS LAST, doc_id COLLATE \"C\" LIMIT {int(limit)}")
    return "WITH " + ",\n".join(ctes) + "\n" + select
