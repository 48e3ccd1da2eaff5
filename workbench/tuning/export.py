"""The production config of a study's chosen trial, with its provenance (what ``workbench export`` writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.settings import PROJECT_ROOT
from workbench.tuning.report import QrelsSummary, StudyResult


def export_config(result: StudyResult, home: Path) -> dict[str, Any]:
    """The production config of the chosen trial, with provenance (what ``workbench export`` writes).

    Fields a seed system loads: ``lanes`` (kind and engine parameters, ef_search included),
    ``fusion``, ``rrf_k``, ``weights``, ``depth``, ``min_score``, ``lane_min_score`` (when set), ``top_k``,
    ``tiebreak_lane``, ``pin_lane``, ``norm``, ``rerank`` (None, or the stage after fusion: ``reranker``, ``depth``,
    ``weight``, and the reranker's ``kind`` and ``params``: :func:`rerank_config`; ``top_k`` applies to
    the reranked list), ``window_ms`` (time-span documents, when the study's baseline config widens its hits).
    ``provenance``: study, trial, storage folder, objective,
    dataset input and output hashes, the code commit, and the dev/test measures with
    95% CIs and the paired test against the baseline.
    """
    st, s = result.study, result.chosen_setting
    lanes = {}
    for ln in s.lanes:
        spec = st.experiment.lanes[ln]
        params = {**spec.params, **{k.split(".", 2)[2]: v for k, v in result.chosen_params.items()
                                    if k.startswith(f"engine.{ln}.")}}
        if "embedder" in params:
            params["embedder"] = {"name": params["embedder"], **st.experiment.embedders[params["embedder"]]}
        lanes[ln] = {"kind": spec.kind, **params}
    commit = code_commit()
    manifest = result.manifest
    return {
        "lanes": lanes,
        "fusion": s.method,
        "rrf_k": s.k if s.method == "rrf" else None,
        "weights": dict(s.weights or {}),  # None (written {}) for a method that reads no weights
        "depth": dict(s.depth) if isinstance(s.depth, dict) else s.depth,
        "norm": s.norm if s.method == "weighted" else None,
        "min_score": s.min_score,
        **({"lane_min_score": dict(s.lane_min_score)} if s.lane_min_score else {}),
        "top_k": s.top_k,
        "tiebreak_lane": s.tiebreak_lane,
        "pin_lane": s.pin_lane,
        "rerank": rerank_config(st, result.chosen_rerank),
        **_window(st.experiment.configs[st.baseline]),
        "provenance": {
            "study": st.name, "study_file": str(st.path), "trial": result.chosen.number,
            "objective": {"measure": st.measure, "split": st.split, "type_weights": st.type_weights,
                          "value": result.chosen.values[0], "baseline": result.baseline_value},
            "baseline_config": st.baseline, "experiment": str(st.experiment.path), "dataset": st.dataset,
            "qrels": (result.evaluation.qrels or QrelsSummary()).to_json(),
            "inputs": manifest.get("inputs"), "outputs": manifest.get("outputs"), "code_commit": commit,
            **{split: (part.to_json() if part is not None else None)
               for split, part in (("dev", result.evaluation.dev), ("test", result.evaluation.test))},
            "sensitivity": result.sensitivity, "seed": st.seed,
            "home": str(home),
        },
    }


def rerank_config(study, stage) -> dict[str, Any] | None:
    """The exported rerank stage of a study's trial (:func:`stage_config` with the study's experiment and dataset)."""
    return stage_config(study.experiment, stage, study.dataset)


def stage_config(exp, stage, dataset: str) -> dict[str, Any] | None:
    """The exported rerank stage: ``{"reranker", "depth", "weight", "kind", "params"}``, the stage and the kind
    and parameters of its ``[rerankers.NAME]`` (an ``embedding`` reranker's embedder written out as the lanes'
    embedders are; a ``{dataset}`` in a parameter replaced by ``dataset``), or None without a stage."""
    if stage is None:
        return None
    spec = exp.rerankers[stage.reranker]
    params: dict[str, Any] = {k: (v.replace("{dataset}", dataset) if isinstance(v, str) else v)
                              for k, v in spec.params.items()}
    if spec.kind == "embedding" and params.get("embedder") in exp.embedders:
        params["embedder"] = {"name": params["embedder"], **exp.embedders[params["embedder"]]}
    return {"reranker": stage.reranker, "depth": stage.depth, "weight": stage.weight, "kind": spec.kind,
            "params": params}


def config_export(exp, cfg, dataset: str) -> dict[str, Any]:
    """An experiment's ``[configs.NAME]`` in the format of :func:`export_config` (``workbench export -e EXP -c
    CONFIG``): its lanes with their engine parameters, the fusion parameters, the rerank stage, and a provenance of
    the experiment file, the config, the dataset and the code commit."""
    lanes = {}
    for ln in cfg.lanes:
        spec = exp.lanes[ln]
        params = dict(spec.params)
        if "embedder" in params:
            params["embedder"] = {"name": params["embedder"], **exp.embedders[params["embedder"]]}
        lanes[ln] = {"kind": spec.kind, **params}
    return {
        "lanes": lanes, "fusion": cfg.method, "rrf_k": cfg.k if cfg.method == "rrf" else None,
        "weights": dict(cfg.weights or {}), "depth": dict(cfg.depth) if isinstance(cfg.depth, dict) else cfg.depth,
        "norm": cfg.norm if cfg.method == "weighted" else None, "min_score": cfg.min_score, "top_k": cfg.top_k,
        **({"lane_min_score": dict(cfg.lane_min_score)} if cfg.lane_min_score else {}),
        "tiebreak_lane": cfg.tiebreak_lane, "pin_lane": cfg.pin_lane, "rerank": stage_config(exp, cfg.rerank, dataset),
        **_window(cfg),
        "provenance": {"experiment": str(exp.path), "experiment_file": str(Path(exp.path).resolve()),
                       "config": cfg.name, "dataset": dataset,
                       "candidate_depth": exp.depth, "code_commit": code_commit()},
    }


def _window(cfg) -> dict[str, int]:
    """``{"window_ms": N}`` for a config of time-span documents that widens its hits (:mod:`workbench.eval.spans`:
    what the reader is shown around a hit, and what the study measured), else nothing."""
    window = getattr(cfg, "window_ms", 0)
    return {"window_ms": window} if window else {}


def code_commit() -> str | None:
    """The repository's HEAD commit, or None outside a git checkout."""
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=PROJECT_ROOT, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def read_export(cfg: dict[str, Any], path: Path):
    """The experiment and :class:`~workbench.experiment.config.FusedConfig` of an exported config (what
    :func:`export_config` or :func:`config_export` wrote; ``path`` names it in errors): the experiment of its
    provenance with the exported lanes, embedders and reranker in place.

    Raises:
        ConfigError: the provenance's experiment is not a file here, or the dict is not an export.
    """
    from dataclasses import replace

    from workbench.errors import ConfigError
    from workbench.experiment.config import fused_config, lane_spec, load_experiment, reranker_spec

    try:
        exp_file = Path(cfg["provenance"]["experiment"])
        if not exp_file.is_absolute() and not exp_file.exists():
            exp_file = PROJECT_ROOT / exp_file  # written relative to the repository
        if not exp_file.is_file():
            raise ConfigError(f"{path}: provenance.experiment {cfg['provenance']['experiment']!r} is not an "
                              "experiment file here; run from the repository root or fix the path")
        exp = load_experiment(exp_file)
        if not isinstance(cfg["lanes"], dict) or not cfg["lanes"]:
            raise ConfigError(f"{path}: lanes must name at least one lane")
        lanes, embedders = {}, dict(exp.embedders)
        for name, spec in cfg["lanes"].items():
            spec = dict(spec)
            if isinstance(spec.get("embedder"), dict):
                emb = dict(spec["embedder"])
                ename = emb.pop("name")
                embedders[ename] = emb
                spec["embedder"] = ename
            lanes[name] = lane_spec(path, name, spec, embedders)
        table = {"lanes": list(cfg["lanes"]), "fusion": cfg["fusion"], "top_k": cfg["top_k"]}
        for key, src in (("k", "rrf_k"), ("weights", "weights"), ("depth", "depth"), ("min_score", "min_score"),
                         ("tiebreak_lane", "tiebreak_lane"), ("norm", "norm"), ("pin_lane", "pin_lane"),
                         ("lane_min_score", "lane_min_score"), ("window_ms", "window_ms")):
            if cfg.get(src) not in (None, {}):
                table[key] = cfg[src]
        if table["fusion"] == "none" and len(table["lanes"]) == 1:
            table.pop("k", None)
        rerankers = {}
        stage = cfg.get("rerank")
        if stage is not None:
            rparams = dict(stage["params"])
            if isinstance(rparams.get("embedder"), dict):
                emb = dict(rparams["embedder"])
                ename = emb.pop("name")
                embedders[ename] = emb
                rparams["embedder"] = ename
            name = stage["reranker"]
            rerankers[name] = reranker_spec(path, name, {"kind": stage["kind"], **rparams}, lanes, embedders)
            table["rerank"] = {"reranker": name, "depth": stage["depth"], "weight": stage.get("weight", 1.0)}
        fused = fused_config(path, cfg["provenance"].get("config") or path.stem, table, lanes, rerankers)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path} is not a config written by `workbench export` ({type(exc).__name__}: {exc})") from None
    return replace(exp, lanes=lanes, embedders=embedders, rerankers=rerankers), fused


def load_stored_study(study, storage) -> Any:
    """The Optuna study ``study`` stored in ``storage``, only read (``export``): unlike
    :func:`workbench.tuning.study.make_study` (``create_study``), nothing is written to the storage, so a
    read-only home exports all the same.

    Raises:
        ConfigError: no study of that name is stored, or the stored one was made for another definition.
    """
    import warnings

    import optuna

    from workbench.errors import ConfigError
    from workbench.tuning.study import definition, seeded_sampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    try:
        ost = optuna.load_study(study_name=study.name, storage=storage, sampler=seeded_sampler(study))
    except KeyError:
        raise ConfigError(f"study {study.name} is not in this storage; run `workbench tune {study.path}` first") from None
    have, want = ost.user_attrs.get("workbench_definition"), definition(study)
    if have is not None and have != want:
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        raise ConfigError(f"study {study.name} in this storage was made for another definition (differs: "
                          f"{', '.join(diff)}); export with the study file it was tuned with, or tune it again")
    return ost
