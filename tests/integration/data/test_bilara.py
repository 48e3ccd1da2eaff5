"""Tests of the bilara loader against the real corpus and against tiny fake trees.

The facts below were read straight from the raw JSON files of ``suttacentral-bilara``
(and ``suttacentral-bilara-ru-sv``) with ``json`` and cross-checked against their
PROVENANCE.md: segment counts per collection, the orphan English keys, the Russian
coverage, the PTS markers of MN 10 and SN 56.11.

Tests that need the corpus take ``data_dir`` and skip without ``WORKBENCH_DATA``; the
fake-tree and pure-function tests run anywhere.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from workbench.data.loaders.bilara import (
    BilaraCorpus,
    address_of,
    load_bilara,
    segment_sort_key,
    uid_sort_key,
)
from workbench.errors import DataError
from workbench.types import Document

BILARA = Path("suttacentral-bilara")

#: Root segments per collection (PROVENANCE "root segments"; recounted from the raw files).
ROOT_SEGMENTS = {"dn": 16_324, "mn": 27_043, "sn56": 1_370, "dhp": 2_234}
#: Files per collection (PROVENANCE "files").
FILES = {"dn": 34, "mn": 152, "sn56": 109, "dhp": 26}
#: Segments that carry a ``pts-vp-pli<vol>.<page>`` marker (PROVENANCE "entries with pts-vp-pli";
#: no segment carries two). Dhp's 152 entries are ``pts-vp-pli1ed<n>`` verse numbers instead.
PTS_PAGE_STARTS = {"dn": 886, "mn": 1_083, "sn56": 65, "dhp": 0}
#: Orphan English keys (no root segment) per file, from PROVENANCE and the raw files.
ORPHANS = {"mn10": 15, "dn33": 9, "mn146": 12, "mn2": 6, "mn77": 6, "mn118": 6, "dn23": 1}
#: Segments with a non-empty Russian string, per sutta (dn1's two keys are empty strings).
RUSSIAN = {"dn13": 249, "dn9": 198, "dn3": 14, "sn56.31": 12, "sn56.11": 11}


@pytest.fixture(scope="module")
def corpus(data_dir: Path) -> BilaraCorpus:
    return load_bilara(data_dir)


@pytest.fixture(scope="module")
def by_id(corpus: BilaraCorpus) -> dict[str, Document]:
    return {d.doc_id: d for d in corpus.documents}


def _raw(data_dir: Path, kind: str, folder: str, uid: str) -> dict[str, str]:
    paths = {
        "root": BILARA / "root/pli/ms/sutta" / folder / f"{uid}_root-pli-ms.json",
        "en": BILARA / "translation/en/sujato/sutta" / folder / f"{uid}_translation-en-sujato.json",
        "ref": BILARA / "reference/pli/ms/sutta" / folder / f"{uid}_reference.json",
    }
    return json.loads((data_dir / paths[kind]).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- counts and order


@pytest.mark.data
def test_document_counts_equal_root_segment_counts(corpus: BilaraCorpus) -> None:
    counts = Counter(d.metadata["collection"] for d in corpus.documents)
    assert dict(counts) == ROOT_SEGMENTS
    assert len(corpus.documents) == 46_971
    # No root segment is empty in every language, so none was skipped.
    assert corpus.skipped_empty == []


@pytest.mark.data
def test_files_per_collection(corpus: BilaraCorpus) -> None:
    uids = {c: {d.metadata["file_uid"] for d in corpus.documents if d.metadata["collection"] == c} for c in FILES}
    assert {c: len(u) for c, u in uids.items()} == FILES
    # root + English + reference for 321 files, plus 34 ru/team DN files and 2 ru/sv SN files.
    assert len(corpus.files) == 3 * 321 + 34 + 2
    assert len(set(corpus.files)) == len(corpus.files)


@pytest.mark.data
def test_doc_ids_unique_and_in_corpus_order(corpus: BilaraCorpus) -> None:
    ids = [d.doc_id for d in corpus.documents]
    assert len(set(ids)) == len(ids)
    colls = [d.metadata["collection"] for d in corpus.documents]
    # Collections come in the requested order, each as one block.
    assert [c for i, c in enumerate(colls) if i == 0 or colls[i - 1] != c] == ["dn", "mn", "sn56", "dhp"]
    mn = [d.doc_id for d in corpus.documents if d.metadata["collection"] == "mn"]
    assert mn == sorted(mn, key=segment_sort_key)


@pytest.mark.data
def test_first_and_last_documents(corpus: BilaraCorpus) -> None:
    docs = corpus.documents
    assert docs[0].doc_id == "dn1:0.1"
    assert docs[0].address == "DN 1:0.1"
    assert docs[0].text("root") == "Dīgha Nikāya 1"
    assert docs[0].text("translation", "en") == "Long Discourses 1"
    mn = [d for d in docs if d.metadata["collection"] == "mn"]
    assert mn[0].doc_id == "mn1:0.1"
    assert mn[-1].doc_id == "mn152:20.7"
    assert mn[-1].text("root") == "majjhimanikāyo samatto."
    dn = [d for d in docs if d.metadata["collection"] == "dn"]
    assert dn[-1].doc_id == "dn34:2.4.11"
    sn = [d for d in docs if d.metadata["collection"] == "sn56"]
    assert (sn[0].doc_id, sn[-1].doc_id) == ("sn56.1:0.1", "sn56.131:5.8")
    assert docs[-1].doc_id == "dhp423:57"


@pytest.mark.data
def test_collection_subset_and_order(data_dir: Path) -> None:
    c = load_bilara(data_dir, ["dhp", "sn56"])
    assert Counter(d.metadata["collection"] for d in c.documents) == {"dhp": 2_234, "sn56": 1_370}
    assert c.documents[0].doc_id == "dhp1:0.1"
    assert c.documents[-1].doc_id == "sn56.131:5.8"
    assert c.orphans == []  # the 55 orphans are all in DN and MN


# --------------------------------------------------------------------------- texts and addresses


@pytest.mark.data
def test_mn10_texts_keep_display_form(by_id: dict[str, Document], data_dir: Path) -> None:
    d = by_id["mn10:2.1"]
    assert d.address == "MN 10:2.1"
    assert d.work_id == "mn10"
    assert d.granularity == "segment"
    assert d.metadata == {"collection": "mn", "file_uid": "mn10"}
    root = d.text("root", "pi")
    # ṁ (not ṃ), the curly opening quote and the commas as published.
    assert root.startswith("“Ekāyano ayaṁ, bhikkhave, maggo sattānaṁ visuddhiyā,")
    assert root.endswith("yadidaṁ cattāro satipaṭṭhānā.")
    assert "ṃ" not in root
    assert [(t.field, t.language, t.script, t.source) for t in d.texts] == [
        ("root", "pi", "Latn", "ms"),
        ("translation", "en", "Latn", "sujato"),
    ]
    first = by_id["mn10:1.1"]
    assert first.text("root") == "Evaṁ me sutaṁ—"
    assert first.text("translation", "en") == "So I have heard."
    # Exactly the published strings, less bilara's one trailing space.
    raw_root = _raw(data_dir, "root", "mn", "mn10")
    raw_en = _raw(data_dir, "en", "mn", "mn10")
    assert raw_root["mn10:1.1"] == "Evaṁ me sutaṁ—"  # no trailing space after the dash
    assert raw_root["mn10:1.2"].endswith("nigamo. ")
    assert by_id["mn10:1.2"].text("root").endswith("kurūnaṁ nigamo.")
    assert raw_en["mn10:1.1"] == "So I have heard. "
    for seg in ("mn10:1.2", "mn10:2.1", "mn10:46.4"):
        assert by_id[seg].text("root") == raw_root[seg].rstrip()
        assert by_id[seg].text("translation", "en") == raw_en[seg].rstrip()


@pytest.mark.data
def test_addresses(by_id: dict[str, Document]) -> None:
    assert by_id["mn10:2.1"].address == "MN 10:2.1"
    assert by_id["sn56.11:1.1"].address == "SN 56.11:1.1"
    assert by_id["dhp1:1"].address == "Dhp 1:1"
    assert by_id["dn1:1.1.1"].address == "DN 1:1.1.1"
    assert by_id["sn56.11:1.1"].work_id == "sn56.11"
    assert by_id["dhp1:1"].metadata["file_uid"] == "dhp1-20"


def test_address_of_pure() -> None:
    assert address_of("mn10:2.1") == "MN 10:2.1"
    assert address_of("sn56.105-107:1.1") == "SN 56.105-107:1.1"
    assert address_of("dhp21:3") == "Dhp 21:3"
    assert address_of("mn10") == "MN 10"
    assert address_of("an3.65:1.1") == "AN 3.65:1.1"
    assert address_of("12:3") == "12:3"


# --------------------------------------------------------------------------- page references


@pytest.mark.data
def test_mn10_page_refs(by_id: dict[str, Document]) -> None:
    d = by_id["mn10:2.1"]
    assert d.page_refs == ("PTS M 1.56",)
    assert d.pages == ("PTS M 1.56",)
    assert "pts-vp-pli1.56" in d.edition_refs
    assert "msdiv106" in d.edition_refs
    assert d.edition_refs == ("ms9M_302", "msdiv106", "nya2", "pts-vp-pli1.56", "sc2")
    # MN 10 begins on M i 55 (mn9's last marker is pts-vp-pli1.55 at mn9:68.1): the
    # first segments carry no marker of their own but lie on that running page.
    for seg in ("mn10:0.1", "mn10:0.2", "mn10:1.1", "mn10:1.6"):
        assert by_id[seg].page_refs == ()
        assert by_id[seg].pages == ("PTS M 1.55",)
    assert by_id["mn9:68.1"].page_refs == ("PTS M 1.55",)
    assert "vri12.71" in by_id["mn10:1.1"].edition_refs
    assert "msdiv105" in by_id["mn10:1.1"].edition_refs
    # The page runs on after 2.1 until the next marker.
    assert by_id["mn10:3.1"].page_refs == ()
    assert by_id["mn10:3.1"].pages == ("PTS M 1.56",)


@pytest.mark.data
def test_sn_and_dn_page_refs(by_id: dict[str, Document]) -> None:
    d = by_id["sn56.11:1.1"]
    assert d.page_refs == ("PTS S 5.421",)
    assert d.page_refs[0].startswith("PTS S 5.421")
    assert by_id["sn56.11:4.1"].page_refs == ("PTS S 5.422",)
    assert by_id["sn56.1:1.1"].page_refs == ("PTS S 5.414",)  # first SN 56 marker
    assert by_id["dn1:1.1.1"].page_refs == ("PTS D 1.1",)
    # Before the first marker of a collection there is no running page.
    assert by_id["dn1:0.1"].pages == ()
    assert by_id["mn1:0.1"].pages == ()
    assert by_id["sn56.1:0.1"].pages == ()
    # DN's pts-cs tokens are paragraph numbers, kept only as edition refs.
    assert "pts-cs1.1" in by_id["dn1:1.1.1"].edition_refs


@pytest.mark.data
def test_page_start_counts(corpus: BilaraCorpus) -> None:
    starts = Counter(d.metadata["collection"] for d in corpus.documents if d.page_refs)
    assert {c: starts.get(c, 0) for c in PTS_PAGE_STARTS} == PTS_PAGE_STARTS
    assert all(len(d.page_refs) <= 1 for d in corpus.documents)
    letters = {"dn": "D", "mn": "M", "sn56": "S"}
    for d in corpus.documents:
        for r in d.page_refs + d.pages:
            assert re.fullmatch(rf"PTS {letters[d.metadata['collection']]} [1-5]\.[1-9]\d*", r), (d.doc_id, r)
        # pages holds the page starts when there are any (a page starts at its segment's start).
        if d.page_refs:
            assert d.pages == d.page_refs


@pytest.mark.data
def test_dhp_has_no_page_refs_but_keeps_pts_verse_tokens(corpus: BilaraCorpus, by_id: dict[str, Document]) -> None:
    dhp = [d for d in corpus.documents if d.metadata["collection"] == "dhp"]
    assert all(d.page_refs == () and d.pages == () for d in dhp)
    with_pts = [d for d in dhp if any(t.startswith("pts-vp-pli") for t in d.edition_refs)]
    assert len(with_pts) == 152
    assert by_id["dhp1:1"].edition_refs == (
        "bj24.26", "cck25.13", "csp1ed18.13", "csp2ed18.13", "dr25.15", "mc0.15",
        "ms18Dh_2", "ndp20.17", "pts-vp-pli1ed1", "pts-vp-pli2ed1", "sya25.15", "vri47.13",
    )


# --------------------------------------------------------------------------- orphans and Russian


@pytest.mark.data
def test_orphan_english_keys(corpus: BilaraCorpus, by_id: dict[str, Document]) -> None:
    assert len(corpus.orphans) == 55
    assert {lang for lang, _ in corpus.orphans} == {"en"}
    assert Counter(k.partition(":")[0] for _, k in corpus.orphans) == ORPHANS
    orphan_ids = [k for _, k in corpus.orphans]
    assert [f"mn10:34.{i}" for i in range(3, 18)] == [k for k in orphan_ids if k.startswith("mn10:")]
    assert not any(k in by_id for k in orphan_ids)


@pytest.mark.data
def test_russian_on_exactly_the_nonempty_russian_segments(corpus: BilaraCorpus, data_dir: Path) -> None:
    with_ru = {d.doc_id: d for d in corpus.documents if d.text("translation", "ru")}
    assert len(with_ru) == 484
    assert Counter(d.work_id for d in with_ru.values()) == RUSSIAN
    # Independently: every non-empty string of the raw Russian files.
    expected: dict[str, tuple[str, str]] = {}
    for folder, sub, src in (
        (data_dir / BILARA / "translation/ru/team/sutta/dn", "team", "team"),
        (data_dir / "suttacentral-bilara-ru-sv/translation/ru/sv/sutta/sn/sn56", "sv", "sv"),
    ):
        for p in folder.glob(f"*_translation-ru-{sub}.json"):
            for k, v in json.loads(p.read_text(encoding="utf-8")).items():
                if v.strip():
                    expected[k] = (v.rstrip(), src)
    assert set(with_ru) == set(expected)
    for k, (text, src) in expected.items():
        assert with_ru[k].text("translation", "ru") == text
        assert with_ru[k].text("translation", "ru", src) == text
        t = next(t for t in with_ru[k].texts if t.language == "ru")
        assert t.script == "Cyrl"


@pytest.mark.data
def test_russian_examples(by_id: dict[str, Document]) -> None:
    assert by_id["dn13:0.1"].text("translation", "ru", "team") == "Длинные беседы, 13"
    assert by_id["dn13:1.1"].text("translation", "ru") == "Так я слышал:"
    assert by_id["sn56.11:1.1"].text("translation", "ru", "sv") == (
        "Однажды Благословенный проживал в Варанаси, в Оленьем парке, в Исипатане."
    )
    # dn13:8.3 has an empty Russian string: no Russian text, but still a document.
    assert by_id["dn13:8.3"].text("translation", "ru") == ""
    assert by_id["dn13:8.3"].text("root")
    # dn13:22.10 has no Russian key at all.
    assert by_id["dn13:22.10"].text("translation", "ru") == ""
    assert not any(t.language == "ru" for d in (by_id["dn1:0.1"], by_id["sn56.12:1.1"]) for t in d.texts)


# --------------------------------------------------------------------------- sort keys


def test_uid_sort_key_natural_order() -> None:
    assert uid_sort_key("mn2") < uid_sort_key("mn10")
    assert uid_sort_key("sn56.2") < uid_sort_key("sn56.11") < uid_sort_key("sn56.105-107")
    assert uid_sort_key("sn56.104") < uid_sort_key("sn56.105-107") < uid_sort_key("sn56.108")
    assert uid_sort_key("dhp1-20") < uid_sort_key("dhp21-32") < uid_sort_key("dhp100-115")
    uids = ["mn10", "mn2", "mn152", "mn1", "mn21"]
    assert sorted(uids, key=uid_sort_key) == ["mn1", "mn2", "mn10", "mn21", "mn152"]
    # Plain string order gets these wrong; the key does not.
    assert sorted(["sn56.11", "sn56.2", "sn56.105-107"], key=uid_sort_key) == ["sn56.2", "sn56.11", "sn56.105-107"]


def test_segment_sort_key() -> None:
    ids = ["mn10:10.1", "mn10:2.1", "mn2:1.1", "mn10:2.10", "mn10:2.2", "mn10:0.1"]
    assert sorted(ids, key=segment_sort_key) == ["mn2:1.1", "mn10:0.1", "mn10:2.1", "mn10:2.2", "mn10:2.10", "mn10:10.1"]


# --------------------------------------------------------------------------- fake trees and bad input


def _write(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")


def _fake_mn_tree(root: Path) -> Path:
    """A two-sutta MN tree in the bilara layout, with synthetic text."""
    b = root / "suttacentral-bilara"
    _write(b / "root/pli/ms/sutta/mn/mn1_root-pli-ms.json",
           {"mn1:0.1": "Majjhima 1 ", "mn1:1.1": "Evaṁ me sutaṁ— ", "mn1:1.2": "", "mn1:2.1": "ekaṁ. "})
    _write(b / "translation/en/sujato/sutta/mn/mn1_translation-en-sujato.json",
           {"mn1:0.1": "Middle 1 ", "mn1:1.1": "So I have heard. ", "mn1:9.9": "orphan "})
    _write(b / "reference/pli/ms/sutta/mn/mn1_reference.json",
           {"mn1:1.1": "msdiv1, pts-vp-pli1.1", "mn1:2.1": "pts-vp-pli1.2, sc2"})
    _write(b / "root/pli/ms/sutta/mn/mn10_root-pli-ms.json", {"mn10:0.1": "Majjhima 10 ", "mn10:1.1": "dve. "})
    _write(b / "translation/en/sujato/sutta/mn/mn10_translation-en-sujato.json", {"mn10:1.1": "two "})
    _write(b / "reference/pli/ms/sutta/mn/mn10_reference.json", {"mn10:1.1": "pts-vp-pli1.3"})
    _write(b / "root/pli/ms/sutta/mn/mn2_root-pli-ms.json", {"mn2:0.1": "Majjhima 2 ", "mn2:1.1": "ekaṁ samayaṁ "})
    return b


def test_fake_tree_loads(tmp_path: Path) -> None:
    _fake_mn_tree(tmp_path)
    c = load_bilara(tmp_path, ["mn"])
    # mn2 sorts before mn10; mn1:1.2 (empty root, no English) is skipped.
    assert [d.doc_id for d in c.documents] == ["mn1:0.1", "mn1:1.1", "mn1:2.1", "mn2:0.1", "mn2:1.1", "mn10:0.1", "mn10:1.1"]
    assert c.skipped_empty == ["mn1:1.2"]
    assert c.orphans == [("en", "mn1:9.9")]
    by = {d.doc_id: d for d in c.documents}
    assert by["mn1:1.1"].text("root") == "Evaṁ me sutaṁ—"
    assert by["mn1:1.1"].page_refs == ("PTS M 1.1",)
    assert by["mn1:1.1"].edition_refs == ("msdiv1", "pts-vp-pli1.1")
    assert by["mn1:0.1"].pages == ()
    # The page of mn1:2.1 runs on into mn2 (which has no reference file), up to mn10:1.1.
    assert by["mn2:1.1"].pages == ("PTS M 1.2",)
    assert by["mn2:1.1"].text("translation") == ""
    assert by["mn10:0.1"].pages == ("PTS M 1.2",)
    assert by["mn10:1.1"].page_refs == ("PTS M 1.3",)
    assert len(c.files) == 3 + 1 + 3


def test_truncated_root_json_raises_data_error_naming_the_file(tmp_path: Path) -> None:
    b = _fake_mn_tree(tmp_path)
    bad = b / "root/pli/ms/sutta/mn/mn10_root-pli-ms.json"
    full = bad.read_text(encoding="utf-8")
    bad.write_text(full[: len(full) // 2], encoding="utf-8")
    with pytest.raises(DataError) as exc:
        load_bilara(tmp_path, ["mn"])
    assert str(bad) in str(exc.value)
    assert "truncated" in str(exc.value)


def test_truncated_translation_raises_data_error_naming_the_file(tmp_path: Path) -> None:
    b = _fake_mn_tree(tmp_path)
    bad = b / "translation/en/sujato/sutta/mn/mn1_translation-en-sujato.json"
    bad.write_text('{"mn1:0.1": "Midd', encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(str(bad))):
        load_bilara(tmp_path, ["mn"])


def test_root_file_that_is_not_an_object(tmp_path: Path) -> None:
    b = _fake_mn_tree(tmp_path)
    _write(b / "root/pli/ms/sutta/mn/mn2_root-pli-ms.json", ["mn2:0.1", "Majjhima 2"])
    with pytest.raises(DataError, match="mn2 root file is not a JSON object"):
        load_bilara(tmp_path, ["mn"])


def test_missing_collection_folder(tmp_path: Path) -> None:
    _fake_mn_tree(tmp_path)
    with pytest.raises(DataError, match=r"sutta/dn"):
        load_bilara(tmp_path, ["dn"])
    (tmp_path / "suttacentral-bilara/root/pli/ms/sutta/kn/dhp").mkdir(parents=True)
    with pytest.raises(DataError, match="holds no"):
        load_bilara(tmp_path, ["dhp"])


def test_unknown_collection_raises_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown bilara collection 'an'"):
        load_bilara(tmp_path, ["an"])
    _fake_mn_tree(tmp_path)
    with pytest.raises(ValueError, match="'sn'"):
        load_bilara(tmp_path, ["mn", "sn"])
