"""Evaluation of runs against graded qrels: per-query values, means by group, latency.

**Engine.** :func:`evaluate` computes every measure with `ir_measures
<https://ir-measur.es>`_, which hands each measure to a provider: recall, precision and
nDCG go to ``pytrec_eval`` (trec_eval's C code, so the values are trec_eval's);
``RR@k`` goes to ir_measures' MS MARCO implementation and ``Judged@k`` to its own
judgment-rate code. :func:`cross_check` recomputes the means with `ranx
<https://amenra.github.io/ranx/>`_; the tests hold the two to 1e-9.

**Measures** are named as ir_measures names them (:func:`parse_measures`):

* ``R@k`` recall: relevant documents in the top k / relevant documents judged for the
  query (0 when the query has none).
* ``P@k`` precision: relevant documents in the top k / k (k, not the ranking's length:
  a ranking shorter than k is padded with non-relevant documents, as in trec_eval).
* ``RR@k`` reciprocal rank: 1 / the rank of the first relevant document in the top k,
  0 when there is none (its mean is MRR@k).
* ``nDCG@k``: trec_eval's ``ndcg_cut.k``: DCG = sum over ranks i = 1..k of
  gain / log2(i + 1), with **gain = the graded relevance itself** (2 or 1; the
  Järvelin–Kekäläinen form, not 2^rel - 1), divided by the DCG of the ideal ranking
  of every judged document by relevance.
* ``Judged@k``: the fraction of the top k that has a judgment of any grade (0
  included). ir_measures divides by ``min(k, length of the ranking)``: a ranking of 4
  documents, 2 of them judged, has Judged@10 = 2/4 (P@10 would divide by 10).

**Binary threshold.** Recall, precision and RR count a document as relevant when its
relevance is >= 1 (:data:`workbench.io.formats.BINARY_THRESHOLD`; ir_measures' default
``rel=1``). A judgment of 0 is *judged non-relevant*: it counts for Judged@k, never as
a hit. nDCG uses the grades as gains.

**Ties.** A :class:`~workbench.run.Run` is already in the workbench's written order
(score desc, tiebreak desc, doc_id asc). trec_eval re-sorts by score and breaks ties
by doc_id *descending*, other providers by doc_id ascending, and none knows the
tiebreak. So the measures are never given the raw scores: each hit is given the score
``len(hits) - rank + 1`` (rank from 1), strictly decreasing, and every provider sees
exactly the run's order.

**Which queries count.** ``queries`` is the evaluation set (pass the test split only
to evaluate the test split). A query with at least one judgment is evaluated; if the
run has no hits for it (missing or empty) it scores 0 on every measure and stays in
every mean. A query with no judgment at all is left out of every mean and reported in
:attr:`EvalResult.unjudged_queries` and :attr:`EvalResult.warnings`. Run and qrels
rows for queries outside ``queries`` are ignored.

**Time-span documents.** With ``spans`` (:class:`workbench.eval.spans.SpanMatching`: a config's ``window_ms``,
the experiment's ``time_tolerance_ms``), the run is first rewritten by :func:`workbench.eval.spans.rewrite_run`: a
hit whose widened span meets a judged span of the same parent is credited with that judged document, each judged
document once; the measures above then run on the rewritten run with the ordinary qrels. Without it, or with
both widths 0, ids match exactly.
"""

from __future__ import annotations

import math
import warnings as _warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from workbench.errors import ConfigError
from workbench.eval.spans import SpanMatching, rewrite_run
from workbench.io.formats import BINARY_THRESHOLD
from workbench.run import Run
from workbench.text.scripts import script_of
from workbench.types import Qrel, Query

#: The measures reported when none are asked for (ir_measures names).
DEFAULT_MEASURES = ("R@5", "R@10", "R@20", "R@100", "nDCG@10", "RR@10", "P@5", "Judged@10")

#: Columns of :attr:`EvalResult.per_query` that :meth:`EvalResult.aggregate` can group by.
GROUP_COLUMNS = ("query_type", "split", "language", "script")

