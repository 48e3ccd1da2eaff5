"""The DPD dictionary lane: Russian and English questions reach Pali passages through the dictionary's meanings."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrievers.dictionary import DictionaryLane, meaning_stems
from workbench.errors import ConfigError
from workbench.types import Document, Query, Text


def Q(qid: str, text: str, lang: str = "ru") -> Query:
    return Query(qid, text, "paraphrase", lang, "test")


@pytest.mark.unit
def test_meaning_stems_drop_stop_words_and_stem():
    assert meaning_stems("Монахи, живущие в лесу", "ru") == ["монах", "живущ", "лес"]
    assert meaning_stems("The monks living in the forest", "en") == ["monk", "live", "forest"]
    assert meaning_stems("the monks", "ru") == []          # a Latin word is not read as Russian
    assert meaning_stems("и в на", "ru") == []             # only stop words


class _Lexicon:
    """A two-headword stand-in with the Lexicon's read interface (lemmas, lemma_entries)."""

    class E:
        def __init__(self, lemma, en, ru):
            self.lemma, self.lemma_1, self.meaning_en, self.meaning_ru = lemma, lemma, en, ru

    entries = {"sati": E("sati", "mindfulness; awareness", "внимательность; бдительность"),
               "vana": E("vana", "forest; wood", "лес; роща")}
    forms = {"sati": "sati", "satiṁ": "sati", "vane": "vana", "vanaṁ": "vana"}

    def lemmas(self, form):
        return (self.forms[form],) if form in self.forms else ()

    def lemma_entries(self, lemma):
        return (self.entries[lemma],) if lemma in self.entries else ()


def _doc(doc_id: str, pali: str) -> Document:
    return Document(doc_id, doc_id, "mn1", "passage", (Text("root", "pi", "Latn", pali),))


@pytest.mark.unit
def test_a_russian_question_reaches_the_passage_through_the_meanings():
    docs = [_doc("d1", "satiṁ upaṭṭhapetvā"), _doc("d2", "vane viharati vanaṁ"), _doc("d3", "evaṁ me sutaṁ")]
    lane = DictionaryLane("dict", docs, _Lexicon())
    run = lane.search([Q("ru", "что такое внимательность"), Q("en", "living in the forest", "en"),
                       Q("none", "и в на"), Q("empty", "")], 10)
    assert [h.doc_id for h in run["ru"]] == ["d1"]
    assert [h.doc_id for h in run["en"]] == ["d2"]
    assert run["none"] == () and run["empty"] == ()
    assert lane.lemmas("лес и внимательность") == [("sati", 1.0), ("vana", 1.0)]


@pytest.mark.unit
def test_no_pali_is_refused():
    with pytest.raises(ConfigError, match="Pali dataset"):
        DictionaryLane("dict", [Document("bg1.1", "BG 1.1", "bg", "verse", (Text("root", "sa", "Deva", "x"),))],
                       _Lexicon())
    with pytest.raises(ConfigError, match="languages"):
        DictionaryLane("dict", [_doc("d1", "sati")], _Lexicon(), languages=("de",))


@pytest.mark.data
def test_known_glosses_on_the_real_dpd_and_bilara(built_home, data_dir: Path):
    """``sati`` is 'mindfulness' (en) and 'внимательность' (ru) in the DPD; MN 118 (Ānāpānasati) answers
    a question about mindfulness of breathing in either language."""
    from workbench.data import catalog
    from workbench.data.loaders.dpd import load_dpd

    ds = catalog.load("bilara-passages", home=built_home)
    lane = DictionaryLane("dict", ds.documents, load_dpd(data_dir))
    assert "sati" in dict(lane.lemmas("внимательность")) and "sati" in dict(lane.lemmas("mindfulness"))
    run = lane.search([Q("ru", "внимательность к дыханию"), Q("en", "mindfulness of breathing", "en")], 5)
    for qid in ("ru", "en"):
        assert any(h.doc_id.startswith("mn118#") for h in run[qid]), (qid, run[qid])
