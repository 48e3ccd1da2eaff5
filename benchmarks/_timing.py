"""Timing helpers shared by the benchmarks: warm up before measuring, report the cold figure apart.

Each benchmark calls what it measures once before its measuring window, untimed for the warm
figures: numba kernels compiled (or loaded from numba's on-disk cache), models loaded, caches
filled, lazy imports done, connections opened. Where a user pays that first call, its wall
time is printed on a line of its own (:func:`cold_line`); it never enters the throughput or
latency figures the targets check.

Import it as ``from _timing import ...``: a script run as ``python benchmarks/bench_x.py``
has ``benchmarks/`` first on ``sys.path``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def timed_call(fn: Callable[..., Any], *args, **kwargs) -> tuple[float, Any]:
    """Call ``fn(*args, **kwargs)`` once; return (its wall time in seconds, its result).

    As the warm-up before a measured window, its seconds are the cold figure: what the call costs
    the first time in a process.
    """
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t, out


def calls_per_s(fn: Callable[[], Any], seconds: float, at_least: int = 1) -> float:
    """Calls per second of ``fn()`` (warm it first) over at least ``seconds`` s of wall time and ``at_least`` calls."""
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds or n < at_least:
        fn()
        n += 1
    return n / (time.perf_counter() - t)


def cold_line(what: str, seconds: float, includes: str, unit: str = "s") -> str:
    """The cold figure's line, e.g. ``cold (first call, includes numba compile): 3.21 s``; ``unit="ms"``
    prints milliseconds (``... : 48.3 ms``)."""
    value = f"{seconds * 1000:.1f} ms" if unit == "ms" else f"{seconds:.2f} s"
    return f"cold ({what}, includes {includes}): {value}"


def numba_origin(*dispatchers) -> str:
    """How numba got the machine code of ``dispatchers`` so far in this process: ``numba compile`` when one
    compiled (nothing usable in numba's on-disk cache: a fresh install, or the code changed), else
    ``numba cache load`` when read from that cache, else ``no numba work``."""
    stats = [d.stats for d in dispatchers]
    if any(sum(s.cache_misses.values()) for s in stats):
        return "numba compile"
    if any(sum(s.cache_hits.values()) for s in stats):
        return "numba cache load"
    return "no numba work"
