"""Tests of the optional Śrīmad-Bhāgavatam loader (sanskritsahitya-bhagavatam).

The corpus has no stated licence and is optional: these tests skip when its folder is
absent. Facts were read from ``srimadbhaagavatam.json`` with ``json`` and checked
against its PROVENANCE.md: 13,403 ``data`` entries, 12,555 verses (848 text lines),
12,029 distinct ``(c, n)`` addresses, so 526 repeats; ``i`` is unique.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from workbench.data.loaders.bhagavatam import RELATIVE_PATH, load_bhagavatam
from workbench.errors import DataError
from workbench.types import Document

FIRST_VERSE = (
    "जन्माद्यस्य यतोऽन्वयादितरतश्चार्थेष्वभिज्ञः स्वराट् तेने ब्रह्महृदा य आदिकवये मुह्यन्ति यत्सूरयः । "
    "तेजोवारिमृदां यथा विनिमयो यत्र त्रिसर्गोऽमृषा धाम्ना स्वेन सदा निरस्तकुहकं सत्यं परं धीमहि॥"
)


@pytest.fixture(scope="module")
def sb_dir(data_dir: Path) -> Path:
    if not (data_dir / RELATIVE_PATH).is_file():
        pytest.skip(f"optional corpus {RELATIVE_PATH.parts[0]} is not in {data_dir}")
    return data_dir


@pytest.fixture(scope="module")
def docs(sb_dir: Path) -> list[Document]:
    return load_bhagavatam(sb_dir)


@pytest.mark.data
def test_counts(docs: list[Document]) -> None:
    assert len(docs) == 12_555
    suffixed = [d for d in docs if "#" in d.doc_id]
    assert len(suffixed) == 526
    assert len({d.doc_id for d in docs}) == 12_555
    assert len({d.address for d in docs}) == 12_029
    assert {(d.work_id, d.granularity) for d in docs} == {("sb", "verse")}
    assert Counter(d.metadata["canto"] for d in docs).keys() == set(range(1, 13))


@pytest.mark.data
def test_first_and_last_verse(docs: list[Document]) -> None:
    first = docs[0]
    assert first.doc_id == "sb1.1.1"
    assert first.address == "SB 1.1.1"
    assert first.text("root") == FIRST_VERSE
    iast = first.text("transliteration_iast")
    assert iast.startswith("janmādyasya")
    assert iast.startswith("janmādyasya yato'nvayāditarataścārtheṣvabhijñaḥ svarāṭ")
    # indic-transliteration writes the daṇḍas as | and ||.
    assert "yatsūrayaḥ | tejovārimṛdāṃ" in iast
    assert iast.endswith("satyaṃ paraṃ dhīmahi||")
    assert [(t.field, t.language, t.script, t.source) for t in first.texts] == [
        ("root", "sa", "Deva", "sanskritsahitya"),
        ("transliteration_iast", "sa", "Latn", "indic-transliteration"),
    ]
    assert first.metadata == {"canto": 1, "index": 0}
    assert docs[1].doc_id == "sb1.1.2"
    last = docs[-1]
    assert last.doc_id == "sb12.13.23"
    assert last.metadata == {"canto": 12, "index": 12641}
    assert last.text("root").startswith("नामसङ्कीर्तनं यस्य सर्वपापप्रणाशनम्")


@pytest.mark.data
def test_duplicate_addresses_get_index_suffix(docs: list[Document]) -> None:
    by_id = {d.doc_id: d for d in docs}
    # The chapter colophon of 1.1 repeats the address 1.1.1 with i = 23.
    dup = by_id["sb1.1.1#23"]
    assert dup.address == "SB 1.1.1"
    assert dup.metadata["index"] == 23
    assert dup.text("root") == "प्रथमस्कन्धे नैमिषीयोपाख्याने प्रथमोऽध्यायः॥"
    suffixed = [d.doc_id for d in docs if "#" in d.doc_id]
    assert suffixed[:3] == ["sb1.1.1#23", "sb1.2.2#58", "sb1.3.3#104"]
    for d in docs:
        base, sep, i = d.doc_id.partition("#")
        if sep:
            assert i == str(d.metadata["index"])
            assert base in by_id  # the first occurrence keeps the plain id
            assert by_id[base].metadata["index"] < d.metadata["index"]


@pytest.mark.data
def test_matches_raw_verses(docs: list[Document], sb_dir: Path) -> None:
    raw = json.loads((sb_dir / RELATIVE_PATH).read_text(encoding="utf-8"))["data"]
    verses = [r for r in raw if "v" in r and "n" in r]
    assert len(raw) == 13_403
    assert [d.metadata["index"] for d in docs] == [r["i"] for r in verses]
    assert [d.address for d in docs] == [f"SB {r['c']}.{r['n']}" for r in verses]


@pytest.mark.data
def test_limit(docs: list[Document], sb_dir: Path) -> None:
    five = load_bhagavatam(sb_dir, limit=5)
    assert [d.doc_id for d in five] == ["sb1.1.1", "sb1.1.2", "sb1.1.3", "sb1.1.4", "sb1.1.5"]
    assert [d.to_json() for d in five] == [d.to_json() for d in docs[:5]]
    assert len(load_bhagavatam(sb_dir, limit=1)) == 1


def _fake(root: Path, obj: object) -> Path:
    p = root / RELATIVE_PATH
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return p


def test_fake_file_with_duplicates_and_text_lines(tmp_path: Path) -> None:
    _fake(tmp_path, {"data": [
        {"c": "1.1", "t": "ऋषय ऊचुः ।"},
        {"c": "1.1", "n": "1", "i": 0, "v": "धर्मः\u0020"},
        {"c": "1.1", "n": "1", "i": 7, "v": "सत्यम्"},
        {"c": "2.3", "n": "4", "i": 8, "v": "कृष्ण"},
    ]})
    docs = load_bhagavatam(tmp_path)
    assert [d.doc_id for d in docs] == ["sb1.1.1", "sb1.1.1#7", "sb2.3.4"]
    assert docs[0].text("root") == "धर्मः"
    assert docs[0].text("transliteration_iast") == "dharmaḥ"
    assert docs[2].text("transliteration_iast") == "kṛṣṇa"
    assert docs[2].metadata == {"canto": 2, "index": 8}
    assert [d.doc_id for d in load_bhagavatam(tmp_path, limit=2)] == ["sb1.1.1", "sb1.1.1#7"]


def test_missing_file_raises_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="srimadbhaagavatam.json is missing"):
        load_bhagavatam(tmp_path)


def test_truncated_file_raises_data_error_naming_the_path(tmp_path: Path) -> None:
    p = _fake(tmp_path, {"data": []})
    p.write_text('{"data": [{"c": "1.1", "n"', encoding="utf-8")
    with pytest.raises(DataError, match="srimadbhaagavatam.json is not valid JSON") as exc:
        load_bhagavatam(tmp_path)
    assert str(p) in str(exc.value)


def test_file_without_data_list_raises_data_error(tmp_path: Path) -> None:
    _fake(tmp_path, {"title": "x"})
    with pytest.raises(DataError, match="no 'data' list"):
        load_bhagavatam(tmp_path)
