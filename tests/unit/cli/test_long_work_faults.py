"""Faults after long work must end in one clear line, never a library's traceback (issue #28, part 5).

* ``make main``'s stopwatch (``python -m workbench.cli.stages run``): a stage that filled the disk, or a
  read-only home, used to turn the stage's own exit status into a traceback and exit 1 when the time
  was appended — a finished 28-minute stage then failed ``make main``;
* the int8 ONNX export of a cross-encoder (``<home>/cache/onnx/``): a full disk was reported as "does
  not export to ONNX" with the fix "set backend = torch" (a truncated intermediate file even read as a
  protobuf DecodeError), a read-only home as a raw ``OSError``; ``auto`` crashed instead of scoring with
  torch;
* ``workbench notebooks run -o FOLDER``: the executed ``.ipynb`` was written after the whole run, with a
  raw ``OSError`` for an unwritable folder and a half file for a full disk.

Full disks are small tmpfs mounts and read-only folders read-only bind mounts (``tests/faults.py``; root
only, skipped otherwise).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import faults
import numpy as np
import pytest

from workbench.errors import StorageError

FILL = ("import sys\n"
        "with open(sys.argv[1], 'wb') as fh:\n"
        "    try:\n"
        "        while True:\n"
        "            fh.write(b'\\0' * 65536); fh.flush()\n"
        "    except OSError:\n"
        "        pass\n")


def _stages(args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "workbench.cli.stages", *args], env=env, cwd=faults.REPO,
                          capture_output=True, text=True, timeout=120)


# ------------------------------------------------------------------------------- make main's stopwatch

def test_a_stage_that_fills_the_disk_keeps_its_own_exit_status(tmp_path):
    home = tmp_path / "home"
    with faults.small_disk(home, "1m"):
        assert _stages(["start"], home).returncode == 0
        # the stage's own work fills the disk (as an embedding run can); the stage itself succeeded
        res = _stages(["run", "fills the disk", "--", sys.executable, "-c", FILL, str(home / "big")], home)
        assert "Traceback" not in res.stderr, res.stderr
        assert res.returncode == 0, res.stderr
        tsv = home / "main-stages.tsv"
        said = res.stderr.splitlines()
        assert len(said) == 2 and re.fullmatch(r"\[stage\] fills the disk: \d+\.\d s", said[0]), said
        assert re.fullmatch(re.escape(f"warning: the time of stage 'fills the disk' is not kept: disk full: cannot "
                                      f"write {tsv} (0 B free, about ") + r"4\d B" + re.escape(
            " needed); free space on that disk or set WORKBENCH_HOME to a writable folder on a disk with room; "
            "nothing half-written was kept"), said[1]), said[1]
        res = _stages(["run", "fails", "--", sys.executable, "-c", "raise SystemExit(3)"], home)
        assert res.returncode == 3 and "Traceback" not in res.stderr
        assert "warning: the time of stage 'fails' is not kept: disk full" in res.stderr
        assert tsv.read_text() == ""  # nothing half-written
        (home / "big").unlink()
        assert _stages(["run", "after", "--", sys.executable, "-c", "pass"], home).returncode == 0
        assert tsv.read_text().startswith("after\t")


def test_a_read_only_home_is_one_error_line_before_make_main_starts(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "main-stages.tsv").write_text("old\t1.0\t0\t0.10\t2026-01-01T00:00:00Z\n")
    with faults.read_only(home):
        res = _stages(["start"], home)
        assert res.returncode == 2 and res.stderr == (
            f"error: cannot write {home / 'main-stages.tsv'}: the file system is read-only; remount it read-write "
            "or set WORKBENCH_HOME to a writable folder on a disk with room\n")
        res = _stages(["run", "ok", "--", sys.executable, "-c", "pass"], home)
        assert res.returncode == 0 and "Traceback" not in res.stderr
        assert "warning: the time of stage 'ok' is not kept: cannot write" in res.stderr


# ------------------------------------------------------------------------------- the int8 ONNX export

def _scorer(folder, home, backend, log=None):
    from workbench.reranking.scorers import CrossEncoderScorer

    probe = [("act without attachment", ["perform your duty", "a lamp in a windless place"])]
    return CrossEncoderScorer(folder, max_length=32, backend=backend, home=home, probe=lambda order: probe,
                              log=log)


def test_the_int8_export_on_a_full_home_is_a_storage_error_and_auto_scores_with_torch(ce_folder, tmp_path,
                                                                                       monkeypatch):
    from workbench.reranking import onnx as onnx_ce
    from workbench.reranking.scorers import folder_digest

    home = tmp_path / "home"
    dest = onnx_ce.cache_dir(home, folder_digest(ce_folder))
    need = onnx_ce.export_size_estimate(ce_folder)
    weights = (ce_folder / "model.safetensors").stat().st_size
    assert 2 * weights < need < 2.2 * weights  # model.onnx and the quantizer's model-inferred.onnx at once
    texts = ["perform your duty", "the soul is never born"]
    want = _scorer(ce_folder, tmp_path / "other", "torch").score("act", texts)
    fix = ("; free space on that disk or set WORKBENCH_HOME to a writable folder on a disk with room, or set "
           "backend = \"torch\" in [rerankers.NAME]; nothing half-written was kept")
    # 1 MB, and room for model.onnx but not for the quantizer's copy of it: both once said "does not export"
    for size in ("1m", f"{weights + 8 * 2**20}"):
        with faults.small_disk(home, size):
            free = human_size(os.statvfs(home).f_bavail * os.statvfs(home).f_frsize)
            with pytest.raises(StorageError) as err:  # refused before the export
                _scorer(ce_folder, home, "int8").score("act", texts)
            assert str(err.value) == (f"disk full: cannot write the int8 ONNX export of {ce_folder} to {dest} ({free} "
                                      f"free, about {human_size(need)} needed){fix}")
            said: list[str] = []
            auto = _scorer(ce_folder, home, "auto", log=said.append)
            assert auto.backend == "torch" and auto.verdict is None
            assert said[-1] == f"{ce_folder.name}: scored with torch ({err.value})"
            np.testing.assert_allclose(auto.score("act", texts), want, atol=1e-6)
            assert [p for p in home.rglob("*") if p.is_file() and p.suffix != ".lock"] == []  # the export's lock aside
            # a disk that fills while the export runs (another writer; here: an estimate that says there is room):
            # torch's ENOSPC, and onnx's shape inference truncating its file silently (a protobuf DecodeError)
            monkeypatch.setattr(onnx_ce, "export_size_estimate", lambda folder: 1)
            with pytest.raises(StorageError) as err:
                _scorer(ce_folder, home, "int8").score("act", texts)
            head = f"disk full: cannot write the int8 ONNX export of {ce_folder} to {dest} ("
            assert str(err.value).startswith(head), str(err.value)
            assert str(err.value).endswith(f"free, about 1 B needed){fix}") and "does not export" not in str(err.value)
            assert [p for p in home.rglob("*") if p.is_file() and p.suffix != ".lock"] == []  # no half export, no tmp folder
            monkeypatch.undo()


def test_the_int8_export_in_a_read_only_home_is_a_storage_error_and_auto_scores_with_torch(ce_folder, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with faults.read_only(home):
        with pytest.raises(StorageError) as err:
            _scorer(ce_folder, home, "int8").score("act", ["perform your duty"])
        assert str(err.value) == (f"cannot create {home / 'cache'}: the file system is read-only; remount it "
                                  "read-write or set WORKBENCH_HOME to a writable folder on a disk with room (the int8 "
                                  f"ONNX export of {ce_folder}), or set backend = \"torch\" in [rerankers.NAME]")
        said: list[str] = []
        auto = _scorer(ce_folder, home, "auto", log=said.append)
        assert auto.backend == "torch" and said[-1].startswith(f"{ce_folder.name}: scored with torch (cannot create")
        assert auto.score("act", ["perform your duty"]).shape == (1,)
        assert list(home.iterdir()) == []


def human_size(n: int) -> str:
    from workbench._infra.durable import human_size as human

    return human(n)


# ------------------------------------------------------------------------------- notebooks run -o

NOTEBOOK = """# %%
from pathlib import Path
Path({marker!r}).write_text("ran")
print("hello")
"""


def _notebook(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "ran.txt"
    nb = tmp_path / "nbs" / "tiny.py"
    nb.parent.mkdir()
    nb.write_text(NOTEBOOK.format(marker=str(marker)))
    return nb, marker


def test_an_unwritable_notebook_output_folder_is_refused_before_the_run(tmp_path):
    pytest.importorskip("nbclient")
    from workbench.results import notebooks

    nb, marker = _notebook(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with faults.read_only(out):
        with pytest.raises(StorageError) as err:
            notebooks.execute(nb, out, timeout=120)
    assert str(err.value).startswith(f"cannot write {out / 'tiny.ipynb'}: the file system is read-only"), str(err.value)
    assert not marker.exists()  # refused before any cell ran
    done = notebooks.execute(nb, out, timeout=120)  # writable again: the run and its outputs
    assert done.error == "" and marker.read_text() == "ran"
    assert '"hello\\n"' in (out / "tiny.ipynb").read_text()
    assert [p.name for p in out.iterdir()] == ["tiny.ipynb"]


def test_a_full_disk_after_a_notebook_run_is_a_storage_error_and_no_half_file(tmp_path):
    pytest.importorskip("nbclient")
    from workbench.results import notebooks

    nb, marker = _notebook(tmp_path)
    out = tmp_path / "out"
    with faults.small_disk(out, "1m"):
        faults.fill(out)
        with pytest.raises(StorageError) as err:
            notebooks.execute(nb, out, timeout=120)
        assert marker.read_text() == "ran"
        assert str(err.value).startswith(f"disk full: cannot write {out / 'tiny.ipynb'} (0 B free"), str(err.value)
        assert [p.name for p in out.iterdir()] == [".filler"]


def test_stage_times_round_to_the_second_before_the_minutes():
    """A newcomer's ``make main`` ended with "total 69 min 60 s" (4199.6 s)."""
    from workbench.cli.stages import fmt

    assert [fmt(s) for s in (4199.6, 75.2, 59.96, 42.04, 3600.0)] == [
        "70 min 0 s", "1 min 15 s", "1 min 0 s", "42.0 s", "60 min 0 s"]


