"""Evaluation: hand-computed measure values, ties in the run's order, missing and
unjudged queries, grouping, latency, measure parsing, and ranx as a second engine.

Hand computations follow trec_eval: ranks from 1, DCG discount log2(rank + 1), gain =
the grade, a document is relevant for binary measures when its grade is >= 1.
"""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.eval.evaluate import (
    DEFAULT_MEASURES,
    EvalResult,
    cross_check,
    evaluate,
    latency_summary,
    parse_measures,
)
from workbench.run import Hit, Run
from workbench.types import Qrel, Query


def Q(qid: str, query_type: str = "term", split: str = "test", language: str = "en") -> Query:
    return Query(qid, f"text of {qid}", query_type, language, split, qid)


def ranked(*doc_ids: str) -> list[tuple[str, float]]:
    """Hits in the given order (distinct, decreasing scores)."""
    return [(d, float(len(doc_ids) - i)) for i, d in enumerate(doc_ids)]


# qrels {q1: d1=2, d2=1, d5=0}; run q1: [d3, d1, d4, d2]
Q1_QRELS = [Qrel("q1", "d1", 2), Qrel("q1", "d2", 1), Qrel("q1", "d5", 0)]
Q1_RUN = {"q1": ranked("d3", "d1", "d4", "d2")}


# ---------------------------------------------------------------------------------------
# Hand-computed values
# ---------------------------------------------------------------------------------------


def test_hand_computed_single_query():
    res = evaluate(Run(Q1_RUN, "r"), Q1_QRELS, [Q("q1")])
    row = res.per_query.iloc[0]
    # Relevant (grade >= 1): d1 (rank 2), d2 (rank 4); d5 is judged 0, not retrieved.
    # R@k = 2 relevant retrieved / 2 relevant = 1 for every k >= 4.
    for k in (5, 10, 20, 100):
        assert row[f"R@{k}"] == pytest.approx(1.0)
    # P@5 = 2 relevant in the top 5 / 5 (the ranking has only 4; trec_eval divides by k).
    assert row["P@5"] == pytest.approx(2 / 5)
    # RR@10 = 1 / rank of the first relevant (d1 at rank 2).
    assert row["RR@10"] == pytest.approx(1 / 2)
    # nDCG@10: DCG = 2/log2(2+1) + 1/log2(4+1); ideal = [2, 1, 0] -> 2/log2(2) + 1/log2(3).
    ndcg = (2 / math.log2(3) + 1 / math.log2(5)) / (2 / math.log2(2) + 1 / math.log2(3))
    assert row["nDCG@10"] == pytest.approx(ndcg, abs=1e-12)
    assert ndcg == pytest.approx(0.6433224083306327, abs=1e-12)
    # Judged@10 (ir_measures): judged docs in the top 10 / min(10, ranking length)
    # = {d1, d2} / 4 = 0.5 (d3, d4 unjudged). Not / 10.
    assert row["Judged@10"] == pytest.approx(2 / 4)
    assert res.overall["nDCG@10"] == pytest.approx(ndcg, abs=1e-12)
    assert res.unjudged_queries == 0 and res.empty_queries == 0 and res.warnings == ()


def test_per_query_table_shape():
    res = evaluate(Run(Q1_RUN), Q1_QRELS, [Q("q1", "paraphrase", "dev", "ru")])
    assert isinstance(res, EvalResult)
    assert list(res.per_query.columns) == ["query_id", "query_type", "split", "language", "script", *DEFAULT_MEASURES]
    assert res.per_query.iloc[0][["query_id", "query_type", "split", "language"]].tolist() == ["q1", "paraphrase", "dev", "ru"]


def test_per_query_table_names_the_script_of_each_query():
    qs = [Query(f"q{i}", text, "term", "pi", "test") for i, text in
          enumerate(["saṅkhārā", "sankhara", "санкхара", "सङ्खारा", "BG 2.47", "2.47"])]
    qrels = [Qrel(q.query_id, "d1", 1) for q in qs]
    res = evaluate(Run({q.query_id: [("d1", 1.0)] for q in qs}), qrels, qs)
    assert res.per_query["script"].tolist() == ["IAST", "ASCII", "Cyrillic", "Devanagari", "ASCII", "none"]
    assert res.aggregate("script").loc["Cyrillic", "n"] == 1
    assert all(res.per_query[m].dtype == np.float64 for m in DEFAULT_MEASURES)
    assert res.measures == DEFAULT_MEASURES
    assert list(res.overall) == list(DEFAULT_MEASURES)


