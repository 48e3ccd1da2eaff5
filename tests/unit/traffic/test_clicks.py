"""Implicit relevance from clicks (:mod:`workbench.traffic.clicks`): COEC and the cascade model by hand, the
position-based model's EM against clicks simulated from known parameters."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.traffic.clicks import Impression, cascade, coec, ctr_by_rank, grades, pbm

#: Four searches: "a" shows x, y (x clicked), then y, x (y clicked), then x, y (nothing); "b" shows z, x (x clicked).
LOG = [Impression("a", ("x", "y"), frozenset({1})), Impression("a", ("y", "x"), frozenset({1})),
       Impression("a", ("x", "y")), Impression("b", ("z", "x"), frozenset({2}))]


def test_coec_by_hand():
    # CTR: rank 1 shown 4 times, clicked twice (0.5); rank 2 shown 4 times, clicked once (0.25)
    assert ctr_by_rank(LOG) == {1: 0.5, 2: 0.25}
    got = {k: (s.value, s.impressions, s.clicks) for k, s in coec(LOG, min_impressions=1).items()}
    assert got == {("a", "x"): (1 / (0.5 + 0.25 + 0.5), 3, 1),  # 0.8: clicked once where 1.25 clicks were expected
                   ("a", "y"): (1 / (0.25 + 0.5 + 0.25), 3, 1),  # 1.0
                   ("b", "z"): (0.0, 1, 0), ("b", "x"): (1 / 0.25, 1, 1)}  # 4.0: clicked at a rank seldom clicked
    assert set(coec(LOG, min_impressions=2)) == {("a", "x"), ("a", "y")}


def test_the_cascade_model_by_hand():
    # examined: down to the first click (all when none): (a,x) at searches 1 and 3, clicked first at 1 → 1/2;
    # (a,y) at 2 and 3 → 1/2; (b,z) examined once, not clicked → 0; (b,x) examined once, the first click → 1
    got = {k: (s.value, s.impressions) for k, s in cascade(LOG, min_impressions=1).items()}
    assert got == {("a", "x"): (0.5, 2), ("a", "y"): (0.5, 2), ("b", "z"): (0.0, 1), ("b", "x"): (1.0, 1)}
    # a search clicking z first, then x: the first click ends the scan
    again = cascade([*LOG[:3], Impression("b", ("z", "x"), frozenset({2, 1}))], min_impressions=1)
    assert again["b", "z"].value == 1.0 and ("b", "x") not in again  # x below the first click: never examined


def test_the_position_based_model_recovers_simulated_attractiveness_and_examination():
    rng = np.random.default_rng(7)
    gamma = [1.0, 0.6, 0.4, 0.25, 0.15]
    alpha = {(f"q{i}", f"d{j}"): a for i in range(4) for j, a in enumerate((0.9, 0.5, 0.2, 0.6, 0.05))}
    log = []
    for _ in range(6000):
        q = f"q{rng.integers(4)}"
        docs = [f"d{j}" for j in rng.permutation(5)]
        clicked = {r for r, d in enumerate(docs, 1) if rng.random() < alpha[q, d] * gamma[r - 1]}
        log.append(Impression(q, tuple(docs), frozenset(clicked)))
    fit = pbm(log, min_impressions=10)
    assert fit.converged and fit.iterations < 200
    assert list(fit.examination) == [1, 2, 3, 4, 5] and fit.examination[1] == 1.0  # scaled: rank 1 examined
    assert max(abs(fit.examination[r + 1] - g) for r, g in enumerate(gamma)) < 0.05
    err = max(abs(fit.attractiveness[k].value - a) for k, a in alpha.items())
    assert err < 0.08, err  # 1,500 searches a query, each pair shown 1,500 times at every rank in turn
    assert fit.attractiveness["q0", "d0"].impressions == sum(1 for i in log if i.query == "q0")


def test_grades_and_bad_input():
    scores = coec(LOG, min_impressions=1)
    assert grades(scores, (0.9, 2.0)) == {("a", "x"): 0, ("a", "y"): 1, ("b", "z"): 0, ("b", "x"): 2}
    with pytest.raises(ValueError, match="two increasing numbers"):
        grades(scores, (2.0, 1.0))
    with pytest.raises(ValueError, match=r"clicked rank\(s\) \[3\] outside the 2 hits shown"):
        coec([Impression("a", ("x", "y"), frozenset({3}))])
