"""The dashboard on a real home: the gita evaluated (embedded Postgres, hash embedder) and tracked in
MLflow, a tuning study in its journal, a gate report. Each page's logic through Streamlit's
AppTest, then every page opened in headless Chromium (screenshots kept as test artifacts).

Values asserted follow from the data, not from the dashboard: the reference lane never answers
a paraphrase (R@10 = 0 for every paraphrase query), it ranks the addressed verse first with
score 2, the MLflow metrics ``workbench eval`` logged, the study's report.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from fixtures.paths import REPO

ROOT = REPO
PAGES = ROOT / "dashboards" / "views"

def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update({"WORKBENCH_HOME": str(home), **extra})
    return env


@pytest.fixture(autouse=True)
def _keep_main_module():
    """Streamlit's AppTest replaces ``sys.modules["__main__"]`` with the page it ran and leaves it
    there; multiprocessing's spawn (tuning workers, in later tests) would then re-run that page
    in every child. Put the real one back."""
    import sys

    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture()
def at_home(board, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(board))
    return board


def _app(page: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=180)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _metrics(home: Path, config: str) -> dict[str, float]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name("board")
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.config = '{config}'")
    return runs[0].data.metrics


def _per_query(home: Path, config: str) -> pd.DataFrame:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name("board")
    run = client.search_runs([exp.experiment_id], filter_string=f"tags.config = '{config}'")[0]
    path = client.download_artifacts(run.info.run_id, "per_query.csv")
    return pd.read_csv(path, dtype={"query_id": str})


def test_overview_shows_every_config_with_cis_per_query_type(at_home):
    at = _app("overview")
    assert at.selectbox(key="ov_dataset").value == "gita"
    tables = [d.value for d in at.dataframe]
    overall = tables[0]
    assert list(overall.index) == ["board/rrf", "board/noref", "board/ref"]  # the experiment's order
    assert (overall["n"] == 1800).all()
    for config in ("rrf", "noref", "ref"):
        logged = _metrics(at_home, config)["recall_at_10"]
        assert overall.loc[f"board/{config}", "R@10"].startswith(f"{logged:.3f} [")
    paraphrase = tables[1]  # tabs: all, paraphrase, reference, term
    assert paraphrase.loc["board/ref", "R@10"] == "0.000 [0.000, 0.000]"
    # the split filter: only test queries
    at.multiselect(key="ov_splits").set_value(["test"]).run()
    n_test = int((_per_query(at_home, "rrf")["split"] == "test").sum())
    assert (at.dataframe[0].value["n"] == n_test).all()


def test_compare_counts_wins_and_losses_and_tests_significance(at_home):
    at = _app("compare")
    at.selectbox(key="cmp_baseline").set_value("board/rrf").run()
    at.selectbox(key="cmp_candidate").set_value("board/ref").run()
    at.selectbox(key="cmp_measure").set_value("R@10").run()
    assert not at.exception
    sig = at.dataframe[0].value.set_index("stratum")
    a, b = _per_query(at_home, "rrf"), _per_query(at_home, "ref")
    j = a.merge(b, on="query_id", suffixes=("_a", "_b"))
    d = j["R@10_b"] - j["R@10_a"]
    assert sig.loc["all", "wins"] == int((d > 0).sum()) and sig.loc["all", "losses"] == int((d < 0).sum())
    assert sig.loc["all", "delta"] == pytest.approx(d.mean())
    # the reference lane alone never answers a paraphrase: no paraphrase query can be won
    assert sig.loc["paraphrase", "wins"] == 0 and sig.loc["paraphrase", "candidate"] == 0.0
    assert sig.loc["paraphrase", "p_value"] < 0.05
    assert {m.label for m in at.metric} >= {"Wins (B better)", "Losses (B worse)", "Ties"}


def test_query_drilldown_puts_the_addressed_verse_first_with_its_lane(at_home):
    at = _app("query")
    at.selectbox(key="q_baseline").set_value("board/ref").run()
    at.selectbox(key="q_candidate").set_value("board/noref").run()
    at.multiselect(key="q_types").set_value(["reference"]).run()
    qid = "gita-ref-00001"  # "Bhagavad-gita 1.2" -> bg1.2, grade 2 in the qrels
    at.selectbox(key="q_query").set_value(qid).run()
    assert not at.exception
    assert any("Bhagavad-gita 1.2" in m.value for m in at.markdown)
    lists = [d.value for d in at.dataframe if "lanes" in getattr(d.value, "columns", [])]
    ref_list, noref_list = lists
    top = ref_list.iloc[0]
    assert (top["doc_id"], top["judged"], top["lanes"]) == ("bg1.2", "2", "ref #1 (2)")
    assert "ref" not in " ".join(noref_list["lanes"])  # that config has no reference lane
    qrels = next(d.value for d in at.dataframe if "relevance" in getattr(d.value, "columns", []))
    assert qrels.iloc[0]["doc_id"] == "bg1.2" and qrels.iloc[0]["rank in board/ref"] == 1
    texts = " ".join(t.value for t in at.text)
    assert "धृतराष्ट्र" in texts or "सञ्जय" in texts  # the verse's Devanagari original is shown
    assert at.query_params["q"] in (qid, [qid])  # a deep link to this query


def test_study_page_shows_the_chosen_trial_plots_and_export(at_home):
    at = _app("study")
    rep = json.loads((at_home / "studies" / "board-study" / "latest" / "report.json").read_text())
    assert f"Chosen trial: #{rep['chosen_trial']}" in [s.value for s in at.subheader]
    export = json.loads((at_home / "studies" / "board-study" / "latest" / "export.json").read_text())
    shipped = at.dataframe[0].value.set_index("setting")["value"]
    assert shipped["fusion"] == export["fusion"] and shipped["top_k"] == str(export["top_k"])
    assert shipped["weights.ref"] == f"{export['weights']['ref']:.4g}"
    raw = next(d.value for d in at.dataframe if "parameter" in getattr(d.value, "columns", []))
    assert list(raw["parameter"]) == list(rep["chosen_params"])
    assert [t.label for t in at.tabs][:3] == ["Optimisation history", "Parameter importances", "Parallel coordinates"]
    assert at.get("download_button"), "the export action is missing"
    assert any("Not exported to an engine yet" in i.value for i in at.info)


def test_study_page_shows_the_parity_of_the_engine_export(at_home):
    """``workbench export --verify`` keeps its report in <home>/exports/<study>.<format>.json: the study page shows
    parity@k, parity@10, the exported call's latency and each difference with its cause."""
    from workbench.export.parity import Difference, ParityReport

    rep = ParityReport("postgres", "board-study", "gita", ("dev", "test"), 25, 250, 249, 250,
                       {"p50": 7.25, "p95": 41.5, "mean": 12.0},
                       [Difference("gita-para-00007", "who is Arjuna", 24, "bg1.4", "bg1.47",
                                   "tie: fused score 0.0163 shared by bg1.4 and bg1.47, broken another way")])
    path = at_home / "exports" / "board-study.postgres.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"source": "trial 3 of study board-study", **rep.to_json()}))
    try:
        at = _app("study")
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["postgres: parity@25"] == "0.9960" and metrics["parity@10"] == "1.0000"
        assert metrics["exported call p50"] == "7.2 ms" and metrics["p95"] == "41.5 ms"
        diffs = next(d.value for d in at.dataframe if "cause" in getattr(d.value, "columns", []))
        assert diffs.iloc[0]["query"] == "gita-para-00007" and diffs.iloc[0]["cause"].startswith("tie:")
    finally:
        path.unlink()


