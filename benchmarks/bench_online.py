"""Online (issue #43): what UBI logging costs ``workbench serve``, and how fast ``workbench logs import`` reads.

1. **Logging overhead.** Two ``workbench serve`` processes on the gita (a config of the reference lane alone: a
   search takes about a millisecond, so logging weighs as much as it ever will), one without a log and one with
   ``--ubi-log`` in a temporary folder, each on its own loopback port. The gita's reference queries are sent to both in turns
   (A, B, A, B…: drift hits both alike) over HTTP (``GET /search``), at concurrency 1 and 8 (threads, one
   keep-alive session each); p50 and p95 per search, and the ratio with/without. Target: p50 ratio <= 1.05.
2. **Import rate.** ``--events`` UBI events (clicks and fetches, positions 1-10) and a quarter as many queries,
   written as ``serve`` writes them (JSON lines), then read by :func:`workbench.traffic.importer.read_logs` (the
   parse and checks) and written by :func:`~workbench.traffic.importer.write_log_set` (Parquet), timed apart;
   events read per second. Target: >= 100,000 events/s for the read.

Warm: one untimed round of searches per server and one untimed import of 10,000 lines first (cold figures apart).
The load average (1 min) is printed at the start and the end.

Usage: WORKBENCH_DATA=../shared/data WORKBENCH_HOME=/tmp/bench-home python benchmarks/bench_online.py
           [--searches 400] [--events 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _timing import cold_line

ROOT = Path(__file__).resolve().parent.parent
P50_RATIO_MAX = 1.05
EVENTS_PER_S_MIN = 100_000

EXPERIMENT = 'datasets = ["gita"]\n[lanes.ref]\nkind = "reference"\n[configs.ref]\nlanes = ["ref"]\n'


def serve(exp: Path, extra: list[str], log: Path) -> tuple[str, subprocess.Popen]:
    """``workbench serve`` of config ``ref`` of ``exp`` on the gita in a process of its own on a free loopback port
    (as a team runs it: its own interpreter, its own GIL); (base URL, the process) once /health answers."""
    import requests

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve", "-e", str(exp), "-c", "ref", "-d", "gita",
                             "--port", str(port), *extra], stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if requests.get(f"{base}/health", timeout=1).ok:
                return base, proc
        except requests.RequestException:
            time.sleep(0.1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit(f"workbench serve at {base} did not answer /health; see {log}")


def latencies(bases: list[str], texts: list[str], concurrency: int) -> dict[str, list[float]]:
    """Per base, the seconds of each search of ``texts`` sent to the bases in turns, ``concurrency`` at once."""
    import requests

    local = threading.local()
    out: dict[str, list[float]] = {b: [] for b in bases}
    lock = threading.Lock()

    def one(job: tuple[str, str]) -> None:
        base, text = job
        s = getattr(local, "s", None) or requests.Session()
        local.s = s
        t = time.perf_counter()
        r = s.get(f"{base}/search", params={"q": text, "k": 10}, headers={"X-Client-Id": "bench"}, timeout=30)
        dt = time.perf_counter() - t
        if not r.ok or not r.json().get("ok"):
            raise SystemExit(f"{base}: {r.status_code} {r.text[:200]}")
        with lock:
            out[base].append(dt)

    jobs = [(b, t) for t in texts for b in bases]
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, jobs))
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def overhead(n_searches: int) -> bool:
    from workbench.data import catalog
    from workbench.settings import home_dir

    home = home_dir()
    tmp = Path(tempfile.mkdtemp(prefix="bench-online-"))
    (tmp / "e.toml").write_text(EXPERIMENT)
    t0 = time.perf_counter()
    (a, pa), (b, pb) = serve(tmp / "e.toml", [], tmp / "plain.log"), \
        serve(tmp / "e.toml", ["--ubi-log", str(tmp / "ubi")], tmp / "logged.log")
    print(cold_line("two `workbench serve` processes up", time.perf_counter() - t0, "imports, the gita's load"))
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    refs = [q.text for q in ds.queries if q.query_type == "reference" and q.text.strip()]
    texts = (refs * (n_searches // max(len(refs), 1) + 1))[:n_searches]
    try:
        return _measure(a, b, texts, tmp)
    finally:
        for proc in (pa, pb):
            proc.terminate()
            proc.wait(10)


def _measure(a: str, b: str, texts: list[str], tmp: Path) -> bool:
    latencies([a, b], texts[:50], 1)  # warm: connections, the first searches
    ok = True
    print("\n| concurrency | searches each | p50 without (ms) | p50 with (ms) | p50 ratio | p95 without (ms) | "
          "p95 with (ms) | p95 ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in (1, 8):
        got = latencies([a, b], texts, c)
        p50a, p50b = pct(got[a], 50), pct(got[b], 50)
        p95a, p95b = pct(got[a], 95), pct(got[b], 95)
        print(f"| {c} | {len(got[a])} | {p50a * 1e3:.2f} | {p50b * 1e3:.2f} | {p50b / p50a:.3f} | "
              f"{p95a * 1e3:.2f} | {p95b * 1e3:.2f} | {p95b / p95a:.3f} |")
        ok &= p50b / p50a <= P50_RATIO_MAX
    lines = sum(1 for _ in (tmp / "ubi" / "ubi_queries.jsonl").open())
    print(f"\nlogged {lines:,} searches ({(tmp / 'ubi' / 'ubi_queries.jsonl').stat().st_size / 2**20:.1f} MB); "
          f"target: p50 ratio <= {P50_RATIO_MAX} -> {'met' if ok else 'MISSED'}")
    return ok


def write_lines(folder: Path, n_events: int, seed: int = 1) -> None:
    """``n_events`` events and a quarter as many queries, as ``serve`` writes them."""
    from workbench.traffic.ubi import UbiEvent, UbiQuery

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    n_q = max(1, n_events // 4)
    t0 = 1_765_000_000.0
    with (folder / "ubi_queries.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n_q):
            hits = tuple(f"bg{rng.randint(1, 18)}.{rng.randint(1, 40)}" for _ in range(10))
            f.write(json.dumps(UbiQuery(f"q{i}", f"c{i % 997}", f"karma yoga {i % 5000}", t0 + i, hits,
                                        "workbench-serve", {"session_id": f"s{i % 3000}"}).record(),
                               ensure_ascii=False) + "\n")
    with (folder / "ubi_events.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n_events):
            pos = rng.randint(1, 10)
            f.write(json.dumps(UbiEvent("click" if i % 3 else "fetch", f"q{rng.randrange(n_q)}", f"c{i % 997}",
                                        f"s{i % 3000}", t0 + i, f"bg2.{pos}", pos, "workbench-serve").record()) + "\n")


def import_rate(n_events: int) -> bool:
    from workbench.traffic.importer import read_logs, write_log_set

    tmp = Path(tempfile.mkdtemp(prefix="bench-online-import-"))
    write_lines(tmp / "warm", 10_000)
    t, _ = time.perf_counter(), read_logs([tmp / "warm"], "warm")
    print(cold_line("first import of 12,500 lines", time.perf_counter() - t, "the imports of pyarrow and the reader"))
    write_lines(tmp / "ubi", n_events)
    size = sum(p.stat().st_size for p in (tmp / "ubi").iterdir()) / 2**20
    t = time.perf_counter()
    queries, events, report = read_logs([tmp / "ubi"], "bench")
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    write_log_set(tmp / "home" / "logs" / "bench", queries, events, report)
    write_s = time.perf_counter() - t
    lines = report.lines
    rate = len(events) / read_s
    print(f"\nimport of {lines:,} lines ({len(events):,} events, {len(queries):,} queries, {size:.0f} MB): read "
          f"{read_s:.2f} s ({lines / read_s:,.0f} lines/s, {rate:,.0f} events/s), Parquet {write_s:.2f} s; "
          f"target: >= {EVENTS_PER_S_MIN:,} events/s -> {'met' if rate >= EVENTS_PER_S_MIN else 'MISSED'}")
    return rate >= EVENTS_PER_S_MIN


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--searches", type=int, default=400, help="searches per server and concurrency")
    ap.add_argument("--events", type=int, default=200_000, help="UBI events to import")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    ok = overhead(args.searches)
    ok &= import_rate(args.events)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
