"""OpenSearch: analyzers, mapping, lanes and errors against a real node (see conftest ``os_cluster``).

The corpus is MN 1 and MN 10 of the real bilara segments (about 800 segments), with the
real ms-dpd lemma rules. Known values: MN 10's ``mn10:2.1`` is where PTS page M i 56
starts and holds ``Ekāyano ayaṁ, bhikkhave, maggo``; DPD maps ``dhammo`` → ``dhamma``
and ``bhikkhave`` → ``bhikkhu``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrievers.opensearch import MODES, OpenSearchLane, page_query_key
from workbench.data import catalog
from workbench.data.catalog import Dataset
from workbench.data.loaders.dpd import load_dpd
from workbench.engines import os_client as osearch
from workbench.engines.os_index import index_body, index_dataset, lemma_rules, page_keys
from workbench.errors import ConfigError
from workbench.protocols import Retriever
from workbench.testing import WordHashEmbedder, check_lane
from workbench.types import Query

EMB = WordHashEmbedder(64)
RESERVED = ["/", ":", "(", ")", '"', "~", "*", 'mettā / : ( ) " ~ *', "M i 56)", "(bhikkhave", 'a:"b~2*" OR (c)']


def Q(qid: str, text: str, qtype: str = "term") -> Query:
    return Query(qid, text, qtype, "und", "test")


@pytest.fixture(scope="session")
def lexicon(data_dir: Path):
    return load_dpd(data_dir)


@pytest.fixture(scope="session")
def mn(built_home: Path, data_dir: Path) -> Dataset:
    full = catalog.load("bilara-segments", catalog.load_definitions(), data_dir, built_home)
    docs = [d for d in full.documents if d.work_id in ("mn1", "mn10")]
    return Dataset("test-mn", docs, [], [], {})


@pytest.fixture(scope="session")
def index(os_cluster, mn: Dataset, lexicon):
    es, url = os_cluster
    return index_dataset(es, url, mn, EMB, lexicon=lexicon)


#: The template mode's lane in the mode-by-mode tests: the fuzzy mode's query as a template
#: (tests/integration/engines/test_os_template.py shows it returns the fuzzy lane's run exactly).
FUZZY_TEMPLATE = {"match": {"content.text": {"query": "{{query_text}}", "fuzziness": "AUTO", "operator": "or",
                                             "max_expansions": "{{max_expansions}}"}}}


def lane(os_cluster, index, mode: str, **kw) -> OpenSearchLane:
    es, url = os_cluster
    if mode == "template":
        kw.setdefault("template", FUZZY_TEMPLATE)
    return OpenSearchLane(f"os_{mode}", es, index.name, mode, url=url,
                          embedder=EMB if mode == "semantic" else None, **kw)


def tokens(os_cluster, index, analyzer: str, text: str) -> list[str]:
    es, _ = os_cluster
    return [t["token"] for t in es.indices.analyze(index=index.name, body={"analyzer": analyzer, "text": text})["tokens"]]


# ---------------------------------------------------------------- analyzers and mapping

def test_icu_folding_removes_pali_diacritics_and_case(os_cluster, index):
    assert tokens(os_cluster, index, "wb_text", "Mettā SAṂYUTTA saṁyutta Ñāṇa ḍ ḷ") == \
        ["metta", "samyutta", "samyutta", "nana", "d", "l"]


def test_words_analyzer_keeps_diacritics_and_composes_nfd(os_cluster, index):
    import unicodedata

    assert tokens(os_cluster, index, "wb_words", unicodedata.normalize("NFD", "Mettā Ñāṇa")) == ["mettā", "ñāṇa"]


def test_icu_tokenizer_segments_chinese(os_cluster, index):
    # ICU's dictionary segmentation splits 佛陀说法 into words, not single characters.
    assert tokens(os_cluster, index, "wb_text", "佛陀说法") == ["佛陀", "说法"]


def test_lemma_query_analyzer_maps_dpd_forms_to_lemmas(os_cluster, index, lexicon):
    assert lexicon.lemmas("dhammo") == ("dhamma",)
    assert tokens(os_cluster, index, "wb_lemma_query", "dhammo") == ["dhamma"]
    assert sorted(tokens(os_cluster, index, "wb_lemma_query", "bhikkhave")) == ["bhikkhave", "bhikkhu"]
    # ASCII input reaches the same rule: the rules are folded by the chain before the filter.
    assert tokens(os_cluster, index, "wb_lemma_query", "Dhammo") == ["dhamma"]
    # Index and query side agree: an indexed form and a query form of one lemma share a token.
    assert "dhamma" in tokens(os_cluster, index, "wb_lemma_index", "dhammā")


def test_lemma_rules_cover_the_corpus_forms_dpd_knows(mn: Dataset, lexicon):
    rules = lemma_rules(mn.documents, lexicon)
    assert rules == sorted(set(rules))
    assert "dhammo => dhamma" in rules  # not in MN 1 or MN 10, but a form of their lemma dhamma
    assert "bhikkhave => bhikkhave, bhikkhu" in rules
    assert all(" => " in r for r in rules)
    assert lemma_rules([d for d in mn.documents if False], lexicon) == []


def test_mapping_round_trip(os_cluster, index, lexicon, mn: Dataset):
    es, _ = os_cluster
    rules = lemma_rules(mn.documents, lexicon)
    want = index_body(rules, EMB.dim)
    got = es.indices.get(index=index.name)[index.name]
    props = got["mappings"]["properties"]
    assert props["content"] == want["mappings"]["properties"]["content"]
    assert props["page_refs"] == {"type": "keyword"}
    assert props["content"]["properties"]["vector"]["method"]["engine"] == "lucene"
    assert got["mappings"]["_meta"]["complete"] is True
    assert got["mappings"]["_meta"]["rules"] == len(rules) == index.n_rules
    syn = got["settings"]["index"]["analysis"]["filter"]["wb_pali_lemma_graph"]
    assert syn["type"] == "synonym_graph" and len(syn["synonyms"]) == len(rules)
    assert es.count(index=index.name)["count"] == len(mn.documents)
    src = es.get(index=index.name, id="mn10:2.1")["_source"]
    assert set(src["content"]) == {"display"}  # searchable copies and the vector are not stored
    assert "PTS M 1.56" in src["page_refs"] and "P1.56" in src["page_refs"]


def test_indexing_is_idempotent(os_cluster, mn: Dataset, index, lexicon):
    es, url = os_cluster
    again = index_dataset(es, url, mn, EMB, lexicon=lexicon)
    assert again.reused and again.name == index.name


def test_an_interrupted_build_is_rebuilt(os_cluster, mn: Dataset):
    es, url = os_cluster
    small = Dataset("test-interrupted", mn.documents[:20], [], [], {})
    first = index_dataset(es, url, small, None)
    es.indices.put_mapping(index=first.name, body={"_meta": {"complete": False}})
    es.delete(index=first.name, id=small.documents[0].doc_id, refresh=True)
    again = index_dataset(es, url, small, None)
    assert not again.reused and es.count(index=again.name)["count"] == 20


def test_page_keys_add_the_cst_notation():
    assert page_keys(["PTS M 1.56", "VRI M 1.3"]) == ["PTS M 1.56", "P1.56", "VRI M 1.3", "V1.3"]
    assert page_query_key("M i 56") == "PTS M 1.56"
    assert page_query_key("MN i 56") == "PTS M 1.56"
    assert page_query_key("P1.56") == "P1.56"
    assert page_query_key("  not   a page ") == "not a page"


# ---------------------------------------------------------------- lanes on known queries

@pytest.mark.parametrize("mode", MODES)
def test_every_mode_passes_the_conformance_check(os_cluster, index, mode):
    queries = [Q("q1", "satipaṭṭhāna"), Q("q2", "Ekāyano ayaṁ, bhikkhave, maggo"), Q("q3", "M i 56"),
               Q("q4", "mindfulness meditation"), Q("q5", "dhammo")]
    ln = lane(os_cluster, index, mode)
    assert isinstance(ln, Retriever)
    check_lane(ln, queries, 10)


def test_page_ref_returns_the_segment_where_the_page_starts_first(os_cluster, index, mn: Dataset):
    run = lane(os_cluster, index, "page_ref").search([Q("p", "M i 56", "page_ref"), Q("c", "PTS M 1.56", "page_ref")], 50)
    on_page = sorted(d.doc_id for d in mn.documents if "PTS M 1.56" in d.pages)
    for qid in ("p", "c"):
        hits = run[qid]
        assert hits[0].doc_id == "mn10:2.1" and hits[0].score == 3.0  # starts there (2) and lies on it (1)
        assert sorted(h.doc_id for h in hits) == on_page
        assert all(h.score == 1.0 for h in hits[1:])


def test_ascii_pali_term_finds_its_diacritic_form(os_cluster, index, mn: Dataset):
    text = {d.doc_id: d.texts[0].text for d in mn.documents}
    for mode in ("fuzzy", "lemma"):
        hits = lane(os_cluster, index, mode).search([Q("a", "satipatthana")], 10)["a"]
        assert hits, mode
        assert all("satipaṭṭhān" in text[h.doc_id].lower() for h in hits[:5]), mode


def test_exact_keeps_diacritics_and_fuzzy_forgives_them(os_cluster, index):
    phrase = "Ekāyano ayaṁ, bhikkhave, maggo"
    exact = lane(os_cluster, index, "exact")
    assert exact.search([Q("e", phrase)], 10)["e"][0].doc_id == "mn10:2.1"
    assert exact.search([Q("a", "ekayano ayam bhikkhave maggo")], 10)["a"] == ()
    fuzzy = lane(os_cluster, index, "fuzzy", operator="and")
    assert fuzzy.search([Q("a", "ekayano ayam bhikkhave maggo")], 10)["a"][0].doc_id in ("mn10:2.1", "mn10:46.1")


def test_fuzzy_survives_a_misspelling_and_zero_fuzziness_does_not(os_cluster, index):
    assert lane(os_cluster, index, "fuzzy").search([Q("m", "satipattana")], 5)["m"]
    assert lane(os_cluster, index, "fuzzy", fuzziness="0").search([Q("m", "satipattana")], 5)["m"] == ()


def test_semantic_scores_are_cosine_similarities(os_cluster, index, mn: Dataset):
    doc = next(d for d in mn.documents if d.doc_id == "mn10:2.1")
    from workbench.text.doctext import index_text

    body = index_text(doc)
    hits = lane(os_cluster, index, "semantic").search([Q("s", body)], 5)["s"]
    assert hits[0].doc_id == "mn10:2.1"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    vq = EMB.embed_queries([body])[0]
    other = {d.doc_id: d for d in mn.documents}
    for h in hits[1:]:
        cos = float(np.dot(vq, EMB.embed_passages([index_text(other[h.doc_id])])[0]))
        assert h.score == pytest.approx(cos, abs=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_reserved_characters_never_raise(os_cluster, index, mode):
    ln = lane(os_cluster, index, mode)
    run = ln.search([Q(f"r{i}", t) for i, t in enumerate(RESERVED)], 10)
    assert set(run) == {f"r{i}" for i in range(len(RESERVED))}
    if mode in ("fuzzy", "lemma", "exact", "semantic", "template"):
        assert run["r9"], "the word next to a parenthesis is still searched"


def test_lane_config_names_everything_that_shapes_the_ranking(os_cluster, index):
    assert lane(os_cluster, index, "fuzzy").config() == {
        "kind": "opensearch", "index": index.name, "mode": "fuzzy", "max_query_chars": 1000,
        "fuzziness": "AUTO", "operator": "or"}
    assert lane(os_cluster, index, "semantic", ef_search=50).config()["ef_search"] == 50


# ---------------------------------------------------------------- bad input

def test_unreachable_cluster_names_the_url():
    url = "http://127.0.0.1:9"
    with pytest.raises(osearch.OpenSearchError, match=r"cannot reach OpenSearch at http://127\.0\.0\.1:9"):
        osearch.check_cluster(osearch.client(url), url)


def test_a_bad_url_setting_is_refused(monkeypatch):
    monkeypatch.setenv(osearch.URL_ENV, "localhost:9200")
    with pytest.raises(osearch.OpenSearchError, match="must be an http:// or https:// URL"):
        osearch.cluster_url()


def test_missing_index_names_it_and_the_fix(os_cluster):
    es, url = os_cluster
    ln = OpenSearchLane("os_fuzzy", es, "wb-no-such-index", "fuzzy", url=url)
    with pytest.raises(osearch.OpenSearchError, match=r"index wb-no-such-index does not exist at http"):
        ln.search([Q("q", "dhamma")], 5)


def test_a_stopped_cluster_fails_with_the_url(os_cluster, index):
    es, _ = os_cluster
    dead = OpenSearchLane("os_fuzzy", osearch.client("http://127.0.0.1:9"), index.name, "fuzzy", url="http://127.0.0.1:9")
    with pytest.raises(osearch.OpenSearchError, match=r"at http://127\.0\.0\.1:9 failed"):
        dead.search([Q("q", "dhamma")], 5)


@pytest.mark.parametrize("kw, msg", [
    ({"mode": "bm25"}, "mode must be one of"),
    ({"mode": "fuzzy", "fuzziness": "3"}, "fuzziness must be one of"),
    ({"mode": "fuzzy", "operator": "xor"}, "operator must be"),
    ({"mode": "semantic"}, "needs an embedder"),
    ({"mode": "fuzzy", "ef_search": 0}, "ef_search must be"),
    ({"mode": "fuzzy", "max_query_chars": 0}, "max_query_chars must be"),
])
def test_bad_lane_parameters_are_config_errors(kw, msg):
    mode = kw.pop("mode")
    with pytest.raises(ConfigError, match=msg):
        OpenSearchLane("x", None, "i", mode, **kw)


def test_k_must_be_a_non_negative_integer(os_cluster, index):
    with pytest.raises(ValueError, match="k must be"):
        lane(os_cluster, index, "fuzzy").search([Q("q", "dhamma")], -1)


class _LyingEmbedder(WordHashEmbedder):
    """Says 64 dimensions, returns 32: the cluster must refuse the vectors."""

    def __init__(self):
        super().__init__(64, model_id="test/lying-64")

    def embed_passages(self, texts):
        return super().embed_passages(texts)[:, :32]


def test_a_refused_bulk_names_the_document_and_leaves_no_complete_index(os_cluster, mn: Dataset):
    es, url = os_cluster
    small = Dataset("test-refused", mn.documents[:5], [], [], {})
    with pytest.raises(osearch.OpenSearchError, match=r"bulk indexing into wb-test-refused-\w+ failed for mn1:"):
        index_dataset(es, url, small, _LyingEmbedder())
    names = list(es.indices.get(index="wb-test-refused-*"))
    assert names and all(not es.indices.get_mapping(index=n)[n]["mappings"]["_meta"]["complete"] for n in names)
    good = index_dataset(es, url, small, WordHashEmbedder(64))
    assert not good.reused and es.count(index=good.name)["count"] == 5


# ---------------------------------------------------------------- more bad input

@pytest.mark.parametrize("url, msg", [
    ("http://127.0.0.1:notaport", "is not a valid URL"), ("http://127.0.0.1:99999", "is not a valid URL"),
    ("http://[::1", "is not a valid URL"), ("http://", "names no host"), ("http://h:9200/sub", "has a path"),
    ("localhost:9200", "must be an http:// or https:// URL"), ("http://u:p@h:9200", "must not hold credentials"),
])
def test_bad_cluster_urls_name_the_setting(monkeypatch, url, msg):
    monkeypatch.setenv(osearch.URL_ENV, url)
    with pytest.raises(osearch.OpenSearchError, match=msg):
        osearch.cluster_url()


def test_a_user_without_a_password_is_refused(monkeypatch):
    monkeypatch.setenv(osearch.USER_ENV, "bob")
    monkeypatch.delenv(osearch.PASSWORD_ENV, raising=False)
    with pytest.raises(osearch.OpenSearchError, match="WORKBENCH_OS_USER is set but WORKBENCH_OS_PASSWORD is not"):
        osearch.client("http://127.0.0.1:9200")


@pytest.mark.parametrize("ctype, body, msg", [
    ("text/html", b"<html>hello</html>", "answered, but not as OpenSearch"),
    ("application/json", b'{"version": {"number": "8.0.0"}, "tagline": "You Know, for Search"}',
     "is not OpenSearch 2.x or newer"),
])
def test_a_server_that_is_not_opensearch_is_named_as_such(ctype, body, msg):
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        with pytest.raises(osearch.OpenSearchError, match=msg):
            osearch.check_cluster(osearch.client(url), url)
    finally:
        srv.shutdown()


def test_passage_length_queries_stay_under_the_clause_limit(os_cluster, index, mn: Dataset):
    longest = max(mn.documents, key=lambda d: len(d.texts[0].text.split()))
    words = " ".join(d.texts[0].text for d in mn.documents[:60]).split()
    assert len(words) > 300
    for mode in ("fuzzy", "lemma", "exact"):
        ln = lane(os_cluster, index, mode, max_query_chars=10000)
        run = ln.search([Q("long", " ".join(words)), Q("doc", longest.texts[0].text)], 10)
        assert set(run) == {"long", "doc"}
    fuzzy = lane(os_cluster, index, "fuzzy", max_query_chars=10000)
    assert fuzzy.query_body(" ".join(words), 10)["query"]["match"]["content.text"]["max_expansions"] == 1000 // 256


def test_a_long_query_is_cut_at_a_word_boundary(os_cluster, index):
    ln = lane(os_cluster, index, "exact", max_query_chars=30)
    assert ln.clean("Ekāyano ayaṁ, bhikkhave, maggo sattānaṁ visuddhiyā") == "Ekāyano ayaṁ, bhikkhave, maggo"
    assert ln.search([Q("e", "Ekāyano ayaṁ, bhikkhave, maggo sattānaṁ visuddhiyā")], 5)["e"][0].doc_id == "mn10:2.1"
    assert ln.clean("x" * 50) == "x" * 30


def test_control_characters_follow_the_query_normaliser(os_cluster, index):
    """The same hygiene as the Postgres lanes (workbench.text.query.clean): tabs are spaces, NUL and BEL are
    removed, invisible characters too."""
    ln = lane(os_cluster, index, "page_ref")
    assert ln.clean("M i 56\x00") == "M i 56" and ln.clean("M\ti\x07 56") == "M i 56"
    assert ln.clean("\ufeffM\u200b i\u00ad 56") == "M i 56"
    assert ln.search([Q("p", "M i 56\x00")], 5)["p"][0].doc_id == "mn10:2.1"


def test_depth_beyond_opensearch_result_window_is_refused(os_cluster, index):
    with pytest.raises(ConfigError, match=r"depth k = 20000 is more than OpenSearch returns \(10000"):
        lane(os_cluster, index, "fuzzy").search([Q("q", "dhamma")], 20000)


def test_a_query_over_the_clause_limit_is_retried_with_half_the_words():
    class Refusing:
        """Refuses bodies of more than 40 words, as Lucene refuses more than 1,024 clauses."""

        def __init__(self):
            self.sent = []

        def search(self, index, body):
            n = len(body["query"]["match"]["content.text"]["query"].split())
            self.sent.append(n)
            if n > 40:
                raise RuntimeError("TransportError(500, 'search_phase_execution_exception', 'too_many_clauses: "
                                   "maxClauseCount is set to 1024')")
            return {"hits": {"hits": [{"_id": "d1", "_score": 1.0, "sort": [1.0, "d1"]}]}}

    es = Refusing()
    ln = OpenSearchLane("f", es, "i", "fuzzy", max_query_chars=10000)
    run = ln.search([Q("long", " ".join(f"w{i}" for i in range(300))), Q("short", "dhamma")], 5)
    assert es.sent == [256, 128, 64, 32, 1] and ln.last_shortened == {"long"}
    assert [h.doc_id for h in run["long"]] == ["d1"] and run["short"][0].doc_id == "d1"


def test_transliterate_searches_every_form_of_the_query(os_cluster, index):
    """A Pali term typed in the Russian reader's Cyrillic or in Devanagari ranks what its IAST form ranks (one
    ``dis_max`` over the forms); without ``transliterate`` the Cyrillic form finds nothing."""
    qs = [Q("iast", "satipaṭṭhāna"), Q("cyr", "сатипаттхана"), Q("deva", "सतिपट्ठान")]
    tr = lane(os_cluster, index, "fuzzy", transliterate=True)
    body = tr.query_body("сатипаттхана", 10)["query"]
    assert [p["match"]["content.text"]["query"] for p in body["dis_max"]["queries"]] == ["сатипаттхана", "satipatthana"]
    run = tr.search(qs, 10)
    want = [h.doc_id for h in run["iast"]]
    assert len(want) >= 3
    assert [h.doc_id for h in run["cyr"]][:3] == want[:3] and [h.doc_id for h in run["deva"]][:3] == want[:3]
    assert lane(os_cluster, index, "fuzzy").search(qs, 10)["cyr"] == ()
    with pytest.raises(ConfigError, match="transliterate applies"):
        lane(os_cluster, index, "page_ref", transliterate=True)
