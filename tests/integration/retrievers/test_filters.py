"""Query filters (:mod:`workbench.io.facets`): the grammar, the facets of the real corpora, the query file's
``filter`` column, and every lane kind held to a filter, against real Postgres and OpenSearch.

Hand-built cases on the gita's 701 verses: a filter admitting exactly 3 verses (``doc_id $in``) returns at most
those 3 from every lane kind, natively (SQL ``WHERE``, OpenSearch ``bool.filter`` / the k-NN ``filter``) or after
the fact (the reference lane, with a note); a chapter range admits exactly the verses of those chapters; an
HNSW scan with ``iterative_scan = off`` under a 1 % filter returns fewer than k rows, and with ``relaxed_order`` it
returns every admitted verse.
"""

from __future__ import annotations

import pytest

from workbench.errors import DataError
from workbench.io.facets import FacetIndex, check_filter, facet_values, facets, parse_filter
from workbench.io.formats import read_queries, write_queries
from workbench.testing import WordHashEmbedder
from workbench.types import Query

EMB = WordHashEmbedder(64)
THREE = ["bg2.47", "bg2.48", "bg3.19"]


def Q(qid: str, text: str, flt: str = "") -> Query:
    return Query(qid, text, "term", "und", "test", filter=flt)


# ---------------------------------------------------------------- the grammar

def test_a_filter_is_canonical_json_and_admits_by_the_one_rule():
    f = parse_filter('{"language": "pi", "collection": {"$in": ["mn", "dn"]}}')
    assert f.text == '{"collection":{"$in":["mn","dn"]},"language":"pi"}'
    assert parse_filter(f.text).text == f.text  # canonical: parsing it again changes nothing
    assert f.admits({"collection": "dn", "language": ["en", "pi"]})  # multi-valued: any value matches
    assert not f.admits({"collection": "sn", "language": ["pi"]})
    assert not f.admits({"language": ["pi"]})  # no value for a facet: not admitted
    r = parse_filter({"chapter": {"$gte": 2, "$lt": 4}})
    assert [c for c in range(1, 19) if r.admits({"chapter": c})] == [2, 3]
    assert parse_filter("") is None and parse_filter({}) is None and parse_filter(None) is None


@pytest.mark.parametrize("raw, needle", [
    ("{collection: dn}", "is not JSON"),
    ('["dn"]', "must be a JSON object of facets"),
    ('{"colection": "dn"}', "filter facet 'colection' is not one of doc_id, work, granularity"),
    ('{"collection": {"$gte": "dn"}}', "filter facet 'collection' is not ordered: use $eq or $in"),
    ('{"collection": {"$like": "d%"}}', "operator '$like' is not one of"),
    ('{"collection": {"$in": []}}', "$in takes a non-empty list"),
    ('{"chapter": "2"}', "value '2' must be a number"),
    ('{"collection": 3}', "value 3 must be a string"),
    ('{"collection": {}}', "has an empty condition"),
    ('{"chapter": ' + "9" * 5000 + "}", "is not JSON (Exceeds the limit (4300 digits)"),  # a plain ValueError, not a decode error
    ('{"chapter": {"$gt": NaN}}', "NaN is not a finite number"),  # Python's json reads NaN and Infinity
    ('{"chapter": {"$lt": -Infinity}}', "-Infinity is not a finite number"),
    ('{"chapter": {"$gte": 2, "$gte": 30}}', "key '$gte' is given twice in one object"),
    ('{"work": ["bg"]}', 'must be a string; for several values write {"$in": [...]}'),
])
def test_a_bad_filter_is_refused_naming_the_fix(raw, needle):
    with pytest.raises(ValueError, match=__import__("re").escape(needle)):
        parse_filter(raw)


def test_facets_of_the_real_corpora(gita, built_home, data_dir):
    bg = {d.doc_id: d for d in gita.documents}
    assert facets(bg["bg2.47"]) == {"doc_id": "bg2.47", "work": "bg", "granularity": "verse",
                                    "language": ["en", "hi", "sa"], "chapter": 2}
    counts = {c: sum(1 for d in gita.documents if d.metadata.get("chapter") == c) for c in (2, 3)}
    two_three = parse_filter('{"chapter": {"$in": [2, 3]}}')
    assert len(FacetIndex(gita.documents).admitted(two_three.text)) == counts[2] + counts[3] == 72 + 43
    values = facet_values(gita.documents)
    assert values["chapter"] == set(range(1, 19)) and "collection" not in values
    assert check_filter(parse_filter('{"collection": "dn"}'), values, "gita") == \
        "facet 'collection' is not a facet of gita's documents (it has chapter, doc_id, granularity, language, work)"
    assert check_filter(parse_filter('{"chapter": {"$in": [2, 19]}}'), values, "gita").startswith(
        "chapter = 19: no document of gita has it")


