"""A whole backup of the judgment store and its restore into an empty store (real PostgreSQL): every table
round-trips row by row but the raters' tokens; a cut-off file, a non-empty store and a foreign file are refused."""

from __future__ import annotations

import gzip
import json
import re

import psycopg
import pytest

from workbench.judging import backup as bk
from workbench.judging.store import JudgeError, JudgmentStore, PoolPair


@pytest.fixture
def store(judge_store):
    return judge_store


def _everything(st: JudgmentStore) -> dict[str, str]:
    """A store with what the CSV export drops: notes, cannot judge, an undo, an adjudication and its retraction,
    a revoked rater, a setting, two pools; returns the tokens."""
    st.create_pool("gita", [PoolPair("q1", f"d{i}", tier=i % 2, priority=0.5 + i) for i in range(3)],
                   raters_per_pair=2, params={"depth": 10, "rule": "test"})
    st.create_pool("gita", [PoolPair("q2", "d9", reason="audit")], raters_per_pair=1, params={"audit": 1})
    ann, ann_token = st.add_rater("ann")
    bob, _ = st.add_rater("bob")
    ada, _ = st.add_rater("ada", "adjudicator")
    a = st.next_assignment(ann, "gita")
    st.judge(ann, a.assignment_id, 0, note="wrong verse — ठीक नहीं", doc_hash="h0")
    st.undo_last(ann, "gita")
    st.judge(ann, a.assignment_id, 2, note="on second thought", doc_hash="h0")
    b = st.next_assignment(ann, "gita")
    st.judge(ann, b.assignment_id, None, cannot_judge=True, note="I do not read Sanskrit")
    while (x := st.next_assignment(bob, "gita")) is not None:
        st.judge(bob, x.assignment_id, 1, doc_hash="hb")
    st.adjudicate(ada, "gita", a.query_id, a.doc_id, 1, note="partly")
    st.retract_adjudication(ada, "gita", a.query_id, a.doc_id)
    st.adjudicate(ada, "gita", a.query_id, a.doc_id, 2, note="the verse itself")
    st.set_adjudicate_at("gita", 2)
    st.import_judgments("other", [("q7", "d7", 1, "imported-cy")], source="csv")
    st.revoke_rater("bob")
    return {"ann": ann_token}


def _dump(st: JudgmentStore) -> dict[str, list[dict]]:
    return {t: bk.table_rows(st, t) for t, _k, _s in bk.TABLES}


def _empty(pg_dsn) -> JudgmentStore:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA wb_judge CASCADE")
    return JudgmentStore(pg_dsn)


def _refused(pg_dsn, path) -> str:
    """Restore ``path`` into an empty store: it must fail with a JudgeError and write nothing; its message."""
    fresh = _empty(pg_dsn)
    try:
        with pytest.raises(JudgeError) as err:
            bk.restore(fresh, path)
        assert {t: len(rows) for t, rows in _dump(fresh).items()} == {t: 0 for t, _k, _s in bk.TABLES}
    finally:
        fresh.close()
    return str(err.value)


