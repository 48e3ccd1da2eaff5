"""``workbench export --format postgres``: the exported statement, run on a real PostgreSQL over the workbench's
own tables, ranks every dev and test query of the gita exactly as the workbench's fusion does (RRF with weights,
per-lane depth, min_score, a tie-break lane and a pinned reference lane; weighted min-max and z-score; CombMNZ;
one lane), for query text that is hostile to SQL too; configs it cannot express are refused naming the lane."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from workbench.data import catalog
from workbench.errors import ConfigError
from workbench.experiment.cache import CandidateCache
from workbench.experiment.config import load_experiment
from workbench.experiment.runner import Engine, fused_run, lane_candidates
from workbench.export import job, parity, postgres
from workbench.types import Query

EXP = """
name = "export-parity"
datasets = ["gita"]
depth = 60
splits = ["dev", "test"]
[embedders.h]
kind = "hash"
dim = 64
[lanes.vector]
kind = "pgvector"
embedder = "h"
ef_search = 80
[lanes.fts_russian]
kind = "fulltext"
config = "russian"
[lanes.fts_fold_tr]
kind = "fulltext"
config = "wb_fold"
transliterate = true
[lanes.trigram]
kind = "trigram"
threshold = 0.6
[lanes.trigram_low]
kind = "trigram"
threshold = 0.3
[lanes.exact]
kind = "pgvector"
embedder = "h"
exact = true
[lanes.reference]
kind = "reference"
[lanes.sa_lemma]
kind = "sanskrit-lemma"
[configs.rrf-pinned]
lanes = ["vector", "fts_fold_tr", "trigram", "reference"]
fusion = "rrf"
k = 20
weights = { vector = 2.0, fts_fold_tr = 1.0, trigram = 0.5, reference = 1.0 }
depth = 40
min_score = 0.02
top_k = 25
tiebreak_lane = "vector"
pin_lane = "reference"
[configs.weighted-minmax]
lanes = ["vector", "fts_russian", "trigram"]
fusion = "weighted"
weights = { vector = 0.7, fts_russian = 0.2, trigram = 0.1 }
depth = { vector = 50, fts_russian = 20, trigram = 30 }
top_k = 20
[configs.weighted-zscore]
lanes = ["vector", "fts_fold_tr"]
fusion = "weighted"
weights = { vector = 0.6, fts_fold_tr = 0.4 }
norm = "zscore"
min_score = 0.5
top_k = 50
tiebreak_lane = "vector"
[configs.combmnz]
lanes = ["vector", "fts_russian", "fts_fold_tr"]
fusion = "combmnz"
top_k = 30
[configs.fts-alone]
lanes = ["fts_russian"]
min_score = 0.05
top_k = 10
[rerankers.by_fts]
kind = "lane"
lane = "fts_russian"
[configs.reranked]
lanes = ["vector", "trigram"]
fusion = "rrf"
top_k = 10
rerank = { reranker = "by_fts", depth = 30 }
[configs.with-lemma]
lanes = ["vector", "sa_lemma"]
[configs.isr]
lanes = ["vector", "fts_russian"]
fusion = "isr"
[configs.exact-beside-hnsw]
lanes = ["vector", "exact"]
[configs.two-thresholds]
lanes = ["trigram", "trigram_low"]
[configs.weighted-reference]
lanes = ["vector", "reference"]
fusion = "weighted"
[configs.lane-floors]
lanes = ["vector", "fts_russian", "trigram"]
fusion = "rrf"
lane_min_score = { vector = 0.2, trigram = 0.75 }
top_k = 30
tiebreak_lane = "vector"
[configs.floored-reference]
lanes = ["vector", "reference"]
lane_min_score = { reference = 1.0 }
"""


@pytest.fixture(scope="module")
def home(data_dir: Path, home_with, pg_dsn) -> Path:
    return home_with("export-home", "gita")


@pytest.fixture(scope="module")
def setup(home, pg_dsn, tmp_path_factory):
    # the engine's server is the session's embedded Postgres, for this module only: a WORKBENCH_PG_DSN left set
    # made every later test of the embedded server's own life (test_pg_service) use this one
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_PG_DSN", pg_dsn)
        path = tmp_path_factory.mktemp("export-exp") / "export-parity.toml"
        path.write_text(EXP)
        exp = load_experiment(path)
        ds = catalog.load("gita", catalog.load_definitions(), home=home)
        yield path, exp, ds, Engine(exp, home)


@pytest.mark.parametrize("config", ["rrf-pinned", "weighted-minmax", "weighted-zscore", "combmnz", "fts-alone",
                                    "lane-floors"])
def test_the_exported_statement_ranks_every_dev_and_test_query_as_the_workbench(setup, home, tmp_path, config):
    path, exp, ds, engine = setup
    source = job.from_experiment(path, config, "gita")
    out = job.write(source, "postgres", tmp_path / "out", home=home, verify=True, log=lambda _m: None)
    report = out["parity"]
    dev_test = sum(1 for q in ds.queries if q.split in ("dev", "test"))
    assert dev_test == 751  # the gita's dev and test queries (of 1,800), as the build splits them
    assert report.queries == dev_test
    assert report.differences == [], report.differences[:3]
    assert report.parity == 1.0 and report.identical == 751
    assert report.statement_checked == 20 and report.statement_mismatches == 0
    assert report.latency_ms["p95"] >= report.latency_ms["p50"] > 0
    # the tie rule is under test for real: the workbench's ranking has fused ties inside the top k
    cfg = exp.configs[config]
    lanes = lane_candidates(replace(exp, configs={config: cfg}), ds, engine, CandidateCache(home / "cache" / "candidates"))
    want = fused_run(cfg, {n: lanes[n].run for n in cfg.lanes})
    ties = sum(1 for q in ds.queries if q.split in ("dev", "test")
               for a, b in zip(want.get_hits(q.query_id), want.get_hits(q.query_id)[1:]) if a.score == b.score)
    assert ties > 0 or config == "weighted-zscore", ties
    if config == "lane-floors":  # the floors cut for real: the same config without them ranks otherwise
        free = fused_run(replace(cfg, lane_min_score=None), {n: lanes[n].run for n in cfg.lanes})
        changed = sum(1 for q in ds.queries if q.split in ("dev", "test")
                      and [h.doc_id for h in free.get_hits(q.query_id)] != [h.doc_id for h in want.get_hits(q.query_id)])
        assert changed > 100, changed
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == [f"{config}.export.json", f"{config}.sql", f"{config}.statement.sql"]
    assert (home / "exports" / f"{path.stem}.{config}.postgres.json").is_file()  # keyed by experiment and config


def test_the_sql_file_installs_and_the_statement_runs_with_bound_parameters(setup, home, pg_dsn, tmp_path):
    """What an engineer runs: ``psql -f <name>.sql`` (simple protocol, every statement of the file), then the
    function; and the plain statement bound with $1..$n under SET LOCAL. Both give the verified ranking."""
    path, exp, ds, engine = setup
    source = job.from_experiment(path, "rrf-pinned", "gita")
    art = postgres.build(source.cfg, exp, ds, engine)
    files = art.files()
    q = next(q for q in ds.queries if q.split == "dev" and q.query_type == "reference")
    from workbench.text.query import clean, query_forms

    text = clean(q.text)
    vec = "[" + ",".join(repr(float(x)) for x in engine.embedder("h").embed_queries([text])[0]) + "]"
    lanes = lane_candidates(replace(exp, configs={"rrf-pinned": source.cfg}), ds, engine,
                            CandidateCache(home / "cache" / "candidates"))
    ref = [h.doc_id for h in lanes["reference"].run.get_hits(q.query_id)]
    assert ref, q.text  # a reference query: the pinned lane answers it
    want = [h.doc_id for h in fused_run(source.cfg, {n: lanes[n].run for n in source.cfg.lanes}).get_hits(q.query_id)]
    args = (text, [f for f in query_forms(text) if f.strip()], vec, ref)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS export_file_test")
        conn.execute("SET search_path = export_file_test, public")
        conn.execute(files["rrf-pinned.sql"].encode())  # no parameters: the simple protocol, as psql -f
        conn.execute("SET extra_float_digits = 0")  # a driver's session that rounds real to 6 digits: no matter
        got = [d for d, _s in conn.execute("SELECT * FROM wb_search_rrf_pinned(%s, %s, %s::vector, %s)", args)]
        assert got == want and got[: len(ref)] == ref
        stmt = files["rrf-pinned.statement.sql"]
        sets = re.findall(r"^SET LOCAL (\S+) = '([^']*)';$", stmt, re.M)
        assert dict(sets)["extra_float_digits"] == "1" and dict(sets)["hnsw.ef_search"] == "80"
        assert dict(sets)["pg_trgm.word_similarity_threshold"] == "0.6"
        select = stmt[stmt.index("WITH "):].rstrip().rstrip(";")
        with conn.transaction():
            for key, value in sets:
                conn.execute("SELECT set_config(%s, %s, true)", (key, value))
            with psycopg.RawCursor(conn) as cur:  # the $1..$n placeholders as a driver binds them
                plain = [d for d, _s in cur.execute(select, args).fetchall()]
        assert plain == want
        conn.execute("DROP SCHEMA export_file_test CASCADE")


HOSTILE = ["O'Reilly's karma", "\\ back\\slash \\\\", "$$ dollar $$ quoting", "$wb_export$ end $wb_export$",
           "'; DROP TABLE wb_index; --", "kar\x00ma yoga", "%(p_query)s %s %%", "BG 2.47'"]


def test_hostile_query_text_is_bound_never_spliced(setup, home, tmp_path):
    """Quotes, backslashes, ``$$``, the function's own dollar tag, SQL, NUL and psycopg's placeholder syntax in a
    query: the exported statement answers each as the workbench's lanes do, and every table is still there."""
    path, exp, ds, engine = setup
    queries = [Query(f"hostile-{i}", text, "paraphrase", "en", "dev") for i, text in enumerate(HOSTILE)]
    hostile = replace(ds, queries=queries)
    source = job.from_experiment(path, "rrf-pinned", "gita")
    art = postgres.build(source.cfg, exp, hostile, engine)
    cache = CandidateCache(tmp_path / "cache")  # these queries are not the dataset's: a cache of their own
    report = parity.verify_postgres(art, exp, source.cfg, hostile, engine, cache, splits=("dev",))
    assert report.queries == len(HOSTILE) and report.differences == [], report.differences
    lanes = lane_candidates(replace(exp, configs={"rrf-pinned": source.cfg}), hostile, engine, cache)
    assert sum(1 for q in queries if lanes["fts_fold_tr"].run.get_hits(q.query_id)) >= 4  # real answers compared
    with psycopg.connect(engine.dsn()) as conn:
        assert conn.execute("SELECT count(*) FROM wb_index").fetchone()[0] >= 1


