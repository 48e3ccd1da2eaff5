"""The judgment store on a real PostgreSQL: migrations, raters and tokens, handing out work with row
locks, append-only history, undo, stale pages, concurrent raters and a process killed mid-write."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter

import psycopg
import pytest
from faults import REPO

from workbench.judging.store import SCHEMA_VERSION, JudgeError, JudgmentStore, PoolPair, token_hash


@pytest.fixture
def store(judge_store):
    return judge_store


def _pool(st: JudgmentStore, n: int, raters: int = 2, dataset: str = "gita") -> int:
    return st.create_pool(dataset, [PoolPair(f"q{i // 5}", f"d{i}", tier=i % 2, priority=float(n - i)) for i in range(n)],
                          raters_per_pair=raters, params={"test": True})


def test_migrations_create_the_schema_once_and_refuse_a_newer_store(store, pg_dsn):
    assert store.version() == SCHEMA_VERSION == 3
    assert JudgmentStore(pg_dsn).migrate() == 3  # a second open changes nothing
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'wb_judge'")}
        assert tables == {"schema_version", "raters", "pools", "pairs", "assignments", "queue", "queue_pools",
                          "judgments", "adjudications",
                          "settings"}
        conn.execute("INSERT INTO wb_judge.schema_version (version, note) VALUES (99, 'from the future')")
    with pytest.raises(JudgeError, match="schema version 99, newer than this workbench's 3"):
        JudgmentStore(pg_dsn)


def test_the_retrieval_role_cannot_read_the_store(store, pg_dsn):
    from workbench.engines.pg_client import ensure_reader, reader_dsn

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        ensure_reader(conn)
    with psycopg.connect(reader_dsn(pg_dsn), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM wb_judge.judgments")


def test_a_token_is_shown_once_and_only_its_hash_is_kept(store, pg_dsn):
    ann, token = store.add_rater("ann")
    assert len(token) >= 32 and ann.role == "rater"
    with psycopg.connect(pg_dsn) as conn:
        stored = conn.execute("SELECT token_sha256 FROM wb_judge.raters WHERE name = 'ann'").fetchone()[0]
    assert stored == hashlib.sha256(token.encode()).hexdigest() == token_hash(token) and token not in stored
    assert store.rater_by_token(token) == ann
    assert store.rater_by_token(token + "x") is None and store.rater_by_token("") is None
    assert store.rater_by_token(None) is None
    store.revoke_rater("ann")
    assert store.rater_by_token(token) is None
    with pytest.raises(JudgeError, match="no active rater named 'ann'"):
        store.revoke_rater("ann")


@pytest.mark.parametrize("name", ["", "a b", "-lead", "x" * 65, "ann;drop", None, "zed\n", "zed\r\n", "\nzed"])
def test_bad_rater_names_are_refused(store, name):
    with pytest.raises(JudgeError, match="rater name"):
        store.add_rater(name)


def test_a_revoked_rater_gets_a_new_token_under_the_same_name(store):
    ann, old = store.add_rater("ann")
    store.revoke_rater("ann")
    with pytest.raises(JudgeError, match=r"rater 'ann' exists but was revoked .*`workbench judge rater token ann`"):
        store.add_rater("ann")
    again, token = store.new_token("ann")
    assert again.rater_id == ann.rater_id and again.name == "ann"
    assert store.rater_by_token(token) == again and store.rater_by_token(old) is None
    assert [r.name for r in store.raters()] == ["ann"]
    _, newer = store.new_token("ann")  # an active rater's token is replaced
    assert store.rater_by_token(token) is None and store.rater_by_token(newer) == again
    with pytest.raises(JudgeError, match="no active rater named 'nobody'"):
        store.new_token("nobody")


def test_a_duplicate_rater_and_a_bad_role_are_refused(store):
    store.add_rater("ann")
    with pytest.raises(JudgeError, match="a rater named 'ann' exists"):
        store.add_rater("ann")
    with pytest.raises(JudgeError, match="role 'boss' must be one of rater, adjudicator"):
        store.add_rater("bob", "boss")


def test_each_pair_goes_to_distinct_raters_in_tier_order_then_a_per_rater_shuffle(store):
    _pool(store, 10)  # 10 pairs x 2 slots
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    cy, _ = store.add_rater("cy")
    got = {r.name: [] for r in (ann, bob, cy)}
    for r in (ann, bob, cy, ann, bob, cy) * 4:
        a = store.next_assignment(r, "gita")
        if a is not None:
            store.judge(r, a.assignment_id, 1)
            got[r.name].append(a.doc_id)
    assert sum(map(len, got.values())) == 20  # every slot judged once
    per_pair = Counter(d for docs in got.values() for d in docs)
    assert set(per_pair.values()) == {2} and len(per_pair) == 10
    assert all(len(set(docs)) == len(docs) for docs in got.values())  # never one pair twice to one rater
    tier = {f"d{i}": i % 2 for i in range(10)}
    for docs in got.values():  # tier 0 before tier 1 in everyone's queue
        tiers = [tier[d] for d in docs]
        assert tiers == sorted(tiers)
    # the order within a tier is each rater's own shuffle, reproducible from their seed
    orders = {name: [d for d in docs if tier[d] == 0] for name, docs in got.items()}
    assert len({tuple(o) for o in orders.values() if len(o) >= 3}) >= 2


def test_a_stale_page_submitting_twice_writes_nothing(store, pg_dsn):
    _pool(store, 2)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    a = store.next_assignment(ann, "gita")
    assert store.next_assignment(ann, "gita") == a  # a reloaded page gets the same open pair
    store.judge(ann, a.assignment_id, 2, note="parallel verse", doc_hash="abc")
    with pytest.raises(JudgeError, match="already judged"):
        store.judge(ann, a.assignment_id, 0)
    with pytest.raises(JudgeError, match="is not yours"):
        store.judge(bob, a.assignment_id, 0)
    with pytest.raises(JudgeError, match="does not exist"):
        store.judge(ann, 10**9, 0)
    for bad in (3, -1, "2", True, 1.5, None):
        b = store.next_assignment(ann, "gita")
        with pytest.raises(JudgeError, match="grade"):
            store.judge(ann, b.assignment_id, bad)
    with pytest.raises(JudgeError, match="either a grade or 'cannot judge'"):
        store.judge(ann, b.assignment_id, 1, cannot_judge=True)
    with pytest.raises(JudgeError, match="keep it under 2000"):
        store.judge(ann, b.assignment_id, 1, note="x" * 2001)
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM wb_judge.judgments").fetchone()[0] == 1
    rows = store.current("gita")
    assert [(r["rater"], r["grade"], r["note"], r["doc_sha256"]) for r in rows] == [("ann", 2, "parallel verse", "abc")]


def test_undo_retracts_by_appending_and_reopens_the_pair(store, pg_dsn):
    _pool(store, 3, raters=1)
    ann, _ = store.add_rater("ann")
    first = store.next_assignment(ann, "gita")
    store.judge(ann, first.assignment_id, 2)
    second = store.next_assignment(ann, "gita")
    store.judge(ann, second.assignment_id, None, cannot_judge=True)
    assert store.progress(ann, "gita") == (2, 3)
    assert store.undo_last(ann, "gita") == second
    assert store.progress(ann, "gita") == (1, 3)
    assert store.next_assignment(ann, "gita") == second  # shown again
    store.judge(ann, second.assignment_id, 0)
    assert {(r["doc_id"], r["grade"]) for r in store.my_judgments(ann, "gita")} == {(first.doc_id, 2), (second.doc_id, 0)}
    with psycopg.connect(pg_dsn) as conn:
        history = conn.execute("SELECT action, grade, cannot_judge FROM wb_judge.judgments ORDER BY judgment_id").fetchall()
    assert history == [("judge", 2, False), ("judge", None, True), ("retract", None, False), ("judge", 0, False)]
    assert store.undo_last(ann, "gita") == second and store.undo_last(ann, "gita") == first
    assert store.undo_last(ann, "gita") is None and store.progress(ann, "gita") == (0, 3)


def test_history_is_append_only(store, pg_dsn):
    _pool(store, 1, raters=1)
    ann, _ = store.add_rater("ann")
    adj, _ = store.add_rater("ada", "adjudicator")
    a = store.next_assignment(ann, "gita")
    store.judge(ann, a.assignment_id, 1)
    store.adjudicate(adj, "gita", a.query_id, a.doc_id, 2)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for sql in ("UPDATE wb_judge.judgments SET grade = 0", "DELETE FROM wb_judge.judgments",
                    "UPDATE wb_judge.adjudications SET grade = 0", "DELETE FROM wb_judge.adjudications"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql)
    with pytest.raises(JudgeError, match="ann is a rater, not an adjudicator"):
        store.adjudicate(ann, "gita", a.query_id, a.doc_id, 0)


def test_a_pool_never_repeats_a_pair_of_an_earlier_pool(store):
    first = _pool(store, 4)
    second = store.create_pool("gita", [PoolPair("q0", "d0"), PoolPair("q9", "d99"), PoolPair("q9", "d99")])
    assert second == first + 1
    assert store.pooled_pairs("gita") == {(f"q{i // 5}", f"d{i}") for i in range(4)} | {("q9", "d99")}
    with pytest.raises(JudgeError, match="raters per pair must be an integer from 1 to 10"):
        store.create_pool("gita", [PoolPair("q1", "d1")], raters_per_pair=0)


_RATER = """
import sys
from workbench.judging.store import JudgeError, JudgmentStore
dsn, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
st = JudgmentStore(dsn)
rater = st.rater(name)
done, refused = [], 0
while len(done) < n:
    a = st.next_assignment(rater, "gita")
    if a is None:
        break
    try:
        st.judge(rater, a.assignment_id, (a.pair_id + len(name)) % 3)
    except JudgeError:  # the same rater's other session judged this open pair first (two tabs)
        refused += 1
        continue
    done.append(a.assignment_id)
