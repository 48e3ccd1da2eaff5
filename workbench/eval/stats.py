"""Statistics of per-query values: bootstrap confidence intervals and the paired randomisation test.

Both are seeded, so reports are reproducible, and vectorised (numpy), so the dashboard can
compute them on thousands of queries while a page loads:

* :func:`bootstrap_ci` — 95% percentile bootstrap CI of the mean (Efron and Tibshirani,
  *An Introduction to the Bootstrap*, 1993), :data:`RESAMPLES` resamples;
* :func:`paired_test` — the mean paired difference, its bootstrap CI and the two-sided
  p-value of a sign-flip randomisation test (:func:`sign_flip_p`; Smucker, Allan and
  Carterette, "A comparison of statistical significance tests for information retrieval
  evaluation", CIKM 2007); with nz non-zero differences there are 2^nz sign patterns, so
  up to 13 of them the test is exact;
* :func:`adjust_pvalues` — the multiple-comparison correction applied wherever several tests
  are read together (the gate's measures × strata, a study's measures × query types, the
  dashboard's compare page): Holm–Bonferroni by default (:data:`P_ADJUST`), computed by
  statsmodels' ``multipletests``.
"""

from __future__ import annotations

import math

import numpy as np

#: Resamples for the bootstrap and the randomisation test.
RESAMPLES = 10_000

#: The multiple-comparison correction every report applies, as statsmodels names it: Holm's
#: step-down method ("A simple sequentially rejective multiple test procedure", Scand. J. Statist.
#: 1979), which controls the family-wise error rate like Bonferroni and is uniformly more powerful.
P_ADJUST = "holm"
#: How the reports name it.
P_ADJUST_NAME = {"holm": "Holm–Bonferroni", "bonferroni": "Bonferroni", "fdr_bh": "Benjamini–Hochberg (FDR)",
                 "none": "none"}


def adjust_pvalues(pvalues, method: str = P_ADJUST) -> np.ndarray:
    """p-values adjusted for reading them together (one family), by ``method``.

    Args:
        pvalues: the raw two-sided p-values, any sequence of floats in [0, 1]; NaN entries (a test
            that could not run: no queries) are left NaN and are not counted in the family.
        method: a statsmodels ``multipletests`` method (``holm``, ``bonferroni``, ``fdr_bh``…) or
            ``none``.

    Returns:
        the adjusted p-values, same shape and order, each >= its raw value and <= 1.

    Raises:
        ValueError: a p-value outside [0, 1], or an unknown method (the message lists the known ones).
    """
    p = np.asarray(pvalues, dtype=float)
    out = p.copy()
    ok = ~np.isnan(p)
    if ((p[ok] < 0) | (p[ok] > 1)).any():
        raise ValueError(f"p-values must lie in [0, 1], got {p[ok][(p[ok] < 0) | (p[ok] > 1)][:5].tolist()}")
    if method == "none" or not ok.any():
        return out
    from statsmodels.stats.multitest import multipletests

    try:
        out[ok] = multipletests(p[ok], method=method)[1]
    except ValueError as exc:
        raise ValueError(f"unknown p-value adjustment {method!r}: use one of {', '.join(P_ADJUST_NAME)} "
                         f"or another statsmodels multipletests method ({exc})") from None
    return out


def bootstrap_ci(values: np.ndarray, seed: int) -> tuple[float, float]:
    """95% percentile-bootstrap CI of ``values.mean()`` with :data:`RESAMPLES` resamples
    (:func:`bootstrap_ci_columns` on one column); a constant or single value: that value
    twice; empty: NaN."""
    values = np.asarray(values, dtype=float)
    lo, hi = bootstrap_ci_columns(values.reshape(-1, 1), seed, RESAMPLES)
    return float(lo[0]), float(hi[0])


