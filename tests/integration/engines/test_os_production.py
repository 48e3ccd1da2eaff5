"""A production OpenSearch index, read only: ``opensearch`` lanes with ``index = "NAME"`` and ``workbench export``.

In the shared local node the test makes an index as mint (seed 003, ``iapt-platform/mint``) runs it, named unlike
the workbench's (``mint_prod_<hex>``): its real field names (``content.pali.text``, ``title.pali.text``,
``title.zh``, ``summary.text``, ``bold_single``, ``bold_multi``), ``standard`` + ``lowercase`` analysis with the
``pali_synonyms`` synonym graph at query time (a handful of real lines: forms of a lemma from the corpus, and a
Chinese term, as mint's ``synonyms.txt`` holds), its own ``_id`` and a UUID ``resource_id``. Into it go 300 real
paragraphs of the CST Majjhima aṭṭhakathā (``s0201a``), ``bold_single`` / ``bold_multi`` from their bold spans.
The same paragraphs, keyed by the UUIDs, are the ``files`` dataset the experiment evaluates; the queries are the
paragraphs' line-opening bold headwords (relevant: the paragraphs holding them in bold) and three Chinese terms
that only the synonyms lead to Pali.

Checked: mint's real keyword query as a template lane returns hits (and the synonyms work); the lane wrote
nothing (the index's documents, sequence numbers, mapping and settings, the cluster's indexes and search
pipelines are as before); a missing index and the modes that need the workbench's own fields are one line each;
ids outside the dataset count as unmapped; the cache key follows the index's content; ``export --verify`` of a
one-lane config and of an RRF pipeline gives parity@10 = 1.0 and installs nothing on the cluster.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from retrievers.opensearch import index_state
from workbench.data import catalog
from workbench.data.loaders.cst4 import load_cst4
from workbench.engines.os_index import bold_fields, headings
from workbench.errors import ConfigError, OpenSearchError
from workbench.experiment.config import load_experiment

DOCS = 300
HEADWORDS = 40
SYNONYMS = [  # mint's pali_synonyms: forms of one lemma (and its Chinese term) are one equivalence line
    "pathavī, pathaviṃ, pathavito, pathaviyā, pathaviyaṃ, 地",
    "maññati, maññatī, maññanti, maññamāno, maññanto",
    "bhikkhu, bhikkhuno, bhikkhuṃ, bhikkhunā, bhikkhave, 比丘",
    "nibbāna, nibbānaṃ, nibbānassa, nibbāne, 涅槃",
    "vedanā, vedanaṃ, vedanāya, vedanāsu",
]
CHINESE = {"地": "pathav", "比丘": "bhikkh", "涅槃": "nibbān"}
PALI = {"type": "text", "analyzer": "pali", "search_analyzer": "pali_query_analyzer"}
MAPPING = {  # mint's fields; no vectors: the keyword query is hybrid-free
    "settings": {"number_of_shards": 1, "number_of_replicas": 0, "analysis": {
        "filter": {"pali_synonyms": {"type": "synonym_graph", "synonyms": SYNONYMS, "lenient": True}},
        "analyzer": {"pali": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase"]},
                     "pali_query_analyzer": {"type": "custom", "tokenizer": "standard",
                                             "filter": ["lowercase", "pali_synonyms"]}}}},
    "mappings": {"properties": {
        "resource_id": {"type": "keyword"}, "resource_type": {"type": "keyword"}, "granularity": {"type": "keyword"},
        "title": {"properties": {"display": {"type": "text", "index": False}, "pali": {"properties": {"text": PALI}},
                                 "zh": {"type": "text"}}},
        "summary": {"properties": {"text": {"type": "text"}}},
        "content": {"properties": {"display": {"type": "text", "index": False},
                                   "pali": {"properties": {"text": PALI}}}},
        "bold_single": PALI, "bold_multi": PALI, "page_refs": {"type": "keyword"}, "path": {"type": "keyword"},
        "category": {"type": "keyword"}, "language": {"type": "keyword"}}},
}
#: mint's fuzzy mode as its service sends it: a best_fields multi_match with its boosts.
MINT_QUERY = {"multi_match": {"query": "{{query_text}}", "type": "best_fields", "fields": [
    "bold_single^50", "bold_multi^10", "title.pali.text^3", "title.zh^3", "summary.text^2", "content.pali.text^1"]}}
CONTENT_QUERY = {"match": {"content.pali.text": {"query": "{{query_text}}"}}}
URL_VAR = "MINT_OS_URL"


def _rid(doc_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"mint:{doc_id}"))


def _queries(docs) -> list[tuple[str, dict[str, int]]]:
    """Line-opening bold headwords (4+ letters, at most 3 words, in first-seen order) with the paragraphs holding
    them in bold (grade 2 where the span opens a line), and the Chinese terms (every paragraph with a form)."""
    out: list[tuple[str, dict[str, int]]] = []
    seen: set[str] = set()
    for d in docs:
        for span in d.metadata.get("bold_lead") or ():
            key = span.lower()
            if key in seen or len(re.sub(r"\W", "", key)) < 4 or len(key.split()) > 3 or "…" in key:
                continue
            seen.add(key)
            rel = {_rid(e.doc_id): 2 if key in [b.lower() for b in e.metadata.get("bold_lead") or ()] else 1
                   for e in docs if key in [b.lower() for b in e.metadata.get("bold") or ()]}
            out.append((key, rel))
    out = out[:HEADWORDS]
    for zh, stem in CHINESE.items():
        out.append((zh, {_rid(d.doc_id): 1 for d in docs if re.search(rf"\b{stem}", d.texts[0].text.lower())}))
    return out


@pytest.fixture(scope="module")
def mint(os_cluster, data_dir: Path, tmp_path_factory):
    """The production index in the local node, the files dataset of the same paragraphs and an experiment over
    them; the environment points the lanes at the node (``MINT_OS_URL``) and the definitions at the dataset."""
    from opensearchpy import helpers

    es, url = os_cluster
    docs = load_cst4(data_dir, ["s0201a"])[:DOCS]
    root = tmp_path_factory.mktemp("mint")
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"id": _rid(d.doc_id), "text": d.texts[0].text, "title": " · ".join(headings(d)),
                                "address": d.address}, ensure_ascii=False) + "\n")
    queries = _queries(docs)
    (root / "queries.tsv").write_text("query_id\ttext\tquery_type\tlanguage\tsplit\n" + "".join(
        f"q{i:03d}\t{t}\t{'term' if t in CHINESE else 'headword'}\t{'zh' if t in CHINESE else 'pi'}\ttest\n"
        for i, (t, _r) in enumerate(queries)), encoding="utf-8")
    (root / "qrels.txt").write_text("".join(f"q{i:03d} 0 {d} {g}\n" for i, (_t, rel) in enumerate(queries)
                                            for d, g in rel.items()), encoding="utf-8")
    (root / "datasets.toml").write_text(
        'seed = 1\n[dataset.mint-prod]\nsource = "files"\ndocuments = "corpus.jsonl"\nqueries = "queries.tsv"\n'
        'qrels = ["qrels.txt"]\ntext_fields = { text = "pi" }\ntitle_field = "title"\naddress_field = "address"\n'
        'language = "pi"\n', encoding="utf-8")
    index = f"mint_prod_{uuid.uuid4().hex[:8]}"
    (root / "mint-fuzzy.json").write_text(json.dumps(MINT_QUERY))
    (root / "mint-content.json").write_text(json.dumps(CONTENT_QUERY))
    lane = (f'kind = "opensearch"\nmode = "template"\n'
            f'index = {{ name = "{index}", url_env = "{URL_VAR}", id_field = "resource_id" }}\n')
    (root / "mint.toml").write_text(
        f'name = "mint-prod"\ndatasets = ["mint-prod"]\nmeasures = ["R@10", "nDCG@10"]\ndepth = 50\nsplits = ["test"]\n'
        f'[lanes.mint]\n{lane}template = "{root / "mint-fuzzy.json"}"\n'
        f'[lanes.content]\n{lane}template = "{root / "mint-content.json"}"\n'
        f'[lanes.by_os_id]\nkind = "opensearch"\nmode = "template"\nindex = {{ name = "{index}", url_env = "{URL_VAR}" }}\n'
        f'template = "{root / "mint-fuzzy.json"}"\n'
        '[configs.mint]\nlanes = ["mint"]\n'
        '[configs.mint-rrf]\nlanes = ["mint", "content"]\nfusion = "rrf"\nk = 60\n', encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_DATASETS", str(root / "datasets.toml"))
    mp.setenv(URL_VAR, url)
    mp.setenv("WORKBENCH_OS_URL", url)  # the workbench's own cluster, should anything ask: never a second node
    es.indices.create(index=index, body=MAPPING)
    try:
        actions = []
        # loaded in resource_id order: Lucene's internal doc order, which OpenSearch breaks equal scores by, is then
        # the ids' order, which the workbench breaks them by (loaded in another order, the two differ at ties only,
        # as the export's README says: loaded in corpus order, RRF gave parity@10 41/43 here, both differences at ties)
        for i, d in sorted(enumerate(docs), key=lambda x: _rid(x[1].doc_id)):
            bold = bold_fields(d)
            title = " · ".join(headings(d))
            actions.append({"_index": index, "_id": f"para-{i}", "_source": {
                "resource_id": _rid(d.doc_id), "resource_type": "origin_text", "granularity": "paragraph",
                "title": {"display": title, "pali": {"text": title}, "zh": ""}, "summary": {"text": ""},
                "content": {"display": d.texts[0].text, "pali": {"text": d.texts[0].text}},
                "bold_single": bold["bold_single"], "bold_multi": bold["bold_multi"], "path": f"/mn/{d.doc_id}",
                "category": "atthakatha", "language": "pali"}})
        helpers.bulk(es, actions, refresh=True)
        yield {"es": es, "url": url, "index": index, "root": root, "home": tmp_path_factory.mktemp("mint-home"),
               "queries": queries, "cluster": _cluster(es, index)}
    finally:
        mp.undo()
        es.indices.delete(index=index, ignore_unavailable=True)


def _cluster(es, index: str) -> dict:
    """What a read-only lane must leave as it is: the index's state (uuid, sequence numbers, docs, mapping and
    settings digest), its mapping and settings, the cluster's indexes and search pipelines."""
    try:
        pipelines = sorted(es.transport.perform_request("GET", "/_search/pipeline"))
    except Exception:  # 404: none
        pipelines = []
    return {"state": index_state(es, "", index), "mapping": es.indices.get_mapping(index=index),
            "settings": es.indices.get_settings(index=index), "count": es.count(index=index)["count"],
            "indexes": sorted(i for i in es.indices.get(index="*") if not i.startswith(".")),  # not the plug-ins'
            "pipelines": pipelines}


