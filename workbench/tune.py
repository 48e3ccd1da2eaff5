"""Tuning studies with Optuna over cached lane candidates (issue #5).

``run_study`` is what ``workbench tune`` calls:

1. the dataset is loaded; each lane's candidates come from the candidate cache of the
   main job (:func:`workbench.job.lane_candidates`), or are computed once and cached;
2. every trial draws a point (:func:`workbench.space.suggest`). **Fusion-only**
   parameters (method, k, weights, depths, lanes on/off, min_score, top_k) are scored
   in memory by :class:`workbench.fasteval.CandidateMatrix` on the study's split (no
   database, no model). **Engine** parameters (``engine.<lane>.<param>``) pick a lane
   variant: its candidates are fetched once per distinct setting (cache, or the engine
   on a miss) and every later trial with that setting reuses them;
3. the objective is the measure's mean on the split, or a weighted mean of per-query-type
   means; with ``latency = true`` also the p95 latency (ms, sum of the lanes' cached
   per-query latencies), minimised, so the study returns a Pareto front;
4. the baseline config is enqueued as trial 0; the sampler (TPE, or NSGA-II for two
   objectives) is seeded, so a study is reproducible; storage is a journal file under
   ``<home>/studies/<name>/`` (resumable: a killed study continues where it stopped),
   memory, or a PostgreSQL URL (``--workers N`` processes share it);
5. the chosen trial (the flattest among those within ``tolerance`` of the best, by the
   sensitivity report) is re-evaluated with ir_measures on the dev and test splits,
   with bootstrap confidence intervals and a paired randomisation test against the
   baseline config (:func:`honest_report`).

Statistics: :mod:`workbench.stats` (percentile bootstrap, paired sign-flip randomisation
test), with the study's seed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from workbench.errors import ConfigError
from workbench.fasteval import CandidateMatrix, FusionSetting
from workbench.space import Range, Study, baseline_params, suggest
from workbench.stats import bootstrap_ci, paired_test


_UNSET = object()


def study_dir(home: Path, name: str) -> Path:
    """``<home>/studies/<name>``: journal, report, plots, export."""
    return Path(home) / "studies" / name


# ---------------------------------------------------------------- candidates

class Candidates:
    """Lane candidates of the study's dataset, per engine setting, as runs and candidate matrices.

    Args:
        study: the validated study.
        home: the workbench home (datasets, caches).
        log: progress messages.
    """

    def __init__(self, study: Study, home: Path, log: Callable[[str], None] = lambda _m: None,
                 progress: bool = False):
        from workbench import catalog
        from workbench.cache import CandidateCache
        from workbench.job import Engine

        self.study, self.home, self.log = study, Path(home), log
        self.ds = catalog.ensure(study.dataset, catalog.load_definitions(), home=self.home, log=log)
        self.engine = Engine(study.experiment, self.home, progress, log)
        self.cache = CandidateCache(self.home / "cache" / "candidates")
        self._runs: dict[tuple, Any] = {}
        self._lat: dict[tuple, dict[str, float]] = {}
        self._matrices: dict[tuple, dict[str, CandidateMatrix]] = {}
        self.queries = {q.query_id: q for q in self.ds.queries}

    def lane_run(self, lane: str, overrides: dict[str, Any]):
        """(run, latencies) of ``lane`` with engine parameter ``overrides`` (cache first)."""
        from workbench.experiment import LaneSpec
        from workbench.job import lane_result

        key = (lane, tuple(sorted(overrides.items())))
        if key not in self._runs:
            base = self.study.experiment.lanes[lane]
            spec = LaneSpec(lane, base.kind, {**base.params, **overrides})
            got = lane_result(spec, self.ds, self.engine, self.cache, self.study.experiment.depth, self.log)
            self._runs[key], self._lat[key] = got.run, got.latencies_ms
        return self._runs[key], self._lat[key]

    def engine_key(self, params: dict[str, Any]) -> tuple:
        """The engine setting of a trial: ((lane, ((param, value), ...)), ...)."""
        out = []
        for lane in self.study.lanes:
            base = self.study.experiment.lanes[lane].params
            ov = {k.split(".", 2)[2]: v for k, v in params.items() if k.startswith(f"engine.{lane}.")}
            ov = {k: v for k, v in ov.items() if base.get(k, _UNSET) != v}  # a value equal to the lane's own is no override
            out.append((lane, tuple(sorted(ov.items()))))
        return tuple(out)

    def matrix(self, engine_key: tuple, split: str) -> CandidateMatrix:
        """The candidate matrix of the study's lanes for one engine setting and split."""
        if engine_key not in self._matrices:
            self._matrices[engine_key] = {}
        if split not in self._matrices[engine_key]:
            runs = {lane: self.lane_run(lane, dict(ov))[0] for lane, ov in engine_key}
            qids = [q.query_id for q in self.ds.queries if q.split == split]
            self._matrices[engine_key][split] = CandidateMatrix(runs, self.ds.qrels, qids)
        return self._matrices[engine_key][split]

    def latencies(self, engine_key: tuple, lanes: tuple[str, ...], query_ids: list[str]) -> np.ndarray:
        """Per-query latency (ms) of a fused config: the sum of its lanes' cached latencies."""
        ov = dict(engine_key)
        total = np.zeros(len(query_ids))
        for lane in lanes:
            lat = self.lane_run(lane, dict(ov[lane]))[1]
            total += np.array([lat.get(q, 0.0) for q in query_ids])
        return total


