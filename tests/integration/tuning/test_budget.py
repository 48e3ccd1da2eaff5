"""``--trials N`` is N complete trials in the study, however many processes share it (issue #28).

Two ``workbench tune … --trials 40`` on one journal ran 41 trials: each process stopped only when its
own callback saw 40 complete trials, while the other's last trial was still running; and each
summary reported its own view (its share, a best read before the other's last trials finished).
Here two real processes share one journal study of the synthetic fixture (no database, no model),
with trials slowed to 0.3 s so that they surely overlap.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import tune_fixture
from fixtures.paths import REPO

from workbench.tuning.space import load_study
from workbench.tuning.study import run_study

ROOT = REPO

# run_study in a fresh process, each trial slowed to 0.3 s; what its result reports goes to a JSON file
WORKER = """
import json, sys, time
sys.path.insert(0, {tests!r})
import tune_fixture
import workbench.tuning.objective as objective
from pathlib import Path
from workbench.tuning.space import load_study
from workbench.tuning.study import run_study
from workbench.tuning.outputs import summary

f = objective.objective_value
def slow(*a, **k):
    time.sleep(0.3)
    return f(*a, **k)
objective.objective_value = slow
folder = Path({folder!r})
st = load_study(folder / "study.toml", known_datasets={{"gita"}})
res = run_study(st, home=folder / "home", storage={storage!r}, trials={trials},
                candidates=tune_fixture.candidates(st, folder / "home"))
ost = res.optuna_study
Path({out!r}).write_text(json.dumps({{
    "trials_run": res.trials_run,
    "complete": sorted(t.number for t in ost.trials if t.state.name == "COMPLETE"),
    "chosen": res.chosen.number, "best": max(t.values[0] for t in ost.trials if t.state.name == "COMPLETE"),
    "summary": summary(res).splitlines()[0]}}))