def _engine(mint, logs: list[str]):
    from workbench.experiment.runner import Engine

    exp = load_experiment(mint["root"] / "mint.toml")
    ds = catalog.ensure("mint-prod", home=mint["home"], log=logs.append)
    return exp, ds, Engine(exp, mint["home"], False, logs.append)


def test_mints_query_reads_the_production_index_and_writes_nothing(mint):
    from workbench.experiment.cache import CandidateCache
    from workbench.experiment.runner import lane_result

    logs: list[str] = []
    exp, ds, engine = _engine(mint, logs)
    res = lane_result(exp.lanes["mint"], ds, engine, CandidateCache(mint["home"] / "cache" / "candidates"), 50,
                      logs.append)
    ids = {d.doc_id for d in ds.documents}
    answered = [q for q in ds.queries if res.run.get_hits(q.query_id)]
    assert len(ds.queries) == HEADWORDS + len(CHINESE) and len(answered) == len(ds.queries)
    assert all(h.doc_id in ids for q in ds.queries for h in res.run.get_hits(q.query_id))
    # a headword finds the paragraph that opens with it in bold (bold_single^50), first
    rel = {q.query_id: {r.doc_id for r in ds.qrels if r.query_id == q.query_id} for q in ds.queries}
    firsts = [q for q in ds.queries if q.query_type == "headword" and res.run.get_hits(q.query_id)[0].doc_id in rel[q.query_id]]
    assert len(firsts) >= 0.9 * HEADWORDS, len(firsts)
    # a Chinese term reaches Pali only through pali_synonyms (地 → pathavī, pathaviṃ, ...)
    by_text = {q.text: q for q in ds.queries}
    for zh in CHINESE:
        assert res.run.get_hits(by_text[zh].query_id)
    assert any(f"reading production index {mint['index']} at {mint['url']} read only" in m for m in logs)
    assert not res.unmapped
    assert _cluster(mint["es"], mint["index"]) == mint["cluster"]  # nothing written, created or installed


