"""The gate's decisions: paired checks against a baseline, checks against expected values, Judged@k.

**Decision rule** per measure and stratum (``all`` and each query type), with margin δ:

* paired: the per-query difference d = candidate − baseline; 95% percentile-bootstrap CI
  of mean(d) (Efron and Tibshirani 1993, the seed fixed); **fail** when the CI's upper
  bound is below −δ (a regression beyond the margin), **pass** when its lower bound is
  at least −δ (non-inferior), otherwise **inconclusive** (warns, does not fail);
* expected values: **fail** when the candidate's mean is below expected − δ (the runs
  are deterministic, so the point value is compared, as regression files do);
* a stratum with fewer than ``min_queries`` judged queries is reported, never failed;
* every paired check also carries the two-sided p-value of the paired sign-flip test and that
  p-value adjusted over all the paired checks of one result (measures × strata read together) by
  Holm–Bonferroni (:func:`workbench.eval.stats.adjust_pvalues`); the decision stays the CI rule
  above, and a fail whose adjusted p-value is 0.05 or more says so in its note;
* judged coverage: mean Judged@k of the candidate below ``judged_floor`` warns (or
  fails with ``judged_action = "fail"``) and lists the unjudged documents of its top k,
  best-ranked first, to judge next;
* honest empty answers (when the policy asks: ``empty_floor`` > 0 or ``false_empty_ceiling`` < 1, and the
  splits hold unanswerable queries): **fail** when fewer unanswerable queries than the floor are answered with
  nothing, or more answerable ones than the ceiling (:func:`answers_check`).

:func:`gate_pair` and :func:`gate_expected` gate one candidate
(:class:`~workbench.gate.sources.Ranking`) and return a :class:`GateResult` of :class:`Check` objects,
judged by one qrels layer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from workbench.errors import ConfigError
from workbench.gate.policy import GATE_MEASURES, GatePolicy
from workbench.gate.sources import Ranking
from workbench.run import Run
from workbench.types import DEFAULT_SEED, SPLITS

#: What a check can come to.
STATUSES = ("pass", "fail", "inconclusive", "too-few")
#: Keys of a non-empty ``GateResult.judged`` (:func:`judged_check`).
JUDGED_KEYS = ("k", "mean", "floor", "status", "to_judge")


@dataclass
class Check:
    """One decision: measure × stratum.

    Values are means of the measure over the stratum's queries (its own units, 0-1); ``diff`` is
    candidate − baseline (or − the expected value); ``ci_low`` / ``ci_high`` the 95% bootstrap CI of
    the mean paired difference (NaN against expected values); ``n`` the queries compared;
    ``p_value`` the paired sign-flip test's two-sided p-value and ``p_adjusted`` that p-value
    adjusted over the result's paired checks (Holm–Bonferroni; both NaN against expected values and
    in reports written before they existed).
    """

    measure: str
    stratum: str
    n: int
    candidate: float
    baseline: float
    diff: float
    ci_low: float
    ci_high: float
    status: str  # one of STATUSES
    note: str = ""
    p_value: float = math.nan
    p_adjusted: float = math.nan

    def to_json(self) -> dict[str, Any]:
        """The check as a dict (an undefined number is NaN here; written out it is ``null``:
        :mod:`workbench._infra.jsonout`); the p-values
        are left out where there are none (checks against expected values, reports written before them),
        so such a report is written back as it was read."""
        d = asdict(self)
        if math.isnan(self.p_value) and math.isnan(self.p_adjusted):
            del d["p_value"], d["p_adjusted"]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Check:
        """The inverse of :meth:`to_json`.

        Raises:
            KeyError, TypeError, ValueError: a missing key, a value of the wrong type, an unknown status
                (:meth:`~workbench.gate.report.GateReport.from_json` names the file).
        """
        if d["status"] not in STATUSES:
            raise ValueError(f"status {d['status']!r} is not one of {', '.join(STATUSES)}")
        return cls(str(d["measure"]), str(d["stratum"]), int(d["n"]), _num(d["candidate"]), _num(d["baseline"]),
                   _num(d["diff"]), _num(d["ci_low"]), _num(d["ci_high"]), str(d["status"]), str(d.get("note", "")),
                   _num(d.get("p_value")), _num(d.get("p_adjusted")))


def _num(v: Any) -> float:
    """A report's number: ``null`` (strict JSON's undefined number) or absent is NaN; anything else ``float(v)``."""
    return math.nan if v is None else float(v)


@dataclass
class GateResult:
    """Everything the gate found for one candidate; ``exit_code`` 0 pass, 1 regression.

    ``margin`` is the policy's δ (absolute, in the measures' units); ``judged`` is :func:`judged_check`'s
    dict (empty when not checked); ``losses`` is :func:`losses`'s list; ``answers`` is :func:`answers_check`'s
    dict (empty when not checked).
    """

    dataset: str
    candidate: str
    baseline: str
    margin: float
    checks: list[Check]
    judged: dict[str, Any]
    losses: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    #: The qrels layer both rankings were judged by, and :func:`workbench.judging.layers.qrels_sha256` of it.
    qrels: str = "built"
    qrels_sha256: str = ""
    #: :func:`answers_check`'s dict (empty when not checked).
    answers: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or "fail" in (self.judged.get("status"), self.answers.get("status")) else 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields (checks as :meth:`Check.to_json`; ``answers`` only when checked) and
        ``exit_code``."""
        d = {f.name: getattr(self, f.name) for f in fields(self)
             if f.name != "checks" and (f.name != "answers" or self.answers)}  # older reports have no answers
        d["checks"] = [c.to_json() for c in self.checks]
        d["exit_code"] = self.exit_code
        return json.loads(json.dumps(d, default=str, allow_nan=True))  # NaN kept: the writers make it null

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GateResult:
        """The inverse of :meth:`to_json` (the stored ``exit_code`` is not read: it follows from the checks).
        Reports written before the qrels layers existed have no ``qrels``: they were judged by ``built``.

        Raises:
            KeyError, TypeError, ValueError: a missing or malformed field
                (:meth:`~workbench.gate.report.GateReport.from_json` names the file).
        """
        judged = d.get("judged") or {}
        if not isinstance(judged, dict):
            raise TypeError(f"judged must be an object, not {type(judged).__name__}")
        for key in JUDGED_KEYS if judged else ():
            judged[key]  # noqa: B018 - presence check
        losses = d.get("losses") or []
        warnings = d.get("warnings") or []
        if not isinstance(losses, list) or not isinstance(warnings, list) or not isinstance(d["checks"], list):
            raise TypeError("checks, losses and warnings must be lists")
        return cls(str(d["dataset"]), str(d["candidate"]), str(d["baseline"]), float(d["margin"]),
                   [Check.from_json(c) for c in d["checks"]], dict(judged), list(losses), [str(w) for w in warnings],
                   str(d.get("qrels", "built")), str(d.get("qrels_sha256", "")), _answers_of(d.get("answers")))