# ---------------------------------------------------------------- settings

def setting_from(study: Study, params: dict[str, Any]) -> FusionSetting | None:
    """The fusion setting of a trial's parameters on top of the baseline config (``None``: every lane off)."""
    cfg = study.experiment.configs[study.baseline]
    lanes = tuple(ln for ln in study.lanes if params.get(f"lanes.{ln}", ln in cfg.lanes))
    if not lanes:
        return None
    method = params.get("fusion", cfg.fusion)
    if method == "none" and len(lanes) > 1:
        method = "rrf"
    if len(lanes) == 1 and "fusion" not in params and cfg.fusion == "none":
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
    return FusionSetting(lanes, method, float(params.get("k", cfg.k)), weights, depth or None,
                         params.get("norm", cfg.norm), min_score, int(params.get("top_k", cfg.top_k)), tb)


def baseline_setting(study: Study) -> FusionSetting:
    """The baseline config exactly as written (not projected into the space)."""
    cfg = study.experiment.configs[study.baseline]
    return FusionSetting(cfg.lanes, cfg.fusion, cfg.k, cfg.weights, cfg.depth, cfg.norm, cfg.min_score, cfg.top_k,
                         cfg.tiebreak_lane)


def objective_value(study: Study, m: CandidateMatrix, s: FusionSetting | None, queries: dict) -> float:
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


# ---------------------------------------------------------------- the study

@dataclass
class StudyResult:
    """What ``workbench tune`` computed."""

    study: Study
    optuna_study: Any
    chosen: Any
    chosen_params: dict[str, Any]
    chosen_setting: FusionSetting
    baseline_value: float
    sensitivity: list[dict[str, Any]]
    report: dict[str, Any]
    elapsed_s: float
    trials_run: int
    notes: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)


def storage_for(study: Study, home: Path, storage: str | None, *, create: bool = True):
    """Optuna storage: ``None``/``journal`` → the journal file of the study folder, ``memory``,
    ``journal:PATH``, or a ``postgresql://`` URL (``postgresql`` alone: the workbench's server).

    Args:
        create: with ``False`` a journal that does not exist yet is an error (``export``).

    Raises:
        ConfigError: an unknown spec, a journal path that is a folder or whose folder is
            missing, a PostgreSQL server that refuses the connection (names it and the fix).
    """
    import optuna

    spec = (storage or "journal").strip()
    if spec == "memory":
        return optuna.storages.InMemoryStorage()
    if spec == "journal" or spec.startswith("journal:"):
        if spec == "journal":
            path = study_dir(home, study.name) / "journal.log"
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            raw = spec.partition(":")[2].strip()
            if not raw:
                raise ConfigError("--storage journal:PATH needs a file path, e.g. journal:/tmp/study.log")
            path = Path(raw).expanduser()
            if path.is_dir():
                raise ConfigError(f"--storage {spec}: {path} is a folder; give a file path for the journal")
            if not path.parent.is_dir():
                raise ConfigError(f"--storage {spec}: folder {path.parent} does not exist; create it first")
        if not create and not path.is_file():
            raise ConfigError(f"no study journal at {path}; run `workbench tune {study.path}` first "
                              "(with the same --storage)")
        from optuna.storages.journal import JournalFileBackend

        try:
            return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
        except OSError as exc:
            raise ConfigError(f"cannot open the study journal {path}: {exc.strerror or exc}") from None
    if spec == "postgresql" or spec.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        url = spec
        if spec == "postgresql":
            from workbench import pg

            url = pg.server_dsn(home)
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
        except Exception as exc:  # sqlalchemy OperationalError and friends
            from workbench.pg import redact

            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot use PostgreSQL study storage {redact(spec)}: {first}; check the URL "
                              "and that the server runs, or use --storage journal") from None
    raise ConfigError(f"storage {spec!r} must be memory, journal, journal:PATH, postgresql (the workbench's server) "
                      "or a postgresql:// URL")