print(len(done), refused)
"""


def test_concurrent_raters_lose_nothing_and_never_share_a_slot(store, pg_dsn):
    _pool(store, 250, raters=4)  # 1000 slots: each of the 4 raters judges every pair once
    names = ["r1", "r2", "r3", "r4"]
    for n in names:
        store.add_rater(n)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", _RATER, pg_dsn, n, "250"], stdout=subprocess.PIPE, text=True,
                              env=env) for n in names]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0] and outs == ["250 0"] * 4  # nobody was refused
    with psycopg.connect(pg_dsn) as conn:
        n_judgments, n_assignments = conn.execute(
            "SELECT count(*), count(DISTINCT assignment_id) FROM wb_judge.judgments").fetchone()
        per_pair = conn.execute("SELECT count(*), count(DISTINCT rater_id) FROM wb_judge.judgments "
                                "GROUP BY query_id, doc_id").fetchall()
        open_slots = conn.execute("SELECT count(*) FROM wb_judge.assignments WHERE done_at IS NULL").fetchone()[0]
    assert n_judgments == n_assignments == 1000  # none lost, none duplicated, no slot judged twice
    assert set(per_pair) == {(4, 4)} and len(per_pair) == 250  # each pair by four different raters
    assert open_slots == 0


def test_one_rater_in_two_sessions_never_gets_one_pair_twice(store, pg_dsn):
    _pool(store, 100, raters=3)
    store.add_rater("ann")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", _RATER, pg_dsn, "ann", "1000"], stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    outs = [tuple(map(int, p.communicate(timeout=300)[0].split())) for p in procs]
    assert sum(done for done, _refused in outs) == 100  # ann judged every pair once, across both sessions
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(DISTINCT (query_id, doc_id)) FROM wb_judge.judgments").fetchone()[0] == 100


_KILLED = """
import os, signal, sys
from workbench.judging.store import JudgmentStore
st = JudgmentStore(sys.argv[1])
rater = st.rater("ann")
a = st.next_assignment(rater, "gita")
print(a.assignment_id, flush=True)
conn = st.conn()
execute = conn.execute
def dying(sql, *args, **kw):
    out = execute(sql, *args, **kw)
    if "INSERT INTO wb_judge.judgments" in str(sql):
        os.kill(os.getpid(), signal.SIGKILL)   # killed after the row is written, before the commit
    return out
