"""What a resumed study repairs: trials left running by a process that is gone, and a baseline
trial that never completed (:func:`fail_dead_trials`, :func:`ensure_baseline`).

Each trial records the process that runs it (:func:`this_process`), so a later process can tell
whether it still runs (:func:`process_alive`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from workbench.tuning.space import Study, baseline_params

#: A running trial without a ``process`` record (a study from an older workbench, or a kill in
#: the instant between the trial's creation and its first record) is taken for dead after this long.
UNOWNED_STALE_S = 3600


def this_process() -> dict[str, Any]:
    """Who runs this process's trials, recorded on each as the ``process`` user attribute
    (:func:`workbench._infra.procs.record`: host, pid and an identity that a reused pid does not share)."""
    from workbench._infra import procs

    return procs.record()


def process_alive(owner: Any) -> bool | None:
    """Whether the process recorded as a trial's ``process`` still runs: ``True``/``False`` when this
    machine can tell, ``None`` when it cannot (it ran elsewhere, or the record is missing or malformed)."""
    from workbench._infra import procs

    return {"alive": True, "dead": False}.get(procs.state(owner))


def fail_dead_trials(ost, log: Callable[[str], None] = lambda _m: None, *, locked: bool = False) -> list[int]:
    """Mark failed the trials left running by a process that is gone; returns their numbers.

    A running trial is failed when its recorded process ran on this machine and no longer
    runs (pid and start time), or when it has no process record and started more than
    ``UNOWNED_STALE_S`` ago, or at once when ``locked``: the caller holds the study's trial lock
    (:func:`workbench.tuning.storage.trial_lock`), under which every process creates its trials and records
    itself on them (:func:`workbench.tuning.study.run_trials`), so a trial without a record was left by a
    process killed in between. With PostgreSQL storage Optuna's heartbeats also fail the
    trials of processes gone on other machines (:data:`workbench.tuning.storage.PG_GRACE_S` after their last heartbeat).
    A trial whose process ran on another machine of a journal study is left as it is.
    """
    import warnings

    import optuna
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    running = {t.number for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if not running:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(ost)  # heartbeats (PostgreSQL); nothing for a journal
    dead = [t.number for t in ost.get_trials(deepcopy=False, states=(TrialState.FAIL,)) if t.number in running]
    now = datetime.datetime.now()
    for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get("process")
        unowned_old = owner is None and (locked or (t.datetime_start is not None and
                                                (now - t.datetime_start).total_seconds() > UNOWNED_STALE_S))
        if process_alive(owner) is False or unowned_old:
            try:
                ost.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            except (UpdateFinishedTrialError, ValueError):  # another process failed it first
                continue
            dead.append(t.number)
    dead.sort()
    if dead:
        many = len(dead) > 1
        log(f"study {ost.study_name}: trial{'s' if many else ''} {', '.join(map(str, dead))} "
            f"{'were' if many else 'was'} left running by a process that is gone (killed, or stopped by a "
            f"storage error); marked failed")
    return dead


def ensure_baseline(study: Study, ost, log: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Enqueue the baseline (user attribute ``baseline``) unless a trial of it completed, waits,
    or runs in a live process of this machine; returns the notes of :func:`workbench.tuning.space.baseline_params`
    when it enqueued it (none otherwise).

    So a new study starts with the baseline, and a study whose baseline trial was killed or
    failed runs it again when it resumes. A baseline trial running on another machine may be
    evaluated twice; that costs one trial and changes nothing else.
    """
    from optuna.trial import TrialState

    base = [t for t in ost.get_trials(deepcopy=False) if t.user_attrs.get("baseline")]
    if any(t.state in (TrialState.COMPLETE, TrialState.WAITING) for t in base):
        return []
    if any(t.state == TrialState.RUNNING and process_alive(t.user_attrs.get("process")) for t in base):
        return []
    params, notes = baseline_params(study)
    ost.enqueue_trial(params, user_attrs={"baseline": True})
    if base:
        log(f"study {study.name}: the baseline trial ({', '.join(f'{t.number} {t.state.name.lower()}' for t in base)}) "
            "never completed; the baseline is enqueued again")
    return notes
