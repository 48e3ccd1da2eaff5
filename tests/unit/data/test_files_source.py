"""``source = "files"``: a team's own corpus, queries and judgments, read from files with no code.

Every test writes a few hand-made files (3-6 documents) into ``tmp_path``, builds them with
:func:`workbench.data.catalog.build` and loads them back with :func:`~workbench.data.catalog.load`.
The happy paths prove each format reads to the exact documents, queries and judgments written by
hand; the bad files prove each is refused with one :class:`~workbench.errors.DataError` line naming
``file:line`` and the fix, and that nothing half-built is left behind.
"""

from __future__ import annotations

import datetime
import gzip
import json
import re
from pathlib import Path

import pytest

from workbench.data import catalog
from workbench.data.querysets.split import assign_splits
from workbench.errors import ConfigError, DataError, StaleError
from workbench.types import Qrel, Query, Text

DOCS = ('{"id": "d1", "title": "Cats", "text": "Cats purr when content."}\n'
        '{"id": "d2", "text": "Dogs bark at night."}\n'
        '{"id": "d3", "text": "Birds sing at dawn."}\n')
QUERIES = "query_id\ttext\nq1\twhy do cats purr\nq2\tbarking dogs\n"
QRELS = "q1 0 d1 2\nq2 0 d2 1\n"
BASE = {"docs.jsonl": DOCS, "queries.tsv": QUERIES, "qrels.txt": QRELS}
SECTION = 'documents = "docs.jsonl"\nqueries = "queries.tsv"\nqrels = "qrels.txt"\n'


def _team(folder: Path, files: dict[str, str | bytes], section: str, top: str = "seed = 7\n") -> catalog.Definitions:
    """Write the team's files (text as UTF-8, bytes as they are) and ``datasets.toml`` with ``[dataset.kb]`` into
    ``folder``; return the definitions read back."""
    for name, body in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
    (folder / "datasets.toml").write_text(f'{top}[dataset.kb]\nsource = "files"\n{section}', encoding="utf-8")
    return catalog.load_definitions(folder / "datasets.toml")


def _built(tmp_path: Path, files: dict[str, str | bytes], section: str,
           top: str = "seed = 7\n") -> tuple[dict, catalog.Dataset]:
    """Build ``kb`` from the files (data folder: ``tmp_path``) and load it: ``(manifest, dataset)``."""
    defs = _team(tmp_path, files, section, top)
    manifest = catalog.build("kb", defs, tmp_path, tmp_path / "home")
    return manifest, catalog.load("kb", defs, tmp_path, tmp_path / "home")


def _by_id(ds: catalog.Dataset) -> dict:
    return {d.doc_id: d for d in ds.documents}


def _queries(ds: catalog.Dataset) -> list[Query]:
    return sorted(ds.queries, key=lambda q: q.query_id)


def _dataset_leftovers(home: Path) -> list[str]:
    """What a build of ``kb`` left in ``<home>/datasets``: its folder, temporary build folders (not its lock file,
    ``.kb.lock``, which stays by design)."""
    folder = home / "datasets"
    return sorted(p.name for p in folder.iterdir() if "kb" in p.name and p.name != ".kb.lock") if folder.is_dir() else []


# ---------------------------------------------------------------- happy paths, one per format

def test_jsonl_documents_tsv_queries_with_every_column_and_graded_trec_qrels(tmp_path):
    """JSON lines documents with three text fields in three scripts, a title, metadata; a TSV query file with a
    header and the optional query_type / language / split / group / filter columns; TREC qrels with grades 2 and
    1, a ``1.0`` read as 1 and a negative grade read as 0 and counted."""
    docs = (
        '{"id": "d1", "title": "Cats", "body": "Cats purr when content.", "body_ru": "Кошки мурлычут.", '
        '"body_hi": "", "author": "Ann", "collection": "pets", "tags": ["cat", "pet"]}\n'
        '{"id": "d2", "body": "Dogs bark at night.", "body_ru": "", "body_hi": null, "author": "Bob", '
        '"collection": "pets"}\n'
        '\n'
        '{"id": "d3", "body": "Birds sing at dawn.", "body_ru": null, "body_hi": "पक्षी भोर में गाते हैं", '
        '"collection": "wild", "ignored": "x"}\n')
    queries = ("query_id\ttext\tquery_type\tlanguage\tsplit\tgroup\tfilter\n"
               "q1\twhy do  cats purr\tparaphrase\ten\ttest\t\t\n"
               'q2\tкошки\tterm\tru\tValidation\tcats\t{"collection": "pets"}\n'
               "q3\tbirds at dawn\t\t\ttrain\t\t\n"
               "q4\tunjudged\t\t\ttest\t\t\n")
    qrels = "q1 0 d1 2\nq1 0 d2 1.0\nq2 0 d1 1\nq2 0 d2 -1\nq3 0 d3 1\n"
    section = (SECTION + 'text_fields = { body = "en", body_ru = "ru", body_hi = "hi" }\ntitle_field = "title"\n'
               'metadata_fields = ["author", "collection", "tags"]\nlanguage = "en"\n')
    manifest, ds = _built(tmp_path, {"docs.jsonl": docs, "queries.tsv": queries, "qrels.txt": qrels}, section)

    docs_by_id = _by_id(ds)
    assert list(docs_by_id) == ["d1", "d2", "d3"]
    assert docs_by_id["d1"].texts == (Text("title", "en", "Latn", "Cats"),
                                      Text("body", "en", "Latn", "Cats purr when content."),
                                      Text("body_ru", "ru", "Cyrl", "Кошки мурлычут."))
    assert docs_by_id["d2"].texts == (Text("body", "en", "Latn", "Dogs bark at night."),)
    assert docs_by_id["d3"].texts == (Text("body", "en", "Latn", "Birds sing at dawn."),
                                      Text("body_hi", "hi", "Deva", "पक्षी भोर में गाते हैं"))
    assert docs_by_id["d1"].metadata == {"author": "Ann", "collection": "pets", "tags": ["cat", "pet"]}
    assert docs_by_id["d2"].metadata == {"author": "Bob", "collection": "pets"}
    assert docs_by_id["d3"].metadata == {"collection": "wild"}
    assert (docs_by_id["d1"].address, docs_by_id["d1"].work_id, docs_by_id["d1"].granularity) == ("d1", "d1", "passage")

    assert _queries(ds) == [
        Query("q1", "why do cats purr", "paraphrase", "en", "test", "q1", ""),
        Query("q2", "кошки", "term", "ru", "dev", "cats", '{"collection":"pets"}'),
        Query("q3", "birds at dawn", "other", "en", "train", "q3", ""),
    ]
    assert sorted(ds.qrels) == [Qrel("q1", "d1", 2), Qrel("q1", "d2", 1), Qrel("q2", "d1", 1),
                                Qrel("q2", "d2", 0), Qrel("q3", "d3", 1)]
    notes = manifest["notes"]
    assert notes["judgments_read"] == 5
    assert notes["relevance_below_zero_read_as_0"] == 1
    assert notes["queries_without_judgments_left_out"] == 1  # q4
    assert notes["splits_assigned_by_group_hash"] == 0
    assert notes["format"] == "jsonl"
    assert notes["documents_file"] == str(tmp_path / "docs.jsonl")
    assert manifest["counts"]["by_type"] == {"other": 1, "paraphrase": 1, "term": 1}
    assert manifest["counts"]["by_split"] == {"dev": 1, "test": 1, "train": 1}
    assert manifest["counts"]["relevant_binary"] == 4
    assert sorted(manifest["inputs"]) == ["docs.jsonl", "qrels.txt", "queries.tsv"]  # under the data folder


