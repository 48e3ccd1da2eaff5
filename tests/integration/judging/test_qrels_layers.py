"""Qrels layers: the final-grade rule on hand-made judgments, stale texts, and the layers flowing into
eval, MLflow, the gate, tuning and the dashboard's run listing — on a real PostgreSQL and the real gita.

The by-hand test judges three pairs through the store API (two raters, an adjudicator) and checks
every changed per-query value of ``eval --qrels merged`` against values computed here from the
run's top 10 and the built qrels with the textbook formulas.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import psycopg
import pytest
from fixtures.paths import REPO
from typer.testing import CliRunner

from workbench.errors import ConfigError
from workbench.judging.layers import (
    FinalGrade,
    LayerQrels,
    check_layer,
    final_grades,
    human_layers,
    human_qrels,
    load_layer,
    merged_qrels,
    qrels_sha256,
    stale_count,
)
from workbench.judging.store import JudgmentStore, PoolPair, document_hash
from workbench.types import Qrel, Query


def J(q, d, rater, grade=None, cannot=False, sha=None):
    return {"query_id": q, "doc_id": d, "rater": rater, "grade": grade, "cannot_judge": cannot, "doc_sha256": sha}


# ---------------------------------------------------------------- the rule, by hand

def test_adjudicated_beats_agreed_beats_the_mean_rounded_down():
    judgments = [J("q1", "a", "ann", 2), J("q1", "a", "bob", 2),            # agreed 2
                 J("q1", "b", "ann", 1), J("q1", "b", "bob", 2),            # mean 1.5 -> 1
                 J("q1", "c", "ann", 0), J("q1", "c", "bob", 2),            # mean 1.0 -> 1 (and adjudicated below)
                 J("q1", "d", "ann", 0), J("q1", "d", "bob", 1), J("q1", "d", "cy", 1),  # mean 2/3 -> 0
                 J("q2", "e", "ann", 2), J("q2", "e", "bob", 2)]            # agreed, then adjudicated
    adjudications = [{"query_id": "q1", "doc_id": "c", "grade": 2, "doc_sha256": None},
                     {"query_id": "q2", "doc_id": "e", "grade": 0, "doc_sha256": None}]
    got = final_grades(judgments, adjudications)
    assert got[("q1", "a")] == FinalGrade(2, "agreed", 2)
    assert got[("q1", "b")] == FinalGrade(1, "mean", 2)
    assert got[("q1", "d")] == FinalGrade(0, "mean", 3)
    assert got[("q1", "c")] == FinalGrade(2, "adjudicated", 2)
    assert got[("q2", "e")] == FinalGrade(0, "adjudicated", 2)  # the adjudicator overrules an agreement
    assert final_grades(judgments)[("q1", "c")] == FinalGrade(1, "mean", 2)


def test_cannot_judge_is_no_grade():
    got = final_grades([J("q", "a", "ann", cannot=True), J("q", "a", "bob", 0),
                        J("q", "b", "ann", cannot=True), J("q", "b", "bob", cannot=True)])
    assert got == {("q", "a"): FinalGrade(0, "single", 1)}  # b has no human grade at all


def test_human_overrides_built_pair_by_pair_and_can_mark_a_built_label_not_relevant():
    built = [Qrel("q1", "a", 2), Qrel("q1", "b", 1), Qrel("q2", "c", 1)]
    final = final_grades([J("q1", "a", "ann", 0), J("q1", "a", "bob", 0),   # a built 2 judged not relevant
                          J("q1", "z", "ann", 2), J("q1", "z", "bob", 1),   # an unlabelled doc: mean 1
                          J("q3", "y", "ann", 0)])                          # a query the built labels miss
    assert merged_qrels(built, final) == [Qrel("q1", "a", 0), Qrel("q1", "b", 1), Qrel("q1", "z", 1),
                                          Qrel("q2", "c", 1), Qrel("q3", "y", 0)]
    assert human_qrels(final) == [Qrel("q1", "a", 0), Qrel("q1", "z", 1), Qrel("q3", "y", 0)]
    # the hash is of the sorted TREC lines: order-free, and it changes with any grade
    assert qrels_sha256(built) == qrels_sha256(list(reversed(built))) != qrels_sha256(merged_qrels(built, final))


def test_stale_text_judgments_are_left_out_and_counted():
    hashes = {"a": "new", "b": "same"}
    judgments = [J("q", "a", "ann", 2, sha="old"), J("q", "a", "bob", 1, sha="new"),
                 J("q", "b", "ann", 2, sha="same"), J("q", "gone", "ann", 1, sha="x"),
                 J("q", "b", "bob", 0)]  # no hash recorded (an import): never stale
    adjudications = [{"query_id": "q", "doc_id": "b", "grade": 1, "doc_sha256": "old"}]
    got = final_grades(judgments, adjudications, hashes)
    assert got[("q", "a")] == FinalGrade(1, "single", 1, stale=1)  # ann's grade on the old text is out
    assert got[("q", "b")] == FinalGrade(1, "mean", 2, stale=0)    # the stale adjudication does not decide
    assert ("q", "gone") not in got                                 # its document left the dataset
    assert stale_count(judgments, adjudications, hashes) == 3
    assert stale_count(judgments, adjudications, None) == 0


@pytest.mark.parametrize("bad", ["gold", "", "Built", None, 1])
def test_an_unknown_layer_names_where_it_came_from(bad):
    with pytest.raises(ConfigError, match=r"exp\.toml: qrels must be one of built, human, merged, implicit"):
        check_layer(bad, "exp.toml: qrels")
    assert check_layer("merged", "x") == "merged"


def test_the_human_layer_evaluates_only_queries_with_a_human_grade():
    qs = [Query(f"q{i}", "t", "term", "en", "test") for i in range(4)]
    lq = LayerQrels("human", "d", (Qrel("q1", "a", 0),), "h", human_pairs=1, human_queries=frozenset({"q1"}))
    assert [q.query_id for q in lq.evaluated(qs)] == ["q1"] and lq.left_out(qs) == 3
    assert "3 of 4 queries have no human grade and are not evaluated" in lq.describe(qs)
    merged = replace(lq, layer="merged")
    assert merged.evaluated(qs) == qs and merged.left_out(qs) == 0


# ---------------------------------------------------------------- the store, real documents

@pytest.fixture(scope="module")
def gita_home(data_dir, home_with):
    """A home with only the gita built (a copy of the session's)."""
    return home_with("layers-home", "gita")


@pytest.fixture(scope="module")
def store(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
    st = JudgmentStore(pg_dsn)
    yield st
    st.close()


def _judge(store, rater, dataset, grade_of, docs):
    """Judge every open slot the rater can claim; ``grade_of(query_id, doc_id)`` -> grade (None: cannot judge)."""
    n = 0
    while (a := store.next_assignment(rater, dataset)) is not None:
        g = grade_of(a.query_id, a.doc_id)
        store.judge(rater, a.assignment_id, g, cannot_judge=g is None, doc_hash=document_hash(docs[a.doc_id]))
        n += 1
    return n


def test_stale_text_judgments_stay_out_of_human_until_re_judged(gita_home, store):
    from workbench.data import catalog
    from workbench.types import Text

    ds = catalog.load("gita", home=gita_home, check=False)
    d0, d1 = ds.documents[0], ds.documents[1]
    tiny = catalog.Dataset("layers-unit", [d0, d1], [Query("u1", "x", "term", "en", "test")],
                           [Qrel("u1", d0.doc_id, 2)], {})
    store.create_pool("layers-unit", [PoolPair("u1", d0.doc_id, tier=0), PoolPair("u1", d1.doc_id, tier=1)],
                      raters_per_pair=1)  # tiers: d1 is judged last
    ann, _ = store.add_rater("ann-u")
    docs = {d.doc_id: d for d in tiny.documents}
    assert _judge(store, ann, "layers-unit", lambda q, d: 0 if d == d0.doc_id else 1, docs) == 2
    human, merged = human_layers(tiny, store)
    assert human.qrels == (Qrel("u1", d0.doc_id, 0), Qrel("u1", d1.doc_id, 1)) and human.stale == 0
    assert merged.overridden == 1 and merged.added == 1

    # the verse's text is corrected after the judgment: d1's grade is stale, left out and counted
    edited = replace(d1, texts=d1.texts + (Text("translation", "en", "Latn", "a corrected line", "editor"),))
    changed = replace(tiny, documents=[d0, edited])
    human2, merged2 = human_layers(changed, store)
    assert human2.qrels == (Qrel("u1", d0.doc_id, 0),) and human2.stale == 1
    assert merged2.qrels == (Qrel("u1", d0.doc_id, 0),) and merged2.stale == 1
    assert "1 stale judgment(s) left out" in merged2.describe()

    # re-judged on the new text (undo reopens the slot; the grade is recorded with the new hash)
    back = store.undo_last(ann, "layers-unit")
    assert back is not None and back.doc_id == d1.doc_id
    assert _judge(store, ann, "layers-unit", lambda q, d: 2, {d0.doc_id: d0, d1.doc_id: edited}) == 1
    human3, _ = human_layers(changed, store)
    assert human3.qrels == (Qrel("u1", d0.doc_id, 0), Qrel("u1", d1.doc_id, 2)) and human3.stale == 0


# ---------------------------------------------------------------- eval, by hand

EXPERIMENT = """
name = "layers-e2e"
datasets = ["gita"]
measures = ["R@10", "nDCG@10", "RR@10", "Judged@10"]
depth = 20
splits = ["test"]
[embedders.h]
kind = "hash"
dim = 64
[lanes.fts]
kind = "fulltext"
config = "simple"
[lanes.ref]
kind = "reference"
[configs.fts]
lanes = ["fts"]
[configs.ref]
lanes = ["ref"]
[configs.both]
lanes = ["fts", "ref"]
fusion = "rrf"
k = 60
"""


def _ndcg(grades_in_order, all_grades, k=10):
    """trec_eval's ndcg_cut.k with gain = grade (Järvelin and Kekäläinen), by the formula."""
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(grades_in_order[:k]))
    ideal = sorted(all_grades, reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


@pytest.fixture(scope="module")
def judged(gita_home, pg_dsn, store, tmp_path_factory):
    """The gita evaluated on the built qrels (the cache warm), then three pairs judged through the store:

    * a verse reference's only built label (grade 2): ann 1, bob 2, the adjudicator 0 -> 0;
    * a paraphrase query's first unjudged document in the fts top 10: ann 2, bob 2 (agreed 2);
    * its second unjudged document: ann 0, bob 0 (agreed 0)."""
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import run_experiment

    folder = tmp_path_factory.mktemp("layers-exp")
    (folder / "e.toml").write_text(EXPERIMENT)
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_HOME", str(gita_home))
    mp.setenv("WORKBENCH_PG_DSN", pg_dsn)
    exp = load_experiment(folder / "e.toml")
    before = run_experiment(exp, home=gita_home)
    ds = before.datasets["gita"]
    docs = {d.doc_id: d for d in ds.documents}
    built: dict[str, dict[str, int]] = {}
    for r in ds.qrels:
        built.setdefault(r.query_id, {})[r.doc_id] = r.relevance
    res = {c.config.name: c for c in before.configs}
    test_q = [q for q in ds.queries if q.split == "test"]
    q_ref = next(q.query_id for q in test_q if q.query_type == "reference" and len(built[q.query_id]) == 1
                 and len(res["ref"].run.get_hits(q.query_id)) == 1
                 and res["ref"].run.get_hits(q.query_id)[0].doc_id in built[q.query_id])
    d_ref = res["ref"].run.get_hits(q_ref)[0].doc_id
    q_par, u1, u2 = None, None, None
    for q in test_q:
        top = [h.doc_id for h in res["fts"].run.get_hits(q.query_id)[:10]]
        unj = [d for d in top if d not in built[q.query_id]]
        found = [d for d in top if built[q.query_id].get(d, 0) >= 1]
        if q.query_type == "paraphrase" and len(top) == 10 and len(unj) >= 2 and found:
            q_par, u1, u2 = q.query_id, unj[0], unj[1]
            break
    assert q_par is not None, "no paraphrase query with a relevant and two unjudged documents in the fts top 10"
    store.create_pool("gita", [PoolPair(q_ref, d_ref, reason="audit"), PoolPair(q_par, u1), PoolPair(q_par, u2)],
                      raters_per_pair=2, params={"test": "layers"})
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    cy, _ = store.add_rater("cy", "adjudicator")
    plan = {("ann", q_ref, d_ref): 1, ("bob", q_ref, d_ref): 2, ("ann", q_par, u1): 2, ("bob", q_par, u1): 2,
            ("ann", q_par, u2): 0, ("bob", q_par, u2): 0}
    for rater in (ann, bob):
        assert _judge(store, rater, "gita", lambda q, d, r=rater: plan[(r.name, q, d)], docs) == 3
    store.adjudicate(cy, "gita", q_ref, d_ref, 0, note="a chapter heading, not the verse",
                     doc_hash=document_hash(docs[d_ref]))
    yield {"exp": exp, "before": before, "ds": ds, "built": built, "q_ref": q_ref, "d_ref": d_ref, "q_par": q_par,
           "u1": u1, "u2": u2, "folder": folder, "home": gita_home}
    mp.undo()


def test_eval_with_merged_after_judging_shows_the_changed_judged_and_measures(judged, store):
    from workbench.experiment.runner import run_experiment

    j = judged
    after = run_experiment(j["exp"], home=j["home"], qrels="merged", store=store)
    assert after.qrels_layer == "merged"
    lq = after.qrels["gita"]
    assert lq.human_pairs == 3 and lq.overridden == 1 and lq.added == 2 and lq.stale == 0
    pq = {c.config.name: c.evaluation.per_query.set_index("query_id") for c in after.configs}
    pb = {c.config.name: c.evaluation.per_query.set_index("query_id") for c in j["before"].configs}

    # the verse reference: its only label is now 0, so nothing relevant is left; the hit stays judged
    q = j["q_ref"]
    assert pb["ref"].loc[q, ["R@10", "nDCG@10", "RR@10", "Judged@10"]].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert pq["ref"].loc[q, ["R@10", "nDCG@10", "RR@10", "Judged@10"]].tolist() == [0.0, 0.0, 0.0, 1.0]

    # the paraphrase: u1 relevant (2), u2 judged not relevant (0)
    q, u1, u2 = j["q_par"], j["u1"], j["u2"]
    top = [h.doc_id for h in after.configs[0].run.get_hits(q)[:10]]
    assert after.configs[0].config.name == "fts"
    old = dict(j["built"][q])
    new = {**old, u1: 2, u2: 0}
    for grades, table in ((old, pb["fts"]), (new, pq["fts"])):
        rel = [d for d, g in grades.items() if g >= 1]
        found = [d for d in top if grades.get(d, 0) >= 1]
        first = next(i for i, d in enumerate(top, 1) if grades.get(d, 0) >= 1)
        assert table.loc[q, "R@10"] == pytest.approx(len(found) / len(rel), abs=1e-12)
        assert table.loc[q, "RR@10"] == pytest.approx(1 / first, abs=1e-12)
        assert table.loc[q, "Judged@10"] == pytest.approx(sum(d in grades for d in top) / 10, abs=1e-12)
        assert table.loc[q, "nDCG@10"] == pytest.approx(_ndcg([grades.get(d, 0) for d in top], grades.values()),
                                                        abs=1e-9)
    assert pq["fts"].loc[q, "Judged@10"] == pytest.approx(pb["fts"].loc[q, "Judged@10"] + 0.2, abs=1e-12)

    # nothing else moved: the overall means change by exactly these queries' changes / n
    n = len(pq["fts"])
    assert n == len(pb["fts"]) == sum(q.split == "test" for q in j["ds"].queries)
    for cfg in ("fts", "ref"):
        for m in ("R@10", "Judged@10"):
            delta = (pq[cfg][m] - pb[cfg][m])
            changed = set(delta[delta.abs() > 1e-12].index)
            assert changed <= {j["q_ref"], j["q_par"]}, (cfg, m, changed)
            assert pq[cfg][m].mean() - pb[cfg][m].mean() == pytest.approx(delta.sum() / n, abs=1e-12)
    assert after.configs[0].evaluation.overall["Judged@10"] > j["before"].configs[0].evaluation.overall["Judged@10"]


def test_the_eval_command_prints_the_layer_and_measures_what_the_job_measures(judged, store):
    from workbench.cli import app
    from workbench.experiment.runner import run_experiment

    j = judged
    exp_file = str(j["folder"] / "e.toml")
    res = CliRunner().invoke(app, ["eval", exp_file, "--no-track", "--qrels", "merged", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {r["qrels"] for r in rows} == {"merged"}
    want = run_experiment(j["exp"], home=j["home"], qrels="merged", store=store)
    for r in rows:
        cr = next(c for c in want.configs if c.config.name == r["config"])
        assert r["Judged@10"] == pytest.approx(cr.evaluation.overall["Judged@10"], abs=1e-9)  # JSON keeps 10 digits
    text = CliRunner().invoke(app, ["eval", exp_file, "--no-track", "--qrels", "merged"])
    assert text.exit_code == 0 and "qrels: merged" in text.stdout and "qrels layer: merged (--qrels)" in text.output
    # the file's own layer when --qrels is absent
    (j["folder"] / "h.toml").write_text(EXPERIMENT.replace('splits = ["test"]', 'splits = ["test"]\nqrels = "human"'))
    human = CliRunner().invoke(app, ["eval", str(j["folder"] / "h.toml"), "--no-track"])
    assert human.exit_code == 0, human.output
    n_test = sum(q.split == "test" for q in j["ds"].queries)
    assert f"{n_test - 2} of {n_test} queries have no human grade and are not evaluated" in human.output
    assert "qrels: human" in human.stdout


def test_the_human_layer_evaluates_only_the_judged_queries(judged, store):
    from workbench.experiment.runner import run_experiment

    j = judged
    res = run_experiment(j["exp"], home=j["home"], qrels="human", store=store)
    for cr in res.configs:
        assert set(cr.evaluation.per_query["query_id"]) == {j["q_ref"], j["q_par"]}
    ref = next(c for c in res.configs if c.config.name == "ref").evaluation.per_query.set_index("query_id")
    assert ref.loc[j["q_ref"], "R@10"] == 0.0 and ref.loc[j["q_ref"], "Judged@10"] == 1.0
    fts = next(c for c in res.configs if c.config.name == "fts").evaluation.per_query.set_index("query_id")
    # only u1 (2) and u2 (0) are judged for the paraphrase under human: R@10 1, Judged@10 2/10
    assert fts.loc[j["q_par"], "R@10"] == 1.0 and fts.loc[j["q_par"], "Judged@10"] == pytest.approx(0.2)


def test_mlflow_logs_the_layer_and_its_hash_per_config_run_and_the_dashboard_lists_it(judged, store, tmp_path,
                                                                                     monkeypatch):
    import mlflow

    from workbench.experiment.runner import run_experiment
    from workbench.experiment.tracking import log_job
    from workbench.results import store as dash

    j = judged
    res = run_experiment(j["exp"], home=j["home"], qrels="merged", store=store)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    parent = log_job(res, tmp_path)
    client = mlflow.MlflowClient(tracking_uri=uri)
    assert client.get_run(parent).data.params["qrels.layer"] == "merged"
    children = client.search_runs([client.get_run(parent).info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    assert len(children) == 3
    want = qrels_sha256(load_layer("merged", j["ds"], store=store).qrels)
    for child in children:
        assert child.data.params["qrels.layer"] == "merged" and child.data.tags["qrels"] == "merged"
        assert child.data.params["qrels.sha256"] == want == res.qrels["gita"].sha256
        assert child.data.params["qrels.human_pairs"] == "3" and child.data.params["qrels.stale"] == "0"
        assert child.data.params["qrels.queries_left_out"] == "0"
    runs = dash.config_runs(uri)
    assert set(runs["qrels"]) == {"merged"} and set(runs["qrels_sha256"]) == {want}


def test_the_gate_and_tune_judge_by_the_layer_they_are_given(judged):
    from workbench.cli import app

    j = judged
    exp_file = j["folder"] / "e.toml"
    res = CliRunner().invoke(app, ["gate", "--candidate", f"{exp_file}:both", "--baseline", f"{exp_file}:fts",
                                   "-d", "gita", "--qrels", "merged", "--split", "test", "-m", "Judged@10"])
    assert res.exit_code in (0, 1), res.output
    assert "qrels **merged**" in res.stdout and "qrels layer: merged" in res.output
    # a gate file names its layer; expected values of 0 pass, the point is the layer in the report
    (j["folder"] / "gate.toml").write_text('experiment = "e.toml"\nqrels = "merged"\nsplits = ["test"]\n'
                                           '[expected.gita.fts]\n"Judged@10" = 0.0\n')
    res = CliRunner().invoke(app, ["gate", str(j["folder"] / "gate.toml")])
    assert res.exit_code == 0, res.output
    assert "qrels **merged**" in res.stdout
    saved = sorted((j["home"] / "gates").glob("gate-*.json"))[-1]
    report = json.loads(saved.read_text())
    assert report["results"][0]["qrels"] == "merged"
    assert report["results"][0]["qrels_sha256"] == load_layer("merged", j["ds"], store=None).sha256
    (j["folder"] / "study.toml").write_text(
        'name = "layers-study"\nexperiment = "e.toml"\ndataset = "gita"\nbaseline = "both"\ntrials = 3\n'
        'split = "train"\n[objective]\nmeasure = "Judged@10"\n[space]\nk = { low = 1, high = 100 }\n')
    res = CliRunner().invoke(app, ["tune", str(j["folder"] / "study.toml"), "--storage", "memory", "--no-track",
                                   "--qrels", "merged"])
    assert res.exit_code == 0, res.output
    assert "qrels: merged (sha256" in res.stdout
    # no train query has a human grade: the human layer has nothing to tune on, said before any trial
    res = CliRunner().invoke(app, ["tune", str(j["folder"] / "study.toml"), "--storage", "memory", "--no-track",
                                   "--qrels", "human"])
    assert res.exit_code == 2 and "no train query of gita has a human grade yet" in res.output
    assert [ln for ln in res.output.splitlines() if ln.startswith("error:")].__len__() == 1


def test_the_overview_and_compare_pages_show_the_layer_of_each_run(judged, store, tmp_path, monkeypatch):
    import sys
    from dataclasses import replace as dc_replace

    from streamlit.testing.v1 import AppTest

    from workbench.experiment.runner import run_experiment
    from workbench.experiment.tracking import log_job

    j = judged
    merged = run_experiment(j["exp"], home=j["home"], qrels="merged", store=store)
    built = run_experiment(j["exp"], home=j["home"])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("WORKBENCH_HOME", str(j["home"]))
    log_job(merged, tmp_path)
    # later, fts alone is evaluated again on the built labels: the newest runs now mix two layers
    log_job(dc_replace(built, configs=[c for c in built.configs if c.config.name == "fts"]), tmp_path)
    pages = REPO / "dashboards" / "views"
    main = sys.modules["__main__"]
    try:
        at = AppTest.from_file(str(pages / "overview.py"), default_timeout=180)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("qrels layer: **built, merged**" in c.value for c in at.caption)
        assert any("different qrels layers (built, merged)" in w.value for w in at.warning)
        shown = next(d.value for d in at.dataframe if "qrels" in getattr(d.value, "columns", []))
        assert dict(zip(shown["config"], shown["qrels"])) == {"fts": "built", "ref": "merged", "both": "merged"}

        at = AppTest.from_file(str(pages / "compare.py"), default_timeout=180)
        at.run()
        at.selectbox(key="cmp_baseline").set_value("layers-e2e/fts").run()
        at.selectbox(key="cmp_candidate").set_value("layers-e2e/both").run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("**layers-e2e/fts** built, **layers-e2e/both** merged" in c.value for c in at.caption)
        assert any("different qrels layers (built and merged)" in w.value for w in at.warning)
    finally:
        sys.modules["__main__"] = main
