"""The exported PostgreSQL statement and OpenSearch request against the workbench's lanes-then-fuse path (issue #30).

Side by side in one run, on the gita's dev and test queries (751; ``--every N`` takes every Nth), for a seed
config of ``experiments/seeds.toml`` (default ``aicharya-rrf60-ref``: MiniLM vector, full text russian and
simple, trigram, the reference lane; RRF k=60, ties by the vector cosine):

* **lanes then fuse**: what the workbench does for one query (``workbench serve`` answers one this way): each
  SQL lane's search on that query alone, one after another on their own connections, then
  :func:`workbench.eval.fusion.fuse_spec` in Python;
* **exported statement**: the function ``workbench export --format postgres`` writes, installed in a scratch
  schema and called with the same inputs (one round trip).

The query embedding is computed once per query beforehand and given to both (the application's cost, the
same either way). With ``--opensearch`` (default ``os-hybrid-7-3`` of ``experiments/mint.toml`` on
bilara-passages: min-max 0.7/0.3 of the fuzzy and k-NN lanes), the same for OpenSearch: each lane's request on
the query alone then the fusion in Python, against the exported hybrid request through its search pipeline.
Figures: p50 / p95 / mean ms per query, the ratio of the means, and whether every query's top
k was identical. Wall time on this machine with the 1-minute load average printed beside it. No target is
asserted: a report; exit 0.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_export.py [--config aicharya-rrf60-ref] [--every 1]
       [--opensearch os-hybrid-7-3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="aicharya-rrf60-ref")
    ap.add_argument("--experiment", default=str(ROOT / "experiments" / "seeds.toml"))
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--opensearch", default=None, help="a config of experiments/mint.toml to bench on OpenSearch too")
    args = ap.parse_args()

    import numpy as np
    from _cpu import loadavg

    from workbench.data import catalog
    from workbench.engines import pg_client as pg
    from workbench.eval.fusion import fuse_spec
    from workbench.experiment.cache import CandidateCache
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import Engine, lane_result
    from workbench.export import postgres
    from workbench.export.parity import percentile
    from workbench.settings import home_dir
    from workbench.text.query import clean, query_forms

    exp = load_experiment(Path(args.experiment))
    cfg = exp.configs[args.config]
    home = home_dir()
    ds = catalog.ensure(exp.datasets[0], home=home)
    engine = Engine(exp, home, False, lambda m: print(m, file=sys.stderr))
    cache = CandidateCache(home / "cache" / "candidates")
    runs = {ln: lane_result(exp.lanes[ln], ds, engine, cache, exp.depth).run for ln in cfg.lanes}  # cached lanes
    art = postgres.build(cfg, exp, ds, engine)
    lanes = {ln: engine.lane(ds, exp.lanes[ln]) for ln in cfg.lanes}
    queries = [q for q in ds.queries if q.split in ("dev", "test")][:: args.every]
    texts = {q.query_id: clean(q.text) for q in queries}
    emb = {}
    for part in art.lanes:
        if part.kind == "pgvector":
            lane = lanes[part.name]
            todo = sorted({t for t in texts.values() if t.strip()})
            vecs = np.asarray(lane.embedder.embed_queries(todo), dtype=np.float32)
            emb = {t: "[" + ",".join(repr(float(x)) for x in v) + "]" for t, v in zip(todo, vecs)}

            class Fixed:  # the lane's own embedder, answering from the vectors computed above
                model_id, dim = lane.embedder.model_id, lane.embedder.dim

                def embed_queries(self, ts):
                    # one pgvector lane per exported config: the last ``emb`` is this lane's (inputs() reads it too)
                    return np.asarray([[float(x) for x in emb[t][1:-1].split(",")] for t in ts],  # noqa: B023
                                      dtype=np.float32)

            lane.embedder = Fixed()
    ref = next((p.name for p in art.lanes if p.kind == "reference"), None)

    def inputs(q):
        out = {}
        for p in art.params:
            t = texts[q.query_id]
            out[p.name] = (t if p.name == "p_query" else [f for f in query_forms(t) if f.strip()] if p.name == "p_forms"
                           else [h.doc_id for h in runs[ref].get_hits(q.query_id)] if p.name == "p_reference"
                           else emb.get(t))
        return out

    for lane in lanes.values():  # warm: connections opened, models loaded
        lane.search(queries[:3], exp.depth)
    load0 = loadavg()
    py_ms, py_top = [], {}
    for q in queries:
        t0 = time.perf_counter()
        one = {ln: lane.search([q], exp.depth) for ln, lane in lanes.items()}
        fused = fuse_spec(one, cfg, cfg.name)
        py_ms.append((time.perf_counter() - t0) * 1000)
        py_top[q.query_id] = [h.doc_id for h in fused.get_hits(q.query_id)]
    sql_ms, same = [], 0
    schema = f"wb_bench_{os.getpid()}"
    with pg.connect(engine.dsn()) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path = "{schema}", public')
        conn.execute(art.function_sql())
        try:
            conn.execute(art.call_sql(), inputs(queries[0])).fetchall()
            for q in queries:
                a = inputs(q)
                t0 = time.perf_counter()
                rows = conn.execute(art.call_sql(), a).fetchall()
                sql_ms.append((time.perf_counter() - t0) * 1000)
                same += [d for d, _s in rows] == py_top[q.query_id]
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    load1 = loadavg()
    print(f"config {cfg.name} on {ds.name}: {len(queries)} dev+test queries, load average {load0:.2f} → {load1:.2f}, "
          f"{os.cpu_count()} cores")
    print(f"{'path':<22}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for label, ms in (("lanes then fuse", py_ms), ("exported statement", sql_ms)):
        print(f"{label:<22}{percentile(ms, 50):>10.1f}{percentile(ms, 95):>10.1f}{statistics.fmean(ms):>10.1f}")
    print(f"mean ratio exported / lanes-then-fuse: {statistics.fmean(sql_ms) / statistics.fmean(py_ms):.2f}x; "
          f"identical top {cfg.top_k}: {same}/{len(queries)}")
    if args.opensearch:
        bench_opensearch(args.opensearch, args.every)
    return 0


def bench_opensearch(config: str, every: int) -> None:
    """The OpenSearch half (see the module docstring)."""
    import numpy as np
    from _cpu import loadavg

    from workbench.data import catalog
    from workbench.eval.fusion import fuse_spec
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import Engine
    from workbench.export.opensearch import build_opensearch_export
    from workbench.export.parity import percentile
    from workbench.settings import home_dir

    exp = load_experiment(ROOT / "experiments" / "mint.toml")
    cfg = exp.configs[config]
    home = home_dir()
    ds = catalog.ensure(exp.datasets[0], home=home)
    engine = Engine(exp, home, False, lambda m: print(m, file=sys.stderr))
    lanes = {ln: engine.lane(ds, exp.lanes[ln]) for ln in cfg.lanes}
    first = next(iter(lanes.values()))
    art = build_opensearch_export(cfg.name, lanes, cfg, first.es, first.index, depth=exp.depth)
    queries = [q for q in ds.queries if q.split in ("dev", "test")][::every]
    emb = next((lane.embedder for lane in lanes.values() if lane.embedder is not None), None)
    if emb is not None:  # embed once, for both paths
        vecs = {q.query_id: v for q, v in zip(queries, np.asarray(emb.embed_queries([first.clean(q.text)
                                                                                    for q in queries])))}
        byid = {first.clean(q.text): vecs[q.query_id] for q in queries}

        class Fixed:
            model_id, dim = emb.model_id, emb.dim

            def embed_queries(self, ts):
                return np.asarray([byid[t] for t in ts], dtype=np.float32)

        for lane in lanes.values():
            if lane.embedder is not None:
                lane.embedder = Fixed()
        art.embedder = Fixed()
    for lane in lanes.values():
        lane.search(queries[:3], exp.depth)
    art.search(queries[:3])
    load0 = loadavg()
    py_ms, os_ms, same = [], [], 0
    for q in queries:
        t0 = time.perf_counter()
        fused = fuse_spec({ln: lane.search([q], exp.depth) for ln, lane in lanes.items()}, cfg, cfg.name)
        py_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        run, _lat = art.search([q])
        os_ms.append((time.perf_counter() - t0) * 1000)
        same += [h.doc_id for h in run.get_hits(q.query_id)][:10] == [h.doc_id for h in fused.get_hits(q.query_id)][:10]
    print(f"\nconfig {cfg.name} on {ds.name} (OpenSearch): {len(queries)} dev+test queries, load average "
          f"{load0:.2f} → {loadavg():.2f}")
    print(f"{'path':<22}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for label, ms in (("lanes then fuse", py_ms), ("exported request", os_ms)):
        print(f"{label:<22}{percentile(ms, 50):>10.1f}{percentile(ms, 95):>10.1f}{statistics.fmean(ms):>10.1f}")
    print(f"mean ratio exported / lanes-then-fuse: {statistics.fmean(os_ms) / statistics.fmean(py_ms):.2f}x; "
          f"identical top 10: {same}/{len(queries)}")


if __name__ == "__main__":
    sys.exit(main())
