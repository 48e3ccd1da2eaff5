"""Inter-rater agreement on graded relevance, and the adjudication queue.

**Units and values.** A *unit* is one (query_id, doc_id) pair of a dataset; its *values* are
the current grades (0, 1, 2) of the raters who judged it. "Cannot judge" is no value: it is
missing data, exactly like a rater who never saw the pair. A judgment made on a document
whose text has changed since (stale, see :func:`workbench.judging.store.document_hash`) is
left out too when the built documents' hashes are given. Only units with at least two
values are *pairable* and enter any coefficient.

**Krippendorff's alpha, ordinal** (Krippendorff, "Computing Krippendorff's Alpha-Reliability",
2011, sections B–E): from the coincidence matrix ``o_ck`` (every ordered pair of values
from two different raters on one unit, weighted ``1 / (m_u - 1)`` for a unit with ``m_u``
values), its marginals ``n_c`` and ``n = Σ n_c``::

    alpha = 1 - (n - 1) · Σ_ck o_ck δ²_ck / Σ_ck n_c n_k δ²_ck
    ordinal  δ²_ck = (Σ_{g=c..k} n_g - (n_c + n_k) / 2)²        (c ≤ k; symmetric)

computed by the ``krippendorff`` package with ``value_domain = [0, 1, 2]``. It takes any
number of raters and missing values, and is comparable across query types.

**Cohen's kappa, linearly weighted** (Cohen, "Weighted kappa: Nominal scale agreement with
provision for scaled disagreement or partial credit", Psychological Bulletin 70(4), 1968)
for each pair of raters on the units both graded: with the 3 × 3 confusion table ``O``
(rows: the first rater's grade, columns: the second's), ``E_ij = row_i · col_j / N`` and
weights ``w_ij = |i - j|``::

    kappa_w = 1 - Σ w_ij O_ij / Σ w_ij E_ij

computed by scikit-learn's ``cohen_kappa_score(weights="linear", labels=[0, 1, 2])``.

**Per rater** (to find the rater who reads differently): *alpha over the units they judged*
(every rater's grades on the pairable units that include one of theirs) and their *mean
kappa* (the plain mean of their pairwise kappas with each other rater with whom they share
at least :data:`MIN_SHARED` units and a defined kappa).

**Confidence intervals**: 95% percentile bootstrap (Efron and Tibshirani, *An Introduction
to the Bootstrap*, 1993). The resampling unit is the (query, document) pair: each of
``resamples`` (default :data:`AGREEMENT_RESAMPLES`) resamples draws the pairable units of the
statistic with replacement, same count, and recomputes it; a resample where the statistic
is undefined (no variation) is skipped. Seeded (default :data:`SEED`); each statistic uses
its own stream derived from the seed and its name, so an interval does not change when
other raters or types are added. The resampled statistics come from the same coincidence
and confusion tables in vectorised form (:func:`alpha_from_coincidence`,
:func:`kappa_from_confusion`), checked against the two packages in the tests.

**Adjudication queue** (:func:`adjudication_queue`, adjudicators only): a pair waits for an
adjudicator when its current, non-stale grades disagree — one rater says 0 (not relevant) and
another 1 or 2 (always), or they differ by at least the dataset's ``adjudicate_at`` (1 by
default, :data:`~workbench.judging.store.DEFAULT_ADJUDICATE_AT`: every disagreement, 1 vs 2
too, since "relevant" and "highly relevant" weigh differently in nDCG; a team that wants 1 vs 2
settled as 1 without an adjudicator sets ``workbench judge settings -d DATASET --adjudicate-at 2``)
— or when it is left short by "cannot judge" with no other rater left to ask
(:func:`workbench.judging.layers.short_pairs` with no open slot; reason ``cannot judge, no other
rater``) — and it has no (non-stale) adjudication, **or when a rater judged it again
after its latest adjudication** (undo and re-judge, an import): the adjudicator decided on
grades and notes that have changed since, so they see it again, with the earlier decision.
Until they decide again that earlier adjudication stays the final grade
(:mod:`workbench.judging.layers`).
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from workbench.errors import DataError
from workbench.judging.layers import is_stale, short_pairs  # is_stale: the rule of final_grades, used here too
from workbench.judging.store import GRADES, JudgeError, JudgmentStore, Rater
from workbench.types import DEFAULT_SEED

#: The grades, in order (Krippendorff's value domain, the kappa labels).
VALUES: tuple[int, ...] = tuple(sorted(GRADES))

#: Bootstrap resamples per confidence interval.
AGREEMENT_RESAMPLES = 2_000

#: Default bootstrap seed (the workbench's; ``workbench gate`` uses the same).
SEED = DEFAULT_SEED

#: Units two raters must share for their pair to enter a rater's mean kappa.
MIN_SHARED = 2

LEVELS = ("nominal", "ordinal", "interval")
#: The levels of measurement the ``krippendorff`` package takes (this module computes the first three, :data:`LEVELS`).
Level = Literal["nominal", "ordinal", "interval", "ratio"]


@dataclass(frozen=True)
class Estimate:
    """A coefficient with its 95% bootstrap interval.

    Attributes:
        value: the point estimate, None when undefined (no pairable units, or no variation
            in the values: chance agreement is then perfect and the ratio is 0 / 0).
        low, high: the percentile interval, None when ``value`` is None or no resample was defined.
        units: the pairable units it was computed on.
    """

    value: float | None
    low: float | None
    high: float | None
    units: int

    def to_json(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "units": self.units}


# ---------------------------------------------------------------- tables


def reliability_data(rows: Iterable[Mapping], doc_hashes: Mapping[str, str] | None = None
                     ) -> tuple[list[str], list[tuple[str, str]], np.ndarray]:
    """Krippendorff's reliability data from judgment rows.

    Args:
        rows: each rater's current judgment, as :meth:`JudgmentStore.current` returns them
            (``query_id``, ``doc_id``, ``rater``, ``grade`` — None for cannot judge —,
            ``cannot_judge``, ``doc_sha256``).
        doc_hashes: doc_id → the built document's hash; a judgment with another stored hash is
            stale and left out. None: nothing is stale.

    Returns:
        ``(raters, units, data)``: rater names (sorted), units ``(query_id, doc_id)`` (sorted)
        and ``data`` of shape ``(len(raters), len(units))`` with the grade or NaN (missing).
        Units with no grade at all are not listed.

    Raises:
        DataError: one rater has two rows for one unit, or a grade outside 0..2.
    """
    grades: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for r in rows:
        if r.get("cannot_judge") or r.get("grade") is None or is_stale(r, doc_hashes):
            continue
        g = r["grade"]
        if isinstance(g, bool) or int(g) != g or int(g) not in GRADES:
            raise DataError(f"grade {g!r} of {r['rater']} on {r['query_id']} / {r['doc_id']} is not one of "
                            f"{list(VALUES)}; fix the rows passed in")
        unit = (r["query_id"], r["doc_id"])
        if r["rater"] in grades[unit]:
            raise DataError(f"{r['rater']} has two current grades on {unit[0]} / {unit[1]}; pass one row per rater "
                            "and pair (JudgmentStore.current)")
        grades[unit][r["rater"]] = int(g)
    raters = sorted({name for g in grades.values() for name in g})
    units = sorted(grades)
    index = {name: i for i, name in enumerate(raters)}
    data = np.full((len(raters), len(units)), np.nan)
    for j, unit in enumerate(units):
        for name, g in grades[unit].items():
            data[index[name], j] = g
    return raters, units, data


def value_counts(data: np.ndarray, values: Sequence[float] = VALUES) -> np.ndarray:
    """``(units, V)`` counts of each of ``values`` per unit from reliability data ``(raters, units)``."""
    data = np.asarray(data, dtype=float)
    return np.stack([(data == v).sum(axis=0) for v in values], axis=1).astype(float).reshape(data.shape[1], len(values))


def unit_coincidences(counts: np.ndarray) -> np.ndarray:
    """Each unit's contribution to Krippendorff's coincidence matrix (Krippendorff 2011, section C).

    Args:
        counts: ``(units, V)`` value counts per unit (:func:`value_counts`).

    Returns:
        ``(units, V, V)``: ``(n_uc n_uk - [c = k] n_uc) / (m_u - 1)`` for units with ``m_u ≥ 2``
        values, zeros for the others (they are not pairable). Summed over units it is ``o_ck``.
    """
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    pairs = counts[:, :, None] * counts[:, None, :] - np.einsum("uc,ck->uck", counts, np.eye(counts.shape[1]))
    scale = np.where(m >= 2, 1.0 / np.maximum(m - 1, 1), 0.0)
    return pairs * scale[:, None, None]


def coincidence_matrix(data: np.ndarray, values: Sequence[float] = VALUES) -> np.ndarray:
    """Krippendorff's ``V × V`` coincidence matrix of reliability data ``(raters, units)`` (NaN missing)
    over the value domain ``values`` (sorted)."""
    return unit_coincidences(value_counts(data, values)).sum(axis=0)


def _delta2(n_c: np.ndarray, level: str, values: Sequence[float]) -> np.ndarray:
    """Squared difference functions δ²_ck (Krippendorff 2011, section E) for marginals ``n_c``
    of shape ``(..., V)`` over the sorted value domain ``values``; returns ``(..., V, V)``."""
    v = np.asarray(values, dtype=float)
    shape = n_c.shape[:-1] + (len(v), len(v))
    if level == "nominal":
        return np.broadcast_to(1.0 - np.eye(len(v)), shape).copy()
    if level == "interval":
        return np.broadcast_to((v[:, None] - v[None, :]) ** 2, shape).copy()
    if level == "ordinal":
        cum = np.cumsum(n_c, axis=-1)
        lo = np.minimum.outer(np.arange(len(v)), np.arange(len(v)))
        hi = np.maximum.outer(np.arange(len(v)), np.arange(len(v)))
        before = np.concatenate([np.zeros(n_c.shape[:-1] + (1,)), cum[..., :-1]], axis=-1)
        between = cum[..., hi] - before[..., lo]          # Σ_{g = min(c,k)}^{max(c,k)} n_g
        return (between - (n_c[..., :, None] + n_c[..., None, :]) / 2.0) ** 2
    raise ValueError(f"level {level!r} must be one of {', '.join(LEVELS)}")


def alpha_from_coincidence(o: np.ndarray, level: str = "ordinal", values: Sequence[float] = VALUES) -> np.ndarray:
    """Krippendorff's alpha from coincidence matrices (vectorised over leading axes).

    ``alpha = 1 - (n - 1) Σ o_ck δ²_ck / Σ n_c n_k δ²_ck`` (Krippendorff 2011, sections C–E).

    Args:
        o: ``(..., V, V)`` coincidence matrices.
        level: ``nominal``, ``ordinal`` or ``interval``.
        values: the sorted value domain the matrices' rows stand for (default the grades 0, 1, 2).

    Returns:
        ``(...)`` alphas; NaN where undefined (fewer than two pairable values, or no variation).

    Raises:
        ValueError: an unknown level.
    """
    o = np.asarray(o, dtype=float)
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    d2 = _delta2(n_c, level, values)
    observed = (o * d2).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * d2).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.0 - (n - 1.0) * observed / expected
    return np.where((expected > 0) & (n >= 2), out, np.nan)


def krippendorff_alpha(data: np.ndarray, level: Level = "ordinal", values: Sequence[float] = VALUES) -> float | None:
    """Krippendorff's alpha of reliability data by the ``krippendorff`` package (Krippendorff 2011).

    Args:
        data: ``(raters, units)`` grades, NaN for missing (cannot judge, not judged).
        level: ``nominal``, ``ordinal`` or ``interval``.
        values: the value domain (default the grades 0, 1, 2; ordinal alpha needs it to know
            the ranks of values nobody used).

    Returns:
        alpha, or None when undefined (no unit with two values; no variation at all).
    """
    import krippendorff

    data = np.asarray(data, dtype=float)
    if data.ndim != 2 or data.shape[0] < 2 or not (np.sum(~np.isnan(data), axis=0) >= 2).any():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        a = krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=list(values))
    return None if a is None or not math.isfinite(a) else float(a)


def confusion(a: Sequence[int], b: Sequence[int]) -> np.ndarray:
    """``3 × 3`` confusion table of two raters' grades on the same units (rows: ``a``, columns: ``b``).

    Raises:
        DataError: the sequences differ in length or hold a grade outside 0..2.
    """
    if len(a) != len(b):
        raise DataError(f"two raters' grades must be paired: {len(a)} and {len(b)} values")
    table = np.zeros((len(VALUES), len(VALUES)), dtype=int)
    for x, y in zip(a, b):
        if x not in GRADES or y not in GRADES:
            raise DataError(f"grade pair ({x!r}, {y!r}) is outside {list(VALUES)}")
        table[int(x), int(y)] += 1
    return table


def kappa_from_confusion(c: np.ndarray, weights: str | None = "linear") -> np.ndarray:
    """Cohen's kappa from confusion tables (vectorised over leading axes; Cohen 1960, weighted: Cohen 1968).

    ``kappa = 1 - Σ w_ij O_ij / Σ w_ij E_ij`` with ``E_ij = row_i col_j / N``; weights ``|i - j|``
    (``linear``), ``(i - j)²`` (``quadratic``) or ``[i ≠ j]`` (None: unweighted).

    Returns:
        ``(...)`` kappas; NaN where undefined (no units, or chance disagreement 0).
    """
    c = np.asarray(c, dtype=float)
    k = c.shape[-1]
    i, j = np.indices((k, k))
    w = {"linear": np.abs(i - j), "quadratic": (i - j) ** 2, None: (i != j)}.get(weights)
    if w is None:
        raise ValueError(f"weights {weights!r} must be 'linear', 'quadratic' or None")
    total = c.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = c.sum(axis=-1)[..., :, None] * c.sum(axis=-2)[..., None, :] / total[..., None, None]
        den = (w * expected).sum(axis=(-2, -1))
        out = 1.0 - (w * c).sum(axis=(-2, -1)) / den
    return np.where((total > 0) & (den > 0), out, np.nan)


def cohen_kappa(a: Sequence[int], b: Sequence[int], weights: str | None = "linear") -> float | None:
    """Cohen's kappa of two raters' grades on the same units by scikit-learn's ``cohen_kappa_score``
    (``labels=[0, 1, 2]``; Cohen 1968 for the weighted form). None when undefined (no units, or both
    raters used one and the same grade throughout)."""
    from sklearn.metrics import cohen_kappa_score

    if len(a) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = cohen_kappa_score(list(a), list(b), labels=list(VALUES), weights=weights)
    return None if not math.isfinite(k) else float(k)


# ---------------------------------------------------------------- bootstrap


def _rng(seed: int, label: str) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(label.encode("utf-8"))])


def _resample_counts(n: int, resamples: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Batches of ``(b, n)`` bootstrap count vectors: how often each of n units is drawn in a
    resample of n draws with replacement (as :func:`workbench.eval.stats.bootstrap_ci_columns`)."""
    batch = max(1, 4_000_000 // max(n, 1))
    for start in range(0, resamples, batch):
        b = min(batch, resamples - start)
        draws = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]
        yield np.bincount(draws.ravel(), minlength=b * n).reshape(b, n).astype(float)


