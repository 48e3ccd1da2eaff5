"""The thread governor: an engine's thread count re-decided between batches from what other processes used
(issue #40). The clock and ``/proc/stat`` are replaced by given readings, so each decision is worked by hand:
others = (all busy CPU-seconds - this process's) / seconds, threads = round(cores - others) in [1, cores]."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from workbench._infra import threads


@pytest.fixture
def machine(monkeypatch):
    """Two cores; ``machine.at(t, all_busy, own)`` sets the clock and the CPU-seconds read next."""
    state = SimpleNamespace(t=0.0, ticks=(0.0, 0.0))
    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads, "others_busy_cores", lambda: 0.0)  # the first decision: an idle machine
    monkeypatch.setattr(threads, "time", SimpleNamespace(monotonic=lambda: state.t))
    monkeypatch.setattr(threads, "_busy_ticks", lambda: state.ticks)

    def at(t: float, all_busy: float, own: float) -> None:
        state.t, state.ticks = t, (all_busy, own)

    state.at = at
    return state


def test_the_count_comes_down_beside_a_neighbour_and_goes_back_up(machine):
    applied = []
    gov = threads.ThreadGovernor(apply=applied.append)
    assert gov.threads == 2 and applied == [2] and not gov.fixed
    # 4 s: all processes 7.6 CPU-s, this one 5.2: others 2.4 / 4 = 0.6 cores -> round(1.4) = 1
    machine.at(4.0, 7.6, 5.2)
    assert gov.next() == 1 and applied == [2, 1]
    # 0.5 s later: under RECHECK_S (1 s), no new decision whatever the readings say
    machine.at(4.5, 7.6, 5.2)
    assert gov.next() == 1 and applied == [2, 1]
    # 4 s -> 6 s: 9.8 - 7.6 = 2.2 CPU-s in all, 6.2 - 5.2 = 1.0 own: others 1.2 / 2 = 0.6 -> still 1
    machine.at(6.0, 9.8, 6.2)
    assert gov.next() == 1 and applied == [2, 1]
    # 6 s -> 8 s: the neighbour stopped: 11.9 - 9.8 = 2.1, own 8.2 - 6.2 = 2.0: others 0.05 -> 2
    machine.at(8.0, 11.9, 8.2)
    assert gov.next() == 2 and applied == [2, 1, 2]
    assert gov.decisions == [(0.0, 2), (4.0, 1), (8.0, 2)]


def test_a_busy_moment_at_load_costs_one_batch_only(machine, monkeypatch):
    """Issue #40's case: a neighbour busy during the first sample gives 1 thread; the first batch's window,
    with the machine otherwise idle, gives the second core back."""
    monkeypatch.setattr(threads, "others_busy_cores", lambda: 0.9)
    gov = threads.ThreadGovernor()
    assert gov.threads == 1
    machine.at(3.0, 3.1, 3.0)  # 3 s on one thread: 3.0 own CPU-s of 3.1 in all: others 0.03 -> 2
    assert gov.next() == 2


def test_the_users_number_is_never_re_decided(machine, monkeypatch):
    applied = []
    gov = threads.ThreadGovernor(1, applied.append)
    machine.at(10.0, 0.0, 0.0)  # an idle machine would get 2
    assert gov.fixed and gov.next() == 1 and applied == [1]
    monkeypatch.setenv(threads.ENV, "2")
    gov = threads.ThreadGovernor()
    machine.at(20.0, 40.0, 0.0)  # a saturated machine would get 1
    assert gov.fixed and gov.next() == 2


def test_no_proc_stat_keeps_the_count(machine, monkeypatch):
    gov = threads.ThreadGovernor()
    monkeypatch.setattr(threads, "_busy_ticks", lambda: None)
    machine.t = 5.0
    assert gov.next() == 2 and gov.decisions == [(0.0, 2)]


@pytest.mark.parametrize("cores, others, want", [(2, 0.0, 2), (2, 0.49, 2), (2, 0.51, 1), (2, 1.8, 1),
                                                  (2, 7.0, 1), (16, 3.2, 13), (16, 0.0, 16), (1, 0.0, 1)])
def test_threads_for(cores, others, want):
    assert threads.threads_for(cores, others) == want
