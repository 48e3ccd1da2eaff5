"""Sanskrit stems (workbench.text.sanskrit, vidyut) and the sanskrit-lemma lane on the real gita."""

from __future__ import annotations

import math

import pytest

from retrievers.sanskrit_lemma import SanskritLemmaLane
from workbench.errors import ConfigError
from workbench.text.sanskrit import declension, gloss_words, stem_map, stems_of
from workbench.types import Document, Query, Text


def Q(qid: str, text: str) -> Query:
    return Query(qid, text, "term", "sa", "test")


# ---------------------------------------------------------------- morphology (hand-checked against Whitney)

@pytest.mark.unit
def test_the_slp1_map_writes_what_indic_transliteration_writes():
    """:func:`workbench.text.sanskrit._iast`'s character map against ``sanscript.transliterate`` on every declined
    form of stems of each class (a, ā, i, ī, u, ṛ, an, as, at, vat), and the fallback on what is not a letter."""
    import unicodedata

    from indic_transliteration import sanscript

    from workbench.text import sanskrit

    slow = lambda s: unicodedata.normalize("NFC", sanscript.transliterate(s, sanscript.SLP1, sanscript.IAST))  # noqa: E731
    forms = {sanskrit._slp1(f) for stem in ("kṣetra", "gaṅgā", "agni", "nadī", "guru", "pitṛ", "ātman", "manas",
                                             "bhagavat", "jagat", "dhī", "bhū") for f in declension(stem)}
    assert len(forms) > 300
    assert [f for f in forms if sanskrit._iast(f) != slow(f)] == []
    assert sanskrit._iast("kfzRaH") == "kṛṣṇaḥ" and sanskrit._iast("SivO") == "śivau"
    assert sanskrit._iast("rAma/s") == slow("rAma/s") and sanskrit._iast("so'ham") == slow("so'ham")  # accent, avagraha


@pytest.mark.unit
def test_declension_of_an_a_stem():
    forms = declension("kṣetra")
    # n. nom/acc sg, loc sg, nom/acc pl, instr sg (ṇ after r: natva), gen pl
    assert {"kṣetram", "kṣetre", "kṣetrāṇi", "kṣetreṇa", "kṣetrāṇām"} <= forms
    assert "kṣetrasya" in forms and "kṣetra" in forms  # gen sg; vocative
    assert declension("") == frozenset() and declension("a b") == frozenset()


@pytest.mark.unit
@pytest.mark.parametrize("word, stem", [
    ("kṣetre", "kṣetra"),        # loc. sg. (BG 1.1 dharma-kṣetre)
    ("yuyutsavaḥ", "yuyutsu"),   # nom. pl. of a u-stem (BG 1.1)
    ("karmaṇi", "karman"),       # loc. sg. of an an-stem (BG 2.47)
    ("ātmānam", "ātman"),        # acc. sg.
    ("buddhyā", "buddhi"),       # instr. sg. of an i-stem
    ("yogī", "yogin"),           # nom. sg. of an in-stem
    ("phaleṣu", "phala"),        # loc. pl. (BG 2.47)
])
def test_stems_of_finds_the_dictionary_form(word, stem):
    assert stem in stems_of(word)


@pytest.mark.unit
def test_no_stem_for_a_pasted_wall_of_letters():
    from workbench.text.sanskrit import MAX_WORD

    assert stems_of("a" * 10_000) == () and stems_of("dharma" * 20) == ()  # longer than MAX_WORD: not declined
    assert MAX_WORD >= 30  # the gita's longest gloss word


def test_no_stem_for_short_or_non_words():
    assert stems_of("ca") == () and stems_of("") == () and stems_of("2.47") == ()


@pytest.mark.unit
def test_stem_map_prefers_the_stem_that_explains_most_words():
    vocab = ["kṣetre", "kṣetram", "kṣetrāṇi", "kṣetrasya"]
    m = stem_map(vocab)
    assert m["kṣetre"] == ("kṣetra",)   # kṣetri / kṣetrā explain only kṣetre
    assert all(m[w] == ("kṣetra",) for w in vocab)


@pytest.mark.unit
def test_gloss_words_split_compounds_and_drop_meanings():
    assert gloss_words("dharma-kṣetre—the land of dharma; kuru-kṣetre—at Kurukshetra; ca—and; 2—x") == \
        ["dharma", "kṣetre", "kuru", "kṣetre", "ca"]


# ---------------------------------------------------------------- the lane: BM25 by hand

def _doc(doc_id: str, stems: dict) -> Document:
    return Document(doc_id, doc_id, "bg", "verse", (Text("root", "sa", "Latn", "x"),), metadata={"stems": stems})