def _answers_of(value: Any) -> dict[str, Any]:
    """A stored :func:`answers_check` dict, checked (reports written before it have none)."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"answers must be an object, not {type(value).__name__}")
    for key in ANSWERS_KEYS:
        value[key]  # noqa: B018 - presence check
    return dict(value)


def _strata(per_query) -> list[tuple[str, Any]]:
    out = [("all", per_query)]
    for t in sorted(per_query["query_type"].unique()):
        out.append((t, per_query[per_query["query_type"] == t]))
    return out


def paired_checks(cand, base, measures: Sequence[str], *, policy: GatePolicy = GatePolicy(),
                  seed: int = DEFAULT_SEED) -> list[Check]:
    """Per measure and stratum, the paired non-inferiority decision (see the module docstring) with
    ``policy.margin`` (absolute, in the measure's units) and ``policy.min_queries``, each with its
    sign-flip p-value and the Holm–Bonferroni adjusted one (the family: every check returned); the
    statistics are :func:`workbench.eval.stats.paired_comparison`'s."""
    from workbench.eval.stats import P_ADJUST, paired_comparison

    margin, min_queries = policy.margin, policy.min_queries
    joined = cand.merge(base[["query_id", *measures]], on="query_id", how="inner", suffixes=("", "__base"))
    table = paired_comparison(joined, {m: (m, f"{m}__base") for m in measures}, seed=seed)
    checks = []
    for r in table.itertuples(index=False):
        if r.n < min_queries:
            status = "too-few"
        elif r.ci_high < -margin:
            status = "fail"
        elif r.ci_low >= -margin:
            status = "pass"
        else:
            status = "inconclusive"
        check = Check(r.measure, r.stratum, int(r.n), r.candidate, r.baseline, r.delta, r.ci_low, r.ci_high, status,
                      p_value=r.p_value, p_adjusted=float(r.p_adjusted))
        if status == "fail" and not r.p_adjusted < 0.05:
            check.note = f"the regression is not significant after {P_ADJUST} correction (adjusted p = {r.p_adjusted:.3f})"
        checks.append(check)
    return checks


def expected_checks(cand, expected: dict[str, float], *, policy: GatePolicy = GatePolicy()) -> list[Check]:
    """Against expected values ``{"R@10": 0.5, "R@10/term": 0.4}``: fail below expected − δ (``policy.margin``);
    a stratum with fewer than ``policy.min_queries`` queries is too-few.

    Raises:
        ConfigError: an expected value names a measure that was not evaluated or a stratum without queries.
    """
    margin, min_queries = policy.margin, policy.min_queries
    checks = []
    strata = dict(_strata(cand))
    for key, want in expected.items():
        m, _, stratum = key.partition("/")
        stratum = stratum or "all"
        if m not in cand.columns:
            raise ConfigError(f"expected value {key!r} names measure {m!r} that was not evaluated")
        part = strata.get(stratum)
        if part is None:
            raise ConfigError(f"expected value {key!r}: the dataset has no {stratum!r} queries in the gated splits")
        a = part[m].to_numpy(float)
        n = len(a)
        value = float(a.mean()) if n else math.nan
        if n < min_queries:
            status = "too-few"
        else:
            status = "fail" if value < want - margin else "pass"
        checks.append(Check(m, stratum, n, value, float(want), value - float(want), math.nan, math.nan, status,
                            "against the expected value"))
    return checks


def judged_check(run: Run, qrels, queries, *, k: int = 10, policy: GatePolicy = GatePolicy()) -> dict[str, Any]:
    """Mean Judged@k of ``run`` over ``queries`` (a fraction, 0-1) against ``policy.judged_floor``, and the
    unjudged documents of its top k (best-ranked first, at most 50).

    Returns:
        ``{"k", "mean", "floor", "status" (pass | warn | fail: ``policy.judged_action`` below the floor),
        "to_judge": [{"query_id", "doc_id", "rank"}]}``.
    """
    floor, action = policy.judged_floor, policy.judged_action
    judged = {(r.query_id, r.doc_id) for r in qrels}
    fractions: list[float] = []
    unjudged: dict[tuple[str, str], int] = {}
    for q in queries:
        top = run.get_hits(q.query_id)[:k]
        if not top:
            continue
        hit = sum((q.query_id, h.doc_id) in judged for h in top)
        fractions.append(hit / len(top))
        for rank, h in enumerate(top, 1):
            if (q.query_id, h.doc_id) not in judged:
                unjudged.setdefault((q.query_id, h.doc_id), rank)
    import numpy as np  # here, not at the top: the CLI imports this module for its --help

    mean = float(np.mean(fractions)) if fractions else 0.0
    status = "pass" if mean >= floor else ("fail" if action == "fail" else "warn")
    to_judge = sorted(unjudged.items(), key=lambda x: (x[1], x[0]))[:50]
    return {"k": k, "mean": mean, "floor": floor, "status": status,
            "to_judge": [{"query_id": q, "doc_id": d, "rank": r} for (q, d), r in to_judge]}


#: Keys of a non-empty ``GateResult.answers`` (:func:`answers_check`).
ANSWERS_KEYS = ("negatives", "empty_on_negatives", "floor", "answerable", "false_empty", "ceiling", "status")


def answers_check(run: Run, qrels, queries, *, policy: GatePolicy = GatePolicy()) -> dict[str, Any]:
    """Honest empty answers (:func:`workbench.eval.answers.answer_rates`) of ``run`` over ``queries`` against
    ``policy.empty_floor`` and ``policy.false_empty_ceiling``: ``fail`` when the share of unanswerable queries
    answered with nothing is below the floor, or the share of answerable ones answered with nothing is above the
    ceiling. Empty (not checked) when both are switched off (0 and 1). Without unanswerable queries the ceiling
    is still checked and the floor is not, which ``note`` says (``empty_on_negatives`` is then NaN).

    Returns:
        ``{"negatives", "empty_on_negatives", "floor", "answerable", "false_empty", "ceiling", "status", "note"}``
        (rates 0-1; ``status`` pass | fail; ``note`` empty or why the floor was not checked).
    """
    from workbench.eval.answers import answer_rates

    floor, ceiling = policy.empty_floor, policy.false_empty_ceiling
    if floor <= 0 and ceiling >= 1:
        return {}
    rates = answer_rates(run, queries, qrels)
    negatives = rates["negatives"]
    false_empty = rates["false_empty"] if rates["answerable"] else 0.0
    ok = (not negatives or rates["empty_on_negatives"] >= floor) and false_empty <= ceiling
    note = "" if negatives or floor <= 0 else "no unanswerable query in the gated splits: the floor is not checked"
    return {"negatives": negatives, "empty_on_negatives": rates["empty_on_negatives"], "floor": floor,
            "answerable": rates["answerable"], "false_empty": false_empty, "ceiling": ceiling,
            "status": "pass" if ok else "fail", "note": note}


def losses(cand: Ranking, base: Ranking | None, cand_pq, base_pq, qrels, measure: str, k: int,
           top: int = 10) -> list[dict[str, Any]]:
    """The queries that lost most on ``measure``, with the relevant documents the baseline had in
    its top k and the candidate did not, and the baseline lanes that had found each one."""
    if base_pq is None or base is None:
        return []
    rel: dict[str, set[str]] = {}
    for r in qrels:
        if r.relevance >= 1:
            rel.setdefault(r.query_id, set()).add(r.doc_id)
    j = cand_pq[["query_id", measure]].merge(base_pq[["query_id", measure]], on="query_id",
                                              suffixes=("", "_base")).set_index("query_id")
    j["diff"] = j[measure] - j[f"{measure}_base"]
    out = []
    for qid, row in j.sort_values("diff").head(top).iterrows():
        if row["diff"] >= 0:
            break
        got = {h.doc_id for h in cand.run.get_hits(qid)[:k]}
        had = [h.doc_id for h in base.run.get_hits(qid)[:k] if h.doc_id in rel.get(qid, set())]
        dropped = []
        for d in had:
            if d in got:
                continue
            lanes = [ln for ln, r in (base.lanes or {}).items() if any(h.doc_id == d for h in r.get_hits(qid))]
            missing = [ln for ln in lanes if ln not in cand.lanes] if cand.lanes else []  # a run file: lanes unknown
            dropped.append({"doc_id": d, "baseline_lanes": lanes, "lanes_missing_in_candidate": missing})
        out.append({"query_id": qid, "candidate": float(row[measure]), "baseline": float(row[f"{measure}_base"]),
                    "diff": float(row["diff"]), "dropped": dropped})
    return out


def _evaluate(ranking: Ranking, dataset, splits: Sequence[str], measures: Sequence[str]):
    from workbench.eval.evaluate import evaluate

    queries = [q for q in dataset.queries if q.split in splits]
    ev = evaluate(ranking.run, dataset.qrels, queries, list(measures))
    ranking.warnings.extend(f"{ranking.label}: {w}" for w in ev.warnings)
    if ranking.from_file:
        ranking.warnings.extend(tie_warnings(ranking, ev, dataset, queries))
    return ev.per_query, queries


def tie_warnings(ranking: Ranking, ev, dataset, queries) -> list[str]:
    """Warnings for the measures whose mean changes when ``ranking``'s score ties are broken the other way.

    A run file is evaluated in trec_eval 9's order (scores as 32-bit floats; equal scores: doc_id descending); this
    re-evaluates it with equal scores in doc_id ascending order (the workbench's rule for its
    own runs) and names each measure whose mean differs by more than 1e-12, with the tie
    counts of :func:`workbench.run.count_ties`. Empty when ties decide nothing.

    Args:
        ranking: the ranking read from the file; ``ev``: its :class:`EvalResult`;
        dataset, queries: what ``ev`` was computed on.
    """
    import re

    from workbench.eval.evaluate import evaluate
    from workbench.run import count_ties, reorder_ties

    ks = sorted({int(m) for name in ev.measures for m in re.findall(r"@(\d+)", name)})
    ties = count_ties(ranking.run, ks)
    if not ties.queries:
        return []
    alt = evaluate(reorder_ties(ranking.run, "doc_id"), dataset.qrels, queries, list(ev.measures))
    a, b = ev.overall, alt.overall
    decided = [f"{m} {a[m]:.4f} (trec_eval order) vs {b[m]:.4f} (doc_id ascending)"
               for m in ev.measures if abs(a[m] - b[m]) > 1e-12]
    if not decided:
        return []
    cut = ", ".join(f"@{k}: {n}" for k, n in ties.straddling.items() if n)
    f32 = (f", {ranking.float32_ties} of them written with different digits but equal as 32-bit floats"
           if ranking.float32_ties else "")
    return [f"{ranking.label}: score ties decide {len(decided)} measure(s): {'; '.join(decided)}. "
            f"{ties.queries} query(ies) have tied scores ({ties.hits} tied hits{f32}"
            + (f"; ties across the cutoff {cut}" if cut else "") + "). The file is scored as trec_eval 9 "
            "(the trec_eval of pytrec_eval and ir_measures) scores it: scores as 32-bit floats, equal scores "
            "by doc_id descending; give scores distinct in float32 to make the order explicit"]


def _judged_by(dataset, layer, splits: Sequence[str]):
    """``dataset`` as ``layer`` judges it (None: the built qrels as they are)."""
    if layer is None:
        return dataset
    from workbench.judging.layers import evaluation_view

    return evaluation_view(dataset, layer, splits)


def _stamp(res: GateResult, layer) -> GateResult:
    if layer is not None:
        res.qrels, res.qrels_sha256 = layer.layer, layer.sha256
        if layer.stale:
            res.warnings.append(f"{layer.stale} stale human judgment(s) of {res.dataset} were left out (the document "
                                "changed since); re-judge them")
    return res


def gate_pair(candidate: Ranking, baseline: Ranking, dataset, *, measures: Sequence[str] = GATE_MEASURES,
              policy: GatePolicy = GatePolicy(), splits: Sequence[str] = SPLITS, seed: int = DEFAULT_SEED,
              judged_k: int = 10, layer: Any = None) -> GateResult:
    """Candidate vs a baseline ranking: paired decisions per measure and stratum, judged coverage, losses.

    Args:
        measures: canonical measure names; the first is the one losses are listed by.
        policy: margin, min_queries, judged floor and action (:class:`~workbench.gate.policy.GatePolicy`;
            default: its defaults).
        splits: the query splits gated.
        seed: the bootstrap seed.
        judged_k: the depth of the Judged@k check.
        layer: the qrels to judge by (:class:`workbench.judging.layers.LayerQrels` of ``dataset``);
            None: ``dataset.qrels`` as they are.

    Raises:
        JudgeError: ``human`` and no query of ``splits`` has a human grade.
    """
    dataset = _judged_by(dataset, layer, splits)
    cand_pq, queries = _evaluate(candidate, dataset, splits, measures)
    base_pq, _ = _evaluate(baseline, dataset, splits, measures)
    checks = paired_checks(cand_pq, base_pq, measures, policy=policy, seed=seed)
    judged = judged_check(candidate.run, dataset.qrels, queries, k=judged_k, policy=policy)
    k = int(str(measures[0]).rsplit("@", 1)[1]) if "@" in str(measures[0]) else 10
    lost = losses(candidate, baseline, cand_pq, base_pq, dataset.qrels, measures[0], k)
    return _stamp(GateResult(dataset.name, candidate.label, baseline.label, policy.margin, checks, judged, lost,
                             list(dict.fromkeys(candidate.warnings + baseline.warnings)),
                             answers=_answers(candidate, dataset, splits, policy)), layer)


def _answers(candidate: Ranking, dataset, splits: Sequence[str], policy: GatePolicy) -> dict[str, Any]:
    """:func:`answers_check` over every query of ``splits`` (negatives have no judgment, so the measures'
    queries leave them out)."""
    return answers_check(candidate.run, dataset.qrels, [q for q in dataset.queries if q.split in splits],
                         policy=policy)


def gate_expected(candidate: Ranking, expected: dict[str, float], dataset, *, policy: GatePolicy = GatePolicy(),
                  splits: Sequence[str] = SPLITS, judged_k: int = 10, layer: Any = None) -> GateResult:
    """Candidate vs expected values kept as data (the other arguments as for :func:`gate_pair`).

    Raises:
        ConfigError: an expected value names a measure or stratum that was not evaluated.
        JudgeError: ``human`` and no query of ``splits`` has a human grade.
    """
    dataset = _judged_by(dataset, layer, splits)
    measures = list(dict.fromkeys(k.partition("/")[0] for k in expected))
    cand_pq, queries = _evaluate(candidate, dataset, splits, measures)
    checks = expected_checks(cand_pq, expected, policy=policy)
    judged = judged_check(candidate.run, dataset.qrels, queries, k=judged_k, policy=policy)
    return _stamp(GateResult(dataset.name, candidate.label, "expected values", policy.margin, checks, judged, [],
                             list(dict.fromkeys(candidate.warnings)),
                             answers=_answers(candidate, dataset, splits, policy)), layer)
