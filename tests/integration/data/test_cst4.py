"""Tests of the CST4 loader against the real corpus (facts checked by hand in the XML).

Tests that need the corpus skip when ``WORKBENCH_DATA`` is unset; the pure-function tests
at the end run anywhere.
"""

from __future__ import annotations

import os
import re
import time
import unicodedata
from pathlib import Path

import pytest

from workbench.data.loaders.cst4 import (
    DN_BOOKS,
    MN_BOOKS,
    docs_on_page,
    iter_page_starts,
    load_cst4,
    page_ref_sort_key,
)
from workbench.errors import DataError
from workbench.types import Document, Text

CSCD = Path("cst4-tipitaka-xml") / "cscd"

#: Documents per book: numbered paragraphs + unnumbered blocks (see the module docstring).
DOCS_PER_BOOK = {
    "s0201m": 513, "s0202m": 486, "s0203m": 463,
    "s0201a": 457, "s0202a": 354, "s0203a": 312,
    "s0101m": 559, "s0102m": 442, "s0103m": 361,
}
#: Highest paragraph number of each mūla book (numbered 1..N with no gaps or repeats).
MULA_LAST_PARA = {"s0201m": 513, "s0202m": 486, "s0203m": 463, "s0101m": 559, "s0102m": 441, "s0103m": 360}


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if not os.environ.get("WORKBENCH_DATA", "").strip():
        pytest.skip("WORKBENCH_DATA is not set; point it at the shared corpora to run the CST4 tests")
    from workbench.settings import data_dir as resolve

    return resolve(sources=("cst4-tipitaka-xml",))


@pytest.fixture(scope="module")
def mn(data_dir: Path) -> list[Document]:
    return load_cst4(data_dir)


@pytest.fixture(scope="module")
def dn(data_dir: Path) -> list[Document]:
    return load_cst4(data_dir, DN_BOOKS)


@pytest.fixture(scope="module")
def by_id(mn: list[Document], dn: list[Document]) -> dict[str, Document]:
    return {d.doc_id: d for d in mn + dn}


def _raw_paragraph_holding(path: Path, needle: str) -> str | None:
    """The ``n`` of the ``<p>`` whose markup holds ``needle``, read straight from the XML."""
    text = path.read_bytes().decode("utf-16")
    for m in re.finditer(r"<p ([^>]*)>(.*?)</p>", text, re.S):
        if needle in m.group(2):
            n = re.search(r'n="([^"]+)"', m.group(1))
            return n.group(1) if n else None
    raise AssertionError(f"{needle} not in {path}")


# --------------------------------------------------------------------------- counts and ids


@pytest.mark.data
def test_counts_per_book(mn: list[Document], dn: list[Document]) -> None:
    counts: dict[str, int] = {}
    for d in mn + dn:
        counts[d.work_id] = counts.get(d.work_id, 0) + 1
    assert counts == DOCS_PER_BOOK
    assert [d.work_id for d in mn][0] == "s0201m" and [d.work_id for d in mn][-1] == "s0203a"


@pytest.mark.data
def test_first_and_last_of_s0201m(mn: list[Document]) -> None:
    ids = [d.doc_id for d in mn if d.work_id == "s0201m"]
    assert ids[0] == "s0201m:1"
    assert ids[-1] == "s0201m:513"
    d = mn[0]
    assert d.address == "MN 1 ¶1"
    assert d.granularity == "paragraph"
    assert d.metadata["file"] == "s0201m.mul0.xml"
    assert d.metadata["paranum"] == 1


@pytest.mark.data
def test_ids_unique_and_mula_numbers_contiguous(mn: list[Document], dn: list[Document]) -> None:
    docs = mn + dn
    assert len({d.doc_id for d in docs}) == len(docs)
    for book, last in MULA_LAST_PARA.items():
        nums = [d.metadata["paranum"] for d in docs if d.work_id == book and d.metadata["paranum"] is not None]
        assert nums == list(range(1, last + 1)), book  # unique, in order, no gaps
        numbered = [d.doc_id for d in docs if d.work_id == book and d.metadata["paranum"] is not None]
        assert numbered == [f"{book}:{n}" for n in nums]