_EXAMPLES = "R@10, P@5, RR@10 (MRR@10), nDCG@10, Judged@10, AP@100, Success@10, R(rel=2)@10"

# ir_measures measure name -> ranx metric name (for cross_check).
_RANX_NAMES = {"R": "recall", "P": "precision", "RR": "mrr", "nDCG": "ndcg"}


# ---------------------------------------------------------------------------------------
# Measures
# ---------------------------------------------------------------------------------------


def parse_measures(names: str | Iterable[Any]) -> list:
    """Parse measure names into ir_measures measures (run this when a config is loaded).

    Args:
        names: ir_measures names (``"R@10"``, ``"nDCG@10"``, ``"RR@10"`` or
            ``"MRR@10"``, ``"P@5"``, ``"Judged@10"``, ``"R(rel=2)@10"``), or
            ``ir_measures`` measure objects; a single string is one name.

    Returns:
        A list of ``ir_measures.Measure`` in the given order. ``str(m)`` is the
        canonical name used as a column name (``"MRR@10"`` becomes ``"RR@10"``).

    Raises:
        ConfigError: an empty list, a name that does not parse or names no measure
            (``"recall@ten"``, ``"nDCG@"``, ``"Foo@10"``), a cutoff below 1, a
            measure that is not a per-query mean (``NumRet``, ``NumQ``), one no
            installed provider computes, or the same measure twice. The message names
            the bad entry and lists valid examples.
    """
    import ir_measures
    from ir_measures.measures.base import MeanAgg

    if isinstance(names, (str, ir_measures.Measure)):
        names = [names]
    try:
        items = list(names)
    except TypeError:
        raise ConfigError(f"measures must be a list of names such as [{_EXAMPLES}], got {names!r}") from None
    if not items:
        raise ConfigError(f"measures is empty: name at least one, e.g. {_EXAMPLES}")
    out: list = []
    seen: dict[str, Any] = {}
    for item in items:
        if isinstance(item, ir_measures.Measure):
            m = item
        elif isinstance(item, str):
            name = item.strip()
            if not name:
                raise ConfigError(f"measure name {item!r} is empty; valid examples: {_EXAMPLES}")
            try:
                m = ir_measures.parse_measure(name)
            except (ValueError, NameError, AssertionError, SyntaxError, TypeError) as exc:
                raise ConfigError(
                    f"unknown or malformed measure {item!r} ({exc}); use ir_measures names such as {_EXAMPLES} "
                    "(https://ir-measur.es/en/latest/measures.html)"
                ) from None
        else:
            raise ConfigError(f"measure {item!r} is a {type(item).__name__}, not a name; use names such as {_EXAMPLES}")
        for pname, info in m.SUPPORTED_PARAMS.items():
            if info.required and pname not in m.params:
                raise ConfigError(f"measure {item!r} needs a {pname}: write it as {m.NAME}@10; valid examples: {_EXAMPLES}")
        try:
            m.validate_params()  # ir_measures asserts on a bad parameter value
        except AssertionError as exc:
            raise ConfigError(f"measure {item!r} is incomplete or invalid ({exc}); valid examples: {_EXAMPLES}") from None
        if "cutoff" in m.SUPPORTED_PARAMS:
            cutoff = m["cutoff"]
            if isinstance(cutoff, int) and cutoff < 1:
                raise ConfigError(f"measure {item!r} has cutoff {cutoff}; a cutoff is at least 1 (e.g. {m.NAME}@10)")
        if not isinstance(m.aggregator(), MeanAgg):
            raise ConfigError(f"measure {item!r} is a count, not a per-query mean; use a mean measure such as {_EXAMPLES}")
        if not ir_measures.DefaultPipeline.supports(m):
            raise ConfigError(f"measure {item!r} has no installed ir_measures provider; use one of {_EXAMPLES}")
        key = str(m)
        if key in seen:
            raise ConfigError(f"measure {item!r} repeats {seen[key]!r} (both are {key}); list each measure once")
        seen[key] = item
        out.append(m)
    return out


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------


