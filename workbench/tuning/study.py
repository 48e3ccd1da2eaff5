"""Tuning studies with Optuna over cached lane candidates (issue #5).

``run_study`` is what ``workbench tune`` calls:

1. the dataset is loaded; each lane's candidates come from the candidate cache of the
   main job (:func:`workbench.experiment.runner.lane_candidates`), or are computed once and cached;
2. every trial draws a point (:func:`workbench.tuning.space.suggest`). **Fusion-only**
   parameters (method, k, weights, depths, lanes on/off, min_score, top_k) are scored
   in memory by :class:`workbench.eval.fasteval.CandidateMatrix` on the study's split (no
   database, no model). **Engine** parameters (``engine.<lane>.<param>``) pick a lane
   variant: its candidates are fetched once per distinct setting (cache, or the engine
   on a miss) and every later trial with that setting reuses them. **Rerank** parameters
   (``rerank.reranker``, ``rerank.depth``, ``rerank.weight``) put a reranker's scores of the
   fused top ``depth`` into the order in memory (:meth:`CandidateMatrix.reranked`); the scores
   are asked once per (query, candidate) and come from the pair-score cache that
   ``workbench eval`` of the experiment filled (:meth:`Candidates.rerank_scores`);
3. the objective is the measure's mean on the split, or a weighted mean of per-query-type
   means, judged by the study's qrels layer (``built``, ``human`` or ``merged``:
   :mod:`workbench.judging.layers`; under ``human`` only queries with a human grade count);
   with ``latency = true`` also the p95 latency (ms, sum of the lanes' cached per-query
   latencies), minimised, so the study returns a Pareto front;
4. the baseline config is enqueued as trial 0; the sampler (TPE, or NSGA-II for two
   objectives) is seeded, so a study is reproducible, and a process that does not get
   consecutive trial numbers reseeds from (seed, trial number), so processes sharing a
   study never draw the same points (:func:`seeded_sampler`); storage is a journal file
   under ``<home>/studies/<name>/`` (resumable: a killed study continues where it stopped;
   a cut last record is dropped when it is opened,
   :func:`workbench.tuning.storage.open_journal`), memory, or a PostgreSQL URL (``--workers N``
   processes share it). On resume, trials left running by a dead process are failed and a
   baseline that never completed is enqueued again (:mod:`workbench.tuning.recovery`).
   ``trials`` is the number of trials **in the study**, however many processes share it: each
   process counts the study's complete and running trials and creates the next one under one lock
   (:func:`run_trials`, :func:`workbench.tuning.storage.trial_lock`), and reports the whole study as
   its storage holds it once the trials it saw running have ended;
5. the chosen trial (the flattest among those within ``tolerance`` of the best, by the
   sensitivity report) is re-evaluated with ir_measures on the dev and test splits,
   with bootstrap confidence intervals and a paired randomisation test against the
   baseline config (:func:`workbench.tuning.select.honest_report`).

Statistics: :mod:`workbench.eval.stats` (percentile bootstrap, paired sign-flip randomisation
test), with the study's seed.
"""


from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from workbench.errors import ConfigError, WorkbenchError
from workbench.tuning.candidates import Candidates
from workbench.tuning.objective import make_objective
from workbench.tuning.recovery import ensure_baseline, fail_dead_trials
from workbench.tuning.report import StudyResult
from workbench.tuning.select import choose_and_report
from workbench.tuning.space import Study, baseline_params, finite_settings, study_rerankers
from workbench.tuning.storage import storage_failure, storage_for, trial_lock
from workbench.types import UNANSWERABLE_QUERY_TYPES

#: The trial states that take a place of ``--trials N``: complete ones, and running ones (on their way to
#: complete). A trial that fails gives its place back, so N is the number of complete trials in the end.
COUNTED_STATES = ("COMPLETE", "RUNNING")

#: Seconds a process that has finished its share waits at most for trials it saw running elsewhere (on
#: another machine, where it cannot tell whether their process lives) before it reports without them.
AWAIT_OTHERS_S = 600.0


