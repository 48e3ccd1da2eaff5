"""Postgres and OpenSearch lanes on real data: HNSW build, ANN recall against exact search, per-lane latency.

Measures, on the 2-core machine (issue #3's targets):

* HNSW build time for the MN passages (512 tokens, 50 overlap) with MiniLM embeddings;
* the vector lane's recall@10 against an exact scan at ef_search 10..200 (target: >= 0.99
  at some ef_search <= 200), and that no lane returns fewer rows than asked;
* latency p50 / p95 / mean (ms per query) of every lane of experiments/seeds.toml and of
  the OpenSearch lanes of experiments/mint.toml, in one table (issue #4), warm: each lane
  answers one query first, untimed for them (its connection opened, the embedding model's
  first call, the server's plans and caches), and that first search's wall time is the
  table's ``first ms`` column, the cold figure a user pays once per lane and process;
* OpenSearch: the semantic lane's recall@10 against the same exact scan, and bulk
  indexing throughput (documents/s with and without the embedding time) per dataset.

Every latency is measured warm in the same way, the ef_search rows included (one untimed
query per lane first).

OpenSearch: WORKBENCH_OS_URL, else the local node (started when needed); --no-opensearch skips it.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_lanes.py [--queries 300] [--embedder minilm|hash]
Exits 1 when the recall target is missed or a lane returns fewer rows than asked.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from _timing import timed_call


def warm_up(lane, queries, k: int) -> float:
    """Search the first query with text once, untimed for the lane's latencies (its connection, the
    embedding model's first call, the server's plans and caches); return that search's wall time in ms."""
    first = next((q for q in queries if (q.text or "").strip()), queries[0])
    secs, _ = timed_call(lane.search, [first], k)
    return secs * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=300, help="queries per measurement (the first N of the set)")
    ap.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    ap.add_argument("--m", type=int, default=32, help="HNSW m (the experiments use 32)")
    ap.add_argument("--ef-construction", type=int, default=128, help="HNSW ef_construction (the experiments use 128)")
    ap.add_argument("--datasets", nargs="+", default=["gita", "bilara-passages", "cst4-mn"],
                    help="datasets for the latency table (bilara-segments works too, after its long first embedding)")
    ap.add_argument("--skip-latency", action="store_true", help="only the build and the recall table")
    ap.add_argument("--no-opensearch", action="store_true", help="Postgres lanes only")
    args = ap.parse_args()

    import numpy as np

    from retrievers.fulltext import FullTextLane
    from retrievers.pgvector import VectorLane
    from retrievers.reference import ReferenceLane
    from retrievers.trigram import TrigramLane
    from workbench.data import catalog
    from workbench.embedding.embedders import make_embedder
    from workbench.engines import pg_client as pg
    from workbench.engines.pg_index import index_dataset
    from workbench.eval.evaluate import latency_summary

    spec = {"kind": "sentence-transformers", "model": "all-MiniLM-L6-v2"} if args.embedder == "minilm" \
        else {"kind": "hash", "dim": 64}
    embedder = make_embedder(spec, progress=sys.stderr.isatty())
    defs = catalog.load_definitions()
    for name in {"bilara-passages", *args.datasets}:
        if catalog.status(name, defs) != "current":
            catalog.build(name, defs)
    dsn = pg.server_dsn()
    with pg.connect(dsn) as conn:
        pg.check_server(conn)
        pg.ensure_reader(conn)
    reader = pg.reader_dsn(dsn)

    passages = catalog.load("bilara-passages", defs)
    mn = replace(passages, name="bilara-passages-mn",
                 documents=[d for d in passages.documents if d.work_id.startswith("mn")], manifest={})
    hnsw = {"m": args.m, "ef_construction": args.ef_construction}
    print(f"# HNSW build, MN passages ({len(mn.documents):,} docs, {embedder.model_id}, m={args.m}, "
          f"ef_construction={args.ef_construction})")
    info = index_dataset(dsn, mn, embedder, **hnsw)
    if info.reused:
        print(f"index reused (built earlier: build {info.build_s:.1f} s, HNSW {info.hnsw_build_s:.2f} s, "
              f"embedding {info.embed_s:.1f} s)")
    else:
        print(f"build {info.build_s:.1f} s (embedding {info.embed_s:.1f} s, HNSW {info.hnsw_build_s:.2f} s)")

    ds = catalog.load("bilara-passages", defs)
    full = index_dataset(dsn, ds, embedder, **hnsw)
    queries = ds.queries[: args.queries]
    k = 100
    exact = VectorLane("exact", reader, full.table, embedder, exact=True).search(queries, 10)
    print(f"\n# vector lane recall@10 against exact search ({len(queries)} queries, {full.doc_count:,} passages, k=10)")
    print("# tie-aware, as ann-benchmarks counts it: an ANN hit counts when its similarity is at least the")
    print("# exact 10th similarity (minus 1e-6), so identical passages at the cut are not misses")
    print(f"{'ef_search':>9s} {'recall@10':>9s} {'by id':>7s} {'min rows':>8s} {'p50 ms':>7s} {'p95 ms':>7s}")
    ok = False
    for ef in (10, 20, 40, 80, 100, 200):
        lane = VectorLane("v", reader, full.table, embedder, ef_search=ef)
        warm_up(lane, queries, 10)
        run = lane.search(queries, 10)
        tie_aware, by_id = [], []
        for q in queries:
            ex = exact[q.query_id][:10]
            cut = ex[-1].score - 1e-6 if ex else float("inf")
            got = run[q.query_id][:10]
            tie_aware.append(sum(1 for h in got if h.score >= cut) / max(len(ex), 1))
            by_id.append(len({h.doc_id for h in got} & {h.doc_id for h in ex}) / max(len(ex), 1))
        rec = float(np.mean(tie_aware))
        rows = min(len(run[q.query_id]) for q in queries)
        lat = latency_summary(list(lane.last_latencies_ms.values()))
        ok = ok or (rec >= 0.99 and ef <= 200)
        print(f"{ef:9d} {rec:9.4f} {float(np.mean(by_id)):7.4f} {rows:8d} {lat['p50']:7.2f} {lat['p95']:7.2f}")
    os_lanes = {}
    if not args.no_opensearch:
        from retrievers.opensearch import OpenSearchLane
        from workbench.data.loaders.dpd import load_dpd
        from workbench.engines import os_client as osearch
        from workbench.engines import os_index
        from workbench.settings import data_dir

        url = osearch.cluster_url(start=True, log=lambda m: print(f"# {m}", file=sys.stderr))
        es = osearch.client(url)
        info_os = osearch.check_cluster(es, url)
        lexicon = load_dpd(data_dir(sources=("ms-dpd",)))
        print(f"\n# OpenSearch {info_os['version']} at {url}: bulk indexing (fresh index each, {os_index.BULK_DOCS} "
              "docs per request, embeddings from the cache when warm)")
        print(f"{'dataset':16s} {'docs':>7s} {'rules':>7s} {'total s':>8s} {'embed s':>8s} {'docs/s':>8s} "
              f"{'docs/s ex-embed':>15s}")
        for name in args.datasets:
            d = catalog.load(name, defs)
            pali = any(t.language == "pi" for doc in d.documents for t in doc.texts)
            bench = replace(d, name=f"bench-{name}", manifest={})
            for old in es.indices.get(index=f"wb-bench-{name}-*", ignore_unavailable=True, allow_no_indices=True):
                es.indices.delete(index=old)
            inf = os_index.index_dataset(es, url, bench, embedder, lexicon=lexicon if pali else None, **hnsw)
            ex = max(inf.build_s - inf.embed_s, 1e-9)
            print(f"{name:16s} {inf.n_docs:7,d} {inf.n_rules:7,d} {inf.build_s:8.1f} {inf.embed_s:8.1f} "
                  f"{inf.n_docs / inf.build_s:8.0f} {inf.n_docs / ex:15.0f}")
            os_lanes[name] = [OpenSearchLane(f"os_{m}", es, inf.name, m, url=url,
                                             embedder=embedder if m == "semantic" else None)
                              for m in ("fuzzy", "exact", "lemma", "page_ref", "semantic")]
            if name == "bilara-passages":
                print("\n# OpenSearch semantic lane recall@10 against the pgvector exact scan (tie-aware, as above)")
                print(f"{'ef_search':>9s} {'recall@10':>9s} {'p50 ms':>7s} {'p95 ms':>7s}")
                for ef in (10, 20, 40, 80, 100, 200):
                    lane = OpenSearchLane("s", es, inf.name, "semantic", url=url, embedder=embedder, ef_search=ef)
                    warm_up(lane, queries, 10)
                    run = lane.search(queries, 10)
                    rec = []
                    for q in queries:
                        ex10 = exact[q.query_id][:10]
                        cut = ex10[-1].score - 1e-6 if ex10 else float("inf")
                        rec.append(sum(1 for h in run[q.query_id][:10] if h.score >= cut - 1e-5) / max(len(ex10), 1))
                    lat = latency_summary(list(lane.last_latencies_ms.values()))
                    print(f"{ef:9d} {float(np.mean(rec)):9.4f} {lat['p50']:7.2f} {lat['p95']:7.2f}")
                print()
    rows_ok = True
    if args.skip_latency:
        print(f"\nrecall target (>= 0.99 at some ef_search <= 200): {'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    print(f"\n# lane latency, ms per query (k={k}, {len(queries)} queries, warm; first: the cold first search)")
    print(f"{'dataset':16s} {'engine':10s} {'lane':12s} {'p50':>7s} {'p95':>8s} {'mean':>8s} {'first':>8s}")
    for name in args.datasets:
        d = catalog.load(name, defs)
        inf = index_dataset(dsn, d, embedder, **hnsw)
        qs = d.queries[: args.queries]
        lanes = [VectorLane("vector", reader, inf.table, embedder, ef_search=100),
                 FullTextLane("fts_russian", reader, inf.table, config="russian"),
                 FullTextLane("fts_simple", reader, inf.table, config="simple"),
                 FullTextLane("fts_fold", reader, inf.table, config="wb_fold"),
                 TrigramLane("trigram", reader, inf.table, threshold=0.6),
                 ReferenceLane("reference", d.documents)]
        for lane in lanes + os_lanes.get(name, []):
            first = warm_up(lane, qs, k)
            run = lane.search(qs, k)
            lat = latency_summary(list(lane.last_latencies_ms.values()))
            engine = "opensearch" if lane.name.startswith("os_") else ("memory" if lane.name == "reference"
                                                                         else "postgres")
            print(f"{name:16s} {engine:10s} {lane.name:12s} {lat['p50']:7.2f} {lat['p95']:8.2f} {lat['mean']:8.2f} "
                  f"{first:8.2f}")
            if lane.name == "vector":
                rows_ok = rows_ok and all(len(run[q.query_id]) == min(k, inf.doc_count) for q in qs)
    if os_lanes:
        for old in es.indices.get(index="wb-bench-*", ignore_unavailable=True, allow_no_indices=True):
            es.indices.delete(index=old)
    print(f"\nrecall target (>= 0.99 at some ef_search <= 200): {'met' if ok else 'MISSED'}; "
          f"vector lane full rows: {'yes' if rows_ok else 'NO'}")
    return 0 if ok and rows_ok else 1


if __name__ == "__main__":
    sys.exit(main())