def ranx_metric(measure: str) -> str:
    """ranx's name for a measure: ``R@10`` → ``recall@10``, ``nDCG@10`` → ``ndcg@10``, ``RR@10`` →
    ``mrr@10``, ``P@5`` → ``precision@5``.

    Raises:
        ConfigError: the measure has no plain ranx equivalent (Judged@k, a measure with other
            parameters); the message lists those that have one.
    """
    (m,) = parse_measures([measure])
    base = _RANX_NAMES.get(m.NAME)
    cutoff = m["cutoff"] if "cutoff" in m.SUPPORTED_PARAMS else None
    plain = all(k == "cutoff" for k, v in m.params.items() if v != m.SUPPORTED_PARAMS[k].default)
    if base is None or not isinstance(cutoff, int) or not plain:
        raise ConfigError(f"ranx has no equivalent for {m}; use R@k, P@k, RR@k or nDCG@k")
    return f"{base}@{cutoff}"


#: The document a query without hits holds in :func:`ranx_run` ``(keep_empty=True)``: it matches no qrel.
NO_HIT = "__none__"


def ranx_run(run: Run, qids: Iterable[str] | None = None, *, keep_empty: bool = False):
    """A :class:`workbench.run.Run` as a ranx ``Run`` named like it, scored ``n, n-1, …, 1`` in its own
    order (so ranx sees the workbench's tie order, not its own).

    Queries without hits are left out, or with ``keep_empty`` hold the one document :data:`NO_HIT`
    scored 0, so that ranx scores them 0 (ranx cannot hold an empty ranking, nor a run of none)."""
    from ranx import Run as RanxRun

    qids = list(qids) if qids is not None else list(run)
    scores = _rank_scores(run, qids)
    if keep_empty:
        scores = {q: scores.get(q) or {NO_HIT: 0.0} for q in qids}
    return RanxRun(scores, name=run.name or None)


def ranx_qrels(qrels: Iterable[Qrel], qids: Iterable[str] | None = None):
    """Qrels as a ranx ``Qrels`` (every grade kept; ranx counts grade >= 1 as relevant), restricted to
    ``qids`` when given; queries without a judged pair are left out (ranx refuses empty ones)."""
    from ranx import Qrels as RanxQrels

    j = _judgments(qrels)
    keep = set(qids) if qids is not None else set(j)
    return RanxQrels({q: dict(d) for q, d in j.items() if q in keep and d})


