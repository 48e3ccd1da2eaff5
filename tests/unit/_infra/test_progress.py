"""Progress lines in a log, the engine thread policy and the main job's stage times (issue #27)."""

from __future__ import annotations

import io
import sys

import pytest

from workbench._infra import progress, threads
from workbench.cli import stages
from workbench.errors import ConfigError


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_log_lines_every_30_s_with_rate_and_eta(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    import tqdm.std

    monkeypatch.setattr(tqdm.std, "time", clock)  # tqdm's own clock: its 30-s interval and the rate
    out = io.StringIO()
    b = progress.bar(100, "embedding gita (e5)", "passage", stream=out)
    for _ in range(10):  # 10 passages every 5 s: a line at most every 30 s, none in the first 10 s
        clock.t += 5.0
        b.update(10)
    b.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert all(ln.startswith("[workbench] embedding gita (e5): ") for ln in lines)
    # 50 s of work: tqdm prints on the first update past 30 s (n=60 at 30 s), then the last line at close
    assert [ln.split(": ", 1)[1].split(" passage")[0] for ln in lines] == ["60/100", "100/100"]
    assert "2.00passage/s" in lines[0] and "00:30 elapsed" in lines[0] and "ETA 00:20" in lines[0]
    assert "(100%)" in lines[-1] and "00:50 elapsed" in lines[-1]


def test_a_finished_bar_writes_its_last_count_once(monkeypatch):
    """make main's log showed "701/701 doc (100%), 10.45doc/s" and then "…, 10.49doc/s": the close redrew the
    final count with a new rate. One line per finished count."""
    clock = FakeClock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    import tqdm.std

    monkeypatch.setattr(tqdm.std, "time", clock)
    out = io.StringIO()
    b = progress.bar(701, "embedding gita (minilm)", "doc", stream=out)
    for _ in range(11):  # 32 documents every 3 s: a line at 30 s
        clock.t += 3.0
        b.update(32)
    clock.t += 34.0
    b.update(701 - 11 * 32)  # the last batch, 34 s after that line: tqdm writes 701/701 now
    clock.t += 0.3
    b.close()  # and wrote it again at close, with a slightly different rate
    counts = [ln.split(": ", 1)[1].split(",")[0] for ln in out.getvalue().splitlines()]
    assert counts == ["320/701 doc (46%)", "701/701 doc (100%)"]


def test_short_work_is_silent_in_a_log_and_a_disabled_bar_always():
    out = io.StringIO()
    with progress.bar(5, "quick", "doc", stream=out) as b:
        b.update(5)
    with progress.bar(5, "off", "doc", stream=out, enabled=False) as b:
        b.update(5)
    assert out.getvalue() == ""


def test_unknown_total_has_no_eta(monkeypatch):
    monkeypatch.setattr(progress, "QUIET_S", 0.0)
    out = io.StringIO()
    with progress.bar(None, "lanes", "query", stream=out) as b:
        b.update(7)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("[workbench] lanes: 7 query, ") and "ETA" not in last and "%" not in last


def test_threads_user_number_wins(monkeypatch):
    monkeypatch.setenv(threads.ENV, "3")
    assert threads.default_threads(2) == 2
    assert threads.default_threads() == 3
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv(threads.ENV, bad)
        with pytest.raises(ConfigError, match="WORKBENCH_THREADS must be a positive integer"):
            threads.default_threads()


def test_threads_one_per_free_core(monkeypatch):
    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    for busy, want in ((0.0, 2), (0.4, 2), (0.6, 1), (1.0, 1), (1.9, 1), (5.0, 1)):
        monkeypatch.setattr(threads, "others_busy_cores", lambda b=busy: b)
        assert threads.default_threads() == want, busy
    monkeypatch.setattr(threads, "usable_cores", lambda: 16)
    monkeypatch.setattr(threads, "others_busy_cores", lambda: 3.2)
    assert threads.default_threads() == 13


def test_others_busy_excludes_this_process():
    """This process spinning for the whole window is not counted as another process's load."""
    import time as _time

    a = threads._busy_ticks()
    if a is None:
        pytest.skip("no /proc/stat")
    end = _time.monotonic() + 0.3
    while _time.monotonic() < end:
        pass
    # measured while idle-waiting: whatever it reports is another process's, never more than the cores
    assert 0.0 <= threads.others_busy_cores(0.1) <= threads.usable_cores() + 0.5


def test_stage_times_table(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    assert stages.main(["start"]) == 0
    assert stages.main(["run", "ok", "--", sys.executable, "-c", "pass"]) == 0
    assert stages.main(["run", "fails", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert stages.main(["run", "missing", "--", str(tmp_path / "no-such-program")]) == 127
    assert stages.main(["run", "no dash dash", sys.executable]) == 2
    rows = stages.read()
    assert [(r[0], r[2]) for r in rows] == [("ok", 0), ("fails", 3), ("missing", 127)]
    table = stages.report().splitlines()
    assert table[0].split() == ["stage", "time", "share", "load", "exit"]
    assert table[-1].startswith("total")
    assert stages.fmt(75.2) == "1 min 15 s" and stages.fmt(42.04) == "42.0 s"
    assert stages.main(["start"]) == 0 and stages.main(["run", "x", "--", str(tmp_path / "none")]) == 127
    assert stages.report().splitlines()[-1].split() == ["total", "0.0", "s"]  # nothing ran: 0, not 1 s
    assert stages.main(["start"]) == 0 and stages.read() == []


def test_a_wait_shows_the_time_so_far_only(monkeypatch):
    monkeypatch.setattr(progress, "QUIET_S", 0.0)
    out = io.StringIO()
    with progress.bar(None, "waiting for OpenSearch", "s", stream=out, wait=True) as b:
        b.update(12)
    assert out.getvalue().splitlines()[-1] == "[workbench] waiting for OpenSearch: 00:00 elapsed"


def test_env_threads_is_checked_on_its_own(monkeypatch):
    monkeypatch.delenv(threads.ENV, raising=False)
    assert threads.env_threads() is None
    monkeypatch.setenv(threads.ENV, " 4 ")
    assert threads.env_threads() == 4
    monkeypatch.setenv(threads.ENV, "abc")
    with pytest.raises(ConfigError, match="unset it to use one thread per free core"):
        threads.env_threads()


def test_a_measurement_is_reused_for_a_while(monkeypatch):
    """Several models loaded by one command sample the machine once (REUSE_S), not once per model."""
    calls = []
    monkeypatch.setattr(threads, "_last", None)
    monkeypatch.setattr(threads, "_measure", lambda s: calls.append(s) or 0.7)
    assert threads.others_busy_cores() == 0.7 and threads.others_busy_cores() == 0.7 and calls == [threads.SAMPLE_S]
    assert threads.others_busy_cores(0.01) == 0.7 and calls == [threads.SAMPLE_S, 0.01]  # another window: measured
    monkeypatch.setattr(threads, "_last", (threads.time.monotonic() - threads.REUSE_S - 1, 5.0))
    assert threads.others_busy_cores() == 0.7 and len(calls) == 3  # too old: measured again