"""


def _complete(storage: str, st) -> list:
    from workbench.tuning.storage import storage_for
    from workbench.tuning.study import make_study

    ost = make_study(st, storage_for(st, Path("/nonexistent"), storage))
    return [t for t in ost.trials if t.state.name == "COMPLETE"]


def _two_processes(tmp_path, storage: str) -> None:
    name = tmp_path.name[:40]  # one PostgreSQL server holds the studies of every test of a session
    tune_fixture.write(tmp_path, tune_fixture.STUDY.replace('name = "synthetic-study"', f'name = "{name}"'))
    st = load_study(tmp_path / "study.toml", known_datasets={"gita"})
    # the study and its baseline trial first (as the CLI test does), so both processes resume one study
    run_study(st, home=tmp_path / "home", storage=storage, trials=1, candidates=tune_fixture.candidates(st, tmp_path))
    n = 12
    outs = [tmp_path / f"out{i}.json" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER.format(tests=str(ROOT / "tests"), folder=str(tmp_path),
                                                                   storage=storage, trials=n, out=str(o))],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for o in outs]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    done = _complete(storage, st)
    assert len(done) == n  # before the fix: 13 (each process stopped at its own count of 12)
    pids = {t.user_attrs["process"]["pid"] for t in done[1:]}
    assert len(pids) == 2  # both processes ran trials of the one study
    reports = [json.loads(o.read_text()) for o in outs]
    numbers = sorted(t.number for t in done)
    best = max(t.values[0] for t in done)
    for r in reports:
        # each process reports the whole study as storage holds it at the end, not its own share
        assert r["complete"] == numbers
        assert r["best"] == best
        assert r["summary"].startswith(f"study {st.name}: {n} trials on gita (train)")
    assert reports[0]["chosen"] == reports[1]["chosen"]  # one study, one choice
    # what each process ran itself adds up to the trials after the first
    assert reports[0]["trials_run"] + reports[1]["trials_run"] == n - 1
    assert min(r["trials_run"] for r in reports) >= 1


def test_two_processes_on_one_journal_run_exactly_the_trials_asked_and_report_the_whole_study(tmp_path):
    _two_processes(tmp_path, f"journal:{tmp_path / 'journal.log'}")


def test_two_processes_on_one_postgres_study_run_exactly_the_trials_asked(tmp_path, pg_dsn):
    _two_processes(tmp_path, pg_dsn)


def test_a_study_already_at_its_trials_runs_none_and_reports_them(tmp_path):
    tune_fixture.write(tmp_path)
    st = load_study(tmp_path / "study.toml", known_datasets={"gita"})
    storage = f"journal:{tmp_path / 'journal.log'}"
    first = run_study(st, home=tmp_path / "home", storage=storage, trials=5,
                      candidates=tune_fixture.candidates(st, tmp_path))
    again = run_study(st, home=tmp_path / "home", storage=storage, trials=3,
                      candidates=tune_fixture.candidates(st, tmp_path))
    assert (first.trials_run, again.trials_run) == (5, 0)
    assert len(_complete(storage, st)) == 5
    assert again.chosen.number == first.chosen.number


def test_a_trial_running_elsewhere_takes_a_place_and_is_waited_for(tmp_path):
    """Deterministic: a trial another process runs counts toward N (Optuna's MaxTrialsCallback over complete
    trials would run one too many), and the summary waits for it to end."""
    import threading

    from workbench.tuning.objective import make_objective
    from workbench.tuning.storage import storage_for, trial_lock
    from workbench.tuning.study import await_running, make_study, run_trials

    tune_fixture.write(tmp_path)
    st = load_study(tmp_path / "study.toml", known_datasets={"gita"})
    storage = f"journal:{tmp_path / 'journal.log'}"
    cands = tune_fixture.candidates(st, tmp_path)
    run_study(st, home=tmp_path / "home", storage=storage, trials=3, candidates=cands)
    store = storage_for(st, tmp_path, storage)
    ost = make_study(st, store)
    elsewhere = ost.ask()  # running, as if in another process
    lock = trial_lock(st, tmp_path, storage, store)
    try:
        ran = run_trials(ost, make_objective(st, cands), 5, lock)
    finally:
        lock.close()
    assert ran == 1  # 3 complete + 1 running elsewhere + 1 here = 5
    assert [t.state.name for t in ost.trials] == ["COMPLETE"] * 3 + ["RUNNING", "COMPLETE"]
    assert await_running(ost, limit_s=0.3) == [elsewhere.number]  # still running: reported, not waited forever
    threading.Timer(0.5, lambda: ost.tell(elsewhere, 0.5)).start()
    assert await_running(ost, limit_s=30) == []
    assert sum(t.state.name == "COMPLETE" for t in ost.trials) == 5


def test_the_summary_counts_complete_trials_and_names_the_others(tmp_path):
    from optuna.trial import TrialState

    from workbench.tuning.outputs import summary
    from workbench.tuning.storage import storage_for
    from workbench.tuning.study import make_study

    tune_fixture.write(tmp_path)
    st = load_study(tmp_path / "study.toml", known_datasets={"gita"})
    storage = f"journal:{tmp_path / 'journal.log'}"
    run_study(st, home=tmp_path / "home", storage=storage, trials=3, candidates=tune_fixture.candidates(st, tmp_path))
    ost = make_study(st, storage_for(st, tmp_path, storage))
    ost.tell(ost.ask(), state=TrialState.FAIL)  # a failed trial gives its place back: one more is run
    res = run_study(st, home=tmp_path / "home", storage=storage, trials=4, candidates=tune_fixture.candidates(st, tmp_path))
    assert res.trials_run == 1
    assert summary(res).splitlines()[0] == f"study {st.name}: 4 trials on gita (train) (and 1 fail), objective R@1"


def test_a_trial_of_a_process_killed_while_the_survivor_waits_is_run_again_by_the_survivor(tmp_path):
    """Issue #41: of two ``tune`` processes on one study, one killed mid-trial left the survivor one trial
    short: its running trial took a place, the survivor stopped at N counted and then saw it fail."""
    import subprocess as sp

    from workbench._infra import procs
    from workbench.tuning.storage import storage_for
    from workbench.tuning.study import make_study

    tune_fixture.write(tmp_path)
    st = load_study(tmp_path / "study.toml", known_datasets={"gita"})
    storage = f"journal:{tmp_path / 'journal.log'}"
    cands = tune_fixture.candidates(st, tmp_path)
    run_study(st, home=tmp_path / "home", storage=storage, trials=3, candidates=cands)
    ost = make_study(st, storage_for(st, tmp_path, storage))
    other = sp.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        elsewhere = ost.ask()  # the other process's trial, running
        elsewhere.set_user_attr("process", procs.record(other.pid))

        def log(msg: str) -> None:  # the survivor waits for the other's trial: that process is killed now
            if "waiting for trial" in msg and other.poll() is None:
                other.kill()
                other.wait()

        res = run_study(st, home=tmp_path / "home", storage=storage, trials=5, candidates=cands, log=log)
    finally:
        other.kill()
        other.wait()
    states = [t.state.name for t in res.optuna_study.trials]
    assert states[elsewhere.number] == "FAIL"
    assert states.count("COMPLETE") == 5 and res.trials_run == 2  # before the fix: 4 complete, 1 run
