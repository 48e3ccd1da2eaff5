"""Implicit relevance from clicks: clicks over expected clicks and two click models, as pure functions.

Input: :class:`Impression` rows, one per search shown: the query's key (its normalised text), the ids shown best
first, and the ranks (from 1) that were used (a click, or an assistant's follow-up fetch). Output: per (query key,
doc id) a score with the impressions it rests on; pairs seen fewer than ``min_impressions`` times get none.

* **CTR by rank** (:func:`ctr_by_rank`): clicks at rank r over impressions at rank r, over every query.
* **COEC** (:func:`coec`), clicks over expected clicks (Zhang & Jones, "Clicks over expected clicks", 2007; the
  measure OpenSearch's Search Relevance Workbench derives implicit judgments with): the clicks a pair got over the
  clicks an average result would have got at the ranks it was shown, ``Σ clicks / Σ CTR(rank)``. 1 is average for
  its ranks; above 1, better.
* **Position-based model** (:func:`pbm`; Craswell et al. 2008, Chuklin, Markov & de Rijke, *Click Models for Web
  Search*, 2015, §3.3 and §4.2): a result is clicked iff it is examined (probability ``γ_r``, by rank only) and
  attractive (``α_qd``, by query and document only). Fitted by expectation-maximisation: for an impression not
  clicked, the posterior of "attractive" is ``α(1-γ)/(1-αγ)`` and of "examined" ``γ(1-α)/(1-αγ)``; each
  iteration sets α and γ to the mean posteriors, until no parameter moves more than ``tol``. Clicks fix only the
  products α·γ, so the fit is scaled to give the most examined rank γ = 1: α is then the probability of a
  click when the result is shown there.
* **Cascade model** (:func:`cascade`; Craswell et al. 2008): the reader scans down and stops at the first
  attractive result, so the results down to the first click were examined and the ones below were not. Its
  maximum-likelihood ``α_qd`` has a closed form: clicks as the first click over the times shown at or above the
  first click (all ranks when nothing was clicked); no EM is needed. Later clicks of a search are outside the
  model and are not counted.

Scores are probabilities (PBM, cascade) or ratios (COEC); :func:`grades` turns them into the scholars' 0-2 scale
with stated thresholds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: Least impressions a (query, document) pair needs before any model scores it.
MIN_IMPRESSIONS = 10


@dataclass(frozen=True)
class Impression:
    """One search as shown: ``query`` (a normalised text), ``hits`` best first, ``clicked`` ranks (from 1)."""

    query: str
    hits: tuple[str, ...]
    clicked: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Score:
    """A pair's implicit score and what it rests on: ``value``, ``impressions`` (times shown), ``clicks``."""

    value: float
    impressions: int
    clicks: int


def _check(impressions: Sequence[Impression]) -> None:
    for i, imp in enumerate(impressions):
        bad = [r for r in imp.clicked if not 1 <= r <= len(imp.hits)]
        if bad:
            raise ValueError(f"impression {i} ({imp.query[:40]!r}): clicked rank(s) {sorted(bad)} outside the "
                             f"{len(imp.hits)} hits shown")


def _counts(impressions: Iterable[Impression]) -> tuple[dict, dict]:
    shown: dict[tuple[str, str], int] = defaultdict(int)
    clicks: dict[tuple[str, str], int] = defaultdict(int)
    for imp in impressions:
        for r, d in enumerate(imp.hits, 1):
            shown[imp.query, d] += 1
            clicks[imp.query, d] += r in imp.clicked
    return shown, clicks


def ctr_by_rank(impressions: Sequence[Impression]) -> dict[int, float]:
    """Rank (from 1) → clicks at that rank / impressions at that rank, over every query.

    Raises:
        ValueError: a clicked rank outside the hits shown.
    """
    _check(impressions)
    shown: dict[int, int] = defaultdict(int)
    clicked: dict[int, int] = defaultdict(int)
    for imp in impressions:
        for r in range(1, len(imp.hits) + 1):
            shown[r] += 1
            clicked[r] += r in imp.clicked
    return {r: clicked[r] / shown[r] for r in sorted(shown)}


def coec(impressions: Sequence[Impression], min_impressions: int = MIN_IMPRESSIONS) -> dict[tuple[str, str], Score]:
    """(query, doc) → clicks over expected clicks (module docstring), for pairs shown at least ``min_impressions``
    times; a pair whose expected clicks are 0 (shown only at ranks nobody clicked) is left out.

    Raises:
        ValueError: a clicked rank outside the hits shown.
    """
    ctr = ctr_by_rank(impressions)
    expected: dict[tuple[str, str], float] = defaultdict(float)
    for imp in impressions:
        for r, d in enumerate(imp.hits, 1):
            expected[imp.query, d] += ctr[r]
    shown, clicks = _counts(impressions)
    return {k: Score(clicks[k] / expected[k], n, clicks[k]) for k, n in shown.items()
            if n >= min_impressions and expected[k] > 0}