@pytest.mark.data
def test_atthakatha_repeat_and_range_rules(by_id: dict[str, Document]) -> None:
    # s0201a has "1" twice (Nidānakathā, MN 1's commentary) and a stray "01" inside MN 12's.
    assert by_id["s0201a:1"].metadata["section"] == "Nidānakathā"
    assert by_id["s0201a:1.2"].metadata["title"] == "1. Mūlapariyāyasuttavaṇṇanā"
    assert by_id["s0201a:1.3"].metadata["n"] == "01"
    assert by_id["s0201a:1.3"].metadata["title"] == "2. Mahāsīhanādasuttavaṇṇanā"
    assert by_id["s0201a:1.3"].text("root").startswith("Bahinagareti")
    rng = by_id["s0201a:380-1"]
    assert (rng.metadata["paranum"], rng.metadata["paranum_end"]) == (380, 381)
    assert by_id["s0202a:34-40"].metadata["paranum_end"] == 40
    assert by_id["s0201a:410-4"].metadata["paranum_end"] == 414


@pytest.mark.data
def test_unnumbered_blocks(by_id: dict[str, Document], mn: list[Document], dn: list[Document]) -> None:
    unnumbered = sorted(d.doc_id for d in mn + dn if d.metadata["paranum"] is None)
    assert len(unnumbered) == 26
    assert not any(i.split(":")[0].endswith("m") and i.startswith("s02") for i in unnumbered)
    opening = by_id["s0201a:0+1"]  # the opening verses, before any numbered paragraph
    assert opening.metadata["section"] == "Ganthārambhakathā"
    assert opening.text("root").startswith("Karuṇāsītalahadayaṃ, paññāpajjotavihatamohatamaṃ;\n")
    assert by_id["s0102m:242+1"].metadata["section"] == "Kusāvatīrājadhānī"
    assert by_id["s0102m:242+1"].metadata["sutta"] == "dn17"


@pytest.mark.data
def test_invocation_is_skipped(mn: list[Document], dn: list[Document]) -> None:
    for d in mn + dn:
        assert "Namo tassa bhagavato arahato sammāsambuddhassa" not in d.text("root").split("\n")


# --------------------------------------------------------------------------- anchors and pages


@pytest.mark.data
def test_pts_anchor_mn10(data_dir: Path, by_id: dict[str, Document], mn: list[Document]) -> None:
    # Read straight from the XML: the marker P1.0056 sits inside paragraph 106.
    assert _raw_paragraph_holding(data_dir / CSCD / "s0201m.mul0.xml", '<pb ed="P" n="1.0056" />') == "106"
    d = by_id["s0201m:106"]
    assert "PTS M 1.56" in d.page_refs
    assert "P1.56" in d.edition_refs
    assert d.metadata["sutta"] == "mn10"
    assert d.metadata["section"] == "Uddeso"
    assert iter_page_starts(mn)["PTS M 1.56"] == "s0201m:106"
    assert docs_on_page(mn)["PTS M 1.56"][:3] == ["s0201m:106", "s0201m:107", "s0201m:108"]


@pytest.mark.data
def test_start_of_mn10(data_dir: Path, by_id: dict[str, Document]) -> None:
    raw = data_dir / CSCD / "s0201m.mul0.xml"
    for marker in ('<pb ed="M" n="1.0070" />', '<pb ed="V" n="1.0071" />', '<pb ed="T" n="1.0103" />'):
        assert _raw_paragraph_holding(raw, marker) == "105"
    d = by_id["s0201m:105"]
    assert d.page_refs == ("VRI M 1.71", "MYA M 1.70", "THAI M 1.103")
    assert d.edition_refs == ("V1.71", "M1.70", "T1.103")
    # "Evaṃ" comes before the markers, so the pages running from MN 9 are on it too.
    assert d.pages == (
        "PTS M 1.55", "VRI M 1.70", "VRI M 1.71", "MYA M 1.69", "MYA M 1.70", "THAI M 1.102", "THAI M 1.103",
    )
    assert d.metadata["title"] == "10. Mahāsatipaṭṭhānasuttaṃ"
    assert d.metadata["vagga"] == "1. Mūlapariyāyavaggo"
    assert d.metadata["collection"] == "M"


