"""A team's own PostgreSQL table, read where it is (issue #42, item 5): AICharya's shape,
``aicharya.chunks(id uuid, verse_ref text, body text, tsv_ru tsvector, embedding vector)``, names unlike the
workbench's, in the session's embedded server, reached through a DSN in an environment variable.

The team's corpus is a ``files`` dataset whose ids are the table's uuids (a BEIR folder the test writes from the
gita: Russian text, a share of its dev and test queries). The table is filled from the workbench's own index of
that dataset, so the same rows with the same vectors and tsvectors sit under other names, with the team's own
HNSW, GIN and trigram indexes. What proves it:

* the lanes on the team's table rank every query exactly as the same lanes on the workbench's index (full text,
  trigram, exact vector scan): ids, order and scores;
* nothing is written: the lane's session is read-only (an INSERT through it is refused), the table's rows and
  its schema's relations are unchanged, and ``--verify`` leaves no function anywhere;
* ``workbench export`` writes the statement against ``"aicharya"."chunks"`` and its columns, and ``--verify``
  gives parity 1.0 on the team's server;
* what a team gets wrong gets one line: a missing table, a missing column, an unset ``dsn_env``, a lane whose
  ``table`` lacks the column it reads; a changed table keys a new cache entry.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest

from workbench.data import catalog
from workbench.errors import ConfigError, PgError
from workbench.experiment.cache import CandidateCache
from workbench.experiment.config import load_experiment
from workbench.experiment.runner import Engine, lane_candidates
from workbench.export import job

NS = uuid.UUID("6f1c1d0e-6b5f-4c43-9a57-2b8e3c6a9d11")
ENV = "AICHARYA_TEST_DSN"
TABLE = 'table = {{ schema = "aicharya", name = "chunks", dsn_env = "{env}", {cols} }}'

EXP = """
name = "team-table"
datasets = ["team-gita"]
depth = 40
splits = ["dev", "test"]
measures = ["R@10"]
[embedders.h]
kind = "hash"
dim = 32
[lanes.vec_exact]
kind = "pgvector"
embedder = "h"
exact = true
[lanes.fts]
kind = "fulltext"
config = "russian"
[lanes.trg]
kind = "trigram"
max_query_words = 2
[lanes.team_vec]
kind = "pgvector"
embedder = "h"
{vec}
[lanes.team_vec_exact]
kind = "pgvector"
embedder = "h"
exact = true
{vec}
[lanes.team_fts]
kind = "fulltext"
{fts}
[lanes.team_trg]
kind = "trigram"
max_query_words = 2
{trg}
[configs.ours]
lanes = ["vec_exact", "fts", "trg"]
[configs.theirs]
lanes = ["team_vec_exact", "team_fts", "team_trg"]
[configs.team-hybrid]
lanes = ["team_vec", "team_fts", "team_trg"]
fusion = "rrf"
k = 60
min_score = 0.02
""".format(vec=TABLE.format(env=ENV, cols='vector = "embedding"'),
           fts=TABLE.format(env=ENV, cols='tsvector = "tsv_ru", ts_config = "russian"'),
           trg=TABLE.format(env=ENV, cols='text = "body"'))


def _team_folder(gita, folder: Path) -> None:
    """A BEIR folder of the gita under uuid ids: Russian text (English where a verse has none), every 12th dev and
    test query with its judgments."""
    (folder / "qrels").mkdir(parents=True)
    ids = {d.doc_id: str(uuid.uuid5(NS, d.doc_id)) for d in gita.documents}
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in gita.documents:
            text = "\n".join(t.text for t in d.texts if t.language == "ru") or "\n".join(
                t.text for t in d.texts if t.language == "en")
            f.write(json.dumps({"_id": ids[d.doc_id], "title": d.address, "text": text}, ensure_ascii=False) + "\n")
    kept = sorted(q.query_id for q in gita.queries if q.split in ("dev", "test"))[::12]
    split = {q.query_id: q.split for q in gita.queries}
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
        for q in gita.queries:
            if q.query_id in kept:
                md = {"query_type": q.query_type, "language": q.language}
                f.write(json.dumps({"_id": q.query_id, "text": q.text, "metadata": md}, ensure_ascii=False) + "\n")
    keep = set(kept)
    for s in ("dev", "test"):
        rows = [f"{r.query_id}\t{ids[r.doc_id]}\t{r.relevance}" for r in gita.qrels
                if r.query_id in keep and split[r.query_id] == s]
        (folder / "qrels" / f"{s}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def team(gita, pg_dsn, tmp_path_factory):
    """(experiment path, experiment, dataset, engine, home): the team's dataset built, the workbench's index of it
    built, and ``aicharya.chunks`` made from that index with the team's own indexes."""
    base = tmp_path_factory.mktemp("team-table")
    _team_folder(gita, base / "team-gita")
    defs = base / "datasets.toml"
    defs.write_text('seed = 20261207\n[dataset.team-gita]\nsource = "files"\ndocuments = "team-gita"\n'
                    'language = "ru"\naddress_field = "title"\n')
    home = base / "home"
    definitions = catalog.load_definitions(defs)
    catalog.build("team-gita", definitions, base, home)
    ds = catalog.load("team-gita", definitions, base, home)
    path = base / "team-table.toml"
    path.write_text(EXP)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_PG_DSN", pg_dsn)
        mp.setenv("WORKBENCH_DATASETS", str(defs))
        mp.setenv(ENV, pg_dsn)  # the admin's DSN: the lanes make their session read-only themselves
        exp = load_experiment(path, known_datasets={"team-gita"})
        engine = Engine(exp, home)
        info = engine.pg_index(ds, "h")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS aicharya CASCADE")
            conn.execute("CREATE SCHEMA aicharya")
            conn.execute("CREATE TABLE aicharya.chunks (id uuid PRIMARY KEY, verse_ref text, body text, "
                         "tsv_ru tsvector, embedding vector(32))")
            conn.execute(f"INSERT INTO aicharya.chunks SELECT doc_id::uuid, NULL, body, tsv_russian, embedding "
                         f'FROM "{info.table}"')
            conn.execute("CREATE INDEX ON aicharya.chunks USING hnsw (embedding vector_cosine_ops)")
            conn.execute("CREATE INDEX ON aicharya.chunks USING gin (tsv_ru)")
            conn.execute("CREATE INDEX ON aicharya.chunks USING gin (body gin_trgm_ops)")
        yield path, exp, ds, engine, home
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS aicharya CASCADE")


