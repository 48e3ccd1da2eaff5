"""Merge consecutive segments into passages under a token budget, with overlap.

The knowledge-base seed chunks at 512 tokens with 50 tokens of overlap; these are the
defaults. A *token* here is a whitespace-separated word, counted per segment as the
largest word count over its texts (Pali root or translation), so a passage stays under
the budget in every language. (Model subword counts are higher, about 1.3-2x for
English; pick the budget accordingly.)

Rules, in order:

* passages never cross a work (a sutta);
* segments are added while the running total stays within ``max_tokens``; a segment
  longer than the budget on its own becomes a passage by itself;
* the next passage starts with the trailing segments of the previous one whose tokens
  add up to at most ``overlap`` (none when the last segment alone exceeds it), fewer
  when the next new segment would not fit beside them, and always moves forward by at
  least one segment; so every passage after the first holds at least one new segment.

A passage's ``doc_id`` is ``<work>#<n>`` (1-based), its ``segment_ids`` list what it
holds, its texts are the segments' texts joined by a space per (field, language,
source), and its ``page_refs`` / ``pages`` are the union of its segments' in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby

from workbench.types import Document, Text


def segment_tokens(doc: Document) -> int:
    """Token count of a segment: the largest whitespace word count over its texts (>= 1)."""
    return max((len(t.text.split()) for t in doc.texts), default=0) or 1


def _windows(tokens: Sequence[int], max_tokens: int, overlap: int) -> list[tuple[int, int]]:
    """Half-open index ranges ``[start, end)`` of passages over a sequence of segment sizes."""
    out: list[tuple[int, int]] = []
    start, n = 0, len(tokens)
    while start < n:
        end, total = start, 0
        while end < n and (end == start or total + tokens[end] <= max_tokens):
            total += tokens[end]
            end += 1
        out.append((start, end))
        if end >= n:
            break
        back, carried = end, 0
        while back - 1 > start and carried + tokens[back - 1] <= overlap:
            back -= 1
            carried += tokens[back]
        # Drop carried segments (oldest first) until the next new segment fits beside
        # them; otherwise the next passage would hold only the carried overlap.
        while back < end and carried + tokens[end] > max_tokens:
            carried -= tokens[back]
            back += 1
        start = back
    return out


def _uniq(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def merge_segments(segments: Iterable[Document], max_tokens: int = 512, overlap: int = 50) -> list[Document]:
    """Merge consecutive segment documents of each work into passages.

    Args:
        segments: segment documents in corpus order (grouped by ``work_id``).
        max_tokens: the token budget of one passage (> 0).
        overlap: tokens carried from the end of one passage into the next (0 <= overlap < max_tokens).

    Returns:
        Passage documents (granularity ``passage``) in corpus order.

    Raises:
        ValueError: a budget or overlap out of range.
    """
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if not isinstance(overlap, int) or not 0 <= overlap < max_tokens:
        raise ValueError(f"overlap must be an integer in [0, max_tokens), got {overlap!r}")
    passages: list[Document] = []
    for work, group in groupby(segments, key=lambda d: d.work_id):
        segs = list(group)
        sizes = [segment_tokens(s) for s in segs]
        for n, (a, b) in enumerate(_windows(sizes, max_tokens, overlap), start=1):
            part = segs[a:b]
            keys: dict[tuple[str, str, str, str], list[str]] = {}
            for s in part:
                for t in s.texts:
                    keys.setdefault((t.field, t.language, t.script, t.source), []).append(t.text)
            texts = tuple(Text(f, lang, script, " ".join(v), src) for (f, lang, script, src), v in keys.items())
            first, last = part[0], part[-1]
            last_local = last.doc_id.partition(":")[2]
            address = first.address if len(part) == 1 else f"{first.address}–{last_local}"
            passages.append(
                Document(
                    doc_id=f"{work}#{n}",
                    address=address,
                    work_id=work,
                    granularity="passage",
                    texts=texts,
                    page_refs=_uniq(r for s in part for r in s.page_refs),
                    pages=_uniq(r for s in part for r in s.pages),
                    edition_refs=_uniq(r for s in part for r in s.edition_refs),
                    segment_ids=tuple(s.doc_id for s in part),
                    metadata={**first.metadata, "tokens": sum(sizes[a:b])},
                )
            )
    return passages