@pytest.mark.data
def test_pages_contain_page_refs_and_are_sorted(mn: list[Document], dn: list[Document]) -> None:
    for d in mn + dn:
        assert set(d.page_refs) <= set(d.pages), d.doc_id
        assert list(d.pages) == sorted(d.pages, key=page_ref_sort_key), d.doc_id
        assert list(d.page_refs) == sorted(d.page_refs, key=page_ref_sort_key), d.doc_id
        assert len(d.pages) == len(set(d.pages))
        assert len(d.edition_refs) == len(d.page_refs)
        for raw, ref in zip(d.edition_refs, d.page_refs):  # aligned one to one
            ed = {"P": "PTS", "V": "VRI", "M": "MYA", "T": "THAI"}[raw[0]]
            assert ref == f"{ed} {d.metadata['collection']} {raw[1:]}"


@pytest.mark.data
def test_running_page_without_page_start(by_id: dict[str, Document]) -> None:
    d = by_id["s0201m:10"]
    assert d.page_refs == () and d.edition_refs == ()
    assert d.pages == ("PTS M 1.5", "VRI M 1.7", "MYA M 1.6", "THAI M 1.8")


@pytest.mark.data
def test_marker_at_paragraph_end_goes_to_next_document(data_dir: Path, by_id: dict[str, Document]) -> None:
    # <pb ed="P" n="3.0135" /> is the last thing in the unnumbered paragraph before ¶219.
    raw = data_dir / CSCD / "s0203m.mul2.xml"
    assert _raw_paragraph_holding(raw, '<pb ed="P" n="3.0135" />') is None
    assert "P3.135" in by_id["s0203m:219"].edition_refs
    assert "PTS M 3.135" not in by_id["s0203m:218"].pages


@pytest.mark.data
def test_every_marker_lands_once(data_dir: Path, mn: list[Document]) -> None:
    raw = 0
    for book in MN_BOOKS:
        for path in (data_dir / CSCD).glob(f"{book}.*[0-9].xml"):
            raw += path.read_bytes().decode("utf-16").count("<pb ")
    assert raw == 9489  # PROVENANCE.md counts for the 6 MN books
    assert sum(len(d.page_refs) for d in mn) == raw
    # T2.0426 is printed twice in s0202m (T2.427 is missing): the first start wins.
    starts = [d.doc_id for d in mn if "THAI M 2.426" in d.page_refs]
    assert len(starts) == 2 and iter_page_starts(mn)["THAI M 2.426"] == starts[0]


@pytest.mark.data
def test_atthakatha_collection_ps_no_thai(mn: list[Document], by_id: dict[str, Document]) -> None:
    att = [d for d in mn if d.work_id.endswith("a")]
    assert att
    for d in att:
        assert d.metadata["collection"] == "Ps"
        assert d.metadata["sutta"] is None
        assert not any(p.startswith("THAI") for p in d.pages)
        assert not any(r.startswith("T") for r in d.edition_refs)
        assert all(p.split(" ")[1] == "Ps" for p in d.pages)
    assert by_id["s0201a:0+1"].page_refs[:2] == ("PTS Ps 1.1", "PTS Ps 1.2")


# --------------------------------------------------------------------------- suttas, text


@pytest.mark.data
def test_mn_has_152_suttas(mn: list[Document], by_id: dict[str, Document]) -> None:
    mula = [d for d in mn if d.work_id.endswith("m")]
    suttas = [d.metadata["sutta"] for d in mula]
    assert None not in suttas
    assert list(dict.fromkeys(suttas)) == [f"mn{i}" for i in range(1, 153)]
    last = [d for d in mula if d.work_id == "s0203m"][-1]
    assert last.doc_id == "s0203m:463" and last.metadata["sutta"] == "mn152"
    assert last.metadata["title"] == "10. Indriyabhāvanāsuttaṃ"
    assert by_id["s0202m:1"].metadata["sutta"] == "mn51"
    assert by_id["s0203m:1"].metadata["sutta"] == "mn101"
    # An unnumbered subhead is a section, not a sutta.
    assert by_id["s0201m:107"].metadata["section"] == "Kāyānupassanā ānāpānapabbaṃ"
    assert by_id["s0201m:107"].metadata["title"] == "10. Mahāsatipaṭṭhānasuttaṃ"