def _relations(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
                                           "c.relnamespace WHERE n.nspname = 'aicharya' ORDER BY 1").fetchall()]


def test_lanes_on_the_team_table_rank_as_on_the_workbench_index_and_write_nothing(team, pg_dsn):
    path, exp, ds, engine, home = team
    before = _relations(pg_dsn)
    assert before == ["chunks", "chunks_body_idx", "chunks_embedding_idx", "chunks_pkey", "chunks_tsv_ru_idx"]
    lanes = lane_candidates(exp, ds, engine, CandidateCache(home / "cache" / "candidates"))
    queries = [q.query_id for q in ds.queries]
    assert len(queries) == 63
    for ours, theirs in (("fts", "team_fts"), ("trg", "team_trg"), ("vec_exact", "team_vec_exact")):
        a, b = lanes[ours].run, lanes[theirs].run
        same = [q for q in queries if [(h.doc_id, h.score) for h in a.get_hits(q)] == [(h.doc_id, h.score)
                                                                                      for h in b.get_hits(q)]]
        assert len(same) == len(queries), (ours, [q for q in queries if q not in same][:3])
    found = sum(1 for q in queries if lanes["team_fts"].run.get_hits(q))
    assert found > 20, found  # Russian queries find Russian text: the comparison is not over empty lists
    assert sum(1 for q in queries if lanes["team_vec"].run.get_hits(q)) == len(queries)
    # the lane's session is read-only whatever role the DSN names, and the table is as it was
    lane = engine.lane(ds, exp.lanes["team_fts"])
    lane.search([ds.queries[0]], 5)
    with pytest.raises(PgError, match="read-only"):
        lane._guard(lambda: lane._session.get().execute("INSERT INTO aicharya.chunks (id) VALUES (gen_random_uuid())"))
    lane.close()
    assert _relations(pg_dsn) == before
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM aicharya.chunks").fetchone()[0] == len(ds.documents) == 701