def test_gate_page_shows_the_regression_and_the_failing_stratum(at_home):
    at = _app("gate")
    assert at.error and at.error[0].value.startswith("REGRESSION")
    checks = at.dataframe[0].value
    ref = checks[(checks["stratum"] == "reference") & (checks["measure"] == "R@10")].iloc[0]
    assert ref["status"] == "fail" and ref["candidate"].endswith(":noref")
    command = at.code[0].value
    assert command.startswith("workbench gate --candidate ") and command.endswith("--dataset gita -m R@10")


def test_online_page_shows_a_log_set_and_which_interleaved_config_won(at_home, tmp_path, monkeypatch):
    """A log set of 30 team-draft searches (readers always take the first hit: the coin's team wins each) beside
    the board's runs: the page's counts are the import's, its pair table is compare_log's, and no run holds a
    traffic query yet."""
    import random

    from workbench.traffic.importer import load_log_set, read_logs, write_log_set
    from workbench.traffic.interleave import compare_log, team_draft
    from workbench.traffic.log import TrafficLog

    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "empty"))
    assert "workbench logs import" in _app("online").info[0].value
    monkeypatch.setenv("WORKBENCH_HOME", str(at_home))
    log, rng = TrafficLog(tmp_path / "ubi"), random.Random(11)
    for i in range(30):
        shown = team_draft(["bg2.47", "bg2.48"], ["bg3.19", "bg2.47"], 3, rng)
        qid = log.searched(f"id:{i % 7}", "karma yoga", shown.hits, {"interleave": {
            "a": "rrf", "b": "ref", "method": shown.method, "teams": list(shown.teams), "a_first": shown.a_first,
            "a_hits": ["bg2.47", "bg2.48"], "b_hits": ["bg3.19", "bg2.47"]}})
        log.clicked(qid, shown.hits[0])
    log.close()
    write_log_set(at_home / "logs" / "wk", *read_logs([tmp_path / "ubi"], "wk"))
    at = _app("online")
    assert {m.label: m.value for m in at.metric} == {"Searches": "30", "Events": "30", "Clients": "7",
                                                     "Sessions": "7"}
    (want,) = compare_log(*load_log_set(at_home, "wk"))
    pairs = at.dataframe[0].value.iloc[0]
    assert (pairs["a"], pairs["b"], pairs["wins_a"], pairs["wins_b"], pairs["ties"]) == (
        "rrf", "ref", want.comparison.wins_a, want.comparison.wins_b, 0)
    assert want.comparison.wins_a + want.comparison.wins_b == 30
    assert any("No evaluated run holds a query drawn from traffic" in i.value for i in at.info)


