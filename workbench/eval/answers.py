"""Honest empty answers: how a run treats unanswerable queries (``negative``) and answerable ones, and the
``min_score`` trade-off between the two.

A search that admits it found nothing is worth more than one that pads the list (AICharya's ``min_score``). Two
rates, per run (pure functions of the run, the queries and the qrels):

* **empty-answer rate on negatives**: the share of unanswerable queries (:data:`workbench.types.
  UNANSWERABLE_QUERY_TYPES`) answered with no document (1 each when empty, 0 when anything is returned);
* **false-empty rate on answerable queries**: the share of queries with at least one relevant judgment (grade >=
  :data:`workbench.io.formats.BINARY_THRESHOLD`) answered with no document.

``min_score`` drops every hit below it, so a query's answer is empty exactly when its best score is below it:
:func:`min_score_curve` reads both rates for every threshold from the queries' best scores, without running
anything again, and :func:`best_threshold` picks the one that maximises the **abstention accuracy**
``(empty-answer rate + (1 - false-empty rate)) / 2`` (balanced accuracy of the answer/abstain decision, so the
many answerable queries do not drown the few negatives).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from workbench.io.formats import BINARY_THRESHOLD
from workbench.types import UNANSWERABLE_QUERY_TYPES


def abstention_accuracy(empty_on_negatives: float, false_empty: float) -> float:
    """``(empty_on_negatives + 1 - false_empty) / 2``: the balanced accuracy of the answer/abstain decision
    (module docstring), 0-1, higher is better."""
    return (empty_on_negatives + 1 - false_empty) / 2


def _split(queries: Sequence[Any], qrels: Sequence[Any]) -> tuple[list[str], list[str]]:
    """(negative query ids, answerable query ids) among ``queries``."""
    relevant = {r.query_id for r in qrels if r.relevance >= BINARY_THRESHOLD}
    negative = [q.query_id for q in queries if q.query_type in UNANSWERABLE_QUERY_TYPES]
    answerable = [q.query_id for q in queries
                  if q.query_type not in UNANSWERABLE_QUERY_TYPES and q.query_id in relevant]
    return negative, answerable


def answer_rates(run: Any, queries: Sequence[Any], qrels: Sequence[Any]) -> dict[str, float | int]:
    """``{"negatives", "empty_on_negatives", "answerable", "false_empty"}``: the counts and the two rates of the
    module docstring (NaN for a rate over no query).

    Args:
        run: a :class:`workbench.run.Run` (``get_hits``).
        queries: the evaluated queries (their ``query_type`` says which are negative).
        qrels: their judgments.
    """
    negative, answerable = _split(queries, qrels)
    empty = lambda ids: float(sum(1 for q in ids if not run.get_hits(q)) / len(ids)) if ids else float("nan")  # noqa: E731
    return {"negatives": len(negative), "empty_on_negatives": empty(negative),
            "answerable": len(answerable), "false_empty": empty(answerable)}


def min_score_curve(run: Any, queries: Sequence[Any], qrels: Sequence[Any], points: int = 21) -> pd.DataFrame:
    """Both rates of the module docstring at ``-inf`` (nothing dropped beyond what the run already dropped) and at
    ``points`` quantiles of the queries' best scores (fewer where quantiles coincide), ascending. Columns ``min_score``,
    ``empty_on_negatives``, ``false_empty``, ``abstention_accuracy``. Empty frame when there are no negatives or
    no answerable queries."""
    negative, answerable = _split(queries, qrels)
    if not negative or not answerable:
        return pd.DataFrame(columns=["min_score", "empty_on_negatives", "false_empty", "abstention_accuracy"])
    top = {q: (run.get_hits(q)[0].score if run.get_hits(q) else None) for q in (*negative, *answerable)}
    scores = pd.Series([s for s in top.values() if s is not None], dtype=float)
    cuts = sorted({float("-inf"), *scores.quantile([i / (points - 1) for i in range(points)]).tolist()}) \
        if len(scores) else [float("-inf")]
    rows = []
    for t in cuts:
        empty_neg = sum(1 for q in negative if (best := top[q]) is None or best < t) / len(negative)
        false_empty = sum(1 for q in answerable if (best := top[q]) is None or best < t) / len(answerable)
        rows.append({"min_score": t, "empty_on_negatives": empty_neg, "false_empty": false_empty,
                     "abstention_accuracy": abstention_accuracy(empty_neg, false_empty)})
    return pd.DataFrame(rows)


def best_threshold(curve: pd.DataFrame) -> dict[str, float] | None:
    """The row of ``curve`` with the highest abstention accuracy (the lowest ``min_score`` among equals), as a
    dict; None for an empty curve."""
    if curve.empty:
        return None
    best = curve.loc[curve["abstention_accuracy"].idxmax()]
    return {k: float(best[k]) for k in curve.columns}
