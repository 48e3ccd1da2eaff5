"""The main job's own stopwatch: each stage of ``make main`` timed, and a table of them printed at the end.

    python -m workbench.stages start                      # a new job: forget the last one's times
    python -m workbench.stages run "seed experiments" -- workbench eval experiments/seeds.toml
    python -m workbench.stages report                     # the table: stage, seconds, exit status, share

The times are appended to ``<home>/main-stages.tsv`` (stage, wall seconds, exit status, load average at the end,
UTC time), one line per stage, so a job that fails half-way still has the times of what ran. ``run`` exits with
the command's own status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

FILE = "main-stages.tsv"


def stages_file() -> Path:
    """``<home>/main-stages.tsv`` (:func:`workbench.settings.home_dir`)."""
    from workbench.settings import home_dir

    return home_dir() / FILE


def run(name: str, argv: list[str]) -> int:
    """Run ``argv`` (stdin, stdout and stderr inherited), append its time to :func:`stages_file`; its exit status."""
    t = time.perf_counter()
    try:
        rc = subprocess.call(argv)
    except OSError as exc:
        print(f"error: stage {name!r} could not start {argv[0]!r}: {exc}", file=sys.stderr)
        rc = 127
    seconds = time.perf_counter() - t
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    path = stages_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{name}\t{seconds:.1f}\t{rc}\t{load:.2f}\t{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    print(f"[stage] {name}: {fmt(seconds)}" + (f" (exit {rc})" if rc else ""), file=sys.stderr, flush=True)
    return rc


def fmt(seconds: float) -> str:
    """``75.2`` → ``1 min 15 s``; under a minute ``42.0 s``."""
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s" if seconds >= 60 else f"{seconds:.1f} s"


def read() -> list[tuple[str, float, int, float]]:
    """(stage, seconds, exit status, load average at its end) of the current job, in order (malformed lines skipped)."""
    rows = []
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
    """``start`` | ``run NAME -- CMD...`` | ``report``; exit 2 on a usage error."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["start"]:
        path = stages_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
        return 0
    if args[:1] == ["report"]:
        print(report())
        return 0
    if len(args) >= 4 and args[0] == "run" and args[2] == "--":
        return run(args[1], args[3:])
    print("usage: python -m workbench.stages start | run NAME -- CMD [ARGS...] | report", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