def definition(study: Study) -> dict[str, Any]:
    """What a stored study was made for: dataset, lanes, baseline, split, objective and space
    (a stored study is only resumed or exported for the same definition)."""
    return json.loads(json.dumps({"dataset": study.dataset, "lanes": list(study.lanes), "baseline": study.baseline,
                                  "split": study.split, "measure": study.measure, "weights": study.type_weights,
                                  "latency": study.latency, "space": study.space,
                                  "experiment": str(study.experiment.path.name)}, default=repr, sort_keys=True))


def make_study(study: Study, storage) -> Any:
    """Create or load the Optuna study (same name, same storage → the same study, resumed).

    Raises:
        ConfigError: the stored study of that name was made for another definition.
    """
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    directions = ["maximize", "minimize"] if study.latency else ["maximize"]
    sampler = (optuna.samplers.NSGAIISampler(seed=study.seed) if study.latency
               else optuna.samplers.TPESampler(seed=study.seed, multivariate=True, group=True))
    try:
        ost = optuna.create_study(study_name=study.name, storage=storage, directions=directions, sampler=sampler,
                                  load_if_exists=True)
    except ValueError as exc:  # e.g. a stored study with another number of objectives
        raise ConfigError(f"study {study.name} in this storage does not fit {study.path} ({exc}); give the study a "
                          "new name or use another --storage") from None
    want = definition(study)
    have = ost.user_attrs.get("workbench_definition")
    if have is None:
        ost.set_user_attr("workbench_definition", want)
    elif have != want:
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        raise ConfigError(f"study {study.name} in this storage was made for another definition (differs: "
                          f"{', '.join(diff)}); give the study a new name or use another --storage")
    return ost


