"""Tuning studies survive faults (issue #8): a cut journal record, a journal damaged in the
middle, a full disk, a read-only home, a SIGKILL during the baseline trial, two processes on
one study.

The CLI tests run ``python -m workbench.cli tune`` in subprocesses on a copy of a small home
(the gita dataset, two reference lanes: no database, no model), with the real Optuna journal;
faults come from :mod:`tests.faults` (kills at named functions, a tmpfs that fills up, a
read-only bind mount). The PostgreSQL variants use the session's embedded server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import faults
import pytest
import tune_fixture

from workbench.tuning.space import baseline_params, load_study
from workbench.tuning.study import run_study

EXPERIMENT = """
name = "faults"
datasets = ["gita"]
measures = ["R@10"]
depth = 20
[lanes.ref]
kind = "reference"
[lanes.ref2]
kind = "reference"
[configs.base]
lanes = ["ref", "ref2"]
fusion = "rrf"
k = 60
"""

STUDY = """
name = "fault-study"
experiment = "experiment.toml"
dataset = "gita"
lanes = ["ref", "ref2"]
baseline = "base"
trials = 10
seed = 11
[objective]
measure = "R@10"
[space]
k = { low = 1, high = 100 }
[space.weights]
ref = { low = 0.0, high = 1.0 }
ref2 = { low = 0.0, high = 1.0 }
"""

NAME = "fault-study"

# a `workbench` entry whose trials take 0.2 s each, so that two processes surely overlap
SLOW_CLI = (
    "import sys, time\n"
    "import workbench.tuning.objective as t\n"
    "f = t.objective_value\n"
    "def slow(*a, **k):\n"
    "    time.sleep(0.2)\n"
    "    return f(*a, **k)\n"
    "t.objective_value = slow\n"
    "from workbench.cli import main\n"
    "sys.argv = ['workbench', *sys.argv[1:]]\n"
    "main()\n"
)


# ---------------------------------------------------------------- helpers

@pytest.fixture(scope="module")
def template(data_dir, tmp_path_factory):
    """A folder with the study files and a home where gita is built and both lanes' candidates are cached."""
    root = tmp_path_factory.mktemp("tune-faults")
    (root / "experiment.toml").write_text(EXPERIMENT)
    (root / "study.toml").write_text(STUDY)
    home = root / "home"
    r = faults.run(["tune", str(root / "study.toml"), "--storage", "memory", "--trials", "2", "--no-track"],
                   env=_env(home, data_dir), timeout=300)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(home / "studies")
    return root


