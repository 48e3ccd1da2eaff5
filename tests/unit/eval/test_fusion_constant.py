"""A constant lane normalises to its documented constant (issue #28), despite float residue in the mean."""

from __future__ import annotations

import statistics

import pytest

from workbench.eval.fusion import normalise, weighted
from workbench.run import Hit, Run


def _hits(v, n):
    return [Hit(f"d{i}", v) for i in range(n)]


@pytest.mark.parametrize("v,n", [(0.1, 3), (0.1, 10), (0.060792710632085800, 19), (1e300, 5), (-7.3, 6)])
def test_a_constant_list_zscores_to_zero_and_minmaxes_to_one(v, n):
    got = normalise(_hits(v, n), "zscore")
    assert got == {f"d{i}": 0.0 for i in range(n)}  # before the fix: 0.1 x 3 gave -1.0 each
    assert normalise(_hits(v, n), "minmax") == {f"d{i}": 1.0 for i in range(n)}


def test_the_residue_is_real():
    # the reason for the tolerance: the mean of three 0.1s is not 0.1, so the naive deviation is not 0
    assert sum([0.1] * 3) / 3 != 0.1
    assert statistics.pstdev([0.1] * 3) == 0.0  # (statistics uses exact fractions; the fusion code uses floats)


def test_near_constant_within_the_relative_tolerance_is_constant_and_real_spreads_are_not():
    import math

    x = 0.1
    up = math.nextafter(x, 1.0)  # one ulp apart: spread 1.4e-17 <= 1e-12 * 0.1
    assert normalise([Hit("a", up), Hit("b", x)], "zscore") == {"a": 0.0, "b": 0.0}
    assert normalise([Hit("a", up), Hit("b", x)], "minmax") == {"a": 1.0, "b": 1.0}
    # tiny magnitudes with a real relative spread keep their z-scores: ±1 for two values
    assert normalise([Hit("a", 2e-17), Hit("b", 1e-17)], "zscore") == pytest.approx({"a": 1.0, "b": -1.0})
    assert normalise([Hit("a", 2e-17), Hit("b", 1e-17)], "minmax") == {"a": 1.0, "b": 0.0}
    assert normalise([Hit("a", 0.0), Hit("b", 0.0)], "zscore") == {"a": 0.0, "b": 0.0}


def test_a_constant_lane_does_not_sink_its_documents_in_a_weighted_zscore_fusion():
    runs = {"ft": Run({"q": [Hit("d1", 0.1), Hit("d2", 0.1), Hit("d3", 0.1)]}, "ft"),
            "vec": Run({"q": [Hit("d4", 3.0), Hit("d5", 2.0), Hit("d6", 1.0)]}, "vec")}
    fused = weighted(runs, norm="zscore")
    # ft contributes 0 to d1..d3; vec: d4 +1.2247, d5 0, d6 -1.2247. Ties at 0 by doc_id ascending.
    assert [h.doc_id for h in fused["q"]] == ["d4", "d1", "d2", "d3", "d5", "d6"]  # before: d1..d3 at -1, below d5
    assert {h.doc_id: h.score for h in fused["q"]}["d1"] == 0.0


def test_the_fast_evaluator_agrees_on_a_constant_lane():
    """fasteval mirrors fusion.normalise: the same constant rule, the same fused order."""
    from workbench.eval.fasteval import CandidateMatrix
    from workbench.types import Qrel

    runs = {"ft": Run({"q": [Hit("d1", 0.1), Hit("d2", 0.1), Hit("d3", 0.1)]}, "ft"),
            "vec": Run({"q": [Hit("d4", 3.0), Hit("d5", 2.0), Hit("d6", 1.0)]}, "vec")}
    fe = CandidateMatrix(runs, [Qrel("q", "d1", 1)], ["q"])
    z = fe._normalised("ft", 3, "zscore")
    assert z.tolist() == [[0.0, 0.0, 0.0]]
    assert fe._normalised("ft", 3, "minmax").tolist() == [[1.0, 1.0, 1.0]]
