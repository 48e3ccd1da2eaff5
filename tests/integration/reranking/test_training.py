"""``workbench reranker train``: training pairs, the seeded training loop, the model folder and card, the CLI."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from fixtures.paths import REPO
from typer.testing import CliRunner

from workbench.cli import app
from workbench.data.catalog import Dataset
from workbench.errors import ConfigError
from workbench.judging.layers import built_layer
from workbench.reranking import training as rt
from workbench.run import Run
from workbench.text.doctext import index_text
from workbench.types import Document, Qrel, Query, Text

TEXTS = {
    "d1": "Perform your duty without attachment to the fruits of action.",
    "d2": "The wise grieve neither for the living nor for the dead.",
    "d3": "The river flows down to the sea and is still.",
    "d4": "A lamp in a windless place does not flicker.",
    "d5": "Karma yoga is action offered without desire.",
    "d6": "The soul is never born and never dies.",
    "d7": "Food, sleep and recreation in moderation.",
    "d8": "Among the mountains I am Meru.",
}


def _doc(doc_id: str) -> Document:
    return Document(doc_id, doc_id.upper(), "bg", "verse",
                    (Text("transliteration", "sa", "Latn", f"sloka {doc_id}"),
                     Text("translation", "en", "Latn", TEXTS[doc_id], "test")))


def tiny_dataset() -> Dataset:
    docs = [_doc(d) for d in TEXTS]
    queries = [Query("q1", "act without attachment", "paraphrase", "en", "train"),
               Query("q2", "what is karma yoga", "paraphrase", "en", "train"),
               Query("q3", "duty and its fruits", "paraphrase", "en", "dev"),
               Query("q4", "grief for the dead", "paraphrase", "en", "test"),
               Query("q5", "a question nobody answered", "paraphrase", "en", "train")]
    qrels = [Qrel("q1", "d1", 2), Qrel("q1", "d2", 1), Qrel("q1", "d3", 0), Qrel("q1", "d4", 0),
             Qrel("q2", "d5", 1), Qrel("q2", "gone", 1),
             Qrel("q3", "d1", 1), Qrel("q4", "d2", 1), Qrel("q5", "d6", 0)]
    manifest = {"outputs": {"documents.jsonl": "a" * 64, "queries.tsv": "b" * 64, "qrels.txt": "c" * 64}}
    return Dataset("tiny", docs, queries, qrels, manifest)


CANDIDATES = {"q1": ["d2", "d5", "d3", "d6", "d7", "d4", "d8"],  # d2 relevant; d3, d4 judged 0
              "q2": ["d5", "d1", "d2"],
              "q3": ["d7", "d8"], "q4": ["d7"], "q5": ["d1", "d2"]}


def test_training_pairs_hand_counted():
    ds = tiny_dataset()
    pairs, stats = rt.training_pairs(ds, ds.qrels, CANDIDATES, negatives_per_query=3)
    got = [(p.query_id, p.doc_id, p.label, p.kind, p.rank) for p in pairs]
    assert got == [
        ("q1", "d1", 1.0, "positive", None),           # grade 2 first, not a candidate
        ("q1", "d2", 1.0, "positive", 1),
        ("q1", "d3", 0.0, "judged_negative", 3),       # judged 0: before any unjudged one ...
        ("q1", "d4", 0.0, "judged_negative", 6),       # ... even at a lower rank
        ("q1", "d5", 0.0, "unjudged_negative", 2),
        ("q2", "d5", 1.0, "positive", 1),
        ("q2", "d1", 0.0, "unjudged_negative", 2),
        ("q2", "d2", 0.0, "unjudged_negative", 3),
    ]
    assert stats == rt.PairStats(split="train", queries_in_split=3, queries=2, queries_without_positive=1,
                                 positives=3, judged_negatives=2, unjudged_negatives=3, missing_documents=1)
    assert stats.pairs == 8 and stats.negatives == 5
    assert {p.query_id for p in pairs} == {"q1", "q2"}  # no dev / test query, q5 has no positive
    docs = {d.doc_id: d for d in ds.documents}
    assert all(p.text == index_text(docs[p.doc_id]) for p in pairs)
    assert pairs[0].text.startswith(TEXTS["d1"])  # the translation first
    assert pairs[0].query == "act without attachment"

    few, few_stats = rt.training_pairs(ds, ds.qrels, CANDIDATES, negatives_per_query=1)
    assert [(p.query_id, p.doc_id) for p in few if p.label == 0] == [("q1", "d3"), ("q2", "d1")]
    assert (few_stats.judged_negatives, few_stats.unjudged_negatives) == (1, 1)
    none, none_stats = rt.training_pairs(ds, ds.qrels, {}, negatives_per_query=4)
    assert none_stats.negatives == 0 and none_stats.positives == 3

    shuffled, same = rt.training_pairs(ds, ds.qrels, CANDIDATES, negatives_per_query=3, seed=7)
    assert same == stats and sorted(shuffled, key=repr) == sorted(pairs, key=repr) and shuffled != pairs
    again, _ = rt.training_pairs(ds, ds.qrels, CANDIDATES, negatives_per_query=3, seed=7)
    assert again == shuffled


@pytest.mark.parametrize("split", ["dev", "test", "all"])
def test_split_other_than_train_is_refused(split):
    ds = tiny_dataset()
    with pytest.raises(ConfigError, match="held out for evaluation"):
        rt.training_pairs(ds, ds.qrels, CANDIDATES, split=split)
    with pytest.raises(ConfigError, match="dev and test are held out"):
        rt.check_train_split(split)
    assert rt.check_train_split("train") == "train"


EXPERIMENT = """
name = "t"
datasets = ["tiny"]
[embedders.minilm]
kind = "sentence-transformers"
model = "all-MiniLM-L6-v2"
[lanes.vector]
kind = "pgvector"
embedder = "minilm"
[lanes.fts]
kind = "fulltext"
config = "simple"
[lanes.unused]
kind = "trigram"
[lanes.refs]
kind = "reference"
[configs.both]
lanes = ["fts", "vector", "refs"]
[configs.vector]
lanes = ["vector"]
"""


def test_union_candidates_round_robin_and_lanes(tmp_path):
    runs = {"a": Run({"q1": [("x", 3.0), ("y", 2.0), ("z", 1.0)], "q2": [("x", 1.0)]}, "a"),
            "b": Run({"q1": [("y", 9.0), ("w", 8.0)]}, "b")}
    assert rt.union_candidates(runs) == {"q1": ["x", "y", "w", "z"], "q2": ["x"]}
    assert rt.union_candidates(runs, ["q2", "q9"]) == {"q2": ["x"], "q9": []}

    from workbench.experiment.config import load_experiment

    (tmp_path / "t.toml").write_text(EXPERIMENT, encoding="utf-8")
    exp = load_experiment(tmp_path / "t.toml", known_datasets={"tiny"})
    assert rt.default_lanes(exp) == ["vector", "fts"]  # used by a config, declaration order, no reference lane
    assert rt.choose_lanes(exp, ["unused", " fts", "unused"]) == ["unused", "fts"]
    with pytest.raises(ConfigError, match="does not define"):
        rt.choose_lanes(exp, ["nope"])


def test_recipe_checks():
    good = dict(steps=1, batch_size=1, max_length=32, lr=1e-5)
    rt.check_recipe(**good)
    for bad, msg in ((dict(steps=0), "steps must be an integer >= 1"), (dict(batch_size=0), "batch size"),
                     (dict(max_length=1024), "at most 512"), (dict(lr=0.0), "learning rate"),
                     (dict(lr=float("nan")), "learning rate")):
        with pytest.raises(ConfigError, match=msg):
            rt.check_recipe(**{**good, **bad})
    with pytest.raises(ConfigError, match="no training pairs"):
        rt.train([], steps=1, max_length=32)


def test_smoothing_and_summary():
    assert rt.smooth([1.0, 1.0, 1.0]) == pytest.approx([1.0, 1.0, 1.0])
    sm = rt.smooth([1.0, 0.0])
    assert sm[0] == pytest.approx(1.0) and sm[1] == pytest.approx(0.9 * 0.1 / (1 - 0.81))
    s = rt.loss_summary([float(x) for x in range(20, 0, -1)])
    assert s["steps"] == 20 and s["window"] == 2 and s["first_mean"] == 19.5 and s["last_mean"] == 1.5 and s["min"] == 1.0
    assert list(s["smoothed_at"]) == [str(k) for k in range(2, 21, 2)]


def _pairs() -> list[rt.Pair]:
    ds = tiny_dataset()
    docs = {d.doc_id: index_text(d) for d in ds.documents}
    queries = ["act without attachment", "karma yoga", "the eternal soul", "moderation in food", "the lamp"]
    out = []
    for i in range(20):
        q = queries[i % 5]
        d = list(docs)[(i * 3) % 8]
        out.append(rt.Pair(f"q{i % 5}", d, q, docs[d], float(i % 2), "positive" if i % 2 else "unjudged_negative"))
    return out


@pytest.fixture(scope="module")
def trained():
    """A model trained 6 steps on 20 tiny pairs, its curve, and the same again with the same and another seed."""
    pairs = _pairs()
    kw = dict(steps=6, batch_size=4, max_length=32, lr=5e-5)
    seen = []
    model, curve = rt.train(pairs, seed=3, progress=lambda step, loss: seen.append((step, loss)), **kw)
    _m2, again = rt.train(pairs, seed=3, **kw)
    _m3, other = rt.train(pairs, seed=4, **kw)
    return {"model": model, "curve": curve, "again": again, "other": other, "seen": seen, "pairs": pairs}


def test_training_is_reproducible(trained):
    curve = trained["curve"]
    assert len(curve) == 6 and all(np.isfinite(curve)) and all(0.0 < x < 5.0 for x in curve)
    assert trained["again"] == pytest.approx(curve, abs=1e-6)
    assert max(abs(a - b) for a, b in zip(trained["other"], curve)) > 1e-4
    assert trained["seen"] == [(i, x) for i, x in enumerate(curve, 1)]


def _card(ds, stats, curve, folder):
    return rt.model_card(base=None, ds=ds, layer=built_layer(ds), stats=stats, steps=6, batch_size=4, lr=5e-5,
                         max_length=32, seed=3, negatives_per_query=3, losses=curve, wall_s=12.5, train_s=10.0,
                         folder=folder, candidates={"experiment": "experiments/seeds.toml", "lanes": ["vector"],
                                                    "depth": 100}, threads=2)


def test_freezing_leaves_the_top_layers_and_the_head_to_learn():
    """MiniLM-L6: word/position/type embeddings and layers 0-3 frozen; layers 4-5, the pooler and the head train."""
    model = rt.load_base(None, max_length=32, seed=0, threads=1)
    inner = model.model
    total = sum(p.numel() for p in model.parameters())
    left = rt.freeze(model, 4)
    expected = sum(p.numel() for part in (*inner.base_model.encoder.layer[4:], inner.base_model.pooler,
                                          inner.classifier) for p in part.parameters())
    assert left == expected == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert 3.5e6 < left < 3.8e6 and total > 22e6  # 3.7M of 22.7M weights
    assert not any(p.requires_grad for p in inner.base_model.embeddings.parameters())
    assert rt.freeze(rt.load_base(None, max_length=32, seed=0, threads=1), 0) == total
    for too_many in (6, 7):  # 6 would leave only the head; refused from the config before any work, and by freeze
        with pytest.raises(ConfigError, match="leaves none of the 6 layers of the base model to learn; give 0 to 5"):
            rt.check_freeze(None, too_many)
        with pytest.raises(ConfigError, match="leaves none of the 6 layers of the base model to learn; give 0 to 5"):
            rt.freeze(rt.load_base(None, max_length=32, seed=0, threads=1), too_many)
    with pytest.raises(ConfigError, match="frozen layers must be an integer >= 0"):
        rt.check_recipe(steps=1, batch_size=1, max_length=32, lr=1e-5, freeze_layers=-1)


def test_written_folder_loads_and_card_says_what_it_was_trained_on(trained, tmp_path):
    from workbench.reranking.scorers import CrossEncoderScorer, check_cross_encoder_folder, folder_digest

    ds = tiny_dataset()
    _pairs_, stats = rt.training_pairs(ds, ds.qrels, CANDIDATES, negatives_per_query=3)
    folder = tmp_path / "models" / "tiny-ce"
    card = _card(ds, stats, trained["curve"], folder)
    assert rt.write_model(trained["model"], folder, card) == folder
    assert check_cross_encoder_folder(folder) == folder.resolve()
    assert sorted(p.name for p in tmp_path.joinpath("models").iterdir()) == ["tiny-ce"]  # no temporary left

    scorer = CrossEncoderScorer(folder, max_length=32)
    texts = [index_text(d) for d in ds.documents[:3]]
    got = scorer.score("act without attachment", texts)
    want = trained["model"].predict([("act without attachment", t) for t in texts], convert_to_numpy=True)
    assert got.shape == (3,) and np.all((got > 0) & (got < 1))
    np.testing.assert_allclose(got, want, atol=1e-5)

    saved = json.loads((folder / "model_card.json").read_text(encoding="utf-8"))
    assert saved["pairs"] == {"split": "train", "queries_in_split": 3, "queries": 2, "queries_without_positive": 1,
                              "positives": 3, "judged_negatives": 2, "unjudged_negatives": 3, "missing_documents": 1,
                              "queries_other_types": 0, "negatives": 5, "pairs": 8}
    assert "3 of the 5 negatives are unjudged: unjudged negatives may be false negatives" in saved["warning"]
    assert saved["split"] == "train" and saved["qrels"]["layer"] == "built"
    assert saved["dataset"] == {"name": "tiny", "documents_sha256": "a" * 64, "queries_sha256": "b" * 64,
                                "qrels_sha256": "c" * 64}
    assert saved["recipe"]["steps"] == 6 and saved["recipe"]["max_length"] == 32 and saved["recipe"]["seed"] == 3
    assert saved["recipe"]["threads"] == 2 and saved["recipe"]["freeze_layers"] == 0
    assert saved["loss"]["per_step"] == [round(x, 6) for x in trained["curve"]]
    assert saved["loss"]["summary"]["final_smoothed"] == pytest.approx(rt.smooth(trained["curve"])[-1])
    base = rt.resolve_base(None)
    assert saved["base"]["kind"] == "bi-encoder" and saved["base"]["digest"] == folder_digest(base)
    assert set(saved["code_sha256"]) == {"workbench/reranking/training.py", "workbench/reranking/scorers.py"}
    assert all(len(v) == 64 for v in saved["code_sha256"].values())
    assert {"torch", "transformers", "sentence-transformers"} <= set(saved["versions"])
    assert saved["use"] == (f'[rerankers.ce]\nkind = "cross-encoder"\nmodel = "{folder}"\n'
                            "max_length = 32   # the window it was trained with")
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "unjudged negatives may be false negatives" in readme and "3 unjudged negatives" in readme
    assert "**train** only" in readme and "steps 6, batch size 4" in readme
    assert "- frozen: nothing; documents in `index` order; query types: all" in readme  # _card's recipe


def test_overwrite_needs_force_and_never_replaces_what_is_not_a_model(trained, tmp_path):
    ds = tiny_dataset()
    _p, stats = rt.training_pairs(ds, ds.qrels, CANDIDATES)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    card = _card(ds, stats, trained["curve"], mine)
    for force in (False, True):  # someone's folder is never replaced, not even with --force
        with pytest.raises(ConfigError, match="holds no cross-encoder; it is never replaced"):
            rt.write_model(trained["model"], mine, card, force=force)
    assert sorted(p.name for p in mine.iterdir()) == ["keep.txt"]
    folder = tmp_path / "ce"
    folder.mkdir()
    rt.write_model(trained["model"], folder, card)  # an empty folder is no model to lose
    with pytest.raises(ConfigError, match="already holds a cross-encoder; pass --force"):
        rt.write_model(trained["model"], folder, card)
    (folder / "stale.txt").write_text("old")
    rt.write_model(trained["model"], folder, card, force=True)
    assert not (folder / "stale.txt").exists() and (folder / "config.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ce", "mine"]  # the old folder and the temporary are gone
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        rt.write_model(trained["model"], tmp_path / "a-file", card)


def test_interrupted_write_leaves_nothing(trained, tmp_path, monkeypatch):
    ds = tiny_dataset()
    _p, stats = rt.training_pairs(ds, ds.qrels, CANDIDATES)
    folder = tmp_path / "ce"

    def boom(_card):
        raise KeyboardInterrupt

    monkeypatch.setattr(rt, "render_readme", boom)
    with pytest.raises(KeyboardInterrupt):
        rt.write_model(trained["model"], folder, _card(ds, stats, trained["curve"], folder))
    assert list(tmp_path.iterdir()) == []


def test_base_checks(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        rt.resolve_base(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="not a model folder"):
        rt.resolve_base(tmp_path / "empty")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="is a file, not a model folder; give the folder that holds its config.json"):
        rt.resolve_base(tmp_path / "config.json")
    assert (rt.resolve_base("all-MiniLM-L6-v2") / "config.json").is_file()
    assert rt.base_kind(rt.resolve_base(None)) == "bi-encoder"


def _cli(args, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    return CliRunner().invoke(app, ["reranker", "train", *args])


def test_cli_refuses_bad_input(tmp_path, monkeypatch):
    res = _cli(["-d", "gita", "--split", "dev", "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "dev and test are held out for evaluation" in res.output
    assert "Traceback" not in res.output
    res = _cli(["-d", "gita", "--base", str(tmp_path / "no-such-model"), "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "does not exist" in res.output and "no-such-model" in res.output
    res = _cli(["-d", "gita", "--steps", "0", "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "steps must be an integer >= 1" in res.output
    res = _cli(["-d", "gita", "--threads", "0", "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "threads must be an integer >= 1" in res.output
    res = _cli(["-d", "no-such-dataset", "-o", str(tmp_path / "o"), "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "unknown dataset" in res.output and "no-such-dataset" in res.output
    out = tmp_path / "taken"
    out.mkdir()
    (out / "x").write_text("x")
    res = _cli(["-d", "gita", "-o", str(out), "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "holds no cross-encoder; it is never replaced" in res.output
    assert res.output.count("error:") == 1 and (out / "x").read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_empty_read_only_output_folder_is_refused_before_training(tmp_path, monkeypatch):
    out = tmp_path / "ro"
    out.mkdir(mode=0o555)
    try:
        res = _cli(["-d", "gita", "-o", str(out), "--no-mlflow"], tmp_path, monkeypatch)
    finally:
        out.chmod(0o755)
    assert res.exit_code == 2 and f"-o {out} is a folder this user cannot write (mode dr-xr-xr-x)" in res.output
    assert "Traceback" not in res.output


def test_cli_end_to_end_on_gita(data_dir, tmp_path, monkeypatch):
    """The real command on the real gita, 3 steps, when its lanes are in the home's candidate cache."""
    from workbench.data import catalog
    from workbench.experiment.cache import CandidateCache, cache_key
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import Engine
    from workbench.settings import home_dir

    home = home_dir()
    defs = catalog.load_definitions()
    if catalog.status("gita", defs, home=home) != "current":
        pytest.skip("gita is not built in the workbench home; run `workbench data build --only gita`")
    exp_file = REPO / "experiments" / "seeds.toml"
    exp = load_experiment(exp_file)
    ds = catalog.load("gita", defs, home=home, check=False)
    engine, cache = Engine(exp, home), CandidateCache(home / "cache" / "candidates")
    lanes = ["vector", "fts_simple"]
    for lane in lanes:
        key = cache_key(engine.cache_parts(ds, exp.lanes[lane]))
        if not (cache.root / key[:2] / f"{key}.json").is_file():
            pytest.skip(f"lane {lane} of seeds.toml is not cached for gita; run `workbench eval {exp_file}`")
    from workbench._infra import progress

    monkeypatch.setattr(progress, "QUIET_S", 0.0)
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    out = tmp_path / "gita-ce"
    res = CliRunner().invoke(app, ["reranker", "train", "-d", "gita", "-e", str(exp_file), "--lanes", ",".join(lanes),
                                   "--steps", "3", "--batch-size", "4", "--max-length", "64", "-o", str(out),
                                   "--no-mlflow"])
    assert res.exit_code == 0, res.output
    card = json.loads((out / "model_card.json").read_text(encoding="utf-8"))
    train_q = {q.query_id for q in ds.queries if q.split == "train"}
    text_q = {q.query_id for q in ds.queries if q.split == "train" and q.query_type in ("paraphrase", "term")}
    assert card["pairs"]["queries_in_split"] == len(train_q) and card["pairs"]["queries"] > 0
    assert card["pairs"]["queries_other_types"] == len(train_q - text_q) > 0  # the references: not in the text
    assert card["pairs"]["positives"] == sum(1 for r in ds.qrels if r.query_id in text_q and r.relevance > 0)
    assert card["recipe"]["query_types"] == ["paraphrase", "term"]
    assert card["pairs"]["judged_negatives"] == 0  # the built layer grades nothing 0
    assert 0 < card["pairs"]["unjudged_negatives"] <= 4 * card["pairs"]["queries"]
    assert card["candidates"]["cached"] == {"vector": True, "fts_simple": True}
    assert len(card["loss"]["per_step"]) == 3 and card["dataset"]["queries_sha256"] == ds.manifest["outputs"]["queries.tsv"]
    assert f'model = "{out}"' in res.stdout and f"{card['pairs']['pairs']} pairs" in res.stdout
    # not a terminal: whole progress lines with the rate and the ETA (every update here), no carriage returns
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("[workbench] training gita-ce: ")]
    assert [f"{i}/3 step" in " ".join(lines) for i in (1, 2, 3)] == [True] * 3
    assert all("step/s" in ln or "s/step" in ln or "?step/s" in ln for ln in lines) and "ETA" in lines[-1]
    assert card["recipe"]["freeze_layers"] == rt.DEFAULT_FREEZE_LAYERS == 4
    assert card["recipe"]["frozen"] == "word embeddings and layers 0-3"
    assert "\r" not in res.stderr