def run_study(study: Study, *, home: Path, storage: str | None = None, trials: int | None = None,
              workers: int = 1, log: Callable[[str], None] = lambda _m: None, progress: bool = False,
              candidates: Candidates | None = None) -> StudyResult:
    """Run (or resume) a study until it has ``trials`` complete trials, then choose and report.

    Raises:
        ConfigError, DataError, StaleError, PgError, OpenSearchError: with messages naming the fix.
    """
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    t0 = time.perf_counter()
    if workers > 1 and not (storage or "").startswith("postgres"):
        raise ConfigError("--workers > 1 needs a storage several processes can share: --storage postgresql "
                          "(the workbench's server) or a postgresql:// URL")
    n_target = trials or study.trials
    store = storage_for(study, home, storage)
    ost = make_study(study, store)
    cands = candidates or Candidates(study, home, log, progress)
    check_split(study, cands)
    notes: list[str] = []
    done = [t for t in ost.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not ost.trials:
        params, notes = baseline_params(study)
        ost.enqueue_trial(params, user_attrs={"baseline": True})
    elif done:
        log(f"resuming study {study.name}: {len(done)} complete trial(s) in storage")
    # warm the candidates of the baseline's engine setting (fills the cache once)
    base_key = cands.engine_key(baseline_params(study)[0])
    cands.matrix(base_key, study.split)
    remaining = max(n_target - len(done), 0)
    if workers > 1 and remaining:
        _run_workers(study, home, storage, remaining, workers, log)
    elif remaining:
        objective = make_objective(study, cands)
        callbacks = [optuna.study.MaxTrialsCallback(n_target, states=(optuna.trial.TrialState.COMPLETE,))]
        ost.optimize(objective, n_trials=remaining, callbacks=callbacks, show_progress_bar=progress)
    ost = make_study(study, storage_for(study, home, storage)) if workers > 1 else ost
    result = choose_and_report(study, ost, cands, log)
    result.elapsed_s = time.perf_counter() - t0
    result.trials_run = remaining
    result.notes = notes + result.notes
    return result


def check_split(study: Study, cands: Candidates) -> None:
    """The study's split has judged queries, and of every query type the objective weighs.

    Raises:
        ConfigError: naming the split, the dataset and the types it has.
    """
    qs = [q for q in cands.ds.queries if q.split == study.split]
    types = sorted({q.query_type for q in qs})
    if not qs:
        raise ConfigError(f"{study.path}: dataset {study.dataset} has no {study.split} queries; choose another split")
    missing = [t for t, w in (study.type_weights or {}).items() if w > 0 and t not in types]
    if missing:
        raise ConfigError(f"{study.path}: objective.weights weighs query type(s) {missing} that have no "
                          f"{study.split} queries in {study.dataset} (it has: {', '.join(types)}); drop them")


def make_objective(study: Study, cands: Candidates) -> Callable[[Any], Any]:
    """The Optuna objective: suggest, fuse and score in memory (engine variants through the cache)."""

    def objective(trial):
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


def _worker(path: str, home: str, storage: str, n: int, seed_offset: int) -> None:  # pragma: no cover - subprocess
    import optuna

    from workbench.space import load_study

    st = load_study(Path(path))
    st = Study(**{**st.__dict__, "seed": st.seed + seed_offset})
    cands = Candidates(st, Path(home))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ost = make_study(st, storage_for(st, Path(home), storage))
    ost.optimize(make_objective(st, cands), n_trials=n)


def _run_workers(study: Study, home: Path, storage: str | None, remaining: int, workers: int,
                 log: Callable[[str], None]) -> None:
    import multiprocessing as mp

    if not storage or not storage.startswith("postgres"):
        raise ConfigError("--workers > 1 needs a storage several processes can share: --storage postgresql "
                          "(the workbench's server) or a postgresql:// URL")
    share = [remaining // workers + (1 if i < remaining % workers else 0) for i in range(workers)]
    log(f"{workers} worker processes share {remaining} trials ({share})")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(study.path), str(home), storage, n, i + 1))
             for i, n in enumerate(share) if n]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise ConfigError(f"{len(bad)} tuning worker(s) failed (exit codes {bad}); run with --workers 1 to see why")


# ---------------------------------------------------------------- choosing, sensitivity, honest results

def _numeric_dims(study: Study) -> dict[str, Range]:
    out = {k: study.space[k] for k in ("k", "min_score", "top_k") if isinstance(study.space.get(k), Range)}
    for group in ("weights", "depth"):
        out.update({f"{group}.{ln}": d for ln, d in study.space.get(group, {}).items() if isinstance(d, Range)})
    return out


def sensitivity(study: Study, cands: Candidates, params: dict[str, Any]) -> list[dict[str, Any]]:
    """For each numeric parameter: the objective at -10% and +10% of its value (clipped to its range).

    Returns:
        rows ``{"param", "value", "objective", "minus10", "plus10", "drop"}`` where ``drop`` is
        the largest fall of the objective (>= 0); a flat optimum has small drops.
    """
    key = cands.engine_key(params)
    m = cands.matrix(key, study.split)
    setting = setting_from(study, params)
    base = objective_value(study, m, setting, cands.queries)
    used = set(setting.lanes) if setting is not None else set()
    rows = []
    for name, dim in _numeric_dims(study).items():
        if name not in params or (name.split(".")[0] in ("weights", "depth") and name.split(".", 1)[1] not in used):
            continue
        if name == "k" and (setting is None or setting.method != "rrf"):
            continue
        v = params[name]
        vals = []
        for f in (0.9, 1.1):
            x = min(max(v * f, dim.low), dim.high)
            x = int(round(x)) if dim.integer else x
            p2 = {**params, name: x}
            vals.append(objective_value(study, m, setting_from(study, p2), cands.queries))
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
    report = honest_report(study, cands, chosen.params, setting)
    base_m = cands.matrix(cands.engine_key({}), study.split)  # the baseline as written: no engine overrides
    base_val = objective_value(study, base_m, baseline_setting(study), cands.queries)
    report["train"] = {"objective": study.measure, "chosen": chosen.values[0], "baseline": base_val,
                       "trial": chosen.number}
    manifest = {k: cands.ds.manifest.get(k) for k in ("inputs", "outputs")}
    return StudyResult(study, ost, chosen, dict(chosen.params), setting, base_val, sens, report, 0.0, 0, notes,
                       manifest)


