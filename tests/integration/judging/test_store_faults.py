"""The judgment store under faults a scholar or an engineer meets (#41), on a real PostgreSQL:

* a second press of a grade already saved (a double key press) is said to be saved, not "Not saved … Nothing
  was written" (item 11), decided by :func:`workbench.dashboard.judging.press_refusal` on the store's rows;
* a full disk under the server ends a write in one line naming that disk, with nothing written (item 19):
  a real ``No space left on device`` from a tablespace on a 1 MB tmpfs (root), and SQLSTATE 53100 raised by
  the server itself (any user);
* a backup line nested thousands deep is one line naming the file and line, the store stays empty, and the
  whole file restores once the line is mended (item 20).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import faults
import psycopg
import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.dashboard import judging
from workbench.errors import StorageError
from workbench.judging import backup as bk
from workbench.judging.store import JudgeError, JudgmentStore, PoolPair


def _judgments(store: JudgmentStore) -> list[tuple]:
    return store.conn().execute("SELECT action, assignment_id, grade, cannot_judge FROM wb_judge.judgments "
                                "ORDER BY judgment_id").fetchall()


def _counts(store: JudgmentStore) -> dict[str, int]:
    return {t: len(bk.table_rows(store, t)) for t, _k, _s in bk.TABLES}


# ------------------------------------------------------------------ item 11: a double key press


def test_a_second_press_of_the_saved_grade_says_already_saved_and_writes_nothing(judge_store):
    store = judge_store
    store.create_pool("gita", [PoolPair("q1", f"d{i}") for i in range(3)], raters_per_pair=1)
    ann, _ = store.add_rater("ann")
    first = store.next_assignment(ann, "gita")
    store.judge(ann, first.assignment_id, 0)  # the first press: saved
    held = store.next_assignment(ann, "gita")  # the page now shows the next pair
    shown = (held.assignment_id, 100.0)
    press = {"assignment_id": first.assignment_id, "grade": 0, "pair": "BG 2.47 for “Whom should one serve”"}

    # the second press reaches the judged pair's button with the same grade: saved, and nothing more written
    assert judging.press_refusal(store, ann, press, held, shown, 100.1) == (
        "success", "BG 2.47 for “Whom should one serve” is already saved as 0 · not relevant (a second press was "
                   "ignored); nothing more was written. The pair below is your next one.")
    # another grade for the judged pair is a press that was not saved, and says so
    level, text = judging.press_refusal(store, ann, {**press, "grade": 1}, held, shown, 100.1)
    assert level == "warning" and text.startswith("Not saved: BG 2.47 for “Whom should one serve” is no longer open")
    assert store.saved_judgment(ann, first.assignment_id)["grade"] == 0
    assert _judgments(store) == [("judge", first.assignment_id, 0, False)]

    # "cannot judge" pressed twice: the same
    store.judge(ann, held.assignment_id, None, cannot_judge=True)
    after = store.next_assignment(ann, "gita")
    x = {"assignment_id": held.assignment_id, "grade": None, "pair": "BG 3.1 for “q”"}
    assert judging.press_refusal(store, ann, x, after, (after.assignment_id, 0.0), 9.0) == (
        "success", "BG 3.1 for “q” is already saved as cannot judge (a second press was ignored); nothing more was "
                   "written. The pair below is your next one.")

    # an undone grade is not saved any more: the pair is the rater's again, and a press on it is judged normally
    store.undo_last(ann, "gita")
    assert store.saved_judgment(ann, held.assignment_id) is None
    again = store.next_assignment(ann, "gita")
    assert again.assignment_id == held.assignment_id
    assert judging.press_refusal(store, ann, x, again, (again.assignment_id, 0.0), 9.0) is None
    # another rater's assignment is never "saved" for ann
    bob, _ = store.add_rater("bob")
    assert store.saved_judgment(bob, first.assignment_id) is None
    assert [(a, g, c) for _act, a, g, c in _judgments(store)] == [
        (first.assignment_id, 0, False), (held.assignment_id, None, True), (held.assignment_id, None, False)]


# ------------------------------------------------------------------ item 19: a full disk under the server


@pytest.fixture
def small_tablespace(judge_store, pg_dsn):
    """``(tablespace name, its folder, fill(), free())``: a tablespace on a 1 MB tmpfs owned by the server's
    user (root only; skipped otherwise, and for a server of another machine)."""
    data = Path(judge_store.conn().execute("SELECT current_setting('data_directory')").fetchone()[0])
    if not data.is_dir():
        pytest.skip("the test server's data folder is not on this machine")
    base = Path(tempfile.mkdtemp(prefix="wb-full-disk-"))
    os.chmod(base, 0o711)  # the server's user passes through to its folder
    try:
        with faults.small_disk(base / "disk", "1m") as disk:
            os.chown(disk, data.stat().st_uid, data.stat().st_gid)
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f"CREATE TABLESPACE wb_test_full LOCATION '{disk}'")

            def fill() -> None:
                faults.fill(disk)

            def free() -> None:
                (disk / ".filler").unlink(missing_ok=True)

            try:
                yield "wb_test_full", disk, fill, free
            finally:
                free()
                with psycopg.connect(pg_dsn, autocommit=True) as conn:
                    conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
                    conn.execute("DROP TABLESPACE IF EXISTS wb_test_full")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_full_disk_under_the_store_is_one_line_naming_that_disk_and_nothing_is_written(
        judge_store, pg_dsn, small_tablespace, tmp_path, monkeypatch):
    """Every table of the store on a full 1 MB disk: restore, import, a grade and a command that writes each end in
    the same one line — the disk's folder, its free space, "nothing was written" — and nothing is written."""
    space, disk, fill, free = small_tablespace
    store = judge_store
    store.create_pool("gita", [PoolPair("q1", "d1")], raters_per_pair=1)
    ann, _ = store.add_rater("ann")
    store.judge(ann, store.next_assignment(ann, "gita").assignment_id, 2)
    backup = tmp_path / "b.jsonl"
    assert bk.backup(store, backup)["judgments"] == 1
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA wb_judge CASCADE")
    store = JudgmentStore(pg_dsn)  # empty, then every table moved onto the small disk
    try:
        for t in [*(t for t, _k, _s in bk.TABLES), "schema_version"]:
            store.conn().execute(f"ALTER TABLE wb_judge.{t} SET TABLESPACE {space}")
        where = store._session.where
        want = re.compile(
            rf"disk full: the judgment store's PostgreSQL at {re.escape(where)} could not write \(could not extend "
            r"file \"pg_tblspc/\d+/[^\"]+\": No space left on device\); nothing was written — free space on the disk "
            rf"of {re.escape(str(disk))} \((\d+) B free\), then run it again")

        fill()
        with pytest.raises(StorageError) as err:
            bk.restore(store, backup)
        assert (m := want.fullmatch(str(err.value))) and int(m.group(1)) < 64 * 1024, str(err.value)
        assert _counts(store) == {t: 0 for t, _k, _s in bk.TABLES}

        free()  # room for a pool, a rater and a claimed pair; then the disk is full again
        store.create_pool("gita", [PoolPair("q1", "d1"), PoolPair("q1", "d2")], raters_per_pair=1)
        ann, _ = store.add_rater("ann")
        held = store.next_assignment(ann, "gita")
        fill()
        with pytest.raises(StorageError) as err:  # `judge import`'s write (the issue's case)
            store.import_judgments("gita", [("q1", "d1", 1, "ann"), ("q1", "d2", 0, "ann")], source="csv")
        assert want.fullmatch(str(err.value)), str(err.value)
        with pytest.raises(StorageError) as err:  # a grade on the Judge page
            store.judge(ann, held.assignment_id, 1)
        assert want.fullmatch(str(err.value)), str(err.value)
        assert _judgments(store) == []
        assert store.next_assignment(ann, "gita") == held  # still open for ann

        monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
        monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
        res = CliRunner().invoke(app, ["judge", "settings", "-d", "gita", "--adjudicate-at", "2"])
        assert res.exit_code == 2 and res.stdout == ""
        [line] = res.stderr.splitlines()
        assert line.startswith("error: ") and want.fullmatch(line.removeprefix("error: ")), res.stderr
        assert store.adjudicate_at("gita") == 1  # unchanged

        free()  # once there is room, the same grade goes through
        store.judge(ann, held.assignment_id, 1)
        assert _judgments(store) == [("judge", held.assignment_id, 1, False)]
    finally:
        store.close()