@pytest.mark.data
def test_dn_has_34_suttas_in_numeric_file_order(dn: list[Document], by_id: dict[str, Document]) -> None:
    assert list(dict.fromkeys(d.metadata["sutta"] for d in dn)) == [f"dn{i}" for i in range(1, 35)]
    assert all(d.metadata["collection"] == "D" for d in dn)
    # mul10 (DN 11) is read after mul9 (DN 10), not after mul1.
    first_of_mul10 = next(d for d in dn if d.metadata["file"] == "s0101m.mul10.xml")
    assert first_of_mul10.doc_id == "s0101m:481"
    assert first_of_mul10.metadata["sutta"] == "dn11"
    assert first_of_mul10.metadata["title"] == "11. Kevaṭṭasuttaṃ"
    assert by_id["s0101m:480"].metadata["sutta"] == "dn10"
    d = by_id["s0102m:1"]
    assert (d.metadata["sutta"], d.metadata["vagga"]) == ("dn14", "Mahāvaggapāḷi")
    assert "PTS D 2.1" in d.page_refs


@pytest.mark.data
def test_diacritics_and_text_cleaning(by_id: dict[str, Document], mn: list[Document]) -> None:
    d = by_id["s0201m:105"]
    text = d.text("root", "pi", "cst4")
    assert text.startswith("Evaṃ me sutaṃ – ekaṃ samayaṃ bhagavā kurūsu viharati")  # no "105." left
    assert "‘‘bhikkhavo’’ti" in text
    assert d.texts == (Text("root", "pi", "Latn", text, "cst4"),)
    assert "Mahāsatipaṭṭhānasuttaṃ" in d.metadata["title"]
    n106 = by_id["s0201m:106"]
    assert n106.metadata["notes"] == ["pariddavānaṃ (sī. pī.)"]
    assert "sokaparidevānaṃ samatikkamāya" in n106.text("root")
    assert "(sī." not in n106.text("root")
    for doc in mn:
        t = doc.text("root")
        assert t and t == unicodedata.normalize("NFC", t)
        assert "  " not in t and "<" not in t
        assert not re.search(r"\s[,.;:!?]", t), doc.doc_id  # no space left where a marker stood
    # Unnumbered paragraphs are appended one line each.
    assert by_id["s0201m:138"].text("root").split("\n")[-3:] == [
        "Tassuddānaṃ –",
        "Mūlasusaṃvaradhammadāyādā, bheravānaṅgaṇākaṅkheyyavatthaṃ;",
        "Sallekhasammādiṭṭhisatipaṭṭhaṃ, vaggavaro asamo susamatto.",
    ]


@pytest.mark.data
def test_single_book_load_matches(data_dir: Path, mn: list[Document]) -> None:
    alone = load_cst4(data_dir, ("s0202m",))
    assert [d.to_json() for d in alone] == [d.to_json() for d in mn if d.work_id == "s0202m"]


@pytest.mark.data
def test_fast_and_silent(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    docs = load_cst4(data_dir, MN_BOOKS)
    assert time.perf_counter() - start < 5.0
    assert len(docs) == sum(DOCS_PER_BOOK[b] for b in MN_BOOKS)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


# --------------------------------------------------------------------------- bad input


def _fake_data_dir(tmp: Path, real: Path, book: str, files: int, skip: str | None = None) -> Path:
    cscd = tmp / CSCD
    cscd.mkdir(parents=True)
    for i in range(files):
        name = f"{book}.mul{i}.xml"
        if name != skip:
            (cscd / name).symlink_to(real / CSCD / name)
    return cscd


def test_missing_cscd_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=re.escape(str(tmp_path / CSCD))):
        load_cst4(tmp_path)


def test_unknown_book_code(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="s9999m"):
        load_cst4(tmp_path, ("s0201m", "s9999m"))
    with pytest.raises(ValueError):
        load_cst4(tmp_path, "s0201m")  # a bare string is not a sequence of books


@pytest.mark.data
def test_missing_file(tmp_path: Path, data_dir: Path) -> None:
    cscd = _fake_data_dir(tmp_path, data_dir, "s0201m", 5, skip="s0201m.mul2.xml")
    with pytest.raises(DataError, match=re.escape(str(cscd / "s0201m.mul2.xml"))):
        load_cst4(tmp_path, ("s0201m",))