def test_a_missing_index_and_the_workbenchs_own_modes_are_one_line_each(mint, tmp_path):
    from workbench.registry import retriever_kind

    logs: list[str] = []
    exp, ds, engine = _engine(mint, logs)
    kind = retriever_kind("opensearch")
    parsed = exp.lanes["mint"].parsed()
    missing = parsed.model_copy(update={"index": parsed.index.model_copy(update={"name": "mint_prod_nowhere"})})
    with pytest.raises(OpenSearchError) as err:
        kind.open("mint", missing, ds, engine)
    assert str(err.value) == (f"lane mint: production index mint_prod_nowhere does not exist at {mint['url']}; the "
                              "workbench reads it and never creates it: check the lane's index (and url_env)")
    with pytest.raises(OpenSearchError, match=f"production index mint_prod_nowhere does not exist at {mint['url']}"):
        kind.cache_extra(missing, ds, engine)
    body = (mint["root"] / "mint.toml").read_text()
    for lane, needle in (('kind = "opensearch"\nmode = "fuzzy"\nindex = { name = "x" }\n', "lanes.bad.index is not "
                          "read by mode 'fuzzy' (only by semantic, template)"),
                         ('kind = "opensearch"\nmode = "template"\ntemplate = "t.json"\nindex = { name = "x", '
                          'id_feld = "resource_id" }\n', "lanes.bad.index.id_feld is not a key of index (did you "
                          "mean id_field?)")):
        f = tmp_path / "bad.toml"
        f.write_text(body + f"[lanes.bad]\n{lane}")
        with pytest.raises(ConfigError) as cerr:
            load_experiment(f)
        assert "lanes.bad" in str(cerr.value) and needle in str(cerr.value) and "\n" not in str(cerr.value)
    assert _cluster(mint["es"], mint["index"]) == mint["cluster"]


