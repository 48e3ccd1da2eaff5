"""Inter-rater agreement against published and hand-computed values, its bootstrap intervals, and the
adjudication queue on a real PostgreSQL store."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import psycopg
import pytest
from sklearn.metrics import cohen_kappa_score

from workbench.errors import DataError
from workbench.judging import agreement as ag
from workbench.judging.store import JudgeError, JudgmentStore, PoolPair

NAN = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers x 12 units,
# values 1..5, "." missing.
KRIPPENDORFF_2011 = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
])
DOMAIN = [1, 2, 3, 4, 5]


def test_krippendorff_alpha_on_his_published_reliability_data():
    # the published values: nominal 0.743, interval 0.849
    assert round(ag.krippendorff_alpha(KRIPPENDORFF_2011, "nominal", DOMAIN), 3) == 0.743
    assert round(ag.krippendorff_alpha(KRIPPENDORFF_2011, "interval", DOMAIN), 3) == 0.849
    # the paper's coincidence matrix: units 1-11 pairable (unit 12 has one value), n = 40 pairable values,
    # o_11 = 7, o_12 = 4/3, o_13 = o_14 = 1/3, o_22 = 10, o_33 = 8, o_44 = 4, o_55 = 3
    o = ag.coincidence_matrix(KRIPPENDORFF_2011, DOMAIN)
    assert o.sum() == pytest.approx(40)
    assert o.sum(axis=1) == pytest.approx([9, 13, 10, 5, 3])
    assert o[0] == pytest.approx([7, 4 / 3, 1 / 3, 1 / 3, 0]) and np.allclose(o, o.T)
    assert np.diag(o) == pytest.approx([7, 10, 8, 4, 3])
    # the vectorised formula the bootstrap uses agrees with the package at every level
    for level in ag.LEVELS:
        assert float(ag.alpha_from_coincidence(o, level, DOMAIN)) == pytest.approx(
            ag.krippendorff_alpha(KRIPPENDORFF_2011, level, DOMAIN), abs=1e-12)


# A small table of grades 0..2 (rows raters, columns units; NaN missing), computed by hand:
#   u1 (0,0)   -> o00 += 2/(2-1) = 2
#   u2 (0,1)   -> o01 += 1, o10 += 1
#   u3 (1,1)   -> o11 += 2
#   u4 (1,2)   -> o12 += 1, o21 += 1
#   u5 (2,2)   -> o22 += 2
#   u6 (0,2,2) -> m = 3: 0 pairs with two 2s: o02 += 2/2 = 1, o20 += 1; the two 2s: o22 += 2/2 = 1
#   u7 (1)     -> one value: not pairable
# o = [[2,1,1],[1,2,1],[1,1,3]], n_0 = 4, n_1 = 4, n_2 = 5, n = 13.
# ordinal δ²: δ01 = ((n0+n1)/2)² = 16, δ12 = ((n1+n2)/2)² = 20.25, δ02 = (n0+n1+n2 - (n0+n2)/2)² = 8.5² = 72.25
#   Σ o δ     = 2·(1·16 + 1·72.25 + 1·20.25)          = 217
#   Σ n n δ   = 2·(4·4·16 + 4·5·72.25 + 4·5·20.25)    = 2·(256 + 1445 + 405) = 4212
#   alpha     = 1 - (13 - 1)·217/4212 = 1 - 217/351   = 134/351 ≈ 0.3818
# interval δ² = (c-k)²: Σ o δ = 2·(1 + 4 + 1) = 12, Σ n n δ = 2·(16 + 80 + 20) = 232, alpha = 1 - 12·12/232 = 11/29
# nominal  δ = [c≠k]:  Σ o δ = 2·3 = 6,            Σ n n δ = 2·(16 + 20 + 20) = 112, alpha = 1 - 12·6/112 = 5/14
SMALL = np.array([
    [0, 0, 1, 1, 2, 0, 1],
    [0, 1, 1, 2, 2, 2, NAN],
    [NAN, NAN, NAN, NAN, NAN, 2, NAN],
])


@pytest.mark.parametrize("level, expected", [("ordinal", Fraction(134, 351)), ("interval", Fraction(11, 29)),
                                             ("nominal", Fraction(5, 14))])
def test_alpha_on_a_small_table_equals_the_hand_computation(level, expected):
    o = ag.coincidence_matrix(SMALL)
    assert o.tolist() == [[2, 1, 1], [1, 2, 1], [1, 1, 3]]
    assert ag.krippendorff_alpha(SMALL, level) == pytest.approx(float(expected), abs=1e-12)
    assert float(ag.alpha_from_coincidence(o, level)) == pytest.approx(float(expected), abs=1e-12)


# Two raters on 20 units; confusion table O (rows rater A, columns rater B):
#        B0 B1 B2 | rows
#   A0 [  5, 2, 1 ]   8
#   A1 [  1, 4, 1 ]   6
#   A2 [  0, 2, 4 ]   6
#  cols   6  8  6   N = 20
# unweighted: p_o = (5+4+4)/20 = 0.65; p_e = (8·6 + 6·8 + 6·6)/400 = 132/400 = 0.33;
#   kappa = (0.65 - 0.33)/(1 - 0.33) = 32/67 ≈ 0.4776
# linear (Cohen 1968, disagreement weights |i-j|): Σ w O = 1·(2+1) + 1·(1+2) + 2·(1+0) = 8;
#   E_ij = row_i·col_j/N: E01 = 3.2, E10 = 1.8, E12 = 1.8, E21 = 2.4, E02 = 2.4, E20 = 1.8;
#   Σ w E = (3.2+1.8) + (1.8+2.4) + 2·(2.4+1.8) = 17.6;  kappa_w = 1 - 8/17.6 = 6/11 ≈ 0.5455
TABLE = [[5, 2, 1], [1, 4, 1], [0, 2, 4]]


def _labels(table):
    a, b = [], []
    for i, row in enumerate(table):
        for j, n in enumerate(row):
            a += [i] * n
            b += [j] * n
    return a, b


def test_cohens_kappa_equals_the_hand_computation_and_scikit_learn():
    a, b = _labels(TABLE)
    assert ag.confusion(a, b).tolist() == TABLE
    assert ag.cohen_kappa(a, b, weights=None) == pytest.approx(32 / 67, abs=1e-12)
    assert ag.cohen_kappa(a, b) == pytest.approx(6 / 11, abs=1e-12)
    assert cohen_kappa_score(a, b, weights="linear", labels=[0, 1, 2]) == pytest.approx(6 / 11, abs=1e-12)
    assert cohen_kappa_score(a, b, labels=[0, 1, 2]) == pytest.approx(32 / 67, abs=1e-12)
    assert float(ag.kappa_from_confusion(np.array(TABLE))) == pytest.approx(6 / 11, abs=1e-12)
    assert float(ag.kappa_from_confusion(np.array(TABLE), None)) == pytest.approx(32 / 67, abs=1e-12)


def test_the_vectorised_formulas_equal_the_packages_on_random_tables():
    rng = np.random.default_rng(7)
    for _ in range(100):
        x = rng.integers(0, 3, (int(rng.integers(2, 6)), int(rng.integers(2, 40)))).astype(float)
        x[rng.random(x.shape) < 0.3] = NAN
        want = ag.krippendorff_alpha(x)
        got = float(ag.alpha_from_coincidence(ag.coincidence_matrix(x)))
        assert (want is None and np.isnan(got)) or got == pytest.approx(want, abs=1e-9)
        a, b = rng.integers(0, 3, 25), rng.integers(0, 3, 25)
        for weights in ("linear", None):
            assert float(ag.kappa_from_confusion(ag.confusion(a, b), weights)) == pytest.approx(
                cohen_kappa_score(a, b, weights=weights, labels=[0, 1, 2]), abs=1e-9)


def test_undefined_coefficients_are_none_not_nan():
    assert ag.krippendorff_alpha(np.array([[1.0, NAN], [NAN, 2.0]])) is None  # no unit with two values
    assert ag.krippendorff_alpha(np.ones((2, 4))) is None  # no variation: 0 / 0
    assert ag.cohen_kappa([1, 1, 1], [1, 1, 1]) is None and ag.cohen_kappa([], []) is None
    e = ag.alpha_estimate(np.ones((2, 4)))
    assert e == ag.Estimate(None, None, None, 4)


def _rows(spec):
    """rows from {(query, doc): {rater: grade | "x" (cannot judge)}}."""
    return [{"query_id": q, "doc_id": d, "rater": r, "grade": None if g == "x" else g, "cannot_judge": g == "x",
             "doc_sha256": None, "note": None} for (q, d), gs in spec.items() for r, g in gs.items()]


def _simulated(n=400, seed=3):
    rng = np.random.default_rng(seed)
    spec = {}
    for u in range(n):
        truth = int(rng.integers(0, 3))
        who = rng.choice(["ann", "bob", "cy", "dee"], 2, replace=False)
        spec[(f"q{u % 40}", f"d{u}")] = {str(r): int(np.clip(truth + (rng.random() < 0.3) * rng.integers(-1, 2), 0, 2))
                                        for r in who}
    return spec


def test_bootstrap_intervals_contain_the_estimate_and_are_reproducible_for_a_seed():
    rows = _rows(_simulated())
    types = {f"q{i}": ("term", "paraphrase")[i % 2] for i in range(40)}
    one = ag.agreement(rows, query_types=types, seed=11, resamples=500)
    two = ag.agreement(rows, query_types=types, seed=11, resamples=500)
    other = ag.agreement(rows, query_types=types, seed=12, resamples=500)
    assert one == two
    assert one["alpha"] != other["alpha"] and one["alpha"]["value"] == other["alpha"]["value"]
    assert one["bootstrap"] == {"unit": "(query_id, doc_id) pair", "resamples": 500, "seed": 11,
                                "interval": "95% percentile"}
    estimates = [one["alpha"], *one["by_type"].values(), *(p["kappa"] for p in one["pairs"]),
                 *(r["alpha"] for r in one["by_rater"].values()), *(r["mean_kappa"] for r in one["by_rater"].values())]
    assert len(estimates) == 1 + 2 + 6 + 4 + 4
    for e in estimates:
        assert e["low"] <= e["value"] <= e["high"] and e["high"] - e["low"] < 0.5
    # the point estimates are the packages'
    raters, units, data = ag.reliability_data(rows)
    assert one["alpha"]["value"] == ag.krippendorff_alpha(data)
    pair = next(p for p in one["pairs"] if (p["a"], p["b"]) == ("ann", "bob"))
    both = ~(np.isnan(data[0]) | np.isnan(data[1]))
    assert pair["kappa"]["value"] == pytest.approx(cohen_kappa_score(
        data[0, both].astype(int), data[1, both].astype(int), weights="linear", labels=[0, 1, 2]))
    assert pair["confusion"] == ag.confusion(data[0, both].astype(int), data[1, both].astype(int)).tolist()
    # an interval does not move when an unrelated rater pair changes (one random stream per statistic)
    extra = rows + _rows({("q0", "extra"): {"eve": 0, "fay": 2}})
    assert ag.agreement(extra, query_types=types, seed=11, resamples=500)["by_rater"]["ann"] == one["by_rater"]["ann"]


def test_the_report_counts_cannot_judge_as_missing_and_leaves_stale_judgments_out():
    spec = {("q1", "a"): {"ann": 2, "bob": 2}, ("q1", "b"): {"ann": 0, "bob": 1}, ("q1", "c"): {"ann": 0, "bob": 2},
            ("q2", "d"): {"ann": 1, "bob": 1, "cy": 2}, ("q2", "e"): {"ann": 2}}
    base = ag.agreement(_rows(spec), query_types={"q1": "term", "q2": "paraphrase"}, resamples=200)
    assert base["units"] == 5 and base["pairable_units"] == 4 and base["grades"] == 10
    with_cannot = _rows(spec) + _rows({("q2", "e"): {"bob": "x"}, ("q1", "a"): {"cy": "x"}})
    rep = ag.agreement(with_cannot, query_types={"q1": "term", "q2": "paraphrase"}, resamples=200)
    assert rep["cannot_judge"] == 2
    assert {k: rep[k] for k in ("alpha", "by_type", "pairs", "pooled_confusion")} == \
        {k: base[k] for k in ("alpha", "by_type", "pairs", "pooled_confusion")}
    # ann/bob share 4 units: (2,2) (0,1) (0,2) (1,1); ann/cy and bob/cy share one: (1,2)
    ab = next(p for p in rep["pairs"] if (p["a"], p["b"]) == ("ann", "bob"))
    assert ab["confusion"] == [[0, 1, 1], [0, 1, 0], [0, 0, 1]] and ab["exact_agreement"] == 0.5
    assert rep["pooled_confusion"] == [[0, 1, 1], [0, 1, 2], [0, 0, 1]]  # + ann/cy (1,2) + bob/cy (1,2)
    assert rep["by_type"]["term"]["units"] == 3 and rep["by_type"]["paraphrase"]["units"] == 1
    assert rep["by_rater"]["cy"]["grades"] == 1 and rep["by_rater"]["cy"]["mean_kappa"]["value"] is None
    assert rep["by_rater"]["ann"]["partners"] == ["bob"]  # cy shares one unit only (MIN_SHARED = 2)
    # a stale judgment (another text hash than the built document's) is left out and counted
    stale = _rows(spec)
    stale[0]["doc_sha256"] = "old"
    rep = ag.agreement(stale, doc_hashes={"a": "new"}, resamples=0)
    assert rep["stale"] == 1 and rep["pairable_units"] == 3 and rep["alpha"]["low"] is None
    text = ag.render(base, "gita")
    assert "4 with ≥2 grades" in text and "Krippendorff's alpha (ordinal" in text and "ann / bob" in text


def test_agreement_is_reported_with_and_without_the_exact_answer_queries():
    # issue #28: obvious zeros of reference queries agree and lift alpha. Hand computation (ordinal, 0..2):
    # without them, units (1,2), (0,0), (2,2): n = 6, n_0 2, n_1 1, n_2 3; δ²_01 = (3 - 1.5)² = 2.25,
    # δ²_12 = (4 - 2)² = 4, δ²_02 = (6 - 2.5)² = 12.25; observed Σ o δ² = 2·4 = 8; expected
    # Σ n_c n_k δ² = 2(2·1·2.25 + 1·3·4 + 2·3·12.25) = 180; alpha = 1 - 5·8/180 = 7/9.
    # with two more (0,0) reference units: n = 10, n_0 6; δ²_01 = 12.25, δ²_12 = 4, δ²_02 = 30.25;
    # expected 2(6·12.25 + 3·4 + 18·30.25) = 1260; alpha = 1 - 9·8/1260 = 33/35.
    rows = _rows({("p1", "a"): {"ann": 1, "bob": 2}, ("p1", "b"): {"ann": 0, "bob": 0}, ("p1", "c"): {"ann": 2, "bob": 2},
                  ("r1", "x"): {"ann": 0, "bob": 0}, ("r2", "y"): {"ann": 0, "bob": 0}})
    rep = ag.agreement(rows, query_types={"p1": "paraphrase", "r1": "reference", "r2": "page_ref"}, resamples=50)
    assert rep["alpha"]["value"] == pytest.approx(33 / 35) and rep["alpha"]["units"] == 5
    wx = rep["without_exact"]
    assert wx["alpha"]["value"] == pytest.approx(7 / 9) and wx["alpha"]["units"] == 3
    assert wx["query_types"] == ["reference", "page_ref"] and wx["left_out_pairable_units"] == 2
    assert "  without reference/page_ref   0.778" in ag.render(rep, "gita")
    assert "(2 pairs of exact-answer queries left out)" in ag.render(rep, "gita")
    assert "without_exact" not in ag.agreement(rows, resamples=0)


def test_the_adjudication_rule_in_words():
    assert ag.adjudication_rule(1) == ("pairs whose grades differ (0 vs 1, 0 vs 2, 1 vs 2), and pairs a rater could "
                                       "not judge with no other rater left to ask")
    assert ag.adjudication_rule(2).startswith("pairs where one rater says 0 and another 1 or 2 (1 vs 2 is settled as 1)")
    with pytest.raises(JudgeError, match="1 or 2, got 3"):
        ag.adjudication_rule(3)


def test_two_grades_of_one_rater_on_one_pair_are_refused():
    rows = _rows({("q", "d"): {"ann": 1}}) * 2
    with pytest.raises(DataError, match="ann has two current grades on q / d"):
        ag.agreement(rows)


# ---------------------------------------------------------------- the adjudication queue (real PostgreSQL)


@pytest.fixture
def store(judge_store):
    return judge_store


# (doc, ann's grade, bob's grade): differences 0, 1, 2, 1, 2
GRADES = {"d0": (1, 1), "d1": (0, 1), "d2": (0, 2), "d3": (2, 1), "d4": (2, 0)}


def _judge_all(st: JudgmentStore, grades=GRADES, dataset="gita"):
    st.create_pool(dataset, [PoolPair("q1", d) for d in grades], raters_per_pair=2)
    ann, _ = st.add_rater("ann")
    bob, _ = st.add_rater("bob")
    ada, _ = st.add_rater("ada", "adjudicator")
    for who, col in ((ann, 0), (bob, 1)):
        while (a := st.next_assignment(who, dataset)) is not None:
            st.judge(who, a.assignment_id, grades[a.doc_id][col], note=f"{who.name} on {a.doc_id}", doc_hash="h")
    return ann, bob, ada


def test_every_disagreement_goes_to_adjudication_by_default_and_0_vs_1_at_either_setting(store):
    # issue #28: under the old default (2) none of the scholars' 0-vs-1 and 1-vs-2 disagreements reached an adjudicator
    ann, bob, ada = _judge_all(store)
    assert store.adjudicate_at("gita") == 1
    queue = ag.adjudication_queue(store, "gita", ada)
    assert [(q["query_id"], q["doc_id"], q["difference"]) for q in queue] == [
        ("q1", "d2", 2), ("q1", "d4", 2), ("q1", "d1", 1), ("q1", "d3", 1)]
    assert queue[0]["judgments"] == [
        {"rater": "ann", "grade": 0, "cannot_judge": False, "note": "ann on d2",
         "judged_at": queue[0]["judgments"][0]["judged_at"]},
        {"rater": "bob", "grade": 2, "cannot_judge": False, "note": "bob on d2",
         "judged_at": queue[0]["judgments"][1]["judged_at"]},
    ]
    assert queue[0]["reason"] == "not adjudicated" and queue[0]["previous_adjudication"] is None
    store.set_adjudicate_at("gita", 2)  # 1 vs 2 (d3) resolves to 1; 0 vs 1 (d1) still goes: relevant or not at all
    queue = ag.adjudication_queue(store, "gita", ada)
    assert [(q["doc_id"], q["difference"]) for q in queue] == [("d2", 2), ("d4", 2), ("d1", 1)]
    assert ag.adjudication_queue(store, "other-dataset", ada) == []


def test_cannot_judge_sends_the_pair_to_another_rater_when_one_is_free(store):
    from workbench.judging.layers import final_grades

    store.create_pool("gita", [PoolPair("q1", "d0")], raters_per_pair=2)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    cy, _ = store.add_rater("cy")
    ada, _ = store.add_rater("ada", "adjudicator")
    a = store.next_assignment(ann, "gita")
    store.judge(ann, a.assignment_id, None, cannot_judge=True, note="I do not read Sanskrit")
    store.judge(bob, store.next_assignment(bob, "gita").assignment_id, 2)
    rows = store.current("gita")
    assert [(r["rater"], r["raters_per_pair"], r["open_slots"]) for r in rows] == [("ann", 2, 1), ("bob", 2, 1)]
    assert final_grades(rows) == {}  # bob's single 2 is not final: cy (or ada) may still judge it
    assert ag.adjudication_queue(store, "gita", ada) == []
    c = store.next_assignment(cy, "gita")
    assert (c.query_id, c.doc_id) == ("q1", "d0")
    store.judge(cy, c.assignment_id, 2)
    assert store.next_assignment(ada, "gita") is None  # two grades: no more slots
    final = final_grades(store.current("gita"))
    assert final[("q1", "d0")].grade == 2 and final[("q1", "d0")].basis == "agreed" and final[("q1", "d0")].raters == 2


def test_cannot_judge_with_no_other_rater_goes_to_adjudication_not_final_on_one_grade(store):
    from workbench.judging.layers import final_grades

    store.create_pool("gita", [PoolPair("q1", "d0"), PoolPair("q1", "d1")], raters_per_pair=2)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    while (a := store.next_assignment(ann, "gita")) is not None:
        store.judge(ann, a.assignment_id, None, cannot_judge=True) if a.doc_id == "d0" else store.judge(ann, a.assignment_id, 1)
    ada, _ = store.add_rater("ada", "adjudicator")  # added after: only ann and bob were there to ask
    while (a := store.next_assignment(bob, "gita")) is not None:
        store.judge(bob, a.assignment_id, 2 if a.doc_id == "d0" else 1)
    rows = store.current("gita")
    final = final_grades(rows)
    assert ("q1", "d0") not in final  # before: bob's 2 was final ("single") because ann could not judge
    assert final[("q1", "d1")].grade == 1 and final[("q1", "d1")].basis == "agreed"
    queue = ag.adjudication_queue(store, "gita", ada)
    assert [(q["doc_id"], q["difference"], q["reason"]) for q in queue] == [("d0", 0, "cannot judge, no other rater")]
    assert [(j["rater"], j["grade"], j["cannot_judge"]) for j in queue[0]["judgments"]] == [
        ("ann", None, True), ("bob", 2, False)]
    store.adjudicate(ada, "gita", "q1", "d0", 1)
    final = final_grades(store.current("gita"), store.adjudications("gita"))
    assert final[("q1", "d0")].grade == 1 and final[("q1", "d0")].basis == "adjudicated"
    assert ag.adjudication_queue(store, "gita", ada) == []


def test_undoing_cannot_judge_takes_back_the_extra_slot(store):
    store.create_pool("gita", [PoolPair("q1", "d0")], raters_per_pair=2)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    cy, _ = store.add_rater("cy")
    store.judge(ann, store.next_assignment(ann, "gita").assignment_id, None, cannot_judge=True)
    slots = lambda: store.conn().execute("SELECT count(*) FROM wb_judge.assignments").fetchone()[0]  # noqa: E731
    assert slots() == 3
    a = store.undo_last(ann, "gita")
    assert slots() == 2
    store.judge(ann, a.assignment_id, 1)
    store.judge(bob, store.next_assignment(bob, "gita").assignment_id, 1)
    assert store.next_assignment(cy, "gita") is None


def test_a_plain_rater_or_a_revoked_adjudicator_is_refused(store):
    ann, bob, ada = _judge_all(store)
    with pytest.raises(JudgeError, match="ann is a rater, not an adjudicator"):
        ag.adjudication_queue(store, "gita", ann)
    store.revoke_rater("ada")
    with pytest.raises(JudgeError, match="no active rater named 'ada'"):
        ag.adjudication_queue(store, "gita", ada)


def test_an_adjudicated_pair_leaves_the_queue_until_a_rater_judges_it_again(store):
    ann, bob, ada = _judge_all(store)
    store.adjudicate(ada, "gita", "q1", "d2", 1, note="partly", doc_hash="h")
    assert [q["doc_id"] for q in ag.adjudication_queue(store, "gita", ada)] == ["d4", "d1", "d3"]
    # bob undoes his last judgment (d4 or whichever was last) until d2 is reopened, then judges d2 again
    undone = []
    while (a := store.undo_last(bob, "gita")) is not None and a.doc_id != "d2":
        undone.append(a)
    store.judge(bob, a.assignment_id, 2, note="still highly relevant", doc_hash="h")
    for u in undone:
        store.judge(bob, u.assignment_id, GRADES[u.doc_id][1], doc_hash="h")
    queue = ag.adjudication_queue(store, "gita", ada)
    again = next(q for q in queue if q["doc_id"] == "d2")
    assert again["reason"] == "judged again after the adjudication"
    assert again["previous_adjudication"]["grade"] == 1 and again["previous_adjudication"]["adjudicator"] == "ada"
    store.adjudicate(ada, "gita", "q1", "d2", 2)
    assert "d2" not in [q["doc_id"] for q in ag.adjudication_queue(store, "gita", ada)]


def test_stale_judgments_wait_for_re_judging_not_adjudication(store):
    ann, bob, ada = _judge_all(store)
    assert len(ag.adjudication_queue(store, "gita", ada, doc_hashes={f"d{i}": "h" for i in range(5)})) == 4
    changed = {**{f"d{i}": "h" for i in range(5)}, "d2": "h2"}
    assert [q["doc_id"] for q in ag.adjudication_queue(store, "gita", ada, doc_hashes=changed)] == ["d4", "d1", "d3"]


def test_cannot_judge_is_shown_to_the_adjudicator_but_is_no_grade():
    rows = _rows({("q", "a"): {"ann": 0, "bob": "x", "cy": 2}, ("q", "b"): {"ann": 0, "bob": "x"}})
    for r in rows:
        r["created_at"] = 1
    queue = ag.disagreements(rows, [], 2)
    assert [q["doc_id"] for q in queue] == ["a"]
    assert [(j["rater"], j["grade"], j["cannot_judge"]) for j in queue[0]["judgments"]] == [
        ("ann", 0, False), ("bob", None, True), ("cy", 2, False)]
    with pytest.raises(JudgeError, match="1 or 2"):
        ag.disagreements(rows, [], 3)


def test_a_snapshot_reads_one_moment_while_raters_keep_judging(store, pg_dsn):
    ann, bob, ada = _judge_all(store)
    other = JudgmentStore(pg_dsn)
    with store.snapshot():
        before = store.current("gita")
        other.import_judgments("gita", [("q1", "d9", 2, "cy"), ("q1", "d9", 0, "dee")], source="test")
        assert store.current("gita") == before  # the new judgments are after the snapshot
        assert ag.adjudication_queue(store, "gita", ada) == ag.disagreements(before, [], 1)  # nested: same snapshot
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            store.set_adjudicate_at("gita", 1)
    assert len(store.current("gita")) == len(before) + 2
    assert [q["doc_id"] for q in ag.adjudication_queue(store, "gita", ada)] == ["d2", "d4", "d9", "d1", "d3"]
    other.close()