@pytest.mark.unit
def test_bm25_over_stems_by_hand():
    docs = [_doc("d1", {"kṣetre": ["kṣetra"], "kṣetram": ["kṣetra"], "ca": []}),
            _doc("d2", {"kṣetrasya": ["kṣetra"], "dharma": ["dharma"]}),
            _doc("d3", {"dharmam": ["dharma"]})]
    lane = SanskritLemmaLane("sa", docs, k1=1.2, b=0.75)
    run = lane.search([Q("q", "kṣetra"), Q("none", "xyzzy"), Q("empty", "")], 10)
    # N = 3, df(kṣetra) = 2 → idf = ln(1 + 1.5/2.5); lengths: d1 = 2 stems, d2 = 2, d3 = 1; avg 5/3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    def bm25(tf, dl):
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / (5 / 3)))
    assert [(h.doc_id, round(h.score, 12)) for h in run["q"]] == [("d1", round(bm25(2, 2), 12)),
                                                                  ("d2", round(bm25(1, 2), 12))]
    assert run["none"] == () and run["empty"] == ()


@pytest.mark.unit
def test_a_dataset_without_stems_is_refused():
    with pytest.raises(ConfigError, match="sanskrit-lemma.*gita"):
        SanskritLemmaLane("sa", [Document("m1", "MN 1", "mn1", "sutta", (Text("root", "pi", "Latn", "x"),))])


# ---------------------------------------------------------------- on the real gita

@pytest.fixture(scope="module")
def gita(built_home):
    from workbench.data import catalog

    return catalog.load("gita", home=built_home)


@pytest.mark.data
def test_a_stem_finds_its_inflected_forms_in_known_verses(gita):
    """``kṣetra`` is in no gloss of BG 1.1 (``kṣetre``) as typed; its stem finds it and BG 13.2 (``kṣetram``)."""
    lane = SanskritLemmaLane("sa", gita.documents)
    run = lane.search([Q("iast", "kṣetra"), Q("ascii", "ksetra"), Q("cyr", "кшетра"), Q("deva", "क्षेत्र"),
                       Q("hk", "kSetra"), Q("inflected", "kṣetrāṇi")], 20)
    top = [h.doc_id for h in run["iast"]]
    assert {"bg1.1", "bg13.2"} <= set(top)
    for k in ("ascii", "cyr", "deva", "hk", "inflected"):
        assert [h.doc_id for h in run[k]] == top, k


@pytest.mark.data
def test_stem_term_queries_are_judged_by_their_forms(gita):
    """A built dictionary-form query's relevant verses each hold a form of the stem in their glosses."""
    qrels: dict[str, set[str]] = {}
    for r in gita.qrels:
        qrels.setdefault(r.query_id, set()).add(r.doc_id)
    docs = {d.doc_id: d for d in gita.documents}
    forms_of: dict[str, set[str]] = {}
    for d in gita.documents:
        for form, stems in d.metadata["stems"].items():
            for s in stems:
                forms_of.setdefault(s, set()).add(form)
    stem_queries = [q for q in gita.queries if q.query_type == "term" and q.text in forms_of
                    and len(forms_of[q.text]) >= 2 and q.text not in
                    {f for d in gita.documents for f in d.metadata["stems"]}]
    assert len(stem_queries) >= 10
    for q in stem_queries:
        for doc_id in qrels[q.query_id]:
            held = set(docs[doc_id].metadata["stems"])
            assert held & forms_of[q.text] or q.text in held, (q.text, doc_id)


@pytest.mark.data
@pytest.mark.parametrize("text", ["dukkha दुःख дуккха", "🙏", "\ue000", "x" * 5000, "  ", "BG 2.47"])
def test_bad_input_is_an_empty_ranking_or_a_ranking_never_an_error(gita, text):
    lane = SanskritLemmaLane("sa", gita.documents)
    run = lane.search([Q("q", text)], 10)
    assert len(run["q"]) <= 10


@pytest.mark.data
def test_anusvara_spellings_reach_the_velar_nasal_stem(gita):
    """``ahaṅkāra`` (BG 18.24's gloss) typed with ṃ, in ASCII with m, in Devanagari with the anusvāra (अहंकार)
    and in Cyrillic: each the ranking of the ṅ spelling (they used to find nothing)."""
    lane = SanskritLemmaLane("sa", gita.documents)
    run = lane.search([Q("n", "ahaṅkāra"), Q("m_dot", "ahaṃkāra"), Q("ascii", "ahamkara"), Q("deva", "अहंकार"),
                       Q("cyr", "ахамкара")], 10)
    top = [h.doc_id for h in run["n"]]
    assert top[0] == "bg18.24"
    for k in ("m_dot", "ascii", "deva", "cyr"):
        assert [h.doc_id for h in run[k]] == top, k