def test_csv_documents_with_quotes_headerless_queries_and_beir_qrels_tsv(tmp_path):
    """CSV (RFC 4180): a quoted comma, a doubled quote and a quoted newline survive; an empty title is no title;
    an empty metadata cell is left out. Queries ``id<TAB>text`` without a header; a BEIR qrels TSV under a
    ``qrels/`` folder gives its split (``test``) to the queries it judges."""
    docs = ('id,title,text,author\n'
            'd1,"Cats, purring","She said ""hush"" to the cat",Ann\n'
            'd2,,"A line\nthat continues",Bob\n'
            'd3,Dogs,Dogs bark.,\n')
    files = {"docs.csv": docs, "queries.tsv": "q1\twhy cats purr\nq2\tnight  noises\n",
             "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\nq2\td3\t0\n"}
    section = ('documents = "docs.csv"\nqueries = "queries.tsv"\nqrels = ["qrels/test.tsv"]\n'
               'title_field = "title"\nmetadata_fields = ["author"]\nlanguage = "en"\n')
    manifest, ds = _built(tmp_path, files, section)

    d = _by_id(ds)
    assert d["d1"].texts == (Text("title", "en", "Latn", "Cats, purring"),
                             Text("text", "en", "Latn", 'She said "hush" to the cat'))
    assert d["d2"].texts == (Text("text", "en", "Latn", "A line\nthat continues"),)
    assert d["d3"].texts == (Text("title", "en", "Latn", "Dogs"), Text("text", "en", "Latn", "Dogs bark."))
    assert [d[k].metadata for k in ("d1", "d2", "d3")] == [{"author": "Ann"}, {"author": "Bob"}, {}]
    assert _queries(ds) == [Query("q1", "why cats purr", "other", "en", "test", "q1", ""),
                                  Query("q2", "night noises", "other", "en", "test", "q2", "")]
    assert sorted(ds.qrels) == [Qrel("q1", "d1", 2), Qrel("q2", "d2", 1), Qrel("q2", "d3", 0)]
    assert manifest["notes"]["format"] == "csv"
    assert manifest["notes"]["splits_assigned_by_group_hash"] == 0


def test_tsv_documents_with_work_field_and_jsonl_queries(tmp_path):
    """TSV documents with another id field and a work field; JSON-lines queries: one BEIR-style (``_id``, the
    optional keys inside ``metadata``), one with an integer ``id`` and the text under ``query``."""
    docs = "doc_id\ttext\twork\na-1\tПривет, мир\tw1\na-2\tДоброе утро\tw1\nb-1\tGood morning\tw2\n"
    queries = ('{"_id": "1", "text": "привет", "metadata": {"query_type": "term", "language": "ru", "split": "dev", '
               '"other": 5}}\n'
               '{"id": 2, "query": "good morning", "language": "en", "split": "test", "group": "greetings"}\n')
    files = {"docs.tsv": docs, "queries.jsonl": queries, "qrels.txt": "1 0 a-1 1\n1 0 a-2 0\n2 Q0 b-1 3\n"}
    section = ('documents = "docs.tsv"\nqueries = "queries.jsonl"\nqrels = "qrels.txt"\nid_field = "doc_id"\n'
               'work_field = "work"\nlanguage = "ru"\n')
    manifest, ds = _built(tmp_path, files, section)

    d = _by_id(ds)
    assert [(k, x.work_id, x.texts) for k, x in d.items()] == [
        ("a-1", "w1", (Text("text", "ru", "Cyrl", "Привет, мир"),)),
        ("a-2", "w1", (Text("text", "ru", "Cyrl", "Доброе утро"),)),
        ("b-1", "w2", (Text("text", "ru", "Latn", "Good morning"),)),
    ]
    assert _queries(ds) == [Query("1", "привет", "term", "ru", "dev", "1", ""),
                                  Query("2", "good morning", "other", "en", "test", "greetings", "")]
    assert sorted(ds.qrels) == [Qrel("1", "a-1", 1), Qrel("1", "a-2", 0), Qrel("2", "b-1", 3)]
    assert manifest["notes"]["format"] == "tsv"