def test_a_tagged_stage_prints_each_line_of_its_command_whole_with_the_tag(tmp_path):
    """``make main`` runs two chains at once: each line of a tagged stage is its own line, tagged, and a line the
    command ended with ``\\r`` (a progress redraw) or left unended is a line too."""
    home = tmp_path / "home"
    assert _stages(["start"], home).returncode == 0
    script = ("import sys; print('first'); sys.stdout.flush(); sys.stderr.buffer.write(b'bar 1\\rbar 2\\r\\n\\xff end'); "
              "raise SystemExit(4)")
    res = _stages(["run", "--tag", "gita", "tagged", "--", sys.executable, "-c", script], home)
    assert res.returncode == 4
    assert res.stdout.splitlines() == ["[gita] first", "[gita] bar 1", "[gita] bar 2", "[gita] \ufffd end"]
    assert res.stderr.splitlines()[-1].startswith("[gita] [stage] tagged: ") and "(exit 4)" in res.stderr
    assert (home / "main-stages.tsv").read_text().split("\t")[:3][::2] == ["tagged", "4"]


def test_the_report_gives_the_wall_clock_when_stages_overlapped(tmp_path, monkeypatch):
    """Two stages of 600 s and 300 s that ran at once, ending 100 s apart: 900 s added, 600 s of wall clock
    (the first started at 11:50:00, both ended by 12:00:00)."""
    from workbench.cli import stages

    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    (tmp_path / "main-stages.tsv").write_text("a\t600.0\t0\t1.90\t2026-12-07T12:00:00Z\n"
                                              "b\t300.0\t0\t1.80\t2026-12-07T11:58:20Z\n")
    lines = stages.report().splitlines()
    assert stages.wall_seconds() == 600.0
    assert lines[-2].split() == ["total", "(stages", "added;", "they", "overlap)", "15", "min", "0", "s"]
    assert lines[-1].split() == ["wall", "clock", "10", "min", "0", "s"]
    (tmp_path / "main-stages.tsv").write_text("a\t600.0\t0\t1.90\t2026-12-07T12:00:00Z\n"
                                              "b\t300.0\t0\t1.80\t2026-12-07T12:05:00Z\n")
    assert stages.report().splitlines()[-1].split() == ["total", "15", "min", "0", "s"]  # one after the other
