"""PostgreSQL set-up and the indexer, against a real embedded server (the ``pg_dsn`` fixture).

Covers: server and extension checks, clear errors for a wrong DSN, a server that is
down and a missing extension; the read-only role (a write through it fails); indexing
the gita's 701 verses (idempotent, transactional: an exception or a killed process
leaves nothing registered and earlier indexes usable).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import psycopg
import pytest
from fixtures.paths import TESTS
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from workbench.data import catalog
from workbench.data.catalog import Dataset
from workbench.engines.pg_client import (
    PgError,
    check_server,
    connect,
    ensure_reader,
    reader_dsn,
    redact_dsn,
    server_dsn,
    stop_embedded,
)
from workbench.engines.pg_index import (
    REGISTRY,
    SCHEMA_VERSION,
    corpus_sha256,
    find_index,
    index_dataset,
    index_key,
    lookup_table,
    table_name,
)
from workbench.errors import ConfigError, WorkbenchError
from workbench.testing import WordHashEmbedder
from workbench.text.doctext import index_text
from workbench.types import Document, Query, Text

TESTS = TESTS


@pytest.fixture(scope="session")
def gita_home(data_dir: Path, home_with) -> Path:
    return home_with("gita-pg-home", "gita")


@pytest.fixture(scope="session")
def gita(gita_home: Path, data_dir: Path) -> Dataset:
    return catalog.load("gita", catalog.load_definitions(), data_dir, gita_home)


@pytest.fixture(scope="session")
def gita_index(pg_dsn: str, gita: Dataset):
    return index_dataset(pg_dsn, gita, WordHashEmbedder(64))


def _tables(dsn: str) -> set[str]:
    with connect(dsn) as conn:
        return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'wb_docs_%'")}


# ---------------------------------------------------------------- the server

def test_server_dsn_prefers_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_PG_DSN", "postgresql://someone@db.example/wb")
    assert server_dsn(tmp_path) == "postgresql://someone@db.example/wb"
    assert not (tmp_path / "pg").exists()  # nothing started


def test_embedded_server_is_attached_once(pg_dsn):
    from workbench.services import postgres

    if os.environ.get("WORKBENCH_PG_DSN"):
        pytest.skip("an external server is in use")
    (att,) = [a for a in postgres._ATTACHED.values() if a.dsn == pg_dsn]
    t0 = time.perf_counter()
    assert server_dsn(att.layout.home) == pg_dsn and time.perf_counter() - t0 < 0.5  # no second start


_HOLD_SERVER = """
import sys, time
from pathlib import Path
from workbench.engines.pg_client import server_dsn
print(server_dsn(Path(sys.argv[1])), flush=True)
time.sleep(120)
"""


@pytest.mark.pg  # starts its own embedded server, in a subprocess
def test_server_left_by_a_killed_process_is_stopped_by_the_next():
    import shutil
    import tempfile

    from workbench.services import postgres

    if os.environ.get("WORKBENCH_PG_DSN"):
        pytest.skip("an external server is in use")
    home = Path(tempfile.mkdtemp(prefix="wb-test-pg-kill-"))
    pidfile = postgres.layout(home).pgdata / "postmaster.pid"
    try:
        proc = subprocess.Popen([sys.executable, "-c", _HOLD_SERVER, str(home)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=TESTS.parent)
        try:
            first = proc.stdout.readline().strip()
            assert first.startswith("postgresql://"), proc.stderr.read()
        finally:
            os.kill(proc.pid, signal.SIGKILL)  # no atexit: it never lets go of the server
            proc.wait(10)
        assert pidfile.exists()  # the server outlived it
        assert server_dsn(home) == first  # the running server is reused
        with connect(first) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert stop_embedded(home) == 1
        assert not pidfile.exists()  # stopped: the killed process's share died with it
    finally:
        from workbench.engines.pg_client import remove_embedded

        remove_embedded(home)
        shutil.rmtree(home, ignore_errors=True)


def test_check_server_reports_versions(pg_dsn):
    with connect(pg_dsn) as conn:
        found = check_server(conn)
    assert int(found["server"].split(".")[0]) >= 14
    assert tuple(int(x) for x in found["vector"].split(".")[:2]) >= (0, 8)
    assert {"pg_trgm", "unaccent"} <= set(found)


def test_missing_extension_is_named_with_the_fix(pg_dsn):
    with connect(pg_dsn) as conn, pytest.raises(PgError) as err:
        check_server(conn, {"vector": "0.8", "wb_no_such_extension": None})
    assert "wb_no_such_extension" in str(err.value) and "install" in str(err.value)


def test_too_old_extension_is_named(pg_dsn):
    with connect(pg_dsn) as conn, pytest.raises(PgError) as err:
        check_server(conn, {"vector": "99.0"})
    assert "'vector'" in str(err.value) and "99.0" in str(err.value) and "ALTER EXTENSION" in str(err.value)


def test_server_down_names_the_dsn(tmp_path):
    dsn = f"postgresql://postgres@/postgres?host={tmp_path}"  # a socket folder with no server
    with pytest.raises(PgError) as err:
        connect(dsn)
    msg = str(err.value)
    assert str(tmp_path) in msg and "start the server" in msg and "WORKBENCH_PG_DSN" in msg
    assert isinstance(err.value, WorkbenchError)


def test_malformed_dsn():
    with pytest.raises(PgError, match="invalid PostgreSQL DSN"):
        connect("this is not a dsn")


def test_wrong_database_hides_the_password(pg_dsn):
    parts = conninfo_to_dict(pg_dsn)
    parts.update(dbname="wb_no_such_db", password="s3cret-pw")
    with pytest.raises(PgError) as err:
        connect(make_conninfo(**parts))
    assert "wb_no_such_db" in str(err.value) and "s3cret-pw" not in str(err.value)


def test_redact_hides_passwords():
    assert "hunter2" not in redact_dsn("postgresql://u:hunter2@h:5432/db")
    assert "hunter2" not in redact_dsn("host=h user=u password=hunter2")
    assert "hunter2" not in redact_dsn("postgresql://u:hunter2@h:bad port/db")  # unparseable: regex fallback
    # what an attack found: an unterminated quote, a misspelt key, an unencoded @ (libpq splits it at the first)
    assert redact_dsn("host=x password='abc def") == "host=x (the rest hidden: it does not parse)"
    assert redact_dsn("host=x passwd=secret") == "host=x (the rest hidden: it does not parse)"
    assert redact_dsn("postgresql://u:p@ss@host/db") == "postgresql://***@host/db"
    with pytest.raises(PgError) as err:  # the driver's message quotes the bad token: it is not shown
        connect("postgresql://u:sec%zzret@h/db")
    assert "zzret" not in str(err.value) and "it does not parse" in str(err.value)


def test_reader_dsn_swaps_the_user():
    d = conninfo_to_dict(reader_dsn("postgresql://admin:pw@h:5433/wb", password=""))
    assert d["user"] == "wb_reader" and d["dbname"] == "wb" and d["port"] == "5433" and "password" not in d


# ---------------------------------------------------------------- the read-only role

def test_reader_cannot_write(pg_dsn, gita_index):
    t = gita_index.table
    with connect(reader_dsn(pg_dsn)) as conn:
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 701
        assert conn.execute(f"SELECT count(*) FROM {REGISTRY}").fetchone()[0] >= 1
        writes = [f"INSERT INTO {t} (doc_id, ord, address, work_id, body, embedding) "
                  f"SELECT 'x', 0, 'x', 'x', 'x', embedding FROM {t} LIMIT 1",
                  f"UPDATE {REGISTRY} SET doc_count = 0",
                  f"DELETE FROM {t}",
                  "CREATE TABLE wb_evil (x int)",
                  f"DROP TABLE {t}",
                  f"CREATE INDEX wb_evil_idx ON {t} (ord)",
                  f"TRUNCATE {t}"]
        for stmt in writes:  # refused by the read-only default transaction
            with pytest.raises(psycopg.Error):
                conn.execute(stmt)
        conn.execute("SET default_transaction_read_only = off")
        for stmt in writes:  # and by privileges when the role switches that off
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)
        su, createrole, createdb = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user").fetchone()
        assert not (su or createrole or createdb)
    with connect(pg_dsn) as conn:
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 701


def test_ensure_reader_is_idempotent(pg_dsn):
    with connect(pg_dsn) as conn:
        assert ensure_reader(conn) == ensure_reader(conn) == "wb_reader"


def test_unknown_role_is_a_clear_error(pg_dsn):
    with pytest.raises(PgError, match="wb_nobody"):
        connect(pg_dsn, role="wb_nobody")


# ---------------------------------------------------------------- the indexer

def test_index_gita(pg_dsn, gita, gita_index):
    info = gita_index
    assert info.dataset == "gita" and info.doc_count == len(gita.documents) == 701
    assert info.table == table_name(info.key) and info.corpus_sha256 == gita.manifest["outputs"]["documents.jsonl"]
    assert info.key == index_key(info.corpus_sha256, "test/hash-bow-64", 64, 16, 64, False)
    assert info.build_s > 0 and 0 < info.hnsw_build_s < info.build_s and info.schema_version == SCHEMA_VERSION
    with connect(pg_dsn) as conn:
        idx = {r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", (info.table,))}
        assert sum("USING hnsw (embedding vector_cosine_ops) WITH (m='16', ef_construction='64')" in i for i in idx) == 1
        assert sum("gin_trgm_ops" in i for i in idx) == 1
        assert all(any(f"USING gin ({c})" in i for i in idx) for c in ("tsv_russian", "tsv_simple", "tsv_fold"))
        n_null = conn.execute(f"SELECT count(*) FROM {info.table} WHERE tsv_simple IS NULL OR tsv_fold IS NULL "
                              "OR tsv_russian IS NULL OR body <> normalize(body, NFC)").fetchone()[0]
        assert n_null == 0
        assert conn.execute(f"SELECT array_agg(doc_id ORDER BY ord) FROM {info.table}").fetchone()[0] == \
            [d.doc_id for d in gita.documents]
        params = conn.execute(f"SELECT params FROM {REGISTRY} WHERE key = %s", (info.key,)).fetchone()[0]
        assert params["build_s"] > 0 and params["hnsw_build_s"] > 0 and params["m"] == 16
        assert lookup_table(conn, info.table).key == info.key
        assert conn.execute("SELECT has_table_privilege('wb_reader', %s, 'SELECT')", (info.table,)).fetchone()[0]


def test_reindexing_is_a_no_op(pg_dsn, gita, gita_index):
    before = _tables(pg_dsn)
    again = index_dataset(pg_dsn, gita, WordHashEmbedder(64))
    assert again.reused and again.key == gita_index.key and again.table == gita_index.table
    assert again.created_at == gita_index.created_at and again.elapsed_s < 0.5
    assert _tables(pg_dsn) == before


def test_find_index(pg_dsn, gita, gita_index):
    got = find_index(reader_dsn(pg_dsn), "gita", "test/hash-bow-64", corpus=corpus_sha256(gita), m=16, halfvec=False)
    assert got is not None and got.key == gita_index.key
    assert find_index(pg_dsn, "gita", "test/hash-bow-64", corpus="0" * 64) is None
    assert find_index(pg_dsn, "gita", "no/such-model") is None


def test_index_key_covers_every_part():
    base = ("c" * 64, "model", 384, 16, 64, False)
    keys = {index_key(*base), index_key("d" * 64, *base[1:]), index_key(base[0], "other", *base[2:]),
            index_key(*base[:2], 768, *base[3:]), index_key(*base[:3], 32, 64, False),
            index_key(*base[:4], 128, False), index_key(*base[:5], True)}
    assert len(keys) == 7


class FailingEmbedder(WordHashEmbedder):
    """Embeds ``after`` passages, then raises."""

    def __init__(self, after: int, **kw):
        super().__init__(**kw)
        self.after, self.seen = after, 0

    def embed_passages(self, texts):
        self.seen += len(texts)
        if self.seen > self.after:
            raise RuntimeError("embedder failed on purpose")
        return super().embed_passages(texts)


def _registered(dsn: str, model_id: str) -> int:
    with connect(dsn) as conn:
        if conn.execute("SELECT to_regclass(%s)", (REGISTRY,)).fetchone()[0] is None:
            return 0
        return conn.execute(f"SELECT count(*) FROM {REGISTRY} WHERE model_id = %s", (model_id,)).fetchone()[0]


def test_failed_build_leaves_nothing_and_the_old_index_answers(pg_dsn, gita, gita_index):
    from retrievers.fulltext import FullTextLane

    before = _tables(pg_dsn)
    emb = FailingEmbedder(100, dim=64, model_id="test/failing")
    with pytest.raises(RuntimeError, match="on purpose"):
        index_dataset(pg_dsn, gita, emb)
    assert emb.seen > 100  # it failed mid-way, after rows were copied
    key = index_key(corpus_sha256(gita), "test/failing", 64, 16, 64, False)
    assert _registered(pg_dsn, "test/failing") == 0
    assert _tables(pg_dsn) == before and table_name(key) not in _tables(pg_dsn)
    lane = FullTextLane("fts", reader_dsn(pg_dsn), gita_index.table)
    run = lane.search([Query("q", "phaleṣu kadācana", "term", "sa", "test")], 5)
    assert run["q"][0].doc_id == "bg2.47"


def test_embedder_with_wrong_shape_is_refused(pg_dsn, gita):
    class Wrong(WordHashEmbedder):
        def embed_passages(self, texts):
            return super().embed_passages(texts)[:, :10]

    with pytest.raises(ConfigError, match="shape"):
        index_dataset(pg_dsn, gita, Wrong(64, "test/wrong-shape"))
    assert _registered(pg_dsn, "test/wrong-shape") == 0


@pytest.mark.parametrize("kw, match", [({"m": 1}, "m must"), ({"ef_construction": 20}, "ef_construction"),
                                       ({"halfvec": False, "dim": 2001}, "halfvec=True")])
def test_bad_index_parameters(pg_dsn, gita, kw, match):
    dim = kw.pop("dim", 16)
    with pytest.raises(ConfigError, match=match):
        index_dataset(pg_dsn, gita, WordHashEmbedder(dim, "test/bad"), **kw)


_KILLED = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from workbench.data import catalog
from workbench.engines.pg_index import index_dataset
from workbench.testing import WordHashEmbedder
from workbench.text.doctext import index_text

class Slow(WordHashEmbedder):
    seen = 0
    def embed_passages(self, texts):
        self.seen += len(texts)
        if self.seen > 256:
            print("EMBEDDING", flush=True)
            time.sleep(120)
        return super().embed_passages(texts)

ds = catalog.load("gita", None, Path(sys.argv[2]), Path(sys.argv[3]), check=False)
index_dataset(sys.argv[4], ds, Slow(32, "test/killed"))
"""


