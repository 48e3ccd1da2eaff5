"""Tuning studies: the search space fails at load, a study finds a known optimum, a killed
study resumes, fusion-only trials need no database, results are honest, export has provenance."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import tune_fixture
from fixtures.paths import REPO

from workbench.errors import ConfigError
from workbench.eval.stats import paired_test
from workbench.tuning.objective import setting_from
from workbench.tuning.outputs import summary
from workbench.tuning.space import baseline_params, finite_settings, load_study, setting_key
from workbench.tuning.storage import storage_for
from workbench.tuning.study import make_study, run_study

ROOT = REPO


def _study(tmp_path, text=tune_fixture.STUDY):
    return load_study(tune_fixture.write(tmp_path, text), known_datasets={"gita"})


# ---------------------------------------------------------------- the space fails at load

@pytest.mark.parametrize("edit, msg", [
    (("k = { low = 1, high = 100 }", "k = { low = 100, high = 100 }"), "is an empty range: low 100 must be below high 100"),
    (("k = { low = 1, high = 100 }", "k = { low = 0, high = 100, log = true }"), "log range, so low must be > 0"),
    (("k = { low = 1, high = 100 }", "k = []"), "is an empty list"),
    (("good = { low = 0.0, high = 1.0 }", "vector = { low = 0.0, high = 1.0 }"),
     r"space.weights names lane\(s\) \['vector'\] the study does not use"),
    (("[space.weights]", "[space.engine.good]\nef_search = [10, 20]\n[space.weights]"),
     "is not a tunable parameter of the reference lane"),
    (("[space]", "[space]\nfusion = [\"rrf\", \"borda\"]"), "must list fusion methods"),
    (("[space]", "[space]\ntop_k = [0, 10]"), "must be integers >= 1"),
    (("[space]", "[space]\ndepth = { good = [10, 50] }"), "goes beyond the experiment's depth 20"),
    (("measure = \"R@1\"", "measure = \"AP@100\""), "is not computed in memory"),
    (("measure = \"R@1\"", "measure = \"R@1\"\nweights = { verse = 1.0 }"), "names unknown query type"),
    (("baseline = \"equal\"", "baseline = \"nope\""), "must name a config of experiment.toml"),
    (("lanes = [\"good\", \"bad\"]", "lanes = [\"good\"]"), "must include the baseline's lanes"),
    (("trials = 30", "trials = 0"), "trials must be an integer >= 1"),
    (("[space]", "[space]\nbogus = 1"), "has unknown key"),
])
def test_bad_search_spaces_fail_at_load(tmp_path, edit, msg):
    text = tune_fixture.STUDY.replace(*edit)
    assert text != tune_fixture.STUDY
    with pytest.raises(ConfigError, match=msg):
        _study(tmp_path, text)


def test_an_engine_parameter_value_the_lane_refuses_fails_at_load(tmp_path):
    exp = tune_fixture.EXPERIMENT + '[embedders.h]\nkind = "hash"\n[lanes.vec]\nkind = "pgvector"\nembedder = "h"\n'
    study = tune_fixture.STUDY.replace('lanes = ["good", "bad"]', 'lanes = ["good", "bad", "vec"]') + \
        "[space.lanes]\nvec = [true, false]\n[space.engine.vec]\nef_search = [40, 0]\niterative_scan = [\"off\"]\n"
    tune_fixture.write(tmp_path, study)
    (tmp_path / "experiment.toml").write_text(exp)
    with pytest.raises(ConfigError, match=r"space.engine.vec.ef_search value 0 must be an integer in 1..1000"):
        load_study(tmp_path / "study.toml", known_datasets={"gita"})


# ---------------------------------------------------------------- a known optimum

def test_a_study_finds_the_known_optimum_and_keeps_the_baseline_as_trial_0(tmp_path):
    st = _study(tmp_path)
    cands = tune_fixture.candidates(st, tmp_path / "home")
    res = run_study(st, home=tmp_path / "home", storage="memory", candidates=cands)
    trials = res.optuna_study.trials
    assert trials[0].user_attrs.get("baseline") is True
    assert trials[0].params == {"k": 60, "weights.good": 1.0, "weights.bad": 1.0}
    # the equal-weight baseline: bad's unjudged top document wins every tie by doc_id
    assert trials[0].values[0] == res.baseline_value == 0.0
    assert res.chosen.values[0] == pytest.approx(1.0)
    assert res.chosen_params["weights.good"] > res.chosen_params["weights.bad"]
    test = res.evaluation.test.measures["R@1"]
    assert test.chosen == 1.0 and test.baseline == 0.0 and test.mean_diff == 1.0
    assert test.p_value == pytest.approx(2 / 1024, abs=1e-12)  # 10 test queries: exact sign-flip p-value


def test_the_same_seed_gives_the_same_study(tmp_path):
    st = _study(tmp_path)
    a = run_study(st, home=tmp_path / "h1", storage="memory", candidates=tune_fixture.candidates(st, tmp_path))
    b = run_study(st, home=tmp_path / "h2", storage="memory", candidates=tune_fixture.candidates(st, tmp_path))
    assert [t.params for t in a.optuna_study.trials] == [t.params for t in b.optuna_study.trials]


def test_baseline_projection_notes_values_outside_the_space(tmp_path):
    st = _study(tmp_path, tune_fixture.STUDY.replace("k = { low = 1, high = 100 }", "k = { low = 1, high = 30 }"))
    params, notes = baseline_params(st)
    assert params["k"] == 30 and any("k = 60.0 lies outside [1.0, 30.0]" in n for n in notes)


# ---------------------------------------------------------------- resuming a killed study

def test_a_killed_study_resumes_where_it_stopped(tmp_path):
    tune_fixture.write(tmp_path)
    journal = tmp_path / "journal.log"
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import tune_fixture; "
            f"tune_fixture.run({str(tmp_path)!r}, 100000, {f'journal:{journal}'!r})")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    st = load_study(tmp_path / "study.toml", known_datasets={"gita"})
    deadline = time.monotonic() + 120
    complete = 0
    while time.monotonic() < deadline and complete < 8:
        time.sleep(0.5)
        if journal.exists():
            ost = make_study(st, storage_for(st, tmp_path, f"journal:{journal}"))
            complete = sum(t.state.name == "COMPLETE" for t in ost.trials)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = make_study(st, storage_for(st, tmp_path, f"journal:{journal}")).trials
    n_before = sum(t.state.name == "COMPLETE" for t in before)
    assert n_before >= 8
    res = run_study(st, home=tmp_path / "home", storage=f"journal:{journal}", trials=n_before + 5,
                    candidates=tune_fixture.candidates(st, tmp_path))
    after = res.optuna_study.trials
    assert sum(t.state.name == "COMPLETE" for t in after) == n_before + 5
    assert [t.params for t in after[:n_before]] == [t.params for t in before[:n_before]]
    assert sum(1 for t in after if t.user_attrs.get("baseline")) == 1  # trial 0 is not enqueued again
    assert res.trials_run == 5


# ---------------------------------------------------------------- statistics

def test_paired_test_on_hand_made_differences():
    import numpy as np

    a = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    b = np.zeros(10)
    r = paired_test(a, b, seed=1)
    # all 2^10 sign flips: only the observed one (and its mirror) reach |mean| = 1, so p = 2/1024
    assert r["mean_diff"] == 1.0 and r["p_value"] == pytest.approx(2 / 1024, abs=1e-12)
    same = paired_test(a, a, seed=1)
    assert same["mean_diff"] == 0.0 and same["p_value"] == 1.0


def test_setting_from_switches_lanes_off_and_keeps_the_baseline_elsewhere(tmp_path):
    text = tune_fixture.STUDY + "[space.lanes]\nbad = [true, false]\n"
    st = _study(tmp_path, text)
    s = setting_from(st, {"lanes.bad": False, "weights.good": 0.3})
    assert s.lanes == ("good",) and s.weights == {"good": 0.3} and s.k == 60.0 and s.method == "rrf"


def test_latency_as_a_second_objective_gives_a_pareto_front(tmp_path):
    text = tune_fixture.STUDY.replace('measure = "R@1"', 'measure = "R@1"\nlatency = true') + \
        "[space.lanes]\nbad = [true, false]\n"
    st = _study(tmp_path, text)
    res = run_study(st, home=tmp_path / "home", storage="memory", candidates=tune_fixture.candidates(st, tmp_path))
    front = res.optuna_study.best_trials
    assert front and all(len(t.values) == 2 for t in front)
    # the synthetic latencies: good costs 1 ms, bad 2 ms per query; good alone is both best and fastest
    assert res.chosen in front and res.chosen.values[0] == 1.0 and res.chosen.values[1] == pytest.approx(1.0)
    assert res.chosen_setting.lanes == ("good",)
    from workbench.tuning.outputs import summary

    text = summary(res)
    assert "objective R@1 and p95 latency (ms)" in text
    assert f"= 1.0000 (p95 1.0 ms, from the Pareto front of {len(front)})" in text


def test_the_embedding_model_is_an_engine_parameter_checked_at_load(tmp_path):
    exp = tune_fixture.EXPERIMENT + ('[embedders.h]\nkind = "hash"\n[embedders.h2]\nkind = "hash"\ndim = 16\n'
                                     '[lanes.vec]\nkind = "pgvector"\nembedder = "h"\n')
    base = tune_fixture.STUDY.replace('lanes = ["good", "bad"]', 'lanes = ["good", "bad", "vec"]')
    base += "[space.lanes]\nvec = [true, false]\n"
    tune_fixture.write(tmp_path, base + '[space.engine.vec]\nembedder = ["h", "h2"]\n')
    (tmp_path / "experiment.toml").write_text(exp)
    st = load_study(tmp_path / "study.toml", known_datasets={"gita"})
    assert st.space["engine"]["vec"]["embedder"] == ("h", "h2")
    # an engine parameter the lane leaves at its default starts the baseline at that default (max_scan_tuples 20000)
    tune_fixture.write(tmp_path, base + '[space.engine.vec]\nmax_scan_tuples = [1000, 20000]\n')
    (tmp_path / "experiment.toml").write_text(exp)
    params, notes = baseline_params(load_study(tmp_path / "study.toml", known_datasets={"gita"}))
    assert params["engine.vec.max_scan_tuples"] == 20000 and not any("max_scan_tuples" in n for n in notes)
    (tmp_path / "study.toml").write_text(base + '[space.engine.vec]\nembedder = ["h", "minilm"]\n')
    with pytest.raises(ConfigError, match=r"names embedder\(s\) \['minilm'\] the experiment does not declare"):
        load_study(tmp_path / "study.toml", known_datasets={"gita"})


# ---------------------------------------------------------------- more bad input (an adversarial pass)

@pytest.mark.parametrize("edit, msg", [
    (('name = "synthetic-study"', 'name = ".."'), "must be letters, digits"),
    (('lanes = ["good", "bad"]', 'lanes = ["good", "good", "bad"]'), "lists a lane twice"),
    (('seed = 7', 'seed = 7\nsplit = "test"'), "test is held out"),
    (('measure = "R@1"', 'measure = "R@1000"'), "deeper than the 20 candidates"),
    (('measure = "R@1"', 'measure = "R@1"\nweights = { term = inf }'), "must be numbers >= 0"),
    (('good = { low = 0.0, high = 1.0 }', 'good = [0.0, inf]'), "must list finite numbers"),
    (('k = { low = 1, high = 100 }', 'k = [60, 60.0]'), "lists a value twice"),
    (("[space]", "[space]\nlanes = { good = [false], bad = [false] }"), "no trial can switch on"),
])
def test_more_bad_studies_fail_at_load(tmp_path, edit, msg):
    text = tune_fixture.STUDY.replace(*edit)
    assert text != tune_fixture.STUDY
    with pytest.raises(ConfigError, match=msg):
        _study(tmp_path, text)


def test_a_folder_is_not_a_study_or_an_experiment(tmp_path):
    with pytest.raises(ConfigError, match="is a folder"):
        load_study(tmp_path)
    tune_fixture.write(tmp_path, tune_fixture.STUDY.replace('experiment = "experiment.toml"', 'experiment = "."'))
    with pytest.raises(ConfigError, match="is a folder"):
        load_study(tmp_path / "study.toml", known_datasets={"gita"})


@pytest.mark.parametrize("spec, msg", [
    ("journal:", "needs a file path"), ("journal:/", "is a folder"),
    ("journal:/nonexistent-dir/x/j.log", "does not exist"), ("mysql://x", "must be memory, journal"),
    ("postgresql://nobody@127.0.0.1:1/db", "cannot use PostgreSQL study storage"),
])
def test_bad_storage_specs_are_config_errors(tmp_path, spec, msg):
    st = _study(tmp_path)
    with pytest.raises(ConfigError, match=msg):
        storage_for(st, tmp_path, spec)


def test_a_stored_study_is_not_resumed_for_another_definition(tmp_path):
    journal = f"journal:{tmp_path / 'j.log'}"
    st = _study(tmp_path)
    run_study(st, home=tmp_path / "home", storage=journal, trials=4, candidates=tune_fixture.candidates(st, tmp_path))
    other = _study(tmp_path, tune_fixture.STUDY.replace("k = { low = 1, high = 100 }", "k = { low = 1, high = 50 }"))
    with pytest.raises(ConfigError, match=r"was made for another definition \(differs: space\)"):
        run_study(other, home=tmp_path / "home", storage=journal, trials=6,
                  candidates=tune_fixture.candidates(other, tmp_path))


def test_objective_weights_on_a_type_without_queries_in_the_split(tmp_path):
    st = _study(tmp_path, tune_fixture.STUDY.replace('measure = "R@1"', 'measure = "R@1"\nweights = { paraphrase = 1.0 }'))
    with pytest.raises(ConfigError, match=r"weighs query type\(s\) \['paraphrase'\] that have no train queries"):
        run_study(st, home=tmp_path / "home", storage="memory", candidates=tune_fixture.candidates(st, tmp_path))


def test_workers_need_shared_storage_before_anything_runs(tmp_path):
    st = _study(tmp_path)
    with pytest.raises(ConfigError, match="needs a storage several processes can share"):
        run_study(st, home=tmp_path / "home", storage="memory", workers=2, candidates=None)


def test_a_lane_floor_is_tuned_and_exported(tmp_path):
    """``bad`` ranks an unjudged document first with score 10 and the rest at 9 and below: a floor above 10 on it
    empties it, RRF ranks ``good``'s relevant document first and R@1 is 1.0 (with equal weights, 0 otherwise)."""
    import json

    text = tune_fixture.STUDY.replace("[space.weights]\ngood = { low = 0.0, high = 1.0 }\nbad = { low = 0.0, high = 1.0 }\n",
                                      "[space.lane_min_score]\nbad = { low = 0.0, high = 12.0 }\n")
    st = _study(tmp_path, text)
    params, notes = baseline_params(st)
    assert params["lane_min_score.bad"] == 0.0 and any("baseline has no lane_min_score.bad" in n for n in notes)
    assert setting_from(st, {"lane_min_score.bad": 10.5}).lane_min_score == {"bad": 10.5}
    res = run_study(st, home=tmp_path / "home", storage="memory", trials=40,
                    candidates=tune_fixture.candidates(st, tmp_path))
    assert res.chosen.values[0] == 1.0 and res.chosen.params["lane_min_score.bad"] > 10.0
    from workbench.tuning.export import export_config
    from workbench.tuning.outputs import summary

    exported = export_config(res, tmp_path / "home")
    assert exported["lane_min_score"] == {"bad": res.chosen.params["lane_min_score.bad"]}
    assert "; lane_min_score bad=" in summary(res)
    json.dumps(exported, default=str)  # JSON as written
    with pytest.raises(ConfigError, match=r"space.lane_min_score names lane\(s\) \['zz'\]"):
        _study(tmp_path, text.replace("bad = { low = 0.0, high = 12.0 }", "zz = { low = 0.0, high = 1.0 }"))


