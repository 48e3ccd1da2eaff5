"""Tests of ``merge_segments``: hand-computed windows on synthetic segments, invariants
under random sizes (hypothesis), and the real bilara segments.

The real-data numbers (1,847 passages at 512/50; MN 10: 226 segments in 8 passages with
the boundaries below) were computed with a separate implementation of the rules of
:mod:`workbench.text.passages` that reads the raw bilara JSON directly.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.data.loaders.bilara import BilaraCorpus, load_bilara
from workbench.text.passages import _windows, merge_segments, segment_tokens
from workbench.types import Document, Text


def seg(work: str, n: int, tokens: int, *, pages: tuple[str, ...] = (), starts: tuple[str, ...] = (),
        en_tokens: int | None = None) -> Document:
    """A synthetic segment ``<work>:<n>`` whose Pali has ``tokens`` words (English ``en_tokens``)."""
    texts = [Text("root", "pi", "Latn", " ".join(f"p{n}w{i}" for i in range(tokens)), "ms")]
    if en_tokens is not None:
        texts.append(Text("translation", "en", "Latn", " ".join(f"e{n}w{i}" for i in range(en_tokens)), "sujato"))
    return Document(
        doc_id=f"{work}:{n}", address=f"{work.upper()}:{n}", work_id=work, granularity="segment",
        texts=tuple(texts), page_refs=starts, pages=pages or starts, edition_refs=tuple(f"e{p}" for p in starts),
        metadata={"collection": "test", "file_uid": work},
    )


def segs(sizes: list[int], work: str = "w") -> list[Document]:
    return [seg(work, i, n) for i, n in enumerate(sizes)]


def groups(passages: list[Document]) -> list[list[int]]:
    """Each passage's segments as indices (``w:3`` → 3)."""
    return [[int(s.partition(":")[2]) for s in p.segment_ids] for p in passages]


# --------------------------------------------------------------------------- hand-computed windows


def test_windows_200_200_200_100_300_at_512_50() -> None:
    ps = merge_segments(segs([200, 200, 200, 100, 300]), 512, 50)
    # 200+200=400, +200 would be 600 > 512; no trailing segment fits in 50 tokens of
    # overlap, so the next passage starts where this one ended.
    assert groups(ps) == [[0, 1], [2, 3], [4]]
    assert [p.metadata["tokens"] for p in ps] == [400, 300, 300]
    assert [p.doc_id for p in ps] == ["w#1", "w#2", "w#3"]


def test_windows_200_200_200_100_300_at_512_0() -> None:
    assert groups(merge_segments(segs([200, 200, 200, 100, 300]), 512, 0)) == [[0, 1], [2, 3], [4]]


def test_windows_200_200_200_100_300_at_512_100() -> None:
    # The 100-token segment 3 fits in 100 tokens of overlap and is carried into passage 3.
    ps = merge_segments(segs([200, 200, 200, 100, 300]), 512, 100)
    assert groups(ps) == [[0, 1], [2, 3], [3, 4]]
    assert [p.metadata["tokens"] for p in ps] == [400, 300, 400]


def test_overlap_carries_small_trailing_segment() -> None:
    # 200+200+40 = 440; the 40-token segment is carried: 40+300 = 340.
    assert groups(merge_segments(segs([200, 200, 40, 300]), 512, 50)) == [[0, 1, 2], [2, 3]]
    assert groups(merge_segments(segs([200, 200, 40, 300]), 512, 0)) == [[0, 1, 2], [3]]
    # Two trailing segments of 20 + 30 = 50 tokens both fit in 50.
    assert groups(merge_segments(segs([100, 30, 20, 400]), 512, 50)) == [[0, 1, 2], [1, 2, 3]]
    # ... but not in 49: only the last one (20).
    assert groups(merge_segments(segs([100, 30, 20, 400]), 512, 49)) == [[0, 1, 2], [2, 3]]


def test_single_oversized_segment_is_a_passage_alone() -> None:
    ps = merge_segments(segs([600]), 512, 50)
    assert groups(ps) == [[0]]
    assert ps[0].metadata["tokens"] == 600
    assert groups(merge_segments(segs([600, 10]), 512, 50)) == [[0], [1]]
    assert groups(merge_segments(segs([10, 600, 10]), 512, 50)) == [[0], [1], [2]]
    assert groups(merge_segments(segs([300, 600, 300]), 512, 50)) == [[0], [1], [2]]


def test_no_passage_holds_only_the_carried_overlap() -> None:
    # Regression: [100, 30, 600] once gave [[0, 1], [1], [2]]: passage 2 was the carried
    # 30-token segment alone, wholly inside passage 1 (30 + 600 does not fit in 512).
    assert groups(merge_segments(segs([100, 30, 600]), 512, 50)) == [[0, 1], [2]]
    # The carried part shrinks (oldest first) until the next segment fits: 50 + 470 > 512,
    # 20 + 470 = 490 fits.
    assert groups(merge_segments(segs([100, 30, 20, 470]), 512, 50)) == [[0, 1, 2], [2, 3]]
    assert groups(merge_segments(segs([100, 30, 20, 450]), 512, 50)) == [[0, 1, 2], [1, 2, 3]]


