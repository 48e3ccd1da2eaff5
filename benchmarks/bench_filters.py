"""Filtered HNSW search in pgvector: latency and recall against the exact filtered scan, by selectivity and by
``hnsw.iterative_scan`` / ``ef_search`` / ``max_scan_tuples`` (issue #31).

On the bilara passages (1,846, MiniLM, HNSW m 32 / ef_construction 128, as ``experiments/filters.toml``), the
same queries under filters of the corpus's own structure: a collection (MN 45 %, DN 26 %, Dhp 23 %, SN 56 6 %),
and hand-picked passage sets of 1 % and 0.5 %. For each setting and filter: recall@10 of the HNSW answer against
the exact filtered scan (tie-aware, as ann-benchmarks counts it), the under-return rate (queries answered with
fewer than ``min(k, admitted)`` rows), and latency p50 / p95 (ms per query, warm), all in one run with the load
average printed, so the rows compare with each other.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_filters.py [--queries 200] [--k 10]
"""

from __future__ import annotations

import argparse
import os
import sys

from _timing import timed_call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200, help="queries per measurement (paraphrases and terms)")
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()

    import numpy as np

    from retrievers.pgvector import VectorLane
    from workbench.data import catalog
    from workbench.embedding.embedders import make_embedder
    from workbench.engines import pg_client as pg
    from workbench.engines.pg_index import index_dataset
    from workbench.eval.evaluate import latency_summary
    from workbench.io.facets import parse_filter
    from workbench.types import Query

    defs = catalog.load_definitions()
    ds = catalog.ensure("bilara-passages", defs)
    embedder = make_embedder({"kind": "sentence-transformers", "model": "all-MiniLM-L6-v2"}, progress=False)
    dsn = pg.server_dsn()
    with pg.connect(dsn) as conn:
        pg.check_server(conn)
        pg.ensure_reader(conn)
    reader = pg.reader_dsn(dsn)
    info = index_dataset(dsn, ds, embedder, m=32, ef_construction=128)
    base = [q for q in ds.queries if q.query_type in ("paraphrase", "term")][: args.queries]
    ids = [d.doc_id for d in ds.documents]
    filters = {
        "MN (45%)": {"collection": "mn"}, "DN (26%)": {"collection": "dn"}, "Dhp (23%)": {"collection": "dhp"},
        "SN 56 (6%)": {"collection": "sn56"}, "1% (18 passages)": {"doc_id": {"$in": ids[::100][:18]}},
        "0.5% (9 passages)": {"doc_id": {"$in": ids[::200][:9]}},
    }
    index = ds.facet_index
    settings = [("off", 40, 20000), ("off", 200, 20000), ("strict_order", 40, 20000), ("relaxed_order", 40, 20000),
                ("relaxed_order", 40, 1000), ("relaxed_order", 200, 20000)]
    k = args.k
    print(f"# filtered HNSW on bilara-passages ({info.doc_count:,} passages, {embedder.model_id}), {len(base)} "
          f"queries, k={k}; load average {os.getloadavg()[0]:.2f} at start")
    print(f"{'filter':18s} {'iterative_scan':14s} {'ef':>4s} {'max_scan':>8s} {'recall@10':>9s} {'short':>6s} "
          f"{'p50 ms':>7s} {'p95 ms':>7s}")
    for label, raw in filters.items():
        flt = parse_filter(raw)
        admitted = len(index.admitted(flt.text))
        qs = [Query(q.query_id, q.text, q.query_type, q.language, q.split, q.group, flt.text) for q in base]
        exact = VectorLane("exact", reader, info, embedder, exact=True).search(qs, k)
        for it, ef, mst in settings:
            lane = VectorLane("v", reader, info, embedder, iterative_scan=it, ef_search=ef, max_scan_tuples=mst)
            timed_call(lane.search, qs[:1], k)  # warm: connection, plans, the model's first call
            run = lane.search(qs, k)
            recall, short = [], 0
            for q in qs:
                ex = exact[q.query_id][:k]
                cut = ex[-1].score - 1e-6 if ex else float("inf")
                got = run[q.query_id][:k]
                recall.append(sum(1 for h in got if h.score >= cut) / max(len(ex), 1))
                short += len(got) < min(k, admitted)
            lat = latency_summary(list(lane.last_latencies_ms.values()))
            print(f"{label:18s} {it:14s} {ef:4d} {mst:8d} {float(np.mean(recall)):9.4f} {short / len(qs):6.1%} "
                  f"{lat['p50']:7.2f} {lat['p95']:7.2f}")
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