def sign_flip_p(d: np.ndarray, seed: int, resamples: int = RESAMPLES) -> float:
    """Two-sided p-value of the paired sign-flip randomisation test on differences ``d``.

    Under the null hypothesis each query's difference is as likely to have the other sign
    (Smucker, Allan and Carterette 2007; Fisher's randomisation test). Zero differences
    never change the statistic, so only the nz non-zero ones are flipped: with 2^nz ≤
    ``resamples`` every pattern is enumerated (exact p); otherwise ``resamples`` random
    patterns give p = (1 + #{|Σ±d| ≥ |Σd|}) / (resamples + 1) (Phipson and Smyth 2010,
    never 0). Sums are compared with a relative tolerance of 1e-12 so ties in floating
    point count as ties. Vectorised in batches (one matrix product per batch).

    Args:
        d: per-query differences (any length; NaN not allowed).

    Returns:
        p in (0, 1]; 1.0 when every difference is zero.
    """
    d = np.asarray(d, dtype=float)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return 1.0
    observed = abs(float(d.sum()))
    cut = observed - 1e-12 * max(1.0, observed)
    batch = max(1, 4_000_000 // n)  # sign patterns per matrix product: about 32 MB whatever n and resamples
    if 2 ** n <= resamples:
        hits = 0
        for start in range(0, 2 ** n, batch):
            codes = np.arange(start, min(start + batch, 2 ** n), dtype=np.int64)
            patterns = ((codes[:, None] >> np.arange(n)) & 1) * 2.0 - 1.0
            hits += int(np.count_nonzero(np.abs(patterns @ d) >= cut))
        return hits / 2 ** n
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, resamples, batch):
        signs = rng.integers(0, 2, size=(min(batch, resamples - start), n), dtype=np.int8) * 2.0 - 1.0
        hits += int(np.count_nonzero(np.abs(signs @ d) >= cut))
    return (hits + 1) / (resamples + 1)


def paired_test(a: np.ndarray, b: np.ndarray, seed: int) -> dict[str, float]:
    """``{"mean_diff", "ci_low", "ci_high", "p_value"}`` for per-query values ``a`` and ``b`` of the same queries:
    the mean of ``a − b``, its 95% bootstrap CI (:func:`bootstrap_ci`) and :func:`sign_flip_p`."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = a - b
    lo, hi = bootstrap_ci(d, seed)
    return {"mean_diff": float(d.mean()) if len(d) else math.nan, "ci_low": lo, "ci_high": hi,
            "p_value": sign_flip_p(d, seed)}


def bootstrap_ci_columns(values: np.ndarray, seed: int, resamples: int = 2_000) -> tuple[np.ndarray, np.ndarray]:
    """95% percentile-bootstrap CIs of the mean of each column of ``values`` at once.

    The same resamples of the queries (rows) serve every column: each resample is a
    multinomial count vector ``w`` (n draws with replacement from n rows), and its means
    are ``w @ values / n`` — one matrix product instead of a loop, which keeps the
    dashboard's overview (configs × measures × query types) interactive on thousands of
    queries. Percentile method as :func:`bootstrap_ci` (Efron and Tibshirani 1993).

    Args:
        values: ``(n_queries, n_columns)`` per-query values (NaN not allowed).
        seed: the resampling seed (same seed, same intervals).
        resamples: bootstrap resamples (default 2,000: the dashboard's; reports use
            :data:`RESAMPLES` through :func:`bootstrap_ci`).

    Returns:
        ``(low, high)``, each of shape ``(n_columns,)``; a column with fewer than two rows or
        a constant column gets its mean for both bounds; no rows: NaN.

    Raises:
        ValueError: ``values`` is not two-dimensional or holds NaN.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be (queries, columns), got shape {values.shape}")
    n, m = values.shape
    if n == 0:
        return np.full(m, math.nan), np.full(m, math.nan)
    if np.isnan(values).any():
        raise ValueError("values hold NaN; drop or fill them before bootstrapping")
    mean = values.mean(axis=0)
    if n < 2:
        return mean.copy(), mean.copy()
    rng = np.random.default_rng(seed)
    batch = max(1, 4_000_000 // n)  # at most ~32 MB of counts at a time
    parts = []
    for start in range(0, resamples, batch):
        b = min(batch, resamples - start)
        draws = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]
        counts = np.bincount(draws.ravel(), minlength=b * n).reshape(b, n).astype(float)
        parts.append(counts @ values / n)
    means = np.concatenate(parts)
    low, high = np.percentile(means, [2.5, 97.5], axis=0)
    const = np.all(values == values[0], axis=0)
    low[const], high[const] = mean[const], mean[const]
    return low, high