def test_the_servers_own_disk_full_error_is_mapped_for_any_user(judge_store):
    """SQLSTATE 53100 as the server raises it (a trigger standing in for a full disk where no tmpfs can be
    mounted): the grade is one line naming the server's data folder, and the slot stays open."""
    store = judge_store
    store.create_pool("gita", [PoolPair("q1", "d1")], raters_per_pair=1)
    ann, _ = store.add_rater("ann")
    held = store.next_assignment(ann, "gita")
    data = store.conn().execute("SELECT current_setting('data_directory')").fetchone()[0]
    store.conn().execute(
        "CREATE FUNCTION wb_judge.full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION "
        "'could not extend file \"base/5/16619\": No space left on device' USING ERRCODE = 'disk_full'; END $$; "
        "CREATE TRIGGER full_disk BEFORE INSERT ON wb_judge.judgments FOR EACH ROW EXECUTE FUNCTION wb_judge.full()")
    with pytest.raises(StorageError) as err:
        store.judge(ann, held.assignment_id, 2)
    said = str(err.value)
    assert said.startswith(f"disk full: the judgment store's PostgreSQL at {store._session.where} could not write "
                           "(could not extend file \"base/5/16619\": No space left on device); nothing was written — "
                           f"free space on the disk of {data}"), said
    assert said.endswith(", then run it again") and "\n" not in said
    assert _judgments(store) == [] and store.next_assignment(ann, "gita") == held
    with pytest.raises(JudgeError):  # other errors pass as they were
        store.judge(ann, held.assignment_id + 1000, 2)