def test_a_changed_table_is_searched_again_not_read_from_the_cache(team, pg_dsn):
    path, exp, ds, engine, home = team
    spec = exp.lanes["team_fts"]
    key = engine.cache_parts(ds, spec)
    assert key["production"]["table"] == "aicharya.chunks" and key["production"]["rows"] == 701
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO aicharya.chunks (id, body) VALUES ('00000000-0000-0000-0000-000000000001', 'x')")
        try:
            assert engine.cache_parts(ds, spec)["production"] != key["production"]
        finally:
            conn.execute("DELETE FROM aicharya.chunks WHERE id = '00000000-0000-0000-0000-000000000001'")


@pytest.mark.parametrize("table, needle", [
    ('{ schema = "aicharya", name = "chunkz", dsn_env = "ENV", tsvector = "tsv_ru", ts_config = "russian" }',
     "table aicharya.chunkz does not exist at"),
    ('{ schema = "aicharya", name = "chunks", dsn_env = "ENV", tsvector = "tsv_en", ts_config = "russian" }',
     "has no column 'tsv_en' (table.tsvector); its columns: body, embedding, id, tsv_ru, verse_ref"),
    ('{ schema = "aicharya", name = "chunks", dsn_env = "UNSET_TEAM_DSN", tsvector = "tsv_ru", ts_config = "russian" }',
     "environment variable UNSET_TEAM_DSN (dsn_env) is not set"),
])
def test_what_a_team_gets_wrong_gets_one_line(team, tmp_path, table, needle):
    path, exp, ds, engine, home = team
    bad = tmp_path / "bad.toml"
    bad.write_text(f'name = "bad"\ndatasets = ["team-gita"]\n[lanes.f]\nkind = "fulltext"\n'
                   f'table = {table.replace("ENV", ENV)}\n[configs.f]\nlanes = ["f"]\n')
    e = load_experiment(bad, known_datasets={"team-gita"})
    with pytest.raises((PgError, ConfigError)) as err:
        lane = Engine(e, home).lane(ds, e.lanes["f"])
        lane.search(ds.queries[:1], 5)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_lane_whose_table_lacks_its_column_is_refused_at_load(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\ndatasets = ["gita"]\n[embedders.h]\nkind = "hash"\ndim = 8\n[lanes.v]\n'
                   'kind = "pgvector"\nembedder = "h"\ntable = { name = "chunks", tsvector = "tsv_ru" }\n'
                   '[configs.v]\nlanes = ["v"]\n')
    with pytest.raises(ConfigError, match="table.vector is required: the pgvector lane reads that column of chunks"):
        load_experiment(bad, known_datasets={"gita"})