def test_parquet_documents_and_trec_sgml_topics(tmp_path):
    """Parquet (integer ids read as ``1``, a list and a date kept as JSON metadata) and TREC topics in SGML named
    ``topics.txt``: the classic ``<num> Number:`` / ``<title> Topic:`` without closing tags, and one with
    ``</num>`` and ``</title>`` (ids and titles without the tags, whitespace collapsed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "title": ["Aspirin", None, "Dogs"],
        "text": ["Aspirin reduces fever.", "Кошки мурлычут.", "Dogs bark."],
        "tags": [["med", "otc"], [], None],
        "published": pa.array([datetime.date(2024, 1, 2), None, datetime.date(1999, 12, 31)], pa.date32()),
        "unused": ["x", "y", "z"],
    })
    pq.write_table(table, tmp_path / "docs.parquet")
    topics = ("<top>\n<num> Number: 301\n<title> Topic: aspirin   fever\n\n<desc> Description:\nDoes it?\n</top>\n\n"
              "<top>\n<num>302</num>\n<title>cats\n purring</title>\n<desc>x</desc>\n</top>\n")
    files = {"topics.txt": topics, "qrels.txt": "301 0 1 2\n302 0 2 1\n"}
    section = ('documents = "docs.parquet"\nqueries = "topics.txt"\nqrels = "qrels.txt"\ntitle_field = "title"\n'
               'metadata_fields = ["tags", "published"]\n')
    manifest, ds = _built(tmp_path, files, section)

    d = _by_id(ds)
    assert list(d) == ["1", "2", "3"]
    assert d["1"].texts == (Text("title", "und", "Latn", "Aspirin"), Text("text", "und", "Latn", "Aspirin reduces fever."))
    assert d["2"].texts == (Text("text", "und", "Cyrl", "Кошки мурлычут."),)
    assert [d[k].metadata for k in ("1", "2", "3")] == [
        {"tags": ["med", "otc"], "published": "2024-01-02"}, {"tags": []}, {"published": "1999-12-31"}]
    splits = assign_splits({"other": ["301", "302"]}, 7)
    assert _queries(ds) == [Query("301", "aspirin fever", "other", "und", splits["301"], "301", ""),
                                  Query("302", "cats purring", "other", "und", splits["302"], "302", "")]
    assert sorted(ds.qrels) == [Qrel("301", "1", 2), Qrel("302", "2", 1)]
    assert manifest["notes"]["format"] == "parquet"
    assert manifest["notes"]["splits_assigned_by_group_hash"] == 2


def test_gzip_documents_and_qrels_and_trec_xml_topics(tmp_path):
    """``docs.jsonl.gz`` and ``qrels.txt.gz`` read through gzip; TREC XML topics (``<topic number=…>`` with
    ``<query>``, either quote)."""
    docs = gzip.compress(DOCS.encode("utf-8"))
    topics = ('<?xml version="1.0" encoding="UTF-8"?>\n<topics>\n'
              '  <topic number="1" type="faceted">\n    <query>cats purr</query>\n'
              '    <description>Why?</description>\n  </topic>\n'
              "  <topic number='2'>\n    <query>\n      dogs   bark\n    </query>\n  </topic>\n</topics>\n")
    files = {"docs.jsonl.gz": docs, "topics.xml": topics,
             "qrels.txt.gz": gzip.compress(b"1 0 d1 1\n2 0 d2 2\n2 0 d3 0\n")}
    section = ('documents = "docs.jsonl.gz"\nqueries = "topics.xml"\nqrels = "qrels.txt.gz"\nlanguage = "en"\n'
               'title_field = "title"\n')
    manifest, ds = _built(tmp_path, files, section)

    d = _by_id(ds)
    assert [(k, x.texts) for k, x in d.items()] == [
        ("d1", (Text("title", "en", "Latn", "Cats"), Text("text", "en", "Latn", "Cats purr when content."))),
        ("d2", (Text("text", "en", "Latn", "Dogs bark at night."),)),
        ("d3", (Text("text", "en", "Latn", "Birds sing at dawn."),)),
    ]
    splits = assign_splits({"other": ["1", "2"]}, 7)
    assert _queries(ds) == [Query("1", "cats purr", "other", "en", splits["1"], "1", ""),
                                  Query("2", "dogs bark", "other", "en", splits["2"], "2", "")]
    assert sorted(ds.qrels) == [Qrel("1", "d1", 1), Qrel("2", "d2", 2), Qrel("2", "d3", 0)]
    assert manifest["notes"]["format"] == "jsonl"


BEIR = {
    "beir/corpus.jsonl": ('{"_id": "c1", "title": "Aspirin", "text": "Aspirin reduces fever.", '
                          '"metadata": {"source": "pubmed"}}\n'
                          '{"_id": "c2", "title": "", "text": "Ibuprofen is an NSAID.", "metadata": {}}\n'
                          '{"_id": "c3", "text": "Paracetamol is also called acetaminophen."}\n'),
    "beir/queries.jsonl": ('{"_id": "q1", "text": "does aspirin reduce fever", "metadata": {"query_type": "paraphrase"}}\n'
                           '{"_id": "q2", "text": "what is ibuprofen", "metadata": {}}\n'
                           '{"_id": "q3", "text": "other name for paracetamol"}\n'),
    "beir/qrels/train.tsv": "query-id\tcorpus-id\tscore\nq1\tc1\t1\n",
    "beir/qrels/test.tsv": "query-id\tcorpus-id\tscore\nq2\tc2\t2\nq3\tc3\t1.0\n",
}
BEIR_SECTION = 'documents = "beir"\nlanguage = "en"\nmetadata_fields = ["source"]\n'


def test_beir_folder_splits_from_qrels_file_names(tmp_path):
    """A BEIR folder read as it is: ``_id``, ``title``, ``text``, ``metadata`` of the corpus; the query type from a
    query's ``metadata``; each query's split from the name of the qrels file that judges it."""
    manifest, ds = _built(tmp_path, BEIR, BEIR_SECTION)

    d = _by_id(ds)
    assert d["c1"].texts == (Text("title", "en", "Latn", "Aspirin"), Text("text", "en", "Latn", "Aspirin reduces fever."))
    assert d["c2"].texts == (Text("text", "en", "Latn", "Ibuprofen is an NSAID."),)
    assert [d[k].metadata for k in ("c1", "c2", "c3")] == [{"source": "pubmed"}, {}, {}]
    assert _queries(ds) == [Query("q1", "does aspirin reduce fever", "paraphrase", "en", "train", "q1", ""),
                                  Query("q2", "what is ibuprofen", "other", "en", "test", "q2", ""),
                                  Query("q3", "other name for paracetamol", "other", "en", "test", "q3", "")]
    assert sorted(ds.qrels) == [Qrel("q1", "c1", 1), Qrel("q2", "c2", 2), Qrel("q3", "c3", 1)]
    assert manifest["notes"]["format"] == "beir"
    assert manifest["notes"]["documents_file"] == str(tmp_path / "beir" / "corpus.jsonl")
    assert sorted(manifest["inputs"]) == ["beir/corpus.jsonl", "beir/qrels/test.tsv", "beir/qrels/train.tsv",
                                          "beir/queries.jsonl"]


# ---------------------------------------------------------------- splits by group hashing

def test_splits_hashed_by_group_when_the_file_gives_none(tmp_path):
    """Queries without a split take the split their group hashes to (``assign_splits`` with the definitions'
    seed and ratios, groups per query type in file order); an empty group is the query's id; queries of one group
    share a split, across query types too."""
    queries = ("query_id\ttext\tquery_type\tgroup\n"
               "q1\ta\tparaphrase\tg1\nq2\tb\tparaphrase\tg1\nq3\tc\tparaphrase\tg2\n"
               "q4\td\tparaphrase\tg3\nq5\te\tother\t\nq6\tf\tother\tg3\n")
    qrels = "".join(f"q{i} 0 d{1 + i % 3} 1\n" for i in range(1, 7))
    top = "seed = 11\nsplits = [0.5, 0.25, 0.25]\n"
    manifest, ds = _built(tmp_path, {**BASE, "queries.tsv": queries, "qrels.txt": qrels}, SECTION, top)

    expected = assign_splits({"paraphrase": ["g1", "g1", "g2", "g3"], "other": ["q5", "g3"]}, 11, (0.5, 0.25, 0.25))
    got = {q.query_id: (q.group, q.split) for q in ds.queries}
    assert got == {"q1": ("g1", expected["g1"]), "q2": ("g1", expected["g1"]), "q3": ("g2", expected["g2"]),
                   "q4": ("g3", expected["g3"]), "q5": ("q5", expected["q5"]), "q6": ("g3", expected["g3"])}
    assert got["q1"][1] == got["q2"][1] and got["q4"][1] == got["q6"][1]
    assert manifest["notes"]["splits_assigned_by_group_hash"] == 6


def test_a_split_given_for_one_query_holds_for_its_group_and_two_splits_in_one_group_are_refused(tmp_path):
    """One group, one split: q2 has no split but shares group g1 with q1 (test), so it is in test too (not where g1
    would hash); q3 and q4 of group g2 written in two splits are refused, naming the line and both queries."""
    queries = ("query_id\ttext\tsplit\tgroup\n"
               "q1\ta\ttest\tg1\nq2\tb\t\tg1\n")
    qrels = "q1 0 d1 1\nq2 0 d2 1\n"
    manifest, ds = _built(tmp_path, {**BASE, "queries.tsv": queries, "qrels.txt": qrels}, SECTION)
    assert {q.query_id: q.split for q in ds.queries} == {"q1": "test", "q2": "test"}
    assert manifest["notes"]["splits_assigned_by_group_hash"] == 0
    bad = queries + "q3\tc\ttrain\tg2\nq4\td\tdev\tg2\n"
    defs = _team(tmp_path, {**BASE, "queries.tsv": bad, "qrels.txt": qrels + "q3 0 d1 1\nq4 0 d3 1\n"}, SECTION)
    with pytest.raises(DataError) as exc:
        catalog.build("kb", defs, tmp_path, tmp_path / "home2")
    assert str(exc.value) == (f"{tmp_path / 'queries.tsv'}:5: query q4 is in dev but query q3 of the same group 'g2' "
                              "is in train; a group's queries share one split (fix the split or the group)")


def test_a_beir_folder_with_a_dot_in_its_name_is_a_beir_folder(tmp_path):
    """``msmarco-v2.1`` is a folder: read as BEIR without ``format``, like any BEIR folder."""
    files = {f"scifact.v1/{name[len('beir/'):]}": body for name, body in BEIR.items()}
    manifest, ds = _built(tmp_path, files, 'documents = "scifact.v1"\nlanguage = "en"\n')
    assert manifest["notes"]["format"] == "beir" and len(ds.documents) == 3 and len(ds.queries) == 3

def test_query_header_in_any_column_order_and_blank_type_is_other(tmp_path):
    """A header row is a header wherever its id column stands (here second); a query_type of only spaces is
    ``other``, like an empty one."""
    queries = "text\tquery_id\tquery_type\tsplit\nwhy cats purr\tq1\t \ttest\nbarking\tq2\tterm\tdev\n"
    _m, ds = _built(tmp_path, {**BASE, "queries.tsv": queries}, SECTION)
    assert _queries(ds) == [Query("q1", "why cats purr", "other", "und", "test", "q1", ""),
                                  Query("q2", "barking", "term", "und", "dev", "q2", "")]


def test_query_types_keeps_a_subset_without_counting_the_rest_as_unknown(tmp_path):
    """``query_types`` keeps the queries of those types and their judgments; the judgments of the other queries
    are neither kept nor counted as naming an unknown query (which would refuse the build)."""
    queries = "query_id\ttext\tquery_type\tsplit\nq1\tcats\tterm\ttest\nq2\tdogs\tother\ttest\n"
    manifest, ds = _built(tmp_path, {**BASE, "queries.tsv": queries},
                          SECTION + 'query_types = ["term"]\n')
    assert ds.queries == [Query("q1", "cats", "term", "und", "test", "q1", "")]
    assert ds.qrels == [Qrel("q1", "d1", 2)]
    assert manifest["notes"]["judgments_dropped_unknown_query"] == 0
    assert manifest["notes"]["judgments_read"] == 2


# ---------------------------------------------------------------- encodings

def test_utf8_bom_is_stripped(tmp_path):
    """A UTF-8 byte-order mark before a JSON-lines file and before a TSV header is dropped: the first id has no
    ``\\ufeff`` and the header is still found."""
    files = {"docs.jsonl": b"\xef\xbb\xbf" + DOCS.encode(), "queries.tsv": b"\xef\xbb\xbf" + QUERIES.encode()}
    _m, ds = _built(tmp_path, {**BASE, **files}, SECTION)
    assert [d.doc_id for d in ds.documents] == ["d1", "d2", "d3"]
    assert sorted(q.query_id for q in ds.queries) == ["q1", "q2"]
    assert sorted(ds.qrels) == [Qrel("q1", "d1", 2), Qrel("q2", "d2", 1)]


def test_nfd_text_is_stored_nfc(tmp_path):
    """Decomposed text (NFD: ``e`` + U+0301) in a title, a text and a query is stored composed (NFC: U+00E9)."""
    docs = ('{"id": "d1", "title": "Cafe\u0301", "text": "Cafe\u0301 au lait"}\n'
            '{"id": "d2", "text": "Tea"}\n')
    queries = "query_id\ttext\tsplit\nq1\tcafe\u0301\ttest\n"
    _m, ds = _built(tmp_path, {"docs.jsonl": docs, "queries.tsv": queries, "qrels.txt": "q1 0 d1 1\n"},
                    SECTION + 'title_field = "title"\n')
    assert _by_id(ds)["d1"].texts == (Text("title", "und", "Latn", "Caf\u00e9"),
                                      Text("text", "und", "Latn", "Caf\u00e9 au lait"))
    assert ds.queries[0].text == "caf\u00e9"


# ---------------------------------------------------------------- bad files

CP1251_LINE = b'{"id": "d2", "text": "' + "Собака".encode("cp1251") + b'"}\n'


def _refused(tmp_path: Path, files: dict[str, str | bytes], section: str, where: str, *needles: str) -> str:
    """Build ``kb`` from BASE with ``files`` over it; assert exactly one one-line DataError naming
    ``<tmp_path>/<where>`` and every needle (``{dir}`` stands for ``tmp_path``), and no dataset folder left."""
    defs = _team(tmp_path, {**BASE, **files}, section)
    with pytest.raises(DataError) as exc:
        catalog.build("kb", defs, tmp_path, tmp_path / "home")
    msg = str(exc.value)
    assert type(exc.value) is DataError
    assert "\n" not in msg, msg
    assert f"{tmp_path}/{where}" in msg, msg
    for needle in needles:
        assert needle.replace("{dir}", str(tmp_path)) in msg, (needle, msg)
    assert _dataset_leftovers(tmp_path / "home") == []
    return msg


Q_TYPED = "query_id\ttext\tquery_type\tsplit\tfilter\nq1\twhy do cats purr\tparaphrase\ttest\t\n"
Q_JSONL = SECTION.replace("queries.tsv", "queries.jsonl")


@pytest.mark.parametrize("files,section,where,needles", [
    pytest.param({"docs.jsonl": DOCS + '{"id": "d1", "text": "again"}\n'}, SECTION, "docs.jsonl:4",
                 ["document id 'd1' again (first at {dir}/docs.jsonl:1)", "give each document its own id"],
                 id="duplicate-document-id"),
    pytest.param({"queries.tsv": QUERIES + "q1\tagain\n"}, SECTION, "queries.tsv:4",
                 ["query id 'q1' again (first at {dir}/queries.tsv:2)", "give each query its own id"],
                 id="duplicate-query-id"),
    pytest.param({"docs.jsonl": DOCS.replace("Dogs bark at night.", " \\t  ")}, SECTION, "docs.jsonl:2",
                 ["document d2 has no text (text empty or whitespace)", "fill it in or leave the document out"],
                 id="whitespace-document-text"),
    pytest.param({"queries.tsv": QUERIES.replace("barking dogs", "   ")}, SECTION, "queries.tsv:3",
                 ["query q2 has an empty text", "write the query or leave the line out"], id="whitespace-query-text"),
    pytest.param({"queries.jsonl": '{"_id": "q1", "text": "cats"}\n{"_id": "q2", "text": null}\n'}, Q_JSONL,
                 "queries.jsonl:2", ["query q2 has an empty text"], id="null-query-text"),
    pytest.param({"qrels.txt": "q1 0 d1 2\nq2 0 d2 99999999999999999999\n"}, SECTION, "qrels.txt:2",
                 ["relevance '99999999999999999999' is beyond 1,000,000", "is a column shifted?"], id="huge-grade"),
    pytest.param({"docs.jsonl": DOCS.replace("Dogs bark", "Dogs\\ud800 bark")}, SECTION, "docs.jsonl:2",
                 ["field 'text' of document d2 holds a lone UTF-16 surrogate (\\ud800)"], id="lone-surrogate"),
    pytest.param({"docs.jsonl": DOCS.replace("Dogs bark", "Dogs\\u0000 bark")}, SECTION, "docs.jsonl:2",
                 ["holds a NUL character (\\u0000), which PostgreSQL cannot store"], id="escaped-nul"),
    pytest.param({"queries.tsv": "query_id\ttext\tfilter\nq1\tcats\t\nq2\tdogs\t{\"chapter\": 7}\n"}, SECTION,
                 "queries.tsv:3", ["query q2: filter {\"chapter\":7}: facet 'chapter' is not a facet of kb's documents"],
                 id="filter-on-a-facet-the-documents-lack"),
    pytest.param({"docs.jsonl": DOCS.splitlines(keepends=True)[0].encode() + CP1251_LINE}, SECTION, "docs.jsonl:2",
                 ["not UTF-8 (byte 0xd1 at column 23)", "convert the whole file to UTF-8 (e.g. iconv -f cp1251"],
                 id="cp1251-line"),
    pytest.param({"docs.jsonl": DOCS.replace('"id": "d2"', '"doc": "d2"')}, SECTION, "docs.jsonl:2",
                 ["no field 'id' (the record has ['doc', 'text'])", 'name the right one with id_field = "..."'],
                 id="missing-id-field"),
    pytest.param({"docs.jsonl": DOCS.replace('"text": "Dogs', '"body": "Dogs')}, SECTION, "docs.jsonl:2",
                 ["no field 'text' (the record has ['body', 'id'])", "text_fields"], id="missing-text-field"),
    pytest.param({"queries.jsonl": '{"number": "q1", "text": "cats"}\n'}, Q_JSONL, "queries.jsonl:1",
                 ["no id field (looked for query_id, _id, id, qid, query-id, query_number; the record has "
                  "['number', 'text']); rename the column"], id="missing-query-id-field"),
    pytest.param({"docs.csv": 'id,text\nd1,ok\nd2,"never closed\nd3,fine\n'},
                 SECTION.replace("docs.jsonl", "docs.csv"), "docs.csv:3",
                 ["a quote opened here never closes", 'double a quote inside a quoted field ("")'],
                 id="csv-unbalanced-quote"),
    pytest.param({"docs.jsonl.gz": gzip.compress(DOCS.encode())[:-8]},
                 SECTION.replace("docs.jsonl", "docs.jsonl.gz"), "docs.jsonl.gz",
                 ["the gzip stream is cut short or damaged after line 3", "copy the file again (gzip -t"],
                 id="truncated-gzip"),
    pytest.param({"docs.jsonl": DOCS[:-12]}, SECTION, "docs.jsonl:3",
                 ["not a JSON object", "a cut-off last line means the file is incomplete"], id="torn-jsonl-line"),
    pytest.param({"docs.jsonl": DOCS.replace('"d2"', '"d 2"')}, SECTION, "docs.jsonl:2",
                 ["document id 'd 2' holds whitespace", "replace it (with _ for instance)"], id="document-id-space"),
    pytest.param({"queries.tsv": QUERIES.replace("q2", "q 2")}, SECTION, "queries.tsv:3",
                 ["query id 'q 2' holds whitespace"], id="query-id-space"),
    pytest.param({"queries.tsv": Q_TYPED + "q2\tbarking dogs\tfaq\t\t\n"}, SECTION, "queries.tsv:3",
                 ["query q2: query_type 'faq' is not one of paraphrase, term, reference, page_ref, headword, "
                  "negative, other; leave it empty for other"], id="unknown-query-type"),
    pytest.param({"queries.tsv": Q_TYPED + "q2\tbarking dogs\t\tholdout\t\n"}, SECTION, "queries.tsv:3",
                 ["query q2: split 'holdout' is not one of train, dev, test", "leave it empty"], id="bad-split"),
    pytest.param({"queries.tsv": Q_TYPED + "q2\tbarking dogs\t\t\t{collection}\n"}, SECTION, "queries.tsv:3",
                 ["query q2: filter '{collection}' is not JSON", "write e.g."], id="bad-filter-json"),
    pytest.param({"qrels.txt": "q1 0 d1 2\nq2 d2 1\n"}, SECTION, "qrels.txt:2",
                 ["3 columns; a judgment line is query_id 0 doc_id relevance (TREC)"], id="trec-qrels-3-columns"),
    pytest.param({"qrels.txt": "q1 0 d1 2\nq2 0 d2 1.5\n"}, SECTION, "qrels.txt:2",
                 ["relevance '1.5' is not a whole number; grades are 0, 1, 2"], id="relevance-1.5"),
    pytest.param({"qrels.txt": "q1 0 d1 2\nq2 0 d2 1\nq1 0 d1 1\n"}, SECTION, "qrels.txt:3",
                 ["query q1 and document d1 judged again (first at {dir}/qrels.txt:1); keep one grade per pair"],
                 id="pair-judged-twice"),
    pytest.param({**BEIR, "beir/qrels/train.tsv": "query-id\tcorpus-id\tscore\nq1\tc1\t1\nq2\tc1\t1\n"},
                 BEIR_SECTION, "beir/qrels/train.tsv:3",
                 ["query q2 is judged in the test and the train files; a query belongs to one split"],
                 id="query-in-two-splits"),
])
def test_bad_file_is_refused_naming_file_line_and_fix(tmp_path, files, section, where, needles):
    """Each bad file: one DataError line with ``file:line``, what is wrong and the fix; no dataset folder."""
    _refused(tmp_path, files, section, where, *needles)


def test_unknown_ids_below_the_share_are_dropped_and_counted_above_refused(tmp_path):
    """Judgments naming an unknown document or query: up to ``max_unknown_qrels`` of them are dropped and counted
    in the manifest's notes; above it the build is refused with the counts and examples, and the previous build
    is kept with the same manifest."""
    qrels = "q1 0 d1 2\nq1 0 d9 1\nq2 0 d2 1\nq2 0 d3 0\nq2 0 d1 1\n"  # 1 of 5 unknown: 20 %
    section = SECTION + "max_unknown_qrels = 0.25\n"
    manifest, ds = _built(tmp_path, {**BASE, "qrels.txt": qrels}, section)
    assert sorted(ds.qrels) == [Qrel("q1", "d1", 2), Qrel("q2", "d1", 1), Qrel("q2", "d2", 1), Qrel("q2", "d3", 0)]
    notes = manifest["notes"]
    assert (notes["judgments_read"], notes["judgments_dropped_unknown_document"],
            notes["judgments_dropped_unknown_query"]) == (5, 1, 0)
    assert (notes["unknown_documents"], notes["unknown_queries"]) == (["d9"], [])
    before = (tmp_path / "home" / "datasets" / "kb" / "manifest.json").read_bytes()

    defs = _team(tmp_path, {"qrels.txt": qrels + "q7 0 d1 1\n"}, section)  # 2 of 6: 33.3 %
    with pytest.raises(DataError) as exc:
        catalog.build("kb", defs, tmp_path, tmp_path / "home")
    assert str(exc.value) == (
        f"{tmp_path / 'qrels.txt'}: 2 of 6 judgments (33.3%) name unknown ids, more than max_unknown_qrels = 0.25: "
        "1 name a query the queries file lacks (e.g. q7); 1 name a document the documents file lacks (e.g. d9). "
        "Check id_field and that the files belong together (or raise max_unknown_qrels)")
    assert (tmp_path / "home" / "datasets" / "kb" / "manifest.json").read_bytes() == before
    assert _dataset_leftovers(tmp_path / "home") == ["kb"]


def test_default_share_refuses_one_unknown_in_two(tmp_path):
    """With the default ``max_unknown_qrels`` (0.01) one judgment of two naming an unknown query is refused."""
    defs = _team(tmp_path, {**BASE, "qrels.txt": "q1 0 d1 2\nq9 0 d2 1\n"}, SECTION)
    head = re.escape(str(tmp_path / "qrels.txt"))
    with pytest.raises(DataError, match=rf"^{head}: 1 of 2 judgments \(50\.0%\) name unknown ids, more than "
                                        r"max_unknown_qrels = 0\.01: 1 name a query the queries file lacks \(e\.g\. q9\)"):
        catalog.build("kb", defs, tmp_path, tmp_path / "home")
    assert _dataset_leftovers(tmp_path / "home") == []


def test_failed_rebuild_keeps_the_previous_build(tmp_path):
    """A rebuild refused for a bad file leaves the previous build byte for byte (manifest and documents), and the
    status names the edited file as stale."""
    defs = _team(tmp_path, BASE, SECTION)
    home = tmp_path / "home"
    catalog.build("kb", defs, tmp_path, home)
    out = home / "datasets" / "kb"
    before = {f: (out / f).read_bytes() for f in ("manifest.json", "documents.jsonl", "queries.tsv", "qrels.txt")}
    (tmp_path / "docs.jsonl").write_text(DOCS + '{"id": "d2", "text": "dup"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"docs\.jsonl:4: document id 'd2' again \(first at .*docs\.jsonl:2\)"):
        catalog.build("kb", defs, tmp_path, home)
    assert {f: (out / f).read_bytes() for f in before} == before
    assert _dataset_leftovers(home) == ["kb"]
    assert catalog.status("kb", defs, tmp_path, home) == "stale: 1 input file(s) changed, e.g. docs.jsonl"
    assert [d.doc_id for d in catalog.load("kb", defs, tmp_path, home, check=False).documents] == ["d1", "d2", "d3"]


@pytest.mark.parametrize("section,needle", [
    ('documents = "docs.jsonl"\n', "dataset.kb lacks queries and qrels: name the file(s) (only a BEIR folder brings "
                                   "its own)"),
    ('documents = "docs.jsonl"\nqueries = "queries.tsv"\n', "dataset.kb lacks qrels: name the file(s) (only a BEIR "
                                                          "folder brings its own)"),
    (SECTION + 'filters = ["collection"]\n', "dataset.kb.filters: a files dataset takes its queries as given; put "
                                             "filtered or unanswerable queries in the queries file (a filter column, "
                                             "query_type = negative)"),
])
def test_bad_section_is_a_config_error_naming_the_key(tmp_path, section, needle):
    """A section lacking queries/qrels for a non-BEIR file, or with ``filters``, is refused when the definitions
    load: a ConfigError naming the TOML file, the key and the fix."""
    with pytest.raises(ConfigError) as exc:
        _team(tmp_path, BASE, section)
    assert str(exc.value) == f"{tmp_path / 'datasets.toml'}: {needle}"
    assert not (tmp_path / "home").exists()


# ---------------------------------------------------------------- staleness

def test_editing_a_team_file_outside_the_data_folder_makes_the_build_stale(tmp_path):
    """Files outside the data folder are hashed under their absolute path; editing one after a build makes the
    status stale naming it, the load refuses, and a rebuild reads the edit."""
    team, data, home = tmp_path / "team", tmp_path / "data", tmp_path / "home"
    data.mkdir()
    team.mkdir()
    defs = _team(team, BASE, SECTION)
    manifest = catalog.build("kb", defs, data, home)
    assert sorted(manifest["inputs"]) == [str(team / "docs.jsonl"), str(team / "qrels.txt"), str(team / "queries.tsv")]
    assert catalog.status("kb", defs, data, home) == "current"

    (team / "docs.jsonl").write_text(DOCS + '{"id": "d4", "text": "Fish swim."}\n', encoding="utf-8")
    assert catalog.status("kb", defs, data, home) == f"stale: 1 input file(s) changed, e.g. {team / 'docs.jsonl'}"
    with pytest.raises(StaleError, match="workbench data build"):
        catalog.load("kb", defs, data, home)
    catalog.build("kb", defs, data, home)
    assert [d.doc_id for d in catalog.load("kb", defs, data, home).documents] == ["d1", "d2", "d3", "d4"]
    assert json.loads((home / "datasets" / "kb" / "manifest.json").read_text())["counts"]["documents"] == 4


def test_whole_numbers_of_a_csv_are_numbers_so_a_chapter_range_filters(tmp_path):
    """CSV has no types: a metadata ``chapter`` of ``"3"`` is read as 3, as JSON and Parquet give it, so a range
    filter on it builds and admits the right documents; ``007`` (a leading zero: an id) stays text."""
    docs = "id,text,chapter,code\nd1,Cats purr,3,007\nd2,Dogs bark,12,12\nd3,Birds sing,7,x\n"
    queries = 'query_id\ttext\tfilter\nq1\tpurr\t{"chapter": {"$gte": 2, "$lte": 7}}\n'
    section = ('documents = "docs.csv"\nqueries = "queries.tsv"\nqrels = "qrels.txt"\n'
               'metadata_fields = ["chapter", "code"]\n')
    _m, ds = _built(tmp_path, {"docs.csv": docs, "queries.tsv": queries, "qrels.txt": "q1 0 d1 1\n"}, section)
    assert [(d.metadata["chapter"], d.metadata["code"]) for d in ds.documents] == [(3, "007"), (12, 12), (7, "x")]
    assert ds.facet_index.admitted(ds.queries[0].filter) == {"d1", "d3"}


def test_a_folder_named_as_the_queries_file_is_said_to_be_a_folder(tmp_path):
    (tmp_path / "qdir").mkdir()
    _refused(tmp_path, {}, SECTION.replace('"queries.tsv"', '"qdir"'), "qdir", "is a folder; name the file in it")


# ---------------------------------------------------------------- time-span documents

SPAN_SECTION = SECTION + 'span = { parent = "track", start = "from", end = "to" }\n'
SPAN_DOCS = ('{"id": "d1", "track": "t1", "from": 0, "to": 1500, "text": "Cats purr when content."}\n'
             '{"id": "d2", "track": 7, "from": 1500, "to": 1500.0, "text": "Dogs bark at night."}\n'
             '{"id": "d3", "track": "t1", "from": "1500", "to": 4200, "text": "Birds sing at dawn."}\n')


def test_span_fields_are_kept_in_metadata_under_fixed_keys(tmp_path):
    """``span`` reads each document's parent (as text), start and end (whole milliseconds, from a JSON number, a
    whole float or a numeric string, as CSV gives them) into ``span_parent``, ``span_start_ms``, ``span_end_ms``."""
    _m, ds = _built(tmp_path, {**BASE, "docs.jsonl": SPAN_DOCS}, SPAN_SECTION)
    spans = {d.doc_id: (d.metadata["span_parent"], d.metadata["span_start_ms"], d.metadata["span_end_ms"])
             for d in ds.documents}
    assert spans == {"d1": ("t1", 0, 1500), "d2": ("7", 1500, 1500), "d3": ("t1", 1500, 4200)}
    csv = "id,text,track,from,to\nd1,Cats purr,t1,0,900\nd2,Dogs bark,t1,900,2000\nd3,Birds sing,t2,0,10\n"
    _m, ds = _built(tmp_path / "csv", {**BASE, "docs.csv": csv}, SPAN_SECTION.replace("docs.jsonl", "docs.csv"))
    assert [d.metadata for d in ds.documents] == [
        {"span_parent": "t1", "span_start_ms": 0, "span_end_ms": 900},
        {"span_parent": "t1", "span_start_ms": 900, "span_end_ms": 2000},
        {"span_parent": "t2", "span_start_ms": 0, "span_end_ms": 10}]


@pytest.mark.parametrize("old,new,needles", [
    pytest.param('"from": 1500, "to": 1500.0', '"from": 1600, "to": 1500', ["document d2: from 1600 is after to 1500",
                                                                         "fix the times"], id="start-after-end"),
    pytest.param('"from": 1500, "to": 1500.0', '"from": -40, "to": 1500', ["document d2: from = -40 is negative",
                                                                        "(0 or more)"], id="negative"),
    pytest.param('"from": 1500, "to": 1500.0', '"from": 1.5, "to": 1500', ["document d2: from = 1.5 is not a whole "
                                                                        "number of milliseconds", "1.5 s is 1500"],
                 id="not-an-integer"),
    pytest.param('"from": 1500, "to": 1500.0', '"from": true, "to": 1500', ["from = True is not a whole number"],
                 id="a-boolean"),
    pytest.param('"from": 1500, "to": 1500.0', '"from": 1500, "to": 1e20', ["document d2: to = 1e+20 is past "
                                                                         "9007199254740991 ms", "check the unit"],
                 id="huge-float"),
    pytest.param('"from": 1500, "to": 1500.0', '"from": 1500, "to": 10000000000000000000000',
                 ["to = 10000000000000000000000 is past 9007199254740991 ms"], id="huge-integer"),
    pytest.param('"from": 1500, "to": 1500.0', '"from": "1,500", "to": 2000', ["from = '1,500' is not a whole number"],
                 id="thousands-separator"),
    pytest.param('"track": 7, ', '', ["document d2 has no field 'track'", "span = { parent ="], id="missing-parent"),
    pytest.param('"track": 7', '"track": " "', ["document d2 has an empty or unreadable parent 'track'",
                                                "the id of the track it belongs to"], id="empty-parent"),
])
def test_a_bad_span_is_refused_naming_file_line_and_fix(tmp_path, old, new, needles):
    assert old in SPAN_DOCS
    _refused(tmp_path, {"docs.jsonl": SPAN_DOCS.replace(old, new)}, SPAN_SECTION, "docs.jsonl:2", *needles)


def test_a_bad_span_section_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"dataset\.kb\.span must name the three fields of a document's span, like "
                                          r"\{ parent = \"track_id\""):
        _team(tmp_path, BASE, SECTION + 'span = { parent = "track", start = "from" }\n')
