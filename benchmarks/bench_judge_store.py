"""Judgment store throughput (issue #9): 10 concurrent simulated raters on a 10,000-pair pool.

Starts a throwaway embedded PostgreSQL (its own temporary home), makes a pool of 10,000
pairs with 2 raters per pair (20,000 slots) and 10 raters, then runs 10 processes, one per
rater, each doing ``next_assignment`` + ``judge`` as fast as it can for a fixed number of
judgments. Prints judgments/s over the whole run (from the start signal until every
process reported: a rater's page costs more, this is the store alone) and the latency of
one ``next_assignment`` + ``judge`` round trip (p50 / p95, ms), then checks that none was
lost or duplicated: every judgment row has its own assignment, every pair has distinct raters.

The clock starts only once every process is warm: started, imports done, connected, and its
progress read once (which makes the rater's shuffled queue for the pool, as a rater's first
claim in a pool does, and runs the schema's first statements on its connection); each says
so before the start signal. That start-up, what raters pay once per session (the queue once
per pool), is printed apart as ``cold (...)``, in seconds.

Target: >= 200 judgments/s with none lost on the 2-core machine.

Usage: python benchmarks/bench_judge_store.py [--per-rater 300]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _timing import cold_line

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RATERS = 10
PAIRS = 10_000


def _rater(dsn: str, name: str, n: int, ready, start, out) -> None:  # pragma: no cover - a subprocess
    from workbench.judging.store import JudgmentStore

    st = JudgmentStore(dsn)
    rater = st.rater(name)
    st.progress(rater, "bench")  # warm-up: makes the rater's queue, claims nothing
    ready.release()
    start.wait()
    lat = []
    done = 0
    while done < n:
        t = time.perf_counter()
        a = st.next_assignment(rater, "bench")
        if a is None:
            break
        st.judge(rater, a.assignment_id, a.pair_id % 3)
        lat.append((time.perf_counter() - t) * 1000)
        done += 1
    out.put((name, done, lat))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-rater", type=int, default=300)
    args = ap.parse_args()
    from workbench.engines import pg_client as pg
    from workbench.judging.store import JudgmentStore, PoolPair

    home = Path(tempfile.mkdtemp(prefix="wb-bench-judge-"))
    try:
        dsn = pg.server_dsn(home)
        st = JudgmentStore(dsn)
        t = time.perf_counter()
        st.create_pool("bench", [PoolPair(f"q{i // 10}", f"d{i}", tier=i // 1000, priority=float(-i))
                                 for i in range(PAIRS)], raters_per_pair=2)
        pool_s = time.perf_counter() - t
        for i in range(RATERS):
            st.add_rater(f"r{i}")
        ctx = mp.get_context("spawn")
        ready, start, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_rater, args=(dsn, f"r{i}", args.per_rater, ready, start, out))
                 for i in range(RATERS)]
        t = time.perf_counter()
        for p in procs:
            p.start()
        for _ in procs:  # every process started, imported, connected and warm before the clock starts
            if not ready.acquire(timeout=600):
                raise RuntimeError("a rater process did not get ready within 600 s")
        startup = time.perf_counter() - t
        t = time.perf_counter()
        start.set()
        results = [out.get(timeout=600) for _ in procs]
        wall = time.perf_counter() - t
        for p in procs:
            p.join()
        total = sum(r[1] for r in results)
        lat = sorted(x for r in results for x in r[2])
        with pg.connect(dsn) as conn:
            rows, distinct_slots = conn.execute(
                "SELECT count(*), count(DISTINCT assignment_id) FROM wb_judge.judgments").fetchone()
            dup = conn.execute("SELECT count(*) FROM (SELECT query_id, doc_id, rater_id FROM wb_judge.judgments "
                               "GROUP BY 1, 2, 3 HAVING count(*) > 1) d").fetchone()[0]
        rate = total / wall
        p95 = lat[int(0.95 * (len(lat) - 1))] if lat else float("nan")
        ok = rate >= 200 and rows == distinct_slots == total and dup == 0
        print(json.dumps({"pool_pairs": PAIRS, "pool_slots": 2 * PAIRS, "pool_create_s": round(pool_s, 2),
                          "raters": RATERS, "judgments": total, "wall_s": round(wall, 2),
                          "judgments_per_s": round(rate, 1), "round_trip_ms_p50": round(statistics.median(lat), 2),
                          "round_trip_ms_p95": round(p95, 2), "rows": rows, "distinct_slots": distinct_slots,
                          "duplicated_pairs": dup}, indent=1))
        print(f"{RATERS} raters, {total} judgments in {wall:.1f} s: {rate:.0f} judgments/s (target >= 200), "
              f"none lost: {rows == distinct_slots == total}, none duplicated: {dup == 0} -> "
              f"{'met' if ok else 'MISSED'}")
        print(cold_line(f"{RATERS} rater processes, started until all ready", startup,
                        "spawn, imports, connection, each rater's queue made"))
        return 0 if ok else 1
    finally:
        pg.remove_embedded(home)
        import shutil

        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
