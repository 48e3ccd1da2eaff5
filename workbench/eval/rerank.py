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
did not score). This is the cascade of PyTerrier's ``pipeline % depth >> reranker``
with the unreranked tail kept, so recall at the fused depth is unchanged.
"""

from __future__ import annotations

from workbench.run import Hit, Run


def apply_rerank(fused: Run, rescored: Run, depth: int, name: str = "") -> Run:
    """The fused run reordered by a reranker's scores over its top ``depth`` (see the module docstring).

    Args:
        fused: the fused run (best first).
        rescored: the reranker's run (its own scores, higher is better) over candidates of the
            top ``depth`` of each query of ``fused``; queries or documents outside it are ignored.
        depth: hits per query that were sent to the reranker (>= 1).
        name: the resulting run's name (default: the fused run's).

    Returns:
        a run with the same hits per query as ``fused``; scores are rank scores (``n`` for the
        first of ``n`` hits … 1 for the last) and ``tiebreak`` holds the reranker's score.

    Raises:
        ValueError: ``depth`` is not an integer >= 1.
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ValueError(f"rerank depth must be an integer >= 1, got {depth!r}")
    rows: dict[str, list[Hit]] = {}
    for qid, hits in fused.items():
        head, tail = hits[:depth], hits[depth:]
        fused_pos = {h.doc_id: i for i, h in enumerate(head)}
        scored = {h.doc_id: h.score for h in rescored.get(qid, ()) if h.doc_id in fused_pos}
        first = sorted(scored, key=lambda d: (-scored[d], fused_pos[d], d))
        order = first + [h.doc_id for h in head if h.doc_id not in scored] + [h.doc_id for h in tail]
        n = len(order)
        rows[qid] = [Hit(d, float(n - i), scored.get(d, 0.0)) for i, d in enumerate(order)]
    return Run(rows, name or fused.name)