def test_a_copied_home_reads_its_own_artifacts_and_one_broken_run_hides_no_other(board, tmp_path, monkeypatch):
    """MLflow records absolute artifact paths; a copy of the home must read the copy's files. Deleting
    one run's per-query table in the copy (the original keeps it) proves which files are read, and
    that the overview then shows the other configs with a warning naming the one left out."""
    import shutil

    copy = tmp_path / "copied-home"
    copy.mkdir()
    shutil.copy2(board / "mlflow.db", copy / "mlflow.db")
    shutil.copytree(board / "mlartifacts", copy / "mlartifacts")
    (copy / "datasets").symlink_to((board / "datasets").resolve())
    gone = [p for p in (copy / "mlartifacts").rglob("per_query.csv")
            if json.loads((p.parent / "config.json").read_text())["lanes"] == "ref"]
    assert len(gone) == 1
    gone[0].unlink()
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(copy))
    at = _app("overview")
    assert list(at.dataframe[0].value.index) == ["board/rrf", "board/noref"]
    assert any(w.value.startswith("board/ref is left out: run ") and "per_query.csv" in w.value for w in at.warning)


def test_every_run_is_finished_with_its_artifacts_and_names_its_writer(board):
    """What the readers rely on (workbench.experiment.tracking): each run of the eval and the study ended
    FINISHED with the tag listing its artifacts, which the store holds, and the writer's identity."""
    import os
    import socket

    import mlflow

    from workbench.experiment.tracking import TAG_ARTIFACTS, TAG_HOST, TAG_PID, TAG_PROCESS, writer_state

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{board / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    kinds = sorted(r.data.tags.get("workbench.kind") for r in runs)
    assert kinds == ["config", "config", "config", "eval", "study"]
    for r in runs:
        tags = r.data.tags
        assert r.info.status == "FINISHED"
        assert tags[TAG_HOST] == socket.gethostname() and tags[TAG_PID] == str(os.getpid())  # CliRunner: this process
        assert writer_state(tags) == "alive" and tags[TAG_PROCESS]
        listed = tags[TAG_ARTIFACTS].split(",")
        for rel in listed:
            assert client.download_artifacts(r.info.run_id, rel)  # each named artifact is in the store
        expected = {"config": ["config.json", "per_query.csv", "run.trec"],
                    "eval": ["board.toml", "lane_latency_ms.json", "lanes/gita.parquet"]}.get(tags["workbench.kind"])
        if expected:
            assert listed == expected
        else:
            assert {"study.toml", "report.json", "export.json", "trials.csv"} <= set(listed)


@pytest.mark.parametrize("page", ["overview", "compare", "query", "filters", "study", "gate"])
def test_an_empty_home_says_what_to_run(page, tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    at = _app(page)
    assert at.info and "make main" in at.info[0].value
    assert not (tmp_path / "mlflow.db").exists()  # looking creates no store


@pytest.mark.browser
def test_every_page_renders_in_headless_chromium(board, tmp_path):
    """The app as a user gets it: `workbench dashboard`, every page in Chromium, no exception,
    the expected content, a screenshot per page in test-artifacts/dashboard/ (or
    $WORKBENCH_TEST_ARTIFACTS)."""
    import browser

    found = browser.find_browser()
    if found is None:
        if os.environ.get("WORKBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium and chromedriver are not installed but WORKBENCH_REQUIRE_BROWSER=1 "
                        "(apt-get install chromium chromium-driver)")
        pytest.skip("headless Chromium not installed: apt-get install chromium chromium-driver")
    out = Path(os.environ.get("WORKBENCH_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "dashboard"
    dash = browser.Dashboard(_env(board), tmp_path / "dashboard.log")
    drv = None
    try:
        dash.wait()
        drv = browser.chrome(*found)
        expect = {"overview": ["Overview", "board/rrf", "paraphrase (n=600)"],
                  "compare": ["Compare two configs", "Wins (B better)", "queries differ"],
                  "query": ["Query drill-down", "Qrels", "lanes: vector, fts, ref"],
                  "filters": ["Filters and empty answers", "no filtered and no unanswerable queries"],
                  "study": ["Chosen trial", "Optimisation history", "Export the chosen trial"],
                  "gate": ["REGRESSION", "reference"],
                  "online": ["Online"]}
        problems = []
        for page, strings in expect.items():
            path = "" if page == "overview" else page  # the default page lives at the root URL
            res = browser.open_page(drv, f"{dash.url}/{path}", strings)
            browser.screenshot(drv, out / f"{page}.png")
            if res["exceptions"] or res["missing"] or "Page not found" in res["text"]:
                problems.append((page, res["exceptions"], res["missing"], res["text"][:300]))
        assert not problems, problems
        assert all((out / f"{p}.png").stat().st_size > 10_000 for p in expect)
    finally:
        if drv is not None:
            drv.quit()
        dash.stop()