@pytest.mark.parametrize("name", ["judge.jsonl.gz", "judge.jsonl"])
def test_a_backup_restores_every_table_row_by_row_but_the_tokens(store, pg_dsn, tmp_path, name):
    tokens = _everything(store)
    before = _dump(store)
    hashes = [r[0] for r in store.conn().execute("SELECT token_sha256 FROM wb_judge.raters ORDER BY rater_id")]
    # assignments: 3 pairs x 2 + 1 x 1 + the slot ann's "cannot judge" added; judgments: ann's 4 (an undo among
    # them), bob's 4, one imported; queue: the 2 entries ann has not reached
    assert {t: len(r) for t, r in before.items()} == {
        "raters": 4, "pools": 2, "pairs": 4, "assignments": 8, "judgments": 9, "adjudications": 3,
        "queue_pools": 4, "queue": 2, "settings": 1}
    path = tmp_path / name
    counts = bk.backup(store, path)
    assert counts == {t: len(r) for t, r in before.items()}
    raw = path.read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == name.endswith(".gz")
    lines = (gzip.decompress(raw) if name.endswith(".gz") else raw).decode("utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "workbench-judge-backup" and header["version"] == 1 and header["schema_version"] == 3
    assert "not included" in header["tokens"]
    assert not any(h in line for h in hashes for line in lines) and "token_sha256" not in "".join(lines)
    assert json.loads(lines[-1]) == {"end": True, "counts": counts}
    judgments = [json.loads(line)["row"] for line in lines if '"table": "judgments"' in line]
    assert [(j["action"], j["grade"], j["cannot_judge"], j["note"]) for j in judgments[:4]] == [
        ("judge", 0, False, "wrong verse — ठीक नहीं"), ("retract", None, False, None),
        ("judge", 2, False, "on second thought"), ("judge", None, True, "I do not read Sanskrit")]

    current, adjudications = store.current("gita"), store.adjudications("gita")
    fresh = _empty(pg_dsn)
    assert bk.restore(fresh, path) == counts
    after = _dump(fresh)
    for table in before:
        assert after[table] == before[table], table
    assert fresh.current("gita") == current and fresh.adjudications("gita") == adjudications
    assert [(a["grade"], a["note"]) for a in fresh.adjudications("gita")] == [(2, "the verse itself")]
    assert fresh.adjudicate_at("gita") == 2
    # no token survives: ann signs in only after a new one; new rows continue the ids
    assert fresh.rater_by_token(tokens["ann"]) is None
    ann, token = fresh.new_token("ann")
    assert fresh.rater_by_token(token) == ann
    cy, _ = fresh.add_rater("cy")
    assert cy.rater_id == 5
    fresh.close()


def test_restore_refuses_a_store_that_is_not_empty_and_writes_nothing(store, tmp_path):
    _everything(store)
    path = tmp_path / "b.jsonl.gz"
    bk.backup(store, path)
    before = _dump(store)
    with pytest.raises(JudgeError, match=r"is not empty \(raters, pools, pairs, assignments, judgments, "
                                         r"adjudications, queue_pools, queue, settings hold rows\)"):
        bk.restore(store, path)
    assert _dump(store) == before


def test_a_cut_off_or_foreign_file_is_refused_before_anything_is_written(store, pg_dsn, tmp_path):
    _everything(store)
    path = tmp_path / "b.jsonl"
    bk.backup(store, path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-3]), encoding="utf-8")
    fresh = _empty(pg_dsn)
    with pytest.raises(JudgeError, match="cut off or damaged: its end line is missing"):
        bk.restore(fresh, cut)
    foreign = tmp_path / "qrels.csv"
    foreign.write_text("query_id,doc_id,relevance,rater\n", encoding="utf-8")
    with pytest.raises(JudgeError, match="not JSON"):
        bk.restore(fresh, foreign)
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n', encoding="utf-8")
    with pytest.raises(JudgeError, match="is not a judgment store backup"):
        bk.restore(fresh, other)
    newer = tmp_path / "newer.jsonl"
    newer.write_text(lines[0].replace('"schema_version": 3', '"schema_version": 99') + "".join(lines[1:]),
                     encoding="utf-8")
    with pytest.raises(JudgeError, match="schema version 99, newer than this workbench's 3"):
        bk.restore(fresh, newer)
    assert {t: len(r) for t, r in _dump(fresh).items()} == {t: 0 for t, _k, _s in bk.TABLES}
    fresh.close()