def test_ids_outside_the_dataset_are_unmapped_and_fail_the_lane(mint):
    from workbench.experiment.cache import CandidateCache
    from workbench.experiment.runner import lane_result

    logs: list[str] = []
    exp, ds, engine = _engine(mint, logs)
    with pytest.raises(ConfigError) as err:  # _id is mint's own (para-N), not the dataset's UUIDs
        lane_result(exp.lanes["by_os_id"], ds, engine, CandidateCache(mint["home"] / "cache" / "candidates"), 50)
    assert "lanes.by_os_id: 100.0% of the ids" in str(err.value) and "'para-" in str(err.value)


def test_the_cache_key_follows_the_index_content(mint):
    es, index = mint["es"], f"{mint['index']}_state"
    es.indices.create(index=index, body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    try:
        es.index(index=index, id="a", body={"x": 1}, refresh=True)
        one = index_state(es, "", index)
        es.index(index=index, id="a", body={"x": 2}, refresh=True)  # an update: the docs count stays 1
        two = index_state(es, "", index)
        assert one[index]["docs"] == two[index]["docs"] == 1 and one != two
        assert two == index_state(es, "", index)  # a read changes nothing
        es.indices.delete(index=index)
        es.indices.create(index=index, body={"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
        es.index(index=index, id="a", body={"x": 1}, refresh=True)
        three = index_state(es, "", index)  # re-created: the same seq_no, another uuid
        assert three[index]["max_seq_no"] == one[index]["max_seq_no"] and three[index]["uuid"] != one[index]["uuid"]
    finally:
        es.indices.delete(index=index, ignore_unavailable=True)


def test_export_and_verify_on_the_production_index_give_parity_one(mint):
    from workbench.export import job

    out = mint["root"] / "export"
    reports = {}
    for config in ("mint", "mint-rrf"):
        logs: list[str] = []
        src = job.from_experiment(mint["root"] / "mint.toml", config, "mint-prod")
        got = job.write(src, "opensearch", out, home=mint["home"], verify=True, splits=("test",), log=logs.append)
        reports[config] = got["parity"]
        assert got["parity"].queries == HEADWORDS + len(CHINESE)
        assert any("read only: nothing is installed or written there" in m for m in logs)
    print("\n" + "\n".join(f"{c}: {r.summary()}" for c, r in reports.items()))
    assert {c: r.parity_at_10 for c, r in reports.items()} == {"mint": 1.0, "mint-rrf": 1.0}
    request = json.loads((out / "mint-rrf.search.json").read_text())
    subs = request["query"]["hybrid"]["queries"]
    assert subs[0] == MINT_QUERY and subs[1] == CONTENT_QUERY and request["docvalue_fields"] == ["resource_id"]
    one = json.loads((out / "mint.search.json").read_text())
    assert one["sort"] == [{"_score": "desc"}, {"resource_id": "asc"}]
    readme = (out / "mint-rrf.opensearch.md").read_text()
    assert f"Written against your index `{mint['index']}`" in readme and "PUT _search/pipeline/wb-mint-rrf" in readme
    meta = json.loads((out / "mint-rrf.export.json").read_text())
    assert meta["opensearch"]["read_only"] is True and meta["parity"]["parity@10"] == 1.0
    assert _cluster(mint["es"], mint["index"]) == mint["cluster"]  # verify installed no pipeline there


def test_a_closed_index_is_said_to_be_closed_not_unreadable():
    """The cache key reads the index's _stats, which a closed index refuses: the line says it is closed (the
    workbench never opens it), not that a privilege is missing. No node needed: the client is a stand-in."""

    class Closed(Exception):
        info = {"error": {"root_cause": [{"type": "index_closed_exception", "reason": "closed"}]}}

    class Indices:
        def stats(self, **_kw):
            raise Closed()

    class Client:
        indices = Indices()

    with pytest.raises(OpenSearchError) as err:
        index_state(Client(), "https://search.example.org:9200", "mint_prod")
    msg = str(err.value)
    assert "production index mint_prod at https://search.example.org:9200 is closed" in msg
    assert "POST mint_prod/_open" in msg and "privilege" not in msg and "\n" not in msg
