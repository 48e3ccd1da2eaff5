"""Experiment configs: the shipped files load, and bad configs fail at load with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.paths import REPO

from workbench.errors import ConfigError
from workbench.experiment.config import load_experiment
from workbench.experiment.tracking import metric_key

ROOT = REPO
KNOWN = {"gita", "bilara-segments", "bilara-passages", "cst4-mn", "bilara-filtered", "cst4-mn-filtered",
         "gita-negatives"}

BASE = """
name = "t"
datasets = ["gita"]
[embedders.e]
kind = "hash"
[lanes.vector]
kind = "pgvector"
embedder = "e"
[lanes.fts]
kind = "fulltext"
config = "simple"
[configs.both]
lanes = ["vector", "fts"]
fusion = "rrf"
k = 60
"""


def load(tmp_path, text):
    p = tmp_path / "e.toml"
    p.write_text(text)
    return load_experiment(p, known_datasets=KNOWN)


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "experiments").glob("*.toml")
                                         if not p.name.startswith(("tune-", "gate-"))))
def test_shipped_experiments_load(path):
    exp = load_experiment(path, known_datasets=KNOWN)
    assert exp.configs and exp.lanes_used()


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("gate-*.toml")))
def test_shipped_gate_files_load(path):
    from workbench.gate.policy import load_gate_file

    gf = load_gate_file(path)
    exp = load_experiment(gf.experiment, known_datasets=KNOWN)
    for ds, configs in gf.expected.items():
        assert ds in exp.datasets and set(configs) <= set(exp.configs)


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("tune-*.toml")))
def test_shipped_studies_load(path):
    from workbench.tuning.space import load_study

    st = load_study(path, known_datasets=KNOWN)
    assert st.space and st.baseline in st.experiment.configs


def test_seed_config_reproduces_aicharya():
    exp = load_experiment(ROOT / "experiments" / "seeds.toml", known_datasets=KNOWN)
    cfg = exp.configs["aicharya-rrf60"]
    assert cfg.method == "rrf" and cfg.k == 60 and cfg.tiebreak_lane == "vector"
    assert {exp.lanes[n].kind for n in cfg.lanes} == {"pgvector", "fulltext", "trigram"}
    assert {exp.lanes[n].params.get("config") for n in cfg.lanes if exp.lanes[n].kind == "fulltext"} == {"russian", "simple"}
    kb = load_experiment(ROOT / "experiments" / "kb.toml", known_datasets=KNOWN)
    assert kb.configs["kb-top6"].top_k == 6 and kb.datasets == ("bilara-passages", "cst4-mn")


def test_valid_minimal(tmp_path):
    exp = load(tmp_path, BASE)
    assert exp.configs["both"].params()["k"] == 60.0
    assert exp.lanes_used() == ["vector", "fts"]


@pytest.mark.parametrize("edit,needle", [
    (('kind = "fulltext"', 'kind = "bm99"'), "lanes.fts.kind"),
    (('config = "simple"', 'config = "klingon"'), "lanes.fts.config"),
    (('config = "simple"', 'config = "simple"\nef_search = 10'), "lanes.fts.ef_search"),
    (('lanes = ["vector", "fts"]', 'lanes = ["vector", "nope"]'), "unknown lane"),
    (('k = 60', 'k = 60\nweights = {vector = 1.0}'), "one weight for each lane"),
    (('k = 60', 'k = 60\nweights = {vector = 1.0, fts = 1.0, zz = 2.0}'), "one weight for each lane"),
    (('k = 60', 'k = -1'), "configs.both.k"),
    (('k = 60', 'k = 60\ndepth = {zz = 3}'), "depth"),
    (('k = 60', 'k = 60\ntiebreak_lane = "zz"'), "tiebreak_lane"),
    (('fusion = "rrf"', 'fusion = "borda"'), "fusion"),
    (('datasets = ["gita"]', 'datasets = ["nope"]'), "unknown dataset"),
    (('datasets = ["gita"]', 'datasets = ["gita"]\nmeasures = ["recall@ten"]'), "measures"),
    (('datasets = ["gita"]', 'datasets = ["gita"]\nsplits = ["holdout"]'), "splits"),
    (('embedder = "e"', 'embedder = "zz"'), "embedders.zz"),
    (('kind = "hash"', 'kind = "cohere"'), "embedders.e.kind"),
    (('kind = "hash"', 'kind = "openai"'), "base_url"),  # a real kind since #29: what it lacks is named
    (('name = "t"', 'name = "t"\ncolour = 1'), "unknown key"),
    (('k = 60', 'k = 60\nlane_min_score = { zz = 0.3 }'), "configs.both.lane_min_score"),
    (('k = 60', 'k = 60\nlane_min_score = { vector = "high" }'), "configs.both.lane_min_score"),
])
def test_bad_configs_fail_at_load_naming_the_key(tmp_path, edit, needle):
    old, new = edit
    assert old in BASE
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load(tmp_path, BASE.replace(old, new, 1))


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_experiment(tmp_path / "nope.toml", known_datasets=KNOWN)
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(tmp_path, "[configs\n")
    with pytest.raises(ConfigError, match="no \\[configs"):
        load(tmp_path, 'datasets = ["gita"]\n')


@pytest.mark.parametrize("measure,key", [("R@10", "recall_at_10"), ("nDCG@10", "ndcg_at_10"), ("RR@10", "mrr_at_10"),
                                         ("P@5", "precision_at_5"), ("Judged@10", "judged_at_10")])
def test_metric_names_are_sanitised_for_mlflow(measure, key):
    assert metric_key(measure) == key
    assert "@" not in metric_key(measure)


@pytest.mark.parametrize("edit,needle", [
    (('name = "t"', 'name = 5'), "name must be"),
    (('k = 60', 'k = 60\nmin_score = true'), "min_score"),
    (('kind = "hash"', 'kind = "sentence-transformers"\nmodel = "/nonexistent/model"'), "embedders.e.model"),
])
def test_more_bad_values_fail_at_load(tmp_path, edit, needle):
    old, new = edit
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load(tmp_path, BASE.replace(old, new, 1))


def test_tracking_uri_is_checked_before_the_evaluation(tmp_path, monkeypatch):
    from workbench.experiment.tracking import check_tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "bogus://x")
    with pytest.raises(ConfigError, match="unsupported scheme"):
        check_tracking(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}")
    with pytest.raises(ConfigError, match="folder"):
        check_tracking(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'sub' / 'm.db'}")
    check_tracking(tmp_path)


@pytest.mark.parametrize("kind", ["missing", "folder", "latin1"])
def test_search_cli_bad_query_file_exits_2(tmp_path, kind):
    from typer.testing import CliRunner

    from workbench.cli import app

    exp = tmp_path / "e.toml"
    exp.write_text(BASE)
    target = {"missing": tmp_path / "nope.txt", "folder": tmp_path}.get(kind, tmp_path / "latin1.txt")
    if kind == "latin1":
        target.write_bytes("sanātana".encode("latin-1", errors="replace") + b"\xe9\xff\n")
    res = CliRunner().invoke(app, ["search", "-e", str(exp), "-c", "both", "--file", str(target)])
    assert res.exit_code == 2, res.output
    assert "query file" in res.output and "Traceback" not in res.output


# ---------------------------------------------------------------- opensearch lanes

OS_BASE = '''
name = "os"
datasets = ["gita"]
[embedders.e]
kind = "hash"
[configs.c]
lanes = ["x"]
'''


@pytest.mark.parametrize("lane, msg", [
    ('kind = "opensearch"', "needs mode"),
    ('kind = "opensearch"\nmode = "bm25"', "mode must be one of"),
    ('kind = "opensearch"\nmode = "semantic"', "mode 'semantic' needs embedder"),
    ('kind = "opensearch"\nmode = "semantic"\nembedder = "nope"', r"names no \[embedders.nope\]"),
    ('kind = "opensearch"\nmode = "fuzzy"\nembedder = "e"', "is not read by mode 'fuzzy'"),
    ('kind = "opensearch"\nmode = "exact"\nfuzziness = "AUTO"', "is not read by mode 'exact'"),
    ('kind = "opensearch"\nmode = "fuzzy"\nfuzziness = 3', "must be \"AUTO\" or 0, 1, 2"),
    ('kind = "opensearch"\nmode = "fuzzy"\nfuzziness = true', "must be \"AUTO\" or 0, 1, 2"),
    ('kind = "opensearch"\nmode = "page_ref"\nef_search = 10', "is not read by mode 'page_ref'"),
    ('kind = "opensearch"\nmode = "lemma"\nboost = 2', "is not a parameter of opensearch"),
])
def test_bad_opensearch_lanes_fail_at_load(tmp_path, lane, msg):
    p = tmp_path / "e.toml"
    p.write_text(OS_BASE + "[lanes.x]\n" + lane + "\n")
    with pytest.raises(ConfigError, match=msg):
        load_experiment(p, known_datasets={"gita"})


def test_a_good_opensearch_lane_loads(tmp_path):
    p = tmp_path / "e.toml"
    p.write_text(OS_BASE + '[lanes.x]\nkind = "opensearch"\nmode = "semantic"\nembedder = "e"\nef_search = 64\n')
    exp = load_experiment(p, known_datasets={"gita"})
    assert exp.lanes["x"].params == {"mode": "semantic", "embedder": "e", "ef_search": 64}


def test_the_shipped_mint_experiment_loads():
    exp = load_experiment(Path("experiments/mint.toml"))
    assert exp.configs["os-hybrid-7-3"].weights == {"os_fuzzy": 0.7, "os_semantic": 0.3}
    assert {exp.lanes[n].params["mode"] for n in exp.lanes if exp.lanes[n].kind == "opensearch"} == \
        {"fuzzy", "exact", "lemma", "page_ref", "semantic", "template"}
    # mint as deployed: its real queries, read from files, and its hybrid as the sum of its two clauses
    assert exp.lanes["mint_hybrid"].parsed().template == "experiments/templates/mint-hybrid.json"
    assert exp.configs["mint-hybrid-as-clauses"].norm == "raw"
    assert exp.configs["mint-hybrid-as-clauses"].weights == {"mint_keyword": 0.7, "mint_knn": 0.3}


@pytest.mark.parametrize("extra, lane, msg", [
    ("depth = 20000\n", 'kind = "opensearch"\nmode = "fuzzy"', r"(?i)depth is 20000, more than OpenSearch lanes return"),
    ("", 'kind = "opensearch"\nmode = "semantic"\nembedder = "e"\nef_search = 100000', r"must be an integer in 1..10000"),
    ("", 'kind = "opensearch"\nmode = "fuzzy"\nmax_query_chars = 1000000', r"must be an integer in 1..10000"),
])
def test_opensearch_limits_are_checked_at_load(tmp_path, extra, lane, msg):
    p = tmp_path / "e.toml"
    p.write_text(extra + OS_BASE + "[lanes.x]\n" + lane + "\n")
    with pytest.raises(ConfigError, match=msg):
        load_experiment(p, known_datasets={"gita"})


@pytest.mark.parametrize("body, msg", [
    ('pin_lane = "fts"', r"configs.both.pin_lane names lane 'fts' of kind 'fulltext'; only a reference lane"),
    ('pin_lane = "ref"', r"configs.both.pin_lane must be one of the config's lanes \['vector', 'fts'\]"),
])
def test_pin_lane_must_be_a_reference_lane_of_the_config(tmp_path, body, msg):
    with pytest.raises(ConfigError, match=msg):
        load(tmp_path, BASE + body + '\n[lanes.ref]\nkind = "reference"\n')


def test_a_pinned_config_loads_and_is_tracked(tmp_path):
    text = BASE.replace('lanes = ["vector", "fts"]', 'lanes = ["vector", "fts", "ref"]') + \
        'pin_lane = "ref"\n[lanes.ref]\nkind = "reference"\n'
    cfg = load(tmp_path, text).configs["both"]
    assert cfg.pin_lane == "ref" and cfg.flat()["pin_lane"] == "ref" and cfg.params()["pin_lane"] == "ref"


def test_term_r10_by_script_with_the_gap_over_the_same_words():
    """By hand: lemma A asked in all four scripts, lemma B in three (no IAST form: it has no diacritics)."""
    from types import SimpleNamespace as NS

    import pandas as pd

    from workbench.experiment.report import by_script_frame
    from workbench.types import Query

    rows = [("a-iast", "IAST", 1.0), ("a-ascii", "ASCII", 1.0), ("a-cyr", "Cyrillic", 1.0), ("a-deva", "Devanagari", 0.5),
            ("b-ascii", "ASCII", 0.0), ("b-cyr", "Cyrillic", 0.5), ("b-deva", "Devanagari", 0.0),
            ("p1", "ASCII", 0.0)]  # a paraphrase: not a term query
    per_q = pd.DataFrame([{"query_id": q, "query_type": "paraphrase" if q == "p1" else "term", "split": "test",
                           "language": "sa", "script": s, "R@10": v} for q, s, v in rows])
    queries = [Query(q, q, "term", "sa", "test", f"lemma:{q[0]}") for q, _s, _v in rows]
    cr = NS(dataset="gita", config=NS(name="c"), evaluation=NS(per_query=per_q))
    got = by_script_frame(NS(configs=[cr], datasets={"gita": NS(queries=queries)}), "R@10")
    table = {r.script: (r.n, round(r["R@10"], 12)) for _i, r in got.iterrows()}
    # IAST 1; ASCII (1 + 0)/2; Cyrillic (1 + 0.5)/2; Devanagari (0.5 + 0)/2; gap 1 − 0.25 over all 7 term queries;
    # over lemma A alone (the words every script asks): 1, 1, 1, 0.5 → 0.5
    assert table == {"IAST": (1, 1.0), "ASCII": (2, 0.5), "Cyrillic": (2, 0.75), "Devanagari": (2, 0.25),
                     "gap": (7, 0.75), "gap (same words)": (4, 0.5)}
    # without the datasets (a result read back) there is no same-words row
    assert "gap (same words)" not in set(by_script_frame(NS(configs=[cr]), "R@10").script)


def test_an_error_in_a_template_lane_names_its_key_not_the_mode(tmp_path):
    """A newcomer found ``lanes.os.template.exact``: the union's tag ``template`` is also a field of that mode."""
    text = BASE.replace('[configs.both]', '[lanes.os]\nkind = "opensearch"\nmode = "template"\ntemplate = "t.json"\n'
                        'exact = true\n[configs.both]')
    with pytest.raises(ConfigError, match=r"lanes\.os\.exact ") as err:
        load(tmp_path, text)
    assert "lanes.os.template.exact" not in str(err.value)
    with pytest.raises(ConfigError, match=r"lanes\.os\.filter_mode"):
        load(tmp_path, text.replace('mode = "template"\ntemplate = "t.json"\nexact = true',
                                    'mode = "semantic"\nembedder = "e"\nfilter_mode = "pre"'))


def test_a_deleted_mlflow_experiment_is_refused_before_the_work_with_the_way_out(tmp_path, monkeypatch):
    """Issue #41: an experiment deleted in MLflow's UI let `workbench eval` run to its end, then fail."""
    import mlflow

    from workbench.experiment.tracking import check_tracking, tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    check_tracking(tmp_path, "seeds")  # a store without the experiment: it will be created
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(tmp_path))
    exp_id = client.create_experiment("seeds")
    check_tracking(tmp_path, "seeds")
    client.delete_experiment(exp_id)
    with pytest.raises(ConfigError) as err:
        check_tracking(tmp_path, "seeds")
    assert f"'seeds' (id {exp_id})" in str(err.value) and "is deleted" in str(err.value)
    assert f"mlflow experiments restore --experiment-id {exp_id}" in str(err.value) and "mlflow gc" in str(err.value)
    client.restore_experiment(exp_id)
    check_tracking(tmp_path, "seeds")