def _interval(stats: np.ndarray) -> tuple[float | None, float | None]:
    stats = stats[np.isfinite(stats)]
    if len(stats) == 0:
        return None, None
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def _estimate(value: float | None, boot: np.ndarray | None, units: int) -> Estimate:
    if value is None or boot is None:
        return Estimate(value, None, None, units)
    lo, hi = _interval(boot)
    if lo is not None and hi is not None:  # the package's value and the vectorised resamples may differ in the last bits
        lo = value if abs(lo - value) < 1e-12 else lo
        hi = value if abs(hi - value) < 1e-12 else hi
    return Estimate(value, lo, hi, units)


def alpha_estimate(data: np.ndarray, *, level: Level = "ordinal", seed: int = SEED, resamples: int = AGREEMENT_RESAMPLES,
                   label: str = "alpha") -> Estimate:
    """Krippendorff's alpha of ``(raters, units)`` data with a 95% percentile bootstrap CI over units.

    The point estimate is :func:`krippendorff_alpha` (the package); each resample draws the
    pairable units with replacement and recomputes alpha from the summed per-unit
    coincidences (:func:`alpha_from_coincidence`). ``label`` names the random stream (see the
    module docstring).
    """
    counts = value_counts(data)
    pairable = counts.sum(axis=1) >= 2
    units = int(pairable.sum())
    value = krippendorff_alpha(np.asarray(data)[:, pairable], level) if units else None
    if value is None or resamples <= 0:
        return Estimate(value, None, None, units)
    per_unit = unit_coincidences(counts[pairable]).reshape(units, -1)
    boot = np.concatenate([alpha_from_coincidence((w @ per_unit).reshape(-1, len(VALUES), len(VALUES)), level)
                           for w in _resample_counts(units, resamples, _rng(seed, label))])
    return _estimate(value, boot, units)