conn.execute = dying
st.judge(rater, a.assignment_id, 2)
"""


def test_a_process_killed_mid_write_leaves_the_store_consistent(store, pg_dsn):
    _pool(store, 2, raters=1)
    ann, _ = store.add_rater("ann")
    proc = subprocess.run([sys.executable, "-c", _KILLED, pg_dsn], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == -9
    held = int(proc.stdout.strip())
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM wb_judge.judgments").fetchone()[0] == 0
        assert conn.execute("SELECT done_at FROM wb_judge.assignments WHERE assignment_id = %s",
                            (held,)).fetchone()[0] is None
    again = store.next_assignment(ann, "gita")
    assert again.assignment_id == held  # still ann's, still open
    store.judge(ann, held, 2)
    assert store.progress(ann, "gita") == (1, 2)


def test_a_version_1_store_is_upgraded_in_place_and_keeps_its_history(pg_dsn, monkeypatch):
    from workbench.judging import store as store_module

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
    monkeypatch.setattr(store_module, "MIGRATIONS", store_module.MIGRATIONS[:1])
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", 1)
    old = JudgmentStore(pg_dsn)
    assert old.version() == 1
    _pool(old, 2, raters=1)
    ann, _ = old.add_rater("ann")
    ada, _ = old.add_rater("ada", "adjudicator")
    a = old.next_assignment(ann, "gita")
    old.judge(ann, a.assignment_id, 1)
    old.adjudicate(ada, "gita", a.query_id, a.doc_id, 2)
    old.close()
    monkeypatch.undo()
    new = JudgmentStore(pg_dsn)  # this workbench: version 3
    assert new.version() == 3
    assert [(r["rater"], r["grade"]) for r in new.current("gita")] == [("ann", 1)]
    assert [(r["adjudicator"], r["grade"]) for r in new.adjudications("gita")] == [("ada", 2)]
    new.retract_adjudication(new.rater("ada"), "gita", a.query_id, a.doc_id)  # what version 2 adds
    assert new.adjudications("gita") == []
    with pytest.raises(JudgeError, match="has no final grade to take back"):
        new.retract_adjudication(new.rater("ada"), "gita", a.query_id, a.doc_id)
    with pytest.raises(JudgeError, match="ann is a rater, not an adjudicator"):
        new.retract_adjudication(new.rater("ann"), "gita", a.query_id, a.doc_id)
    new.adjudicate(new.rater("ada"), "gita", a.query_id, a.doc_id, 0)  # decided again: the latest wins
    assert [(r["grade"]) for r in new.adjudications("gita")] == [0]
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT action, grade FROM wb_judge.adjudications ORDER BY adjudication_id").fetchall()
    assert rows == [("decide", 2), ("retract", None), ("decide", 0)]
    new.close()


def test_a_pair_claimed_and_left_is_taken_over_after_the_ttl(store, pg_dsn):
    _pool(store, 1, raters=1)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    a = store.next_assignment(ann, "gita")  # ann opens the page and walks away
    assert store.next_assignment(bob, "gita") is None  # the only slot is ann's
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # 31 minutes later
        conn.execute("UPDATE wb_judge.assignments SET claimed_at = claimed_at - interval '31 minutes'")
    b = store.next_assignment(bob, "gita")
    assert b is not None and b.assignment_id == a.assignment_id  # bob takes it over
    with pytest.raises(JudgeError, match="not yours .or no longer"):
        store.judge(ann, a.assignment_id, 2)
    store.judge(bob, b.assignment_id, 1)
    assert [(r["rater"], r["grade"]) for r in store.current("gita")] == [("bob", 1)]


def test_a_cannot_judge_reaches_a_rater_who_already_walked_past_the_pair(store):
    # issue #28: the pair goes back into the queue of a rater whose queue is made (and who passed it while it was full)
    from workbench.judging.layers import final_grades

    store.create_pool("gita", [PoolPair("q1", "d0"), PoolPair("q1", "d1")], raters_per_pair=1)
    ann, _ = store.add_rater("ann")
    cy, _ = store.add_rater("cy")
    x = store.next_assignment(ann, "gita")
    store.judge(ann, x.assignment_id, 1)
    y = store.next_assignment(cy, "gita")
    assert y.doc_id != x.doc_id
    store.judge(cy, y.assignment_id, 2)
    assert store.next_assignment(cy, "gita") is None  # nothing left for cy
    again = store.undo_last(ann, "gita")
    store.judge(ann, again.assignment_id, None, cannot_judge=True, note="not my language")
    z = store.next_assignment(cy, "gita")
    assert (z.query_id, z.doc_id) == (x.query_id, x.doc_id)
    assert store.progress(cy, "gita") == (1, 2)
    store.judge(cy, z.assignment_id, 0)
    final = final_grades(store.current("gita"))
    assert (final[("q1", x.doc_id)].grade, final[("q1", x.doc_id)].basis) == (0, "single")
    assert store.next_assignment(ann, "gita") is None and store.next_assignment(cy, "gita") is None