@pytest.mark.data
@pytest.mark.parametrize("extra", [0, 1], ids=["odd-length", "even-length"])
def test_truncated_file(tmp_path: Path, data_dir: Path, extra: int) -> None:
    # Half of the file: odd length fails UTF-16 decoding, even length fails XML parsing.
    cscd = _fake_data_dir(tmp_path, data_dir, "s0201m", 5, skip="s0201m.mul0.xml")
    raw = (data_dir / CSCD / "s0201m.mul0.xml").read_bytes()
    (cscd / "s0201m.mul0.xml").write_bytes(raw[: len(raw) // 2 + extra])
    with pytest.raises(DataError, match=re.escape(str(cscd / "s0201m.mul0.xml"))):
        load_cst4(tmp_path, ("s0201m",))


# --------------------------------------------------------------------------- pure page indexes


def _doc(doc_id: str, page_refs: tuple[str, ...], pages: tuple[str, ...]) -> Document:
    return Document(doc_id, doc_id, "b", "paragraph", (), page_refs=page_refs, pages=pages)


def test_page_indexes_are_pure_functions() -> None:
    docs = [
        _doc("b:1", ("PTS M 1.1",), ("PTS M 1.1",)),
        _doc("b:2", (), ("PTS M 1.1",)),
        _doc("b:3", ("PTS M 1.2", "PTS M 1.1"), ("PTS M 1.1", "PTS M 1.2")),  # a repeated marker
    ]
    assert iter_page_starts(docs) == {"PTS M 1.1": "b:1", "PTS M 1.2": "b:3"}
    assert docs_on_page(docs) == {"PTS M 1.1": ["b:1", "b:2", "b:3"], "PTS M 1.2": ["b:3"]}
    assert iter_page_starts([]) == {} and docs_on_page([]) == {}


def test_page_ref_sort_key_orders_editions_then_numbers() -> None:
    refs = ["THAI M 1.2", "MYA M 1.10", "PTS M 2.1", "VRI M 1.3", "PTS M 1.56", "MYA M 1.9"]
    assert sorted(refs, key=page_ref_sort_key) == [
        "PTS M 1.56", "PTS M 2.1", "VRI M 1.3", "MYA M 1.9", "MYA M 1.10", "THAI M 1.2",
    ]


@pytest.mark.data
def test_addresses_name_the_sutta_with_the_cst_book_and_page_beside(mn: list[Document]) -> None:
    """A scholar reads ``MN 10 ¶105``, not ``CST s0201m ¶105`` (the sutta was only in the metadata)."""
    from workbench.text.doctext import beside, display_address

    d = {x.doc_id: x for x in mn}
    assert d["s0201m:105"].address == "MN 10 ¶105"
    assert beside(d["s0201m:105"]) == "CST s0201m · PTS M 1.55"
    assert display_address(d["s0201m:1"]) == "MN 1 ¶1 (CST s0201m · PTS M 1.1)"
    assert d["s0202m:1"].address == "MN 51 ¶1"      # CST numbers paragraphs per book
    assert d["s0203m:463"].address.startswith("MN 152 ")
    commentary = [x for x in mn if x.work_id == "s0201a"]
    assert commentary and all(x.address.startswith("CST s0201a ¶") for x in commentary)  # no sutta: the book


@pytest.mark.data
def test_an_address_the_workbench_shows_reads_back_in_the_reference_lane(mn: list[Document]) -> None:
    """``MN 10 ¶105`` copied from ``search`` (with or without what is shown beside it) finds that paragraph;
    ``MN 10`` still finds the sutta; an address of no paragraph here finds nothing (no guessing)."""
    from retrievers.reference import ReferenceLane
    from workbench.types import Query

    lane = ReferenceLane("ref", mn)
    assert lane.resolve("MN 10 ¶105") == [("s0201m:105", 2.0)]
    assert lane.resolve("mn 10 ¶ 105 (CST s0201m · PTS M 1.55)") == [("s0201m:105", 2.0)]
    assert lane.resolve("\u200bMN 10 ¶105\u200b") == [("s0201m:105", 2.0)]
    assert lane.resolve("CST s0201a ¶1.2") == [("s0201a:1.2", 2.0)]
    assert lane.resolve("MN 10 ¶99999") == []
    sutta = dict(lane.resolve("MN 10"))
    assert sutta["s0201m:105"] == 2.0 and sutta["s0201m:106"] == 1.0 and len(sutta) > 20  # ¶105 opens MN 10
    run = lane.search([Query("q1", "MN 10 ¶106", "reference", "en", "test")], 10)
    assert [h.doc_id for h in run["q1"]] == ["s0201m:106"]


# --------------------------------------------------------------------------- bold spans and headings (#bold)


@pytest.mark.data
def test_bold_spans_and_headings_of_a_commentary_paragraph(by_id: dict[str, Document]) -> None:
    """s0201a:5 read by hand in s0201a.att1.xml: under ``<p rend="subhead">Diṭṭhasutavārādivaṇṇanā</p>`` of
    ``1. Mūlapariyāyasuttavaṇṇanā``, ¶5 holds ``<hi rend="bold">diṭṭhaṃ diṭṭhato</hi>tiādimāha`` mid-line, the next
    line ``Tattha <hi rend="bold">diṭṭha</hi>nti … Tattha <hi rend="bold">diṭṭhaṃ maññatī</hi>ti``, and three lines
    open with ``<hi rend="bold">Suta</hi>nti``, ``Muta``, ``Viññāta``."""
    d = by_id["s0201a:5"]
    assert d.metadata["bold"] == ["diṭṭhaṃ diṭṭhato", "diṭṭha", "diṭṭhaṃ maññatī", "Suta", "Muta", "Viññāta"]
    assert d.metadata["bold_lead"] == ["Suta", "Muta", "Viññāta"]  # the spans that open a <p>
    assert d.metadata["title"] == "1. Mūlapariyāyasuttavaṇṇanā"
    assert d.metadata["section"] == "Diṭṭhasutavārādivaṇṇanā"
    assert d.metadata["vagga"] == "1. Mūlapariyāyavaggo"
    text = d.text("root")
    assert all(s in text for s in d.metadata["bold"])  # the spans stay in the body text
    assert "\nSutanti maṃsasotenapi sutaṃ" in text


@pytest.mark.data
def test_bold_span_edges_and_page_markers(by_id: dict[str, Document]) -> None:
    """A page marker inside a span is dropped like in the body (s0202a ¶261: ``<hi rend="bold">Na <pb ed="M"
    n="3.0184" /> karotī</hi>ti``); punctuation at a span's edges goes (s0201a ¶3 ``<hi rend="bold">devā,</hi>``),
    punctuation inside stays (s0201a ¶7 ``<hi rend="bold">yopi so, bhikkhave, bhikkhu sekkho</hi>``)."""
    assert "Na karotī" in by_id["s0202a:261"].metadata["bold"]
    assert "devā" in by_id["s0201a:3"].metadata["bold"] and "devā," not in by_id["s0201a:3"].metadata["bold"]
    assert "yopi so, bhikkhave, bhikkhu sekkho" in by_id["s0201a:7"].metadata["bold"]
    assert by_id["s0201a:7"].metadata["bold_lead"] == ["Sekkho", "Anuttara", "Pariññeyyaṃ tassā"]


@pytest.mark.data
def test_bold_counts_match_the_xml(mn: list[Document], dn: list[Document]) -> None:
    """Every ``<hi rend="bold">`` of the files is kept (11,466 in the nine books; MN aṭṭhakathā 5,999 + 3,070 +
    2,152, one each in s0202m and s0203m); 2,041 of them open a paragraph; mūla documents have almost none."""
    spans = {}
    for d in mn + dn:
        spans[d.work_id] = spans.get(d.work_id, 0) + len(d.metadata["bold"])
    assert spans == {"s0201m": 0, "s0202m": 1, "s0203m": 1, "s0201a": 5999, "s0202a": 3070, "s0203a": 2152,
                     "s0101m": 0, "s0102m": 4, "s0103m": 239}
    assert sum(1 for d in mn if d.metadata["bold"]) == 1114
    assert sum(len(d.metadata["bold_lead"]) for d in mn) == 2035
    assert all(isinstance(d.metadata["bold"], list) and all(unicodedata.is_normalized("NFC", s) and s == s.strip()
                                                           for s in d.metadata["bold"]) for d in mn)


@pytest.mark.data
def test_keeping_bold_leaves_the_body_text_as_it_was(mn: list[Document]) -> None:
    """The texts are the ones the loader gave before it kept bold (hash taken with that loader), so the
    indexed body of existing datasets does not change."""
    import hashlib

    h = hashlib.sha256("\n\x00".join(f"{d.doc_id}\t{d.text('root')}" for d in mn).encode()).hexdigest()
    assert h == "106b1c405c6f2d13272234d6eac2aad2ebe791bf9b584bf2adbcc4185745a58e"