def test_overlap_always_moves_forward_by_a_segment() -> None:
    # All of passage 1 but its first segment would fit in the overlap; start still advances by one.
    assert groups(merge_segments(segs([10, 10, 10]), 20, 15)) == [[0, 1], [1, 2]]
    assert _windows([1] * 12, 10, 9) == [(0, 10), (1, 11), (2, 12)]
    assert _windows([5, 5, 5, 5], 10, 9) == [(0, 2), (1, 3), (2, 4)]


def test_windows_edge_cases() -> None:
    assert _windows([], 512, 50) == []
    assert merge_segments([], 512, 50) == []
    assert _windows([512], 512, 0) == [(0, 1)]
    assert _windows([256, 256, 1], 512, 0) == [(0, 2), (2, 3)]


def test_never_crosses_a_work() -> None:
    docs = segs([100, 100], "a") + segs([100], "b") + segs([300, 300], "c")
    ps = merge_segments(docs, 512, 50)
    assert [p.doc_id for p in ps] == ["a#1", "b#1", "c#1", "c#2"]
    assert [p.segment_ids for p in ps] == [("a:0", "a:1"), ("b:0",), ("c:0",), ("c:1",)]
    assert [p.work_id for p in ps] == ["a", "b", "c", "c"]
    assert all(p.granularity == "passage" for p in ps)


def test_texts_addresses_refs_and_metadata() -> None:
    docs = [
        seg("mn1", 1, 3, en_tokens=5, pages=("PTS M 1.1",)),
        seg("mn1", 2, 2, starts=("PTS M 1.2",)),
        seg("mn1", 3, 4, en_tokens=1, pages=("PTS M 1.2",)),
        seg("mn1", 4, 1, starts=("PTS M 1.3",)),
    ]
    (p,) = merge_segments(docs, 512, 50)
    assert p.doc_id == "mn1#1"
    assert p.address == "MN1:1–4"
    assert p.segment_ids == ("mn1:1", "mn1:2", "mn1:3", "mn1:4")
    assert p.page_refs == ("PTS M 1.2", "PTS M 1.3")
    assert p.pages == ("PTS M 1.1", "PTS M 1.2", "PTS M 1.3")
    assert p.edition_refs == ("ePTS M 1.2", "ePTS M 1.3")
    # Tokens per segment: the largest word count over its texts: 5 + 2 + 4 + 1.
    assert [segment_tokens(d) for d in docs] == [5, 2, 4, 1]
    assert p.metadata == {"collection": "test", "file_uid": "mn1", "tokens": 12}
    assert p.text("root") == "p1w0 p1w1 p1w2 p2w0 p2w1 p3w0 p3w1 p3w2 p3w3 p4w0"
    assert p.text("translation", "en") == "e1w0 e1w1 e1w2 e1w3 e1w4 e3w0"
    assert [(t.field, t.language, t.script, t.source) for t in p.texts] == [
        ("root", "pi", "Latn", "ms"), ("translation", "en", "Latn", "sujato")]
    # A one-segment passage keeps the segment's address.
    (single,) = merge_segments([docs[0]], 512, 50)
    assert single.address == "MN1:1"


def test_segment_tokens() -> None:
    assert segment_tokens(seg("w", 0, 7, en_tokens=3)) == 7
    assert segment_tokens(seg("w", 0, 2, en_tokens=9)) == 9
    empty = Document("w:0", "W 0", "w", "segment", (Text("root", "pi", "Latn", ""),))
    assert segment_tokens(empty) == 1
    assert segment_tokens(Document("w:1", "W 1", "w", "segment", ())) == 1


@pytest.mark.parametrize("max_tokens, overlap", [(0, 0), (-5, 0), (512.0, 50), ("512", 50)])
def test_bad_max_tokens(max_tokens: object, overlap: int) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        merge_segments(segs([1]), max_tokens, overlap)  # type: ignore[arg-type]


@pytest.mark.parametrize("overlap", [512, 600, -1, 5.0])
def test_bad_overlap(overlap: object) -> None:
    with pytest.raises(ValueError, match="overlap"):
        merge_segments(segs([1]), 512, overlap)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- invariants


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=80), max_size=40),
    max_tokens=st.integers(min_value=1, max_value=120),
    data=st.data(),
)
def test_window_invariants(sizes: list[int], max_tokens: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(min_value=0, max_value=max_tokens - 1))
    wins = _windows(sizes, max_tokens, overlap)
    if not sizes:
        assert wins == []
        return
    assert wins[0][0] == 0 and wins[-1][1] == len(sizes)
    covered: set[int] = set()
    for k, (a, b) in enumerate(wins):
        assert a < b
        covered.update(range(a, b))
        assert sum(sizes[a:b]) <= max_tokens or b - a == 1
        if k:
            pa, pb = wins[k - 1]
            assert pa < a <= pb < b  # start and end both move forward; no gap
            assert sum(sizes[a:pb]) <= overlap  # carried tokens
        if b < len(sizes):
            # Greedy: the next segment would not have fitted.
            assert sum(sizes[a:b]) + sizes[b] > max_tokens
    assert covered == set(range(len(sizes)))


