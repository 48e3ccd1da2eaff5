"""The rerank stage after fusion: a pure function that puts a reranker's scores into a fused run.

``[configs.X.rerank]`` names a reranker (``[rerankers.NAME]``, a kind of
:mod:`workbench.registry`) and a ``depth``. For each query the top ``depth`` hits of the
fused run go to the reranker (:class:`workbench.protocols.Reranker`); :func:`apply_rerank`
then orders the query's hits as

1. the candidates the reranker scored, by its score (higher is better; ties by the
   fused order, then doc_id);
2. the candidates of the top ``depth`` it left out, in fused order;
3. the hits below ``depth``, in fused order;

and then keeps the config's ``top_k`` (the fusion itself keeps ``max(top_k, depth)`` hits,
so "rerank the top 20, show 6" is ``top_k = 6`` with ``depth = 20``;
:func:`workbench.experiment.runner.config_run`).

The result's score is a rank score, ``n - position + 1`` for a query of ``n`` hits (so
scores stay "higher is better" across the three parts, whose raw scores are not
comparable); the reranker's own score is kept as the hit's ``tiebreak`` (0.0 for hits it
did not score).

With an interpolation ``weight`` w < 1 the scored candidates are ordered by
``w * r + (1 - w) * f`` instead, where ``r`` and ``f`` are the reranker's and the fused
scores min-max normalised over the query's scored candidates (0 when all are equal):
the linear interpolation of first-stage and reranker scores of Nogueira & Cho (2019)
and PyTerrier's ``LinearCombination`` pipelines. w = 1 is the reranker's order alone.

This is the cascade of PyTerrier's ``pipeline % depth >> reranker``
with the unreranked tail kept, so recall at the fused depth is unchanged.
"""

from __future__ import annotations

from workbench.run import Hit, Run

#: Queries at or above which reranking shows progress: a bar on a terminal (the reranker's), a line before
#: and after in a log (:func:`workbench.experiment.runner.config_run`).
PROGRESS_MIN_QUERIES = 20


def _minmax(values: dict[str, float]) -> dict[str, float]:
    lo, hi = min(values.values(), default=0.0), max(values.values(), default=0.0)
    span = hi - lo
    return {k: ((v - lo) / span if span > 0 else 0.0) for k, v in values.items()}


