"""Time loading every source and building every dataset and query set from scratch.

Target (issue #2): at most 60 s wall on the 2-core reference machine. Prints one row
per step (seconds) and the total; exits 1 if the total misses the target.

The source loads run first, each its first call in the process (files read from disk, or
from the OS file cache when something read them recently). Before the timed builds, one
untimed warm-up build of the gita (the smallest dataset) into a throwaway home does the
builders' lazy imports, which the first build of `workbench data build` pays; its time is
printed apart as ``cold (...)``. The timed builds, from scratch, then start warm.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_data_build.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _timing import cold_line, timed_call

TARGET_S = 60.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="full builds to time (median reported)")
    args = ap.parse_args()

    from workbench.data import catalog
    from workbench.data.loaders.bilara import load_bilara
    from workbench.data.loaders.cst4 import load_cst4
    from workbench.data.loaders.dpd import load_dpd
    from workbench.data.loaders.gita import load_gita
    from workbench.settings import data_dir

    data = data_dir()
    rows: list[tuple[str, float, str]] = []

    def timed(label, fn, describe):
        t0 = time.perf_counter()
        out = fn()
        rows.append((label, time.perf_counter() - t0, describe(out)))

    timed("load bilara (DN, MN, SN 56, Dhp)", lambda: load_bilara(data), lambda c: f"{len(c.documents):,} segments")
    timed("load CST4 (MN mūla + aṭṭhakathā)", lambda: load_cst4(data), lambda d: f"{len(d):,} paragraphs")
    timed("load gita", lambda: load_gita(data), lambda c: f"{len(c.documents):,} verses")
    timed("load ms-dpd", lambda: load_dpd(data), lambda lx: f"{len(lx):,} forms")

    defs = catalog.load_definitions()
    warm_up = "gita" if "gita" in defs.datasets else next(iter(defs.datasets))
    with tempfile.TemporaryDirectory() as home:
        cold, _ = timed_call(catalog.build, warm_up, defs, data, Path(home), force=True)
    totals = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as home:
            t_all = time.perf_counter()
            for name in defs.datasets:
                t0 = time.perf_counter()
                m = catalog.build(name, defs, data, Path(home), force=True)
                rows.append((f"build {name}", time.perf_counter() - t0,
                             f"{m['counts']['documents']:,} docs, {m['counts']['queries']:,} queries"))
            totals.append(time.perf_counter() - t_all)
    total = statistics.median(totals)
    width = max(len(r[0]) for r in rows)
    print(f"{'step':{width}s}  {'seconds':>8s}  what")
    for label, secs, what in rows:
        print(f"{label:{width}s}  {secs:8.2f}  {what}")
    print(f"{'all datasets, from scratch (median)':{width}s}  {total:8.2f}  target <= {TARGET_S:.0f} s "
          f"({total / TARGET_S:.0%} of the budget)")
    print(cold_line(f"first build in this process, {warm_up}, untimed warm-up", cold,
                    "the query-set builders' lazy imports"))
    return 0 if total <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