def test_export_reads_the_team_schema_and_verify_as_its_reader_gives_parity_one_leaving_nothing(team, pg_dsn,
                                                                                                 tmp_path):
    """The statement reads the team's table and columns; ``--verify`` runs as the team's reader, which is how a team
    grants access: no superuser, so PostgreSQL refuses a function whose SET names a parameter of an extension not
    yet loaded in the session (hnsw.*, pg_trgm.*) and --verify loads them first; transactions read-only by default,
    where even a pg_temp function cannot be created, so --verify lifts that for its own rolled-back transaction
    (read-only again before the first call). Nothing is left, and the reader's password is written nowhere."""
    from psycopg.conninfo import make_conninfo

    path, exp, ds, engine, home = team
    secret = "Pa55-team-reader-secret"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS aicharya_reader")
        conn.execute(f"CREATE ROLE aicharya_reader LOGIN PASSWORD '{secret}'")
        conn.execute("ALTER ROLE aicharya_reader SET default_transaction_read_only = on")  # as readers often are
        conn.execute("GRANT USAGE ON SCHEMA aicharya TO aicharya_reader")
        conn.execute("GRANT SELECT ON aicharya.chunks TO aicharya_reader")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(ENV, make_conninfo(pg_dsn, user="aicharya_reader", password=secret))
            source = job.from_experiment(path, "team-hybrid", "team-gita")
            logged: list[str] = []
            out = job.write(source, "postgres", tmp_path / "out", home=home, verify=True, log=logged.append)
        report = out["parity"]
        assert report.queries == 63 and report.differences == [] and report.parity == 1.0
        assert report.statement_checked == 20 and report.statement_mismatches == 0
        sql = (tmp_path / "out" / "team-hybrid.sql").read_text()
        assert '"aicharya"."chunks"' in sql and '"tsv_ru"' in sql and '"embedding"' in sql and '"body"' in sql
        assert "wb_docs_" not in sql and pg_dsn not in sql
        assert "Reads the team's own table aicharya.chunks" in sql
        written = [p.read_text() for p in (tmp_path / "out").iterdir()] + logged
        written.append(json.dumps(report.to_json()))
        assert not [w for w in written if secret in w]
        with psycopg.connect(pg_dsn) as conn:  # the function lived in a rolled-back pg_temp
            assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname LIKE 'wb_search_team%'").fetchone()[0] == 0
        assert _relations(pg_dsn)[0] == "chunks" and len(_relations(pg_dsn)) == 5
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP OWNED BY aicharya_reader")
            conn.execute("DROP ROLE aicharya_reader")