def _judgments(qrels: Iterable[Qrel]) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: relevance}}``; a conflicting duplicate raises ValueError."""
    out: dict[str, dict[str, int]] = {}
    for q in qrels:
        if not isinstance(q, Qrel):
            raise ValueError(f"qrels must hold workbench.types.Qrel rows, got {q!r}; read them with formats.read_qrels")
        if isinstance(q.relevance, bool) or not isinstance(q.relevance, (int, np.integer)):
            raise ValueError(f"qrel {q.query_id} {q.doc_id}: relevance {q.relevance!r} is not an integer grade")
        docs = out.setdefault(str(q.query_id), {})
        doc = str(q.doc_id)
        if doc in docs and docs[doc] != int(q.relevance):
            raise ValueError(
                f"qrels judge query {q.query_id!r} doc {doc!r} twice ({docs[doc]} and {q.relevance}); keep one grade"
            )
        docs[doc] = int(q.relevance)
    return out


def _rank_scores(run: Run, qids: Iterable[str]) -> dict[str, dict[str, float]]:
    """The run in its own order with scores ``n, n-1, ..., 1``; queries with no hits are left out."""
    out: dict[str, dict[str, float]] = {}
    for qid in qids:
        hits = run.get_hits(qid)
        if hits:
            n = len(hits)
            out[qid] = {h.doc_id: float(n - i) for i, h in enumerate(hits)}
    return out


def _check_run(run: Any) -> None:
    if not isinstance(run, Run):
        raise ValueError(f"run must be a workbench.run.Run, got {type(run).__name__}; wrap a dict with Run(rows)")


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EvalResult:
    """The result of :func:`evaluate`.

    Attributes:
        per_query: one row per judged query, in the order of ``queries``: columns
            ``query_id, query_type, split, language, script`` (the script the query is
            typed in, :func:`workbench.text.scripts.script_of`: ``IAST``, ``ASCII``,
            ``Cyrillic``, ``Devanagari``…) and one float column per measure, named by
            the measure (``"R@10"``, ``"nDCG@10"``).
        measures: the measure names, in order.
        run_name: the run's name.
        unjudged_queries: how many queries had no judgment and were left out.
        unjudged_query_ids: their ids.
        empty_queries: how many judged queries the run had no hits for (scored 0).
        empty_query_ids: their ids.
        warnings: human-readable notes on the two cases above (empty when none).
    """

    per_query: pd.DataFrame
    measures: tuple[str, ...]
    run_name: str = ""
    unjudged_queries: int = 0
    unjudged_query_ids: tuple[str, ...] = ()
    empty_queries: int = 0
    empty_query_ids: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    @property
    def overall(self) -> dict[str, float]:
        """Measure name → mean over every judged query (missing ones count as 0)."""
        return {m: float(self.per_query[m].mean()) for m in self.measures}

    @property
    def n(self) -> int:
        """The number of judged queries in every mean."""
        return len(self.per_query)

    def aggregate(self, by: str | Sequence[str] | None = None) -> pd.DataFrame:
        """Mean of every measure per group.

        Args:
            by: ``None`` (one row over all judged queries), a column of
                :data:`GROUP_COLUMNS` (``"query_type"``, ``"split"``, ``"language"``, ``"script"``)
                or a list of them (``["query_type", "split"]``).

        Returns:
            A DataFrame indexed by the group (the column's values, sorted; a
            MultiIndex for several columns; a single row labelled ``"all"`` for
            ``None``) with the columns ``n`` (queries in the group) and one per
            measure. Groups with no query do not appear. ``.reset_index()`` turns
            the group into ordinary columns.

        Raises:
            ValueError: ``by`` names a column that is not in :data:`GROUP_COLUMNS`, or
                a column twice.
        """
        if by is None:
            keys: list[str] = []
        elif isinstance(by, str):
            keys = [by]
        else:
            keys = list(by)
        for k in keys:
            if k not in GROUP_COLUMNS:
                raise ValueError(f"cannot aggregate by {k!r}: group by one or more of {', '.join(GROUP_COLUMNS)}")
        if len(set(keys)) != len(keys):
            raise ValueError(f"aggregate by {keys}: a column appears twice")
        cols = list(self.measures)
        if not keys:
            row: dict[str, Any] = {"n": len(self.per_query)}
            row.update({m: float(self.per_query[m].mean()) for m in cols})
            return pd.DataFrame([row], columns=["n", *cols], index=pd.Index(["all"], name="group"))
        groups = self.per_query.groupby(keys, sort=True)
        out = groups[cols].mean()
        out.insert(0, "n", groups.size().astype(int))
        return out


# ---------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------


def evaluate(
    run: Run,
    qrels: Sequence[Qrel],
    queries: Sequence[Query],
    measures: Sequence[Any] = DEFAULT_MEASURES,
    *,
    spans: SpanMatching | None = None,
) -> EvalResult:
    """Evaluate a run: per-query values and means, with ir_measures (trec_eval values).

    The measures see the run in *its* order (score desc, tiebreak desc, doc_id asc):
    hits are rescored ``n, n-1, ..., 1`` so no provider can re-break a tie (see the
    module docstring). Binary measures count relevance >= 1 as relevant
    (``BINARY_THRESHOLD``); nDCG uses the grades as gains.

    Args:
        run: the ranked hits per query.
        qrels: graded judgments; those of queries outside ``queries`` are ignored.
        queries: the evaluation set; its query_type / split / language label the rows.
        measures: ir_measures names or measures (:func:`parse_measures`).
        spans: time-tolerant matching of span documents (module docstring,
            :mod:`workbench.eval.spans`); None or inactive: exact ids.

    Returns:
        An :class:`EvalResult`: one row per judged query (a query the run has no hits
        for scores 0 on every measure), queries without judgments counted in
        ``unjudged_queries`` and left out.

    Raises:
        ConfigError: a bad measure name.
        ValueError: ``run`` is not a Run, a query_id twice in ``queries``, a qrel with
            a non-integer or conflicting grade, or no query of ``queries`` has a
            judgment (check that the qrels belong to the same query set).
    """
    import ir_measures

    ms = parse_measures(measures)
    names = tuple(str(m) for m in ms)
    _check_run(run)
    queries = list(queries)
    seen: set[str] = set()
    for q in queries:
        if not isinstance(q, Query):
            raise ValueError(f"queries must hold workbench.types.Query rows, got {q!r}; read them with formats.read_queries")
        if q.query_id in seen:
            raise ValueError(f"query {q.query_id!r} appears twice in queries; each query_id must be unique")
        seen.add(q.query_id)
    judgments = _judgments(qrels)
    judged = [q for q in queries if judgments.get(q.query_id)]
    unjudged = tuple(q.query_id for q in queries if not judgments.get(q.query_id))
    if not judged:
        raise ValueError(
            f"none of the {len(queries)} queries has a judgment in the qrels ({len(judgments)} judged query ids); "
            "pass the qrels of the same query set"
        )
    qids = [q.query_id for q in judged]
    if spans is not None and spans.active:
        run = rewrite_run(Run({q: run.get_hits(q) for q in qids}, run.name), judgments, spans)
    ranked = _rank_scores(run, qids)
    empty = tuple(qid for qid in qids if qid not in ranked)

    values: dict[tuple[str, str], float] = {}
    if ranked:
        sub_qrels = {qid: judgments[qid] for qid in ranked}
        col = {m: str(m) for m in ms}
        for metric in ir_measures.iter_calc(ms, sub_qrels, ranked):
            values[(metric.query_id, col[metric.measure])] = float(metric.value)

    rows = []
    for q in judged:
        row: dict[str, Any] = {"query_id": q.query_id, "query_type": q.query_type, "split": q.split, "language": q.language,
                               "script": script_of(q.text)}
        for name in names:
            # A query with no hits scores 0; so would ir_measures' default, but say it here.
            row[name] = values.get((q.query_id, name), 0.0) if q.query_id in ranked else 0.0
        rows.append(row)
    per_query = pd.DataFrame(rows, columns=["query_id", *GROUP_COLUMNS, *names])
    per_query[list(names)] = per_query[list(names)].astype("float64")

    notes = []
    if unjudged:
        shown = ", ".join(unjudged[:5]) + (", ..." if len(unjudged) > 5 else "")
        notes.append(f"{len(unjudged)} of {len(queries)} queries have no judgment and are left out of every mean: {shown}")
    if empty:
        shown = ", ".join(empty[:5]) + (", ..." if len(empty) > 5 else "")
        notes.append(f"run {run.name or '?'} has no hits for {len(empty)} judged queries, scored 0: {shown}")
    return EvalResult(
        per_query=per_query,
        measures=names,
        run_name=run.name,
        unjudged_queries=len(unjudged),
        unjudged_query_ids=unjudged,
        empty_queries=len(empty),
        empty_query_ids=empty,
        warnings=tuple(notes),
    )


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """Summarise per-query latencies, in milliseconds.

    Args:
        latencies_ms: one wall-clock time per query, in milliseconds.

    Returns:
        ``{"p50", "p95", "mean", "n"}``: percentiles by ``numpy.percentile`` with linear
        interpolation between the closest ranks (``method="linear"``, numpy's
        default), the arithmetic mean, and the count, all in milliseconds but ``n``.

    Raises:
        ValueError: no latencies, or one that is negative, NaN or infinite (names its index).
    """
    values = [float(x) for x in latencies_ms]
    if not values:
        raise ValueError("latency_summary got no latencies: time at least one query")
    for i, v in enumerate(values):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"latency #{i} is {v}; latencies are finite milliseconds >= 0")
    arr = np.asarray(values, dtype=np.float64)
    return {
        "p50": float(np.percentile(arr, 50, method="linear")),
        "p95": float(np.percentile(arr, 95, method="linear")),
        "mean": float(arr.mean()),
        "n": len(values),
    }


def cross_check(
    run: Run,
    qrels: Sequence[Qrel],
    measures: Sequence[Any] = ("R@10", "P@5", "RR@10", "nDCG@10"),
) -> dict[str, float]:
    """The means of ``measures`` computed by ranx instead of ir_measures (for tests).

    The query set is every query with a judgment in ``qrels``; a query the run has no
    hits for scores 0, as in :func:`evaluate`. The run is rescored by rank exactly as in
    :func:`evaluate`, so both libraries see the same order. ranx counts relevance
    > 0 as relevant (= ``BINARY_THRESHOLD`` 1 for integer grades) and its ``ndcg`` is
    the Järvelin–Kekäläinen form (gain = grade), trec_eval's (its ``ndcg_burges`` uses
    2^grade - 1 and is not used). ranx compiles with numba on first import (~20 s
    cold; set ``NUMBA_CACHE_DIR`` to keep the cache).

    Args:
        run: the ranked hits per query.
        qrels: graded judgments.
        measures: ``R@k``, ``P@k``, ``RR@k``, ``nDCG@k`` (default rel / gains only).

    Returns:
        Measure name (ir_measures' canonical, e.g. ``"RR@10"``) → mean.

    Raises:
        ConfigError: a bad measure name, or one without a ranx equivalent here.
        ValueError: ``run`` is not a Run, bad qrels, or no qrels at all.
    """
    ms = parse_measures(measures)
    _check_run(run)
    ranx_names = {str(m): ranx_metric(str(m)) for m in ms}
    judgments = {q: d for q, d in _judgments(qrels).items() if d}
    if not judgments:
        raise ValueError("cross_check got no qrels: pass the judgments of the run's query set")
    qids = sorted(judgments)
    ranked = _rank_scores(run, qids)

    # A query with no relevant document, or no hits, scores 0 on all four measures
    # (trec_eval and ranx agree); ranx is given only the others, so none is empty for it.
    scored = [q for q in qids if q in ranked and any(r >= BINARY_THRESHOLD for r in judgments[q].values())]
    per_query: dict[str, dict[str, float]] = {name: {q: 0.0 for q in qids} for name in ranx_names}
    if scored:
        from ranx import Qrels as RanxQrels
        from ranx import Run as RanxRun
        from ranx import evaluate as ranx_evaluate

        rq = RanxQrels({q: dict(judgments[q]) for q in scored})
        rr = RanxRun({q: ranked[q] for q in scored})
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")  # numba's "unsafe cast uint64 to int64" on query counts
            ranx_evaluate(rq, rr, sorted(set(ranx_names.values())), return_mean=False)
        for name, rname in ranx_names.items():
            for q in scored:
                per_query[name][q] = float(rr.scores[rname][q])
    return {name: float(np.mean(list(vals.values()))) for name, vals in per_query.items()}


def latency_or_nan(latencies_ms: Sequence[float]) -> dict[str, float]:
    """:func:`latency_summary`, but an empty list gives ``n = 0`` and NaN percentiles instead of an error."""
    if len(latencies_ms) == 0:
        return {"p50": float("nan"), "p95": float("nan"), "mean": float("nan"), "n": 0}
    return latency_summary(latencies_ms)