def test_int8_onnx_path_is_checked_against_torch_once(trained, tmp_path):
    """The int8 export of a trained model: its scores against torch's, the ``auto`` verdict kept and reused."""
    from workbench.reranking import onnx as onnx_ce
    from workbench.reranking.scorers import CrossEncoderScorer, folder_digest

    ds = tiny_dataset()
    folder = tmp_path / "models" / "tiny-ce"
    _pairs_, stats = rt.training_pairs(ds, ds.qrels, CANDIDATES, negatives_per_query=3)
    rt.write_model(trained["model"], folder, _card(ds, stats, trained["curve"], folder))
    home = tmp_path / "home"
    torch_path = CrossEncoderScorer(folder, max_length=32, backend="torch", home=home)
    int8 = CrossEncoderScorer(folder, max_length=32, backend="int8", home=home)
    assert int8.model_id == torch_path.model_id + "/int8" and torch_path.model_id.endswith("/L32")
    texts = [index_text(d) for d in ds.documents]
    ref, got = torch_path.score("act without attachment", texts), int8.score("act without attachment", texts)
    assert got.shape == (8,) and np.all((got > 0) & (got < 1))
    assert np.max(np.abs(got - ref)) < 0.05  # int8 moves a probability by little
    export = onnx_ce.cache_dir(home, folder_digest(folder))
    assert (export / "model-int8.onnx").is_file() and (export / "model.onnx").is_file()
    # fp32 ONNX is the torch model itself: the export is checked to 1e-5
    fp32 = onnx_ce.OnnxCrossEncoder(export / "model.onnx", folder, max_length=32)
    np.testing.assert_allclose(fp32.score("act without attachment", texts), ref, atol=1e-5)

    probe = [("act without attachment", texts), ("the eternal soul", texts[::-1])]
    calls = []
    auto = CrossEncoderScorer(folder, max_length=32, backend="auto", home=home,
                              probe=lambda order: calls.append(1) or probe, log=calls.append)
    v = auto.verdict
    want = onnx_ce.spearman([*torch_path.score(*probe[0]), *torch_path.score(*probe[1])],
                            [*int8.score(*probe[0]), *int8.score(*probe[1])])
    assert v["pairs"] == 16 and v["spearman"] == pytest.approx(want, abs=1e-5)
    assert auto.backend == ("int8" if want >= onnx_ce.MIN_SPEARMAN else "torch") and v["agrees"] == (want >= 0.99)
    assert auto.model_id == (int8.model_id if v["agrees"] else torch_path.model_id)
    assert calls.count(1) == 1 and any("Spearman" in str(c) for c in calls)
    again = CrossEncoderScorer(folder, max_length=32, backend="auto", home=home, probe=lambda order: 1 / 0)
    assert again.backend == auto.backend and again.verdict == v  # kept: no second check
    assert onnx_ce.read_verdict(export, 64) is None  # another window is checked on its own
    with pytest.raises(ConfigError, match="backend must be one of auto, torch, int8"):
        CrossEncoderScorer(folder, backend="fp16", home=home)


