"""Fusion of lane runs: pure functions, no I/O.

Every function takes runs (one per lane, each query's hits best first) and returns a
new :class:`~workbench.run.Run`; inputs are never modified. Parameters:

* ``depth``: how many hits of each lane enter the fusion (per-lane, default all);
* ``weights``: per-lane multipliers (default 1.0 each);
* ``top_k``: the length of the fused list;
* ``min_score``: fused hits scoring below it are dropped (after fusion, before ``top_k``);
* ``tiebreak``: fused ties are broken by the ``tiebreak`` value (the AICharya seed uses
  the raw cosine of its vector lane: pass ``tiebreak_lane="vector"``), then by doc_id
  ascending (the :mod:`workbench.run` rule);
* ``pin_lane``: a reference lane whose answers come first, in its order (:func:`pin`): the AICharya
  seed's "two ways in" — a query that *names* a passage (``BG 2.47``, ``गीता २.४७``, ``BG 2``) gets what
  it names, and only a query that does not is a question for the fused lanes. Without it RRF lets the vector and
  full-text lanes outvote the reference lane (``गीता 2.47`` put BG 18.68–75, whose Hindi translations
  say गीता, above BG 2.47).

Methods:

* **RRF** (Cormack, Clarke and Büttcher, "Reciprocal rank fusion outperforms Condorcet
  and individual rank learning methods", SIGIR 2009): ``score(d) = Σ_lanes w_l / (k + rank_l(d))``
  with ranks from 1 and the constant ``k`` (60 in the paper and in the AICharya seed).
  Only ranks are used, so RRF ignores the lanes' score scales.
* **weighted**: ``Σ w_l · norm_l(score_l(d))`` with ``norm`` = min-max to [0, 1] per query
  (a constant list maps to 1.0), z-score per query (a constant list maps to 0.0) or ``raw`` (the lane's own
  score: the sum of boosted clauses a search engine computes, e.g. OpenSearch's ``bool.should``); a
  document absent from a lane contributes 0 from it.
* **CombSUM / CombMNZ** (Fox and Shaw, TREC-2 1994): the sum of min-max normalised
  scores; CombMNZ multiplies it by the number of lanes that retrieved the document.

Methods computed by ranx (:func:`ranx.fuse`, :data:`RANX_METHODS`; :func:`ranx_fused`), where the
workbench has no implementation of its own. ``depth``, ``min_score``, ``top_k``, ``tiebreak_lane`` and the
tie rule are the workbench's, applied around ranx's scores:

* rank-based (ranx reads each lane's order only; the workbench hands it the lane's ranks, so ties in a
  lane's raw scores keep the lane's own order): **ISR** and **log-ISR** (Mourão, Martins and Magalhães,
  "Multimodal medical information retrieval with unsupervised rank fusion", CMIG 2015:
  ``Σ 1 / rank²`` times the number of lanes that retrieved the document, or times its log),
  **BordaFuse** (Aslam and Montague, SIGIR 2001: ``n − rank + 1`` points per lane, unranked documents
  share the remaining points) and its weighted form **w_bordafuse** (the config's lane weights).
  ranx's Condorcet fusion is left out: it sorts a Python set of candidates with a comparator that is not
  transitive on split votes, so its order changes with the process's string hash seed (PYTHONHASHSEED)
  and a config's result would not repeat;
* score-based, over the workbench's per-query min-max normalisation (a constant list maps to 1.0, as
  for CombSUM; ranx's own maps it to 0.0): **CombMAX**, **CombMIN**, **CombMED** and **CombANZ**
  (Fox and Shaw 1994: the maximum, minimum, median and mean over the lanes that retrieved the document).

They are slower than the methods above: tuning evaluates them through ranx per trial
(:meth:`workbench.eval.fasteval.CandidateMatrix.rank`'s slow path) rather than in the compiled kernel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.run import Hit, Run

#: ``raw``: the lane's own score, unnormalised: a weighted sum of raw scores is what a query that sums boosted
#: clauses computes (OpenSearch ``bool.should``: ``Σ boost_i · score_i``), so clause boosts tune as lane weights.
NORMALISATIONS = ("minmax", "zscore", "raw")
#: The workbench's fusion name → (ranx's method name, whether ranx reads ranks (True) or normalised scores).
RANX_METHODS: dict[str, tuple[str, bool]] = {
    "isr": ("isr", True), "log_isr": ("log_isr", True), "bordafuse": ("bordafuse", True),
    "w_bordafuse": ("w_bordafuse", True),
    "combmax": ("max", False), "combmin": ("min", False), "combmed": ("med", False), "combanz": ("anz", False),
}
#: The ranx methods that read the lane weights (the others take none: a config giving weights is refused).
RANX_WEIGHTED = ("w_bordafuse",)
#: Methods the compiled in-memory evaluator (:mod:`workbench.eval.fasteval`) fuses itself.
FAST_METHODS = ("rrf", "weighted", "combsum", "combmnz")
#: Every fusion method of several lanes: the workbench's own, then ranx's.
METHODS = (*FAST_METHODS, *RANX_METHODS)
#: Every value of a config's ``fusion``: the methods above and ``none`` (one lane, :func:`single`).
ALL_METHODS = (*METHODS, "none")
#: The parameters each method reads besides ``depth``, ``min_score``, ``top_k``, ``tiebreak_lane`` and
#: ``pin_lane`` (which every method reads): declared once for :meth:`FusionSpec.params`, experiment configs
#: (which refuse a parameter their method would ignore), tuning spaces (which draw one only for a trial whose
#: method reads it) and the reports.
METHOD_PARAMS: dict[str, frozenset[str]] = {
    "rrf": frozenset({"k", "weights"}), "weighted": frozenset({"weights", "norm"}),
    "combsum": frozenset({"weights"}), "combmnz": frozenset({"weights"}),
    **{m: frozenset({"weights"} if m in RANX_WEIGHTED else ()) for m in RANX_METHODS},
    "none": frozenset(),  # one lane as it is: a weight would change no order
}
#: The methods that read the lane weights.
WEIGHTED_METHODS = tuple(m for m in METHODS if "weights" in METHOD_PARAMS[m])


def readers(param: str) -> list[str]:
    """The fusion methods (of :data:`METHODS`) that read ``param`` (``k``, ``weights`` or ``norm``), for messages."""
    return [m for m in METHODS if param in METHOD_PARAMS[m]]


@dataclass(frozen=True)
class FusionSpec:
    """How a config fuses its lanes: the one spec that experiments (``[configs.X]``), :func:`fuse`, fast
    evaluation (:mod:`workbench.eval.fasteval`) and tuning read, with its defaults here.

    Attributes:
        lanes: lane names, in order.
        method: one of :data:`ALL_METHODS` (``none``: one lane as it is).
        k: the RRF constant (``rrf`` only; Cormack et al. 2009 use 60).
        weights: lane → weight >= 0 (None: 1.0 each).
        depth: hits per lane fused (an int for all, lane → int, or None: all cached).
        norm: score normalisation of ``weighted`` (:data:`NORMALISATIONS`).
        min_score: fused hits scoring below it are dropped (None: none dropped).
        top_k: hits kept per query.
        tiebreak_lane: the lane whose raw score breaks ties of fused scores (None: doc_id only).
        pin_lane: a reference lane whose answers go first, in its order (:func:`pin`; None: no pinning).
        lane_min_score: lane → the lowest raw score of that lane's hits that are fused (:func:`cut_lanes`, before
            everything else; None: none cut). AICharya's per-lane floor, beside the fused ``min_score``.
    """

    lanes: tuple[str, ...]
    method: str = "rrf"
    k: float = 60.0
    weights: Mapping[str, float] | None = None
    depth: int | Mapping[str, int] | None = None
    norm: str = "minmax"
    min_score: float | None = None
    top_k: int = 100
    tiebreak_lane: str | None = None
    pin_lane: str | None = None
    lane_min_score: Mapping[str, float] | None = None

    def params(self, name: str = "") -> dict[str, Any]:
        """Keyword arguments of :func:`fuse` for :attr:`method` (what the method reads, nothing else)."""
        p: dict[str, Any] = {"depth": self.depth, "min_score": self.min_score,
                             "top_k": self.top_k, "tiebreak_lane": self.tiebreak_lane, "name": name}
        if self.pin_lane is not None:
            p["pin_lane"] = self.pin_lane
        reads = METHOD_PARAMS[self.method]
        if "weights" in reads:
            p["weights"] = self.weights
        if "k" in reads:
            p["k"] = self.k
        if "norm" in reads:
            p["norm"] = self.norm
        return p


def fuse_spec(runs: Mapping[str, Run], spec: FusionSpec, name: str = "") -> Run:
    """``spec`` applied to ``runs`` (lane → run; lanes not in ``spec.lanes`` are ignored).

    Raises:
        KeyError: a lane of ``spec`` has no run. ValueError: see :func:`fuse`.
    """
    return fuse(cut_lanes({ln: runs[ln] for ln in spec.lanes}, spec.lane_min_score), spec.method,
                **spec.params(name))


def cut_lanes(runs: Mapping[str, Run], floors: Mapping[str, float] | None) -> dict[str, Run]:
    """``runs`` with each lane of ``floors`` holding only its hits whose raw score is at least its floor, in their
    order (a lane's ranks then count only what is left); lanes without a floor unchanged."""
    if not floors:
        return dict(runs)
    out = dict(runs)
    for lane, floor in floors.items():
        run = runs.get(lane)
        if run is not None:
            out[lane] = Run({q: [h for h in run.get_hits(q) if h.score >= floor] for q in run}, run.name)
    return out


def _check(runs: Mapping[str, Run], weights: Mapping[str, float] | None, depth: int | Mapping[str, int] | None) -> None:
    if not runs:
        raise ValueError("fusion needs at least one lane run")
    if weights is not None:
        unknown = set(weights) - set(runs)
        if unknown:
            raise ValueError(f"weights name lanes that are not fused: {sorted(unknown)}; lanes: {sorted(runs)}")
        bad = {k: v for k, v in weights.items() if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0)}
        if bad:
            raise ValueError(f"weights must be finite and >= 0, got {bad}")
        if all(float(weights.get(lane, 1.0)) == 0.0 for lane in runs):
            raise ValueError(f"every lane's weight is 0 ({dict(weights)}): every document would score 0 and the "
                             "list would be in doc_id order; give at least one lane a weight > 0")
    if isinstance(depth, Mapping):
        unknown = set(depth) - set(runs)
        if unknown:
            raise ValueError(f"depth names lanes that are not fused: {sorted(unknown)}")
        if any(not isinstance(v, int) or v < 1 for v in depth.values()):
            raise ValueError(f"per-lane depth must be integers >= 1, got {dict(depth)}")
    elif depth is not None and (not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")


def _depth_of(depth: int | Mapping[str, int] | None, lane: str) -> int | None:
    if isinstance(depth, Mapping):
        return depth.get(lane)
    return depth


def _finish(scores: dict[str, dict[str, float]], tiebreaks: dict[str, dict[str, float]], name: str,
            min_score: float | None, top_k: int | None) -> Run:
    rows = {}
    for qid, per_doc in scores.items():
        tb = tiebreaks.get(qid, {})
        # a document the tie-break lane did not retrieve sorts after every one it did
        hits = [Hit(d, s, tb.get(d, -math.inf)) for d, s in per_doc.items() if min_score is None or s >= min_score]
        hits.sort(key=lambda h: (-h.score, -h.tiebreak, h.doc_id))
        rows[qid] = hits[:top_k] if top_k is not None else hits
    return Run(rows, name)


def _tiebreaks(runs: Mapping[str, Run], lane: str | None) -> dict[str, dict[str, float]]:
    if lane is None:
        return {}
    if lane not in runs:
        raise ValueError(f"tiebreak_lane {lane!r} is not among the fused lanes {sorted(runs)}")
    return {q: {h.doc_id: h.score for h in hits} for q, hits in runs[lane].items()}


def _queries(runs: Mapping[str, Run]) -> list[str]:
    return sorted({q for r in runs.values() for q in r})


def rrf(runs: Mapping[str, Run], *, k: float = 60.0, weights: Mapping[str, float] | None = None,
        depth: int | Mapping[str, int] | None = None, min_score: float | None = None, top_k: int | None = None,
        tiebreak_lane: str | None = None, name: str = "rrf") -> Run:
    """Reciprocal Rank Fusion (Cormack et al. 2009): ``Σ w_l / (k + rank_l(d))``, ranks from 1.

    Args:
        runs: lane name → run.
        k: the RRF constant (> 0; 60 in the paper and the seeds).
        weights: lane → weight; lanes missing from the mapping get 1.0.
        depth: hits per lane that enter (int for all lanes, or lane → int).
        min_score, top_k, tiebreak_lane: see the module docstring.

    Raises:
        ValueError: no runs, k <= 0, weights / depth naming unknown lanes, negative weights.
    """
    _check(runs, weights, depth)
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
        raise ValueError(f"RRF k must be a finite number > 0, got {k!r}")
    w = {lane: float((weights or {}).get(lane, 1.0)) for lane in runs}
    scores: dict[str, dict[str, float]] = {}
    for q in _queries(runs):
        acc: dict[str, float] = {}
        for lane, run in runs.items():
            hits = run.get_hits(q)[: _depth_of(depth, lane)]
            for rank, h in enumerate(hits, start=1):
                acc[h.doc_id] = acc.get(h.doc_id, 0.0) + w[lane] / (k + rank)
        scores[q] = acc
    return _finish(scores, _tiebreaks(runs, tiebreak_lane), name, min_score, top_k)


#: Relative tolerance under which a query's scores count as constant in :func:`normalise`.
CONSTANT_RTOL = 1e-12


def normalise(hits: Sequence[Hit], method: str = "minmax") -> dict[str, float]:
    """Per-query score normalisation: ``minmax`` → [0, 1] (constant → 1.0), ``zscore`` (constant → 0.0), ``raw``
    (the scores as they are).

    ``zscore`` is ``(x - mean) / population std``. The scores count as **constant** when their
    spread is within a tolerance relative to their magnitude,
    ``max - min <= CONSTANT_RTOL * max(|x|)`` (``CONSTANT_RTOL`` = 1e-12, far above the
    float residue of a mean, about ``n * 2.2e-16 * |x|``, and far below any real spread of
    retrieval scores). Without it, equal scores whose float mean is off by an ulp (three
    0.1s have mean 0.10000000000000002) z-score to ±1.0: residue over a near-zero deviation.

    Args:
        hits: one query's hits of one lane.
        method: ``"minmax"``, ``"zscore"`` or ``"raw"``.

    Returns:
        doc_id → normalised score (``{}`` for no hits).

    Raises:
        ValueError: an unknown method.
    """
    if method not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {method!r}")
    if not hits:
        return {}
    if method == "raw":
        return {h.doc_id: h.score for h in hits}
    vals = [h.score for h in hits]
    lo, hi = min(vals), max(vals)
    constant = hi - lo <= CONSTANT_RTOL * max(abs(lo), abs(hi))
    if method == "minmax":
        return {h.doc_id: (1.0 if constant else (h.score - lo) / (hi - lo)) for h in hits}
    if constant:
        return {h.doc_id: 0.0 for h in hits}
    mean = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
    return {h.doc_id: (h.score - mean) / sd for h in hits}


def weighted(runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None, norm: str = "minmax",
             depth: int | Mapping[str, int] | None = None, min_score: float | None = None,
             top_k: int | None = None, tiebreak_lane: str | None = None, name: str = "weighted") -> Run:
    """Weighted sum of per-query normalised scores: ``Σ w_l · norm(score_l(d))``.

    The seed's hybrid mode (fuzzy and semantic 7:3) is ``weights={"fuzzy": 0.7, "semantic": 0.3}``.

    Raises:
        ValueError: as :func:`rrf`, or an unknown ``norm``.
    """
    _check(runs, weights, depth)
    if norm not in NORMALISATIONS:
        raise ValueError(f"norm must be one of {NORMALISATIONS}, got {norm!r}")
    w = {lane: float((weights or {}).get(lane, 1.0)) for lane in runs}
    scores: dict[str, dict[str, float]] = {}
    for q in _queries(runs):
        acc: dict[str, float] = {}
        for lane, run in runs.items():
            for d, s in normalise(run.get_hits(q)[: _depth_of(depth, lane)], norm).items():
                acc[d] = acc.get(d, 0.0) + w[lane] * s
        scores[q] = acc
    return _finish(scores, _tiebreaks(runs, tiebreak_lane), name, min_score, top_k)


def comb(runs: Mapping[str, Run], *, mnz: bool = False, weights: Mapping[str, float] | None = None,
         depth: int | Mapping[str, int] | None = None, min_score: float | None = None, top_k: int | None = None,
         tiebreak_lane: str | None = None, name: str | None = None) -> Run:
    """CombSUM (``mnz=False``) or CombMNZ (``mnz=True``) over min-max normalised scores (Fox and Shaw 1994)."""
    _check(runs, weights, depth)
    w = {lane: float((weights or {}).get(lane, 1.0)) for lane in runs}
    scores: dict[str, dict[str, float]] = {}
    for q in _queries(runs):
        acc: dict[str, float] = {}
        hits_n: dict[str, int] = {}
        for lane, run in runs.items():
            for d, s in normalise(run.get_hits(q)[: _depth_of(depth, lane)], "minmax").items():
                acc[d] = acc.get(d, 0.0) + w[lane] * s
                hits_n[d] = hits_n.get(d, 0) + 1
        scores[q] = {d: (s * hits_n[d] if mnz else s) for d, s in acc.items()}
    return _finish(scores, _tiebreaks(runs, tiebreak_lane), name or ("combmnz" if mnz else "combsum"),
                   min_score, top_k)


def single(runs: Mapping[str, Run], *, min_score: float | None = None, top_k: int | None = None, name: str = "",
           **_unused) -> Run:
    """Fusion ``none``: the one lane's run as it is, with ``min_score`` (hits scoring below it dropped, in the
    lane's own score) and ``top_k`` applied. Other fusion parameters (``k``, ``weights``, ``depth``…) mean
    nothing for one lane and are ignored.

    Raises:
        ValueError: ``runs`` does not hold exactly one lane.
    """
    if len(runs) != 1:
        raise ValueError(f"fusion 'none' takes exactly one lane, got {sorted(runs)}")
    run = next(iter(runs.values()))
    rows = {}
    for q, hits in run.items():
        kept = [h for h in hits if min_score is None or h.score >= min_score]
        rows[q] = kept[:top_k] if top_k is not None else kept
    return Run(rows, name or run.name)


def ranx_fused(runs: Mapping[str, Run], method: str, *, weights: Mapping[str, float] | None = None,
               depth: int | Mapping[str, int] | None = None, min_score: float | None = None,
               top_k: int | None = None, tiebreak_lane: str | None = None, name: str | None = None) -> Run:
    """A fusion method of ranx (:data:`RANX_METHODS`, see the module docstring) over the lanes' runs.

    Each lane's top ``depth`` hits go to :func:`ranx.fuse` as the ranks ``1/rank`` (rank-based methods) or
    as min-max normalised scores (CombMAX/MIN/MED/ANZ), every query present in every lane (an empty list
    where a lane found nothing). A lane with no hit for any query ranks nothing and is left out (ranx
    cannot hold it); when one lane is left it is fused with a copy of itself, which keeps its order
    (ranx fuses two runs or more). The fused scores (higher is better) are then cut by ``min_score`` and
    ``top_k`` and their ties broken by ``tiebreak_lane``, then doc_id, as for the other methods.

    Raises:
        ValueError: an unknown method, weights given to a method that does not read them, or the
            errors of :func:`rrf`'s argument checks.
    """
    import warnings

    import ranx

    if method not in RANX_METHODS:
        raise ValueError(f"{method!r} is not a ranx fusion method; choose from {', '.join(RANX_METHODS)}")
    if weights is not None and method not in RANX_WEIGHTED and any(float(v) != 1.0 for v in weights.values()):
        raise ValueError(f"fusion {method!r} does not read lane weights; drop them or use "
                         f"{' / '.join(RANX_WEIGHTED)}")
    _check(runs, weights, depth)
    ranx_name, by_rank = RANX_METHODS[method]
    queries = _queries(runs)
    lanes = [lane for lane in runs if any(runs[lane].get_hits(q) for q in queries)]
    if not lanes:
        return _finish({q: {} for q in queries}, {}, name or method, min_score, top_k)
    rx = []
    for lane in lanes:
        table = {}
        for q in queries:
            hits = runs[lane].get_hits(q)[: _depth_of(depth, lane)]
            # ranx orders a lane by score: 1/rank keeps the lane's own order where its raw scores tie
            table[q] = ({h.doc_id: 1.0 / r for r, h in enumerate(hits, start=1)} if by_rank
                        else normalise(hits, "minmax"))
        rx.append(ranx.Run(table, name=lane))
    params: dict[str, Any] = {}
    if method in RANX_WEIGHTED:
        params["weights"] = [float((weights or {}).get(lane, 1.0)) for lane in lanes]
    if len(rx) == 1:  # ranx fuses two runs or more
        rx.append(rx[0])
        if "weights" in params:
            params["weights"].append(params["weights"][0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's uint64 → int64 cast notes inside ranx
        fused = ranx.fuse(rx, norm=None, method=ranx_name, params=params).to_dict()
    scores = {q: {d: float(v) for d, v in fused.get(q, {}).items()} for q in queries}
    return _finish(scores, _tiebreaks(runs, tiebreak_lane), name or method, min_score, top_k)


def pin(fused: Run, lane: Run, *, min_score: float | None = None, top_k: int | None = None) -> Run:
    """``fused`` with every document ``lane`` returned moved ahead of the rest, in ``lane``'s own order.

    ``lane`` is a reference lane: it answers only a query that is wholly a reference and returns exactly what
    that reference addresses, never a guess (the addressed verse for ``BG 2.47``, a chapter's verses in
    corpus order for ``BG 2``, the documents on a page for ``M i 56``: :mod:`retrievers.reference`). So its
    order is the reading order of the answer, and the fused lanes only rank what comes after it. A Run orders
    by score, so the ``i``-th of ``n`` pinned documents (from 0) scores ``m + n − i``, with ``m`` the query's
    highest fused score: every pinned one scores above every other. ``min_score`` (on the fused scores)
    drops only unpinned documents: a reference that resolves is the answer, never cut. ``top_k`` applies
    last. A query the lane did not answer is left as it is.

    Raises:
        ValueError: ``top_k`` < 0.
    """
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    rows = {}
    for q, hits in fused.items():
        named = [h.doc_id for h in lane.get_hits(q)]
        rest = [h for h in hits if min_score is None or h.score >= min_score]
        if named:
            m = max((h.score for h in hits), default=0.0)
            first = set(named)
            rest = [Hit(d, m + len(named) - i) for i, d in enumerate(named)] + [h for h in rest if h.doc_id not in first]
        rows[q] = rest
    out = Run(rows, fused.name)
    return out.top(top_k) if top_k is not None else out


def fuse(runs: Mapping[str, Run], method: str, *, pin_lane: str | None = None, **params) -> Run:
    """Dispatch by method name (``rrf``, ``weighted``, ``combsum``, ``combmnz``, a ranx method of
    :data:`RANX_METHODS`, ``none``); with ``pin_lane``, the fused list (before ``min_score`` and ``top_k``)
    goes through :func:`pin` with that lane's run.

    Raises:
        ValueError: an unknown method (listing the known ones), ``k`` or ``norm`` given to a method that does not
            read them (:data:`METHOD_PARAMS`), a ``pin_lane`` that is not among the runs, or bad parameters.
    """
    if method not in ALL_METHODS:
        raise ValueError(f"unknown fusion method {method!r}; choose from {', '.join(ALL_METHODS)}")
    for p in ("k", "norm"):
        if params.get(p) is not None and p not in METHOD_PARAMS[method]:
            raise ValueError(f"fusion {method!r} does not read {p}; drop it (read by {', '.join(readers(p))})")
    if pin_lane is not None:
        if pin_lane not in runs:
            raise ValueError(f"pin_lane {pin_lane!r} is not among the fused lanes {sorted(runs)}")
        min_score, top_k = params.pop("min_score", None), params.pop("top_k", None)
        return pin(fuse(runs, method, **params), runs[pin_lane], min_score=min_score, top_k=top_k)
    if method == "none":
        return single(runs, **params)
    if method == "rrf":
        return rrf(runs, **params)
    if method == "weighted":
        return weighted(runs, **params)
    if method in ("combsum", "combmnz"):
        return comb(runs, mnz=method == "combmnz", **params)
    if method in RANX_METHODS:
        return ranx_fused(runs, method, **params)
    raise ValueError(f"unknown fusion method {method!r}; choose from {', '.join(ALL_METHODS)}")
