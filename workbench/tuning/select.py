"""Choosing a study's trial and reporting it honestly.

:func:`choose_and_report` takes the flattest trial within ``tolerance`` of the best (by
:func:`sensitivity`, the objective at ±10% of each numeric parameter) and re-evaluates it and the
baseline config on dev and test with ir_measures, bootstrap CIs and a paired randomisation test
(:func:`honest_report`). A setting is fusion plus an optional rerank stage
(:func:`workbench.tuning.objective.rerank_from`); every value here includes the stage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.errors import ConfigError
from workbench.eval.fusion import FusionSpec
from workbench.eval.stats import ALL, bootstrap_ci, paired_comparison
from workbench.tuning.candidates import Candidates
from workbench.tuning.objective import (
    answer_shares,
    baseline_rerank,
    baseline_setting,
    baseline_value,
    objective_value,
    rerank_from,
    rerank_input,
    setting_from,
    staged_run,
)
from workbench.tuning.report import (
    MeasureComparison,
    QrelsSummary,
    SplitReport,
    StudyEvaluation,
    StudyResult,
    TrainSummary,
    TypeComparison,
    ci_pair,
)
from workbench.tuning.space import Range, Study


def _numeric_dims(study: Study) -> dict[str, Range]:
    out = {k: study.space[k] for k in ("k", "min_score", "top_k") if isinstance(study.space.get(k), Range)}
    for group in ("weights", "depth", "lane_min_score"):
        out.update({f"{group}.{ln}": d for ln, d in study.space.get(group, {}).items() if isinstance(d, Range)})
    out.update({f"rerank.{k}": d for k, d in study.space.get("rerank", {}).items() if isinstance(d, Range)})
    return out


def sensitivity(study: Study, cands: Candidates, params: dict[str, Any]) -> list[dict[str, Any]]:
    """For each numeric parameter: the objective at -10% and +10% of its value (clipped to its range).

    Returns:
        rows ``{"param", "value", "objective", "minus10", "plus10", "drop"}`` where ``drop`` is
        the largest fall of the objective (>= 0); a flat optimum has small drops.
    """
    key = cands.engine_key(params)
    m = cands.matrix(key, study.split)
    negatives = cands.negatives(key, study.split) if study.abstention else None

    def value(p: dict[str, Any]) -> float:
        s = setting_from(study, p)
        return objective_value(study, m, s, cands.queries,
                               rerank_input(cands, key, study.split, m, s, rerank_from(study, p)), negatives)

    setting = setting_from(study, params)
    base = value(params)
    used = set(setting.lanes) if setting is not None else set()
    rows = []
    for name, dim in _numeric_dims(study).items():
        per_lane = name.split(".")[0] in ("weights", "depth", "lane_min_score")
        if name not in params or (per_lane and name.split(".", 1)[1] not in used):
            continue
        if name == "k" and (setting is None or setting.method != "rrf"):
            continue
        v = params[name]
        vals = []
        for f in (0.9, 1.1):
            x = min(max(v * f, dim.low), dim.high)
            x = int(round(x)) if dim.integer else x
            vals.append(value({**params, name: x}))
        rows.append({"param": name, "value": v, "objective": base, "minus10": vals[0], "plus10": vals[1],
                     "drop": max(0.0, base - min(vals))})
    return rows


def choose_and_report(study: Study, ost, cands: Candidates, log: Callable[[str], None]) -> StudyResult:
    """Choose the trial (flattest within ``tolerance`` of the best; on two objectives, from the
    Pareto front), then evaluate it and the baseline on dev and test."""
    import optuna

    complete = [t for t in ost.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise ConfigError(f"study {study.name} has no complete trial; run it with more trials")
    pool = [t for t in (ost.best_trials if study.latency else complete) if setting_from(study, t.params) is not None]
    if not pool:
        raise ConfigError(f"study {study.name}: every complete trial switched all lanes off; widen [space.lanes]")
    best = max(t.values[0] for t in pool)
    near = sorted((t for t in pool if t.values[0] >= best - study.tolerance), key=lambda t: -t.values[0])[:10]
    scored = []
    for t in near:
        sens = sensitivity(study, cands, t.params)
        worst = max((r["drop"] for r in sens), default=0.0)
        scored.append((t.values[0] - worst, t.values[0], -t.number, t, sens))
    scored.sort(key=lambda x: (x[0], x[1], x[2]), reverse=True)
    _robust, _v, _n, chosen, sens = scored[0]
    notes = []
    if chosen.values[0] < best:
        notes.append(f"chose trial {chosen.number} ({chosen.values[0]:.4f}) over the best ({best:.4f}): "
                     "its ±10% neighbourhood is flatter")
    setting = setting_from(study, chosen.params)
    if setting is None:  # every lane off: only when every trial scored nothing
        raise ConfigError(f"study {study.name}: the chosen trial {chosen.number} turns every lane off (weights 0); "
                          "widen the space so that some trial keeps a lane, or run more trials")
    splits = honest_report(study, cands, chosen.params, setting)
    base_val = baseline_value(study, cands)  # the baseline as written: no engine overrides, its own rerank stage
    evaluation = StudyEvaluation(splits["dev"], splits["test"],
                                 TrainSummary(study.measure, chosen.values[0], base_val, chosen.number),
                                 qrels_report(cands))
    manifest = {k: cands.ds.manifest.get(k) for k in ("inputs", "outputs")}
    return StudyResult(study, ost, chosen, dict(chosen.params), setting, base_val, sens, evaluation, 0.0, 0, notes,
                       manifest, chosen_rerank=rerank_from(study, chosen.params))


def qrels_report(cands: Candidates) -> QrelsSummary:
    """The study's qrels layer for the report and the export (:class:`QrelsSummary`)."""
    lq = cands.layer
    return QrelsSummary(lq.layer, lq.sha256, lq.human_pairs, lq.stale, lq.left_out(cands.ds.queries))