@pytest.mark.parametrize("config, needle", [
    ("with-lemma", "lane sa_lemma (kind sanskrit-lemma) is computed outside PostgreSQL"),
    ("isr", "fusion 'isr' is computed by ranx in Python"),
    ("exact-beside-hnsw", "lanes.exact: exact = true"),
    ("two-thresholds", "lanes trigram and trigram_low need pg_trgm.word_similarity_threshold = 0.6 and 0.3"),
    ("weighted-reference", "lane reference (reference) is fused by weighted"),
    ("floored-reference", "lane_min_score.reference: the reference lane's answer is an input"),
])
def test_configs_one_statement_cannot_express_are_refused_naming_the_lane(setup, config, needle):
    path, exp, ds, engine = setup
    with pytest.raises(ConfigError) as err:
        postgres.build(exp.configs[config], exp, ds, engine)
    assert needle in str(err.value)
    assert "--format json" in str(err.value) or "give them the same value" in str(err.value) \
        or "exact = false" in str(err.value) or "only rrf or pin_lane" in str(err.value) \
        or "drop it from lane_min_score" in str(err.value)


def test_cut_sql_is_the_query_normalisers_cut(pg_dsn):
    """``cut_sql`` on the server equals :func:`workbench.text.query.cut` at the edges of the rule."""
    from workbench.text.query import cut

    cases = [("short", 10), ("alpha beta gamma", 11), ("alpha beta gamma", 10), ("alphabetagamma delta", 5),
             ("a  b  c", 4), ("word ", 4), ("  lead space", 3), ("exactly ten", 11), ("x" * 30, 7)]
    with psycopg.connect(pg_dsn) as conn:
        for text, limit in cases:
            got = conn.execute(f"SELECT {postgres.cut_sql('%(t)s::text', limit)}", {"t": text}).fetchone()[0]
            assert got == cut(text, limit), (text, limit, got)


def test_a_rerank_stage_is_a_separate_step_the_file_names(setup, home, tmp_path):
    """The statement returns the fused top max(top_k, rerank depth) = 30 and names the stage the application runs;
    parity is of the first stage, which the statement is."""
    path, exp, ds, engine = setup
    source = job.from_experiment(path, "reranked", "gita")
    out = job.write(source, "postgres", tmp_path / "out", home=home, verify=True, splits=("dev",))
    sql = (tmp_path / "out" / "reranked.sql").read_text()
    assert "LIMIT 30\n$wb_export$" in sql
    assert "-- Rerank stage (not in the statement; run it in the application): reranker by_fts (kind lane" in sql
    assert "rescoring the top 30, weight 1.0" in sql and "then the top 10" in sql
    assert out["parity"].parity == 1.0 and out["parity"].queries == sum(1 for q in ds.queries if q.split == "dev")