def test_killed_build_leaves_nothing_and_can_be_redone(pg_dsn, gita, gita_home, data_dir):
    before = _tables(pg_dsn)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(TESTS), str(data_dir), str(gita_home), pg_dsn],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TESTS.parent)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "EMBEDDING", proc.stderr.read()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert _registered(pg_dsn, "test/killed") == 0 and _tables(pg_dsn) == before
    info = index_dataset(pg_dsn, gita, WordHashEmbedder(32, "test/killed"))  # waits for the dead build's lock
    assert not info.reused and info.doc_count == 701 and _registered(pg_dsn, "test/killed") == 1


def test_dataset_without_manifest_hashes_its_documents():
    docs = [Document("a", "A 1", "a", "verse", (Text("translation", "en", "Latn", "one"),))]
    ds = Dataset("tiny", docs, [], [], {})
    assert corpus_sha256(ds) == corpus_sha256(Dataset("tiny", list(docs), [], [], {}))
    assert len(corpus_sha256(ds)) == 64


class LockWatchingEmbedder(WordHashEmbedder):
    """Records, at each call, how many passages it got and whether anyone holds the workbench's DDL lock."""

    def __init__(self, dsn: str, **kw):
        super().__init__(**kw)
        self.dsn, self.calls = dsn, []

    def embed_passages(self, texts):
        from workbench.engines.pg_client import DDL_LOCK

        with connect(self.dsn) as conn:
            held = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                                "objid = hashtext(%s)::oid", (DDL_LOCK,)).fetchone()[0]
        self.calls.append((len(texts), bool(held)))
        return super().embed_passages(texts)


def test_a_cached_embedder_embeds_before_the_ddl_lock_and_the_build_reads_the_cache(pg_dsn, gita, tmp_path):
    """Two processes indexing two corpora at once (make main's chains) must not wait minutes on each other's
    model: with an embedding cache, every passage is embedded once, with the DDL lock free, and the build that
    takes the lock reads them all back (the model sees no text twice); without a cache, the build embeds."""
    from workbench.embedding.embedders import CachedEmbedder

    inner = LockWatchingEmbedder(pg_dsn, dim=64, model_id="test/lock-watch")
    info = index_dataset(pg_dsn, gita, CachedEmbedder(inner, tmp_path / "emb.sqlite"))
    assert not info.reused and info.doc_count == len(gita.documents) == 701
    distinct = len({unicodedata.normalize("NFC", index_text(d)) for d in gita.documents})
    assert sum(n for n, _ in inner.calls) == distinct and not any(held for _, held in inner.calls)
    plain = LockWatchingEmbedder(pg_dsn, dim=64, model_id="test/lock-watch-plain")
    index_dataset(pg_dsn, gita, plain)
    assert sum(n for n, _ in plain.calls) == 701 and all(held for _, held in plain.calls)
