"""The dashboard's pure functions and readers, on tables small enough to check by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from workbench.eval.stats import bootstrap_ci, bootstrap_ci_columns
from workbench.results import gates, store, studies, views
from workbench.run import Hit, Run
from workbench.types import Document, Text


def _pq(values: dict[str, float], types: dict[str, str], measure: str = "R@10") -> pd.DataFrame:
    return pd.DataFrame({"query_id": list(values), "query_type": [types[q] for q in values],
                         "split": ["test"] * len(values), "language": ["en"] * len(values),
                         measure: list(values.values())})


TYPES = {"q1": "term", "q2": "term", "q3": "reference", "q4": "reference"}
A = _pq({"q1": 1.0, "q2": 0.0, "q3": 0.5, "q4": 1.0}, TYPES)
B = _pq({"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 1.0}, TYPES)


def test_bootstrap_columns_agree_with_scipy_and_keep_constants():
    rng = np.random.default_rng(5)
    v = np.column_stack([rng.random(400), rng.integers(0, 2, 400).astype(float), np.full(400, 0.25)])
    from scipy import stats

    lo, hi = bootstrap_ci_columns(v, seed=1, resamples=4000)
    for j in range(2):  # scipy's percentile bootstrap as the reference, within Monte Carlo error
        ref = stats.bootstrap((v[:, j],), np.mean, n_resamples=4000, method="percentile", random_state=1)
        assert lo[j] == pytest.approx(ref.confidence_interval.low, abs=0.01)
        assert hi[j] == pytest.approx(ref.confidence_interval.high, abs=0.01)
        assert lo[j] < v[:, j].mean() < hi[j]
        assert bootstrap_ci(v[:, j], seed=1)[0] == pytest.approx(lo[j], abs=0.01)
    assert (lo[2], hi[2]) == (0.25, 0.25)  # a constant column: its value twice
    assert np.array_equal(bootstrap_ci_columns(v, seed=1, resamples=4000)[0], lo)  # seeded
    one_lo, one_hi = bootstrap_ci_columns(np.array([[0.7]]), seed=1)
    assert (one_lo[0], one_hi[0]) == (0.7, 0.7)
    empty = bootstrap_ci_columns(np.empty((0, 2)), seed=1)
    assert all(math.isnan(x) for x in np.concatenate(empty))
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci_columns(np.array([[1.0], [math.nan]]), seed=1)
    with pytest.raises(ValueError, match="queries, columns"):
        bootstrap_ci_columns(np.array([1.0, 2.0]), seed=1)


def test_sign_flip_p_exact_by_hand_and_randomised_against_scipy():
    from scipy import stats

    from workbench.eval.stats import sign_flip_p

    assert sign_flip_p(np.ones(10), seed=1) == pytest.approx(2 / 1024)  # only all-+ and all-- reach |sum| = 10
    assert sign_flip_p(np.array([0.0, 1.0, -0.5, 0.0]), seed=1) == 1.0     # sums ±0.5, ±1.5: all ≥ 0.5
    assert sign_flip_p(np.array([3.0, 1.0, 1.0]), seed=1) == pytest.approx(2 / 8)  # ±5 of 8 patterns
    assert sign_flip_p(np.zeros(5), seed=1) == 1.0
    rng = np.random.default_rng(3)
    d = rng.normal(0.02, 0.3, 300)
    ref = stats.permutation_test((d, np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                 permutation_type="samples", n_resamples=20_000, random_state=2).pvalue
    assert sign_flip_p(d, seed=1, resamples=20_000) == pytest.approx(ref, abs=0.02)
    assert sign_flip_p(np.full(50, 0.1), seed=1) == pytest.approx(1 / 10_001)  # never 0


def test_overview_means_per_stratum_by_hand():
    long = views.overview({"A": A, "B": B}, ["R@10"])
    got = {(r.config, r.stratum): (r.n, r.mean) for r in long.itertuples()}
    assert got[("A", "all")] == (4, 0.625)       # (1 + 0 + 0.5 + 1) / 4
    assert got[("B", "all")] == (4, 0.75)
    assert got[("A", "term")] == (2, 0.5)
    assert got[("A", "reference")] == (2, 0.75)
    assert got[("B", "reference")] == (2, 0.5)
    for r in long.itertuples():
        assert r.ci_low <= r.mean <= r.ci_high
    # a split filter that keeps nothing, and configs sharing no query
    assert views.overview({"A": A}, ["R@10"], splits=["dev"]).empty or \
        views.overview({"A": A}, ["R@10"], splits=["dev"])["n"].eq(0).all()
    wide = views.overview_wide(long)
    assert list(wide.index) == ["A", "B"] and wide.loc["A", "R@10"].startswith("0.625 [")


def test_overview_compares_configs_on_shared_queries_only():
    short = B[B["query_id"] != "q2"]
    long = views.overview({"A": A, "B": short}, ["R@10"])
    got = {(r.config, r.stratum): (r.n, r.mean) for r in long.itertuples()}
    assert got[("A", "all")] == (3, pytest.approx(2.5 / 3)) and got[("B", "all")] == (3, pytest.approx(2 / 3))


def test_compare_outcomes_and_significance_by_hand():
    cmp = views.query_deltas(A, B, "R@10")
    assert list(cmp["query_id"]) == ["q3", "q1", "q4", "q2"]  # worst loss first, ties by id, best win last
    assert list(cmp["delta"]) == [-0.5, 0.0, 0.0, 1.0]
    assert views.outcomes(cmp) == {"wins": 1, "losses": 1, "ties": 2}
    sig = views.significance(cmp).set_index("stratum")
    assert sig.loc["all", "delta"] == pytest.approx(0.125) and sig.loc["all", "n"] == 4
    # differences (0, +1, -0.5, 0): the exact sign-flip test's means are ±0.125 and ±0.375, all at least as
    # extreme as the observed 0.125, so p = 1
    assert sig.loc["all", "p_value"] == 1.0
    assert sig.loc["term", "wins"] == 1 and sig.loc["reference", "losses"] == 1
    same = views.significance(views.query_deltas(A, A, "R@10")).set_index("stratum")
    assert same.loc["all", "p_value"] == 1.0 and same.loc["all", "delta"] == 0.0
    with pytest.raises(KeyError, match="nDCG@10"):
        views.query_deltas(A, B, "nDCG@10")


def _doc(doc_id: str, address: str) -> Document:
    return Document(doc_id, address, "bg", "verse", (
        Text("root", "sa", "Deva", "धर्मक्षेत्रे", "gita"), Text("transliteration", "sa", "Latn", "dharma-kṣhetre", "gita"),
        Text("translation", "en", "Latn", "On the field of dharma", "x")))


def test_ranked_list_marks_judged_and_names_the_lanes_that_found_each_document():
    run = Run({"q": [Hit("d1", 0.9), Hit("d2", 0.5), Hit("d3", 0.1)]})
    lanes = store_lane_frame({"vec": Run({"q": [Hit("d2", 0.8), Hit("d1", 0.7)]}),
                              "ref": Run({"q": [Hit("d1", 2.0)]}),
                              "other": Run({"q": [Hit("d3", 1.0)]})})
    found = views.lanes_for(lanes, "q", ["vec", "ref"])
    docs = {"d1": _doc("d1", "BG 1.1"), "d2": _doc("d2", "BG 1.2")}
    table = views.ranked_list(run, "q", {"d1": 2, "d3": 0}, found, ["vec", "ref"], docs, k=10)
    assert list(table["doc_id"]) == ["d1", "d2", "d3"]
    assert list(table["judged"]) == ["2", "unjudged", "0"]
    assert table.loc[0, "lanes"] == "vec #2 (0.7) · ref #1 (2)"
    assert table.loc[1, "lanes"] == "vec #1 (0.8)"
    assert table.loc[2, "lanes"] == "" and table.loc[2, "address"] == "(not in the dataset)"  # 'other' is not a lane of it
    q = views.qrels_table({"d1": 2, "d3": 0, "d9": 1}, {"A": run}, "q", docs)
    assert list(q["doc_id"]) == ["d1", "d9", "d3"] and q["rank in A"].tolist() == [1, pd.NA, 3]


def store_lane_frame(runs):
    from workbench.experiment.tracking import lane_frame

    df = lane_frame(runs)
    for c in ("lane", "query_id", "doc_id"):
        df[c] = df[c].astype(str)
    return df


def test_lane_frame_round_trips_through_parquet(tmp_path):
    from workbench.experiment.tracking import lane_frame

    df = lane_frame({"a": Run({"q1": [Hit("x", 3.0), Hit("y", 1.0)], "q2": []}), "b": Run({"q1": [Hit("y", 0.5)]})})
    df.to_parquet(tmp_path / "l.parquet", index=False)
    back = pd.read_parquet(tmp_path / "l.parquet")
    assert [tuple(r) for r in back.astype({"lane": str, "query_id": str, "doc_id": str}).itertuples(index=False)] == [
        ("a", "q1", "x", 1, 3.0), ("a", "q1", "y", 2, 1.0), ("b", "q1", "y", 1, 0.5)]


def test_doc_texts_groups_original_transliteration_translation():
    t = views.doc_texts(_doc("d1", "BG 1.1"))
    assert t["original"] == "धर्मक्षेत्रे" and t["transliteration"] == "dharma-kṣhetre"
    assert t["translation"] == "[en] On the field of dharma" and t["other"] == ""
    pali = Document("mn1#1", "MN 1", "mn1", "passage", (Text("root", "pi", "Latn", "mettā", "ms"),))
    assert views.doc_texts(pali, derive_cyrillic=True)["transliteration"] == "[Cyrillic, derived] метта"


def test_config_runs_of_a_store_that_does_not_exist_is_empty_and_creates_nothing(tmp_path):
    uri = f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"
    runs = store.config_runs(uri)
    assert runs.empty and list(runs.columns) == list(store.RUN_COLUMNS)
    assert not (tmp_path / "none").exists()


def test_missing_artifact_names_the_run_and_the_fix(tmp_path):
    from workbench.errors import DataError

    with pytest.raises(DataError, match="run r1 has no per_query.csv.*workbench eval"):
        store.per_query(tmp_path.as_uri(), "r1")
    with pytest.raises(DataError, match="not built.*workbench data build --only gita"):
        store.dataset_files(str(tmp_path), "gita")


def test_gate_reports_are_found_newest_first_and_checked(tmp_path):
    from workbench.errors import DataError
    from workbench.gate.decide import Check, GateResult
    from workbench.gate.report import GateReport

    res = GateResult("gita", "cand", "base", 0.01,
                     [Check("R@10", "all", 100, 0.5, 0.6, -0.1, -0.12, -0.08, "fail")], {}, [])
    first = GateReport.of([res], ["workbench", "gate"]).save(tmp_path)
    second = GateReport.of([GateResult("gita", "c2", "b2", 0.01, [], {}, [])], ["workbench", "gate", "x"]).save(tmp_path)
    assert gates.find(tmp_path) == [second, first]
    report = GateReport.load(first)
    assert report.verdict == "regression" and report.exit_code == 1
    frame = gates.checks_frame(report)
    assert frame.loc[0, ["stratum", "status", "diff"]].tolist() == ["all", "fail", -0.1]
    assert GateReport.load(second).verdict == "pass"
    bad = tmp_path / "gates" / "gate-bad.json"
    for text, message in (("[1, 2]", "is not a gate report"), ('{"results": []}', "is not a gate report"),
                          ('{"results": [{}]}', "is not a complete gate report"),
                          ('{"exit_code": "x", "results": [{}]}', "is not a complete gate report")):
        bad.write_text(text)
        with pytest.raises(DataError, match=f"gate-bad.json {message}"):
            GateReport.load(bad)
    body = json.loads(first.read_text())
    del body["results"][0]["checks"][0]["status"]
    bad.write_text(json.dumps(body))
    with pytest.raises(DataError, match="KeyError: 'status'"):
        GateReport.load(bad)


def test_studies_are_found_with_their_storage(tmp_path):
    for folder, storage in (("latest", "journal"), ("latest-memory", "memory"),
                            ("latest-ab12cd34", "postgresql://u:***@h/db")):
        d = tmp_path / "studies" / "s1" / folder
        d.mkdir(parents=True)
        (d / "report.json").write_text(json.dumps({"storage": storage, "chosen_trial": 3}))
    found = {s.folder.name: s for s in studies.find(tmp_path)}
    assert studies.storage_url(found["latest"], tmp_path) == f"journal:{tmp_path / 'studies' / 's1' / 'journal.log'}"
    assert studies.storage_url(found["latest-memory"], tmp_path) is None
    assert studies.storage_url(found["latest-ab12cd34"], tmp_path) is None  # the password is not in the report
    assert found["latest"].label == "s1" and found["latest-memory"].label == "s1 (latest-memory)"
    from workbench.errors import DataError

    with pytest.raises(DataError, match="is not a study report"):  # {"storage", "chosen_trial"} only
        studies.report(found["latest"])
    (found["latest"].folder / "trials.csv").write_bytes(b"\xff\xfe\x00garbage\n\x00")
    (found["latest"].folder / "export.json").write_text("[]")
    with pytest.raises(DataError, match="not a production config"):
        studies.export_text(found["latest"])
    broken = tmp_path / "studies" / "s2" / "latest"
    broken.mkdir(parents=True)
    (broken / "report.json").write_text("{not json")
    listed = {s.name for s in studies.find(tmp_path)}
    assert "s2" in listed  # listed, so the page can say what is wrong instead of "no study yet"


def test_a_copied_home_rebases_artifact_uris(tmp_path):
    old = "file:///elsewhere/home/mlartifacts/1/abc/artifacts"
    assert store.rebase(old, tmp_path) == old  # no copy here: unchanged
    (tmp_path / "mlartifacts" / "1" / "abc" / "artifacts").mkdir(parents=True)
    assert store.rebase(old, tmp_path) == (tmp_path / "mlartifacts" / "1" / "abc" / "artifacts").as_uri()
    assert store.rebase("s3://bucket/mlartifacts/1/abc", tmp_path) == "s3://bucket/mlartifacts/1/abc"


def test_study_figures_include_the_pareto_front_for_two_objectives():
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(lambda t: (t.suggest_float("w", 0, 1), t.suggest_int("k", 1, 100) / 10), n_trials=12)
    from workbench.tuning.outputs import study_figures

    figs = study_figures(study, "R@10")
    assert set(figs) == {"history", "importances", "parallel", "pareto"}
    front = figs["pareto"].data[-1] if len(figs["pareto"].data) > 1 else figs["pareto"].data[0]
    best = {(round(t.values[0], 9), round(t.values[1], 9)) for t in study.best_trials}
    pts = {(round(x, 9), round(y, 9)) for x, y in zip(front.x, front.y)}
    assert best == pts  # the plotted front is exactly Optuna's non-dominated trials
    single = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=1))
    single.optimize(lambda t: t.suggest_float("w", 0, 1), n_trials=5)
    assert "pareto" not in study_figures(single, "R@10")
