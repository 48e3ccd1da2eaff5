"""A study's objective that weighs honest empty answers (``objective.abstention``): the empty-answer test of the
in-memory evaluator against the reference fusion, the abstention accuracy on hand-built runs, a synthetic study
whose optimum is known, and the mistakes refused.
"""

from __future__ import annotations

import pytest
import tune_fixture

from workbench.errors import ConfigError
from workbench.eval.fasteval import CandidateMatrix
from workbench.eval.fusion import FusionSpec, fuse_spec
from workbench.run import Hit, Run
from workbench.tuning.objective import answer_shares
from workbench.tuning.report import SplitReport
from workbench.tuning.space import load_study
from workbench.tuning.study import run_study
from workbench.types import Query

ONE_LANE = {"a": Run({"q1": [Hit("d1", 0.9)], "q2": [Hit("d2", 0.3)], "n1": [Hit("x", 0.2)], "n2": [Hit("y", 0.8)],
                      "n3": []}, "a")}


def _raw(min_score: float | None) -> FusionSpec:
    """The lane's own score as the fused score (weighted, raw), cut at ``min_score``."""
    return FusionSpec(("a",), "weighted", 60.0, {"a": 1.0}, None, "raw", min_score, 10, None, None)


@pytest.mark.parametrize("min_score, shares", [
    (None, (1 / 3, 0.0)),  # only n3, which no lane answers, is empty
    (0.25, (2 / 3, 0.0)),  # n1 (0.2) drops out as well
    (0.5, (2 / 3, 0.5)),  # and q2 (0.3): a false empty
    (0.95, (1.0, 1.0)),  # everything is empty
])
def test_abstention_on_hand_built_runs(min_score, shares):
    m = CandidateMatrix(ONE_LANE, [("q1", "d1", 1), ("q2", "d2", 2)], ["q1", "q2", "n1"])
    assert m.query_ids == ["q1", "q2"]  # unjudged queries stay out of the measures' matrix
    neg = CandidateMatrix(ONE_LANE, [], ["n1", "n2", "n3"], keep_unjudged=True)
    got = answer_shares(m, neg, _raw(min_score))
    empty_neg, false_empty = shares
    assert got["empty_on_negatives"] == pytest.approx(empty_neg) and got["false_empty"] == pytest.approx(false_empty)
    assert got["abstention_accuracy"] == pytest.approx((empty_neg + 1 - false_empty) / 2)
    # the in-memory empty test says what the reference fusion returns
    fused = fuse_spec(ONE_LANE, _raw(min_score), "ref")
    assert list(neg.empty(_raw(min_score))) == [not fused.get_hits(q) for q in ("n1", "n2", "n3")]
    assert list(m.empty(_raw(min_score))) == [not fused.get_hits(q) for q in ("q1", "q2")]


def _with_negatives(cands):
    """The synthetic study's candidates plus 20 unanswerable queries (10 train, 5 dev, 5 test) that only the
    ``bad`` lane answers, at rank 1."""
    for i in range(20):
        split = "train" if i < 10 else ("dev" if i < 15 else "test")
        q = Query(f"n{i:02d}", f"nothing {i}", "negative", "en", split)
        cands.ds.queries.append(q)
        cands.queries[q.query_id] = q
    good, bad = cands._runs[("good", ())], cands._runs[("bad", ())]
    rows = {q: bad.get_hits(q) for q in bad}
    rows.update({f"n{i:02d}": (Hit(f"junk{i}", 5.0),) for i in range(20)})
    cands._runs[("bad", ())] = Run(rows, "bad")
    cands._runs[("good", ())] = Run({q: good.get_hits(q) for q in good}, "good")
    return cands


STUDY = tune_fixture.STUDY.replace('measure = "R@1"', 'measure = "R@1"\nabstention = 0.5').replace(
    "[space]", "[space]\nmin_score = { low = 0.0, high = 0.05 }")


def test_a_study_weighing_abstention_finds_the_known_optimum(tmp_path):
    """R@1 is 1 when ``good`` outweighs ``bad``; a negative's only hit is ``bad``'s first place, worth
    ``w_bad / (k + 1)``, and an answerable query's first document gets at least ``w_good / (k + 1)``: a
    ``min_score`` between the two empties every negative and no answerable query, so the optimum is 1.0."""
    st = load_study(tune_fixture.write(tmp_path, STUDY), known_datasets={"gita"})
    assert st.abstention == 0.5
    result = run_study(st, home=tmp_path / "home", storage="memory", trials=120,
                       candidates=_with_negatives(tune_fixture.candidates(st, tmp_path)))
    assert result.chosen.values[0] == pytest.approx(1.0)
    assert result.baseline_value == pytest.approx(0.5 * 0.0 + 0.5 * 0.5)  # R@1 0, nothing ever empty: 0.5
    p = result.chosen.params
    assert p["weights.bad"] / (p["k"] + 1) < p["min_score"] <= p["weights.good"] / (p["k"] + 1)
    for split in ("dev", "test"):
        answers = result.evaluation.split(split).answers
        assert answers["chosen"] == {"empty_on_negatives": 1.0, "false_empty": 0.0, "abstention_accuracy": 1.0}
        assert answers["baseline"] == {"empty_on_negatives": 0.0, "false_empty": 0.0, "abstention_accuracy": 0.5}
        rep = result.evaluation.split(split)
        assert SplitReport.from_json(rep.to_json(), "R@1").answers == rep.answers  # report.json keeps them


def test_abstention_needs_a_weight_in_range_and_negatives_in_the_split(tmp_path):
    with pytest.raises(ConfigError, match="objective.abstention must be a number from 0 to 1"):
        load_study(tune_fixture.write(tmp_path, STUDY.replace("abstention = 0.5", "abstention = 1.5")),
                   known_datasets={"gita"})
    st = load_study(tune_fixture.write(tmp_path, STUDY), known_datasets={"gita"})
    with pytest.raises(ConfigError, match="gita has no train query of type negative; use a dataset with "
                                          "negatives = true"):
        run_study(st, home=tmp_path / "home", storage="memory", trials=2,
                  candidates=tune_fixture.candidates(st, tmp_path))