def test_spearman_reference_values():
    from workbench.reranking.onnx import spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1,2,3,4) vs (1,3,2,4): d^2 = 0+1+1+0 = 2, rho = 1 - 6*2/(4*15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([5, 5, 5], [1, 1, 1]) == 1.0


def test_latin_first_text_order_puts_the_english_translations_first():
    """A gita-like verse: Hindi translation first in the document, English after; ``latin-first`` swaps them
    within the translation field and leaves the field order (translation, word meanings, ...) as it was."""
    from workbench.text.doctext import index_text

    doc = Document("v", "BG 2.47", "bg", "verse",
                   (Text("root", "sa", "Deva", "कर्मण्येवाधिकारस्ते"),
                    Text("word_meanings", "en", "Latn", "karmaṇi—in prescribed duties"),
                    Text("translation", "hi", "Deva", "तेरा कर्म करने में ही अधिकार है"),
                    Text("translation", "en", "Latn", "You have a right to perform your duty"),
                    Text("translation", "en", "Latn", "Your right is to work only")))
    assert index_text(doc).split("\n") == ["तेरा कर्म करने में ही अधिकार है", "You have a right to perform your duty",
                                           "Your right is to work only", "karmaṇi—in prescribed duties",
                                           "कर्मण्येवाधिकारस्ते"]
    assert index_text(doc, "latin-first").split("\n") == [
        "You have a right to perform your duty", "Your right is to work only", "तेरा कर्म करने में ही अधिकार है",
        "karmaṇi—in prescribed duties", "कर्मण्येवाधिकारस्ते"]
    with pytest.raises(ValueError, match="text order must be one of index, latin-first"):
        index_text(doc, "english")
    ds = Dataset("one", [doc], [Query("q", "duty", "paraphrase", "en", "train")], [Qrel("q", "v", 1)], {})
    pairs, _stats = rt.training_pairs(ds, ds.qrels, {"q": ["v"]}, text_order="latin-first")
    assert pairs[0].text == index_text(doc, "latin-first")
    with pytest.raises(ConfigError, match="text order must be one of"):
        rt.check_recipe(steps=1, batch_size=1, max_length=32, lr=1e-5, text_order="english")


def test_scorer_reads_the_text_order_from_the_model_card(tmp_path):
    from workbench.reranking.scorers import trained_text_order

    assert trained_text_order(tmp_path) == "index"  # no card
    (tmp_path / "model_card.json").write_text(json.dumps({"recipe": {"text_order": "latin-first"}}))
    assert trained_text_order(tmp_path) == "latin-first"
    (tmp_path / "model_card.json").write_text(json.dumps({"recipe": {"text_order": "klingon"}}))
    assert trained_text_order(tmp_path) == "index"
    (tmp_path / "model_card.json").write_text("{not json")
    assert trained_text_order(tmp_path) == "index"


def test_query_types_filter_and_choice():
    ds = tiny_dataset()
    ref = Query("q6", "BG 2.47", "reference", "en", "train")
    ds = Dataset("tiny", ds.documents, [*ds.queries, ref], [*ds.qrels, Qrel("q6", "d1", 1)], ds.manifest)
    cands = {**CANDIDATES, "q6": ["d1", "d2"]}
    every, s_every = rt.training_pairs(ds, ds.qrels, cands, negatives_per_query=3)
    text, s_text = rt.training_pairs(ds, ds.qrels, cands, negatives_per_query=3, query_types=("paraphrase",))
    assert [p for p in every if p.query_id != "q6"] == text and {p.query_id for p in every} == {"q1", "q2", "q6"}
    assert (s_every.queries_in_split, s_every.queries_other_types) == (4, 0)
    assert (s_text.queries_in_split, s_text.queries_other_types, s_text.queries) == (4, 1, 2)
    assert rt.choose_query_types(None, ds) == ("paraphrase",)  # the defaults the dataset has
    assert rt.choose_query_types("all", ds) is None
    assert rt.choose_query_types(" reference , paraphrase,reference", ds) == ("reference", "paraphrase")
    with pytest.raises(ConfigError, match="page_ref is not a query type of tiny; its types: paraphrase, reference"):
        rt.choose_query_types("page_ref", ds)
    with pytest.raises(ConfigError, match="names no query type; tiny's types: paraphrase, reference"):
        rt.choose_query_types(" , ", ds)


# ---------------------------------------------------------------- issue #28: full disk, incomplete folders

def test_a_full_disk_while_saving_is_one_storage_error_and_leaves_no_model(trained, tmp_path):
    """Issue #28 (1): safetensors' own error was raised after the whole run; now a StorageError naming the
    folder, the free space and the fix, and nothing that looks like a model on the disk."""
    import faults

    from workbench.errors import StorageError

    ds = tiny_dataset()
    _p, stats = rt.training_pairs(ds, ds.qrels, CANDIDATES)
    disk = tmp_path / "disk"
    with faults.small_disk(disk, "4m"):  # the model's weights take 90 MB
        folder = disk / "ce"
        with pytest.raises(StorageError) as err:
            rt.write_model(trained["model"], folder, _card(ds, stats, trained["curve"], folder))
        msg = str(err.value)
        assert msg.startswith(f"disk full: cannot write the model to {folder} (")
        assert msg == (f"disk full: cannot write the model to {folder} (4.0 MB free, about 86.6 MB needed); nothing "
                       "was left there: free space on that disk or choose another -o, and train again")
        assert list(disk.iterdir()) == []  # no temporary folder, no config.json


def test_too_little_room_is_refused_before_training(tmp_path, monkeypatch):
    import faults

    need = rt.model_size_estimate(None)
    assert 85e6 < need < 100e6  # MiniLM's 90 MB of weights, its tokenizer and 1 MB
    disk = tmp_path / "disk"
    with faults.small_disk(disk, "4m"):
        res = _cli(["-d", "gita", "-o", str(disk / "ce"), "--no-mlflow"], tmp_path, monkeypatch)
        assert res.exit_code == 2, res.output
        assert f"disk full: the model for {disk / 'ce'} needs about" in res.output
        assert "free; free space there or choose another -o" in res.output
        assert "training" not in res.output.replace("nothing was trained", "")  # refused before any work
        assert list(disk.iterdir()) == []
    assert rt.check_space(tmp_path / "ce", None) == need  # room enough: nothing said


def test_an_incomplete_folder_is_retrained_by_skip_existing_and_refused_by_the_scorer(trained, tmp_path, monkeypatch):
    """Issue #28 (2): a folder with only config.json was kept by --skip-existing and the first search failed."""
    from workbench.reranking.scorers import CrossEncoderScorer, missing_model_parts

    ds = tiny_dataset()
    _p, stats = rt.training_pairs(ds, ds.qrels, CANDIDATES)
    whole = tmp_path / "whole"
    rt.write_model(trained["model"], whole, _card(ds, stats, trained["curve"], whole))
    assert missing_model_parts(whole, card=True) == []
    half = tmp_path / "half"
    half.mkdir()
    (half / "config.json").write_bytes((whole / "config.json").read_bytes())
    assert missing_model_parts(half, card=True) == [
        "weights (model.safetensors or pytorch_model.bin)", "tokenizer (tokenizer.json or vocab.txt)",
        "model_card.json (written last by `workbench reranker train`)"]
    with pytest.raises(ConfigError) as err:
        CrossEncoderScorer(half)
    assert str(err.value) == (
        f"cross-encoder folder {half} is incomplete (missing: weights (model.safetensors or pytorch_model.bin); "
        "tokenizer (tokenizer.json or vocab.txt): a training or a copy that did not finish); train it again with "
        f"`workbench reranker train -o {half} --force`, or give a complete model folder")
    with pytest.raises(ConfigError, match=r"holds an incomplete cross-encoder \(missing: weights"):
        rt.check_destination(half)  # without --force or --skip-existing
    assert rt.check_destination(half, force=True) == half

    def stop(folder, base):  # the first step after the choice: what training would do next
        raise ConfigError(f"stopped before training {folder}")

    monkeypatch.setattr(rt, "check_space", stop)
    res = _cli(["-d", "gita", "-o", str(half), "--skip-existing", "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and f"stopped before training {half}" in res.output
    assert f"{half} holds an incomplete cross-encoder (missing: weights" in res.output
    assert "training it again" in res.output and "kept" not in res.output
    (whole / "model_card.json").unlink()  # usable without its card (a cross-encoder from elsewhere has none): kept
    res = _cli(["-d", "gita", "-o", str(whole), "--skip-existing", "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and f"{whole} already holds a cross-encoder: kept" in res.output
    rt.write_model(trained["model"], whole, _card(ds, stats, trained["curve"], whole), force=True)
    res = _cli(["-d", "gita", "-o", str(whole), "--skip-existing", "--no-mlflow"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and f"{whole} already holds a cross-encoder: kept" in res.output