def test_the_backup_and_restore_commands(store, pg_dsn, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from workbench.cli import app

    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    _everything(store)
    before = _dump(store)
    path = tmp_path / "judge.jsonl.gz"
    res = CliRunner().invoke(app, ["judge", "backup", str(path)])
    assert res.exit_code == 0, res.output
    assert f"wrote {path}: 4 raters, 2 pools, 4 pairs, 8 assignments, 9 judgments, 3 adjudications" in res.stdout
    assert "tokens are not in the backup" in res.stderr
    res = CliRunner().invoke(app, ["judge", "restore", str(path)])
    assert res.exit_code == 2 and "is not empty" in res.stderr
    _empty(pg_dsn).close()
    res = CliRunner().invoke(app, ["judge", "restore", str(path)])
    assert res.exit_code == 0, res.output
    assert "4 rater(s) restored without tokens" in res.stderr and "ada, ann, bob, imported-cy" in res.stderr
    assert _dump(JudgmentStore(pg_dsn)) == before
    res = CliRunner().invoke(app, ["judge", "export", "--help"])
    text = " ".join(res.stdout.replace("│", " ").split())
    assert "Not a backup: it holds current grades only" in text and "`workbench judge backup FILE` writes the whole" in text


def _cli(pg_dsn, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from workbench.cli import app

    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    return lambda *args: CliRunner().invoke(app, list(args))


def test_the_backup_and_restore_commands_report_as_json(store, pg_dsn, tmp_path, monkeypatch):
    """``--json``: the same counts as the text lines, as one object on stdout."""
    import json

    from typer.testing import CliRunner

    from workbench.cli import app

    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    _everything(store)
    path = tmp_path / "judge.jsonl.gz"
    res = CliRunner().invoke(app, ["judge", "backup", str(path), "--json"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["file"] == str(path)
    assert {k: body["counts"][k] for k in ("raters", "pools", "pairs", "assignments", "judgments", "adjudications")} \
        == {"raters": 4, "pools": 2, "pairs": 4, "assignments": 8, "judgments": 9, "adjudications": 3}
    _empty(pg_dsn).close()
    res = CliRunner().invoke(app, ["judge", "restore", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["counts"]["judgments"] == 9


def test_restore_refuses_an_out_of_range_grade_by_line_before_anything_is_written(store, pg_dsn, tmp_path,
                                                                                   monkeypatch):
    _everything(store)
    path = tmp_path / "b.jsonl"
    bk.backup(store, path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if '"table": "judgments"' in line and '"grade": 2' in line)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:n] + [lines[n].replace('"grade": 2', '"grade": 7')] + lines[n + 1:]),
                   encoding="utf-8")
    role = tmp_path / "role.jsonl"
    r = next(i for i, line in enumerate(lines) if '"table": "raters"' in line)
    role.write_text("".join(lines[:r] + [lines[r].replace('"role": "rater"', '"role": "boss"')] + lines[r + 1:]),
                    encoding="utf-8")
    _empty(pg_dsn).close()
    fresh = JudgmentStore(pg_dsn)
    with pytest.raises(JudgeError, match=rf"bad.jsonl:{n + 1}: a judgments row the store refuses: grade 7 is not "
                                         r"one of empty, 0, 1, 2; nothing was restored"):
        bk.restore(fresh, bad)
    with pytest.raises(JudgeError, match=rf"role.jsonl:{r + 1}: a raters row the store refuses: role \"boss\" is "
                                         r"not one of \"rater\", \"adjudicator\""):
        bk.restore(fresh, role)
    assert {t: len(rows) for t, rows in _dump(fresh).items()} == {t: 0 for t, _k, _s in bk.TABLES}
    fresh.close()
    cli = _cli(pg_dsn, tmp_path, monkeypatch)
    res = cli("judge", "restore", str(bad))
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert f"bad.jsonl:{n + 1}: a judgments row the store refuses: grade 7" in res.stderr
    assert "Traceback" not in res.output and "CheckViolation" not in res.output
    assert {t: len(rows) for t, rows in _dump(JudgmentStore(pg_dsn)).items()} == {t: 0 for t, _k, _s in bk.TABLES}


@pytest.mark.parametrize("name", ["evil\nname", "ann ", "b\u043eb", "x" * 300, "<script>alert(1)</script>"])
def test_restore_holds_rater_names_to_the_name_rule(store, pg_dsn, tmp_path, name):
    """A crafted backup cannot bring in a name `judge rater add` refuses (a newline that prints as two names, a
    trailing space, a Cyrillic о that looks like Latin o, 300 characters, markup): the line is named, nothing
    is written."""
    _everything(store)
    path = tmp_path / "b.jsonl"
    bk.backup(store, path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    r = next(i for i, line in enumerate(lines) if '"table": "raters"' in line)
    row = json.loads(lines[r])
    row["row"]["name"] = name
    bad = tmp_path / "names.jsonl"
    bad.write_text("".join(lines[:r] + [json.dumps(row, ensure_ascii=False) + "\n"] + lines[r + 1:]), encoding="utf-8")
    msg = _refused(pg_dsn, bad)
    assert f"names.jsonl:{r + 1}: a raters row the store refuses: rater name {name!r} is not valid" in msg


def test_a_gzip_backup_with_a_flipped_byte_is_one_line(store, pg_dsn, tmp_path):
    _everything(store)
    path = tmp_path / "b.jsonl.gz"
    bk.backup(store, path)
    data = bytearray(path.read_bytes())
    start = data.index(0, 10) + 1 if data[3] & 0x08 else 10  # past the header (and the file name gzip.open writes)
    data[start + 2] ^= 0xFF  # the deflate block header: zlib.error "invalid code lengths set" (a traceback before)
    path.write_bytes(bytes(data))
    assert re.search(r"b\.jsonl\.gz cannot be read whole \(.*\); the file is damaged or cut off",
                     _refused(pg_dsn, path))


def test_a_dangling_id_the_file_check_misses_is_one_line_and_nothing_is_written(store, pg_dsn, tmp_path):
    _everything(store)
    path = tmp_path / "b.jsonl"
    bk.backup(store, path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if '"table": "queue_pools"' in line)
    row = json.loads(lines[n])
    row["row"]["pool_id"] = 999
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:n] + [json.dumps(row) + "\n"] + lines[n + 1:]), encoding="utf-8")
    assert re.search(r"the store refuses the queue_pools rows \(.*foreign key.*\); nothing was restored",
                     _refused(pg_dsn, bad))


def test_backup_refuses_an_existing_file_without_force_and_warns_on_a_store_without_judgments(
        store, pg_dsn, tmp_path, monkeypatch):
    cli = _cli(pg_dsn, tmp_path, monkeypatch)
    store.add_rater("cai")
    path = tmp_path / "judge.jsonl"
    path.write_text("my precious backup\n", encoding="utf-8")
    res = cli("judge", "backup", str(path))
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (f"error: {path} exists and would be overwritten; give a new file name, or pass "
                                  "--force to replace it")
    assert path.read_text(encoding="utf-8") == "my precious backup\n"
    new = tmp_path / "new.jsonl"
    res = cli("judge", "backup", str(new))
    assert res.exit_code == 0, res.output
    assert "warning: the store backed up holds no judgment (0 judgments)" in res.stderr
    assert json.loads(new.read_text(encoding="utf-8").splitlines()[-1])["counts"]["raters"] == 1
    res = cli("judge", "backup", "--force", str(path))
    assert res.exit_code == 0, res.output
    assert "warning: the store backed up holds no judgment" in res.stderr
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0])["format"] == bk.FORMAT
    _everything(store)
    res = cli("judge", "backup", "--force", str(path))
    assert res.exit_code == 0 and "warning" not in res.stderr, res.output
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["counts"] == {
        "raters": 5, "pools": 2, "pairs": 4, "assignments": 8, "judgments": 9, "adjudications": 3, "queue_pools": 4,
        "queue": 2, "settings": 1}


def test_a_new_token_for_a_revoked_rater_says_it_makes_them_active_again(store, pg_dsn, tmp_path, monkeypatch):
    cli = _cli(pg_dsn, tmp_path, monkeypatch)
    store.add_rater("ann")
    store.add_rater("bob")
    store.revoke_rater("bob")
    res = cli("judge", "rater", "token", "bob")
    assert res.exit_code == 0, res.output
    assert "bob was revoked; this new token makes bob active again" in res.stderr
    assert [r.name for r in store.raters()] == ["ann", "bob"]
    assert store.rater_by_token(res.stdout.strip()).name == "bob"
    res = cli("judge", "rater", "token", "ann")
    assert res.exit_code == 0, res.output
    assert "was revoked" not in res.stderr and "'ann' has a new token" in res.stderr
