"""The public read API (workbench.results) and the notebooks, on a home the suite builds from the gita:
board.toml evaluated (rrf, noref, ref) and tracked in MLflow, the study board-study, a gate report
(tests/fixtures/board.py), and judgments two raters made in the judgment store."""

from __future__ import annotations

import math

import pytest

from workbench.errors import ConfigError, DataError
from workbench.eval.stats import adjust_pvalues
from workbench.judging.store import PoolPair
from workbench.results import Results, compare, run_frame

NOTEBOOKS = ("quickstart", "failure_analysis", "tuning", "judgments")


@pytest.fixture
def res(board, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return Results(board)


def test_runs_per_query_and_the_fused_run(res):
    runs = res.runs(experiment="board")
    assert sorted(runs["config"]) == ["noref", "ref", "rrf"] and set(runs["dataset"]) == {"gita"}
    pq = res.per_query("ref", experiment="board")
    # the reference lane never answers a paraphrase, and ranks every verse reference's verse first
    assert (pq.loc[pq["query_type"] == "paraphrase", "R@10"] == 0).all()
    assert pq.loc[pq["query_type"] == "reference", "RR@10"].mean() == pytest.approx(1.0)
    run = res.run("rrf", experiment="board")
    frame = run_frame(run)
    assert run.name == "rrf" and list(frame.columns) == ["query_id", "doc_id", "score", "rank"]
    first = frame[frame["rank"] == 1].set_index("query_id")["doc_id"]
    assert first[pq["query_id"].iloc[0]] == run[pq["query_id"].iloc[0]][0].doc_id
    logged = runs.set_index("config").loc["rrf", "metric.recall_at_10"]
    assert res.per_query("rrf", experiment="board")["R@10"].mean() == pytest.approx(logged)
    lanes = res.lanes("rrf", experiment="board")
    assert {"vector", "fts", "ref"} <= set(lanes["lane"])


def test_unknown_names_say_what_there_is(res):
    with pytest.raises(DataError, match="no complete evaluation run of config 'rff'.*board/rrf"):
        res.run_row("rff")
    with pytest.raises(DataError, match="no study 'nope'.*board-study"):
        res.study_report("nope")
    with pytest.raises(ConfigError, match="qrels layer"):
        res.qrels("gita", "humans")


def test_compare_matches_the_workbench_and_adjusts_by_holm(res):
    pq = res.per_query("rrf", experiment="board")
    test_ids = pq.loc[pq["split"] == "test", "query_id"]
    qrels = res.qrels("gita")
    runs = {c: res.run(c, experiment="board") for c in ("rrf", "noref", "ref")}
    cmp = compare(runs, qrels, ["R@10", "RR@10"], query_ids=test_ids, permutations=2000)
    relevant = set(qrels.loc[qrels["relevance"] >= 1, "query_id"])
    want = {c: res.per_query(c, experiment="board").set_index("query_id").loc[sorted(set(test_ids) & relevant)]
            for c in runs}
    means = cmp.means.set_index("run")
    for c in runs:  # ranx on the workbench's ranking = the workbench's own evaluation
        assert means.loc[c, "R@10"] == pytest.approx(want[c]["R@10"].mean(), abs=1e-9)
        assert means.loc[c, "RR@10"] == pytest.approx(want[c]["RR@10"].mean(), abs=1e-9)
    assert cmp.queries == len(set(test_ids) & relevant) and cmp.adjustment == "Holm–Bonferroni"
    assert len(cmp.pvalues) == 3 * 2  # pairs × measures
    assert cmp.pvalues["p_adjusted"].tolist() == pytest.approx(adjust_pvalues(cmp.pvalues["p_value"]).tolist())
    assert (cmp.pvalues["p_value"] >= 1 / 2001).all()  # a randomization p-value is never 0
    with pytest.raises(ConfigError, match="two runs or more"):
        compare({"rrf": runs["rrf"]}, qrels, ["R@10"])
    with pytest.raises(ConfigError, match="ranx has no equivalent for Judged@10"):
        compare(runs, qrels, ["Judged@10"])


def test_study_and_gate_reports_carry_holm_adjusted_p_values(res):
    table = res.study_measures("board-study")
    rep = res.study_report("board-study")
    for split in ("dev", "test"):
        part = rep.evaluation.split(split)
        family = [*part.measures.values(), *part.by_query_type.values()]
        assert [r.p_adjusted for r in family] == pytest.approx(adjust_pvalues([r.p_value for r in family]).tolist())
    assert {"p_value", "p_adjusted"} <= set(table.columns)
    assert res.trials("board-study")["number"].nunique() >= 20
    study = res.optuna_study("board-study")
    assert len(study.trials) >= 20
    (report,) = res.gate_reports()
    checks = res.gate_checks(report)
    paired = checks[checks["p_value"].notna()]
    assert len(paired) == len(checks)  # a paired gate: every check has a p-value
    assert paired["p_adjusted"].tolist() == pytest.approx(adjust_pvalues(paired["p_value"]).tolist())
    ref = checks[(checks["stratum"] == "reference") & (checks["measure"] == "R@10")].iloc[0]
    assert ref["status"] == "fail" and ref["p_adjusted"] < 0.05  # dropping the reference lane: a real regression


@pytest.fixture
def judged(board, judge_store, pg_dsn, monkeypatch):
    """Two raters judge the rrf run's top 3 of the first four test queries (12 pairs), grades by rule:
    ann gives 2 to the first-ranked document and 0 to the others, bob agrees except on one pair."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    res = Results(board)
    pq = res.per_query("rrf", experiment="board")
    run = res.run("rrf", experiment="board")
    qids = sorted(pq.loc[pq["split"] == "test", "query_id"])[:4]
    pairs = [(q, h.doc_id, i) for q in qids for i, h in enumerate(run[q][:3])]
    judge_store.create_pool("gita", [PoolPair(q, d) for q, d, _ in pairs], raters_per_pair=2)
    rank = {(q, d): i for q, d, i in pairs}
    for name in ("ann", "bob"):
        rater, _ = judge_store.add_rater(name)
        first = True
        while (a := judge_store.next_assignment(rater, "gita")) is not None:
            grade = 2 if rank[(a.query_id, a.doc_id)] == 0 else 0
            if name == "bob" and first and grade == 0:
                grade, first = 1, False
            judge_store.judge(rater, a.assignment_id, grade)
    return res, pairs


def test_judgments_and_pool_coverage(judged):
    res, pairs = judged
    j = res.judgments("gita")
    assert len(j) == 24 and sorted(j["rater"].unique()) == ["ann", "bob"]
    cov = res.pool_coverage("gita")
    assert cov["pooled"].sum() == 12 and cov["judged"].sum() == 12 and len(cov) == 4
    agreement = res.agreement("gita")
    assert agreement["units"] == 12 and agreement["pairable_units"] == 12
    assert 0 < agreement["alpha"]["value"] < 1  # one disagreement of one grade in 12 pairs


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_runs_top_to_bottom(judged, board, pg_dsn, name, tmp_path):
    from workbench.results import notebooks

    env = {"WORKBENCH_HOME": str(board), "WORKBENCH_PG_DSN": pg_dsn, "NB_EXPERIMENT": "board",
           "NB_CONFIGS": "rrf,noref,ref", "NB_BASELINE": "rrf", "NB_CANDIDATE": "noref", "NB_CONFIG": "rrf",
           "NB_STUDY": "board-study", "NB_SPLIT": "test"}
    (path,) = notebooks.find([name])
    done = notebooks.execute(path, tmp_path, timeout=600, env=env)
    assert done.error == "", done.error
    import nbformat

    nb = nbformat.read(done.output, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                     if o.output_type == "stream")
    if name == "judgments":
        assert "gita: 24 current judgments by 2 raters" in text and "12 of 12 pooled pairs judged" in text
    if name == "quickstart":
        assert "test: fisher, correction: Holm–Bonferroni" in text
    if name == "failure_analysis":  # noref loses the verse references rrf finds through the reference lane
        assert "noref vs rrf on" in text and "mean RBO" in text


def test_notebook_errors_are_reported_not_raised(board, tmp_path):
    from workbench.results import notebooks

    with pytest.raises(ConfigError, match="no notebook 'nope'.*quickstart"):
        notebooks.find(["nope"])
    (path,) = notebooks.find(["tuning"])
    done = notebooks.execute(path, tmp_path, env={"WORKBENCH_HOME": str(board), "NB_STUDY": "missing-study"})
    assert "no study 'missing-study'" in done.error and done.error.startswith("cell ")
    assert math.isfinite(done.seconds)


# ---------------------------------------------------------------- bad input (no home needed)

def _two_runs():
    from workbench.run import Hit, Run
    from workbench.types import Qrel

    qrels = [Qrel("q1", "d1", 1), Qrel("q2", "d2", 2), Qrel("q3", "d9", 0)]
    a = Run({"q1": [Hit("d1", 1.0)], "q2": [Hit("d3", 2.0), Hit("d2", 1.0)]}, "a")
    return qrels, a


def test_compare_counts_a_run_without_hits_as_zero():
    from workbench.run import Run

    qrels, a = _two_runs()
    cmp = compare({"a": a, "empty": Run({}, "empty")}, qrels, "R@10")  # one string: one measure
    means = cmp.means.set_index("run")["R@10"]
    # a finds q1's d1 and q2's d2 (rank 2): R@10 1 and 1; the empty run 0 and 0 (q3 has no relevant doc)
    assert means["a"] == 1.0 and means["empty"] == 0.0 and cmp.queries == 2
    # both queries differ by +1: the exact sign-flip p over 2^2 patterns is 2/4 (all + and all -)
    assert cmp.pvalues["p_value"].tolist() == [0.5]
    one = compare({"a": a, "empty": Run({}, "empty")}, qrels, ["R@10"], query_ids="q2")  # one id, not 'q', '2'
    assert one.queries == 1 and one.pvalues["p_value"].tolist() == [1.0]
    # (query_id, doc_id, relevance) tuples read like Qrel objects
    tuples = compare({"a": a, "b": a}, [("q1", "d1", 1), ("q2", "d2", 2)], ["RR@10"])
    assert tuples.means.set_index("run")["RR@10"].tolist() == [0.75, 0.75]  # (1 + 1/2) / 2


@pytest.mark.parametrize("kwargs, match", [
    ({"runs": "LIST"}, "must be a dict name → Run"),
    ({"runs": {"a": "A", "b": ["d1"]}}, "must be workbench.run.Run objects"),
    ({"measures": []}, "at least one measure"),
    ({"permutations": 0}, "permutations must be an integer >= 1"),
    ({"permutations": -5}, "permutations must be an integer >= 1"),
    ({"adjust": "holmes"}, "unknown p-value adjustment 'holmes'"),
    ({"qrels": "FRAME_COLS"}, r"lacks column\(s\) \['relevance'\]"),
    ({"qrels": "FRAME_NAN"}, r"qrels row 1 \(q2, d2\): relevance nan is not an integer grade"),
    ({"qrels": [("q1", "d1")]}, r"qrels row 0: \('q1', 'd1'\) is not a Qrel"),
    ({"qrels": 5}, "qrels must be Qrel objects"),
    ({"measures": 10}, "measures must be measure names"),
    ({"measures": [None]}, "measures must be measure names"),
    ({"query_ids": 5}, "query_ids must be query ids"),
    ({"adjust": 3}, "adjust must name a correction"),
    ({"seed": "x"}, "seed must be an integer"),
])
def test_compare_refuses_bad_arguments_by_name(kwargs, match):
    import pandas as pd

    qrels, a = _two_runs()
    args = {"runs": {"a": a, "b": a}, "qrels": qrels, "measures": ["R@10"]}
    args.update(kwargs)
    if args["runs"] == "LIST":
        args["runs"] = [a, a]
    frames = {"FRAME_COLS": pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "grade": [1]}),
              "FRAME_NAN": pd.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "d2"], "relevance": [1, None]})}
    if isinstance(args["qrels"], str):
        args["qrels"] = frames[args["qrels"]]
    with pytest.raises(ConfigError, match=match):
        compare(args.pop("runs"), args.pop("qrels"), args.pop("measures"), **args)


def test_compare_marks_significance_after_adjustment():
    """Six queries all gain: the exact two-sided p is 2/2^6 = 0.03125 for each of two measures; Holm over the
    two gives 0.0625 for both, so ranx's table marks neither (its own raw test would have)."""
    from workbench.run import Hit, Run
    from workbench.types import Qrel

    qrels = [Qrel(f"q{i}", "rel", 1) for i in range(6)]
    a = Run({f"q{i}": [Hit("rel", 1.0)] for i in range(6)}, "a")
    b = Run({f"q{i}": [Hit("other", 1.0)] for i in range(6)}, "b")
    cmp = compare({"a": a, "b": b}, qrels, ["R@10", "RR@10"])
    assert cmp.pvalues["p_value"].tolist() == [0.03125, 0.03125]
    assert cmp.pvalues["p_adjusted"].tolist() == [0.0625, 0.0625]
    cell = cmp.report.comparisons["a", "b"]["recall@10"]
    assert cell["p_value"] == 0.03125 and cell["significant"] is False
    assert "ᵇ" not in str(cmp.report)


def test_results_refuses_a_home_that_is_not_one(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(DataError, match=f"no workbench home at {tmp_path / 'nope'}: run the main job"):
        Results(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError, match="is a file, not a workbench home folder"):
        Results(tmp_path / "file")
    with pytest.raises(ConfigError, match="takes the workbench home's path .*got int 123"):
        Results(123)
    empty = Results(tmp_path)  # a home with nothing in it yet: tables are empty, a named run says why
    assert empty.runs().empty
    with pytest.raises(DataError, match="holds no evaluation runs yet .*workbench eval"):
        empty.run("rrf")


@pytest.mark.parametrize("call, match", [
    (lambda r: r.queries(None), "dataset must be a built dataset's name like 'gita'.*got None"),
    (lambda r: r.queries(123), "got 123"),
    (lambda r: r.queries("../datasets/gita"), "got '../datasets/gita'"),
    (lambda r: r.qrels("/etc"), "got '/etc'"),
    (lambda r: r.pool_coverage(["gita"]), r"got \['gita'\]"),
    (lambda r: r.run("w1", experiment=["x"]), r"experiment must be a name \(str\) or None, got list"),
    (lambda r: r.run(7), "config must be a config's name"),
    (lambda r: r.study_report(3), "a study is named by a str"),
    (lambda r: r.gate_checks(None), "gate_checks takes a gate report"),
    (lambda r: r.queries("nosuch"), "unknown dataset 'nosuch'; the datasets are gita, "),
])
def test_read_api_names_a_wrong_argument(tmp_path, call, match):
    with pytest.raises(ConfigError, match=match):
        call(Results(tmp_path))