# ------------------------------------------------------------------ item 20: a deeply nested backup line


@pytest.mark.parametrize("depth", [100_000, 100])
def test_restore_of_a_deeply_nested_line_is_one_line_naming_it_and_writes_nothing(judge_store, pg_dsn, tmp_path,
                                                                                 monkeypatch, depth):
    """100,000 deep is more than Python's parser holds (it raised RecursionError, a traceback); 100 deep parses
    but is no backup's. Either: the file and line named, the store left empty, and the mended file restores whole."""
    store = judge_store
    store.create_pool("gita", [PoolPair("q1", f"d{i}") for i in range(3)], raters_per_pair=1)
    ann, _ = store.add_rater("ann")
    while (a := store.next_assignment(ann, "gita")) is not None:
        store.judge(ann, a.assignment_id, 1, note="fine")
    good = tmp_path / "b.jsonl"
    counts = bk.backup(store, good)
    lines = good.read_text(encoding="utf-8").splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if '"table": "judgments"' in line)
    bad = tmp_path / "nested.jsonl"
    bad.write_text("".join(lines[:n] + [lines[n].replace('"note": "fine"', '"note": ' + "[" * depth + "]" * depth)]
                           + lines[n + 1:]), encoding="utf-8")
    want = (f"{bad}:{n + 1}: lists or objects nested more than 64 deep, which no backup writes; the file is damaged — "
            "nothing was restored (a restore takes a whole file or nothing): restore from another backup")

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA wb_judge CASCADE")
    fresh = JudgmentStore(pg_dsn)
    try:
        with pytest.raises(JudgeError) as err:
            bk.restore(fresh, bad)
        assert str(err.value) == want
        assert _counts(fresh) == {t: 0 for t, _k, _s in bk.TABLES}
        monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
        monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
        res = CliRunner().invoke(app, ["judge", "restore", str(bad), "--json"])
        assert res.exit_code == 2 and res.stdout == "" and res.stderr == f"error: {want}\n", res.output
        assert _counts(fresh) == {t: 0 for t, _k, _s in bk.TABLES}
        # the other lines were never at risk: the file as it was written restores every row
        assert bk.restore(fresh, good) == counts and counts["judgments"] == 3
        assert json.loads(json.dumps(_counts(fresh))) == counts
    finally:
        fresh.close()
