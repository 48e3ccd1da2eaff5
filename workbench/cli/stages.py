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

from workbench.errors import WorkbenchError

FILE = "main-stages.tsv"


def stages_file() -> Path:
    """``<home>/main-stages.tsv`` (:func:`workbench.settings.home_dir`)."""
    from workbench.settings import home_dir

    return home_dir() / FILE


def run(name: str, argv: list[str]) -> int:
    """Run ``argv`` (stdin, stdout and stderr inherited), append its time to :func:`stages_file`; its exit status.

    A time that cannot be appended (the stage filled the disk, a read-only home) is a one-line warning: the
    stage's own exit status is returned all the same, so a finished stage never fails ``make main``.
    """
    t = time.perf_counter()
    try:
        rc = subprocess.call(argv)
    except OSError as exc:
        print(f"error: stage {name!r} could not start {argv[0]!r}: {exc}", file=sys.stderr)
        rc = 127
    seconds = time.perf_counter() - t
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"[stage] {name}: {fmt(seconds)}" + (f" (exit {rc})" if rc else ""), file=sys.stderr, flush=True)
    line = f"{name}\t{seconds:.1f}\t{rc}\t{load:.2f}\t{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
    try:
        _append(stages_file(), line)
    except WorkbenchError as exc:  # a full disk or a read-only home costs the table, never the stage's status
        print(f"warning: the time of stage {name!r} is not kept: {exc}", file=sys.stderr, flush=True)
    return rc


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


def read() -> list[tuple[str, float, int, float]]:
    """(stage, seconds, exit status, load average at its end) of the current job, in order (malformed lines skipped)."""
    rows: list[tuple[str, float, int, float]] = []
    try:
        lines = stages_file().read_text(encoding="utf-8").splitlines()
    except OSError:
        return rows
    for line in lines:
        parts = line.split("\t")
        try:
            rows.append((parts[0], float(parts[1]), int(parts[2]), float(parts[3])))
        except (IndexError, ValueError):
            continue
    return rows


def report() -> str:
    """The table of :func:`read` with each stage's share of the total."""
    rows = read()
    if not rows:
        return f"no stage times in {stages_file()}"
    total = sum(r[1] for r in rows)
    width = max(len("total"), *(len(r[0]) for r in rows))
    out = [f"{'stage'.ljust(width)}  {'time':>13}  share  load  exit"]
    for name, s, rc, load in rows:
        out.append(f"{name.ljust(width)}  {fmt(s):>13}  {100 * s / (total or 1.0):4.0f}%  {load:4.1f}  {rc}")
    out.append(f"{'total'.ljust(width)}  {fmt(total):>13}")
    return "\n".join(out)


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
    if len(args) >= 4 and args[0] == "run" and args[2] == "--":
        return run(args[1], args[3:])
    print("usage: python -m workbench.cli.stages start | run NAME -- CMD [ARGS...] | report", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
