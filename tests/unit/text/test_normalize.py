"""Matching forms: NFC, niggahīta, ASCII folding, gita romanisation, Cyrillic."""

import unicodedata

import pytest

from workbench.text.normalize import ascii_fold, gita_to_iast, match_form, to_cyrillic, to_cyrillic_many, tokens


def test_nfd_input_equals_nfc():
    word = "satipaṭṭhānaṁ"
    assert match_form(unicodedata.normalize("NFD", word)) == match_form(word)
    assert tokens(unicodedata.normalize("NFD", "Evaṁ me sutaṁ")) == ["evaṁ", "me", "sutaṁ"]


def test_niggahita_spellings_match():
    assert match_form("Evaṃ") == match_form("evaṁ") == "evaṁ"


def test_tokens_split_quotes_and_digits():
    assert tokens("‘‘bhikkhavo’’ti. Bhikkhave’ti 12 ") == ["bhikkhavo", "ti", "bhikkhave", "ti"]


def test_empty_strings():
    assert tokens("") == [] and match_form("") == "" and ascii_fold("") == "" and gita_to_iast("") == ""
    assert to_cyrillic_many([]) == []


def test_ascii_fold():
    assert ascii_fold("satipaṭṭhāna") == "satipatthana"
    assert ascii_fold("Ñāṇa") == "Nana"


@pytest.mark.parametrize("given,iast", [
    ("kadāchana", "kadācana"),
    ("phaleṣhu", "phaleṣu"),
    ("ichchhā", "icchā"),
    ("dhṛitarāṣhṭra uvācha", "dhṛtarāṣṭra uvāca"),
    ("Śhrī", "Śrī"),
])
def test_gita_romanisation_to_iast(given, iast):
    assert gita_to_iast(given) == iast


def test_cyrillic_reader_forms():
    assert to_cyrillic("satipaṭṭhāna") == "сатипаттхана"
    assert to_cyrillic("mettā") == "метта"
    assert to_cyrillic("nibbāna") == "ниббана"
    assert to_cyrillic_many(["dhamma", "saṁsāra"]) == ["дхамма", "самсара"]


def test_cyrillic_many_rejects_line_breaks():
    with pytest.raises(ValueError, match="single-line"):
        to_cyrillic_many(["a\nb"])
