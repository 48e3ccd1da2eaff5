"""A study's outputs: ``report.json``, ``export.json``, ``trials.csv`` and ``plots.html`` in its output
folder (:func:`write_outputs`), Optuna's figures (:func:`study_figures`, also the dashboard's) and the
plain-text summary ``workbench tune`` prints (:func:`summary`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench._infra.durable import atomic_path, atomic_write_json, atomic_write_text, mkdirs, remove_temporaries
from workbench.eval.fusion import METHOD_PARAMS
from workbench.tuning.export import export_config
from workbench.tuning.report import QrelsSummary, StudyReport, StudyResult
from workbench.tuning.storage import outputs_dir


def study_figures(optuna_study, measure: str) -> dict[str, Any]:
    """Optuna's own plotly figures of a study: ``history``, ``importances``, ``parallel`` and, for a
    two-objective study (objective, p95 latency ms), ``pareto``; used by ``plots.html`` and the
    dashboard. A figure Optuna cannot draw (importances need two complete trials whose
    parameters vary) is left out."""
    import warnings

    import optuna.visualization as vis

    multi = len(optuna_study.directions) > 1
    target = (lambda t: t.values[0]) if multi else None
    makers = {"history": lambda: vis.plot_optimization_history(optuna_study, target=target, target_name=measure),
              "importances": lambda: vis.plot_param_importances(optuna_study, target=target, target_name=measure),
              "parallel": lambda: vis.plot_parallel_coordinate(optuna_study, target=target, target_name=measure)}
    if multi:
        makers["pareto"] = lambda: vis.plot_pareto_front(optuna_study, target_names=[measure, "p95 latency ms"])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, make in makers.items():
            try:
                out[key] = make()
            except Exception:  # noqa: BLE001 - Optuna raises several types when a plot has too little data
                continue
    return out


def write_outputs(result: StudyResult, home: Path, storage: str | None = None) -> Path:
    """Write ``report.json``, ``export.json``, ``trials.csv`` and ``plots.html`` (Optuna's history,
    parameter importances, parallel coordinates and, with two objectives, the Pareto front)
    into :func:`workbench.tuning.storage.outputs_dir`; returns that folder.

    Each file is replaced atomically (:mod:`workbench._infra.durable`): a crash or a full disk leaves
    the previous file whole, never half a report.

    Raises:
        StorageError: the folder cannot be created or a file cannot be written (names the
            path, the space needed and the fix).
    """
    out = mkdirs(outputs_dir(home, result.study.name, storage))
    remove_temporaries(out)
    report = StudyReport.of(result, storage)
    export = export_config(result, home)
    trials = result.optuna_study.trials_dataframe()
    figs = list(study_figures(result.optuna_study, f"train {result.study.measure}").values())
    html = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs)]
    report.save(out / "report.json")
    atomic_write_json(out / "export.json", export, ensure_ascii=True)
    with atomic_path(out / "trials.csv") as tmp:
        trials.to_csv(tmp, index=False)
    atomic_write_text(out / "plots.html", "<html><head><meta charset='utf-8'><title>study "
                      f"{result.study.name}</title></head><body>" + "\n".join(html) + "</body></html>\n")
    return out


def summary(result: StudyResult) -> str:
    """A plain-text summary of the whole study (every process's trials, as its storage holds them): the
    number of complete trials (with the number of distinct settings among them when some repeat; and of any
    failed, waiting or running), the train objective, dev/test
    measures with CIs and p-values (raw and Holm–Bonferroni adjusted), sensitivity."""
    from optuna.trial import TrialState

    from workbench.eval.stats import P_ADJUST, P_ADJUST_NAME
    from workbench.tuning.space import setting_key

    st = result.study
    q = result.evaluation.qrels or QrelsSummary(getattr(st, "qrels", "built"))
    states: dict[str, int] = {}
    for t in result.optuna_study.get_trials(deepcopy=False):  # the whole study, as its storage holds it
        states[t.state.name.lower()] = states.get(t.state.name.lower(), 0) + 1
    others = ", ".join(f"{n} {s}" for s, n in sorted(states.items()) if s != "complete")
    complete = result.optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    distinct = len({setting_key(t.params) for t in complete})
    lines = [f"study {st.name}: {len(complete)} trials"
             + (f" ({distinct} distinct settings)" if distinct < len(complete) else "")
             + f" on {st.dataset} ({st.split})"
             + (f" (and {others})" if others else "") + f", objective {st.measure}"
             + (" weighted by query type" if st.type_weights else "")
             + (" and p95 latency (ms)" if st.latency else "")
             + (", on the queries that carry a filter" + (" (and all the split's negatives)" if st.abstention else "")
                if st.queries == "filtered" else "")
             + (f", {1 - st.abstention:g} x it + {st.abstention:g} x abstention accuracy" if st.abstention else ""),
             f"  qrels: {q.layer}" + (f" (sha256 {q.sha256[:12]}, {q.human_pairs} human grades"
                                      + (f", {q.stale} stale judgments left out" if q.stale else "")
                                      + (f", {q.queries_left_out} queries without a human grade left out"
                                         if q.queries_left_out and q.layer == "human" else "") + ")"
                                      if q.sha256 else ""),
             f"  {st.split}: chosen trial {result.chosen.number} = {result.chosen.values[0]:.4f}"
             + (f" (p95 {result.chosen.values[1]:.1f} ms, from the Pareto front of {len(result.optuna_study.best_trials)})"
                if st.latency and len(result.chosen.values) > 1 else "")
             + f"   baseline {st.baseline} = {result.baseline_value:.4f}"]
    for note in result.notes:
        lines.append(f"  note: {note}")
    s = result.chosen_setting
    reads = METHOD_PARAMS[s.method]
    lines.append(f"  chosen: lanes {', '.join(s.lanes)}; {s.method}" + (f" k={s.k:g}" if "k" in reads else "")
                 + (f" norm={s.norm}" if "norm" in reads else "")
                 + (f"; weights {', '.join(f'{k}={v:.3g}' for k, v in s.weights.items())}"
                    if "weights" in reads and s.weights else "") + f"; top_k {s.top_k}"
                 + (f"; min_score {s.min_score:.4g}" if s.min_score is not None else "")
                 + (f"; lane_min_score {', '.join(f'{k}={v:.3g}' for k, v in s.lane_min_score.items())}"
                    if s.lane_min_score else "")
                 + (f"; rerank {r.reranker} depth {r.depth} weight {r.weight:.3g}"
                    if (r := result.chosen_rerank) is not None else "")
                 + "".join(f"; {k.removeprefix('engine.')}={v}" for k, v in sorted(result.chosen.params.items())
                           if k.startswith("engine.")))
    for split in ("dev", "test"):
        rep = result.evaluation.split(split)
        if rep is None or not rep.queries:
            lines.append(f"  {split}: {(rep.note if rep else '') or 'no queries'}")
            continue
        lines.append(f"  {split} ({rep.queries} queries)   chosen [95% CI]   baseline [95% CI]   diff   p   "
                     f"p {P_ADJUST_NAME[P_ADJUST]}")
        for m, r in rep.measures.items():
            lines.append(f"    {m:10s} {r.chosen:.4f} [{r.chosen_ci[0]:.3f}, {r.chosen_ci[1]:.3f}]   "
                         f"{r.baseline:.4f} [{r.baseline_ci[0]:.3f}, {r.baseline_ci[1]:.3f}]   "
                         f"{r.mean_diff:+.4f}   {r.p_value:.4f}   {r.p_adjusted:.4f}")
        for t, r in rep.by_query_type.items():
            lines.append(f"    {rep.by_type_measure} {t:10s} n={r.n:4d}  {r.chosen:.4f} vs {r.baseline:.4f}  "
                         f"{r.mean_diff:+.4f}  p={r.p_value:.4f}  adjusted p={r.p_adjusted:.4f}")
        lines.append(f"    (p adjusted over the {len(rep.measures) + len(rep.by_query_type)} tests above by "
                     f"{P_ADJUST_NAME[P_ADJUST]})")
        for who, a in rep.answers.items():
            lines.append(f"    answers ({who}): empty on negatives {a['empty_on_negatives']:.3f}, false empty "
                         f"{a['false_empty']:.3f}, abstention accuracy {a['abstention_accuracy']:.3f}")
    if result.sensitivity:
        lines.append("  sensitivity (objective at -10% / +10% of each numeric parameter):")
        for r in result.sensitivity:
            lines.append(f"    {r['param']:22s} {r['value']!s:>10.8}  {r['minus10']:.4f} / {r['plus10']:.4f}  "
                         f"drop {r['drop']:.4f}")
    return "\n".join(lines)