def test_grade_zero_is_judged_but_not_relevant():
    # qz: d1=0, d2=1; run [d1, d2, d3]
    qrels = [Qrel("qz", "d1", 0), Qrel("qz", "d2", 1)]
    res = evaluate(Run({"qz": ranked("d1", "d2", "d3")}), qrels, [Q("qz")])
    row = res.per_query.iloc[0]
    assert row["RR@10"] == pytest.approx(1 / 2)  # d1 (grade 0) is not a hit; d2 at rank 2
    assert row["P@5"] == pytest.approx(1 / 5)
    assert row["R@5"] == pytest.approx(1.0)
    assert row["nDCG@10"] == pytest.approx((1 / math.log2(3)) / 1.0)  # ideal: 1/log2(2)
    assert row["Judged@10"] == pytest.approx(2 / 3)  # d1 and d2 judged of 3 returned


def test_query_with_only_grade_zero_is_judged_and_scores_zero():
    qrels = Q1_QRELS + [Qrel("q0", "d1", 0)]
    res = evaluate(Run({**Q1_RUN, "q0": ranked("d1", "d9")}), qrels, [Q("q1"), Q("q0")])
    assert res.unjudged_queries == 0 and res.n == 2
    row = res.per_query.set_index("query_id").loc["q0"]
    for m in ("R@10", "P@5", "RR@10", "nDCG@10"):
        assert row[m] == 0.0
    assert row["Judged@10"] == pytest.approx(1 / 2)


@pytest.mark.parametrize("q2_hits", [None, []], ids=["missing", "empty"])
def test_missing_query_scores_zero_and_counts_unjudged_excluded(q2_hits):
    rows = dict(Q1_RUN)
    if q2_hits is not None:
        rows["q2"] = q2_hits
    rows["q3"] = ranked("d1")  # q3 has no judgment at all
    qrels = Q1_QRELS + [Qrel("q2", "d7", 1)]
    res = evaluate(Run(rows, "lane"), qrels, [Q("q1"), Q("q2"), Q("q3")])
    assert res.per_query["query_id"].tolist() == ["q1", "q2"]
    q2 = res.per_query.set_index("query_id").loc["q2"]
    assert all(q2[m] == 0.0 for m in DEFAULT_MEASURES)
    # Means over q1 and q2: q1 R@5 = 1, q2 = 0 -> 0.5; q1 RR@10 = 1/2 -> 0.25; q1 P@5 = 0.4 -> 0.2.
    assert res.overall["R@5"] == pytest.approx(0.5)
    assert res.overall["RR@10"] == pytest.approx(0.25)
    assert res.overall["P@5"] == pytest.approx(0.2)
    assert res.unjudged_queries == 1 and res.unjudged_query_ids == ("q3",)
    assert res.empty_queries == 1 and res.empty_query_ids == ("q2",)
    assert len(res.warnings) == 2
    assert "q3" in res.warnings[0] and "no judgment" in res.warnings[0]
    assert "q2" in res.warnings[1] and "lane" in res.warnings[1]


