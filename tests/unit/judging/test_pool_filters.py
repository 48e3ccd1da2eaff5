"""What a pool keeps out (issue #41): systems that do not answer a query's language, pairs every system ranks
low; and the pool's quality, the share of graded pooled pairs graded 0. Figures computed by hand."""

from __future__ import annotations

import pytest

from workbench.judging.layers import FinalGrade
from workbench.judging.pooling import (
    MIN_LANGUAGE_QUERIES,
    PoolQuality,
    answering_systems,
    best_ranks,
    pool_quality,
    priorities,
    restrict_to_answering,
)


def _systems():
    """Ten Hindi and ten English queries h0..h9, e0..e9, each with one relevant document r<q>.
    e5 (multilingual) finds it at rank 1 everywhere; minilm (English only) at rank 1 for English, never for Hindi
    (it puts the same two hub verses first); fts at rank 3 for English and for the first two Hindi queries."""
    hi = [f"h{i}" for i in range(10)]
    en = [f"e{i}" for i in range(10)]
    e5 = {q: (f"r{q}", "x", "y") for q in hi + en}
    minilm = {**{q: ("bg14.24", "bg8.1", "z") for q in hi}, **{q: (f"r{q}", "a", "b") for q in en}}
    fts = {**{q: ("m", "n", f"r{q}") for q in en + hi[:2]}, **{q: ("m", "n", "o") for q in hi[2:]}}
    systems = {"config:e5": (1.0, e5), "lane:minilm": (0.5, minilm), "lane:fts": (0.5, fts)}
    languages = {**{q: "hi" for q in hi}, **{q: "en" for q in en}}
    relevant = {q: {f"r{q}"} for q in hi + en}
    return systems, languages, relevant


def test_a_system_answers_a_language_when_its_recall_there_is_a_fifth_of_the_best():
    systems, languages, relevant = _systems()
    got = answering_systems(systems, languages, relevant, depth=3)
    # recall@3 on Hindi: e5 10/10 = 1.0, minilm 0, fts 2/10 = 0.2 (= 0.2 x 1.0: kept); English: all 1.0
    assert got["hi"]["recall"] == {"config:e5": 1.0, "lane:minilm": 0.0, "lane:fts": 0.2}
    assert got["hi"]["answering"] == ["config:e5", "lane:fts"] and got["hi"]["queries"] == 10
    assert got["en"]["answering"] == ["config:e5", "lane:fts", "lane:minilm"]
    # at depth 2 fts finds nothing in Hindi either: only e5 answers Hindi
    assert answering_systems(systems, languages, relevant, depth=2)["hi"]["answering"] == ["config:e5"]
    # too few measured queries of a language: no evidence, every system answers it
    few = {q: r for q, r in relevant.items() if not q.startswith("h") or q in ("h0", "h1")}
    assert MIN_LANGUAGE_QUERIES > 2
    assert answering_systems(systems, languages, few, depth=3)["hi"]["answering"] == sorted(systems)


def test_an_english_only_model_pools_nothing_for_hindi_and_low_ranks_are_visible():
    systems, languages, relevant = _systems()
    answering = answering_systems(systems, languages, relevant, depth=3)
    kept = restrict_to_answering(systems, languages, answering)
    before, after = priorities(systems, ["h5"], 3), priorities(kept, ["h5"], 3)
    assert ("h5", "bg14.24") in before and ("h5", "bg14.24") not in after and ("h5", "bg8.1") not in after
    assert after[("h5", "rh5")] == pytest.approx(1.0)  # e5 at rank 1: 1 / log2(2)
    assert priorities(kept, ["e5"], 3) == priorities(systems, ["e5"], 3)  # English keeps every system
    best = best_ranks(kept, ["h5", "e5"], 3)
    assert best[("h5", "rh5")] == 1 and best[("h5", "o")] == 3 and best[("e5", "re5")] == 1
    assert best[("h5", "m")] == 1  # fts ranks m first


def test_pool_quality_counts_graded_pooled_pairs_only():
    reasons = {("q", "a"): "pool", ("q", "b"): "pool", ("q", "c"): "pool", ("q", "d"): "audit", ("q", "e"): "pool"}
    final = {("q", "a"): FinalGrade(0, "agreed", 2), ("q", "b"): FinalGrade(2, "agreed", 2),
             ("q", "c"): FinalGrade(0, "single", 1), ("q", "d"): FinalGrade(0, "agreed", 2)}  # e: not graded yet
    q = pool_quality(reasons, final)
    assert q == PoolQuality(graded=3, zeros=2) and q.share_zero == pytest.approx(2 / 3)
    assert q.line() == "pool quality: 2 of 3 graded pooled pairs were 0 (67 %)"
    assert pool_quality(reasons, {}).line() == "pool quality: no pooled pair is graded yet"
    assert pool_quality(reasons, {}).share_zero is None
