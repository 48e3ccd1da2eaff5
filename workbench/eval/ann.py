"""Approximate search measured against exact search: a vector lane's recall of its exact twin's ranking, and
its under-returns, per filter selectivity.

An HNSW lane returns an approximation of the exact nearest neighbours. Under a filter, pgvector applies the
filter after the graph scan, so a selective filter can leave a query with fewer rows than asked for unless
``hnsw.iterative_scan`` scans on (OpenSearch's lucene engine filters during the search instead). Two measures
per query, pure functions of the two runs (the lane's and its exact twin's: the same lane with
``exact = true``, :meth:`workbench.registry.RetrieverKind.exact_twin`):

* **ANN recall@k**: ``|top_k(lane) ∩ top_k(exact)| / |top_k(exact)|``, the share of the exact top ``k`` the lane
  found (the ANN-benchmarks definition of recall, over document ids; ``k`` cut by what the filter admits, so a
  filter admitting 3 documents asks for those 3). NaN where the exact scan returned nothing (an empty query, or a
  filter admitting no document).
* **under-return**: the lane returned fewer documents than the exact scan did at the same depth, so fewer than
  ``min(depth, admitted)``: the thin slate AICharya's relaxed iterative scan exists to prevent.

:func:`ann_frame` puts both per query beside the query's selectivity bucket
(:data:`workbench.io.facets.SELECTIVITY_BUCKETS`; ``unfiltered`` for a query without a filter) and
:func:`ann_summary` aggregates them per bucket, with the lane's latency on those queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

#: The bucket of a query without a filter (beside :data:`workbench.io.facets.SELECTIVITY_BUCKETS`' labels).
UNFILTERED = "unfiltered"


def ann_recall(lane_hits: Sequence[Any], exact_hits: Sequence[Any], k: int) -> float:
    """``|top_k(lane_hits) ∩ top_k(exact_hits)| / |top_k(exact_hits)|`` over doc ids (module docstring); NaN when
    ``exact_hits`` is empty.

    Args:
        lane_hits, exact_hits: ranked hits (objects with ``doc_id``), best first.
        k: the cut-off, >= 1.

    Raises:
        ValueError: ``k`` below 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    truth = {h.doc_id for h in exact_hits[:k]}
    if not truth:
        return float("nan")
    return len(truth & {h.doc_id for h in lane_hits[:k]}) / len(truth)


def ann_frame(lane_run: Any, exact_run: Any, queries: Sequence[Any], admitted: Mapping[str, int], n_docs: int,
              k: int = 10) -> pd.DataFrame:
    """One row per query of ``queries`` with text: ``query_id``, ``selectivity`` (its bucket, or
    :data:`UNFILTERED`), ``admitted`` (documents its filter admits; ``n_docs`` without one), ``ann_recall``
    (:func:`ann_recall` at ``k``), ``returned``, ``exact_returned`` and ``short`` (``returned < exact_returned``).

    Args:
        lane_run, exact_run: :class:`workbench.run.Run` of the lane and of its exact twin at the same depth.
        admitted: query id → the number of documents its filter admits (filtered queries only).
        n_docs: the corpus size (a filter's share of it picks the bucket).
    """
    from workbench.io.facets import selectivity_bucket

    rows = []
    for q in queries:
        if not (q.text or "").strip():
            continue
        got, truth = lane_run.get_hits(q.query_id), exact_run.get_hits(q.query_id)
        n_admitted = admitted.get(q.query_id, n_docs) if q.filter else n_docs
        rows.append({"query_id": q.query_id,
                     "selectivity": selectivity_bucket(n_admitted / max(n_docs, 1)) if q.filter else UNFILTERED,
                     "admitted": n_admitted, "ann_recall": ann_recall(got, truth, k), "returned": len(got),
                     "exact_returned": len(truth), "short": len(got) < len(truth)})
    return pd.DataFrame(rows, columns=["query_id", "selectivity", "admitted", "ann_recall", "returned",
                                       "exact_returned", "short"])


def ann_summary(frame: pd.DataFrame, latency_ms: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per selectivity bucket of ``frame`` (:func:`ann_frame`), in :data:`~workbench.io.facets.
    SELECTIVITY_BUCKETS` order then :data:`UNFILTERED`: ``n``, ``ann_recall`` (mean over queries with a
    defined recall), ``short`` (count), ``short_rate`` and, with ``latency_ms`` (query id → ms, the lane's), its
    ``p50 ms`` and ``p95 ms`` on those queries (numpy's linear percentile)."""
    from workbench.io.facets import SELECTIVITY_BUCKETS

    order = [label for _low, label in SELECTIVITY_BUCKETS] + [UNFILTERED]
    rows = []
    for label in order:
        part = frame[frame["selectivity"] == label]
        if part.empty:
            continue
        row = {"selectivity": label, "n": len(part), "ann_recall": float(part["ann_recall"].mean()),
               "short": int(part["short"].sum()), "short_rate": float(part["short"].mean())}
        if latency_ms is not None:
            lat = pd.Series([latency_ms[q] for q in part["query_id"] if q in latency_ms], dtype=float)
            row["p50 ms"] = float(lat.quantile(0.5)) if len(lat) else float("nan")
            row["p95 ms"] = float(lat.quantile(0.95)) if len(lat) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)