def test_run_and_qrels_outside_the_query_set_are_ignored():
    rows = {**Q1_RUN, "other": ranked("d1")}
    qrels = Q1_QRELS + [Qrel("other", "d1", 2)]
    res = evaluate(Run(rows), qrels, [Q("q1")])
    assert res.per_query["query_id"].tolist() == ["q1"]
    assert res.overall["RR@10"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------
# Ties: the measures see the run's written order, not their own
# ---------------------------------------------------------------------------------------

TIE_QRELS = [Qrel("qt", "d1", 0), Qrel("qt", "d2", 1)]
TIE_MEASURES = ["P@1", "RR@10", "nDCG@10"]


def test_tie_is_evaluated_in_doc_id_ascending_order():
    run = Run({"qt": [("d2", 1.0), ("d1", 1.0)]})
    assert [h.doc_id for h in run["qt"]] == ["d1", "d2"]  # the written rule: doc_id asc
    row = evaluate(run, TIE_QRELS, [Q("qt")], TIE_MEASURES).per_query.iloc[0]
    # Our order [d1 (grade 0), d2 (grade 1)]: P@1 = 0, RR = 1/2, nDCG = (1/log2(3)) / 1.
    assert row["P@1"] == 0.0
    assert row["RR@10"] == pytest.approx(0.5)
    assert row["nDCG@10"] == pytest.approx(1 / math.log2(3))
    # Given the raw tied scores, trec_eval (pytrec_eval) breaks the tie by doc_id
    # descending -> [d2, d1] -> P@1 = 1, nDCG = 1: the hazard evaluate() avoids.
    raw = {(str(m.measure)): m.value for m in ir_measures.iter_calc(
        parse_measures(TIE_MEASURES), {"qt": {"d1": 0, "d2": 1}}, run.to_dict())}
    assert raw["P@1"] == 1.0 and raw["nDCG@10"] == pytest.approx(1.0)


def test_tiebreak_field_flips_the_order_and_rr_follows():
    # Same scores; the tiebreak puts d2 first: [d2 (grade 1), d1] -> RR = 1, P@1 = 1, nDCG = 1.
    run = Run({"qt": [Hit("d1", 1.0, tiebreak=0.0), Hit("d2", 1.0, tiebreak=0.5)]})
    assert [h.doc_id for h in run["qt"]] == ["d2", "d1"]
    row = evaluate(run, TIE_QRELS, [Q("qt")], TIE_MEASURES).per_query.iloc[0]
    assert row["RR@10"] == pytest.approx(1.0)
    assert row["P@1"] == 1.0
    assert row["nDCG@10"] == pytest.approx(1.0)
    # ir_measures' RR on the raw scores ignores the tiebreak (doc_id asc) -> 1/2.
    raw = ir_measures.calc_aggregate(parse_measures(["RR@10"]), {"qt": {"d1": 0, "d2": 1}}, run.to_dict())
    assert list(raw.values()) == [pytest.approx(0.5)]


def test_ties_cannot_reorder_a_long_ranking():
    # 30 docs all with score 0: our order is doc_id ascending (d00 .. d29); the only
    # relevant doc d07 is at rank 8 -> RR@10 = 1/8, R@5 = 0, R@10 = 1.
    docs = [f"d{i:02d}" for i in range(30)]
    run = Run({"q": [(d, 0.0) for d in reversed(docs)]})
    row = evaluate(run, [Qrel("q", "d07", 1)], [Q("q")], ["RR@10", "R@5", "R@10"]).per_query.iloc[0]
    assert row["RR@10"] == pytest.approx(1 / 8)
    assert row["R@5"] == 0.0 and row["R@10"] == 1.0


# ---------------------------------------------------------------------------------------
# Grouping
# ---------------------------------------------------------------------------------------


def _four_queries() -> EvalResult:
    queries = [Q("a1", "term", "train"), Q("a2", "term", "test"),
               Q("a3", "reference", "train"), Q("a4", "reference", "test")]
    qrels = [Qrel(q.query_id, "d1", 1) for q in queries]
    run = Run({
        "a1": ranked("d1"),                  # RR = 1,    R@5 = 1
        "a2": ranked("x", "d1"),             # RR = 1/2,  R@5 = 1
        "a3": ranked("x", "y", "z", "d1"),   # RR = 1/4,  R@5 = 1
        # a4 missing                         # RR = 0,    R@5 = 0
    })
    return evaluate(run, qrels, queries, ["RR@10", "R@5"])


def test_aggregate_by_hand():
    res = _four_queries()
    # overall: RR = (1 + 1/2 + 1/4 + 0) / 4 = 0.4375; R@5 = 3/4
    assert res.overall == {"RR@10": pytest.approx(0.4375), "R@5": pytest.approx(0.75)}
    allq = res.aggregate()
    assert list(allq.columns) == ["n", "RR@10", "R@5"]
    assert allq.loc["all"].tolist() == [4, pytest.approx(0.4375), pytest.approx(0.75)]

    by_type = res.aggregate("query_type")  # indexed by query_type
    assert by_type.index.name == "query_type"
    assert list(by_type.columns) == ["n", "RR@10", "R@5"]
    # reference: a3, a4 -> RR (1/4 + 0)/2 = 0.125, R@5 1/2; term: a1, a2 -> RR 0.75, R@5 1
    assert by_type.index.tolist() == ["reference", "term"]
    assert by_type["n"].tolist() == [2, 2]
    assert by_type["RR@10"].tolist() == pytest.approx([0.125, 0.75])
    assert by_type["R@5"].tolist() == pytest.approx([0.5, 1.0])
    assert [(g, r["RR@10"]) for g, r in by_type.iterrows()] == [("reference", 0.125), ("term", 0.75)]

    by_split = res.aggregate("split")
    # test: a2, a4 -> RR (1/2 + 0)/2 = 0.25, R@5 0.5; train: a1, a3 -> RR (1 + 1/4)/2 = 0.625, R@5 1
    assert by_split.index.tolist() == ["test", "train"]
    assert by_split["RR@10"].tolist() == pytest.approx([0.25, 0.625])
    assert by_split["R@5"].tolist() == pytest.approx([0.5, 1.0])

    both = res.aggregate(["query_type", "split"]).reset_index()
    assert list(both.columns) == ["query_type", "split", "n", "RR@10", "R@5"]
    got = {(r.query_type, r.split): (r.n, r._4) for r in both.itertuples()}
    assert got == {("reference", "test"): (1, 0.0), ("reference", "train"): (1, 0.25),
                   ("term", "test"): (1, 0.5), ("term", "train"): (1, 1.0)}


def test_aggregate_rejects_unknown_columns():
    res = _four_queries()
    with pytest.raises(ValueError, match="query_type"):
        res.aggregate("lane")
    with pytest.raises(ValueError, match="twice"):
        res.aggregate(["split", "split"])


# ---------------------------------------------------------------------------------------
# Input errors
# ---------------------------------------------------------------------------------------


def test_evaluate_input_errors():
    run = Run(Q1_RUN)
    with pytest.raises(ValueError, match="no judgment|none of"):
        evaluate(run, Q1_QRELS, [Q("zz")])
    with pytest.raises(ValueError, match="twice"):
        evaluate(run, Q1_QRELS, [Q("q1"), Q("q1")])
    with pytest.raises(ValueError, match="twice"):
        evaluate(run, Q1_QRELS + [Qrel("q1", "d1", 1)], [Q("q1")])
    with pytest.raises(ValueError, match="Run"):
        evaluate({"q1": {"d1": 1.0}}, Q1_QRELS, [Q("q1")])
    with pytest.raises(ConfigError, match="Foo@10"):
        evaluate(run, Q1_QRELS, [Q("q1")], ["Foo@10"])


# ---------------------------------------------------------------------------------------
# Measure names
# ---------------------------------------------------------------------------------------


def test_default_measures_parse_to_themselves():
    ms = parse_measures(DEFAULT_MEASURES)
    assert [str(m) for m in ms] == list(DEFAULT_MEASURES)
    # Binary measures use rel=1 (= formats.BINARY_THRESHOLD), ir_measures' default.
    assert all(m["rel"] == 1 for m in ms if "rel" in m.SUPPORTED_PARAMS)
    assert [str(m) for m in parse_measures(["MRR@10", "R(rel=2)@10"])] == ["RR@10", "R(rel=2)@10"]
    assert [str(m) for m in parse_measures("nDCG@10")] == ["nDCG@10"]


@pytest.mark.parametrize("bad", ["recall@ten", "nDCG@", "Foo@10", "", "R@0", "R", "NumRet", "P_5"])
def test_bad_measure_names_raise_config_error(bad):
    with pytest.raises(ConfigError) as exc:
        parse_measures(["R@10", bad])
    msg = str(exc.value)
    assert repr(bad) in msg
    assert "nDCG@10" in msg or "@10" in msg  # lists valid examples


def test_measure_list_errors():
    with pytest.raises(ConfigError, match="empty"):
        parse_measures([])
    with pytest.raises(ConfigError, match="repeats"):
        parse_measures(["RR@10", "MRR@10"])
    with pytest.raises(ConfigError, match="not a name"):
        parse_measures([10])


# ---------------------------------------------------------------------------------------
# Latency
# ---------------------------------------------------------------------------------------


def test_latency_summary_linear_percentiles():
    s = latency_summary([4.0, 1.0, 3.0, 2.0])
    # sorted [1, 2, 3, 4]; p50 at position 1.5 -> 2.5; p95 at position 0.95 * 3 = 2.85 -> 3 + 0.85 = 3.85
    assert s == {"p50": pytest.approx(2.5), "p95": pytest.approx(3.85), "mean": pytest.approx(2.5), "n": 4}
    assert latency_summary([7.0]) == {"p50": 7.0, "p95": 7.0, "mean": 7.0, "n": 1}
    with pytest.raises(ValueError, match="no latencies"):
        latency_summary([])
    with pytest.raises(ValueError, match="#1"):
        latency_summary([1.0, float("nan")])
    with pytest.raises(ValueError, match="#0"):
        latency_summary([-1.0])


# ---------------------------------------------------------------------------------------
# Second engine: ranx
# ---------------------------------------------------------------------------------------


def _random_case(seed: int, tied: bool) -> tuple[Run, list[Qrel], list[Query]]:
    """50 queries x 100 ranked docs from a pool of 300, ~15 graded judgments per query."""
    rng = np.random.default_rng(seed)
    pool = [f"doc{i:03d}" for i in range(300)]
    rows, qrels, queries = {}, [], []
    for i in range(50):
        qid = f"q{i:02d}"
        queries.append(Q(qid, ("term", "reference")[i % 2], ("train", "test")[i % 3 == 0]))
        docs = rng.choice(pool, size=100, replace=False)
        scores = rng.integers(0, 5, size=100) if tied else rng.permutation(100) + rng.random(100)
        if i not in (3, 17):  # two judged queries missing from the run
            rows[qid] = [(str(d), float(s)) for d, s in zip(docs, scores)]
        # judge 10 retrieved and 5 unretrieved docs with grades 0 / 1 / 2
        judged = list(rng.choice(docs, size=10, replace=False))
        judged += [d for d in rng.choice(pool, size=20, replace=False) if d not in docs][:5]
        grades = [0] * len(judged) if i == 5 else rng.integers(0, 3, size=len(judged))  # q05: only grade 0
        qrels += [Qrel(qid, str(d), int(g)) for d, g in zip(judged, grades)]
    return Run(rows, "random"), qrels, queries


@pytest.mark.parametrize("tied", [False, True], ids=["distinct-scores", "tied-scores"])
def test_ir_measures_and_ranx_agree(tied):
    run, qrels, queries = _random_case(20261129, tied)
    measures = ["R@10", "R@100", "P@5", "RR@10", "nDCG@10", "nDCG@100"]
    ours = evaluate(run, qrels, queries, measures)
    assert ours.n == 50 and ours.empty_queries == 2
    theirs = cross_check(run, qrels, measures)
    assert set(theirs) == set(measures)
    for m in measures:
        assert theirs[m] == pytest.approx(ours.overall[m], abs=1e-9), m
    # not trivially zero
    assert 0.05 < ours.overall["nDCG@10"] < 0.95 and 0.05 < ours.overall["R@10"] < 0.95


def test_ranx_ndcg_is_trec_evals_gain_not_burges():
    # One query, grades d1=2, d2=1; run [d2, d1]. Jarvelin (gain = grade):
    # (1/1 + 2/log2(3)) / (2/1 + 1/log2(3)); Burges (2^g - 1) would be (1 + 3/log2(3)) / (3 + 1/log2(3)).
    run = Run({"q": ranked("d2", "d1")})
    qrels = [Qrel("q", "d1", 2), Qrel("q", "d2", 1)]
    jarvelin = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    burges = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert abs(jarvelin - burges) > 1e-3
    assert cross_check(run, qrels, ["nDCG@10"])["nDCG@10"] == pytest.approx(jarvelin, abs=1e-12)
    assert evaluate(run, qrels, [Q("q")], ["nDCG@10"]).overall["nDCG@10"] == pytest.approx(jarvelin, abs=1e-12)


def test_cross_check_rejects_measures_without_a_ranx_equivalent():
    with pytest.raises(ConfigError, match="Judged@10"):
        cross_check(Run(Q1_RUN), Q1_QRELS, ["Judged@10"])
    with pytest.raises(ConfigError, match="rel=2"):
        cross_check(Run(Q1_RUN), Q1_QRELS, ["R(rel=2)@10"])
