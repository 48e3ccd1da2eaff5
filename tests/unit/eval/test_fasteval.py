"""The in-memory evaluator gives exactly what fusion.fuse + evaluate (ir_measures) give.

Synthetic lanes with many ties (scores drawn from a few values, documents shared between
lanes), graded qrels with unretrieved relevant documents, queries judged only 0, and
queries without judgments: every fusion method and parameter, compared per query to 1e-9.
"""

from __future__ import annotations

import random

import pytest

from workbench.eval.evaluate import evaluate
from workbench.eval.fasteval import CandidateMatrix, supported
from workbench.eval.fusion import FusionSpec, fuse
from workbench.run import Hit, Run
from workbench.types import Qrel, Query

MEASURES = ["R@5", "R@10", "R@20", "P@5", "RR@10", "nDCG@10", "nDCG@20", "Judged@10"]


def _fixture(seed: int):
    rnd = random.Random(seed)
    pool = [f"d{i:03d}" for i in range(60)]
    qids = [f"q{i:02d}" for i in range(40)]
    runs = {}
    for lane in ("a", "b", "c"):
        rows = {}
        for q in qids:
            n = rnd.choice([0, 3, 10, 25, 40])
            docs = rnd.sample(pool, n)
            scale = {"a": 1.0, "b": 17.0, "c": 0.01}[lane]
            rows[q] = [Hit(d, rnd.choice([1, 2, 2, 3, 5]) * scale) for d in docs]
        runs[lane] = Run(rows, lane)
    qrels = []
    for q in qids[:36]:
        judged = rnd.sample(pool, 12)
        grades = [0] * 4 + [1] * 5 + [2] * 3 if q != "q05" else [0] * 12
        qrels += [Qrel(q, d, g) for d, g in zip(judged, grades)]
    queries = [Query(q, q, "term" if i % 2 else "paraphrase", "en", "train") for i, q in enumerate(qids)]
    return runs, qrels, queries


SETTINGS = [
    FusionSpec(("a", "b", "c")),
    FusionSpec(("a", "b", "c"), k=1.0, weights={"a": 2.0, "b": 0.5, "c": 0.0}),
    FusionSpec(("a", "b"), k=10, depth={"a": 5, "b": 20}, top_k=12),
    FusionSpec(("c", "a"), depth=7, min_score=0.02, tiebreak_lane="a"),
    FusionSpec(("a", "b", "c"), method="weighted", weights={"a": 0.7, "b": 0.3, "c": 0.1}),
    FusionSpec(("a", "b", "c"), method="weighted", norm="zscore", tiebreak_lane="b"),
    FusionSpec(("a", "b", "c"), method="weighted", weights={"a": 0.7, "b": 0.3, "c": 1}, min_score=0.5, top_k=8),
    # raw: a sum of boosted clauses (OpenSearch bool.should), the lanes' own scores weighted
    FusionSpec(("a", "b", "c"), method="weighted", norm="raw", weights={"a": 0.7, "b": 0.3, "c": 1.2}, depth=15),
    FusionSpec(("a", "b", "c"), method="combsum", depth=15),
    FusionSpec(("b", "c"), method="combmnz", tiebreak_lane="c"),
    FusionSpec(("b",), method="none"),
    FusionSpec(("c",), method="none", min_score=0.02, top_k=6),
    # ranx's methods: the slow path (the lanes' runs rebuilt from the arrays, fused by ranx)
    FusionSpec(("a", "b", "c"), method="isr", depth=15, tiebreak_lane="b"),
    FusionSpec(("a", "b"), method="bordafuse", min_score=30.0, top_k=8),
    FusionSpec(("a", "b", "c"), method="w_bordafuse", weights={"a": 0.7, "b": 0.3, "c": 1.0}),
    FusionSpec(("b", "c"), method="combmed", depth={"b": 5}),
    FusionSpec(("c",), method="log_isr"),
    # a pinned lane (fusion.pin): lane a's scores of 2 or more stand for a reference lane's exact answers
    FusionSpec(("a", "b", "c"), pin_lane="a", min_score=0.03, top_k=15),
    FusionSpec(("b", "a"), method="weighted", norm="zscore", pin_lane="a", tiebreak_lane="b"),
]


def _reference(runs, qrels, queries, s: FusionSpec):
    lane_runs = {ln: runs[ln] for ln in s.lanes}
    if s.method == "none":
        run = lane_runs[s.lanes[0]]
        if s.min_score is not None:
            run = Run({q: [h for h in hits if h.score >= s.min_score] for q, hits in run.items()})
        run = Run({q: hits[: s.top_k] for q, hits in run.items()})
    else:
        params = {"weights": s.weights, "depth": s.depth, "min_score": s.min_score, "top_k": s.top_k,
                  "tiebreak_lane": s.tiebreak_lane}
        if s.method == "rrf":
            params["k"] = s.k
        if s.method == "weighted":
            params["norm"] = s.norm
        if s.pin_lane:
            params["pin_lane"] = s.pin_lane
        run = fuse(lane_runs, s.method, **params)
    return evaluate(run, qrels, queries, MEASURES).per_query.set_index("query_id")


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("i", range(len(SETTINGS)))
def test_in_memory_values_equal_fuse_plus_ir_measures(seed, i):
    runs, qrels, queries = _fixture(seed)
    s = SETTINGS[i]
    m = CandidateMatrix(runs, qrels, [q.query_id for q in queries])
    got = m.evaluate(s, MEASURES)
    want = _reference(runs, qrels, queries, s)
    assert list(want.index) == m.query_ids  # the same judged queries, in the same order
    for meas in MEASURES:
        for qid, value in zip(m.query_ids, got[meas]):
            assert value == pytest.approx(want.loc[qid, meas], abs=1e-9), (meas, qid)


def test_the_fused_run_is_the_same_ranking(seed=4):
    runs, qrels, queries = _fixture(seed)
    m = CandidateMatrix(runs, qrels, [q.query_id for q in queries])
    for s in SETTINGS[:9]:
        params = {"weights": s.weights, "depth": s.depth, "min_score": s.min_score, "top_k": s.top_k,
                  "tiebreak_lane": s.tiebreak_lane}
        if s.method == "rrf":
            params["k"] = s.k
        if s.method == "weighted":
            params["norm"] = s.norm
        want = fuse({ln: runs[ln] for ln in s.lanes}, s.method, **params)
        got = m.run(s)
        for q in m.query_ids:
            assert [h.doc_id for h in got[q]] == [h.doc_id for h in want.get_hits(q)], (s, q)
            assert [h.score for h in got[q]] == pytest.approx([h.score for h in want.get_hits(q)], abs=1e-12)


def test_unjudged_queries_are_dropped_and_zero_judged_ones_score_zero():
    runs, qrels, queries = _fixture(5)
    m = CandidateMatrix(runs, qrels, [q.query_id for q in queries])
    assert "q39" not in m.query_ids and "q05" in m.query_ids
    vals = m.evaluate(SETTINGS[0], ["R@10", "nDCG@10"])
    i = m.query_ids.index("q05")
    assert vals["R@10"][i] == 0.0 and vals["nDCG@10"][i] == 0.0


def test_supported_measures():
    assert all(supported(x) for x in ["R@10", "P@5", "RR@10", "MRR@10", "nDCG@10", "Judged@10"])
    assert not any(supported(x) for x in ["AP@100", "R(rel=2)@10", "R@0", "Success@10"])
    m = CandidateMatrix(*_fixture(1)[:2], ["q00"])
    with pytest.raises(ValueError, match="not computed in memory"):
        m.evaluate(SETTINGS[0], ["AP@100"])