def _onehots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(units, 9)`` one-hot confusion cells of paired grades (zero rows where either is NaN)."""
    out = np.zeros((len(a), len(VALUES) ** 2))
    ok = ~(np.isnan(a) | np.isnan(b))
    out[np.flatnonzero(ok), (a[ok] * len(VALUES) + b[ok]).astype(int)] = 1.0
    return out


def kappa_estimate(a: np.ndarray, b: np.ndarray, *, seed: int = SEED, resamples: int = AGREEMENT_RESAMPLES,
                   label: str = "kappa") -> Estimate:
    """Linearly weighted Cohen's kappa of two raters (vectors over the same units, NaN where one did
    not grade) with a 95% percentile bootstrap CI over the units both graded. The point estimate
    is :func:`cohen_kappa` (scikit-learn); resamples use :func:`kappa_from_confusion`."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = ~(np.isnan(a) | np.isnan(b))
    units = int(ok.sum())
    value = cohen_kappa(a[ok].astype(int).tolist(), b[ok].astype(int).tolist()) if units else None
    if value is None or resamples <= 0:
        return Estimate(value, None, None, units)
    cells = _onehots(a[ok], b[ok])
    boot = np.concatenate([kappa_from_confusion((w @ cells).reshape(-1, len(VALUES), len(VALUES)))
                           for w in _resample_counts(units, resamples, _rng(seed, label))])
    return _estimate(value, boot, units)