def honest_report(study: Study, cands: Candidates, params: dict[str, Any], setting: FusionSetting) -> dict:
    """The chosen setting and the baseline on dev and test: measures with 95% CIs, the paired test.

    Evaluated with :func:`workbench.evaluate.evaluate` (ir_measures) on the fused runs, not
    with the in-memory evaluator the study used.
    """
    from workbench.evaluate import evaluate

    measures = list(dict.fromkeys([study.measure, *study.experiment.measures]))
    measures = [m for m in measures if _fast(m)]
    out: dict[str, Any] = {}
    key = cands.engine_key(params)
    base_lanes_key = cands.engine_key({})  # the baseline as written: no engine overrides
    for split in ("dev", "test"):
        qs = [q for q in cands.ds.queries if q.split == split]
        if not qs:
            out[split] = {"queries": 0, "note": f"no {split} queries in {cands.ds.name}"}
            continue
        m = cands.matrix(key, split)
        mb = cands.matrix(base_lanes_key, split)
        ev = evaluate(m.run(setting), cands.ds.qrels, qs, measures).per_query.set_index("query_id")
        evb = evaluate(mb.run(baseline_setting(study)), cands.ds.qrels, qs, measures).per_query.set_index("query_id")
        qids = [q for q in ev.index if q in evb.index]
        rows = {}
        for meas in measures:
            a, b = ev.loc[qids, meas].to_numpy(float), evb.loc[qids, meas].to_numpy(float)
            rows[meas] = {"chosen": float(a.mean()), "chosen_ci": bootstrap_ci(a, study.seed),
                          "baseline": float(b.mean()), "baseline_ci": bootstrap_ci(b, study.seed),
                          **paired_test(a, b, study.seed)}
        by_type = {}
        types = ev.loc[qids, "query_type"]
        for t in sorted(set(types)):
            mask = (types == t).to_numpy()
            a = ev.loc[qids, study.measure].to_numpy(float)[mask]
            b = evb.loc[qids, study.measure].to_numpy(float)[mask]
            by_type[t] = {"n": int(mask.sum()), "chosen": float(a.mean()), "baseline": float(b.mean()),
                          **paired_test(a, b, study.seed)}
        out[split] = {"queries": len(qids), "measures": rows, f"{study.measure} by query_type": by_type}
    return out


def _fast(measure: str) -> bool:
    from workbench.fasteval import supported

    return supported(measure)


# ---------------------------------------------------------------- export