# --------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def corpus(data_dir: Path) -> BilaraCorpus:
    return load_bilara(data_dir)


@pytest.fixture(scope="module")
def passages(corpus: BilaraCorpus) -> list[Document]:
    return merge_segments(corpus.documents)


@pytest.mark.data
def test_real_counts(passages: list[Document]) -> None:
    assert len(passages) == 1_847
    per_coll = Counter(p.metadata["collection"] for p in passages)
    # Dhp segment ids are per verse (dhp1:1), so each of the 423 verses is its own work.
    assert per_coll == {"dn": 478, "mn": 835, "sn56": 111, "dhp": 423}
    assert len({p.doc_id for p in passages}) == len(passages)


@pytest.mark.data
def test_real_budget(passages: list[Document], corpus: BilaraCorpus) -> None:
    size = {d.doc_id: segment_tokens(d) for d in corpus.documents}
    for p in passages:
        total = sum(size[s] for s in p.segment_ids)
        assert total == p.metadata["tokens"]
        assert total <= 512 or len(p.segment_ids) == 1, p.doc_id


@pytest.mark.data
def test_real_never_crosses_a_work_and_numbers_from_one(passages: list[Document]) -> None:
    n_by_work: dict[str, int] = {}
    for p in passages:
        assert {s.partition(":")[0] for s in p.segment_ids} == {p.work_id}
        n_by_work[p.work_id] = n_by_work.get(p.work_id, 0) + 1
        assert p.doc_id == f"{p.work_id}#{n_by_work[p.work_id]}"


@pytest.mark.data
def test_real_every_segment_covered(passages: list[Document], corpus: BilaraCorpus) -> None:
    in_passage = {s for p in passages for s in p.segment_ids}
    mn10 = [d.doc_id for d in corpus.documents if d.work_id == "mn10"]
    assert len(mn10) == 226
    assert set(mn10) <= in_passage
    assert in_passage == {d.doc_id for d in corpus.documents}


@pytest.mark.data
def test_real_overlap_at_most_50_tokens(passages: list[Document], corpus: BilaraCorpus) -> None:
    size = {d.doc_id: segment_tokens(d) for d in corpus.documents}
    for prev, p in zip(passages, passages[1:]):
        if prev.work_id != p.work_id:
            continue
        shared = [s for s in p.segment_ids if s in set(prev.segment_ids)]
        assert sum(size[s] for s in shared) <= 50
        # The shared part is a suffix of the previous passage and a prefix of this one.
        assert list(p.segment_ids[: len(shared)]) == shared
        if shared:
            assert list(prev.segment_ids[-len(shared):]) == shared
        assert len(shared) < len(p.segment_ids)  # every passage brings new segments


@pytest.mark.data
def test_real_mn10_passages(passages: list[Document], corpus: BilaraCorpus) -> None:
    mn10 = [p for p in passages if p.work_id == "mn10"]
    assert [(p.segment_ids[0], p.segment_ids[-1]) for p in mn10] == [
        ("mn10:0.1", "mn10:6.2"), ("mn10:6.0", "mn10:13.1"), ("mn10:12.4", "mn10:32.4"),
        ("mn10:32.2", "mn10:36.3"), ("mn10:36.0.2", "mn10:38.4"), ("mn10:38.2", "mn10:41.4"),
        ("mn10:41.1", "mn10:43.4"), ("mn10:43.3", "mn10:48.4"),
    ]
    assert [p.metadata["tokens"] for p in mn10] == [504, 500, 512, 473, 498, 506, 509, 470]
    first = mn10[0]
    assert first.doc_id == "mn10#1"
    assert first.address == "MN 10:0.1–6.2"
    # Markers pts-vp-pli1.56 at mn10:2.1 and 1.57 at mn10:6.1; M i 55 runs on from mn9.
    assert first.page_refs == ("PTS M 1.56", "PTS M 1.57")
    assert first.pages == ("PTS M 1.55", "PTS M 1.56", "PTS M 1.57")
    assert "msdiv105" in first.edition_refs and "msdiv106" in first.edition_refs
    by_id = {d.doc_id: d for d in corpus.documents}
    assert first.text("root", "pi") == " ".join(by_id[s].text("root") for s in first.segment_ids)
    assert first.text("root").startswith("Majjhima Nikāya 10 Satipaṭṭhānasutta Evaṁ me sutaṁ—")
    assert first.metadata["collection"] == "mn"