@pytest.fixture
def odd_tables(team, pg_dsn):
    """Tables a team brings as they are: a vector column declared without its dimension, rows without an id,
    a "tsvector" that is text, a "text" that is an integer, a view repeating ids."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS aicharya_odd CASCADE")
        conn.execute("CREATE SCHEMA aicharya_odd")
        conn.execute("CREATE TABLE aicharya_odd.chunks AS SELECT id, body, tsv_ru, embedding::vector AS embedding "
                     "FROM aicharya.chunks")
        conn.execute("INSERT INTO aicharya_odd.chunks SELECT NULL, body, tsv_ru, embedding FROM aicharya.chunks "
                     "LIMIT 50")
        conn.execute("CREATE TABLE aicharya_odd.wrong (id uuid, tsv_ru text, body int)")
        conn.execute("CREATE VIEW aicharya_odd.plain AS SELECT * FROM aicharya.chunks")
        conn.execute("CREATE TABLE aicharya_odd.empty (LIKE aicharya.chunks)")
        # what format_type shows of pgvector installed in a schema off the search_path: a qualified name
        conn.execute("CREATE DOMAIN aicharya_odd.vector AS text")
        conn.execute("CREATE TABLE aicharya_odd.offpath (id uuid, embedding aicharya_odd.vector)")
        conn.execute("CREATE VIEW aicharya_odd.upper AS SELECT upper(id::text) AS id, tsv_ru FROM aicharya.chunks")
        conn.execute("CREATE VIEW aicharya_odd.dups AS SELECT * FROM aicharya.chunks UNION ALL "
                     "(SELECT * FROM aicharya.chunks ORDER BY id LIMIT 3)")
    yield
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS aicharya_odd CASCADE")


def _odd_lane(team, tmp_path, kind: str, table: str):
    path, exp, ds, engine, home = team
    bad = tmp_path / "odd.toml"
    bad.write_text(f'name = "odd"\ndatasets = ["team-gita"]\n[embedders.h]\nkind = "hash"\ndim = 32\n[lanes.f]\n'
                   f'kind = "{kind}"\n' + ('embedder = "h"\n' if kind == "pgvector" else "") +
                   f'table = {{ schema = "aicharya_odd", dsn_env = "{ENV}", {table} }}\n[configs.f]\nlanes = ["f"]\n')
    e = load_experiment(bad, known_datasets={"team-gita"})
    return Engine(e, home).lane(ds, e.lanes["f"]), ds


@pytest.mark.parametrize("kind, table", [
    ("pgvector", 'name = "chunks", vector = "embedding"'),
    ("fulltext", 'name = "chunks", tsvector = "tsv_ru", ts_config = "Russian"'),  # folded, as PostgreSQL does
])
def test_a_dimensionless_vector_column_and_rows_without_id_are_read(team, odd_tables, tmp_path, capfd, kind, table):
    lane, ds = _odd_lane(team, tmp_path, kind, table)
    run = lane.search(ds.queries[:5], 10)
    if kind == "pgvector":
        assert lane.index_info().dim == 32
    lane.close()
    hits = [h.doc_id for q in ds.queries[:5] for h in run.get_hits(q.query_id)]
    assert hits and None not in hits
    assert "50 rows of aicharya_odd.chunks have no id (table.id is NULL)" in capfd.readouterr().err


@pytest.mark.parametrize("kind, table, needle", [
    ("fulltext", 'name = "wrong", tsvector = "tsv_ru", ts_config = "russian"',
     "column tsv_ru of aicharya_odd.wrong (table.tsvector) is text, not tsvector"),
    ("trigram", 'name = "wrong", text = "body"', "column body of aicharya_odd.wrong (table.text) is integer, not text"),
    ("fulltext", 'name = "chunks", tsvector = "tsv_ru", ts_config = "russain"',
     "text search configuration 'russain' (table.ts_config) does not exist"),
    ("pgvector", 'name = "offpath", vector = "embedding"',
     "is aicharya_odd.vector: pgvector lives in schema aicharya_odd, which is not on that role's search_path"),
    ("pgvector", 'name = "dups", vector = "embedding"',
     "3 ids of aicharya_odd.dups appear on more than one row (e.g. "),
])
def test_a_column_of_the_wrong_type_gets_one_line(team, odd_tables, tmp_path, kind, table, needle):
    lane, ds = _odd_lane(team, tmp_path, kind, table)
    with pytest.raises(PgError) as err:
        lane.search(ds.queries[:1], 5)
    lane.close()
    assert needle in str(err.value) and "\n" not in str(err.value)


def _bad_dsn_experiment(tmp_path):
    """An experiment with one full-text lane on aicharya.chunks whose DSN is in ``$BAD_TEAM_DSN``."""
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\ndatasets = ["team-gita"]\n[lanes.f]\nkind = "fulltext"\ntable = { schema = '
                   '"aicharya", name = "chunks", dsn_env = "BAD_TEAM_DSN", tsvector = "tsv_ru", ts_config = "russian" }'
                   '\n[configs.f]\nlanes = ["f"]\n')
    return load_experiment(bad, known_datasets={"team-gita"})


@pytest.mark.parametrize("dsn, needle", [
    ("host=/nowhere password=hunter2-secret bogus=1", 'invalid connection option "bogus"'),
    ("host=/nowhere password=hunter2 secret", "it does not parse"),  # libpq: missing "=" after "secret"
    ("host=/nowhere password='hunter2 secret", "it does not parse"),
    ("postgresql://u:hunter2%zzsecret@h/db", "it does not parse"),  # libpq quotes the whole token
])
def test_a_dsn_that_does_not_parse_names_its_variable_and_shows_nothing_of_it(team, tmp_path, dsn, needle):
    path, exp, ds, engine, home = team
    e = _bad_dsn_experiment(tmp_path)
    for step in (lambda eng: eng.cache_parts(ds, e.lanes["f"]), lambda eng: eng.lane(ds, e.lanes["f"])):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("BAD_TEAM_DSN", dsn)
            with pytest.raises(ConfigError) as err:
                step(Engine(e, home))
        msg = str(err.value)
        assert "BAD_TEAM_DSN (dsn_env) does not hold a PostgreSQL DSN" in msg and needle in msg
        assert "secret" not in msg and "hunter2" not in msg and "\n" not in msg


def test_an_unreachable_team_server_names_its_variable_not_the_workbenchs(team, tmp_path):
    path, exp, ds, engine, home = team
    e = _bad_dsn_experiment(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BAD_TEAM_DSN", "postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=2")
        with pytest.raises(PgError) as err:
            Engine(e, home).cache_parts(ds, e.lanes["f"])
    msg = str(err.value)
    assert "fix BAD_TEAM_DSN (table.dsn_env)" in msg and "WORKBENCH_PG_DSN" not in msg and "hunter2" not in msg


def test_a_view_is_searched_again_when_a_table_under_it_changes(team, odd_tables, pg_dsn, tmp_path):
    """A view has no change counters of its own: those of the tables it reads key the cache (an UPDATE keeps
    the row count, so only the counters can tell)."""
    import time

    path, exp, ds, engine, home = team
    p = tmp_path / "view.toml"
    p.write_text(f'name = "view"\ndatasets = ["team-gita"]\n[lanes.f]\nkind = "fulltext"\ntable = {{ schema = '
                 f'"aicharya_odd", name = "plain", dsn_env = "{ENV}", tsvector = "tsv_ru", ts_config = "russian" }}\n'
                 '[configs.f]\nlanes = ["f"]\n')
    e = load_experiment(p, known_datasets={"team-gita"})
    eng = Engine(e, home)
    key = eng.cache_parts(ds, e.lanes["f"])["production"]
    assert key["changes"] is not None and key["rows"] == 701
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE aicharya.chunks SET verse_ref = verse_ref WHERE id = (SELECT id FROM aicharya.chunks "
                     "ORDER BY id LIMIT 1)")
    for _ in range(30):  # PostgreSQL flushes its counters within about a second
        if eng.cache_parts(ds, e.lanes["f"])["production"] != key:
            break
        time.sleep(0.1)
    assert eng.cache_parts(ds, e.lanes["f"])["production"]["changes"] != key["changes"]


def test_ids_that_name_no_document_fail_the_lane_not_score_zero(team, odd_tables, tmp_path):
    """A table whose ids are not the dataset's (upper-case uuids) must not look like a bad system: past the table's
    max_unmapped the eval fails naming the lane and the first ids; under it they are dropped and counted."""
    path, exp, ds, engine, home = team
    for most, fails in (("", True), (", max_unmapped = 1.0", False)):
        p = tmp_path / "upper.toml"
        p.write_text(f'name = "upper"\ndatasets = ["team-gita"]\nsplits = ["dev", "test"]\n[lanes.f]\nkind = '
                     f'"fulltext"\ntable = {{ schema = "aicharya_odd", name = "upper", dsn_env = "{ENV}", tsvector = '
                     f'"tsv_ru", ts_config = "russian"{most} }}\n[configs.f]\nlanes = ["f"]\n')
        e = load_experiment(p, known_datasets={"team-gita"})
        cache = CandidateCache(tmp_path / "cache")
        if fails:
            with pytest.raises(ConfigError, match=r"lanes\.f: 100\.0% of the ids it returned on team-gita .* name no "
                                                  r"document \(first: '[0-9A-F-]{36}'.*the team table's id column "
                                                  r"\(table\.id\) must hold the dataset's doc ids"):
                lane_candidates(e, ds, Engine(e, home), cache)
        else:
            lanes = lane_candidates(e, ds, Engine(e, home), cache)
            assert lanes["f"].unmapped > 0 and not any(lanes["f"].run.get_hits(q.query_id) for q in ds.queries)


def test_an_empty_table_is_said_to_be_empty(team, odd_tables, tmp_path, capfd):
    lane, ds = _odd_lane(team, tmp_path, "fulltext", 'name = "empty", tsvector = "tsv_ru", ts_config = "russian"')
    run = lane.search(ds.queries[:3], 10)
    lane.close()
    assert not any(run.get_hits(q.query_id) for q in ds.queries[:3])
    err = capfd.readouterr().err
    assert "table aicharya_odd.empty at " in err and "has no row with an id: every query gets an empty ranking" in err
