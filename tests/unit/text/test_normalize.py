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


def test_documents_are_indexed_in_the_form_queries_take():
    """Issue #41: the query side unified apostrophes and Devanagari "do not use" spellings; the documents'
    indexed and embedded text must too, or a document written with U+02BC or अ + ा matches no query."""
    from workbench.text.doctext import index_text
    from workbench.text.normalize import unify
    from workbench.text.query import clean
    from workbench.types import Document, Text

    root = "\u0905\u093e\u0924\u094d\u092e\u093e \u0907\u0902\u0926\u094d\u0930"  # अ + ा for आ; इंद्र
    doc = Document("d1", "D 1", "w", "verse", (Text("translation", "en", "Latn", "It\u02bcs time, Master Gotama"),
                                               Text("root", "sa", "Deva", root)))
    assert index_text(doc) == "It\u2019s time, Master Gotama\n\u0906\u0924\u094d\u092e\u093e \u0907\u0902\u0926\u094d\u0930"
    assert doc.texts[0].text == "It\u02bcs time, Master Gotama"  # the display text is kept as published
    for typed in ("It\u02bcs", "It\uff07s", "It\u02bbs", "\u0905\u093e\u0924\u094d\u092e\u093e"):
        assert clean(typed) in index_text(doc)  # what a query becomes is what the index holds
    assert unify("plain ascii") == "plain ascii" and unify("sa\u0304dhu") == "s\u0101dhu"
