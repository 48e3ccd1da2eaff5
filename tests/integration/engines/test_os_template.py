"""The ``template`` mode of the ``opensearch`` lane: the query DSL a team really sends, from a file with placeholders.

On the real local node over the gita (about 700 verses): a template equal to the ``fuzzy`` mode's query returns
that lane's run exactly (ids, order and scores) for every 10th real query; a k-NN template returns the ``semantic``
lane's documents with OpenSearch's raw score (``(1 + cos) / 2``); bad templates fail at load naming the fix; query
text hostile to JSON goes in as a value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrievers.opensearch import OpenSearchLane, fill_template, read_template, template_problem
from workbench.data import catalog
from workbench.engines.os_index import index_dataset
from workbench.errors import ConfigError, OpenSearchError
from workbench.experiment.config import load_experiment
from workbench.testing import WordHashEmbedder
from workbench.types import Query

EMB = WordHashEmbedder(64)
FUZZY = {"match": {"content.text": {"query": "{{query_text}}", "fuzziness": "AUTO", "operator": "or",
                                    "max_expansions": "{{max_expansions}}"}}}
KNN = {"knn": {"content.vector": {"vector": "{{query_vector}}", "k": "{{k}}",
                                  "method_parameters": {"ef_search": "{{ef_search}}"}}}}


@pytest.fixture(scope="module")
def gita(built_home: Path, data_dir: Path):
    ds = catalog.load("gita", catalog.load_definitions(), data_dir, built_home)
    return ds, sorted(ds.queries, key=lambda q: q.query_id)[::10]


@pytest.fixture(scope="module")
def index(os_cluster, gita):
    es, url = os_cluster
    info = index_dataset(es, url, gita[0], EMB)
    es.indices.forcemerge(index=info.name, max_num_segments=1)  # no merge between two lanes' requests
    es.indices.refresh(index=info.name)
    return info


def test_a_template_equal_to_the_fuzzy_mode_reproduces_its_run_exactly(os_cluster, index, gita):
    es, url = os_cluster
    queries = gita[1]
    fuzzy = OpenSearchLane("fuzzy", es, index.name, "fuzzy", url=url)
    templ = OpenSearchLane("templ", es, index.name, "template", url=url, template={"query": FUZZY})
    want, got = fuzzy.search(queries, 50), templ.search(queries, 50)
    assert len(queries) == 180
    assert sum(1 for q in queries if want.get_hits(q.query_id)) == 120  # answered (references find no words)
    for q in queries:
        assert [(h.doc_id, h.score) for h in got.get_hits(q.query_id)] == \
            [(h.doc_id, h.score) for h in want.get_hits(q.query_id)], q.query_id


def test_a_knn_template_returns_the_semantic_lanes_documents_with_the_raw_score(os_cluster, index, gita):
    es, url = os_cluster
    queries = gita[1][:40]
    sem = OpenSearchLane("sem", es, index.name, "semantic", url=url, embedder=EMB, ef_search=100)
    templ = OpenSearchLane("templ", es, index.name, "template", url=url, embedder=EMB, ef_search=100, template=KNN)
    want, got = sem.search(queries, 20), templ.search(queries, 20)
    for q in queries:
        w, g = want.get_hits(q.query_id), got.get_hits(q.query_id)
        assert [h.doc_id for h in g] == [h.doc_id for h in w], q.query_id
        # lucene's cosinesimil score is (1 + cos) / 2: the semantic mode reports cos = 2 * score - 1
        assert all(abs((2 * a.score - 1) - b.score) < 1e-6 for a, b in zip(g, w))


def test_query_text_goes_in_as_a_json_value(os_cluster, index):
    es, url = os_cluster
    templ = OpenSearchLane("templ", es, index.name, "template", url=url, template=FUZZY)
    hostile = ['say "{{k}}" and }} {"match_all": {}}', "back\\slash \\\" quote", "{{query_text}}", "$$ '; --"]
    run = templ.search([Query(f"h{i}", t, "term", "und", "test") for i, t in enumerate(hostile)], 10)
    body = templ.query_body(hostile[0], 10)
    assert body["query"]["match"]["content.text"]["query"] == hostile[0]  # the text, whole, as the value
    assert FUZZY["match"]["content.text"]["query"] == "{{query_text}}"  # the template is not changed
    assert len(run.get_hits("h0")) < 10 or run.get_hits("h0")  # answered, never a match_all
    assert fill_template({"query": {"term": {"x": "{{k}}"}}}, {"{{k}}": 7}) == {"term": {"x": 7}}


@pytest.mark.parametrize("template, embedder, needle", [
    ({"match": {"content.text": "find {{query_text}} here"}}, False, "must be a whole JSON string value"),
    ({"match": {"content.text": "{{query}}"}}, False, "must be a whole JSON string value"),
    ({"match_all": {}}, False, "no \"{{query_text}}\" and no \"{{query_vector}}\""),
    ({"query": FUZZY, "size": 5}, False, "keys ['size'] besides query"),
    (KNN, False, "names no embedder: add embedder"),
    (FUZZY, True, "drop the embedder"),
    ([FUZZY], False, "must be a JSON object"),
])
def test_bad_templates_are_named_with_the_fix(template, embedder, needle):
    assert needle in template_problem(template, embedder)


def test_a_template_file_is_checked_when_the_experiment_loads(tmp_path):
    exp = """
name = "t"
datasets = ["gita"]
[lanes.mint]
kind = "opensearch"
mode = "template"
template = "{path}"
[configs.mint]
lanes = ["mint"]
"""
    (tmp_path / "ok.json").write_text(json.dumps(FUZZY))
    (tmp_path / "bad.json").write_text('{"match": {"content.text": "{{query_text}} x"}}')
    (tmp_path / "broken.json").write_text('{"match": ')
    for name, needle in (("ok.json", None), ("bad.json", "whole JSON string value"), ("broken.json", "not readable JSON"),
                         ("missing.json", "not found")):
        f = tmp_path / f"{name}.toml"
        f.write_text(exp.format(path=tmp_path / name))
        if needle is None:
            assert load_experiment(f).lanes["mint"].parsed().template == str(tmp_path / name)
            assert read_template(str(tmp_path / name)) == FUZZY
        else:
            with pytest.raises(ConfigError) as err:
                load_experiment(f)
            assert "lanes.mint" in str(err.value) and needle in str(err.value)


def test_a_template_the_node_refuses_names_the_lane_and_the_reason(os_cluster, index):
    es, url = os_cluster
    templ = OpenSearchLane("templ", es, index.name, "template", url=url,
                           template={"match": {"content.text": {"query": "{{query_text}}", "fuzziness": "lots"}}})
    with pytest.raises(OpenSearchError) as err:
        templ.search([Query("q", "karma", "term", "und", "test")], 10)
    assert "lane templ" in str(err.value) and "fuzziness" in str(err.value).lower()
