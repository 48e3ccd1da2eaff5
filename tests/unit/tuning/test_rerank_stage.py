"""Tuning the rerank stage: the array rule equals apply_rerank, the in-memory evaluation of a reranked
setting equals ir_measures on the real reranked run, the space fails at load, and a tiny study with a
``lane`` reranker (no model) finds a stage whose honest report is the direct computation."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest
import tune_fixture
from fixtures.paths import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.errors import ConfigError
from workbench.eval.evaluate import evaluate
from workbench.eval.fasteval import CandidateMatrix
from workbench.eval.fusion import FusionSpec, fuse_spec
from workbench.experiment.config import RerankStage
from workbench.reranking.stage import apply_rerank, rerank_ranked
from workbench.run import Hit, Run
from workbench.tuning.space import baseline_params, load_study, suggest
from workbench.types import Qrel, Query

# ---------------------------------------------------------------- the array rule is apply_rerank's

def _via_apply_rerank(ranked, fused, scores, depth, weight, top_k):
    """apply_rerank on the same inputs, back to column indices (-1 padded to top_k)."""
    rows, resc = {}, {}
    for i in range(ranked.shape[0]):
        # tiebreak -j keeps the given order among equal fused scores
        rows[f"q{i}"] = [Hit(f"d{c:03d}", float(fused[i, j]), -float(j)) for j, c in enumerate(ranked[i]) if c >= 0]
        resc[f"q{i}"] = [Hit(f"d{c:03d}", float(v)) for c, v in enumerate(scores[i]) if not math.isnan(v)]
    got = apply_rerank(Run(rows, "f"), Run(resc, "r"), depth, "x", weight).top(top_k)
    out = np.full((ranked.shape[0], top_k), -1)
    for i in range(ranked.shape[0]):
        for j, h in enumerate(got[f"q{i}"]):
            out[i, j] = int(h.doc_id[1:])
    return out


@st.composite
def _rerank_case(draw):
    Q, C, D = draw(st.integers(1, 4)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    ranked = np.full((Q, D), -1, dtype=np.int64)
    fused = np.full((Q, D), -np.inf)
    for i in range(Q):
        n = draw(st.integers(0, min(C, D)))
        cols = draw(st.permutations(range(C)))[:n]
        # non-increasing fused scores from a few values: many ties, decided by position
        vals = sorted(draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.0, 7.5]), min_size=n, max_size=n)), reverse=True)
        ranked[i, :n], fused[i, :n] = cols, vals
    scores = np.array(draw(st.lists(st.lists(st.sampled_from([math.nan, -1.0, 0.0, 0.5, 2.0, 0.1 + 0.2]),
                                             min_size=C, max_size=C), min_size=Q, max_size=Q)), dtype=float)
    depth = draw(st.integers(1, 11))
    weight = draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0, 0.3]), st.floats(0.0, 1.0)))
    top_k = draw(st.integers(1, 12))
    return ranked, fused, scores, depth, weight, top_k


@settings(max_examples=400, deadline=None)
@given(_rerank_case())
def test_the_array_rule_gives_apply_reranks_order(case):
    ranked, fused, scores, depth, weight, top_k = case
    got = rerank_ranked(ranked, fused, scores, depth, weight, top_k)
    assert got.shape == (ranked.shape[0], top_k)
    assert got.tolist() == _via_apply_rerank(ranked, fused, scores, depth, weight, top_k).tolist()


def test_the_array_rule_by_hand():
    # one query, fused order c2 c0 c3 c1 (scores 4 3 3 1); the reranker scores c0 and c1 only
    ranked = np.array([[2, 0, 3, 1]])
    fused = np.array([[4.0, 3.0, 3.0, 1.0]])
    scores = np.array([[0.2, 0.9, np.nan, np.nan]])
    # depth 2: head c2 c0, only c0 scored -> c0, then c2 (unscored), then the tail c3 c1
    assert rerank_ranked(ranked, fused, scores, 2, 1.0, 4).tolist() == [[0, 2, 3, 1]]
    # depth 4: c1 (0.9) before c0 (0.2), then the unscored c2 c3 in fused order
    assert rerank_ranked(ranked, fused, scores, 4, 1.0, 4).tolist() == [[1, 0, 2, 3]]
    # weight 0.5: r = minmax(0.2, 0.9) = (0, 1), f = minmax(3, 1) = (1, 0): keys 0.5 / 0.5, a tie -> fused order
    assert rerank_ranked(ranked, fused, scores, 4, 0.5, 3).tolist() == [[0, 1, 2]]
    # weight 0.6: c1 0.6, c0 0.4
    assert rerank_ranked(ranked, fused, scores, 4, 0.6, 6).tolist() == [[1, 0, 2, 3, -1, -1]]
    with pytest.raises(ValueError, match="depth must be an integer >= 1"):
        rerank_ranked(ranked, fused, scores, 0, 1.0, 4)
    with pytest.raises(ValueError, match=r"weight must be a number in \[0, 1\]"):
        rerank_ranked(ranked, fused, scores, 2, 1.5, 4)


# ---------------------------------------------------------------- a reranked setting in memory

def _one_lane_matrix():
    """Two queries, one lane; the relevant document is second in both."""
    run = Run({"q1": [Hit("d1", 3.0), Hit("d2", 2.0), Hit("d3", 1.0)],
               "q2": [Hit("e1", 5.0), Hit("e2", 4.0)]}, "a")
    qrels = [Qrel("q1", "d2", 1), Qrel("q2", "e2", 1)]
    return CandidateMatrix({"a": run}, qrels, ["q1", "q2"])


def test_reranking_a_hand_made_matrix_turns_r_at_1_from_0_to_1():
    m = _one_lane_matrix()
    assert m.doc_ids == [["d1", "d2", "d3"], ["e1", "e2"]] and m.n_cols == 4  # columns: doc_id order + a spare
    s = FusionSpec(("a",), k=60.0, top_k=10)
    assert m.evaluate(s, ["R@1"])["R@1"].tolist() == [0.0, 0.0]
    # the reranker prefers the relevant documents (d3 and the spare column: not scored)
    scores = np.array([[0.1, 0.9, np.nan, np.nan], [0.3, 0.7, np.nan, np.nan]])
    assert m.evaluate(s, ["R@1"], (scores, 2, 1.0))["R@1"].tolist() == [1.0, 1.0]
    # depth 1: only the first hit goes to the reranker, nothing moves
    assert m.evaluate(s, ["R@1"], (scores, 1, 1.0))["R@1"].tolist() == [0.0, 0.0]
    # weight 0.5, q1: r = minmax(0.1, 0.9) = (0, 1); f = RRF 1/61, 1/62 -> minmax (1, 0): 0.5 each, a tie kept in
    # fused order (R@1 0); weight 0.6: d2 0.6 > d1 0.4 (R@1 1); q2 likewise
    assert m.evaluate(s, ["R@1"], (scores, 2, 0.5))["R@1"].tolist() == [0.0, 0.0]
    assert m.evaluate(s, ["R@1"], (scores, 2, 0.6))["R@1"].tolist() == [1.0, 1.0]
    # top_k applies after reranking: fused to 2, reranked, 1 shown
    one = replace(s, top_k=1)
    got = m.evaluate(one, ["R@1", "R@10", "P@5"], (scores, 2, 1.0))
    assert {k: v.tolist() for k, v in got.items()} == {"R@1": [1.0, 1.0], "R@10": [1.0, 1.0], "P@5": [0.2, 0.2]}
    assert m.mean(one, ["R@1"]) == {"R@1": 0.0}
    with pytest.raises(ValueError, match="rerank scores have shape"):
        m.evaluate(s, ["R@1"], (scores[:, :2], 2, 1.0))


def _random_case(seed: int):
    rnd = random.Random(seed)
    pool = [f"d{i:03d}" for i in range(40)]
    qids = [f"q{i:02d}" for i in range(25)]
    runs = {}
    for lane in ("a", "b"):
        rows = {}
        for q in qids:
            docs = rnd.sample(pool, rnd.choice([0, 4, 12, 30]))
            rows[q] = [Hit(d, rnd.choice([1, 2, 2, 3, 5]) * (1.0 if lane == "a" else 13.0)) for d in docs]
        runs[lane] = Run(rows, lane)
    qrels = [Qrel(q, d, g) for q in qids[:22] for d, g in zip(rnd.sample(pool, 8), [0, 0, 1, 1, 1, 2, 2, 1])]
    queries = [Query(q, q, "term", "en", "train") for q in qids]
    rescored = {q: {d: rnd.choice([0.0, 0.5, 0.5, 1.0, 4.0]) for d in pool if rnd.random() < 0.8} for q in qids}
    return runs, qrels, queries, rescored


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("s, depth, weight", [
    (FusionSpec(("a", "b"), top_k=20), 10, 1.0),
    (FusionSpec(("a", "b"), k=5, top_k=6), 15, 0.5),
    (FusionSpec(("a", "b"), method="weighted", norm="zscore", tiebreak_lane="a", top_k=30), 20, 0.25),
    (FusionSpec(("a", "b"), method="combmnz", depth=6, min_score=0.5), 8, 0.8),
    (FusionSpec(("a", "b"), method="isr", top_k=20), 10, 0.5),
    (FusionSpec(("a", "b"), pin_lane="a", top_k=20), 10, 0.5),
    (FusionSpec(("b",), method="none", top_k=10), 12, 0.4),
    (FusionSpec(("a",), method="none", top_k=3), 1, 0.0),
])
def test_a_reranked_setting_in_memory_equals_ir_measures_on_the_reranked_run(seed, s, depth, weight):
    runs, qrels, queries, rescored = _random_case(seed)
    m = CandidateMatrix(runs, qrels, [q.query_id for q in queries])
    scores = np.full((len(m.query_ids), m.n_cols), np.nan)
    for i, q in enumerate(m.query_ids):
        for c, d in enumerate(m.doc_ids[i]):
            if d in rescored[q]:
                scores[i, c] = rescored[q][d]
    measures = ["R@1", "R@5", "R@10", "P@5", "RR@10", "nDCG@10", "Judged@10"]
    fast = m.evaluate(s, measures, (scores, depth, weight))
    # as config_run does it: fuse to max(top_k, depth), rerank the top depth, cut to top_k
    fused = fuse_spec(runs, replace(s, top_k=max(s.top_k, depth)))
    resc = Run({q: list(v.items()) for q, v in rescored.items()}, "r")
    run = apply_rerank(fused, resc, depth, "x", weight).top(s.top_k)
    ref = evaluate(run, qrels, queries, measures).per_query.set_index("query_id")
    for meas in measures:
        assert fast[meas] == pytest.approx(ref.loc[m.query_ids, meas].to_numpy(float), abs=1e-9), meas


# ---------------------------------------------------------------- the space

EXPERIMENT = tune_fixture.EXPERIMENT + """
[lanes.judge]
kind = "reference"
[rerankers.byjudge]
kind = "lane"
lane = "judge"
[rerankers.bybad]
kind = "lane"
lane = "bad"
[configs.equal-judged]
lanes = ["good", "bad"]
fusion = "rrf"
k = 60
rerank = { reranker = "byjudge", depth = 3, weight = 0.4 }
"""

STUDY = """
name = "rerank-study"
experiment = "experiment.toml"
dataset = "gita"
lanes = ["good", "bad"]
baseline = "equal"
trials = 30
seed = 11
[objective]
measure = "R@1"
[space]
k = { low = 1, high = 100 }
[space.rerank]
reranker = ["none", "byjudge", "bybad"]
depth = [1, 2, 5]
weight = { low = 0.0, high = 1.0 }
"""


def _write(tmp_path, study=STUDY, experiment=EXPERIMENT):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "experiment.toml").write_text(experiment)
    (tmp_path / "study.toml").write_text(study)
    return load_study(tmp_path / "study.toml", known_datasets={"gita"})


@pytest.mark.parametrize("edit, msg", [
    (('reranker = ["none", "byjudge", "bybad"]', 'reranker = ["none", "ce"]'),
     r"space.rerank.reranker names reranker\(s\) \['ce'\] the experiment does not declare"),
    (('reranker = ["none", "byjudge", "bybad"]', 'reranker = "byjudge"'), "space.rerank.reranker must be a list"),
    (("depth = [1, 2, 5]", "depth = [0, 2]"), r"space.rerank.depth must be integers >= 1"),
    (("depth = [1, 2, 5]", "depth = { low = 1.5, high = 4.0 }"), r"space.rerank.depth must be integers >= 1"),
    (("weight = { low = 0.0, high = 1.0 }", "weight = { low = 0.0, high = 1.5 }"), r"space.rerank.weight must lie in \[0, 1\]"),
    (("weight = { low = 0.0, high = 1.0 }", "weight = [-0.5, 1.0]"), r"space.rerank.weight must lie in \[0, 1\]"),
    (("weight = { low = 0.0, high = 1.0 }", "weight = { low = 0.5, high = 0.5 }"), "space.rerank.weight is an empty range"),
    (("weight = { low = 0.0, high = 1.0 }", "cutoff = 3"), r"space.rerank has unknown key\(s\) \['cutoff'\]"),
    (('reranker = ["none", "byjudge", "bybad"]', 'reranker = ["none"]'),
     "space.rerank.depth tunes a rerank stage no trial has"),
    (('measure = "R@1"', 'measure = "R@1"\nlatency = true'), "objective.latency cannot be true for a study that reranks"),
])
def test_bad_rerank_spaces_fail_at_load(tmp_path, edit, msg):
    text = STUDY.replace(*edit)
    assert text != STUDY
    with pytest.raises(ConfigError, match=msg):
        _write(tmp_path, text)


def test_depth_and_weight_without_a_reranker_in_the_space_need_a_baseline_stage(tmp_path):
    text = STUDY.replace('reranker = ["none", "byjudge", "bybad"]\n', "")
    with pytest.raises(ConfigError, match="space.rerank.depth tunes a rerank stage no trial has"):
        _write(tmp_path, text)
    st = _write(tmp_path, text.replace('baseline = "equal"', 'baseline = "equal-judged"'))
    assert st.space["rerank"] == {"depth": (1, 2, 5), "weight": st.space["rerank"]["weight"]}
    params, notes = baseline_params(st)
    # the baseline's depth 3 is not among [1, 2, 5]: trial 0 takes the first, and says so
    assert params == {"k": 60, "rerank.depth": 1, "rerank.weight": 0.4}
    assert notes == ["baseline rerank.depth = 3 is not among [1, 2, 5]; trial 0 uses 1"]


# ---------------------------------------------------------------- suggest, setting_from, rerank_from

def test_suggest_and_the_setting_round_trip(tmp_path):
    import optuna

    from workbench.tuning.objective import rerank_from, setting_from

    st = _write(tmp_path)
    p = {"k": 30, "rerank.reranker": "byjudge", "rerank.depth": 5, "rerank.weight": 0.25}
    assert suggest(optuna.trial.FixedTrial(p), st) == p
    assert setting_from(st, p).k == 30.0 and setting_from(st, p).lanes == ("good", "bad")
    assert rerank_from(st, p) == RerankStage("byjudge", 5, 0.25)
    # "none": no stage, and neither depth nor weight is drawn
    none = {"k": 30, "rerank.reranker": "none"}
    assert suggest(optuna.trial.FixedTrial(none), st) == none
    assert rerank_from(st, none) is None
    # the baseline (no stage) maps to "none"
    assert baseline_params(st) == ({"k": 60, "rerank.reranker": "none"}, [])
    assert rerank_from(st, {"k": 5}) is None


def test_a_baseline_with_a_stage_is_what_trials_start_from(tmp_path):
    from workbench.tuning.objective import rerank_from

    st = _write(tmp_path, STUDY.replace('baseline = "equal"', 'baseline = "equal-judged"')
                .replace("depth = [1, 2, 5]", "depth = { low = 1, high = 10 }"))
    params, notes = baseline_params(st)
    assert params == {"k": 60, "rerank.reranker": "byjudge", "rerank.depth": 3, "rerank.weight": 0.4} and not notes
    assert rerank_from(st, params) == RerankStage("byjudge", 3, 0.4)
    assert rerank_from(st, {"k": 5}) == RerankStage("byjudge", 3, 0.4)  # no rerank.* parameter: the baseline's stage
    assert rerank_from(st, {"rerank.weight": 1.0}) == RerankStage("byjudge", 3, 1.0)
    assert rerank_from(st, {"rerank.reranker": "none", "rerank.depth": 4}) is None


# ---------------------------------------------------------------- a tiny study with a lane reranker

def _judge_run(ds) -> Run:
    """The reranker's lane: the relevant document 5.0, bad's unjudged first document 1.0, x0 0.5."""
    return Run({q.query_id: [Hit(f"rel{q.query_id[1:].lstrip('0') or '0'}", 5.0), Hit(f"a{q.query_id}", 1.0),
                             Hit("x0", 0.5)] for q in ds.queries}, "judge")


def _candidates(st, home, asked: list):
    from workbench.experiment.runner import Engine

    c = tune_fixture.candidates(st, home)
    c._runs[("judge", ())] = _judge_run(c.ds)
    c._lat[("judge", ())] = {q.query_id: 1.0 for q in c.ds.queries}
    engine = Engine(st.experiment, home)

    class Counting:  # records the pairs the study's scores ask the reranker for
        def check_rerankers(self, datasets, names=None):
            engine.check_rerankers(datasets, names)

        def reranker(self, ds, name, runs):
            inner = engine.reranker(ds, name, runs)

            class R:
                def rerank(self, queries, run, documents, depth):
                    if run.name == "candidates":
                        asked.extend((name, q.query_id, h.doc_id) for q in queries for h in run.get_hits(q.query_id))
                    return inner.rerank(queries, run, documents, depth)
            return R()

    c.engine = Counting()
    return c


def test_a_study_tunes_the_rerank_stage_and_reports_the_real_reranked_runs(tmp_path):
    from workbench.tuning.export import export_config
    from workbench.tuning.objective import setting_from
    from workbench.tuning.study import definition, run_study

    st = _write(tmp_path)
    asked: list = []
    cands = _candidates(st, tmp_path / "home", asked)
    res = run_study(st, home=tmp_path / "home", storage="memory", candidates=cands)
    trials = res.optuna_study.trials
    assert trials[0].params == {"k": 60, "rerank.reranker": "none"} and trials[0].values[0] == 0.0
    assert res.baseline_value == 0.0
    # R@1 is 1.0 exactly with byjudge, depth >= 2 and weight > 0 (relN and aqNN tie in RRF and on f)
    assert res.chosen.values[0] == 1.0
    stage = res.chosen_rerank
    assert stage is not None and stage.reranker == "byjudge" and stage.depth >= 2 and stage.weight > 0
    assert any(t.params.get("rerank.reranker") == "bybad" for t in trials)
    # every pair was asked once, however many trials read it
    assert asked and len(asked) == len(set(asked))

    # the honest report is ir_measures on the directly computed reranked run
    setting = setting_from(st, res.chosen_params)
    runs = tune_fixture.runs(cands.ds)
    judge = _judge_run(cands.ds)
    measures = list(res.evaluation.test.measures)
    assert measures == ["R@1", "R@10"]
    for split in ("dev", "test"):
        qs = [q for q in cands.ds.queries if q.split == split]
        fused = fuse_spec(runs, replace(setting, top_k=max(setting.top_k, stage.depth)))
        resc = Run({q: [h for h in judge[q] if h.doc_id in {x.doc_id for x in fused[q][:stage.depth]}] for q in judge},
                   "judge")
        direct = apply_rerank(fused, resc, stage.depth, "x", stage.weight).top(setting.top_k)
        want = evaluate(direct, cands.ds.qrels, qs, measures).overall
        base = evaluate(fuse_spec(runs, st.experiment.configs["equal"]), cands.ds.qrels, qs, measures).overall
        rep = res.evaluation.split(split)
        for meas in measures:
            assert rep.measures[meas].chosen == pytest.approx(want[meas], abs=1e-12)
            assert rep.measures[meas].baseline == pytest.approx(base[meas], abs=1e-12)
        assert rep.measures["R@1"].chosen == 1.0 and rep.measures["R@1"].baseline == 0.0

    out = export_config(res, tmp_path)
    assert out["rerank"] == {"reranker": "byjudge", "depth": stage.depth, "weight": stage.weight, "kind": "lane",
                             "params": {"lane": "judge"}}
    assert definition(st)["rerankers"] == {"byjudge": {"kind": "lane", "params": {"lane": "judge"}},
                                           "bybad": {"kind": "lane", "params": {"lane": "bad"}}}
    # sensitivity varies the weight (a range) of the chosen stage
    assert "rerank.weight" in {r["param"] for r in res.sensitivity}


def test_a_baseline_with_a_rerank_stage_is_evaluated_with_it(tmp_path):
    from workbench.tuning.objective import baseline_value, trial_value
    from workbench.tuning.space import baseline_params as bp

    st = _write(tmp_path, STUDY.replace('baseline = "equal"', 'baseline = "equal-judged"')
                .replace("depth = [1, 2, 5]", "depth = [1, 2, 3]"))
    cands = _candidates(st, tmp_path / "home", [])
    # equal RRF then byjudge over the top 3 at weight 0.4: relN first for every query
    assert baseline_value(st, cands) == 1.0
    assert trial_value(st, cands, bp(st)[0]) == 1.0
    assert trial_value(st, cands, {**bp(st)[0], "rerank.reranker": "none"}) == 0.0
    assert trial_value(st, cands, {**bp(st)[0], "rerank.weight": 0.0}) == 0.0  # the fused order alone: a tie, aqNN first
    assert trial_value(st, cands, {**bp(st)[0], "rerank.depth": 1}) == 0.0


def test_a_missing_reranker_model_fails_before_the_first_trial(tmp_path):
    from workbench.tuning.study import run_study

    exp = EXPERIMENT + '[rerankers.ce]\nkind = "cross-encoder"\nmodel = "models/no-such-ce"\n'
    st = _write(tmp_path, STUDY.replace('reranker = ["none", "byjudge", "bybad"]', 'reranker = ["none", "ce"]'), exp)
    cands = _candidates(st, tmp_path / "home", [])
    with pytest.raises(ConfigError, match="reranker model folder 'models/no-such-ce' is neither"):
        run_study(st, home=tmp_path / "home", storage="memory", candidates=cands)


def test_the_definition_holds_the_rerank_stage_and_old_studies_keep_theirs(tmp_path):
    from workbench.tuning.study import definition

    old = load_study(tune_fixture.write(tmp_path / "old"), known_datasets={"gita"})
    assert not {"rerankers", "baseline_rerank"} & set(definition(old))
    st = _write(tmp_path / "new", STUDY.replace('baseline = "equal"', 'baseline = "equal-judged"'))
    d = definition(st)
    assert d["baseline_rerank"] == {"reranker": "byjudge", "depth": 3, "weight": 0.4}
    assert d["space"]["rerank"]["reranker"] == ["none", "byjudge", "bybad"]
    assert set(d["rerankers"]) == {"byjudge", "bybad"}


def test_the_shipped_rerank_study_loads():

    st = load_study(REPO / "experiments" / "tune-rerank.toml",
                    known_datasets={"gita", "bilara-passages"})
    assert (st.experiment.name, st.dataset, st.split, st.baseline, st.trials) == ("rerank", "gita", "dev", "hybrid", 60)
    assert st.space["rerank"]["reranker"] == ("none", "e5", "ce") and st.space["rerank"]["depth"] == (20, 30)
    assert st.type_weights == {"paraphrase": 1.0, "term": 1.0, "reference": 1.0}
    assert baseline_params(st) == ({"k": 60, "engine.vector.embedder": "minilm", "rerank.reranker": "none"}, [])
