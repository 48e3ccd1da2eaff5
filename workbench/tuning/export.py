"""The production config of a study's chosen trial, with its provenance (what ``workbench export`` writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.settings import PROJECT_ROOT
from workbench.tuning.report import QrelsSummary, StudyResult


def export_config(result: StudyResult, home: Path) -> dict[str, Any]:
    """The production config of the chosen trial, with provenance (what ``workbench export`` writes).

    Fields a seed system loads: ``lanes`` (kind and engine parameters, ef_search included),
    ``fusion``, ``rrf_k``, ``weights``, ``depth``, ``min_score``, ``top_k``,
    ``tiebreak_lane``, ``pin_lane``, ``norm``, ``rerank`` (None, or the stage after fusion: ``reranker``, ``depth``,
    ``weight``, and the reranker's ``kind`` and ``params``: :func:`rerank_config`; ``top_k`` applies to
    the reranked list). ``provenance``: study, trial, storage folder, objective,
    dataset input and output hashes, the code commit, and the dev/test measures with
    95% CIs and the paired test against the baseline.
    """
    import subprocess

    st, s = result.study, result.chosen_setting
    lanes = {}
    for ln in s.lanes:
        spec = st.experiment.lanes[ln]
        params = {**spec.params, **{k.split(".", 2)[2]: v for k, v in result.chosen_params.items()
                                    if k.startswith(f"engine.{ln}.")}}
        if "embedder" in params:
            params["embedder"] = {"name": params["embedder"], **st.experiment.embedders[params["embedder"]]}
        lanes[ln] = {"kind": spec.kind, **params}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=PROJECT_ROOT, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    manifest = result.manifest
    return {
        "lanes": lanes,
        "fusion": s.method,
        "rrf_k": s.k if s.method == "rrf" else None,
        "weights": dict(s.weights or {}),  # None (written {}) for a method that reads no weights
        "depth": dict(s.depth) if isinstance(s.depth, dict) else s.depth,
        "norm": s.norm if s.method == "weighted" else None,
        "min_score": s.min_score,
        "top_k": s.top_k,
        "tiebreak_lane": s.tiebreak_lane,
        "pin_lane": s.pin_lane,
        "rerank": rerank_config(st, result.chosen_rerank),
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
    """The exported rerank stage: ``{"reranker", "depth", "weight", "kind", "params"}``, the stage and the kind
    and parameters of its ``[rerankers.NAME]`` (an ``embedding`` reranker's embedder written out as the lanes'
    embedders are; a ``{dataset}`` in a parameter replaced by the study's dataset), or None without a stage."""
    if stage is None:
        return None
    spec = study.experiment.rerankers[stage.reranker]
    params: dict[str, Any] = {k: (v.replace("{dataset}", study.dataset) if isinstance(v, str) else v)
                              for k, v in spec.params.items()}
    if spec.kind == "embedding" and params.get("embedder") in study.experiment.embedders:
        params["embedder"] = {"name": params["embedder"], **study.experiment.embedders[params["embedder"]]}
    return {"reranker": stage.reranker, "depth": stage.depth, "weight": stage.weight, "kind": spec.kind,
            "params": params}


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