def _env(home: Path, data: Path | None = None, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env["WORKBENCH_HOME"] = str(home)
    if data is not None:
        env["WORKBENCH_DATA"] = str(data)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _setup(tmp_path: Path, template: Path, study_text: str = STUDY) -> tuple[Path, Path]:
    """A private copy of the template: (home, study file)."""
    shutil.copytree(template, tmp_path / "w")
    (tmp_path / "w" / "study.toml").write_text(study_text)
    return tmp_path / "w" / "home", tmp_path / "w" / "study.toml"


def _tune(study: Path, home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return faults.run(["tune", str(study), "--no-track", *args], env=env or _env(home), timeout=300)


def _journal(home: Path, name: str = NAME) -> Path:
    return home / "studies" / name / "journal.log"


def _trials(storage, name: str = NAME):
    """The study's trials, read with plain Optuna (no repair): a journal path or a database URL."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if isinstance(storage, Path):
        storage = optuna.storages.JournalStorage(JournalFileBackend(str(storage)))
    else:
        storage = "postgresql+psycopg://" + storage.split("://", 1)[1]
    return optuna.load_study(study_name=name, storage=storage).trials


def _complete(trials) -> list:
    return [t for t in trials if t.state.name == "COMPLETE"]


def _one_error(r: subprocess.CompletedProcess) -> str:
    """The single ``error:`` line of a failed command (and no traceback)."""
    assert "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def _lines_are_json(path: Path) -> int:
    data = path.read_bytes()
    assert data.endswith(b"\n"), data[-200:]
    lines = data.splitlines()
    for ln in lines:
        json.loads(ln)
    return len(lines)


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


# ---------------------------------------------------------------- 1. a cut last record; damage in the middle

def test_a_cut_last_journal_record_is_dropped_and_the_study_resumes(tmp_path, template):
    home, study = _setup(tmp_path, template)
    assert _tune(study, home, "--trials", "6").returncode == 0
    journal = _journal(home)
    before = _trials(journal)
    assert len(_complete(before)) == 6
    os.truncate(journal, journal.stat().st_size - 40)  # `truncate -s -40`: the last record loses its end
    data = journal.read_bytes()
    cut = len(data) - (data.rindex(b"\n") + 1)

    r = _tune(study, home, "--trials", "10")
    assert r.returncode == 0, r.stderr
    assert (f"study journal {journal}: dropped a cut last record ({cut} bytes) left by an interrupted write; "
            "the complete trials are kept") in r.stderr
    assert [f.read_bytes() for f in journal.parent.glob("journal.log.cut-*")] == [data[len(data) - cut:]]
    _lines_are_json(journal)
    after = _trials(journal)
    # the cut record was trial 5's completion: trials 0-4 are kept as they were, trial 5 was left
    # running by a process that is gone and is marked failed, and 5 new trials complete the 10
    assert [t.params for t in after[:5]] == [t.params for t in before[:5]]
    assert [t.state.name for t in after[:6]] == ["COMPLETE"] * 5 + ["FAIL"]
    assert len(_complete(after)) == 10
    assert "study fault-study: trial 5 was left running by a process that is gone" in r.stderr

    out = tmp_path / "prod.json"
    e = faults.run(["export", str(study), "-o", str(out)], env=_env(home), timeout=300)
    assert e.returncode == 0, e.stderr
    assert json.loads(out.read_text())["provenance"]["study"] == NAME


def test_a_journal_damaged_in_the_middle_is_one_clear_error(tmp_path, template):
    home, study = _setup(tmp_path, template)
    assert _tune(study, home, "--trials", "3").returncode == 0
    journal = _journal(home)
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4][:30] + b"\n"  # a record cut in the middle of the file, not at its end
    journal.write_bytes(b"".join(lines))
    damaged = journal.read_bytes()

    for args in (["tune", str(study), "--no-track", "--trials", "5"],
                 ["export", str(study), "-o", str(tmp_path / "prod.json")]):
        r = faults.run(args, env=_env(home), timeout=300)
        assert r.returncode == 2, r.stderr
        line = _one_error(r)
        assert "JSONDecodeError" not in r.stderr
        assert f"study journal {journal} is damaged at line 5 of {len(lines)}" in line
        assert "move it aside" in line and "--storage" in line
        assert journal.read_bytes() == damaged  # nothing was truncated or appended
    assert not (tmp_path / "prod.json").exists()


# ---------------------------------------------------------------- 2. full disk, read-only home, atomic outputs

def test_a_full_disk_during_tune_is_one_line_and_the_trials_are_kept(tmp_path, template):
    home, study = _setup(tmp_path, template)
    studies = home / "studies"
    with faults.small_disk(studies, "16m"):
        assert _tune(study, home, "--trials", "3").returncode == 0
        journal = _journal(home)
        faults.fill(studies, leave=8192)
        r = _tune(study, home, "--trials", "400")
        assert r.returncode == 2, r.stderr
        line = _one_error(r)
        assert line.startswith(f"error: disk full: cannot write {journal} (")
        assert "needed" in line and "WORKBENCH_HOME" in line
        _lines_are_json(journal)  # the failed append left no cut record
        kept = len(_complete(_trials(journal)))
        assert kept > 3
        (studies / ".filler").unlink()
        r = _tune(study, home, "--trials", str(kept + 3))
        assert r.returncode == 0, r.stderr
        assert "dropped a cut last record" not in r.stderr
        assert len(_complete(_trials(journal))) == kept + 3


def test_a_full_disk_never_leaves_half_a_report(tmp_path, template):
    home, study = _setup(tmp_path, template)
    latest = home / "studies" / NAME / "latest"
    with faults.small_disk(latest, "16m"):  # the outputs on a disk of their own; the journal has room
        assert _tune(study, home, "--trials", "3").returncode == 0
        old = {p.name: p.read_bytes() for p in latest.iterdir()}
        assert set(old) == {"report.json", "export.json", "trials.csv", "plots.html"}
        faults.fill(latest, leave=0)
        r = _tune(study, home, "--trials", "40")  # more trials: every output grows
        assert r.returncode == 2, r.stderr
        line = _one_error(r)
        assert line.startswith(f"error: disk full: cannot write {latest}/")
        (latest / ".filler").unlink()
        assert {p.name: p.read_bytes() for p in latest.iterdir()} == old  # each file whole, none half-written
    assert len(_complete(_trials(_journal(home)))) == 40  # the trials are kept all the same


def test_export_to_a_full_disk_keeps_the_previous_file(tmp_path, template):
    home, study = _setup(tmp_path, template)
    assert _tune(study, home, "--trials", "3").returncode == 0
    folder = tmp_path / "out"
    with faults.small_disk(folder, "1m"):
        out = folder / "prod.json"
        old = f'{{"fusion": "rrf", "rrf_k": 60, "provenance": {{"study": "{NAME}"}}}}\n'.encode()  # this study's
        # export of before (smaller than a new one), so no --force is needed to replace it
        out.write_bytes(old)
        faults.fill(folder, leave=0)
        r = faults.run(["export", str(study), "-o", str(out)], env=_env(home), timeout=300)
        assert r.returncode == 2, r.stderr
        assert _one_error(r).startswith(f"error: disk full: cannot write {out} (")
        assert out.read_bytes() == old
        assert not [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]
        (folder / ".filler").unlink()
        r = faults.run(["export", str(study), "-o", str(out)], env=_env(home), timeout=300)
        assert r.returncode == 0, r.stderr
        assert json.loads(out.read_text())["provenance"]["study"] == NAME


def test_a_read_only_home_is_one_clear_error(tmp_path, template):
    home, study = _setup(tmp_path, template)
    assert _tune(study, home, "--trials", "2").returncode == 0
    fresh = study.parent / "fresh.toml"
    fresh.write_text(STUDY.replace(f'name = "{NAME}"', 'name = "fresh-study"'))
    before = _journal(home).read_bytes()
    with faults.read_only(home):
        r = _tune(study, home, "--trials", "4")
        assert r.returncode == 2, r.stderr
        line = _one_error(r)
        assert f"cannot write in {home / 'studies' / NAME}: the file system is read-only" in line
        assert "WORKBENCH_HOME" in line and "--storage memory" in line
        r = _tune(fresh, home, "--trials", "4")
        assert r.returncode == 2, r.stderr
        line = _one_error(r)
        assert f"cannot create {home / 'studies' / 'fresh-study'}: the file system is read-only" in line
        assert "WORKBENCH_HOME" in line and "--storage memory" in line
        # the way out the message gives works: a study in memory, its report not kept
        r = _tune(fresh, home, "--trials", "4", "--storage", "memory")
        assert r.returncode == 0, r.stderr
        assert "study fresh-study: 4 trials on gita" in r.stdout
        assert f"warning: the report was not written: cannot create {home / 'studies' / 'fresh-study'}" in r.stderr
    assert _journal(home).read_bytes() == before


# ---------------------------------------------------------------- 3. a SIGKILL during the baseline trial

def _killed_baseline_resumes(tmp_path, template, storage_args: list[str], storage) -> None:
    home, study = _setup(tmp_path, template, STUDY.replace(f'name = "{NAME}"', f'name = "{tmp_path.name[:40]}"'))
    name = tmp_path.name[:40]
    env = faults.kill_at("workbench.tuning.objective:objective_value", 1, env=_env(home))  # the first objective: trial 0
    r = _tune(study, home, "--trials", "5", *storage_args, env=env)
    assert r.returncode == -9, r.stderr
    store = _journal(home, name) if storage is None else storage
    killed = _trials(store, name)
    assert [(t.number, t.state.name, t.user_attrs.get("baseline")) for t in killed] == [(0, "RUNNING", True)]

    r = _tune(study, home, "--trials", "5", *storage_args)
    assert r.returncode == 0, r.stderr
    assert f"study {name}: trial 0 was left running by a process that is gone" in r.stderr
    assert "the baseline is enqueued again" in r.stderr
    after = _trials(store, name)
    assert after[0].state.name == "FAIL"
    base = [t for t in after if t.user_attrs.get("baseline") and t.state.name == "COMPLETE"]
    st = load_study(study)
    assert len(base) == 1 and base[0].number == 1 and base[0].params == baseline_params(st)[0]
    assert len(_complete(after)) == 5


def test_a_baseline_trial_killed_mid_run_is_run_again_on_resume(tmp_path, template):
    _killed_baseline_resumes(tmp_path, template, [], None)


def test_a_baseline_trial_killed_mid_run_is_run_again_on_resume_in_postgres(tmp_path, template, pg_dsn):
    _killed_baseline_resumes(tmp_path, template, ["--storage", pg_dsn], pg_dsn)


# ---------------------------------------------------------------- 4. two processes, one study; a resumed study

def _two_processes_draw_distinct_points(tmp_path, template, storage_args: list[str], storage) -> None:
    name = tmp_path.name[:40]
    home, study = _setup(tmp_path, template, STUDY.replace(f'name = "{NAME}"', f'name = "{name}"'))
    assert _tune(study, home, "--trials", "1", *storage_args).returncode == 0  # the study and its baseline
    cmd = [sys.executable, "-c", SLOW_CLI, "tune", str(study), "--no-track", "--trials", "40", *storage_args]
    procs = [subprocess.Popen(cmd, env=_env(home), cwd=faults.REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(out)
    trials = _trials(_journal(home, name) if storage is None else storage, name)
    done = _complete(trials)
    assert len(done) == 40  # --trials is the study's total (#28: it was 41, each process counting its own)
    for out in outs:  # each summary reports the whole study
        assert f"study {name}: 40 trials on gita" in out, out
    keys = [_key(t.params) for t in done]
    assert len(set(keys)) == len(keys), [t.number for t in done if keys.count(_key(t.params)) > 1]
    # both processes ran trials, interleaved in one study
    assert len({t.user_attrs["process"]["pid"] for t in done[1:]}) == 2


def test_two_processes_on_one_journal_study_draw_distinct_points(tmp_path, template):
    _two_processes_draw_distinct_points(tmp_path, template, [], None)


def test_two_processes_on_one_postgres_study_draw_distinct_points(tmp_path, template, pg_dsn):
    _two_processes_draw_distinct_points(tmp_path, template, ["--storage", pg_dsn], pg_dsn)


def test_a_resumed_study_never_repeats_its_draws(tmp_path):
    st = load_study(tune_fixture.write(tmp_path), known_datasets={"gita"})
    journal = f"journal:{tmp_path / 'j.log'}"
    run_study(st, home=tmp_path / "home", storage=journal, trials=4, candidates=tune_fixture.candidates(st, tmp_path))
    res = run_study(st, home=tmp_path / "home", storage=journal, trials=9,
                    candidates=tune_fixture.candidates(st, tmp_path))
    keys = [_key(t.params) for t in res.optuna_study.trials]
    assert len(keys) == 9 and len(set(keys)) == 9


def test_a_single_process_study_draws_what_its_seed_always_drew(tmp_path):
    """Per-process seeding changed nothing for one uninterrupted process: trial for trial, the
    same points as before (so published study results still reproduce)."""
    st = load_study(tune_fixture.write(tmp_path), known_datasets={"gita"})
    res = run_study(st, home=tmp_path / "home", storage="memory", trials=12,
                    candidates=tune_fixture.candidates(st, tmp_path))
    got = {t.number: (t.params["k"], round(t.params["weights.good"], 6), round(t.params["weights.bad"], 6))
           for t in res.optuna_study.trials}
    assert got[0] == (60, 1.0, 1.0)
    assert got[1] == (8, 0.779919, 0.438409) and got[2] == (73, 0.97799, 0.538496)
    assert got[3] == (51, 0.072051, 0.268439)
    assert got[10] == (31, 0.70948, 0.243365) and got[11] == (6, 0.583371, 0.599205)  # TPE after 10 startup trials
    text = tune_fixture.STUDY.replace('measure = "R@1"', 'measure = "R@1"\nlatency = true') + \
        "[space.lanes]\nbad = [true, false]\n"
    st2 = load_study(tune_fixture.write(tmp_path / "nsga", text), known_datasets={"gita"})
    res2 = run_study(st2, home=tmp_path / "home", storage="memory", trials=6,
                     candidates=tune_fixture.candidates(st2, tmp_path))
    t = res2.optuna_study.trials
    assert (t[1].params["k"], round(t[1].params["weights.good"], 6)) == (8, 0.723465)
    assert (t[4].params["k"], t[4].params["lanes.bad"]) == (91, False)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_trial_of_a_process_gone_on_another_machine_fails_by_its_heartbeat_in_postgres(tmp_path, pg_dsn,
                                                                                         monkeypatch):
    """Where the pid cannot be checked (another machine), PostgreSQL's heartbeats decide: a
    trial without one for the grace period is failed, a trial whose heartbeat is fresh is not."""
    from optuna.trial import TrialState

    from workbench.tuning import recovery, storage, study

    monkeypatch.setattr(storage, "PG_HEARTBEAT_S", 1)
    monkeypatch.setattr(storage, "PG_GRACE_S", 2)
    text = tune_fixture.STUDY.replace('name = "synthetic-study"', f'name = "{tmp_path.name[:40]}"')
    st = load_study(tune_fixture.write(tmp_path, text), known_datasets={"gita"})
    store = storage.storage_for(st, tmp_path, pg_dsn)
    ost = study.make_study(st, store)
    elsewhere = {"host": "another-machine", "pid": 1, "process": "linux:x:y:1:1"}
    gone, live = ost.ask(), ost.ask()
    for t in (gone, live):
        t.set_user_attr("process", elsewhere)
        store.record_heartbeat(t._trial_id)
    time.sleep(3.5)
    store.record_heartbeat(live._trial_id)
    assert recovery.fail_dead_trials(ost) == [gone.number]
    states = {t.number: t.state for t in ost.get_trials()}
    assert states == {gone.number: TrialState.FAIL, live.number: TrialState.RUNNING}
    assert recovery.process_alive(elsewhere) is None  # this machine cannot check another machine's pid


def test_which_running_trials_count_as_left_by_a_dead_process(tmp_path, monkeypatch):
    from workbench.tuning import recovery, storage, study

    me = recovery.this_process()
    assert me["pid"] == os.getpid() and recovery.process_alive(me) is True
    other_start = me["process"].rsplit(":", 1)[0] + ":0"
    assert recovery.process_alive({**me, "process": other_start}) is False  # the pid now belongs to another process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert recovery.process_alive({**me, "pid": child.pid}) is False  # exited
    assert recovery.process_alive(None) is None and recovery.process_alive({"pid": "1"}) is None

    st = load_study(tune_fixture.write(tmp_path), known_datasets={"gita"})
    ost = study.make_study(st, storage.storage_for(st, tmp_path, f"journal:{tmp_path / 'j.log'}"))
    mine, dead, unowned = ost.ask(), ost.ask(), ost.ask()
    mine.set_user_attr("process", me)
    dead.set_user_attr("process", {**me, "pid": child.pid})
    assert recovery.fail_dead_trials(ost) == [dead.number]  # an unowned trial is given UNOWNED_STALE_S
    monkeypatch.setattr(recovery, "UNOWNED_STALE_S", 0)
    time.sleep(0.01)
    assert recovery.fail_dead_trials(ost) == [unowned.number]
    assert [t.state.name for t in ost.get_trials()] == ["RUNNING", "FAIL", "FAIL"]


def test_a_trial_a_killed_process_created_but_never_recorded_is_failed_under_the_lock(tmp_path):
    # A process killed between creating a trial and recording itself on it (the lock is still held then)
    # leaves a running trial with no owner: outside the lock it may be a live process's, under it it is not.
    from workbench.tuning import recovery, storage, study

    st = load_study(tune_fixture.write(tmp_path), known_datasets={"gita"})
    journal = f"journal:{tmp_path / 'j.log'}"
    ost = study.make_study(st, storage.storage_for(st, tmp_path, journal))
    orphan = ost.ask()
    assert recovery.fail_dead_trials(ost) == []
    res = run_study(st, home=tmp_path / "home", storage=journal, trials=4,
                    candidates=tune_fixture.candidates(st, tmp_path))
    states = [t.state.name for t in res.optuna_study.trials]
    assert states[orphan.number] == "FAIL" and states.count("COMPLETE") == 4 and res.trials_run == 4
    assert all(t.user_attrs["process"] == recovery.this_process() for t in res.optuna_study.trials
               if t.state.name == "COMPLETE")


_HOLD_JOURNAL_LOCK = """
import sys, time
from pathlib import Path
from workbench.tuning import storage
lock = storage._journal_lock_type()(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_process_killed_while_holding_the_journal_lock_costs_the_next_nothing(tmp_path):
    """Optuna's own lock (a symbolic link) outlives a killed holder by 30 s; the workbench's is an flock."""
    from workbench.tuning import storage

    journal = tmp_path / "journal.log"
    journal.write_bytes(b"")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_JOURNAL_LOCK, str(journal)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(faults.REPO)})
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    t0 = time.perf_counter()
    journal_storage = storage.open_journal(journal)
    assert time.perf_counter() - t0 < 2.0
    assert journal_storage is not None and oct((tmp_path / "journal.log.flock").stat().st_mode & 0o777) == "0o600"


def test_export_from_a_read_only_home_names_the_home_not_the_out_file(tmp_path, template):
    """Issue #28: ``export`` reads the study; a read-only home must not fail it, or the error names the home."""
    home, study = _setup(tmp_path, template)
    assert _tune(study, home, "--trials", "3").returncode == 0
    out = tmp_path / "writable" / "prod.json"
    out.parent.mkdir()
    with faults.read_only(home):
        r = faults.run(["export", str(study), "-o", str(out)], env=_env(home), timeout=300)
    if r.returncode == 0:  # best: export needs nothing written in the home
        assert json.loads(out.read_text())["provenance"]["study"] == NAME
    else:
        line = _one_error(r)
        assert f"cannot write {out}" not in line
        assert str(home) in line and "read-only" in line and "WORKBENCH_HOME" in line
