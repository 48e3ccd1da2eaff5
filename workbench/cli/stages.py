"""The main job's own stopwatch: each stage of ``make main`` timed, and a table of them printed at the end.

    python -m workbench.cli.stages start                      # a new job: forget the last one's times
    python -m workbench.cli.stages run "seed experiments" -- workbench eval experiments/seeds.toml
    python -m workbench.cli.stages report                     # the table: stage, seconds, exit status, share

The times are appended to ``<home>/main-stages.tsv`` (stage, wall seconds, exit status, load average at the end,
UTC time), one line per stage, so a job that fails half-way still has the times of what ran. ``run`` exits with
the command's own status.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, cast

from workbench.errors import WorkbenchError

FILE = "main-stages.tsv"


def stages_file() -> Path:
    """``<home>/main-stages.tsv`` (:func:`workbench.settings.home_dir`)."""
    from workbench.settings import home_dir

    return home_dir() / FILE


def run(name: str, argv: list[str], tag: str | None = None) -> int:
    """Run ``argv``, append its time to :func:`stages_file`; its exit status.

    Without ``tag`` the command inherits stdin, stdout and stderr (a progress bar on a terminal). With ``tag`` (two
    stages running at once, ``make main``'s concurrent chains) its stdout and stderr go through a pipe, so it
    writes log lines rather than bars, and each line is printed with ``[tag] `` in front, whole: two stages'
    lines interleave but never mix.

    A time that cannot be appended (the stage filled the disk, a read-only home) is a one-line warning: the
    stage's own exit status is returned all the same, so a finished stage never fails ``make main``.
    """
    t = time.perf_counter()
    try:
        rc = subprocess.call(argv) if tag is None else _tagged(argv, tag)
    except OSError as exc:
        print(f"error: stage {name!r} could not start {argv[0]!r}: {exc}", file=sys.stderr)
        rc = 127
    seconds = time.perf_counter() - t
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{_prefix(tag)}[stage] {name}: {fmt(seconds)}" + (f" (exit {rc})" if rc else ""), file=sys.stderr,
          flush=True)
    line = f"{name}\t{seconds:.1f}\t{rc}\t{load:.2f}\t{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
    try:
        _append(stages_file(), line)
    except WorkbenchError as exc:  # a full disk or a read-only home costs the table, never the stage's status
        print(f"warning: the time of stage {name!r} is not kept: {exc}", file=sys.stderr, flush=True)
    return rc


def _prefix(tag: str | None) -> str:
    return f"[{tag}] " if tag else ""


def _tagged(argv: list[str], tag: str) -> int:
    """Run ``argv`` with stdout and stderr joined in a pipe; print each of its lines (``\\n`` or ``\\r``
    ended, invalid UTF-8 replaced) to stdout with ``[tag] `` in front; its exit status."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    pipe = cast(IO[bytes], proc.stdout)  # stdout=PIPE
    out, prefix, pending = sys.stdout, _prefix(tag), b""
    for chunk in iter(lambda: pipe.read1(65536), b""):  # type: ignore[attr-defined]
        pending += chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                out.write(prefix + line.decode("utf-8", "replace") + "\n")
        out.flush()
    if pending.strip():
        out.write(prefix + pending.decode("utf-8", "replace") + "\n")
        out.flush()
    return proc.wait()


def _append(path: Path, line: str) -> None:
    """Append ``line`` to ``path`` whole or not at all: a write cut short (a full disk) is truncated back.

    Raises:
        StorageError: the file cannot be created or written (names it, the free space and the fix).
    """
    from workbench._infra.durable import mkdirs, storage_error

    data = line.encode("utf-8")
    mkdirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise storage_error(exc, path) from None
    try:
        start = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            try:
                os.ftruncate(fd, start)  # no half line for the next append to glue onto
            except OSError:
                pass
            raise storage_error(exc, path, needed=len(data)) from None
    finally:
        os.close(fd)


def fmt(seconds: float) -> str:
    """``75.2`` → ``1 min 15 s`` (rounded to the second first: ``4199.6`` → ``70 min 0 s``, never ``69 min 60 s``);
    under a minute ``42.0 s``."""
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    return f"{whole // 60} min {whole % 60} s"


def _lines() -> list[list[str]]:
    """The current job's table, each line split on tabs (nothing when the file cannot be read)."""
    try:
        return [line.split("\t") for line in stages_file().read_text(encoding="utf-8").splitlines()]
    except OSError:
        return []


def read(lines: list[list[str]] | None = None) -> list[tuple[str, float, int, float]]:
    """(stage, seconds, exit status, load average at its end) of the current job, in order (malformed lines skipped);
    ``lines``: the table as :func:`_lines` gives it (default: read now)."""
    rows: list[tuple[str, float, int, float]] = []
    for parts in _lines() if lines is None else lines:
        try:
            rows.append((parts[0], float(parts[1]), int(parts[2]), float(parts[3])))
        except (IndexError, ValueError):
            continue
    return rows


def report() -> str:
    """The table of :func:`read` with each stage's share of the total; when stages ran at once (their times add up
    to more than the job took, :func:`wall_seconds`), the wall clock below the sum."""
    lines = _lines()  # read once for both
    rows = read(lines)
    if not rows:
        return f"no stage times in {stages_file()}"
    total = sum(r[1] for r in rows)
    wall = wall_seconds(lines)
    overlap = wall is not None and wall < total - 1
    label = "total (stages added; they overlap)" if overlap else "total"
    width = max(len(label), *(len(r[0]) for r in rows))
    out = [f"{'stage'.ljust(width)}  {'time':>13}  share  load  exit"]
    for name, s, rc, load in rows:
        out.append(f"{name.ljust(width)}  {fmt(s):>13}  {100 * s / (total or 1.0):4.0f}%  {load:4.1f}  {rc}")
    out.append(f"{label.ljust(width)}  {fmt(total):>13}")
    if overlap:
        out.append(f"{'wall clock'.ljust(width)}  {fmt(cast(float, wall)):>13}")
    return "\n".join(out)


def wall_seconds(lines: list[list[str]] | None = None) -> float | None:
    """Seconds from the first stage's start to the last one's end (each line's UTC end less its seconds), or None
    with no readable line. To the second: the end times are. ``lines``: as for :func:`read`."""
    import calendar

    spans = []
    for parts in _lines() if lines is None else lines:
        try:
            end = calendar.timegm(time.strptime(parts[4], "%Y-%m-%dT%H:%M:%SZ"))
            spans.append((end - float(parts[1]), float(end)))
        except (IndexError, ValueError):
            continue
    if not spans:
        return None
    return max(e for _s, e in spans) - min(s for s, _e in spans)


def main(argv: list[str] | None = None) -> int:
    """``start`` | ``run NAME -- CMD...`` | ``report``; exit 2 on a usage error, or when ``start`` cannot
    write the table (a read-only or full home: one ``error:`` line naming the file, before any stage ran)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["start"]:
        from workbench._infra.durable import atomic_write_text

        try:  # before any stage: a home that cannot take the table cannot take the job's results either
            atomic_write_text(stages_file(), "")
        except WorkbenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args[:1] == ["report"]:
        print(report())
        return 0
    tag = None
    if args[:2] == ["run", "--tag"] and len(args) >= 3:
        tag, args = args[2], ["run", *args[3:]]
    if len(args) >= 4 and args[0] == "run" and args[2] == "--":
        return run(args[1], args[3:], tag)
    print("usage: python -m workbench.cli.stages start | run [--tag TAG] NAME -- CMD [ARGS...] | report",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