@dataclass(frozen=True)
class PbmFit:
    """A fitted position-based model: ``attractiveness`` per (query, doc) with its counts, ``examination`` per
    rank, the ``iterations`` run and whether it ``converged`` (no parameter moved more than ``tol``)."""

    attractiveness: dict[tuple[str, str], Score]
    examination: dict[int, float]
    iterations: int
    converged: bool


def pbm(impressions: Sequence[Impression], min_impressions: int = MIN_IMPRESSIONS, *, max_iter: int = 200,
        tol: float = 1e-6, start: float = 0.5) -> PbmFit:
    """Fit the position-based model by EM (module docstring); every pair takes part in the fit, only those shown
    at least ``min_impressions`` times are returned.

    Raises:
        ValueError: a clicked rank outside the hits shown; ``start`` not in (0, 1).
    """
    _check(impressions)
    if not 0 < start < 1:
        raise ValueError(f"start must be in (0, 1), got {start!r}")
    rows = [(imp.query, d, r, r in imp.clicked) for imp in impressions for r, d in enumerate(imp.hits, 1)]
    alpha = {(q, d): start for q, d, _r, _c in rows}
    gamma = {r: start for _q, _d, r, _c in rows}
    iterations, converged = 0, False
    while iterations < max_iter and not converged:
        iterations += 1
        a_sum: dict[tuple[str, str], float] = defaultdict(float)
        a_n: dict[tuple[str, str], int] = defaultdict(int)
        g_sum: dict[int, float] = defaultdict(float)
        g_n: dict[int, int] = defaultdict(int)
        for q, d, r, c in rows:
            a, g = alpha[q, d], gamma[r]
            if c:
                pa = pg = 1.0
            else:
                rest = 1.0 - a * g
                pa = a * (1.0 - g) / rest if rest > 0 else 0.0
                pg = g * (1.0 - a) / rest if rest > 0 else 0.0
            a_sum[q, d] += pa
            a_n[q, d] += 1
            g_sum[r] += pg
            g_n[r] += 1
        new_a = {k: a_sum[k] / a_n[k] for k in alpha}
        new_g = {r: g_sum[r] / g_n[r] for r in gamma}
        moved = max(max(abs(new_a[k] - alpha[k]) for k in alpha), max(abs(new_g[r] - gamma[r]) for r in gamma))
        alpha, gamma = new_a, new_g
        converged = moved <= tol
    # α·γ is all the clicks pin down (α·s with γ/s fits them as well): scale so the most examined rank has γ = 1,
    # and α is then the probability of a click when shown there
    top = max(gamma.values()) if gamma else 1.0
    if top > 0:
        alpha = {k: v * top for k, v in alpha.items()}
        gamma = {r: g / top for r, g in gamma.items()}
    shown, clicks = _counts(impressions)
    return PbmFit({k: Score(v, shown[k], clicks[k]) for k, v in alpha.items() if shown[k] >= min_impressions},
                  dict(sorted(gamma.items())), iterations, converged)


def cascade(impressions: Sequence[Impression], min_impressions: int = MIN_IMPRESSIONS) -> dict[tuple[str, str], Score]:
    """(query, doc) → the cascade model's attractiveness (module docstring): first clicks over the times the pair
    was examined (shown at or above the search's first click, or anywhere when nothing was clicked), for pairs
    examined at least ``min_impressions`` times.

    Raises:
        ValueError: a clicked rank outside the hits shown.
    """
    _check(impressions)
    examined: dict[tuple[str, str], int] = defaultdict(int)
    first: dict[tuple[str, str], int] = defaultdict(int)
    for imp in impressions:
        stop = min(imp.clicked) if imp.clicked else len(imp.hits)
        for r, d in enumerate(imp.hits[:stop], 1):
            examined[imp.query, d] += 1
            first[imp.query, d] += r == stop and bool(imp.clicked)
    return {k: Score(first[k] / n, n, first[k]) for k, n in examined.items() if n >= min_impressions}


def grades(scores: Mapping[tuple[str, str], Score], thresholds: tuple[float, float]) -> dict[tuple[str, str], int]:
    """Scores on the scholars' scale: 2 at or above ``thresholds[1]``, 1 at or above ``thresholds[0]``, else 0.

    Raises:
        ValueError: thresholds that are not two increasing numbers.
    """
    lo, hi = thresholds
    if not lo < hi:
        raise ValueError(f"thresholds must be two increasing numbers (grade 1 from the first, 2 from the second), "
                         f"got {thresholds!r}")
    return {k: 2 if s.value >= hi else 1 if s.value >= lo else 0 for k, s in scores.items()}