def _mean_kappa_estimate(data: np.ndarray, r: int, *, seed: int, resamples: int, label: str) -> tuple[Estimate, list[int]]:
    """Rater ``r``'s mean kappa with every other rater sharing ≥ MIN_SHARED units and a defined kappa;
    the CI resamples the pairable units ``r`` graded (one resample serves every partner)."""
    mine = ~np.isnan(data[r]) & (np.sum(~np.isnan(data), axis=0) >= 2)
    sub = data[:, mine]
    partners: list[int] = []
    values: list[float] = []
    cells: list[np.ndarray] = []
    for p in range(data.shape[0]):
        if p == r:
            continue
        both = ~(np.isnan(sub[r]) | np.isnan(sub[p]))
        if both.sum() < MIN_SHARED:
            continue
        k = cohen_kappa(sub[r, both].astype(int).tolist(), sub[p, both].astype(int).tolist())
        if k is None:
            continue
        partners.append(p)
        values.append(k)
        cells.append(_onehots(sub[r], sub[p]))
    units = int(mine.sum())
    if not values:
        return Estimate(None, None, None, units), []
    value = float(np.mean(values))
    if resamples <= 0:
        return Estimate(value, None, None, units), partners
    stack = np.stack(cells, axis=1).reshape(units, -1)  # (units, partners * 9)
    parts = []
    for w in _resample_counts(units, resamples, _rng(seed, label)):
        kb = kappa_from_confusion((w @ stack).reshape(len(w), len(partners), len(VALUES), len(VALUES)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            parts.append(np.nanmean(kb, axis=1))
    return _estimate(value, np.concatenate(parts), units), partners


# ---------------------------------------------------------------- the report


def agreement(rows: Iterable[Mapping], *, query_types: Mapping[str, str] | None = None,
              doc_hashes: Mapping[str, str] | None = None, seed: int = SEED, resamples: int = AGREEMENT_RESAMPLES) -> dict:
    """Agreement among the raters of one dataset (see the module docstring for every definition).

    Args:
        rows: each rater's current judgment (:meth:`JudgmentStore.current`).
        query_types: query_id → query type (``paraphrase``, ``term``, …) for the per-type
            alphas; None: no per-type breakdown. A query not in it counts as ``unknown``.
        doc_hashes: doc_id → built document hash; stale judgments are left out (counted).
        seed, resamples: the bootstrap's (:data:`SEED`, :data:`AGREEMENT_RESAMPLES`).

    Returns:
        A JSON-ready dict::

            {"raters": [name, ...], "units": int (pairs with ≥ 1 grade),
             "pairable_units": int (pairs with ≥ 2 grades: what every coefficient uses),
             "grades": int, "cannot_judge": int, "stale": int,
             "alpha": Estimate, "by_type": {type: Estimate},
             "without_exact": {"query_types": [...], "left_out_units": int, "left_out_pairable_units": int,
                               "alpha": Estimate} (only with query_types: alpha without the pairs of
                               queries whose built qrels are exact, types.EXACT_QUERY_TYPES, which are
                               no longer pooled for scholars),
             "by_rater": {name: {"grades": int, "alpha": Estimate (units they judged),
                                 "mean_kappa": Estimate, "partners": [name, ...]}},
             "pairs": [{"a": name, "b": name, "kappa": Estimate, "kappa_unweighted": float|None,
                        "exact_agreement": float|None, "confusion": 3×3 list (rows a, columns b)}],
             "pooled_confusion": 3×3 list (the pairs' tables summed),
             "coincidence": 3×3 list (Krippendorff's, for ordinal alpha),
             "exact_agreement": float|None (share of rater pairs on a unit giving the same grade),
             "bootstrap": {"unit": "(query_id, doc_id) pair", "resamples": int, "seed": int,
                           "interval": "95% percentile"}}

        Estimates are dicts ``{"value", "low", "high", "units"}``.

    Raises:
        DataError: as :func:`reliability_data`.
    """
    rows = list(rows)
    raters, units, data = reliability_data(rows, doc_hashes)
    cannot = sum(1 for r in rows if r.get("cannot_judge") and not is_stale(r, doc_hashes))
    stale = sum(1 for r in rows if is_stale(r, doc_hashes) and not r.get("cannot_judge") and r.get("grade") is not None)
    m = np.sum(~np.isnan(data), axis=0) if units else np.zeros(0)
    out: dict = {
        "raters": raters, "units": len(units), "pairable_units": int((m >= 2).sum()),
        "grades": int(np.sum(~np.isnan(data))), "cannot_judge": cannot, "stale": stale,
        "alpha": alpha_estimate(data, seed=seed, resamples=resamples, label="alpha").to_json(),
        "by_type": {}, "by_rater": {}, "pairs": [],
        "bootstrap": {"unit": "(query_id, doc_id) pair", "resamples": resamples, "seed": seed,
                      "interval": "95% percentile"},
    }
    if query_types is not None and units:
        types = np.array([query_types.get(q, "unknown") for q, _d in units])
        for t in sorted(set(types.tolist())):
            out["by_type"][t] = alpha_estimate(data[:, types == t], seed=seed, resamples=resamples,
                                               label=f"type:{t}").to_json()
        from workbench.types import EXACT_QUERY_TYPES as EXACT_TYPES

        judgeable = ~np.isin(types, list(EXACT_TYPES))
        out["without_exact"] = {
            "query_types": list(EXACT_TYPES), "left_out_units": int((~judgeable).sum()),
            "left_out_pairable_units": int(((m >= 2) & ~judgeable).sum()),
            "alpha": alpha_estimate(data[:, judgeable], seed=seed, resamples=resamples,
                                    label="without-exact").to_json()}
    pooled = np.zeros((len(VALUES), len(VALUES)), dtype=int)
    for i, a in enumerate(raters):
        for j in range(i + 1, len(raters)):
            b = raters[j]
            both = ~(np.isnan(data[i]) | np.isnan(data[j]))
            if not both.any():
                continue
            ga, gb = data[i, both].astype(int).tolist(), data[j, both].astype(int).tolist()
            table = confusion(ga, gb)
            pooled += table
            out["pairs"].append({
                "a": str(a), "b": str(b),
                "kappa": kappa_estimate(data[i], data[j], seed=seed, resamples=resamples, label=f"pair:{a}|{b}").to_json(),
                "kappa_unweighted": cohen_kappa(ga, gb, weights=None),
                "exact_agreement": float(np.trace(table) / table.sum()),
                "confusion": table.tolist(),
            })
    for i, name in enumerate(raters):
        judged = ~np.isnan(data[i])
        mean_k, partners = _mean_kappa_estimate(data, i, seed=seed, resamples=resamples, label=f"rater-kappa:{name}")
        out["by_rater"][name] = {
            "grades": int(judged.sum()),
            "alpha": alpha_estimate(data[:, judged], seed=seed, resamples=resamples, label=f"rater:{name}").to_json(),
            "mean_kappa": mean_k.to_json(),
            "partners": [raters[p] for p in partners],
        }
    out["pooled_confusion"] = pooled.tolist()
    out["coincidence"] = coincidence_matrix(data).round(6).tolist() if units else np.zeros((3, 3)).tolist()
    out["exact_agreement"] = float(np.trace(pooled) / pooled.sum()) if pooled.sum() else None
    return out


def doc_hashes_of(ds, doc_ids: Iterable[str] | None = None) -> dict[str, str]:
    """doc_id → :func:`~workbench.judging.store.document_hash` of the built dataset's documents
    (``ds``: :class:`workbench.data.catalog.Dataset`), only for ``doc_ids`` when given (hashing is
    the slow part on a large dataset)."""
    from workbench.judging.store import document_hash

    wanted = None if doc_ids is None else set(doc_ids)
    return {d.doc_id: document_hash(d) for d in ds.documents if wanted is None or d.doc_id in wanted}


def store_agreement(store: JudgmentStore, dataset: str, *, ds=None, query_types: Mapping[str, str] | None = None,
                    doc_hashes: Mapping[str, str] | None = None, seed: int = SEED,
                    resamples: int = AGREEMENT_RESAMPLES) -> dict:
    """:func:`agreement` on the store's current judgments of ``dataset`` (everyone's: for engineers
    and the adjudicators' panel, never for a plain rater's page).

    Args:
        ds: the built dataset (:class:`workbench.data.catalog.Dataset`); when given, ``query_types``
            and ``doc_hashes`` default to its queries' types and its documents' hashes.

    Raises:
        PgError: the server cannot be reached.
    """
    rows = store.current(dataset)
    if ds is not None:
        query_types = query_types if query_types is not None else {q.query_id: q.query_type for q in ds.queries}
        doc_hashes = doc_hashes if doc_hashes is not None else doc_hashes_of(ds, (r["doc_id"] for r in rows))
    return agreement(rows, query_types=query_types, doc_hashes=doc_hashes, seed=seed, resamples=resamples)


# ---------------------------------------------------------------- adjudication


def disagreements(rows: Iterable[Mapping], adjudications: Iterable[Mapping], adjudicate_at: int, *,
                  doc_hashes: Mapping[str, str] | None = None) -> list[dict]:
    """The pairs that wait for an adjudicator (the rule is in the module docstring); no access check.

    Args:
        rows: each rater's current judgment (:meth:`JudgmentStore.current`).
        adjudications: the latest adjudication per pair (:meth:`JudgmentStore.adjudications`).
        adjudicate_at: the grade difference that sends a pair (1 or 2; 0 vs 1 or 2 goes at either).
        doc_hashes: doc_id → built document hash; stale judgments and adjudications are left out.

    Returns:
        One dict per pair, largest difference first, then by query_id and doc_id::

            {"query_id", "doc_id", "difference": int (0: no two grades), "reason": "not adjudicated" |
             "cannot judge, no other rater" | "judged again after the adjudication",
             "judgments": [{"rater", "grade" (None: cannot judge), "cannot_judge", "note", "judged_at"}],
             "previous_adjudication": None | {"grade", "adjudicator", "note", "adjudicated_at"}}

    Raises:
        JudgeError: ``adjudicate_at`` is not 1 or 2.
    """
    if isinstance(adjudicate_at, bool) or adjudicate_at not in (1, 2):
        raise JudgeError(f"adjudicate at a grade difference of 1 or 2, got {adjudicate_at!r}")

    rows = list(rows)
    stuck = {k for k, s in short_pairs(rows, doc_hashes).items() if s["open_slots"] == 0}
    by_pair: dict[tuple[str, str], list[Mapping]] = defaultdict(list)
    for r in rows:
        if not is_stale(r, doc_hashes):
            by_pair[(r["query_id"], r["doc_id"])].append(r)
    latest = {(a["query_id"], a["doc_id"]): a for a in adjudications if not is_stale(a, doc_hashes)}
    out: list[dict[str, Any]] = []
    for key, js in by_pair.items():
        grades = [int(j["grade"]) for j in js if not j.get("cannot_judge") and j.get("grade") is not None]
        disagree = len(grades) >= 2 and (max(grades) - min(grades) >= adjudicate_at
                                         or (min(grades) == 0 and max(grades) >= 1))
        if not disagree and key not in stuck:
            continue
        adj = latest.get(key)
        if adj is None:
            reason = "not adjudicated" if disagree else "cannot judge, no other rater"
        elif any(j["created_at"] > adj["created_at"] for j in js):
            reason = "judged again after the adjudication"
        else:
            continue
        out.append({
            "query_id": key[0], "doc_id": key[1], "difference": max(grades) - min(grades) if grades else 0,
            "reason": reason,
            "judgments": [{"rater": j["rater"], "grade": None if j.get("cannot_judge") else j.get("grade"),
                           "cannot_judge": bool(j.get("cannot_judge")), "note": j.get("note"),
                           "judged_at": j.get("created_at")} for j in sorted(js, key=lambda j: j["rater"])],
            "previous_adjudication": None if adj is None else {
                "grade": adj["grade"], "adjudicator": adj.get("adjudicator"), "note": adj.get("note"),
                "adjudicated_at": adj.get("created_at")},
        })
    out.sort(key=lambda d: (-d["difference"], d["query_id"], d["doc_id"]))
    return out


def adjudication_rule(adjudicate_at: int) -> str:
    """One sentence saying which pairs wait for an adjudicator at this setting (for the Adjudicate page's
    caption and its "nothing waits" line, and ``workbench judge settings``), e.g. for 1: "pairs whose grades
    differ (0 vs 1, 0 vs 2, 1 vs 2), and pairs a rater could not judge with no other rater left to ask".

    Raises:
        JudgeError: ``adjudicate_at`` is not 1 or 2.
    """
    if isinstance(adjudicate_at, bool) or adjudicate_at not in (1, 2):
        raise JudgeError(f"adjudicate at a grade difference of 1 or 2, got {adjudicate_at!r}")
    which = ("pairs whose grades differ (0 vs 1, 0 vs 2, 1 vs 2)" if adjudicate_at == 1 else
             "pairs where one rater says 0 and another 1 or 2 (1 vs 2 is settled as 1)")
    return f"{which}, and pairs a rater could not judge with no other rater left to ask"


def adjudication_queue(store: JudgmentStore, dataset: str, rater: Rater, *, ds=None,
                       doc_hashes: Mapping[str, str] | None = None) -> list[dict]:
    """The dataset's adjudication queue for an adjudicator (what the dashboard's Adjudicate page shows).

    The rater is checked against the store (still active, still an adjudicator), not only by
    the ``Rater`` object the page holds, so a revoked or demoted token stops seeing it at once.

    Args:
        store: the judgment store.
        dataset: the dataset name.
        rater: who asks (from :meth:`JudgmentStore.rater_by_token`).
        ds: the built dataset (:class:`workbench.data.catalog.Dataset`): ``doc_hashes`` default to its
            documents' (:func:`doc_hashes_of`).
        doc_hashes: doc_id → built document hash (:func:`workbench.judging.store.document_hash`);
            stale judgments need re-judging, not adjudication, and are left out. None (and no
            ``ds``): none is stale.

    Returns:
        :func:`disagreements` with the store's ``adjudicate_at`` for the dataset: dicts with
        ``query_id, doc_id, difference, reason, judgments`` (each rater's name, grade, note,
        time) and ``previous_adjudication``.

    Raises:
        JudgeError: the rater is a plain rater, revoked, or unknown (nothing is read).
        PgError: the server cannot be reached.
    """
    current = store.rater(rater.name) if isinstance(rater, Rater) else None
    if current is None or current.rater_id != rater.rater_id:
        raise JudgeError(f"{getattr(rater, 'name', rater)!r} is not an active rater of this store; sign in again")
    if not current.is_adjudicator:
        raise JudgeError(f"{current.name} is a rater, not an adjudicator: only adjudicators see the adjudication queue "
                         "(an adjudicator's token is made with `workbench judge rater add NAME --adjudicator`)")
    with store.snapshot():
        rows, adjudications, at = store.current(dataset), store.adjudications(dataset), store.adjudicate_at(dataset)
    if ds is not None and doc_hashes is None:
        doc_hashes = doc_hashes_of(ds, (r["doc_id"] for r in (*rows, *adjudications)))
    return disagreements(rows, adjudications, at, doc_hashes=doc_hashes)


def grade_counts(rows: Iterable[Mapping]) -> dict[str, dict[str, int]]:
    """Per rater: ``{"0": n, "1": n, "2": n, "cannot_judge": n}`` of their current judgments."""
    out: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        out[r["rater"]]["cannot_judge" if r.get("cannot_judge") or r.get("grade") is None else str(int(r["grade"]))] += 1
    return {name: {k: int(c.get(k, 0)) for k in (*map(str, VALUES), "cannot_judge")} for name, c in sorted(out.items())}


def _fmt(e: Mapping | None) -> str:
    if not e or e.get("value") is None:
        return "  n/a   (undefined: no pairs with two grades, or no variation)"
    ci = "" if e.get("low") is None else f"  [{e['low']:.3f}, {e['high']:.3f}]"
    return f"{e['value']:6.3f}{ci:18s}  on {e['units']:,d} pairs"


def render(report: Mapping, dataset: str) -> str:
    """The :func:`agreement` report as text for a terminal (``workbench judge agreement``)."""
    b = report["bootstrap"]
    out = [f"agreement on {dataset}: {len(report['raters'])} raters, {report['units']:,d} judged pairs, "
           f"{report['pairable_units']:,d} with ≥2 grades (every coefficient uses only these); "
           f"'cannot judge' is missing data ({report['cannot_judge']:,d} left out)"
           + (f"; {report['stale']:,d} stale judgment(s) left out (document changed since)" if report["stale"] else ""),
           f"95% CIs: percentile bootstrap over (query, document) pairs, {b['resamples']:,d} resamples, seed {b['seed']}",
           "",
           "Krippendorff's alpha (ordinal; 1 perfect, 0 chance, <0 systematic disagreement)",
           f"  {'all':28s}{_fmt(report['alpha'])}"]
    wx = report.get("without_exact")
    if wx:
        label = "without " + "/".join(wx["query_types"])
        out.append(f"  {label:28s}{_fmt(wx['alpha'])}"
                   + (f"   ({wx['left_out_pairable_units']:,d} pairs of exact-answer queries left out)"
                      if wx["left_out_pairable_units"] else ""))
    for t, e in report["by_type"].items():
        out.append(f"  {t:28s}{_fmt(e)}")
    if report["by_rater"]:
        out += ["", "per rater: alpha over the pairs they judged / mean linear kappa with each other rater"]
        for name, r in report["by_rater"].items():
            out.append(f"  {name:28s}{_fmt(r['alpha'])}   ({r['grades']:,d} grades)")
            partners = f" with {', '.join(r['partners'])}" if r["partners"] else ""
            out.append(f"  {'':28s}{_fmt(r['mean_kappa'])}{partners}")
    if report["pairs"]:
        out += ["", "Cohen's kappa, linearly weighted, per rater pair (exact agreement; unweighted kappa)"]
        for p in report["pairs"]:
            unweighted = "n/a" if p["kappa_unweighted"] is None else f"{p['kappa_unweighted']:.3f}"
            out.append(f"  {p['a'] + ' / ' + p['b']:28s}{_fmt(p['kappa'])}   "
                       f"({p['exact_agreement']:.0%} exact; unweighted {unweighted})")
    c = report["pooled_confusion"]
    if any(any(row) for row in c):
        out += ["", "confusion table pooled over rater pairs (rows: the pair's first rater by name, columns: the second)",
                "            " + "".join(f"{g:>8d}" for g in VALUES)]
        for g, row in zip(VALUES, c):
            out.append(f"  {g:>8d}  " + "".join(f"{n:>8,d}" for n in row))
        if report["exact_agreement"] is not None:
            out.append(f"  exact agreement: {report['exact_agreement']:.1%} of {sum(map(sum, c)):,d} comparisons "
                       "(two raters' grades on one pair)")
    return "\n".join(out)
