"""Reranker kinds: the stage after fusion (:mod:`workbench.eval.rerank`).

``lane`` is the trivial honest reranker the rerank slot is tested with: it rescores the
top candidates of a fused run by the score another lane of the experiment gave them
(its cached candidates; no model, no service). A cross-encoder is the next kind here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pydantic import Field

from workbench.registry import Params, RerankerKind
from workbench.run import Run
from workbench.types import Document, Query


class LaneReranker:
    """Rescores candidates by a lane's run (see :class:`LaneRerankerKind`).

    Args:
        name: the reranker's name (``[rerankers.NAME]``).
        lane_run: the lane's candidates for every query (its own raw scores, higher is better).

    A candidate the lane did not return (below the lane's cached depth, or not matched at
    all) is left out of the result: :func:`workbench.eval.rerank.apply_rerank` keeps it after the
    scored ones, in fused order.
    """

    def __init__(self, name: str, lane_run: Run):
        self.name = name
        self.score_kind = f"the raw score of lane {lane_run.name} (its meaning), higher is better"
        self._scores = {qid: {h.doc_id: h.score for h in hits} for qid, hits in lane_run.items()}

    def rerank(self, queries: Sequence[Query], run: Run, documents: Mapping[str, Document], depth: int) -> Run:
        """The lane's score of each of the top ``depth`` candidates of ``run`` it returned, per query."""
        out: dict[str, list[tuple[str, float]]] = {}
        for q in queries:
            lane = self._scores.get(q.query_id, {})
            out[q.query_id] = [(h.doc_id, lane[h.doc_id]) for h in run.get_hits(q.query_id)[:depth]
                               if h.doc_id in lane]
        return Run(out, self.name)


class LaneRerankerParams(Params):
    """Parameters of ``kind = "lane"`` rerankers."""

    lane: str = Field(min_length=1, description="the [lanes.NAME] whose scores reorder the candidates")


class LaneRerankerKind(RerankerKind):
    """``lane``: rescoring by another lane's cached scores (a test and baseline reranker)."""

    kind = "lane"
    summary = "rescoring by another lane's cached scores (no model); score: that lane's raw score"
    Params = LaneRerankerParams

    def lanes(self, params: LaneRerankerParams) -> tuple[str, ...]:
        """The one lane it reads."""
        return (params.lane,)

    def open(self, name: str, params: LaneRerankerParams, ds: Any, res: Any, runs: Mapping[str, Run]) -> LaneReranker:
        """The reranker over the lane's cached run on ``ds``."""
        return LaneReranker(name, runs[params.lane])
