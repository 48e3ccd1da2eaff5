"""A study on the real gita dataset: candidates from the main job's cache, fusion-only trials
with no database, engine parameters filled once per setting, export with provenance."""

from __future__ import annotations

import json

import pytest
from fixtures.experiments import GITA_LANES, VECTOR, experiment_toml, rrf
from typer.testing import CliRunner

from workbench.cli import app

pytestmark = pytest.mark.data

EXPERIMENT = experiment_toml("tune-e2e", ["R@10", "nDCG@10"], {"rrf": rrf("vector", "fts", "ref")},
                             lanes={**GITA_LANES, "vector": {**VECTOR, "ef_search": 100}})

STUDY = """
name = "tune-e2e"
experiment = "e.toml"
dataset = "gita"
lanes = ["vector", "fts", "ref"]
baseline = "rrf"
trials = 25
seed = 3
[objective]
measure = "R@10"
weights = { paraphrase = 1.0, term = 1.0, reference = 1.0 }
[space]
k = { low = 1, high = 120, log = true }
[space.weights]
ref = { low = 0.0, high = 6.0 }
fts = { low = 0.0, high = 2.0 }
"""


@pytest.fixture(scope="module")
def warm(built_home, data_dir, pg_dsn, tmp_path_factory):
    """The experiment evaluated once (fills the candidate cache), then the study files."""
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import run_experiment

    folder = tmp_path_factory.mktemp("tune")
    (folder / "e.toml").write_text(EXPERIMENT)
    (folder / "study.toml").write_text(STUDY)
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_PG_DSN", pg_dsn)
    try:
        run_experiment(load_experiment(folder / "e.toml"), home=built_home)
    finally:
        mp.undo()
    return folder, built_home


def test_fusion_only_trials_open_no_database(warm, monkeypatch):
    from workbench.tuning.space import load_study
    from workbench.tuning.study import run_study

    folder, home = warm
    monkeypatch.setenv("WORKBENCH_PG_DSN", "postgresql://nobody@/nowhere?host=/nonexistent-socket-dir")
    monkeypatch.setenv("WORKBENCH_OS_URL", "http://127.0.0.1:9")
    st = load_study(folder / "study.toml")
    res = run_study(st, home=home, storage="memory")
    assert len(res.optuna_study.trials) == 25
    assert res.chosen.values[0] >= res.baseline_value
    # the reference lane answers references exactly: weighting it up cannot lower the reference type
    assert res.evaluation.test.by_type_measure == "R@10"
    test = res.evaluation.test.by_query_type["reference"]
    assert test.chosen >= test.baseline - 1e-12


def test_engine_parameters_fill_the_cache_once_per_setting(warm, pg_dsn, monkeypatch):
    from workbench.tuning.candidates import Candidates
    from workbench.tuning.space import load_study
    from workbench.tuning.study import run_study

    folder, home = warm
    (folder / "study-ef.toml").write_text(STUDY.replace('name = "tune-e2e"', 'name = "tune-ef"') +
                                          "[space.engine.vector]\nef_search = [20, 100]\n")
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    st = load_study(folder / "study-ef.toml")
    cands = Candidates(st, home)
    res = run_study(st, home=home, storage="memory", trials=12, candidates=cands)
    efs = {t.params["engine.vector.ef_search"] for t in res.optuna_study.trials}
    assert efs == {20, 100}
    assert cands.cache.misses == 1  # ef_search 100 came from the main job's cache; 20 ran once
    assert len(cands._matrices) == 2


def test_tune_and_export_cli(warm, tmp_path, monkeypatch):
    folder, home = warm
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv("WORKBENCH_PG_DSN", "postgresql://nobody@/nowhere?host=/nonexistent-socket-dir")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    runner = CliRunner()
    res = runner.invoke(app, ["tune", str(folder / "study.toml"), "--trials", "15"])
    assert res.exit_code == 0, res.output
    assert "study tune-e2e: 15 trials on gita" in res.stdout and "test (" in res.stdout
    latest = home / "studies" / "tune-e2e" / "latest"
    assert {"report.json", "export.json", "plots.html", "trials.csv"} <= {p.name for p in latest.iterdir()}
    again = runner.invoke(app, ["tune", str(folder / "study.toml"), "--trials", "20", "--no-track"])
    assert again.exit_code == 0 and "5 trials run" in again.stdout  # the journal resumed the study
    out = tmp_path / "prod.json"
    exp = runner.invoke(app, ["export", str(folder / "study.toml"), "-o", str(out)])
    assert exp.exit_code == 0, exp.output
    cfg = json.loads(out.read_text())
    assert cfg["fusion"] == "rrf" and set(cfg["lanes"]) == {"vector", "fts", "ref"}
    assert cfg["lanes"]["vector"]["ef_search"] == 100 and cfg["lanes"]["vector"]["embedder"]["kind"] == "hash"
    prov = cfg["provenance"]
    assert prov["study"] == "tune-e2e" and prov["dataset"] == "gita" and prov["outputs"]["documents.jsonl"]
    assert set(prov["test"]["measures"]) == {"R@10", "nDCG@10"}
    assert prov["test"]["measures"]["R@10"]["chosen_ci"][0] <= prov["test"]["measures"]["R@10"]["chosen"]
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = mlflow.search_runs(search_all_experiments=True, filter_string="tags.`workbench.kind` = 'study'")
    assert len(runs) == 1 and runs.iloc[0]["metrics.train_objective_chosen"] >= runs.iloc[0]["metrics.train_objective_baseline"]


@pytest.mark.parametrize("args, msg", [
    (["tune", "nope.toml"], "study file nope.toml not found"),
    (["export", "nope.toml", "-o", "x.json"], "study file nope.toml not found"),
])
def test_cli_errors_exit_2(args, msg, monkeypatch, data_dir):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and msg in res.output


def test_two_worker_processes_share_one_study_in_postgres(warm, pg_dsn, monkeypatch):
    from workbench.tuning.space import load_study
    from workbench.tuning.study import run_study

    folder, home = warm
    (folder / "study-w.toml").write_text(STUDY.replace('name = "tune-e2e"', 'name = "tune-workers"'))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    st = load_study(folder / "study-w.toml")
    res = run_study(st, home=home, storage=pg_dsn, trials=16, workers=2)
    ost = res.optuna_study
    assert sum(t.state.name == "COMPLETE" for t in ost.trials) == 16
    assert ost.trials[0].user_attrs.get("baseline") is True
    # both processes wrote trials: their datetimes interleave with distinct worker seeds
    assert len({json.dumps(t.params, sort_keys=True) for t in ost.trials}) >= 14
