"""Compound members from the DPD's construction data and the pali-lemma lane on the real bilara passages."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrievers.pali_lemma import PaliLemmaLane
from workbench.data.querysets.builders import compound_member_holders
from workbench.types import Query


def Q(qid: str, text: str) -> Query:
    return Query(qid, text, "term", "pi", "test")


@pytest.fixture(scope="module")
def lexicon(data_dir: Path):
    from workbench.data.loaders.dpd import load_dpd

    return load_dpd(data_dir)


@pytest.fixture(scope="module")
def passages(built_home):
    from workbench.data import catalog

    return catalog.load("bilara-passages", home=built_home)


@pytest.mark.data
def test_members_follow_compound_constructions_only(lexicon):
    # kakacūpamasutta = kakacūpama + sutta; kakacūpama = kakaca + upama (the DPD's construction field)
    assert lexicon.members("kakacūpamasutta") == ("kakaca", "kakacūpama", "sutta", "upama")
    assert lexicon.members("satipaṭṭhāna") == ("sati", "upaṭṭhāna")
    assert lexicon.members("upama") == ()          # upa+√mā+a: a derivation, not a compound
    assert lexicon.members("anupassī") == ()       # anu+passa+ī: a suffix is not a word
    assert lexicon.members("no such lemma") == ()


class _Lex:
    def __init__(self, members):
        self._m = members

    def members(self, lemma):
        return self._m.get(lemma, ())


@pytest.mark.unit
def test_compound_member_holders_by_hand():
    holders = {"kakacūpama": ["mn21#1", "mn21#6"], "sutta": ["mn1#1"], "sati": ["mn10#1"],
               "satipaṭṭhāna": ["mn10#1", "dn22#1"]}
    lex = _Lex({"kakacūpama": ("kakaca", "upama"), "satipaṭṭhāna": ("sati", "upaṭṭhāna")})
    # sati stands alone in mn10#1, so only the members never found alone are compound-only terms
    assert compound_member_holders(holders, lex) == {"kakaca": ["mn21#1", "mn21#6"], "upama": ["mn21#1", "mn21#6"],
                                                     "upaṭṭhāna": ["mn10#1", "dn22#1"]}


@pytest.mark.data
def test_a_member_finds_the_sutta_title_in_every_script(passages, lexicon):
    """``kakaca`` (a saw) finds MN 21's opening passage, whose only form of it is the title Kakacūpamasutta, only
    when compounds count; Cyrillic and Devanagari rank the same as IAST."""
    with_c = PaliLemmaLane("p", passages.documents, lexicon)
    without = PaliLemmaLane("p", passages.documents, lexicon, compounds=False)
    qs = [Q("iast", "kakaca"), Q("cyr", "какача"), Q("deva", "ककच"), Q("hk", "kakaca"), Q("none", "xyzzy")]
    run, plain = with_c.search(qs, 10), without.search(qs, 10)
    top = [h.doc_id for h in run["iast"]]
    assert "mn21#1" in top and "mn21#1" not in [h.doc_id for h in plain["iast"]]
    assert [h.doc_id for h in run["cyr"]] == top and [h.doc_id for h in run["deva"]] == top
    assert run["none"] == ()


@pytest.mark.data
def test_ascii_without_diacritics_reaches_the_lemma(passages, lexicon):
    lane = PaliLemmaLane("p", passages.documents, lexicon)
    for typed in ("satipatthana", "satipaṭṭhāna", "сатипаттхана", "सतिपट्ठान"):
        assert "satipaṭṭhāna" in dict(lane.query_terms(typed)), typed
    run = lane.search([Q("ascii", "satipatthana"), Q("iast", "satipaṭṭhāna")], 10)
    assert run["ascii"][0].doc_id == run["iast"][0].doc_id


@pytest.mark.data
def test_anusvara_spellings_reach_the_lemma(passages, lexicon):
    """``saṅgha`` typed ``saṃgha``, ``saṁgha``, ``samgha`` or ``संघ``: the same ranking (they used to find nothing)."""
    lane = PaliLemmaLane("p", passages.documents, lexicon)
    run = lane.search([Q("n", "saṅgha"), Q("m_dot", "saṃgha"), Q("m_dot2", "saṁgha"), Q("ascii", "samgha"),
                       Q("deva", "संघ")], 10)
    top = [h.doc_id for h in run["n"]]
    assert top and top[0].startswith("mn69")
    for k in ("m_dot", "m_dot2", "ascii", "deva"):
        assert [h.doc_id for h in run[k]] == top, k
