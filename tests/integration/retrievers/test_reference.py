"""The canonical-reference lane on real datasets: exact hits only, never a guess."""

from __future__ import annotations

import pytest

from retrievers.reference import ReferenceLane
from workbench.data import catalog
from workbench.types import Query


def q(text, qid="q"):
    return Query(qid, text, "reference", "und", "test")


@pytest.fixture(scope="module")
def lanes(built_home, data_dir):
    out = {}
    for name in ("gita", "bilara-segments", "bilara-passages", "cst4-mn"):
        out[name] = ReferenceLane("reference", catalog.load(name, home=built_home, data=data_dir).documents)
    return out


def ids(lane, text, k=10):
    return [h.doc_id for h in lane.search([q(text)], k)["q"]]


@pytest.mark.parametrize("text", ["BG 2.47", "Бг 2.47", "bg 2.47", "Bg. 2.47", "Bhagavad-gita 2.47"])
def test_verse_reference_returns_exactly_the_verse(lanes, text):
    run = lanes["gita"].search([q(text)], 10)
    assert [(h.doc_id, h.score) for h in run["q"]] == [("bg2.47", 2.0)]


def test_chapter_reference_returns_the_chapter_in_order(lanes):
    got = ids(lanes["gita"], "BG 7", k=100)
    assert got == [f"bg7.{v}" for v in range(1, 31)]
    assert ids(lanes["gita"], "BG 13", k=100)[-1] == "bg13.35"


def test_sutta_reference_heading_first(lanes):
    got = lanes["bilara-segments"].search([q("MN 10")], 500)["q"]
    assert [h.doc_id for h in got[:2]] == ["mn10:0.1", "mn10:0.2"] and got[0].score == 2.0
    assert all(h.doc_id.startswith("mn10:") for h in got)
    assert ids(lanes["bilara-passages"], "МН 10", k=1) == ["mn10#1"]
    assert ids(lanes["cst4-mn"], "MN 10", k=1) == ["s0201m:105"]
    assert ids(lanes["bilara-segments"], "SN 56.106", k=1) == ["sn56.105-107:0.1"]
    assert ids(lanes["bilara-segments"], "Dhp 21", k=1) == ["dhp21:0.1"]  # verse 21 opens the Appamādavagga


def test_page_references(lanes):
    assert ids(lanes["bilara-segments"], "M i 56")[:2] == ["mn10:2.1", "mn10:3.1"]
    assert ids(lanes["bilara-segments"], "PTS M 1.56")[0] == "mn10:2.1"
    cst = lanes["cst4-mn"].search([q("P1.56")], 10)["q"]
    assert {h.doc_id for h in cst if h.score == 2.0} == {"s0201m:106", "s0201a:13"}
    assert ids(lanes["cst4-mn"], "M1.70")[0] == "s0201m:105"


@pytest.mark.parametrize("text", ["", "   ", "the soul is eternal", "BG 19.1", "MN 153", "M iv 5",
                                  "BG 2.20'; DROP TABLE x;--", "x" * 10000])
def test_non_references_and_unresolvable_return_nothing(lanes, text):
    assert lanes["gita"].search([q(text)], 10)["q"] == ()
    assert lanes["bilara-segments"].search([q(text)], 10)["q"] == ()


def test_k_limits_and_batch(lanes):
    run = lanes["gita"].search([q("BG 7", "a"), q("BG 2.47", "b"), q("nothing", "c")], 5)
    assert len(run["a"]) == 5 and len(run["b"]) == 1 and run["c"] == ()
    assert lanes["gita"].search([q("BG 7")], 0)["q"] == ()


def test_reference_lane_passes_the_lane_conformance_kit(lanes):
    from workbench.testing import check_lane

    qs = [q("BG 2.47", "a"), q("Бг 7", "b"), q("Bhagavad-gita 18.78", "c"), q("BG 3", "d")]
    check_lane(lanes["gita"], qs, 10, matches={"a": 1, "b": 30, "c": 1, "d": 43})
    seg = [q("M i 56", "p"), q("MN 10", "m"), q("SN 56.11", "s")]
    check_lane(lanes["bilara-segments"], seg, 5, matches=5)
