"""Fusion: hand-computed values and properties (scale invariance, identity, tie rule)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.eval.fusion import comb, fuse, normalise, rrf, weighted
from workbench.run import Hit, Run


def ids(run: Run, q: str = "q") -> list[str]:
    return [h.doc_id for h in run[q]]


A = Run({"q": [("a", 0.9), ("b", 0.8), ("c", 0.1)]}, "vec")
B = Run({"q": [("b", 12.0), ("d", 7.0)]}, "fts")


def test_rrf_by_hand():
    fused = rrf({"vec": A, "fts": B}, k=60)
    # b: 1/(60+2) + 1/(60+1); a: 1/61; d: 1/62; c: 1/63
    got = {h.doc_id: h.score for h in fused["q"]}
    assert got["b"] == pytest.approx(1 / 62 + 1 / 61, abs=1e-15)
    assert got["a"] == pytest.approx(1 / 61, abs=1e-15)
    assert ids(fused) == ["b", "a", "d", "c"]


def test_rrf_weights_depth_min_score_top_k():
    fused = rrf({"vec": A, "fts": B}, k=1, weights={"fts": 2.0}, depth={"vec": 1})
    # vec keeps only a (1/2); fts: b 2/2 = 1.0, d 2/3
    assert [(h.doc_id, round(h.score, 12)) for h in fused["q"]] == [("b", 1.0), ("d", round(2 / 3, 12)), ("a", 0.5)]
    assert ids(rrf({"vec": A, "fts": B}, k=1, weights={"fts": 2.0}, depth=1, min_score=0.6)) == ["b"]
    assert ids(rrf({"vec": A, "fts": B}, top_k=2)) == ["b", "a"]


def test_rrf_ties_broken_by_raw_cosine_then_doc_id():
    vec = Run({"q": [("x", 0.5), ("y", 0.7)]})  # y first (0.7)
    fts = Run({"q": [("x", 3.0), ("z", 1.0)]})
    # x: 1/62 + 1/61; y: 1/61; z: 1/62 -> no tie. Build a real tie:
    v2 = Run({"q": [("y", 0.9)]})
    f2 = Run({"q": [("x", 5.0)]})
    fused = rrf({"vector": v2, "fts": f2}, tiebreak_lane="vector")
    assert ids(fused) == ["y", "x"]  # equal RRF score; y has the higher cosine
    fused = rrf({"vector": v2, "fts": f2})
    assert ids(fused) == ["x", "y"]  # no tie-break lane: doc_id ascending
    assert len(rrf({"vector": vec, "fts": fts})["q"]) == 3


def test_weighted_minmax_by_hand():
    fused = weighted({"vec": A, "fts": B}, weights={"vec": 0.3, "fts": 0.7})
    # vec minmax: a 1, b 0.875, c 0; fts minmax: b 1, d 0
    got = {h.doc_id: h.score for h in fused["q"]}
    assert got["b"] == pytest.approx(0.3 * 0.875 + 0.7 * 1.0)
    assert got["a"] == pytest.approx(0.3)
    assert got["d"] == pytest.approx(0.0) and got["c"] == pytest.approx(0.0)
    assert ids(fused)[:2] == ["b", "a"]


def test_zscore_and_constant_lists():
    assert normalise([Hit("a", 2.0), Hit("b", 2.0)], "minmax") == {"a": 1.0, "b": 1.0}
    assert normalise([Hit("a", 2.0), Hit("b", 2.0)], "zscore") == {"a": 0.0, "b": 0.0}
    z = normalise([Hit("a", 3.0), Hit("b", 1.0)], "zscore")
    assert z == {"a": 1.0, "b": -1.0}


def test_raw_weighted_sum_is_a_sum_of_boosted_clauses():
    """norm = raw: Σ w · score, as OpenSearch's bool.should of constant_score(boost 0.7) and a k-NN clause
    (boost 0.3) scores: a keyword match adds 0.7 whatever its BM25, the k-NN clause 0.3 x its score."""
    keyword = Run({"q": [("a", 1.0), ("b", 1.0), ("c", 1.0)]})  # constant_score: every match scores 1
    knn = Run({"q": [("c", 0.9), ("d", 0.8), ("a", 0.5)]})
    assert normalise(knn["q"], "raw") == {"c": 0.9, "d": 0.8, "a": 0.5}
    fused = weighted({"kw": keyword, "knn": knn}, weights={"kw": 0.7, "knn": 0.3}, norm="raw")
    got = {h.doc_id: h.score for h in fused["q"]}
    assert got == {"c": 0.7 + 0.3 * 0.9, "a": 0.7 + 0.3 * 0.5, "b": 0.7, "d": 0.3 * 0.8}
    assert ids(fused) == ["c", "a", "b", "d"]


def test_combsum_and_combmnz_by_hand():
    s = {h.doc_id: h.score for h in comb({"vec": A, "fts": B})["q"]}
    m = {h.doc_id: h.score for h in comb({"vec": A, "fts": B}, mnz=True)["q"]}
    assert s["b"] == pytest.approx(1.875) and m["b"] == pytest.approx(3.75)
    assert s["a"] == pytest.approx(1.0) and m["a"] == pytest.approx(1.0)


def test_missing_query_in_one_lane_and_inputs_untouched():
    only_a = Run({"q": [("a", 1.0)], "q2": [("z", 1.0)]})
    before = only_a.to_dict()
    fused = rrf({"x": only_a, "y": Run({"q": [("b", 1.0)]})})
    assert set(fused) == {"q", "q2"} and ids(fused, "q2") == ["z"]
    assert only_a.to_dict() == before


@pytest.mark.parametrize("call,msg", [
    (lambda: rrf({}), "at least one"),
    (lambda: rrf({"a": A}, k=0), "k must be"),
    (lambda: rrf({"a": A}, k=float("nan")), "k must be"),
    (lambda: rrf({"a": A}, weights={"zz": 1.0}), "not fused"),
    (lambda: rrf({"a": A}, weights={"a": -1.0}), ">= 0"),
    (lambda: rrf({"a": A}, depth=0), "depth"),
    (lambda: rrf({"a": A}, tiebreak_lane="v"), "tiebreak_lane"),
    (lambda: weighted({"a": A}, norm="l2"), "norm"),
    (lambda: fuse({"a": A}, "borda"), "unknown fusion method"),
])
def test_bad_parameters_raise_clear_errors(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()


# ------------------------------------------------------------ properties

docs = st.lists(st.sampled_from([f"d{i}" for i in range(12)]), unique=True, min_size=0, max_size=12)
scores = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@st.composite
def runs(draw):
    out = {}
    for q in ("q1", "q2"):
        ds = draw(docs)
        out[q] = [(d, draw(scores)) for d in ds]
    return Run(out)


@settings(max_examples=150, deadline=None)
@given(runs(), runs(), st.integers(min_value=-20, max_value=20), st.sampled_from(["linear", "exp"]))
def test_rrf_ignores_score_scale(r1, r2, exponent, kind):
    # strictly increasing maps that are exact in floating point keep every lane's order and ties
    scale = 2.0 ** exponent
    f = (lambda s: s * scale) if kind == "linear" else (lambda s: math.atan(s) * scale)
    scaled = Run({q: [Hit(h.doc_id, f(h.score)) for h in hits] for q, hits in r1.items()})
    if any(len({h.score for h in scaled[q]}) != len({h.score for h in r1[q]}) for q in r1):
        return  # the map merged two scores in floating point: not a scale change any more
    a = rrf({"x": r1, "y": r2})
    b = rrf({"x": scaled, "y": r2})
    for q in a:
        assert [h.doc_id for h in a[q]] == [h.doc_id for h in b[q]]


@settings(max_examples=150, deadline=None)
@given(runs())
def test_fusing_one_run_keeps_its_ranking(r):
    for method in ("rrf", "weighted", "combsum", "combmnz"):
        fused = fuse({"only": r}, method)
        for q in r:
            if method == "rrf":
                assert [h.doc_id for h in fused[q]] == [h.doc_id for h in r[q]], method
            else:  # normalisation may tie equal scores, which then fall back to doc_id
                got = [h.doc_id for h in fused[q]]
                assert sorted(got) == sorted(h.doc_id for h in r[q])
                fused_scores = [h.score for h in fused[q]]
                assert fused_scores == sorted(fused_scores, reverse=True)


@settings(max_examples=100, deadline=None)
@given(runs(), runs())
def test_fusion_is_deterministic_and_sorted(r1, r2):
    a = rrf({"x": r1, "y": r2}, tiebreak_lane="x")
    b = rrf({"y": r2, "x": r1}, tiebreak_lane="x")
    for q in a:
        assert [(h.doc_id, h.score) for h in a[q]] == [(h.doc_id, h.score) for h in b[q]] or \
            all(math.isclose(x.score, y.score) for x, y in zip(a[q], b[q]))
        keys = [(-h.score, -h.tiebreak, h.doc_id) for h in a[q]]
        assert keys == sorted(keys)


def test_a_document_missing_from_the_tiebreak_lane_sorts_after_one_it_retrieved():
    vec = Run({"q": [("v", -0.5)]})  # a negative cosine still beats "not retrieved"
    ref = Run({"q": [("r", 2.0)]})
    fused = rrf({"vector": vec, "reference": ref}, tiebreak_lane="vector")
    assert ids(fused) == ["v", "r"]


# ---------------------------------------------------------------- pinning a reference lane's answers

REF = Run({"q": [("c", 2.0), ("d", 1.0)]}, "ref")  # c: the addressed unit; d: inside the addressed work


def test_pin_puts_what_the_reference_names_first_in_its_order_by_hand():
    # RRF k=60: b 1/62 + 1/61, c 1/63 + 1/61, d 1/62 + 1/62, a 1/61 → b, c, d, a without pinning
    runs = {"vec": A, "fts": B, "ref": REF}
    plain = fuse(runs, "rrf")
    assert ids(plain) == ["b", "c", "d", "a"]
    pinned = fuse(runs, "rrf", pin_lane="ref")
    assert ids(pinned) == ["c", "d", "b", "a"]  # the reference lane's answers in its order, then the rest
    got = {h.doc_id: h.score for h in pinned["q"]}
    m = 1 / 62 + 1 / 61  # the query's highest fused score (b's): c m + 2, d m + 1
    assert got["c"] == pytest.approx(m + 2, abs=1e-15) and got["d"] == pytest.approx(m + 1, abs=1e-15)
    assert got["b"] == pytest.approx(m, abs=1e-15) and got["a"] == pytest.approx(1 / 61, abs=1e-15)


def test_pin_is_exempt_from_min_score_and_top_k_applies_last():
    runs = {"vec": A, "fts": B, "ref": REF}
    # d's fused score 2/62 = 0.032258 is below 0.0323, yet what a reference names is never cut; a is
    assert ids(fuse(runs, "rrf", pin_lane="ref", min_score=0.0323)) == ["c", "d", "b"]
    assert ids(fuse(runs, "rrf", pin_lane="ref", top_k=1)) == ["c"]
    assert ids(fuse(runs, "weighted", pin_lane="ref", weights={"vec": 1.0, "fts": 1.0, "ref": 0.0}))[:2] == ["c", "d"]


def test_pin_leaves_queries_the_lane_did_not_answer_and_names_a_missing_lane():
    runs = {"vec": A, "fts": B, "ref": Run({"q": []}, "ref")}
    assert fuse(runs, "rrf", pin_lane="ref")["q"] == fuse(runs, "rrf")["q"]
    with pytest.raises(ValueError, match="pin_lane 'nope' is not among the fused lanes"):
        fuse(runs, "rrf", pin_lane="nope")


def test_a_lane_floor_cuts_that_lane_before_fusion_and_its_ranks_close_up():
    """``lane_min_score``: lane a's hits below 0.5 are not fused, so d3 moves up to a's rank 2 (RRF k=0 by hand:
    d1 = 1/1 + 1/2, d3 = 1/2, d2 = 1/1 from lane b alone); the fast evaluator ranks the same."""
    from workbench.eval.fasteval import CandidateMatrix
    from workbench.eval.fusion import FusionSpec, cut_lanes, fuse_spec

    runs = {"a": Run({"q": [Hit("d1", 0.9), Hit("d2", 0.4), Hit("d3", 0.6)]}, "a"),
            "b": Run({"q": [Hit("d2", 5.0), Hit("d1", 3.0)]}, "b")}
    cut = cut_lanes(runs, {"a": 0.5})
    assert [h.doc_id for h in cut["a"]["q"]] == ["d1", "d3"] and cut["b"] is runs["b"]
    spec = FusionSpec(("a", "b"), "rrf", 1e-9, None, None, "minmax", None, 10, None, None, {"a": 0.5})
    fused = fuse_spec(runs, spec)
    assert [(h.doc_id, round(h.score, 6)) for h in fused["q"]] == [("d1", 1.5), ("d2", 1.0), ("d3", 0.5)]
    m = CandidateMatrix(runs, [("q", "d3", 1)], ["q"])
    cols, _ = m.rank(spec, 3)
    assert [m.doc_ids[0][c] for c in cols[0]] == ["d1", "d2", "d3"]
    assert fuse_spec(runs, FusionSpec(("a", "b"), "rrf", 1e-9, top_k=10))["q"][0].doc_id == "d1"
