"""From a trial to a setting (fusion, then an optional rerank stage) and the study's objective.

:func:`setting_from` puts a trial's fusion parameters over the baseline config and
:func:`rerank_from` its ``rerank.*`` parameters over the baseline's rerank stage;
:func:`rerank_input` fetches the reranker's scores of the candidates the stage reorders (the
pair-score cache, :meth:`workbench.tuning.candidates.Candidates.rerank_scores`);
:func:`objective_value` scores a setting on a candidate matrix (the measure's mean, or the
weighted mean of per-query-type means); :func:`trial_value` joins the three;
:func:`make_objective` is the Optuna objective (with the p95 latency as a second objective when
the study asks for it); :func:`staged_run` is the real run of a setting (fused, then reranked by
the reranker itself and :func:`workbench.reranking.stage.apply_rerank`) for the honest report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from workbench.eval.fasteval import CandidateMatrix
from workbench.eval.fusion import METHOD_PARAMS, FusionSpec
from workbench.experiment.config import RerankStage
from workbench.run import Run
from workbench.tuning.candidates import Candidates
from workbench.tuning.space import NO_RERANK, Study, suggest


def setting_from(study: Study, params: dict[str, Any]) -> FusionSpec | None:
    """The fusion setting of a trial's parameters on top of the baseline config (``None``: every lane off, or
    every lane's weight 0)."""
    cfg = study.experiment.configs[study.baseline]
    lanes = tuple(ln for ln in study.lanes if params.get(f"lanes.{ln}", ln in cfg.lanes))
    if not lanes:
        return None
    method = params.get("fusion", cfg.method)
    if method == "none" and len(lanes) > 1:
        method = "rrf"
    if len(lanes) == 1 and "fusion" not in params and cfg.method == "none":
        method = "none"
    weights = ({ln: float(params.get(f"weights.{ln}", (cfg.weights or {}).get(ln, 1.0))) for ln in lanes}
               if "weights" in METHOD_PARAMS[method] else None)  # ISR, BordaFuse… read none
    if weights is not None and not any(weights.values()):
        return None  # every lane weighs 0: nothing is retrieved, as with every lane off
    base_depth = cfg.depth
    depth = {}
    for ln in lanes:
        d = params.get(f"depth.{ln}", base_depth.get(ln) if isinstance(base_depth, dict) else base_depth)
        if d is not None:
            depth[ln] = int(d)
    min_score = params.get("min_score", cfg.min_score)
    tb = cfg.tiebreak_lane if cfg.tiebreak_lane in lanes else None
    pinned = cfg.pin_lane if cfg.pin_lane in lanes else None
    floors = {ln: float(v) for ln in lanes
              if (v := params.get(f"lane_min_score.{ln}", (cfg.lane_min_score or {}).get(ln))) is not None}
    return FusionSpec(lanes, method, float(params.get("k", cfg.k)), weights, depth or None,
                      params.get("norm", cfg.norm), min_score, int(params.get("top_k", cfg.top_k)), tb, pinned,
                      floors or None)


def baseline_setting(study: Study) -> FusionSpec:
    """The baseline config exactly as written (not projected into the space)."""
    cfg = study.experiment.configs[study.baseline]
    return FusionSpec(cfg.lanes, cfg.method, cfg.k, cfg.weights, cfg.depth, cfg.norm, cfg.min_score, cfg.top_k,
                      cfg.tiebreak_lane, cfg.pin_lane, cfg.lane_min_score)


def rerank_from(study: Study, params: dict[str, Any]) -> RerankStage | None:
    """The rerank stage of a trial's parameters on top of the baseline's (``None``: no stage).

    A parameter the trial lacks keeps the baseline's value; ``rerank.reranker = "none"`` drops the
    stage; a trial that adds a stage to a baseline without one takes :class:`RerankStage`'s
    defaults for what it does not draw.
    """
    base = study.experiment.configs[study.baseline].rerank
    name = params.get("rerank.reranker", base.reranker if base is not None else NO_RERANK)
    if name == NO_RERANK:
        return None
    default = base if base is not None else RerankStage(name)
    return RerankStage(str(name), int(params.get("rerank.depth", default.depth)),
                       float(params.get("rerank.weight", default.weight)))


def baseline_rerank(study: Study) -> RerankStage | None:
    """The baseline config's rerank stage exactly as written (None: it has none)."""
    return study.experiment.configs[study.baseline].rerank


def rerank_input(cands: Candidates, engine_key: tuple, split: str, m: CandidateMatrix, s: FusionSpec | None,
                 stage: RerankStage | None) -> tuple[np.ndarray, int, float] | None:
    """What :meth:`CandidateMatrix.evaluate` takes as ``rerank`` for setting ``s`` and ``stage`` on matrix ``m``
    (that of ``engine_key`` and ``split``): ``(scores (Q, C), depth, weight)``, the reranker asked for every
    candidate of the fused top ``depth`` it was not asked for yet; None without a stage (or lanes)."""
    if stage is None or s is None or not m.query_ids:
        return None
    ranked, _ = m.rank(replace(s, top_k=max(s.top_k, stage.depth)), stage.depth)
    return cands.rerank_scores(engine_key, split, stage.reranker, ranked), stage.depth, stage.weight


