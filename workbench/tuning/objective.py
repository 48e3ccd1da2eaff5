"""From a trial to a fusion setting and the study's objective.

:func:`setting_from` puts a trial's parameters over the baseline config; :func:`objective_value`
scores a setting on a candidate matrix (the measure's mean, or the weighted mean of per-query-type
means); :func:`make_objective` is the Optuna objective that joins them (with the p95 latency as a
second objective when the study asks for it).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from workbench.eval.fasteval import CandidateMatrix
from workbench.eval.fusion import FusionSpec
from workbench.tuning.candidates import Candidates
from workbench.tuning.recovery import this_process
from workbench.tuning.space import Study, suggest


def setting_from(study: Study, params: dict[str, Any]) -> FusionSpec | None:
    """The fusion setting of a trial's parameters on top of the baseline config (``None``: every lane off)."""
    cfg = study.experiment.configs[study.baseline]
    lanes = tuple(ln for ln in study.lanes if params.get(f"lanes.{ln}", ln in cfg.lanes))
    if not lanes:
        return None
    method = params.get("fusion", cfg.method)
    if method == "none" and len(lanes) > 1:
        method = "rrf"
    if len(lanes) == 1 and "fusion" not in params and cfg.method == "none":
        method = "none"
    weights = {ln: float(params.get(f"weights.{ln}", (cfg.weights or {}).get(ln, 1.0))) for ln in lanes}
    base_depth = cfg.depth
    depth = {}
    for ln in lanes:
        d = params.get(f"depth.{ln}", base_depth.get(ln) if isinstance(base_depth, dict) else base_depth)
        if d is not None:
            depth[ln] = int(d)
    min_score = params.get("min_score", cfg.min_score)
    tb = cfg.tiebreak_lane if cfg.tiebreak_lane in lanes else None
    return FusionSpec(lanes, method, float(params.get("k", cfg.k)), weights, depth or None,
                      params.get("norm", cfg.norm), min_score, int(params.get("top_k", cfg.top_k)), tb)


def baseline_setting(study: Study) -> FusionSpec:
    """The baseline config exactly as written (not projected into the space)."""
    cfg = study.experiment.configs[study.baseline]
    return FusionSpec(cfg.lanes, cfg.method, cfg.k, cfg.weights, cfg.depth, cfg.norm, cfg.min_score, cfg.top_k,
                      cfg.tiebreak_lane)


def objective_value(study: Study, m: CandidateMatrix, s: FusionSpec | None, queries: dict) -> float:
    """The study's objective on matrix ``m``: the measure's mean, or the weighted mean of per-type means."""
    if s is None or not m.query_ids:
        return 0.0
    vals = m.evaluate(s, [study.measure])[study.measure]
    if not study.type_weights:
        return float(vals.mean())
    types = np.array([queries[q].query_type for q in m.query_ids])
    num = den = 0.0
    for t, w in study.type_weights.items():
        mask = types == t
        if mask.any() and w > 0:
            num += w * float(vals[mask].mean())
            den += w
    return num / den if den else 0.0


def make_objective(study: Study, cands: Candidates) -> Callable[[Any], Any]:
    """The Optuna objective: record the trial's process (:func:`workbench.tuning.recovery.this_process`), then suggest,
    fuse and score in memory (engine variants through the cache)."""
    owner = this_process()

    def objective(trial):
        trial.set_user_attr("process", owner)
        params = suggest(trial, study)
        key = cands.engine_key(params)
        m = cands.matrix(key, study.split)
        s = setting_from(study, params)
        value = objective_value(study, m, s, cands.queries)
        if not study.latency:
            return value
        lat = cands.latencies(key, s.lanes, m.query_ids) if s is not None else np.zeros(1)
        return value, float(np.percentile(lat, 95)) if len(lat) else 0.0

    return objective
