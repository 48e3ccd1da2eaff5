"""Statistics of per-query values: bootstrap confidence intervals and the paired randomisation test.

Both use ``scipy.stats`` with a fixed seed, so reports are reproducible:

* :func:`bootstrap_ci` — 95% percentile bootstrap CI of the mean (Efron and Tibshirani,
  *An Introduction to the Bootstrap*, 1993), :data:`RESAMPLES` resamples;
* :func:`paired_test` — the mean paired difference, its bootstrap CI and the two-sided
  p-value of a sign-flip randomisation test (Smucker, Allan and Carterette, "A comparison
  of statistical significance tests for information retrieval evaluation", CIKM 2007);
  with n queries there are 2^n sign patterns, so below 14 queries the test is exact.
"""

from __future__ import annotations

import math

import numpy as np

#: Resamples for the bootstrap and the randomisation test.
RESAMPLES = 10_000


def bootstrap_ci(values: np.ndarray, seed: int) -> tuple[float, float]:
    """95% percentile-bootstrap CI of ``values.mean()`` (a constant or single value: that value twice; empty: NaN)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    if len(values) < 2 or np.all(values == values[0]):
        v = float(values.mean()) if len(values) else math.nan
        return v, v
    res = stats.bootstrap((values,), np.mean, n_resamples=RESAMPLES, method="percentile", random_state=seed)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired_test(a: np.ndarray, b: np.ndarray, seed: int) -> dict[str, float]:
    """``{"mean_diff", "ci_low", "ci_high", "p_value"}`` for per-query values ``a`` and ``b`` of the same queries."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = a - b
    lo, hi = bootstrap_ci(d, seed)
    if len(d) < 2 or np.all(d == 0):
        p = 1.0
    else:
        res = stats.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                     n_resamples=RESAMPLES, alternative="two-sided", random_state=seed)
        p = float(res.pvalue)
    return {"mean_diff": float(d.mean()) if len(d) else math.nan, "ci_low": lo, "ci_high": hi, "p_value": p}