def test_the_filter_column_round_trips_and_a_bad_line_is_named(tmp_path, gita):
    path = tmp_path / "queries.tsv"
    qs = [Q("a", "karma"), Q("b", "dharma", parse_filter('{"chapter": {"$gte": 2}}').text)]
    write_queries(path, qs)
    assert path.read_text().splitlines()[0].split("\t")[-1] == "filter"
    assert read_queries(path) == qs
    write_queries(path, [Q("a", "karma")])  # no filter anywhere: the file keeps its six columns (and its hash)
    assert path.read_text().splitlines()[0] == "query_id\ttext\tquery_type\tlanguage\tsplit\tgroup"
    write_queries(path, [Q("a", "karma"), Q("b", "dharma", '{"chapter":19}')])
    with pytest.raises(DataError, match=r"queries.tsv:3: query b: filter \{\"chapter\":19\}: chapter = 19: no "
                                        r"document of gita has it"):
        read_queries(path, lambda: facet_values(gita.documents), "gita")
    path.write_text(path.read_text().replace('19', '""x""'))  # as the writer quotes it
    with pytest.raises(DataError, match=r"queries.tsv:3: query b: filter facet 'chapter': value 'x' must be a number"):
        read_queries(path)


# ---------------------------------------------------------------- every lane kind, on real services

@pytest.fixture(scope="module")
def pg_index(pg_dsn, gita):
    from workbench.engines.pg_index import index_dataset

    return index_dataset(pg_dsn, gita, EMB)


def _queries(gita, flt: str) -> list[Query]:
    """20 real gita queries (terms, paraphrases, references) under the filter ``flt``."""
    picked: list[Query] = []
    for t in ("term", "paraphrase", "reference"):
        picked += [q for q in gita.queries if q.query_type == t][:7]
    return [Query(q.query_id, q.text, q.query_type, q.language, q.split, q.group, flt) for q in picked[:20]]


def test_every_postgres_lane_returns_only_what_the_filter_admits(pg_dsn, pg_index, gita):
    from retrievers.fulltext import FullTextLane
    from retrievers.pgvector import VectorLane
    from retrievers.trigram import TrigramLane
    from workbench.engines.pg_client import reader_dsn

    reader = reader_dsn(pg_dsn)
    flt = parse_filter({"doc_id": {"$in": THREE}}).text
    qs = _queries(gita, flt) + [Q("gita-bg2.47", "BG 2.47 karmaṇy evādhikāras te", flt)]
    lanes = [VectorLane("vector", reader, pg_index, EMB), VectorLane("exact", reader, pg_index, EMB, exact=True),
             FullTextLane("fts", reader, pg_index.table, config="wb_fold"),
             TrigramLane("trigram", reader, pg_index.table, threshold=0.1)]
    for lane in lanes:
        run = lane.search(qs, 10)
        got = {h.doc_id for q in qs for h in run[q.query_id]}
        assert got <= set(THREE), (lane.name, got - set(THREE))
        assert all(len(run[q.query_id]) <= 3 for q in qs)
    # the vector lanes rank all 3 admitted verses for every query (every verse has a cosine)
    exact = lanes[1].search(qs, 10)
    assert all(sorted(h.doc_id for h in exact[q.query_id]) == THREE for q in qs)
    # and the text lanes still find the verse the text names
    fts = lanes[2].search(qs[-1:], 10)
    assert fts["gita-bg2.47"][0].doc_id == "bg2.47"
    # unfiltered, the same lanes range over the whole gita
    free = lanes[1].search([Q("x", qs[0].text)], 10)
    assert len(free["x"]) == 10 and not {h.doc_id for h in free["x"]} <= set(THREE)