def answer_shares(m: CandidateMatrix, negatives: CandidateMatrix, s: FusionSpec | None) -> dict[str, float]:
    """``{"empty_on_negatives", "false_empty", "abstention_accuracy"}`` of setting ``s``
    (:mod:`workbench.eval.answers`): the share of the unanswerable queries of ``negatives`` it answers with
    nothing, the share of the answerable queries of ``m`` (at least one relevant judgment) it answers with
    nothing, and their balanced accuracy. A setting with no lane answers nothing (accuracy 0.5)."""
    from workbench.eval.answers import abstention_accuracy

    if s is None:
        empty_neg = false_empty = 1.0
    else:
        answerable = m.n_rel > 0
        empty_neg = float(negatives.empty(s).mean()) if negatives.query_ids else 0.0
        false_empty = float(m.empty(s)[answerable].mean()) if answerable.any() else 0.0
    return {"empty_on_negatives": empty_neg, "false_empty": false_empty,
            "abstention_accuracy": abstention_accuracy(empty_neg, false_empty)}


def abstention(m: CandidateMatrix, negatives: CandidateMatrix, s: FusionSpec | None) -> float:
    """The abstention accuracy of :func:`answer_shares`."""
    return answer_shares(m, negatives, s)["abstention_accuracy"]


def objective_value(study: Study, m: CandidateMatrix, s: FusionSpec | None, queries: dict,
                    rerank: tuple[np.ndarray, int, float] | None = None,
                    negatives: CandidateMatrix | None = None) -> float:
    """The study's objective on matrix ``m``: the measure's mean, or the weighted mean of per-type means; with
    ``objective.abstention`` w > 0, ``(1 - w) * that + w *`` :func:`abstention` on ``negatives`` (the split's
    unanswerable queries).

    Args:
        rerank: the rerank stage after fusion, as :func:`rerank_input` gives it (None: fusion alone).
        negatives: :meth:`workbench.tuning.candidates.Candidates.negatives` of the same setting and split.
    """
    quality = _quality(study, m, s, queries, rerank)
    w = getattr(study, "abstention", 0.0)
    if not w or negatives is None:
        return quality
    return (1 - w) * quality + w * abstention(m, negatives, s)


def _quality(study: Study, m: CandidateMatrix, s: FusionSpec | None, queries: dict,
             rerank: tuple[np.ndarray, int, float] | None) -> float:
    """The measure's mean on ``m``, or the weighted mean of its per-type means (0.0 without lanes or queries)."""
    if s is None or not m.query_ids:
        return 0.0
    vals = m.evaluate(s, [study.measure], rerank)[study.measure]
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


def trial_value(study: Study, cands: Candidates, params: dict[str, Any], split: str | None = None) -> float:
    """The objective of a trial's parameters on ``split`` (default: the study's), rerank stage included."""
    split = split or study.split
    key = cands.engine_key(params)
    m = cands.matrix(key, split)
    s = setting_from(study, params)
    return objective_value(study, m, s, cands.queries, rerank_input(cands, key, split, m, s, rerank_from(study, params)),
                           _negatives(study, cands, key, split))


def baseline_value(study: Study, cands: Candidates, split: str | None = None) -> float:
    """The objective of the baseline config exactly as written (fusion and rerank stage, no engine overrides)."""
    split = split or study.split
    key = cands.engine_key({})
    m = cands.matrix(key, split)
    s = baseline_setting(study)
    return objective_value(study, m, s, cands.queries, rerank_input(cands, key, split, m, s, baseline_rerank(study)),
                           _negatives(study, cands, key, split))


def _negatives(study: Study, cands: Candidates, key: tuple, split: str) -> CandidateMatrix | None:
    """The split's unanswerable queries' matrix when the objective weighs abstention, else None."""
    return cands.negatives(key, split) if getattr(study, "abstention", 0.0) else None


def staged_run(cands: Candidates, engine_key: tuple, split: str, s: FusionSpec, stage: RerankStage | None) -> Run:
    """The run of setting ``s`` then ``stage`` on the matrix of ``engine_key`` and ``split``, as
    :func:`workbench.experiment.runner.config_run` makes it: fused to ``max(top_k, depth)``, the top
    ``depth`` rescored by the reranker itself and reordered by :func:`workbench.reranking.stage.apply_rerank`,
    then cut to ``top_k`` (for the honest report: no in-memory shortcut)."""
    from workbench.reranking.stage import apply_rerank

    m = cands.matrix(engine_key, split)
    if stage is None:
        return m.run(s)
    fused = m.run(replace(s, top_k=max(s.top_k, stage.depth)))
    queries = [cands.queries[q] for q in m.query_ids]
    rescored = cands.reranker(engine_key, stage.reranker).rerank(queries, fused, cands.documents(), stage.depth)
    return apply_rerank(fused, rescored, stage.depth, fused.name, stage.weight).top(s.top_k)


def make_objective(study: Study, cands: Candidates) -> Callable[[Any], Any]:
    """The Optuna objective: suggest, fuse, rerank (scores from the reranker's pair-score cache) and score in
    memory (engine variants through the cache). The trial's process is recorded before it runs
    (:func:`workbench.tuning.study.run_trials`)."""

    def objective(trial):
        params = suggest(trial, study)
        key = cands.engine_key(params)
        m = cands.matrix(key, study.split)
        s = setting_from(study, params)
        rr = rerank_input(cands, key, study.split, m, s, rerank_from(study, params))
        value = objective_value(study, m, s, cands.queries, rr, _negatives(study, cands, key, study.split))
        if not study.latency:
            return value
        lat = cands.latencies(key, s.lanes, m.query_ids) if s is not None else np.zeros(1)
        return value, float(np.percentile(lat, 95)) if len(lat) else 0.0

    return objective