# ---------------------------------------------------------------- finite spaces (issue #41)

def test_a_finite_space_is_listed_with_its_conditional_parameters(tmp_path):
    text = tune_fixture.STUDY.replace("k = { low = 1, high = 100 }",
                                      'fusion = ["rrf", "weighted"]\nk = [10, 60]\nnorm = ["minmax", "zscore"]'
                                      ).replace("good = { low = 0.0, high = 1.0 }\nbad = { low = 0.0, high = 1.0 }",
                                                "good = [0.0, 1.0]")
    st = _study(tmp_path, text)
    got = finite_settings(st)
    # rrf reads k and weights (2 x 2), weighted reads norm and weights (2 x 2): 8 settings, not 2*2*2*2 = 16
    assert got is not None and len(got) == 8 and len({setting_key(p) for p in got}) == 8
    assert {"fusion": "rrf", "k": 60, "weights.good": 0.0} in got
    assert {"fusion": "weighted", "norm": "zscore", "weights.good": 1.0} in got
    assert finite_settings(_study(tmp_path / "inf")) is None  # float ranges: no end to list


def test_a_study_on_a_space_of_4_settings_tries_each_once_and_stops(tmp_path):
    """Issue #41: ``--trials 30`` on 4 settings reported "30 trials" where 4 distinct settings ran."""
    text = tune_fixture.STUDY.replace("k = { low = 1, high = 100 }", "k = [10, 60]").replace(
        "good = { low = 0.0, high = 1.0 }\nbad = { low = 0.0, high = 1.0 }", "good = [0.0, 1.0]")
    st = _study(tmp_path, text)
    assert st.trials == 30 and len(finite_settings(st)) == 4
    res = run_study(st, home=tmp_path / "home", storage="memory", candidates=tune_fixture.candidates(st, tmp_path))
    complete = [t for t in res.optuna_study.trials if t.state.name == "COMPLETE"]
    assert len(complete) == 4 and res.trials_run == 4  # before the fix: 30
    assert {setting_key(t.params) for t in complete} == {setting_key(p) for p in finite_settings(st)}
    assert complete[0].user_attrs.get("baseline") is True and complete[0].params == {"k": 60, "weights.good": 1.0}
    assert any("the space holds only 4 distinct setting(s): each is tried once and the study stops at 4 trial(s), "
               "not the 30 asked for" in n for n in res.notes)
    assert summary(res).splitlines()[0].startswith("study synthetic-study: 4 trials on gita (train)")