def test_a_chapter_range_is_applied_inside_postgres(pg_dsn, pg_index, gita):
    from retrievers.fulltext import FullTextLane
    from workbench.engines.pg_client import reader_dsn

    flt = parse_filter({"chapter": {"$gte": 2, "$lte": 3}}).text
    lane = FullTextLane("fts", reader_dsn(pg_dsn), pg_index.table, config="wb_fold")
    run = lane.search([Q("k", "karma", flt), Q("u", "karma")], 200)
    chapters = {int(h.doc_id[2:].split(".")[0]) for h in run["k"]}
    assert chapters == {2, 3}
    free = {h.doc_id for h in run["u"]}
    assert {h.doc_id for h in run["k"]} == {d for d in free if d.startswith(("bg2.", "bg3."))}


def test_hnsw_under_a_one_percent_filter_under_returns_without_iterative_scan(pg_dsn, pg_index, gita):
    """pgvector filters after the HNSW scan: with ``iterative_scan = off`` and ef_search 40 a filter admitting
    7 of 701 verses (1 %) leaves most queries with fewer than 7 rows; ``relaxed_order`` scans on and returns all
    7 for every query, as the exact filtered scan does."""
    from retrievers.pgvector import VectorLane
    from workbench.engines.pg_client import reader_dsn

    reader = reader_dsn(pg_dsn)
    seven = [d.doc_id for d in gita.documents][::100][:7]
    flt = parse_filter({"doc_id": {"$in": seven}}).text
    qs = _queries(gita, flt)
    off = VectorLane("off", reader, pg_index, EMB, iterative_scan="off", ef_search=40)
    relaxed = VectorLane("relaxed", reader, pg_index, EMB, iterative_scan="relaxed_order", ef_search=40)
    exact = VectorLane("exact", reader, pg_index, EMB, exact=True)
    r_off, r_rel, r_exact = off.search(qs, 10), relaxed.search(qs, 10), exact.search(qs, 10)
    short_off = [q.query_id for q in qs if len(r_off[q.query_id]) < 7]
    assert len(short_off) >= 15, len(short_off)  # ef_search 40 of 701: about 40 * 1 % = 0.4 admitted expected
    assert off.last_under_returned == short_off
    assert all(len(r_rel[q.query_id]) == 7 for q in qs) and relaxed.last_under_returned == []
    assert all([h.doc_id for h in r_rel[q.query_id]] == [h.doc_id for h in r_exact[q.query_id]] for q in qs)


def test_a_lane_that_cannot_filter_is_filtered_after_the_fact_and_says_so(gita):
    from workbench.experiment.runner import filter_hits
    from workbench.run import Hit, Run

    flt = parse_filter({"doc_id": {"$in": THREE}}).text
    run = Run({"a": [Hit("bg1.1", 3.0), Hit("bg2.48", 2.0), Hit("bg2.47", 1.0)], "b": [Hit("bg1.1", 1.0)]}, "ref")
    kept, removed = filter_hits(run, [Q("a", "x", flt), Q("b", "y")], FacetIndex(gita.documents))
    assert [h.doc_id for h in kept["a"]] == ["bg2.48", "bg2.47"] and removed == 1
    assert [h.doc_id for h in kept["b"]] == ["bg1.1"]  # no filter: untouched


def test_opensearch_lanes_filter_natively(os_cluster, gita):
    from retrievers.opensearch import OpenSearchLane
    from workbench.engines.os_index import index_dataset

    es, url = os_cluster
    index = index_dataset(es, url, gita, EMB)
    flt = parse_filter({"doc_id": {"$in": THREE}}).text
    qs = _queries(gita, flt)
    for mode in ("fuzzy", "semantic"):
        lane = OpenSearchLane(f"os_{mode}", es, index.name, mode, url=url,
                              embedder=EMB if mode == "semantic" else None)
        run = lane.search(qs, 10)
        got = {h.doc_id for q in qs for h in run[q.query_id]}
        assert got <= set(THREE), (mode, got)
        if mode == "semantic":  # efficient k-NN filtering: all 3 admitted verses, for every query
            assert all(sorted(h.doc_id for h in run[q.query_id]) == THREE for q in qs)
    chapter = OpenSearchLane("os_fuzzy", es, index.name, "fuzzy", url=url).search(
        [Q("k", "karma", parse_filter({"chapter": {"$lte": 3}}).text)], 100)
    assert chapter["k"] and {int(h.doc_id[2:].split(".")[0]) for h in chapter["k"]} <= {1, 2, 3}



