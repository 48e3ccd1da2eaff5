"""The multiple-comparison correction (Holm 1979) and rank-biased overlap (Webber, Moffat and Zobel 2010)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from workbench.eval.rbo import rbo, rbo_by_query
from workbench.eval.stats import adjust_pvalues, sign_flip_p
from workbench.run import Run


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.5 (m = 4): 4 × 0.01 = 0.04; 3 × 0.03 = 0.09; 2 × 0.04 = 0.08 → 0.09 (monotone);
    # 1 × 0.5 = 0.5; back in the input order
    got = adjust_pvalues([0.01, 0.04, 0.03, 0.5])
    assert got == pytest.approx([0.04, 0.09, 0.09, 0.5])


@pytest.mark.parametrize("p", [[0.001, 0.2, 0.049, 0.05, 0.8, 0.013], [0.5], [0.0, 1.0, 0.3], [0.02] * 7])
@pytest.mark.parametrize("method", ["holm", "bonferroni", "fdr_bh"])
def test_adjustments_equal_statsmodels(p, method):
    assert adjust_pvalues(p, method) == pytest.approx(multipletests(p, method=method)[1])


def test_nan_is_left_out_of_the_family_and_none_keeps_the_raw_values():
    got = adjust_pvalues([0.01, math.nan, 0.04])
    assert got[0] == pytest.approx(0.02) and math.isnan(got[1]) and got[2] == pytest.approx(0.04)
    assert adjust_pvalues([0.01, 0.2], "none").tolist() == [0.01, 0.2]
    assert adjust_pvalues([]).tolist() == []


def test_bad_p_values_and_methods_are_named():
    with pytest.raises(ValueError, match=r"\[0, 1\].*1\.5"):
        adjust_pvalues([0.1, 1.5])
    with pytest.raises(ValueError, match="unknown p-value adjustment 'hollm'.*holm"):
        adjust_pvalues([0.1], "hollm")


# ---------------------------------------------------------------- RBO

def test_rbo_equal_lengths_by_hand():
    # eq. 30 with p = 0.5: A1 = 1, A2 = 1/2, A3 = 1 →
    # (1 − p)/p · (1·0.5 + 0.5·0.25 + 1·0.125) + A3 · p³ = 0.75 + 0.125
    assert rbo(["a", "b", "c"], ["a", "c", "b"], 0.5) == pytest.approx(0.875)


def test_rbo_uneven_lengths_by_hand():
    # eq. 32, S = (a, b), L = (b, c, a), p = 0.5: X1 = 0, X2 = 1, X3 = 2 (S whole against L[:3]); s = 2, l = 3
    # Σ X_d/d p^d = 1/2·1/4 + 2/3·1/8 = 0.2083; Σ_{d=3} X_s(d−s)/(s d) p^d = 1·1/6·1/8 = 0.0208
    # ((X_l − X_s)/l + X_s/s) p^l = (1/3 + 1/2)/8 = 0.1042 → 1/3
    assert rbo(["a", "b"], ["b", "c", "a"], 0.5) == pytest.approx(1 / 3)
    assert rbo(["b", "c", "a"], ["a", "b"], 0.5) == pytest.approx(1 / 3)  # symmetric


def test_rbo_bounds_and_the_weight_of_the_top():
    assert rbo(list("abcdefghij"), list("abcdefghij")) == pytest.approx(1.0)
    assert rbo(list("abc"), list("xyz")) == 0.0
    assert rbo([], []) == 1.0 and rbo(["a"], []) == 0.0
    # a swap at the top costs more than the same swap at the bottom (top-weighted)
    top = rbo(list("abcdefghij"), list("bacdefghij"))
    bottom = rbo(list("abcdefghij"), list("abcdefghji"))
    assert 0 < top < bottom < 1


def test_rbo_rejects_repeats_and_bad_persistence():
    with pytest.raises(ValueError, match="document 'a' twice"):
        rbo(["a", "b", "a"], ["a"])
    for p in (0, 1, 1.2, -0.1):
        with pytest.raises(ValueError, match="persistence"):
            rbo(["a"], ["a"], p)


def test_sign_flip_p_enumerates_in_bounded_batches():
    """20 queries all gaining: 2^20 patterns enumerated (in batches of 200,000), two as extreme: p = 2/2^20."""
    assert sign_flip_p(np.ones(20), 0, 2 ** 20) == 2 / 2 ** 20
    # |Σd| = 2.5; with the 2 kept +: (s1, s2, s4) = (+,+,+) 2.5, (+,-,±) 4.5 and 3.5, (-,-,+) 2.5 reach it: 4 of 8,
    # and the mirror images with the 2 flipped: 8 of 16
    d = np.array([1.0, -1.0, 2.0, 0.5])
    assert sign_flip_p(d, 0) == 8 / 16


def test_rbo_by_query_reads_runs_and_cuts_at_depth():
    a = Run({"q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)], "q2": [("d9", 1.0)]})
    b = Run({"q1": [("d1", 9.0), ("d3", 8.0), ("d2", 7.0)]})
    got = rbo_by_query(a, b, depth=3, p=0.5)
    assert got == {"q1": pytest.approx(0.875), "q2": 0.0}
    assert rbo_by_query(a, b, depth=1, p=0.5)["q1"] == pytest.approx(1.0)
    assert np.isfinite(list(got.values())).all()
    for depth in (0, -3, 2.5, True):  # two empty prefixes would read as identical lists (1.0)
        with pytest.raises(ValueError, match="depth must be an integer >= 1"):
            rbo_by_query(a, b, depth=depth)


def test_compare_fisher_p_is_exact_when_few_queries_differ():
    """Six of 40 queries gain under run b (recall 1/6, 1/6, 1/5, 2/15…: sums that round differently in
    another order); every other query ties. The two-sided sign-flip p-value is 2 / 2^6 = 1/32 exactly (only
    the all-plus and all-minus patterns are as extreme). ranx's own randomization test counted tying
    permutations as less extreme and gave p = 0 on the gita's six reference queries that pinning changed."""
    from workbench.results import compare
    from workbench.run import Run
    from workbench.types import Qrel

    qrels, a, b = [], {}, {}
    sizes = [6, 6, 5, 15, 6, 6]  # relevant documents of the six queries that differ
    for i in range(40):
        q = f"q{i:02d}"
        n = sizes[i] if i < 6 else 3
        rel = [f"{q}r{j}" for j in range(n)]
        qrels += [Qrel(q, d, 1) for d in rel]
        extra = 2 if i == 3 else 1  # 2/15 for the fourth
        a[q] = [(rel[0], 1.0)] + [(f"{q}x{j}", 0.5 - j / 100) for j in range(9)]
        b[q] = [(d, 1.0 - j / 100) for j, d in enumerate(rel[: 1 + extra])] + [(f"{q}x{j}", 0.5 - j / 100) for j in range(8)] \
            if i < 6 else a[q]
    cmp = compare({"a": Run(a), "b": Run(b)}, qrels, ["R@10"], permutations=10_000)
    row = cmp.pvalues.iloc[0]
    assert row["mean_b"] - row["mean_a"] == pytest.approx((1 / 6 + 1 / 6 + 1 / 5 + 2 / 15 + 1 / 6 + 1 / 6) / 40)
    assert row["p_value"] == pytest.approx(1 / 32, abs=1e-12)
