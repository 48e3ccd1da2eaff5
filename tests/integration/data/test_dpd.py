"""Tests of the ms-dpd lexicon loader against the real files and against tiny fake trees.

Facts were read from the raw ``.mjs`` files (prefix stripped, parsed with ``json``) and
cross-checked against ``ms-dpd/PROVENANCE.md``: 131,887 forms, 61,596 headwords,
``INDEX["satipaṭṭhānā"] = "EzR,EzS"``, ``INDEX["bhikkhave"] = "CyK,Cyb"``, 15 ids for
``dhammo``, ``DEF_PALI["EzR"] = "a masc|masc|sati+upaṭṭhāna|satipaṭṭhān|satipaṭṭhāna 1"``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from workbench.data.loaders.dpd import Lexicon, bare_lemma, dpd_files, load_dpd
from workbench.errors import DataError

#: Every indexed form of the bare lemma satipaṭṭhāna (ids EzR, EzS), from the raw index.
SATIPATTHANA_FORMS = (
    "satipaṭṭhāna", "satipaṭṭhānanti", "satipaṭṭhānato", "satipaṭṭhānatoti", "satipaṭṭhānañca",
    "satipaṭṭhānaṁ", "satipaṭṭhāne", "satipaṭṭhānehi", "satipaṭṭhānena", "satipaṭṭhānesu",
    "satipaṭṭhāno", "satipaṭṭhānā", "satipaṭṭhānāna", "satipaṭṭhānānaṁ", "satipaṭṭhānāti",
)


@pytest.fixture(scope="module")
def lex(data_dir: Path) -> Lexicon:
    return load_dpd(data_dir)


# --------------------------------------------------------------------------- sizes


@pytest.mark.data
def test_counts(lex: Lexicon) -> None:
    assert len(lex) == 131_887
    assert lex.n_entries == 61_596


@pytest.mark.data
def test_dpd_files_exist(data_dir: Path) -> None:
    files = dpd_files(data_dir)
    assert set(files) == {"index", "pali", "en", "ru"}
    assert all(p.is_file() for p in files.values())
    assert files["index"].name == "index.mjs"
    assert files["ru"].parent.name == "ms-dpd-ru-2.53.0"


# --------------------------------------------------------------------------- look-ups


@pytest.mark.data
def test_lemmas_of_known_forms(lex: Lexicon) -> None:
    assert lex.lemmas("dhammo") == ("dhamma",)
    assert len(lex.entries("dhammo")) == 15  # dhamma 1.01 … dhamma 2.1
    assert lex.entries("dhammo")[0].id == "90U"
    assert lex.entries("dhammo")[0].lemma_1 == "dhamma 1.01"
    assert lex.entries("dhammo")[-1].lemma_1 == "dhamma 2.1"
    assert lex.lemmas("bhikkhave") == ("bhikkhave", "bhikkhu")
    assert [e.id for e in lex.entries("bhikkhave")] == ["CyK", "Cyb"]
    assert lex.lemmas("satipaṭṭhānā") == ("satipaṭṭhāna",)
    assert [e.lemma_1 for e in lex.entries("satipaṭṭhānā")] == ["satipaṭṭhāna 1", "satipaṭṭhāna 2"]
    assert lex.lemmas("viharati") == ("viharati",)
    assert lex.lemmas("evaṁ") == ("evaṁ",)
    assert lex.lemmas("satipaṭṭhānaṁ") == ("satipaṭṭha", "satipaṭṭhāna")


@pytest.mark.data
def test_lookups_normalise_the_form(lex: Lexicon) -> None:
    # CST4 spells the niggahīta ṃ (U+1E43); ms-dpd keys use ṁ (U+1E41).
    assert "\u1e43" in "satipaṭṭhānaṃ"
    assert lex.lemmas("satipaṭṭhānaṃ") == ("satipaṭṭha", "satipaṭṭhāna")
    assert lex.entries("evaṃ") == lex.entries("evaṁ")
    assert [e.lemma_1 for e in lex.entries("evaṃ")] == ["evaṁ 1", "evaṁ 2"]
    # NFD input (ā as a + U+0304, ṭ as t + U+0323) finds the same entries.
    nfd = unicodedata.normalize("NFD", "satipaṭṭhānā")
    assert nfd != "satipaṭṭhānā"
    assert lex.lemmas(nfd) == ("satipaṭṭhāna",)
    # Case does not matter.
    assert lex.lemmas("Dhammo") == ("dhamma",)
    assert lex.lemmas("BHIKKHAVE") == ("bhikkhave", "bhikkhu")


@pytest.mark.data
def test_unknown_and_empty_forms(lex: Lexicon) -> None:
    assert lex.lemmas("qwertyuiop") == ()
    assert lex.entries("qwertyuiop") == ()
    assert lex.lemmas("") == ()
    assert lex.forms_of("no such lemma") == ()
    assert lex.lemma_entries("no such lemma") == ()


@pytest.mark.data
def test_entry_ezr(lex: Lexicon) -> None:
    e = lex.entries("satipaṭṭhānā")[0]
    assert e.id == "EzR"
    assert e.lemma_1 == "satipaṭṭhāna 1"
    assert e.lemma == "satipaṭṭhāna"
    assert (e.pattern, e.pos, e.construction, e.stem) == ("a masc", "masc", "sati+upaṭṭhāna", "satipaṭṭhān")
    assert e.meaning_en == "attending mindfully; being present with mindfulness"
    assert e.meaning_en.startswith("attending mindfully")
    assert e.meaning_ru.startswith("утверждение осознанности;")
    assert re.search(r"[\u0400-\u04FF]", e.meaning_ru)
    assert not re.search(r"[A-Za-z]", e.meaning_ru)


@pytest.mark.data
def test_meaning_of_dhamma_90u(lex: Lexicon) -> None:
    e = lex.entries("dhammo")[0]
    assert e.id == "90U"
    assert e.meaning_en == "nature; character"
    assert e.meaning_ru == "характер; качество; природа"


@pytest.mark.data
def test_forms_of(lex: Lexicon) -> None:
    forms = lex.forms_of("satipaṭṭhāna")
    assert "satipaṭṭhānaṁ" in forms
    assert "satipaṭṭhānā" in forms
    assert forms == SATIPATTHANA_FORMS
    assert list(forms) == sorted(forms)
    assert lex.forms_of("satipaṭṭhāna") == lex.forms_of("Satipaṭṭhāna")
    assert "dhammo" in lex.forms_of("dhamma")
    assert "bhikkhave" in lex.forms_of("bhikkhu")


@pytest.mark.data
def test_all_lemmas_and_lemma_entries(lex: Lexicon) -> None:
    lemmas = lex.all_lemmas()
    assert list(lemmas) == sorted(lemmas)
    assert "satipaṭṭhāna" in lemmas and "dhamma" in lemmas
    # At most the 50,060 distinct bare lemmas of DEF_PALI (PROVENANCE): only those with an indexed form.
    assert len(lemmas) <= 50_060
    assert [e.lemma_1 for e in lex.lemma_entries("satipaṭṭhāna")] == ["satipaṭṭhāna 1", "satipaṭṭhāna 2"]


# --------------------------------------------------------------------------- bare_lemma


def test_bare_lemma() -> None:
    assert bare_lemma("dhamma 1.01") == "dhamma"
    assert bare_lemma("dhamma 2.1") == "dhamma"
    assert bare_lemma("satipaṭṭhāna 1") == "satipaṭṭhāna"
    assert bare_lemma("bhikkhave") == "bhikkhave"
    assert bare_lemma("  evaṁ 2 ") == "evaṁ"
    assert bare_lemma("sutā") == "sutā"
    # Only a trailing homonym number goes.
    assert bare_lemma("catu 4 sacca") == "catu 4 sacca"
    assert bare_lemma("") == ""


# --------------------------------------------------------------------------- fake trees and bad input


def _fake_tree(root: Path, index: str | None = None) -> dict[str, Path]:
    files = dpd_files(root)
    bodies = {
        "index": index if index is not None else 'export const INDEX={"dhammo":"a,b","dhammaṁ":"a","ghost":"zz"};',
        "pali": 'export const DEF_PALI={"a":"a masc|masc|dhar+ma|dhamm|dhamma 1.01","b":"a masc|masc||dhamm|dhamma 2.1"}',
        "en": 'export const DEF_LANG={"a":"nature; character||","b":"|teaching|"}',
        "ru": '\ufeffexport const DEF_LANG={"a":"природа||","b":"||"};\n',  # BOM and ";" are tolerated
    }
    for role, p in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(bodies[role], encoding="utf-8")
    return files


def test_fake_tree_loads(tmp_path: Path) -> None:
    _fake_tree(tmp_path)
    lex = load_dpd(tmp_path)
    assert len(lex) == 3
    assert lex.n_entries == 2
    assert lex.lemmas("dhammo") == ("dhamma",)
    assert lex.lemmas("dhammaṃ") == ("dhamma",)
    assert lex.lemmas("ghost") == ()  # an id with no definition is ignored
    a, b = lex.entries("dhammo")
    assert (a.meaning_en, a.meaning_ru) == ("nature; character", "природа")
    assert (b.meaning_en, b.meaning_ru) == ("teaching", "")  # meaning_2 when meaning_1 is empty
    assert lex.forms_of("dhamma") == ("dhammaṁ", "dhammo")
    assert lex.all_lemmas() == ("dhamma",)


def test_truncated_index_raises_data_error_naming_the_path(tmp_path: Path) -> None:
    files = _fake_tree(tmp_path, index='export const INDEX={"dhammo":"a,b","dham')
    with pytest.raises(DataError) as exc:
        load_dpd(tmp_path)
    assert str(files["index"]) in str(exc.value)
    assert "invalid JSON" in str(exc.value)


def test_file_without_export_prefix_raises_data_error(tmp_path: Path) -> None:
    files = _fake_tree(tmp_path, index=json.dumps({"dhammo": "a"}))
    with pytest.raises(DataError) as exc:
        load_dpd(tmp_path)
    assert str(files["index"]) in str(exc.value)
    assert "export const INDEX=" in str(exc.value)


def test_wrong_export_name_raises_data_error(tmp_path: Path) -> None:
    files = _fake_tree(tmp_path)
    files["pali"].write_text('export const DEF_LANG={"a":"x|y|z|w|v"}', encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(str(files["pali"]))):
        load_dpd(tmp_path)


def test_missing_file_raises_data_error(tmp_path: Path) -> None:
    files = _fake_tree(tmp_path)
    files["ru"].unlink()
    with pytest.raises(DataError, match="definition-ru.mjs is missing"):
        load_dpd(tmp_path)