def trial_seed(seed: int, number: int) -> int:
    """The sampler seed of trial ``number`` in a study seeded ``seed``, used whenever a process
    did not draw that trial's predecessor itself (see :func:`seeded_sampler`)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{seed}:{number}".encode()).digest()[:4], "big")


def seeded_sampler(study: Study):
    """The study's sampler (TPE, multivariate; NSGA-II with latency), seeded per stretch of trials.

    A process draws its trials from one random stream seeded with the study's seed as long as
    it gets trial numbers 0, 1, 2, ... one after another: a fresh study run by one process draws
    exactly what that seed always drew. Whenever a trial's number is not the one after this
    process's previous trial (a resumed study, or another process took trials in between), the
    sampler starts again from :func:`trial_seed` of (study seed, trial number). Trial numbers
    are handed out by the storage, one per trial, so two processes on one study never draw from
    the same stream, and a resumed study never repeats the draws it made before.
    """
    import optuna

    def make(seed: int):
        if study.latency:
            return optuna.samplers.NSGAIISampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)

    return _seeded_sampler_type()(make, study.seed)


@functools.lru_cache(maxsize=1)
def _seeded_sampler_type():
    from optuna.samplers import BaseSampler

    class StretchSeededSampler(BaseSampler):
        """Delegates to a sampler made with the study's seed, made anew from
        :func:`trial_seed` when the trial numbers this process gets are not consecutive."""

        def __init__(self, make: Callable[[int], Any], seed: int) -> None:
            self._make, self._seed = make, seed
            self._inner = make(seed)
            self._next = 0

        def before_trial(self, study, trial) -> None:
            if trial.number != self._next:
                self._inner = self._make(trial_seed(self._seed, trial.number))
            self._next = trial.number + 1
            self._inner.before_trial(study, trial)

        def infer_relative_search_space(self, study, trial):
            return self._inner.infer_relative_search_space(study, trial)

        def sample_relative(self, study, trial, search_space):
            return self._inner.sample_relative(study, trial, search_space)

        def sample_independent(self, study, trial, param_name, param_distribution):
            return self._inner.sample_independent(study, trial, param_name, param_distribution)

        def after_trial(self, study, trial, state, values) -> None:
            self._inner.after_trial(study, trial, state, values)

        def reseed_rng(self) -> None:
            self._inner.reseed_rng()

    return StretchSeededSampler


def definition(study: Study) -> dict[str, Any]:
    """What a stored study was made for: dataset, lanes, baseline, split, objective and space
    (a stored study is only resumed or exported for the same definition)."""
    d: dict[str, Any] = {"dataset": study.dataset, "lanes": list(study.lanes), "baseline": study.baseline,
         "split": study.split, "measure": study.measure, "weights": study.type_weights,
         "latency": study.latency, "space": study.space, "experiment": str(study.experiment.path.name)}
    layer = getattr(study, "qrels", "built")
    if layer != "built":  # studies stored before qrels layers (all built) keep their definition
        d["qrels"] = layer
    if study.abstention:  # studies stored before the abstention weight (none) keep their definition
        d["abstention"] = study.abstention
    if study.queries != "all":
        d["queries"] = study.queries
    # the rerank stage (studies stored before it, which could not rerank, keep their definition): the
    # baseline's stage and the kind and parameters of every reranker a trial may use (another model
    # folder scores other values)
    base_stage = study.experiment.configs[study.baseline].rerank
    names = study_rerankers(study)
    if base_stage is not None:
        d["baseline_rerank"] = {"reranker": base_stage.reranker, "depth": base_stage.depth,
                                "weight": base_stage.weight}
        names = [base_stage.reranker, *names]
    if names:
        d["rerankers"] = {n: {"kind": study.experiment.rerankers[n].kind, "params": study.experiment.rerankers[n].params}
                          for n in dict.fromkeys(names)}
    return json.loads(json.dumps(d, default=repr, sort_keys=True))


def make_study(study: Study, storage) -> Any:
    """Create or load the Optuna study (same name, same storage → the same study, resumed),
    with the sampler of :func:`seeded_sampler`.

    Raises:
        ConfigError: the stored study of that name was made for another definition.
    """
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    directions: list[Literal["minimize", "maximize"]] = ["maximize", "minimize"] if study.latency else ["maximize"]
    try:
        ost = optuna.create_study(study_name=study.name, storage=storage, directions=directions,
                                  sampler=seeded_sampler(study), load_if_exists=True)
    except ValueError as exc:  # e.g. a stored study with another number of objectives
        raise ConfigError(f"study {study.name} in this storage does not fit {study.path} ({exc}); give the study a "
                          "new name or use another --storage") from None
    want = definition(study)
    have = ost.user_attrs.get("workbench_definition")
    if have is None:
        ost.set_user_attr("workbench_definition", want)
    elif have != want:
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        if diff == ["qrels"]:
            stored, asked = have.get("qrels", "built"), want.get("qrels", "built")
            raise ConfigError(f"study {study.name} in this storage was tuned on the {stored} qrels, not {asked}; "
                              f"pass --qrels {stored} to `workbench tune`, or set qrels = \"{stored}\" in {study.path} "
                              "(what `workbench export` reads), or give the study a new name")
        raise ConfigError(f"study {study.name} in this storage was made for another definition (differs: "
                          f"{', '.join(diff)}); give the study a new name or use another --storage")
    return ost


def run_study(study: Study, *, home: Path, storage: str | None = None, trials: int | None = None,
              workers: int = 1, log: Callable[[str], None] = lambda _m: None, progress: bool = False,
              candidates: Candidates | None = None) -> StudyResult:
    """Run (or resume) a study until it has ``trials`` complete trials in all, then choose and report.

    ``trials`` counts the study's trials, not this process's: several processes (``--workers``, or
    ``workbench tune`` run twice on one storage) together run exactly that many (:func:`run_trials`).
    On resume, trials left running by a process that is gone are marked failed
    (:func:`workbench.tuning.recovery.fail_dead_trials`) and the baseline is enqueued again when no
    trial of it completed (:func:`workbench.tuning.recovery.ensure_baseline`). When this process is
    done it waits for the trials it saw running in other processes (:func:`await_running`), and the
    result reports the whole study as its storage then holds it (every complete trial and the best
    among them); ``trials_run`` is the number of trials this process ran (with ``workers``: the complete
    trials the study gained while they ran).

    Raises:
        ConfigError, DataError, StaleError, PgError, OpenSearchError: with messages naming the fix.
        StorageError: the study's storage cannot be written (a full disk: the path and the space
            needed; a read-only folder) or its journal is damaged; the complete trials are kept.
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
    store = storage_for(study, home, storage, log=log)
    ost = None
    lock = None
    try:
        ost = make_study(study, store)
        lock = trial_lock(study, home, storage, store)
        cands = candidates or Candidates(study, home, log, progress)
        check_study_split(study, cands)
        notes_qrels = _qrels_changed(ost, cands, log)
        lock.acquire()  # two processes starting on a new study enqueue one baseline between them
        try:
            fail_dead_trials(ost, log, locked=True)
            notes = ensure_baseline(study, ost, log)
            settings = finite_settings(study)
            if settings is not None:  # a space of 4 settings and --trials 30: each once, then stop
                n_target, note = plan_finite(ost, settings, n_target)
                notes = notes + ([note] if note else [])
        finally:
            lock.release()
        done = [t for t in ost.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if done:
            log(f"resuming study {study.name}: {len(done)} complete trial(s) in storage")
        # a missing model folder or unusable URL fails here, before any lane runs
        base_stage = study.experiment.configs[study.baseline].rerank
        used = [*study_rerankers(study)] + ([base_stage.reranker] if base_stage is not None else [])
        if used:
            cands.engine.check_rerankers([study.dataset], used)
        # warm the candidates of the baseline's engine setting (fills the cache once)
        base_key = cands.engine_key(baseline_params(study)[0])
        cands.matrix(base_key, study.split)
        for name in study_rerankers(study):
            cands.reranker(base_key, name)
        remaining = max(n_target - len(done), 0)
        ran = 0
        if workers > 1 and remaining:
            _run_workers(study, home, storage, n_target, workers, log)
            ost = make_study(study, storage_for(study, home, storage))
            ran = max(_count(ost, ("COMPLETE",)) - len(done), 0)
            await_running(ost, log)
        elif remaining:
            objective = make_objective(study, cands)
            # whole lines with the rate and the ETA every 30 s in a log; tqdm's bar on a terminal
            from workbench._infra.progress import bar as progress_bar

            with progress_bar(remaining, f"study {study.name}", "trial", enabled=progress) as lines:
                ran = run_trials(ost, objective, n_target, lock, on_trial=lambda: lines.update(1))
                # a trial another process ran failed or was left by a process that is gone (killed) while this
                # one waited: its place is given back, and this process fills it
                while not await_running(ost, log) and _count(ost) < n_target:
                    ran += run_trials(ost, objective, n_target, lock, on_trial=lambda: lines.update(1))
        else:
            await_running(ost, log)
    except WorkbenchError:
        raise
    except Exception as exc:
        err = storage_failure(exc, study, home, storage, ost, n_target)
        if err is None:
            raise
        raise err from None
    finally:
        if lock is not None:
            lock.close()
    result = choose_and_report(study, ost, cands, log)
    result.elapsed_s = time.perf_counter() - t0
    result.trials_run = ran
    result.notes = notes_qrels + notes + result.notes
    return result


def plan_finite(ost, settings: list[dict[str, Any]], n_target: int) -> tuple[int, str | None]:
    """On a finite space (``settings``: :func:`workbench.tuning.space.finite_settings`) that holds fewer settings
    than ``n_target`` trials need, enqueue each setting no trial has tried (complete, running or waiting) and
    lower the target to the study's trials plus those: every setting is tried once and the study stops, instead
    of the sampler drawing the same few settings again (Optuna's samplers repeat points of a finite space).
    Returns the target and a note for the report (None, and ``n_target`` unchanged, when the space is larger).
    Call under the study's trial lock, so two processes do not enqueue the same setting."""
    from optuna.trial import TrialState

    from workbench.tuning.space import setting_key

    live = [t for t in ost.get_trials(deepcopy=False)
            if t.state in (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)]
    tried = {setting_key(t.params or t.system_attrs.get("fixed_params", {})) for t in live}
    missing = [p for p in settings if setting_key(p) not in tried]
    if len(live) + len(missing) > n_target:
        return n_target, None
    for params in missing:
        ost.enqueue_trial(params)
    target = len(live) + len(missing)
    return target, (f"the space holds only {len(settings)} distinct setting(s): each is tried once and the study "
                    f"stops at {target} trial(s), not the {n_target} asked for")


def _count(ost, states: tuple[str, ...] = COUNTED_STATES) -> int:
    """The number of the study's trials in ``states`` (names of ``optuna.trial.TrialState``), read from storage."""
    from optuna.trial import TrialState

    return len(ost.get_trials(deepcopy=False, states=tuple(TrialState[s] for s in states)))


def run_trials(ost, objective: Callable[[Any], Any], n_target: int, lock, *,
               on_trial: Callable[[], None] = lambda: None) -> int:
    """Run trials of ``ost`` until the study holds ``n_target`` trials that count (complete or running,
    :data:`COUNTED_STATES`), whatever other processes on its storage do; returns how many this process ran.

    Check-before-ask: under ``lock`` (:func:`workbench.tuning.storage.trial_lock`, one for every process
    of the study) the trials that count are counted and, while they are fewer than ``n_target``, the
    next one is created (Optuna's ``ask`` inside ``study.optimize(n_trials=1)``, so heartbeats and
    failure handling are Optuna's own). The lock is let go as soon as the trial exists, so trials of
    several processes run side by side, but no two processes can take the last place. (Optuna's
    ``MaxTrialsCallback`` counts after a trial ends, apart from the next ``ask``: two processes on 39
    of 40 both start one, and the study ends with 41.) A trial that fails gives its place back.

    Args:
        objective: the Optuna objective (:func:`workbench.tuning.objective.make_objective`).
        n_target: trials wanted in the study in all (>= 1).
        lock: an object with ``acquire()`` and ``release()``.
        on_trial: called after each trial this process ran (a progress bar's update).

    Raises:
        whatever the objective or the storage raises (the trial is then failed, as Optuna does; the lock
        is let go).
    """
    from workbench.tuning.recovery import this_process

    owner = this_process()
    ran = 0
    while True:
        lock.acquire()
        held = True
        try:
            if _count(ost) >= n_target:
                return ran

            def first_let_go(trial: Any) -> Any:
                nonlocal held
                # the process is recorded before the lock is let go: a running trial without a record, seen
                # under the lock, was left by a process killed between creating it and recording itself
                # (:func:`workbench.tuning.recovery.fail_dead_trials` with ``locked``)
                trial.set_user_attr("process", owner)
                lock.release()  # the trial exists (running) in storage: others count it from now on
                held = False
                return objective(trial)

            ost.optimize(first_let_go, n_trials=1)
        finally:
            if held:
                lock.release()
        ran += 1
        on_trial()


def await_running(ost, log: Callable[[str], None] = lambda _m: None, *, limit_s: float = AWAIT_OTHERS_S) -> list[int]:
    """Wait until the trials running now (in other processes: this one runs none here) have ended, so a
    summary read afterwards covers the whole study; returns the numbers of those still running after
    ``limit_s`` seconds (a trial on another machine whose process may be gone).

    Trials whose process is gone from this machine are failed on the way
    (:func:`workbench.tuning.recovery.fail_dead_trials`); trials started after this call are not waited for.
    """
    from optuna.trial import TrialState

    def running() -> list[Any]:
        return [t for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,)) if t.number in waiting]

    waiting = {t.number for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if not waiting:
        return []
    log(f"study {ost.study_name}: waiting for trial(s) {', '.join(map(str, sorted(waiting)))} of another process "
        "to end, so that the summary covers the whole study")
    deadline = time.monotonic() + limit_s
    while True:
        fail_dead_trials(ost, log)
        left = running()
        if not left:
            return []
        if time.monotonic() > deadline:
            nums = [t.number for t in left]
            log(f"study {ost.study_name}: trial(s) {', '.join(map(str, nums))} still running after {limit_s:.0f} s; "
                "the summary leaves them out")
            return nums
        time.sleep(0.2)


def _qrels_changed(ost, cands: Candidates, log: Callable[[str], None]) -> list[str]:
    """Record the hash of the study's qrels on the stored study; when a resumed study's earlier trials
    were scored on other qrels (new human grades since), say so (their values are not comparable)."""
    sha = cands.layer.sha256
    have = ost.user_attrs.get("workbench_qrels_sha256")
    if have == sha:
        return []
    ost.set_user_attr("workbench_qrels_sha256", sha)
    if have is None:
        return []
    note = (f"the {cands.layer.layer} qrels changed since earlier trials of this study (sha256 {have[:12]} -> "
            f"{sha[:12]}: new judgments); earlier trial values were scored on the old qrels — start a new study "
            "(another name) for values scored on one set")
    log(note)
    return [note]


def check_study_split(study: Study, cands: Candidates) -> None:
    """The study's split has judged queries, and of every query type the objective weighs.

    Raises:
        ConfigError: naming the split, the dataset and the types it has.
    """
    qs = cands.split_queries(study.split)
    types = sorted({q.query_type for q in qs})
    if not qs and cands.layer.layer == "human" and any(q.split == study.split for q in cands.ds.queries):
        from workbench.judging.store import JudgeError

        raise JudgeError(f"{study.path}: no {study.split} query of {study.dataset} has a human grade yet, so the human "
                         "layer has nothing to tune on; judge a pool first (`workbench judge pool`) or use "
                         "--qrels merged")
    if not qs and getattr(study, "queries", "all") == "filtered":
        raise ConfigError(f"{study.path}: queries = \"filtered\", but no {study.split} query of {study.dataset} carries a "
                          "filter; use a dataset with filters (bilara-filtered, cst4-mn-filtered) or drop the key")
    if not qs:
        raise ConfigError(f"{study.path}: dataset {study.dataset} has no {study.split} queries; choose another split")
    if getattr(study, "abstention", 0.0) and not any(q.split == study.split and q.query_type in
                                                     UNANSWERABLE_QUERY_TYPES for q in cands.ds.queries):
        raise ConfigError(f"{study.path}: objective.abstention weighs empty answers to unanswerable queries, but "
                          f"{study.dataset} has no {study.split} query of type negative; use a dataset with "
                          "negatives = true (gita-negatives, bilara-filtered) or drop objective.abstention")
    missing = [t for t, w in (study.type_weights or {}).items() if w > 0 and t not in types]
    if missing:
        raise ConfigError(f"{study.path}: objective.weights weighs query type(s) {missing} that have no "
                          f"{study.split} queries in {study.dataset} (it has: {', '.join(types)}); drop them")


def _worker(path: str, home: str, storage: str, n_target: int) -> None:  # pragma: no cover - subprocess
    import optuna

    from workbench.tuning.space import load_study

    st = load_study(Path(path))
    cands = Candidates(st, Path(home))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = storage_for(st, Path(home), storage)
    ost = make_study(st, store)
    lock = trial_lock(st, Path(home), storage, store)
    try:
        run_trials(ost, make_objective(st, cands), n_target, lock)
    finally:
        lock.close()


def _run_workers(study: Study, home: Path, storage: str | None, n_target: int, workers: int,
                 log: Callable[[str], None]) -> None:
    import multiprocessing as mp

    if not storage or not storage.startswith("postgres"):
        raise ConfigError("--workers > 1 needs a storage several processes can share: --storage postgresql "
                          "(the workbench's server) or a postgresql:// URL")
    log(f"{workers} worker processes run study {study.name} to {n_target} trials")
    ctx = mp.get_context("spawn")
    # each worker draws from its own random stream: trial numbers are unique (see seeded_sampler); each takes
    # the next trial while the study has fewer than n_target (run_trials), so they share the work between them
    procs = [ctx.Process(target=_worker, args=(str(study.path), str(home), storage, n_target)) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise ConfigError(f"{len(bad)} tuning worker(s) failed (exit codes {bad}); run with --workers 1 to see why")