def honest_report(study: Study, cands: Candidates, params: dict[str, Any],
                  setting: FusionSpec) -> dict[str, SplitReport]:
    """The chosen setting and the baseline on dev and test (``{"dev": ..., "test": ...}``): measures with
    95% CIs, the paired test, and the objective measure per query type.

    Evaluated with :func:`workbench.eval.evaluate.evaluate` (ir_measures) on the real runs, not
    with the in-memory evaluator the study used: fused, then (for a setting with a rerank stage,
    :func:`workbench.tuning.objective.rerank_from` of ``params``; the baseline's own stage) rescored by
    the reranker and reordered by :func:`workbench.reranking.stage.apply_rerank`
    (:func:`workbench.tuning.objective.staged_run`).
    """
    from workbench.eval.evaluate import evaluate

    measures = list(dict.fromkeys([study.measure, *study.experiment.measures]))
    measures = [m for m in measures if _fast(m)]
    out: dict[str, SplitReport] = {}
    key = cands.engine_key(params)
    stage = rerank_from(study, params)
    base_lanes_key = cands.engine_key({})  # the baseline as written: no engine overrides
    for split in ("dev", "test"):
        qs = cands.split_queries(split)
        if not qs:
            why = " with a human grade" if cands.layer.layer == "human" else ""
            out[split] = SplitReport(0, note=f"no {split} queries{why} in {cands.ds.name}")
            continue
        run = staged_run(cands, key, split, setting, stage)
        base_run = staged_run(cands, base_lanes_key, split, baseline_setting(study), baseline_rerank(study))
        ev = evaluate(run, cands.view.qrels, qs, measures, spans=cands.spans).per_query.set_index("query_id")
        evb = evaluate(base_run, cands.view.qrels, qs, measures, spans=cands.spans).per_query.set_index("query_id")
        qids = [q for q in ev.index if q in evb.index]
        joined = ev.loc[qids, ["query_type", *measures]].join(evb.loc[qids, measures].add_suffix("__base"))
        table = paired_comparison(joined, {m: (m, f"{m}__base") for m in measures}, seed=study.seed,
                                  by_type=[study.measure])
        rows, by_type = {}, {}
        for r in table.itertuples(index=False):
            paired = {"mean_diff": r.delta, "ci_low": r.ci_low, "ci_high": r.ci_high, "p_value": r.p_value,
                      "p_adjusted": float(r.p_adjusted)}
            if r.stratum == ALL:
                a, b = joined[r.measure].to_numpy(float), joined[f"{r.measure}__base"].to_numpy(float)
                rows[r.measure] = MeasureComparison(r.candidate, ci_pair(bootstrap_ci(a, study.seed)), r.baseline,
                                                    ci_pair(bootstrap_ci(b, study.seed)), **paired)
            else:
                by_type[r.stratum] = TypeComparison(int(r.n), r.candidate, r.baseline, **paired)
        answers = {}
        if study.abstention:  # empty answers depend on fusion alone (a rerank stage reorders, never drops)
            answers = {"chosen": answer_shares(cands.matrix(key, split), cands.negatives(key, split), setting),
                       "baseline": answer_shares(cands.matrix(base_lanes_key, split),
                                                 cands.negatives(base_lanes_key, split), baseline_setting(study))}
        out[split] = SplitReport(len(qids), rows, study.measure, by_type, answers=answers)
    return out


def _fast(measure: str) -> bool:
    from workbench.eval.fasteval import supported

    return supported(measure)
