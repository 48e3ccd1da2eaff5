"""Bold headwords of the CST aṭṭhakathā: the ``headword`` query type and the OpenSearch bold fields.

Values from the real corpus (read by hand in ``s0201a.att1.xml``): s0201a ¶5 opens three lines with the bold
lemmas ``Suta``, ``Muta``, ``Viññāta``; ¶3 one with ``Pajāpati`` (``<hi rend="bold">Pajāpati</hi>nti ettha``).
The corpus tests skip when ``WORKBENCH_DATA`` is unset; the mapping tests at the end run anywhere.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from workbench.data.loaders.cst4 import MN_BOOKS, load_cst4
from workbench.data.querysets import builders as b
from workbench.engines import os_index
from workbench.types import QUERY_TYPES, Document, Text


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if not os.environ.get("WORKBENCH_DATA", "").strip():
        pytest.skip("WORKBENCH_DATA is not set; point it at the shared corpora to run the CST4 tests")
    from workbench.settings import data_dir as resolve

    return resolve(sources=("cst4-tipitaka-xml",))


@pytest.fixture(scope="module")
def mn(data_dir: Path) -> list[Document]:
    return load_cst4(data_dir, MN_BOOKS)


@pytest.fixture(scope="module")
def cands(mn: list[Document]) -> list[b.Candidate]:
    return b.cst_bold_headwords(mn)


def by_text(cands: list[b.Candidate]) -> dict[str, b.Candidate]:
    return {c.text: c for c in cands}


# --------------------------------------------------------------------------- the builder on the real corpus


@pytest.mark.data
def test_headword_queries_point_at_the_paragraph_that_explains_them(cands: list[b.Candidate]) -> None:
    got = by_text(cands)
    # ``Muta``nti opens a line of ¶5 (grade 2) and is bold mid-line in ¶241 (grade 1)
    assert got["muta"].relevant == {"s0201a:5": 2, "s0201a:241": 1}
    assert got["viññāta"].relevant == {"s0201a:5": 2}
    assert got["suta"].relevant == {"s0201a:1.2": 2, "s0201a:5": 2, "s0201a:452": 1}
    assert got["pajāpati"].relevant == {"s0201a:3": 2}
    assert got["bhūtato maññatī"].relevant == {"s0201a:3": 2}
    # the ASCII form is issued beside the IAST one, in the same group (one split)
    assert got["vinnata"].group == got["viññāta"].group == "headword:viññāta"
    assert got["pajapati"].relevant == got["pajāpati"].relevant
    assert all(c.query_type == "headword" and c.language == "pi" for c in cands)


@pytest.mark.data
def test_headwords_left_out(cands: list[b.Candidate]) -> None:
    got = by_text(cands)
    assert "evaṃ" not in got and "me suta" not in got  # "Evaṃ me sutaṃ": bold in 156 / 148 commentary paragraphs
    assert "na" not in got  # under 3 letters
    assert "diṭṭha" not in got  # bold in ¶5, but after "Tattha", not at a line's start
    assert all(len(c.text.split()) <= b.HEADWORD_MAX_WORDS and "…" not in c.text for c in cands)
    assert all(len(c.relevant) <= b.HEADWORD_MAX_DF for c in cands)


@pytest.mark.data
def test_headword_counts_on_the_real_corpus(mn: list[Document], cands: list[b.Candidate]) -> None:
    """1,743 distinct line-opening bold spans in the MN aṭṭhakathā; 1,604 of them occur in their sutta's root text;
    1,529 also pass the length, elision and frequency limits. 1,290 of those get an ASCII form too."""
    leads = {s.lower() for d in mn for s in d.metadata["bold_lead"] if d.metadata["collection"] == "Ps"}
    assert len(leads) == 1743
    unlimited = b.cst_bold_headwords(mn, max_df=10**6, max_words=10**6, min_letters=0)
    assert len({c.group for c in unlimited}) == 1604
    assert len({c.group for c in cands}) == 1529
    assert len(cands) == 2819
    # the frequency cap removes only "evaṃ" and "me suta": any cap from 19 to 147 gives the same set
    assert len({c.group for c in b.cst_bold_headwords(mn, max_df=19)}) == 1529
    assert len({c.group for c in b.cst_bold_headwords(mn, max_df=147)}) == 1529


@pytest.mark.data
def test_no_headwords_without_the_mula(mn: list[Document]) -> None:
    """The root check needs the mūla book: the aṭṭhakathā alone gives no headword queries."""
    assert b.cst_bold_headwords([d for d in mn if d.metadata["collection"] == "Ps"]) == []


@pytest.mark.data
def test_cst4_mn_build_has_headword_queries_in_every_split(data_dir: Path, tmp_path_factory) -> None:
    from workbench.data import catalog

    home = tmp_path_factory.mktemp("home")
    defs = catalog.load_definitions()
    assert "headword" in defs.datasets["cst4-mn"]["query_types"]
    catalog.build("cst4-mn", defs, data_dir, home)
    manifest = json.loads((catalog.dataset_dir("cst4-mn", home) / "manifest.json").read_text())
    by = manifest["counts"]["by_type_split"]
    assert by["headword"] == {"train": 350, "dev": 125, "test": 125}  # 600 = max_queries_per_type, 325 headwords
    assert by["reference"] == {"train": 182, "dev": 54, "test": 68}  # the other types as before
    assert by["page_ref"] == {"train": 430, "dev": 44, "test": 126}
    ds = catalog.load("cst4-mn", defs, data_dir, home)
    split_of = {}
    for q in ds.queries:
        assert split_of.setdefault(q.group, q.split) == q.split
    heads = {q.query_id for q in ds.queries if q.query_type == "headword"}
    assert Counter(r.relevance for r in ds.qrels if r.query_id in heads) == {2: 624, 1: 146}


# --------------------------------------------------------------------------- OpenSearch fields


@pytest.mark.data
def test_document_source_carries_bold_and_headings(mn: list[Document]) -> None:
    d = next(x for x in mn if x.doc_id == "s0201a:5")
    src = os_index.document_source("cst4-mn", d)
    assert src["bold"] == ["diṭṭhaṃ diṭṭhato", "diṭṭha", "diṭṭhaṃ maññatī", "Suta", "Muta", "Viññāta"]
    assert src["bold_single"] == ["diṭṭha", "Suta", "Muta", "Viññāta"]
    assert src["bold_multi"] == ["diṭṭhaṃ diṭṭhato", "diṭṭhaṃ maññatī"]
    assert src["title"]["text"] == ["1. Mūlapariyāyasuttavaṇṇanā", "Diṭṭhasutavārādivaṇṇanā"]
    assert src["title"]["display"] == "1. Mūlapariyāyasuttavaṇṇanā · Diṭṭhasutavārādivaṇṇanā"
    assert src["content"]["text"] == d.text("root")  # the body is unchanged
    mula = os_index.document_source("cst4-mn", next(x for x in mn if x.doc_id == "s0201m:106"))
    assert mula["bold"] == mula["bold_single"] == mula["bold_multi"] == []
    assert mula["title"]["text"] == ["10. Mahāsatipaṭṭhānasuttaṃ", "Uddeso"]  # MN 10's first section
    first = os_index.document_source("cst4-mn", next(x for x in mn if x.doc_id == "s0201m:105"))
    assert first["title"]["text"] == ["10. Mahāsatipaṭṭhānasuttaṃ"]  # before the section heading


def test_mapping_has_the_bold_fields_and_a_new_schema_version() -> None:
    props = os_index.index_body([], None)["mappings"]["properties"]
    for name in ("bold", "bold_single", "bold_multi"):
        f = props[name]
        assert f["type"] == "text" and f["analyzer"] == "wb_text"  # the content's ICU folding
        assert f["fields"]["exact"] == {"type": "keyword", "normalizer": "wb_exact",
                                        "ignore_above": os_index.EXACT_MAX_CHARS}
        assert f["fields"]["words"]["analyzer"] == "wb_words"
        assert f["fields"]["lemma"]["search_analyzer"] == "wb_lemma_query"
    assert props["title"]["properties"]["text"]["analyzer"] == "wb_text"
    assert os_index.SCHEMA_VERSION >= 2  # 2 brought the bold fields (3: facets)
    assert "headword" in QUERY_TYPES


def test_documents_without_bold_or_headings_index_empty() -> None:
    seg = Document("mn10:2.1", "MN 10:2.1", "mn10", "segment", (Text("root", "pi", "Latn", "Ekāyano ayaṁ"),))
    src = os_index.document_source("x", seg)
    assert src["bold"] == src["bold_single"] == src["bold_multi"] == []
    assert src["title"]["text"] == [] and src["title"]["display"] == ""
    verse = Document("bg1.1", "BG 1.1", "bg", "verse", (), metadata={"chapter_name": "Arjuna's grief"})
    assert os_index.document_source("x", verse)["title"]["text"] == ["Arjuna's grief"]
    # a span repeated in one document is indexed once; a hyphenated span counts as several words
    twice = Document("a", "A", "w", "paragraph", (), metadata={"bold": ["Muta", "Muta", "pi-saddo"]})
    f = os_index.bold_fields(twice)
    assert f == {"bold": ["Muta", "pi-saddo"], "bold_single": ["Muta"], "bold_multi": ["pi-saddo"]}


def test_bold_fields_on_a_real_node(os_cluster, mn: list[Document]) -> None:
    """The first 120 paragraphs of s0201a indexed (no vector, no lemma rules): the mapping round-trips, the bold
    fields fold diacritics like ``content`` (``vinnata`` finds ``Viññāta``), and a bold_single match finds the
    paragraph whose line opens with the lemma."""
    from workbench.data.catalog import Dataset

    es, url = os_cluster
    docs = [d for d in mn if d.work_id == "s0201a"][:120]
    info = os_index.index_dataset(es, url, Dataset("test-cst-bold", docs, [], [], {}), None)
    got = es.indices.get(index=info.name)[info.name]["mappings"]["properties"]
    want = os_index.index_body([], None)["mappings"]["properties"]
    for name in ("bold", "bold_single", "bold_multi", "title"):
        assert got[name] == want[name], name
    src = es.get(index=info.name, id="s0201a:5")["_source"]
    assert src["bold_single"] == ["diṭṭha", "Suta", "Muta", "Viññāta"]

    def ids(field: str, text: str, kind: str = "match") -> list[str]:
        res = es.search(index=info.name, body={"query": {kind: {field: text}}, "size": 5})
        return [h["_id"] for h in res["hits"]["hits"]]

    assert ids("bold_single", "vinnata") == ["s0201a:5"]
    assert ids("bold_single.exact", "viññāta") == ["s0201a:5"]  # the keyword lane: lower case, diacritics kept
    assert ids("bold_single.exact", "vinnata") == []
    assert ids("bold_multi", "bhutato mannati", "match_phrase") == ["s0201a:3"]
    assert ids("bold_multi", "bhutato mannati")[0] == "s0201a:3"
    assert "s0201a:5" in ids("title.text", "ditthasutavaradivannana")
