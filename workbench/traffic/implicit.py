"""``workbench logs judge``: implicit judgments for a dataset from a log set, and their agreement with the
scholars.

1. **Impressions** (:func:`impressions`): each logged search is one, keyed by its normalised text
   (:func:`workbench.traffic.sample.normalise`), with the ranks its clicks and follow-up fetches used
   (:data:`workbench.traffic.interleave.USES`; the rank is the event's position, else the hit's place).
2. **A click model** scores each (key, document) pair seen at least ``min_impressions`` times
   (:mod:`workbench.traffic.clicks`: ``pbm``, ``cascade`` or ``coec``), and :func:`workbench.traffic.clicks.grades`
   puts the score on the 0-2 scale with the model's thresholds (:data:`THRESHOLDS` unless given).
3. **Mapped to the dataset** (:func:`to_dataset`): a key grades every query of the dataset whose normalised text
   is that key (a traffic query drawn by ``logs sample``, or a built query typed as it is), and only documents of
   the dataset; the rest is counted, not kept.
4. **Written** as the ``implicit`` layer with its provenance (:mod:`workbench.judging.implicit`), and compared with
   the scholars' grades (the ``human`` layer) per stratum, query type × script (:func:`agreement_by_stratum`:
   linearly weighted Cohen's kappa and ordinal Krippendorff's alpha, 95% bootstrap CIs over pairs, the
   machinery of :mod:`workbench.judging.agreement`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workbench.traffic.clicks import Impression, Score

#: Models ``logs judge`` fits.
MODELS = ("pbm", "cascade", "coec")
#: Default grade thresholds per model (grade 1 from the first, 2 from the second): probabilities of a click
#: when examined (pbm, cascade); clicks over expected clicks (coec: 1 is average for the ranks shown).
THRESHOLDS = {"pbm": (0.2, 0.5), "cascade": (0.2, 0.5), "coec": (0.8, 1.5)}


def impressions(queries, events) -> list[Impression]:
    """The log set's searches as :class:`Impression` rows (module docstring), in time order; a search whose text
    normalises to nothing is left out.

    Args:
        queries, events: the log set's tables (:func:`workbench.traffic.importer.load_log_set`).
    """
    from workbench.traffic.interleave import used_ranks
    from workbench.traffic.sample import normalise

    used = used_ranks(queries, events)
    out = []
    order = queries.sort_values("time", kind="stable")
    for qid, text, hits in zip(order["query_id"], order["user_query"], order["hit_ids"], strict=True):
        key = normalise(str(text))
        if key:
            out.append(Impression(key, tuple(str(h) for h in hits), frozenset(used.get(str(qid), ()))))
    return out


def derive(imps: Sequence[Impression], model: str, min_impressions: int) -> dict[tuple[str, str], Score]:
    """(key, doc) → the model's score (module docstring).

    Raises:
        ValueError: an unknown model.
    """
    from workbench.traffic import clicks

    if model == "pbm":
        return clicks.pbm(imps, min_impressions).attractiveness
    if model == "cascade":
        return clicks.cascade(imps, min_impressions)
    if model == "coec":
        return clicks.coec(imps, min_impressions)
    raise ValueError(f"model {model!r} is not one of {', '.join(MODELS)}")


def to_dataset(scores: Mapping[tuple[str, str], Score], grades: Mapping[tuple[str, str], int], ds
               ) -> tuple[dict[tuple[str, str], int], list[tuple[str, str, float, int, int]], dict[str, int]]:
    """The grades and scores of the dataset's queries and documents (module docstring), and what was left out:
    ``{"keys_without_query": …, "pairs_without_document": …}``."""
    from workbench.traffic.sample import normalise

    by_key: dict[str, list[str]] = {}
    for q in ds.queries:
        by_key.setdefault(normalise(q.text), []).append(q.query_id)
    docs = {d.doc_id for d in ds.documents}
    out: dict[tuple[str, str], int] = {}
    rows: list[tuple[str, str, float, int, int]] = []
    left = {"keys_without_query": len({k for k, _d in scores} - set(by_key)), "pairs_without_document": 0}
    for (key, doc), s in sorted(scores.items()):
        if key not in by_key:
            continue
        if doc not in docs:
            left["pairs_without_document"] += 1
            continue
        for qid in by_key[key]:
            out[qid, doc] = grades[key, doc]
            rows.append((qid, doc, s.value, s.impressions, s.clicks))
    return out, rows, left


def agreement_by_stratum(implicit: Mapping[tuple[str, str], int], human: Mapping[tuple[str, str], int],
                         stratum_of: Mapping[str, str], *, seed: int = 7, resamples: int = 1000) -> dict[str, Any]:
    """The implicit grades against the scholars' on the pairs both graded, per stratum and overall: ``pairs``,
    ``kappa`` and ``alpha`` as ``{"value", "low", "high", "units"}`` (None where undefined).

    Args:
        implicit, human: (query_id, doc_id) → grade 0-2.
        stratum_of: query_id → its stratum (``query_type/script``); a query it lacks is ``other``.
    """
    import numpy as np

    from workbench.judging.agreement import alpha_estimate, kappa_estimate

    common = sorted(set(implicit) & set(human))
    groups: dict[str, list[tuple[str, str]]] = {"all": common}
    for k in common:
        groups.setdefault(stratum_of.get(k[0], "other"), []).append(k)
    out: dict[str, Any] = {}
    for name in ["all", *sorted(g for g in groups if g != "all")]:
        keys = groups[name]
        a = np.array([implicit[k] for k in keys], dtype=float)
        b = np.array([human[k] for k in keys], dtype=float)
        kappa = kappa_estimate(a, b, seed=seed, resamples=resamples, label=f"implicit-kappa-{name}")
        alpha = alpha_estimate(np.vstack([a, b]) if keys else np.empty((2, 0)), seed=seed, resamples=resamples,
                               label=f"implicit-alpha-{name}")
        out[name] = {"pairs": len(keys), "kappa": kappa.to_json(), "alpha": alpha.to_json()}
    return out
