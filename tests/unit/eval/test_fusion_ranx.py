"""ranx's fusion methods as fusion kinds (issue #13): hand-computed values on a two-lane example, the
lane's order (not its raw scores) fed to the rank-based ones, the errors, and a study choosing between
them with a known optimum (the in-memory slow path; test_fasteval.py proves it equals fuse + ir_measures)."""

from __future__ import annotations

import pytest
import tune_fixture

from workbench.errors import ConfigError
from workbench.eval.fusion import ALL_METHODS, RANX_METHODS, fuse
from workbench.experiment.config import load_experiment
from workbench.run import Hit, Run
from workbench.tuning.space import load_study
from workbench.tuning.study import run_study

# the two lanes of test_fusion.py: vec ranks a, b, c; fts ranks b, d
A = Run({"q": [("a", 0.9), ("b", 0.8), ("c", 0.1)]}, "vec")
B = Run({"q": [("b", 12.0), ("d", 7.0)]}, "fts")


def scores(run: Run, q: str = "q") -> list[tuple[str, float]]:
    return [(h.doc_id, round(h.score, 12)) for h in run[q]]


@pytest.mark.parametrize("method, want", [
    # ISR (Mourão et al. 2015): Σ 1/rank² × lanes that found it. b: (1/4 + 1) × 2; a: 1; d: 1/4; c: 1/9
    ("isr", [("b", 2.5), ("a", 1.0), ("d", 0.25), ("c", round(1 / 9, 12))]),
    # log-ISR: Σ 1/rank² × ln(lanes): only b is in two lanes; the rest tie at 0 → doc_id
    ("log_isr", [("b", round(1.25 * 0.6931471805599453, 12)), ("a", 0.0), ("c", 0.0), ("d", 0.0)]),
    # BordaFuse (Aslam & Montague 2001), 4 candidates: vec a 4, b 3, c 2, d unranked (4 − 3 + 1)/2 = 1;
    # fts b 4, d 3, a and c unranked (4 − 2 + 1)/2 = 1.5
    ("bordafuse", [("b", 7.0), ("a", 5.5), ("d", 4.0), ("c", 3.5)]),
    # min-max per lane: vec a 1, b 0.875, c 0; fts b 1, d 0 (Fox & Shaw 1994)
    ("combmax", [("a", 1.0), ("b", 1.0), ("c", 0.0), ("d", 0.0)]),
    ("combmin", [("a", 1.0), ("b", 0.875), ("c", 0.0), ("d", 0.0)]),
    ("combmed", [("a", 1.0), ("b", 0.9375), ("c", 0.0), ("d", 0.0)]),
    ("combanz", [("a", 1.0), ("b", 0.9375), ("c", 0.0), ("d", 0.0)]),
])
def test_ranx_methods_by_hand(method, want):
    assert scores(fuse({"vec": A, "fts": B}, method)) == want


def test_weighted_bordafuse_by_hand_and_min_score_top_k():
    fused = fuse({"vec": A, "fts": B}, "w_bordafuse", weights={"vec": 0.7, "fts": 0.3})
    # a 0.7·4 + 0.3·1.5; b 0.7·3 + 0.3·4; c 0.7·2 + 0.3·1.5; d 0.7·1 + 0.3·3
    assert scores(fused) == [("b", 3.3), ("a", 3.25), ("c", 1.85), ("d", 1.6)]
    cut = fuse({"vec": A, "fts": B}, "w_bordafuse", weights={"vec": 0.7, "fts": 0.3}, min_score=1.7, top_k=2)
    assert scores(cut) == [("b", 3.3), ("a", 3.25)]


def test_rank_methods_read_the_lanes_order_not_their_tied_scores():
    tied = Run({"q": [Hit("y", 1.0, 1.0), Hit("x", 1.0, 0.0)]}, "t")  # scores tie; the lane's tiebreak puts y first
    # one lane is fused with a copy of itself: y (1 + 1) × 2 = 4, x (1/4 + 1/4) × 2 = 1
    assert scores(fuse({"t": tied}, "isr")) == [("y", 4.0), ("x", 1.0)]
    assert [d for d, _ in scores(fuse({"t": tied}, "bordafuse"))] == ["y", "x"]


