"""workbench._infra.durable (atomic writes, storage errors, tail repair, quarantine) and workbench._infra.locks, on real files.

The full-disk and read-only cases use a real tmpfs and a real read-only bind mount
(root only; skipped with the reason otherwise).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time

import pytest
from faults import fill, read_only, small_disk

from workbench._infra.durable import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    quarantine,
    remove_temporaries,
    repair_jsonl_tail,
    storage_error,
)
from workbench._infra.locks import FileLock
from workbench.errors import BusyError, StorageError


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "report.json"
    atomic_write_json(target, {"a": 1})
    atomic_write_json(target, {"a": 2, "é": "ü"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": 2, "é": "ü"}
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_an_exception_inside_atomic_path_keeps_the_old_file(tmp_path):
    target = tmp_path / "run.gz"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_path(target, suffix=".gz") as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("writer failed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["run.gz"]


def test_disk_full_is_a_storage_error_naming_the_path_and_the_old_file_is_kept(tmp_path):
    with small_disk(tmp_path / "disk", "1m") as disk:
        target = disk / "cache.bin"
        target.write_bytes(b"previous")
        fill(disk, leave=4096)
        with pytest.raises(StorageError) as err:
            atomic_write_bytes(target, b"x" * 200_000)
        msg = str(err.value)
        assert msg.startswith(f"disk full: cannot write {target} (") and "about 195.3 KB needed" in msg
        assert "WORKBENCH_HOME" in msg
        assert target.read_bytes() == b"previous"
        assert sorted(p.name for p in disk.iterdir()) == [".filler", "cache.bin"]  # no .tmp-* left


def test_read_only_folder_is_a_storage_error_with_the_fix(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "a.json").write_text("{}")
    with read_only(folder):
        with pytest.raises(StorageError) as err:
            atomic_write_json(folder / "a.json", {"x": 1})
    assert "read-only" in str(err.value) and str(folder / "a.json") in str(err.value)
    assert (folder / "a.json").read_text() == "{}"


def test_storage_error_messages_for_each_kind():
    assert "permission denied" in str(storage_error(OSError(errno.EACCES, "x"), "/p/f"))
    assert "is a folder" in str(storage_error(OSError(errno.EISDIR, "x"), "/p/f"))
    unknown = str(storage_error(OSError(errno.ENOSPC, "No space left"), None))
    assert unknown.startswith("cannot write a file of the workbench (disk full)") and "free" in unknown
    assert "GB free" not in unknown  # no free space of an unrelated disk


@pytest.mark.parametrize("tail, dropped, kept", [
    (b'{"op": 4, "x": [1, 2', 20, b""),                                 # cut in the middle of a record
    (b'{"op": 4}', 0, b'{"op": 4}\n'),                                  # only the newline was lost: kept whole
    (b'{"op": 4, "x": 1}garbage\n', 0, b'{"op": 4, "x": 1}garbage\n'),  # damage, not a cut: for the reader to refuse
    (b'{"op": 4}\nnot json\n', 0, b'{"op": 4}\nnot json\n'),           # several damaged lines: never dropped
    (b"", 0, b""),                                                        # intact
])
def test_repair_jsonl_tail_drops_only_a_cut_last_record_and_keeps_it_aside(tmp_path, tail, dropped, kept):
    log = tmp_path / "journal.log"
    good = b'{"op": 1}\n{"op": 2, "t": "\xc3\xa9"}\n{"op": 3}\n'
    log.write_bytes(good + tail)
    n, text = repair_jsonl_tail(log)
    assert n == dropped
    assert log.read_bytes() == good + kept
    asides = list(tmp_path.glob("journal.log.cut-*"))
    if dropped:
        assert text == tail.decode("utf-8", "replace") and [a.read_bytes() for a in asides] == [tail]
    else:
        assert text == "" and asides == []
    assert repair_jsonl_tail(log) == (0, "")  # idempotent


def test_repair_jsonl_tail_of_a_missing_or_empty_file(tmp_path):
    assert repair_jsonl_tail(tmp_path / "none.log") == (0, "")
    (tmp_path / "empty.log").write_bytes(b"")
    assert repair_jsonl_tail(tmp_path / "empty.log") == (0, "")


def test_quarantine_moves_a_damaged_file_aside_and_says_so(tmp_path):
    f = tmp_path / "embeddings.sqlite"
    f.write_bytes(b"\x00garbage")
    said: list[str] = []
    aside = quarantine(f, "file is not a database", log=said.append)
    assert not f.exists() and aside.read_bytes() == b"\x00garbage"
    assert aside.name.startswith("embeddings.sqlite.damaged-")
    assert said == [f"{f} is damaged (file is not a database); moved aside to {aside}, it will be rebuilt"]


def test_remove_temporaries_keeps_young_ones(tmp_path):
    old, young = tmp_path / ".tmp-a.1.2", tmp_path / ".tmp-b.1.2"
    old.write_text("x")
    young.write_text("y")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert remove_temporaries(tmp_path) == 1
    assert not old.exists() and young.exists()


_HOLD = """
import sys, time
from pathlib import Path
from workbench._infra.locks import FileLock
with FileLock(Path(sys.argv[1]), "the test resource"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_process_waits_for_the_lock_and_says_for_whom(tmp_path):
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        said: list[str] = []
        t0 = time.perf_counter()
        with FileLock(lock, "the test resource", log=said.append):
            waited = time.perf_counter() - t0
            assert json.loads(lock.read_text())["pid"] == os.getpid()
    finally:
        holder.wait(10)
    assert waited > 0.8
    assert len(said) == 2 and said[0].startswith(f"waiting for pid {holder.pid} (") and "the test resource" in said[0]
    assert "goes on by itself" in said[0] and said[1].startswith("the test resource is free after ")  # when it ended


def test_a_lock_of_a_killed_process_is_free_at_once(tmp_path):
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock), "60"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(10)
    t0 = time.perf_counter()
    with FileLock(lock, "r", log=lambda m: None, timeout=5):
        pass
    assert time.perf_counter() - t0 < 1.0


