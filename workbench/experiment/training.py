"""The experiment's side of training a reranker (``workbench reranker train``): the lanes' candidates
from the candidate cache that ``workbench eval`` fills, and the MLflow record of a training run.

Training itself (pairs, the model, its card) is :mod:`workbench.reranking.training`, below the
experiment layer; this module feeds it and tracks it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.experiment import tracking
from workbench.experiment.cache import CandidateCache
from workbench.experiment.runner import Engine, lane_result
from workbench.reranking.training import MLFLOW_EXPERIMENT, smooth
from workbench.settings import PROJECT_ROOT


def cached_lane_runs(exp: Any, ds: Any, lanes: Sequence[str], *, home: Path, progress: bool = False,
                     log: Callable[[str], None] = lambda _m: None) -> tuple[dict[str, Any], dict[str, bool]]:
    """The lanes' top-``exp.depth`` candidates for every query of ``ds``, through the experiment machinery
    (:func:`workbench.experiment.runner.lane_result`): read from the candidate cache ``workbench eval``
    fills, or run live (starting Postgres when needed) and cached.

    Returns:
        (lane → :class:`~workbench.run.Run`, lane → whether it came from the cache).

    Raises:
        ConfigError, DataError, PgError: from a lane that had to run live.
    """
    engine = Engine(exp, home, progress, log)
    cache = CandidateCache(Path(home) / "cache" / "candidates", log=log)
    runs: dict[str, Any] = {}
    cached: dict[str, bool] = {}
    for name in lanes:
        lr = lane_result(exp.lanes[name], ds, engine, cache, exp.depth, log)
        runs[name], cached[name] = lr.run, lr.cached
    return runs, cached


def log_to_mlflow(card: Mapping[str, Any], folder: Path, home: Path) -> str:
    """Log a training run to MLflow (the home's store: :mod:`workbench.experiment.tracking`); returns its id.

    Experiment :data:`MLFLOW_EXPERIMENT`; params: the recipe, the dataset and its hashes, the qrels layer,
    the base, the pair counts; metrics: ``loss`` at every step (step = the step number), ``loss_smoothed``,
    ``final_loss_smoothed``, ``pairs``, ``wall_time_s``; artifacts: the model folder under ``model/``
    (its ``model_card.json`` and ``README.md`` included). The run ends FINISHED only once the artifacts
    are listed back (:func:`~workbench.experiment.tracking.seal`).

    Raises:
        ConfigError: the tracking URI cannot work (:func:`~workbench.experiment.tracking.check_tracking`).
        Exception: what MLflow raises for a store it cannot write.
    """
    tracking.check_tracking(home)
    tracking.quiet_logs()
    import mlflow
    from mlflow.entities import Metric, Param

    mlflow.set_tracking_uri(tracking.tracking_uri(home))
    exp_id = tracking._experiment_id(mlflow, MLFLOW_EXPERIMENT, home)
    client = mlflow.MlflowClient()
    tracking._end_dead_runs_quietly(client)
    d, r, p = card["dataset"], card["recipe"], card["pairs"]
    params: dict[str, Any] = {
        "dataset": d["name"], "hash.documents": d["documents_sha256"], "hash.queries": d["queries_sha256"],
        "hash.qrels": d["qrels_sha256"], "qrels.layer": card["qrels"]["layer"], "qrels.sha256": card["qrels"]["sha256"],
        "split": card["split"], "base": card["base"]["given"], "base.digest": card["base"]["digest"],
        "base.kind": card["base"]["kind"], "folder": str(folder)}
    params.update({k: r[k] for k in ("steps", "batch_size", "lr", "max_length", "seed", "negatives_per_query",
                                     "warmup_fraction", "weight_decay", "grad_clip")})
    params.update({f"pairs.{k}": v for k, v in p.items()})
    cand = card.get("candidates") or {}
    if cand:
        params.update({"candidates.experiment": cand.get("experiment", ""),
                       "candidates.lanes": ",".join(cand.get("lanes", [])), "candidates.depth": cand.get("depth", "")})
    params.update({f"code.{Path(k).name}": v for k, v in card["code_sha256"].items()})
    params.update({f"version.{k}": v for k, v in card["versions"].items()})
    losses = card["loss"]["per_step"]
    now = int(time.time() * 1000)
    metrics = [Metric("loss", float(x), now, i) for i, x in enumerate(losses, 1)]
    metrics += [Metric("loss_smoothed", float(x), now, i) for i, x in enumerate(smooth(losses), 1)]
    summary = card["loss"].get("summary") or {}
    metrics += [Metric(k, float(v), now, 0) for k, v in (
        ("final_loss_smoothed", summary.get("final_smoothed", float("nan"))), ("pairs", p["pairs"]),
        ("wall_time_s", card["wall_time_s"]["total"]), ("s_per_step", card["wall_time_s"]["per_step"]))]
    tags = {"workbench.kind": "reranker-train", "dataset": d["name"], "qrels": card["qrels"]["layer"]}
    with tracking.tracked_run(mlflow, exp_id, f"{d['name']} {Path(folder).name}", tags) as run:
        rid = run.info.run_id
        client.log_batch(rid, params=[Param(k, str(v)[:500]) for k, v in params.items()])
        for i in range(0, len(metrics), 1000):  # MLflow takes at most 1,000 metrics per batch
            client.log_batch(rid, metrics=metrics[i:i + 1000])
        client.log_artifacts(rid, str(folder), artifact_path="model")
        names = sorted(f"model/{q.relative_to(folder).as_posix()}" for q in Path(folder).rglob("*") if q.is_file())
        tracking.seal(client, rid, names)
    return rid


@dataclass(frozen=True)
class TrainOutcome:
    """What :func:`train_reranker` did.

    Attributes:
        folder: the model folder.
        kept: True when ``skip_existing`` kept a cross-encoder already there (nothing else is set then).
        card: the model card (:func:`workbench.reranking.training.model_card`).
        stats: the training pairs' counts (:class:`workbench.reranking.training.PairStats`).
        run_id: the MLflow run, or None (not tracked, or tracking failed: ``warning`` says why).
        warning: why the run is not in MLflow although ``track`` was asked for ("" when it is).
        max_length: the word pieces per pair the model was trained with (its usage line needs it).
        elapsed_s: seconds, the whole command.
    """

    folder: Path
    kept: bool = False
    card: dict[str, Any] = field(default_factory=dict)
    stats: Any = None
    run_id: str | None = None
    warning: str = ""
    max_length: int = 0
    elapsed_s: float = 0.0


def train_reranker(dataset: str, *, experiment: Path | None = None, lanes: str | None = None, qrels: str | None = None,
                   base: str | None = None, steps: int | None = None, batch_size: int | None = None,
                   max_length: int | None = None, lr: float | None = None, negatives: int | None = None,
                   seed: int | None = None, split: str = "train", out: Path | None = None, force: bool = False,
                   skip_existing: bool = False, track: bool = True, threads: int | None = None,
                   freeze_layers: int | None = None, query_types: str | None = None, text_order: str | None = None,
                   log: Callable[[str], None] = lambda _m: None,
                   warn: Callable[[str], None] = lambda _m: None) -> TrainOutcome:
    """``workbench reranker train``: fine-tune a cross-encoder on ``dataset``'s train split, with hard negatives
    from the lanes of ``experiment`` (default ``experiments/kb.toml``) read from the candidate cache, then write
    the model with its card and log it to MLflow.

    Every argument is checked before any lane runs or any model loads (the recipe, the base, the split, the
    output folder, the disk space); ``None`` takes the recipe's default
    (:mod:`workbench.reranking.training`). ``lanes`` and ``query_types`` are comma-separated; ``log`` gets
    progress lines, ``warn`` what the user should know (tracking turned off or failed).

    Raises:
        WorkbenchError: a bad argument, an unknown dataset, lane or layer, a full disk, a lane that fails
            (the message names the option or file and the fix). MLflow failures are not raised: the model is
            kept and ``warning`` says why it is not tracked.
        KeyboardInterrupt: passed on; no model was written.
    """
    from workbench.data import catalog
    from workbench.experiment.config import load_experiment
    from workbench.judging import layers
    from workbench.reranking import training as rt
    from workbench.settings import data_dir, home_dir

    t0 = time.perf_counter()
    steps = rt.DEFAULT_STEPS if steps is None else steps
    batch_size = rt.DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    max_length = rt.DEFAULT_MAX_LENGTH if max_length is None else max_length
    lr = rt.DEFAULT_LR if lr is None else lr
    negatives = rt.DEFAULT_NEGATIVES if negatives is None else negatives
    seed = rt.TRAIN_SEED if seed is None else seed
    rt.check_train_split(split)
    freeze_layers = rt.DEFAULT_FREEZE_LAYERS if freeze_layers is None else freeze_layers
    text_order = rt.DEFAULT_TEXT_ORDER if text_order is None else text_order
    rt.check_recipe(steps=steps, batch_size=batch_size, max_length=max_length, lr=lr, negatives_per_query=negatives,
                    threads=threads, freeze_layers=freeze_layers, text_order=text_order)
    from workbench._infra.threads import default_threads, env_threads

    env_threads()  # a bad WORKBENCH_THREADS is refused before any work
    layer = layers.check_layer(qrels, "--qrels") if qrels is not None else None
    rt.resolve_base(base)
    rt.check_freeze(base, freeze_layers)  # before any lane runs
    home = home_dir()
    dest = out if out is not None else rt.default_output(dataset, home)
    defs = catalog.load_definitions()
    catalog.build_order(defs, [dataset])  # an unknown dataset: the catalog's own message
    exp = load_experiment(experiment if experiment is not None else PROJECT_ROOT / "experiments" / "kb.toml")
    chosen = rt.choose_lanes(exp, lanes.split(",") if lanes is not None else None)
    # every argument is checked before a kept model ends the command (a misspelt -d is an error either way)
    if skip_existing and not force and (Path(dest) / "config.json").is_file():
        from workbench.reranking.scorers import check_cross_encoder_folder, missing_model_parts

        # something else in its place is an error, not a model to keep
        check_cross_encoder_folder(dest, complete=False)
        # usable (config, weights, tokenizer) is kept: a cross-encoder from elsewhere has no model card, and
        # training writes its folder whole (a temporary folder renamed into place), so a card-less folder
        # is never one it left half-written
        missing = missing_model_parts(dest, card=False)
        if not missing:
            return TrainOutcome(Path(dest), kept=True)
        log(f"{dest} holds an incomplete cross-encoder (missing: {'; '.join(missing)}): training it again")
        force = True  # replaces the incomplete folder only once the new model is whole
    folder = rt.check_destination(dest, force)
    rt.check_space(folder, base)  # a disk without room for the model fails now, not after the training
    layer = layer or exp.qrels
    data_dir()
    if track:
        from workbench.experiment.tracking import check_tracking

        try:
            check_tracking(home)
        except WorkbenchError as exc:
            warn(f"not tracking in MLflow ({exc}); the model is written all the same")
            track = False
    ds = catalog.ensure(dataset, defs, home=home, log=log)
    lq = layers.load_layer(layer, ds, home=home)
    if dataset not in exp.datasets:
        log(f"note: {exp.path} does not evaluate {dataset}; its lanes run live on it unless cached")
    types = rt.choose_query_types(query_types, ds)  # before the lanes run
    runs, cached = cached_lane_runs(exp, ds, chosen, home=home, progress=True, log=log)
    log("candidates of " + ", ".join(f"{n} ({'cache' if c else 'live'})" for n, c in cached.items()))
    candidates = rt.union_candidates(runs, [q.query_id for q in ds.queries if q.split == split])
    pairs, stats = rt.training_pairs(ds, lq.qrels, candidates, split=split, negatives_per_query=negatives, seed=seed,
                                     text_order=text_order, query_types=types)
    log(f"{stats.pairs} pairs from {stats.queries} {split} queries of {dataset} (qrels {lq.layer}): "
         f"{stats.positives} positive, {stats.judged_negatives} judged negative, {stats.unjudged_negatives} "
         f"unjudged negative ({rt.UNJUDGED_WARNING})")
    # a bar with rate and ETA on a terminal; in a log (make main's), a line at least every 30 s
    from workbench._infra.progress import bar as progress_bar

    fixed = threads if threads is not None else env_threads()
    first = default_threads(threads)
    log(f"training with {first} torch thread(s) " + ("(fixed)" if fixed is not None else
        "(one per free core, re-decided as it runs; --threads or WORKBENCH_THREADS to fix it)"))
    bar = progress_bar(steps, f"training {folder.name}", "step")
    seen: list[float] = []

    def progress(step: int, loss: float) -> None:
        seen.append(loss)
        bar.set_postfix_str(f"loss {rt.smooth(seen)[-1]:.4f} (smoothed)", refresh=False)
        bar.update(1)

    t_train = time.perf_counter()
    try:
        model, losses = rt.train(pairs, base=base, steps=steps, batch_size=batch_size, lr=lr, max_length=max_length,
                                 seed=seed, progress=progress, threads=fixed, freeze_layers=freeze_layers)
    finally:
        bar.close()
    train_s = time.perf_counter() - t_train
    card = rt.model_card(base=base, ds=ds, layer=lq, stats=stats, steps=steps, batch_size=batch_size, lr=lr,
                         max_length=max_length, seed=seed, negatives_per_query=negatives, losses=losses,
                         wall_s=time.perf_counter() - t0, train_s=train_s, folder=folder,
                         candidates={"experiment": str(exp.path), "lanes": chosen, "depth": exp.depth,
                                     "cached": cached}, threads=first, freeze_layers=freeze_layers,
                         text_order=text_order, query_types=types)
    folder = rt.write_model(model, folder, card, force=force)
    run_id, warning = None, ""
    if track:
        from workbench.experiment.tracking import tracking_uri

        try:
            run_id = log_to_mlflow(card, folder, home)
        except Exception as exc:  # MLflow raises many kinds; the model is on disk already
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            warning = f"could not track in MLflow at {tracking_uri(home)}: {why}; the model is kept in {folder}"
    return TrainOutcome(folder, card=card, stats=stats, run_id=run_id, warning=warning, max_length=max_length,
                        elapsed_s=time.perf_counter() - t0)