def test_a_lane_that_found_nothing_and_a_query_no_lane_answered():
    empty = Run({"q": []}, "e")
    assert scores(fuse({"vec": A, "fts": B, "e": empty}, "isr")) == scores(fuse({"vec": A, "fts": B}, "isr"))
    assert fuse({"e": empty}, "bordafuse")["q"] == ()
    two = Run({"q": [("a", 1.0)], "q2": []}, "x")
    assert fuse({"x": two, "y": Run({"q": [("a", 2.0)]}, "y")}, "isr")["q2"] == ()


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="does not read lane weights; drop them or use w_bordafuse"):
        fuse({"vec": A, "fts": B}, "isr", weights={"vec": 2.0, "fts": 1.0})
    with pytest.raises(ValueError, match="does not read lane weights"):  # not "every lane's weight is 0"
        fuse({"vec": A, "fts": B}, "isr", weights={"vec": 0.0, "fts": 0.0})
    with pytest.raises(ValueError, match=r"fusion 'isr' does not read k; drop it \(read by rrf\)"):
        fuse({"vec": A, "fts": B}, "isr", k=60)
    with pytest.raises(ValueError, match=r"fusion 'combsum' does not read norm; drop it \(read by weighted\)"):
        fuse({"vec": A, "fts": B}, "combsum", norm="zscore")
    with pytest.raises(ValueError, match="unknown fusion method 'condorcet'"):
        fuse({"vec": A, "fts": B}, "condorcet")
    assert "condorcet" not in ALL_METHODS and set(RANX_METHODS) <= set(ALL_METHODS)


EXP = """
name = "e"
datasets = ["gita"]
[lanes.x]
kind = "reference"
[lanes.y]
kind = "reference"
[configs.c]
lanes = ["x", "y"]
"""


@pytest.mark.parametrize("body, msg", [
    ('fusion = "isr"\nweights = { x = 1.0, y = 2.0 }', r"configs.c.weights are not read by fusion 'isr'"),
    ('fusion = "condorcet"', r"configs.c.fusion must be one of .*isr.*combanz"),
    # a parameter the method ignores is refused, whatever the method (fusion.METHOD_PARAMS)
    ('fusion = "combmnz"\nk = 30', r"configs.c.k is not read by fusion 'combmnz'; drop it or choose one of rrf$"),
    ('fusion = "bordafuse"\nk = 60', r"configs.c.k is not read by fusion 'bordafuse'"),
    ('fusion = "rrf"\nnorm = "zscore"', r"configs.c.norm is not read by fusion 'rrf'; drop it or choose one of weighted"),
    ('fusion = "combmnz"\nnorm = "minmax"', r"configs.c.norm is not read by fusion 'combmnz'"),
    ('fusion = "rrf"\nweights = { x = 0.0, y = 0 }', r"configs.c.weights are all 0: every document would score 0"),
    ('fusion = "w_bordafuse"\nweights = { x = 0.0, y = 0.0 }', r"configs.c.weights are all 0"),
])
def test_configs_refuse_what_their_method_cannot_read(tmp_path, body, msg):
    p = tmp_path / "e.toml"
    p.write_text(EXP + body + "\n")
    with pytest.raises(ConfigError, match=msg):
        load_experiment(p, known_datasets={"gita"})


def test_a_one_lane_config_reads_no_weights(tmp_path):
    """``fusion = "none"`` keeps the lane as it is: a weight (even 0) would change nothing, so it is refused."""
    p = tmp_path / "e.toml"
    for weights in ("{ x = 2.0 }", "{ x = 0.0 }"):
        p.write_text(EXP.replace('lanes = ["x", "y"]', 'lanes = ["x"]') + f"weights = {weights}\n")
        with pytest.raises(ConfigError, match="configs.c.weights are not read by fusion 'none'"):
            load_experiment(p, known_datasets={"gita"})


def test_fusion_refuses_weights_that_are_all_zero():
    for method in ("rrf", "weighted", "combmnz", "w_bordafuse"):
        with pytest.raises(ValueError, match="every lane's weight is 0"):
            fuse({"vec": A, "fts": B}, method, weights={"vec": 0.0, "fts": 0.0})
    # one lane at 0 is a real setting: the other lane's order alone (ties by doc_id)
    one = fuse({"vec": A, "fts": B}, "rrf", weights={"vec": 0.0}, k=60)
    assert [h.doc_id for h in one["q"]][:len(B["q"])] == [h.doc_id for h in B["q"]]


def test_a_study_refuses_a_dimension_no_trial_reads(tmp_path):
    text = tune_fixture.STUDY.replace("k = { low = 1, high = 100 }",
                                      'fusion = ["bordafuse", "isr"]\nk = { low = 1, high = 100 }')
    with pytest.raises(ConfigError, match=r"space.k is read by no fusion method a trial can use \(bordafuse, isr\); "
                       r"drop it, or list a method that reads it in space.fusion \(rrf\)"):
        load_study(tune_fixture.write(tmp_path, text), known_datasets={"gita"})
    text = tune_fixture.STUDY.replace("k = { low = 1, high = 100 }", 'fusion = ["isr"]')
    with pytest.raises(ConfigError, match=r"space.weights is read by no fusion method .*\(isr\)"):
        load_study(tune_fixture.write(tmp_path, text), known_datasets={"gita"})
    text = tune_fixture.STUDY.replace("k = { low = 1, high = 100 }", 'norm = ["zscore"]')  # the baseline is RRF
    with pytest.raises(ConfigError, match=r"space.norm is read by no fusion method a trial can use \(rrf\)"):
        load_study(tune_fixture.write(tmp_path, text), known_datasets={"gita"})