def test_opensearch_knn_efficient_filtering_post_filtering_and_the_exact_script(os_cluster, gita):
    """mint's k-NN takes its top k and then filters (``filter_mode = "post"``): under a filter admitting 3 of 701
    verses most queries keep fewer than 3; efficient filtering keeps all 3 for every query; the k-NN score script
    (``exact = true``) ranks the 3 as the exact cosine does, with the same cosines (1e-5) as the HNSW lane."""
    import numpy as np

    from retrievers.opensearch import OpenSearchLane
    from workbench.engines.os_index import index_dataset

    es, url = os_cluster
    index = index_dataset(es, url, gita, EMB)
    qs = _queries(gita, parse_filter({"doc_id": {"$in": THREE}}).text)
    lanes = {m: OpenSearchLane(f"os_{m}", es, index.name, "semantic", url=url, embedder=EMB, **kw)
             for m, kw in (("efficient", {}), ("post", {"filter_mode": "post"}), ("exact", {"exact": True}))}
    runs = {m: lane.search(qs, 10) for m, lane in lanes.items()}
    post_short = [q.query_id for q in qs if len(runs["post"][q.query_id]) < 3]
    assert len(post_short) >= 15, post_short  # the 10 nearest of 701 seldom hold the 3 admitted verses
    assert all({h.doc_id for h in runs["post"][q.query_id]} <= set(THREE) for q in qs)
    docs = {d.doc_id: d for d in gita.documents}
    from workbench.text.doctext import index_text

    vecs = {d: np.asarray(EMB.embed_passages([index_text(docs[d])])[0]) for d in THREE}
    for q in qs:
        exact = runs["exact"][q.query_id]
        assert sorted(h.doc_id for h in exact) == THREE == sorted(h.doc_id for h in runs["efficient"][q.query_id])
        v = np.asarray(EMB.embed_queries([q.text])[0])
        want = {d: float(v @ vecs[d] / (np.linalg.norm(v) * np.linalg.norm(vecs[d]))) for d in THREE}
        assert [h.doc_id for h in exact] == sorted(THREE, key=lambda d: (-want[d], d))
        eff = {h.doc_id: h.score for h in runs["efficient"][q.query_id]}
        assert all(abs(h.score - want[h.doc_id]) < 1e-5 for h in exact)
        assert all(abs(h.score - eff[h.doc_id]) < 1e-5 for h in exact)
    with pytest.raises(Exception, match="filter_mode and exact apply to the semantic mode"):
        OpenSearchLane("bad", es, index.name, "fuzzy", url=url, filter_mode="post")


def test_a_filter_no_document_meets_and_a_facet_with_no_copies_are_refused(gita, built_home, tmp_path):
    """Found by a newcomer: both loaded silently (a query measured on an empty corpus; a dataset with no filtered
    query although its definition asks for them)."""
    import shutil

    from workbench.data import catalog
    from workbench.data.querysets.builders import filtered_variants

    src = catalog.dataset_dir("gita", built_home)
    home = tmp_path / "home"
    shutil.copytree(src, catalog.dataset_dir("gita", home))
    qpath = catalog.dataset_dir("gita", home) / "queries.tsv"
    rows = qpath.read_text(encoding="utf-8").splitlines()
    header = rows[0].split("\t")
    cut = ["query_id", "text", "query_type", "language", "split", "group"]
    assert header[:6] == cut
    lines = [r.split("\t")[:6] for r in rows[1:]]
    lines.append(["gita-empty", "karma", "term", "sa", "test", "", '{"chapter":{"$gt":5,"$lt":3}}'])
    qpath.write_text("\n".join(["\t".join(cut + ["filter"])] + ["\t".join(r + [""] * (7 - len(r))) for r in lines])
                     + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"queries.tsv: query gita-empty: filter .* admits no document of gita \(no "
                                        r"document meets every clause at once\); loosen the filter or drop the query"):
        catalog.load("gita", home=home, check=False)
    with pytest.raises(ValueError, match=r"filters = \['collection'\]: no query's relevant documents share one value "
                                         r"of collection \(the documents' facets: chapter, doc_id, granularity, "
                                         r"language, work\)"):
        filtered_variants(gita.queries, gita.qrels, gita.documents, ["collection"], 1)
    copies, _qrels = filtered_variants(gita.queries, gita.qrels, gita.documents, ["chapter"], 1)
    assert copies and all(q.query_id.endswith("~chapter") and q.filter.startswith('{"chapter":') for q in copies)