def test_lock_timeout_names_the_holder_and_the_lock_is_reentrant(tmp_path):
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock), "5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BusyError, match=f"still held by pid {holder.pid}"):
            with FileLock(lock, "r", log=lambda m: None, timeout=0.3):
                pass
    finally:
        holder.kill()
        holder.wait(10)
    with FileLock(lock, "r") as outer, FileLock(lock, "r"):
        assert outer.held
    assert not FileLock(lock, "r").held


# ---------------------------------------------------------------- a home another user controls

def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    lock = tmp_path / "home" / "datasets" / ".gita.lock"
    lock.parent.mkdir(parents=True)
    lock.symlink_to(victim)
    with pytest.raises(StorageError, match="is a symbolic link; the workbench does not write through links"):
        with FileLock(lock, "dataset gita"):
            pass
    assert victim.read_text() == "precious"


def test_lock_files_are_private_so_nobody_else_can_hold_them(tmp_path):
    from faults import as_user, other_user

    lock = tmp_path / "x.lock"
    lock.write_text("")
    lock.chmod(0o644)  # as an older workbench left it
    with FileLock(lock, "r"):
        assert oct(lock.stat().st_mode & 0o777) == "0o600"
    user = other_user()
    tmp_path.chmod(0o755)
    tmp_path.parent.chmod(0o755)
    got = as_user(user, f"open({str(lock)!r}, 'rb')")
    assert got.returncode != 0 and "Permission denied" in got.stderr


def test_a_home_of_another_user_or_open_to_others_is_refused(tmp_path, monkeypatch):
    from faults import other_user

    from workbench.errors import ConfigError
    from workbench.settings import home_dir

    user = other_user()
    import pwd

    home = tmp_path / "theirs"
    home.mkdir()
    os.chown(home, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    with pytest.raises(ConfigError, match=f"the workbench home {home} belongs to {user}, not to you"):
        home_dir()
    open_home = tmp_path / "open"
    open_home.mkdir()
    open_home.chmod(0o777)
    monkeypatch.setenv("WORKBENCH_HOME", str(open_home))
    with pytest.raises(ConfigError, match=r"can be written by other users \(mode 777\); run `chmod go-w"):
        home_dir()
    fresh = tmp_path / "new" / "home"
    monkeypatch.setenv("WORKBENCH_HOME", str(fresh))
    assert home_dir() == fresh and oct(fresh.stat().st_mode & 0o777) == "0o700"


_INIT_TRACKING = """
import sys
from pathlib import Path
from workbench.experiment.tracking import check_tracking
check_tracking(Path(sys.argv[1]))
print("ok")
"""


def test_two_processes_creating_the_mlflow_store_at_once_both_succeed(tmp_path):
    from faults import REPO

    for attempt in range(3):
        home = tmp_path / f"home{attempt}"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        env["PYTHONPATH"] = str(REPO)
        procs = [subprocess.Popen([sys.executable, "-c", _INIT_TRACKING, str(home)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
        assert [o[0].strip() for o in outs] == ["ok", "ok"]


def test_swap_folder_replaces_a_folder_whole_and_restores_it_when_the_second_rename_fails(tmp_path, monkeypatch):
    """The one atomic-folder step of the dataset builder and the model writer (durable.swap_folder)."""
    import os

    from workbench._infra.durable import swap_folder

    dest, old = tmp_path / "ds", tmp_path / ".ds-old"
    first = tmp_path / ".ds-build-1"
    first.mkdir()
    (first / "a.txt").write_text("one")
    swap_folder(first, dest, old)  # nothing there yet: a plain rename
    assert (dest / "a.txt").read_text() == "one" and not first.exists() and not old.exists()

    second = tmp_path / ".ds-build-2"
    second.mkdir()
    (second / "b.txt").write_text("two")
    swap_folder(second, dest, old)  # the previous folder goes whole
    assert sorted(p.name for p in dest.iterdir()) == ["b.txt"] and not old.exists()

    third = tmp_path / ".ds-build-3"
    third.mkdir()
    real = os.rename

    def fail_into_place(src, dst):
        if str(src) == str(third):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", fail_into_place)
    with pytest.raises(OSError):
        swap_folder(third, dest, old)
    assert sorted(p.name for p in dest.iterdir()) == ["b.txt"] and not old.exists() and third.is_dir()