def test_a_study_refuses_a_space_no_trial_can_use(tmp_path):
    # a one-lane study of a one-lane baseline: no trial becomes RRF, so k is read by none
    tune_fixture.write(tmp_path)
    (tmp_path / "experiment.toml").write_text(tune_fixture.EXPERIMENT + '[configs.solo]\nlanes = ["good"]\n')
    solo = tune_fixture.STUDY.replace('lanes = ["good", "bad"]', 'lanes = ["good"]').replace(
        'baseline = "equal"', 'baseline = "solo"').replace("[space.weights]\ngood = { low = 0.0, high = 1.0 }\n"
                                                          "bad = { low = 0.0, high = 1.0 }\n", "")
    (tmp_path / "study.toml").write_text(solo)
    with pytest.raises(ConfigError, match=r"space.k is read by no fusion method a trial can use \(none\)"):
        load_study(tmp_path / "study.toml", known_datasets={"gita"})
    # weights that can only be 0 for every lane: every trial would retrieve nothing
    zero = tune_fixture.STUDY.replace("good = { low = 0.0, high = 1.0 }", "good = [0.0]").replace(
        "bad = { low = 0.0, high = 1.0 }", "bad = [0.0]")
    with pytest.raises(ConfigError, match="space.weights can only draw 0 for every lane"):
        load_study(tune_fixture.write(tmp_path, zero), known_datasets={"gita"})


def test_a_trial_whose_weights_are_all_zero_retrieves_nothing(tmp_path):
    from workbench.tuning.objective import setting_from

    st = load_study(tune_fixture.write(tmp_path), known_datasets={"gita"})
    assert setting_from(st, {"weights.good": 0.0, "weights.bad": 0.0}) is None
    assert setting_from(st, {"weights.good": 0.0, "weights.bad": 0.5}).weights == {"good": 0.0, "bad": 0.5}


def test_a_config_with_a_ranx_method_loads(tmp_path):
    p = tmp_path / "e.toml"
    p.write_text(EXP + 'fusion = "w_bordafuse"\nweights = { x = 0.7, y = 0.3 }\n')
    c = load_experiment(p, known_datasets={"gita"}).configs["c"]
    assert (c.method, c.weights) == ("w_bordafuse", {"x": 0.7, "y": 0.3})


def test_a_study_chooses_between_ranx_methods_with_a_known_optimum(tmp_path):
    """tune_fixture: `good` ranks the relevant document first, `bad` an unjudged one. Both sit at rank 1 of
    one lane, so ISR and BordaFuse tie them and the doc_id rule puts the unjudged one first (R@1 = 0).
    Weighted BordaFuse over 15 candidates gives the relevant one 15·w_good + 3.5·w_bad against
    3.5·w_good + 15·w_bad: R@1 = 1 exactly when w_good > w_bad."""
    text = tune_fixture.STUDY.replace("k = { low = 1, high = 100 }", 'fusion = ["isr", "bordafuse", "w_bordafuse"]')
    st = load_study(tune_fixture.write(tmp_path, text), known_datasets={"gita"})
    res = run_study(st, home=tmp_path / "home", storage="memory", trials=20,
                    candidates=tune_fixture.candidates(st, tmp_path / "home"))
    seen = set()
    for t in res.optuna_study.trials[1:]:  # trial 0 is the RRF baseline as written
        p = t.params
        # weights are drawn only for the method that reads them (conditional parameters)
        assert ("weights.good" in p) == (p["fusion"] == "w_bordafuse"), p
        want = 1.0 if p["fusion"] == "w_bordafuse" and p["weights.good"] > p["weights.bad"] else 0.0
        assert t.values[0] == want, p
        seen.add(p["fusion"])
    assert seen == {"isr", "bordafuse", "w_bordafuse"}
    assert res.chosen_params["fusion"] == "w_bordafuse" and res.chosen.values[0] == 1.0
    # the sensitivity report perturbs only what the chosen method reads
    assert {r["param"] for r in res.sensitivity} <= {"weights.good", "weights.bad"}


def test_a_trial_of_a_method_without_weights_carries_none(tmp_path):
    """The study draws weights for every trial; ISR reads none, so its setting (and an exported config,
    which the gate loads back) holds none: ``weights`` given to ISR would be refused at load."""
    from workbench.tuning.objective import setting_from

    st = load_study(tune_fixture.write(tmp_path), known_datasets={"gita"})
    assert setting_from(st, {"fusion": "isr", "weights.good": 0.9, "weights.bad": 0.1}).weights is None
    assert setting_from(st, {"fusion": "w_bordafuse", "weights.good": 0.9, "weights.bad": 0.1}).weights == \
        {"good": 0.9, "bad": 0.1}