def apply_rerank(fused: Run, rescored: Run, depth: int, name: str = "", weight: float = 1.0) -> Run:
    """The fused run reordered by a reranker's scores over its top ``depth`` (see the module docstring).

    Args:
        fused: the fused run (best first).
        rescored: the reranker's run (its own scores, higher is better) over candidates of the
            top ``depth`` of each query of ``fused``; queries or documents outside it are ignored.
        depth: hits per query that were sent to the reranker (>= 1).
        name: the resulting run's name (default: the fused run's).
        weight: the reranker's share of the interpolated score, in [0, 1] (1: its order alone).

    Returns:
        a run with the same hits per query as ``fused``; scores are rank scores (``n`` for the
        first of ``n`` hits … 1 for the last) and ``tiebreak`` holds the reranker's score.

    Raises:
        ValueError: ``depth`` is not an integer >= 1, or ``weight`` is not in [0, 1].
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ValueError(f"rerank depth must be an integer >= 1, got {depth!r}")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
        raise ValueError(f"rerank weight must be a number in [0, 1], got {weight!r}")
    rows: dict[str, list[Hit]] = {}
    for qid, hits in fused.items():
        head, tail = hits[:depth], hits[depth:]
        fused_pos = {h.doc_id: i for i, h in enumerate(head)}
        scored = {h.doc_id: h.score for h in rescored.get(qid, ()) if h.doc_id in fused_pos}
        key = scored
        if weight < 1.0 and scored:
            r = _minmax(scored)
            f = _minmax({d: h.score for h in head if (d := h.doc_id) in scored})
            key = {d: weight * r[d] + (1.0 - weight) * f[d] for d in scored}
        first = sorted(scored, key=lambda d: (-key[d], fused_pos[d], d))
        order = first + [h.doc_id for h in head if h.doc_id not in scored] + [h.doc_id for h in tail]
        n = len(order)
        rows[qid] = [Hit(d, float(n - i), scored.get(d, 0.0)) for i, d in enumerate(order)]
    return Run(rows, name or fused.name)



# ---------------------------------------------------------------- the same rule on arrays (tuning)

def _minmax_rows(values, mask):
    """Per row, ``values`` min-max normalised over the entries ``mask`` selects (0 where a row's span is 0),
    with the float operations of :func:`_minmax`; entries outside ``mask`` are meaningless."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        lo = np.where(mask, values, np.inf).min(axis=1, keepdims=True)
        hi = np.where(mask, values, -np.inf).max(axis=1, keepdims=True)
        span = hi - lo
        return np.where(span > 0, (values - lo) / np.where(span > 0, span, 1.0), 0.0)


def rerank_ranked(ranked, fused_scores, rerank_scores, depth: int, weight: float, top_k: int):
    """:func:`apply_rerank` on the arrays of :class:`workbench.eval.fasteval.CandidateMatrix` (tuning's fast path).

    The rule is the module docstring's (PyTerrier's ``pipeline % depth >> reranker`` cascade with
    the tail kept; with ``weight`` < 1 the linear interpolation of Nogueira & Cho, 2019): per query,
    the scored candidates of the top ``depth`` by the reranker's score (or by ``weight * minmax(r) +
    (1 - weight) * minmax(f)`` over the scored ones), ties by fused position; then the unscored
    candidates of the top ``depth`` in fused order; then the rest in fused order. The same float
    operations as :func:`apply_rerank`, so the order is exactly the same, ties included.

    Args:
        ranked: (Q, D) int column indices of each query's fused hits, best first, −1 past the end
            (−1 only after the last hit).
        fused_scores: (Q, D) the fused scores of those hits (what the fused run's ``Hit.score`` holds;
            for fusion ``none``, the lane's raw scores); read only where ``weight`` < 1.
        rerank_scores: (Q, C) float, the reranker's score of query ``i`` and candidate column ``c``;
            NaN where it gave none (such a candidate counts as unscored).
        depth: hits per query sent to the reranker (>= 1).
        weight: the reranker's share of the interpolated score, in [0, 1] (1: its order alone).
        top_k: columns of the result.

    Returns:
        (Q, top_k) int64 column indices in :func:`apply_rerank`'s order, −1 past the end.

    Raises:
        ValueError: ``depth`` < 1, ``weight`` outside [0, 1], or shapes that do not fit.
    """
    import numpy as np

    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"rerank depth must be an integer >= 1, got {depth!r}")
    if isinstance(weight, bool) or not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"rerank weight must be a number in [0, 1], got {weight!r}")
    ranked = np.asarray(ranked, dtype=np.int64)
    fused_scores = np.asarray(fused_scores, dtype=float)
    rerank_scores = np.asarray(rerank_scores, dtype=float)
    if ranked.ndim != 2 or fused_scores.shape != ranked.shape or rerank_scores.ndim != 2 \
            or rerank_scores.shape[0] != ranked.shape[0]:
        raise ValueError(f"shapes do not fit: ranked {ranked.shape}, fused_scores {fused_scores.shape}, "
                         f"rerank_scores {rerank_scores.shape}")
    Q, D = ranked.shape
    H = min(int(depth), D)
    head = ranked[:, :H]
    valid = head >= 0
    if rerank_scores.shape[1]:
        r = np.take_along_axis(rerank_scores, np.where(valid, head, 0), axis=1)
    else:
        r = np.full(head.shape, np.nan)
    scored = valid & ~np.isnan(r)
    if float(weight) < 1.0:
        w = float(weight)
        with np.errstate(invalid="ignore", over="ignore"):  # entries outside `scored` are never read
            key = w * _minmax_rows(r, scored) + (1.0 - w) * _minmax_rows(fused_scores[:, :H], scored)
    else:
        key = r
    group = np.where(scored, 0, np.where(valid, 1, 2))  # scored, unscored, past the end
    pos = np.broadcast_to(np.arange(H), (Q, H))
    order = np.lexsort((pos, np.where(scored, -key, 0.0), group), axis=-1)
    out = np.full((Q, top_k), -1, dtype=np.int64)
    full = np.concatenate([np.take_along_axis(head, order, axis=1), ranked[:, H:]], axis=1)
    n = min(top_k, full.shape[1])
    out[:, :n] = full[:, :n]
    return out