def export_config(result: StudyResult, home: Path) -> dict[str, Any]:
    """The production config of the chosen trial, with provenance (what ``workbench export`` writes).

    Fields a seed system loads: ``lanes`` (kind and engine parameters, ef_search included),
    ``fusion``, ``rrf_k``, ``weights``, ``depth``, ``min_score``, ``top_k``,
    ``tiebreak_lane``, ``norm``. ``provenance``: study, trial, storage folder, objective,
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
                                cwd=Path(__file__).resolve().parent.parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    manifest = result.manifest
    return {
        "lanes": lanes,
        "fusion": s.method,
        "rrf_k": s.k if s.method == "rrf" else None,
        "weights": dict(s.weights or {}),
        "depth": dict(s.depth) if isinstance(s.depth, dict) else s.depth,
        "norm": s.norm if s.method == "weighted" else None,
        "min_score": s.min_score,
        "top_k": s.top_k,
        "tiebreak_lane": s.tiebreak_lane,
        "provenance": {
            "study": st.name, "study_file": str(st.path), "trial": result.chosen.number,
            "objective": {"measure": st.measure, "split": st.split, "type_weights": st.type_weights,
                          "value": result.chosen.values[0], "baseline": result.baseline_value},
            "baseline_config": st.baseline, "experiment": str(st.experiment.path), "dataset": st.dataset,
            "inputs": manifest.get("inputs"), "outputs": manifest.get("outputs"), "code_commit": commit,
            "dev": result.report.get("dev"), "test": result.report.get("test"),
            "sensitivity": result.sensitivity, "seed": st.seed,
            "home": str(home),
        },
    }


# ---------------------------------------------------------------- artifacts and the summary

def outputs_dir(home: Path, name: str, storage: str | None) -> Path:
    """``latest/`` for the default journal; ``latest-memory/`` or ``latest-<hash of the storage>/`` otherwise,
    so a quick in-memory run never overwrites the report of a stored study."""
    import hashlib

    spec = (storage or "journal").strip()
    if spec == "journal":
        return study_dir(home, name) / "latest"
    if spec == "memory":
        return study_dir(home, name) / "latest-memory"
    return study_dir(home, name) / f"latest-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


def _masked(spec: str) -> str:
    """A storage spec with any password in a URL replaced by ``***`` (it goes into report.json)."""
    import re

    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", spec)


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
    into :func:`outputs_dir`; returns that folder."""
    out = outputs_dir(home, result.study.name, storage)
    out.mkdir(parents=True, exist_ok=True)
    report = {"study": result.study.name, "storage": _masked(storage or "journal"),
              "chosen_trial": result.chosen.number, "chosen_params": result.chosen_params,
              "notes": result.notes, "sensitivity": result.sensitivity, **result.report}
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "export.json").write_text(json.dumps(export_config(result, home), indent=1, default=str) + "\n")
    result.optuna_study.trials_dataframe().to_csv(out / "trials.csv", index=False)
    figs = list(study_figures(result.optuna_study, f"train {result.study.measure}").values())
    html = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs)]
    (out / "plots.html").write_text("<html><head><meta charset='utf-8'><title>study "
                                    f"{result.study.name}</title></head><body>" + "\n".join(html) + "</body></html>\n")
    return out


def summary(result: StudyResult) -> str:
    """A plain-text summary: train objective, dev/test measures with CIs and p-values, sensitivity."""
    st = result.study
    lines = [f"study {st.name}: {len(result.optuna_study.trials)} trials on {st.dataset} ({st.split}), "
             f"objective {st.measure}" + (" weighted by query type" if st.type_weights else ""),
             f"  {st.split}: chosen trial {result.chosen.number} = {result.chosen.values[0]:.4f}   "
             f"baseline {st.baseline} = {result.baseline_value:.4f}"]
    for note in result.notes:
        lines.append(f"  note: {note}")
    s = result.chosen_setting
    lines.append(f"  chosen: lanes {', '.join(s.lanes)}; {s.method}" + (f" k={s.k:g}" if s.method == "rrf" else "") +
                 f"; weights {', '.join(f'{k}={v:.3g}' for k, v in (s.weights or {}).items())}; top_k {s.top_k}")
    for split in ("dev", "test"):
        rep = result.report.get(split, {})
        if not rep.get("queries"):
            lines.append(f"  {split}: {rep.get('note', 'no queries')}")
            continue
        lines.append(f"  {split} ({rep['queries']} queries)   chosen [95% CI]   baseline [95% CI]   diff   p")
        for m, r in rep["measures"].items():
            lines.append(f"    {m:10s} {r['chosen']:.4f} [{r['chosen_ci'][0]:.3f}, {r['chosen_ci'][1]:.3f}]   "
                         f"{r['baseline']:.4f} [{r['baseline_ci'][0]:.3f}, {r['baseline_ci'][1]:.3f}]   "
                         f"{r['mean_diff']:+.4f}   {r['p_value']:.4f}")
        for t, r in rep.get(f"{st.measure} by query_type", {}).items():
            lines.append(f"    {st.measure} {t:10s} n={r['n']:4d}  {r['chosen']:.4f} vs {r['baseline']:.4f}  "
                         f"{r['mean_diff']:+.4f}  p={r['p_value']:.4f}")
    if result.sensitivity:
        lines.append("  sensitivity (objective at -10% / +10% of each numeric parameter):")
        for r in result.sensitivity:
            lines.append(f"    {r['param']:22s} {r['value']!s:>10.8}  {r['minus10']:.4f} / {r['plus10']:.4f}  "
                         f"drop {r['drop']:.4f}")
    return "\n".join(lines)