def outcome_counts(d: np.ndarray, eps: float = 1e-12) -> dict[str, int]:
    """How many paired differences ``d`` (candidate − baseline per query) are ``wins`` (> eps), ``losses``
    (< −eps) and ``ties`` (within ±eps)."""
    d = np.asarray(d, dtype=float)
    return {"wins": int((d > eps).sum()), "losses": int((d < -eps).sum()), "ties": int((np.abs(d) <= eps).sum())}


#: The stratum of every query of a paired comparison (the others are query types).
ALL = "all"

#: The columns of :func:`paired_comparison`, in order.
PAIRED_COLUMNS = ("measure", "stratum", "n", "candidate", "baseline", "delta", "ci_low", "ci_high", "p_value",
                  "p_adjusted", "wins", "losses", "ties")


def paired_comparison(joined, pairs, *, seed: int, by_type=None, adjust: str = P_ADJUST, eps: float = 1e-12):
    """The paired comparison of a candidate and a baseline on the same queries: the one builder that the gate
    (:func:`workbench.gate.decide.paired_checks`), a study's honest report
    (:func:`workbench.tuning.select.honest_report`) and the read API's and dashboard's compare
    (:func:`workbench.results.views.significance`) all use.

    Per measure and stratum (every query, then each query type), the two means, the mean paired difference
    with its 95% percentile-bootstrap CI and the two-sided sign-flip p-value (:func:`paired_test`: Smucker,
    Allan and Carterette, CIKM 2007), then the p-values adjusted over every row with queries, read as one
    family (:func:`adjust_pvalues`, Holm–Bonferroni by default).

    Args:
        joined: a pandas DataFrame, one row per query, both configs' per-query values side by side, with a
            ``query_type`` column. Rows are resampled in this order, so the same frame and seed give the
            same intervals and p-values.
        pairs: measure name → (candidate column, baseline column), e.g. ``{"R@10": ("R@10", "R@10__base")}``.
        seed: the bootstrap and randomisation seed.
        by_type: the measures also compared per query type (query types sorted); None: every measure.
        adjust: the correction (a :func:`adjust_pvalues` method).
        eps: a difference within ``±eps`` is a tie (``wins``: candidate − baseline > eps).

    Returns:
        a DataFrame with :data:`PAIRED_COLUMNS`: for each measure in ``pairs`` order, the :data:`ALL` row then
        one per query type. A stratum without queries has ``n`` 0, NaN statistics, and stays out of the
        family.

    Raises:
        KeyError: a column of ``pairs`` or ``query_type`` is missing from ``joined``.
        ValueError: an unknown ``adjust`` method.
    """
    import pandas as pd

    typed = set(pairs) if by_type is None else set(by_type)
    types = sorted(joined["query_type"].unique()) if len(joined) else []
    rows = []
    for measure, (cand_col, base_col) in pairs.items():
        strata = [(ALL, joined)]
        if measure in typed:
            strata += [(t, joined[joined["query_type"] == t]) for t in types]
        for stratum, part in strata:
            a, b = part[cand_col].to_numpy(float), part[base_col].to_numpy(float)
            d = a - b
            n = len(d)
            test = paired_test(a, b, seed) if n else {"mean_diff": math.nan, "ci_low": math.nan,
                                                      "ci_high": math.nan, "p_value": math.nan}
            rows.append({"measure": measure, "stratum": stratum, "n": n,
                         "candidate": float(a.mean()) if n else math.nan,
                         "baseline": float(b.mean()) if n else math.nan,
                         "delta": test["mean_diff"], "ci_low": test["ci_low"], "ci_high": test["ci_high"],
                         "p_value": test["p_value"], "p_adjusted": math.nan, **outcome_counts(d, eps)})
    out = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))
    if len(out):
        out["p_adjusted"] = adjust_pvalues(out["p_value"].to_numpy(float), adjust)
    return out
