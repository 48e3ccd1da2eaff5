"""Time-span documents: a hit near a judged moment counts (a window around each hit, a tolerance around each judgment).

A lecture transcript is cut into passages, each a document with a **span**: its parent (a track id) and its start
and end in whole milliseconds from the start of the parent (``0 <= start_ms <= end_ms``). A ``files`` dataset
declares them with ``span = { parent = ..., start = ..., end = ... }`` and keeps them in each document's metadata
(:data:`workbench.data.sources.files.SPAN_PARENT`, ``SPAN_START``, ``SPAN_END``; :func:`spans_of` reads them back).
A search system that answers with a passage shows the reader the transcript around it, so a hit one phrase away
from the judged passage found the right moment. Two options say how near is near enough:

* ``window_ms = N`` (a config's, like ``top_k``): each hit stands for the span ``[start - N, end + N]`` of its
  parent, what the reader is shown around it (AICharya's ``transcript_window``);
* ``time_tolerance_ms = Δ`` (the experiment's): a judged span counts as found within ``[start - Δ, end + Δ]``.

**Matching.** Hit ``d`` matches judged document ``j`` iff both have a span, ``parent(d) == parent(j)``, and the
closed intervals ``[s_d - N, e_d + N]`` and ``[s_j - Δ, e_j + Δ]`` intersect. A hit or judged document without a
span matches by id alone.

**Credit, each judged span once** (:func:`credit`, :func:`rewrite_run`). Per query, the ranking is walked top
down; a hit is credited with the first judged document it matches that no earlier hit was credited with, in the
order: highest grade first, then the hit itself, then earlier ``start_ms``, then ``doc_id``. The hit is rewritten
to that document's id, so the ordinary measures (ir_measures and ranx names, on the ordinary qrels) count it with
that document's grade. A hit left with nothing to be credited with (every judged span it matches already was)
is a miss, neither relevant nor judged (``Judged@k`` does not count it): it keeps its own id, or, when its own id
is a judged document (credited earlier), that id with :data:`SPENT` appended, which no qrel names. So ten hits
around one judged moment are one relevant hit and nine misses.

With ``N = Δ = 0`` nothing is rewritten (:attr:`SpanMatching.active` is false): ids match exactly, as on a
dataset without spans, so every measure is what it was before these options existed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from workbench.run import Hit, Run
from workbench.types import Document

#: Appended to the id of a hit whose own judged span was already credited to an earlier hit (no qrel names it).
SPENT = " (already credited)"


@dataclass(frozen=True)
class Span:
    """Where a document lies: ``parent`` (a track id), ``start_ms`` <= ``end_ms`` (ms from the parent's start)."""

    parent: str
    start_ms: int
    end_ms: int


def spans_of(documents: Iterable[Document]) -> dict[str, Span]:
    """doc_id → :class:`Span` of every document whose metadata holds one (a ``files`` dataset with ``span``;
    documents without it are left out)."""
    from workbench.data.sources.files import SPAN_END, SPAN_PARENT, SPAN_START

    out: dict[str, Span] = {}
    for d in documents:
        md = d.metadata or {}
        if SPAN_PARENT in md and SPAN_START in md and SPAN_END in md:
            out[d.doc_id] = Span(str(md[SPAN_PARENT]), int(md[SPAN_START]), int(md[SPAN_END]))
    return out


@dataclass(frozen=True)
class SpanMatching:
    """The spans of a dataset's documents and the two widths (module docstring).

    Attributes:
        spans: doc_id → :class:`Span` (:func:`spans_of`).
        window_ms: N, the config's ``window_ms``: each hit stands for ``[start - N, end + N]``.
        tolerance_ms: Δ, the experiment's ``time_tolerance_ms``: a judged span counts within ``[start - Δ, end + Δ]``.

    Raises:
        ValueError: a width that is not an integer >= 0.
    """

    spans: Mapping[str, Span]
    window_ms: int = 0
    tolerance_ms: int = 0

    def __post_init__(self) -> None:
        for name in ("window_ms", "tolerance_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0 (milliseconds), got {v!r}")

    @property
    def active(self) -> bool:
        """Whether matching differs from exact ids: some document has a span and N or Δ is above 0."""
        return bool(self.spans) and (self.window_ms > 0 or self.tolerance_ms > 0)

    def matcher(self, grades: Mapping[str, int]) -> Callable[[str], tuple[str, ...]]:
        """For one query judged ``grades`` (doc_id → grade): a function from a hit's doc_id to the judged documents
        it can be credited with, in credit order (grade desc, the hit itself, start_ms, doc_id). A hit without a
        span, or with the matching inactive, gets ``(doc_id,)`` when it is judged and ``()`` otherwise."""
        by_parent: dict[str, list[tuple[str, int, int, int, int]]] = {}
        for j, g in grades.items():
            sp = self.spans.get(j) if self.active else None
            if sp is not None:
                by_parent.setdefault(sp.parent, []).append((j, g, sp.start_ms - self.tolerance_ms,
                                                            sp.end_ms + self.tolerance_ms, sp.start_ms))

        def matches(doc_id: str) -> tuple[str, ...]:
            sp = self.spans.get(doc_id) if self.active else None
            if sp is None:
                return (doc_id,) if doc_id in grades else ()
            lo, hi = sp.start_ms - self.window_ms, sp.end_ms + self.window_ms
            found = [(-g, j != doc_id, start, j) for j, g, jlo, jhi, start in by_parent.get(sp.parent, ())
                     if lo <= jhi and jlo <= hi]
            return tuple(j for *_key, j in sorted(found))

        return matches


def credit(options: Iterable[tuple[str, ...]]) -> list[str | None]:
    """One query's greedy walk: per ranked position (best first), the first of its ``options``
    (:meth:`SpanMatching.matcher`) no earlier position was credited with, or None (the hit counts as a miss)."""
    taken: set[str] = set()
    out: list[str | None] = []
    for opts in options:
        got = next((j for j in opts if j not in taken), None)
        if got is not None:
            taken.add(got)
        out.append(got)
    return out


def rewrite_ranking(doc_ids: Sequence[str], grades: Mapping[str, int], matching: SpanMatching) -> list[str]:
    """One query's ranking (doc ids, best first) as the measures see it: each hit replaced by the judged document
    it is credited with (:func:`credit`); a hit credited with none keeps its id, or its id + :data:`SPENT` when that
    id is judged. Same length and order; the ids are unique."""
    matches = matching.matcher(grades)
    got = credit(matches(d) for d in doc_ids)
    return [j if j is not None else (d + SPENT if d in grades else d) for d, j in zip(doc_ids, got, strict=True)]


def rewrite_run(run: Run, judgments: Mapping[str, Mapping[str, int]], matching: SpanMatching) -> Run:
    """The run as the measures see it under time-tolerant matching (module docstring), to be evaluated with the
    ordinary qrels.

    Args:
        run: hits per query, best first.
        judgments: query_id → {doc_id: grade} (every grade; 0 is judged non-relevant).
        matching: the spans and widths; inactive (N = Δ = 0, or no spans): ``run`` is returned as it is.

    Returns:
        A run named like ``run`` with the same queries and the same number of hits in the same order, ids
        rewritten per query by :func:`rewrite_ranking`; each hit is scored ``n, n-1, …, 1`` by its rank (the new
        ids could otherwise re-break score ties). A query without judgments keeps its ids.
    """
    if not matching.active:
        return run
    rows: dict[str, list[Hit]] = {}
    for qid in run:
        hits = run.get_hits(qid)
        ids = [h.doc_id for h in hits]
        grades = judgments.get(qid)
        new = rewrite_ranking(ids, grades, matching) if grades else ids
        rows[qid] = [Hit(d, float(len(new) - i)) for i, d in enumerate(new)]
    return Run(rows, run.name)


def span_matching(documents: Iterable[Document], window_ms: int = 0, tolerance_ms: int = 0) -> SpanMatching | None:
    """The matching a config (``window_ms``) and an experiment (``time_tolerance_ms``) ask for on a dataset's
    documents, or None when they ask for none (both 0) or no document has a span: exact ids then. The documents
    are read only when a width is set."""
    if not window_ms and not tolerance_ms:
        return None
    m = SpanMatching(spans_of(documents), window_ms, tolerance_ms)
    return m if m.active else None


class Transcript:
    """The spans of a dataset grouped by parent, in time order: what a reader is shown around a hit (the window
    stage of ``search`` and ``serve``, AICharya's ``transcript_window``).

    Args:
        spans: doc_id → :class:`Span` (:func:`spans_of`).
    """

    def __init__(self, spans: Mapping[str, Span]) -> None:
        from itertools import accumulate

        by_parent: dict[str, list[tuple[int, int, str]]] = {}
        for doc_id, sp in spans.items():
            by_parent.setdefault(sp.parent, []).append((sp.start_ms, sp.end_ms, doc_id))
        self._spans = dict(spans)
        self._rows: dict[str, tuple[list[tuple[int, int, str]], list[int], list[int]]] = {}
        for parent, rows in by_parent.items():
            rows.sort()
            # starts ascending; the running maximum of the ends is non-decreasing, so both can be bisected
            self._rows[parent] = (rows, [r[0] for r in rows], list(accumulate((r[1] for r in rows), max)))

    def window(self, doc_id: str, window_ms: int) -> list[tuple[str, int, int]]:
        """The documents of ``doc_id``'s parent whose spans meet ``[start - window_ms, end + window_ms]``
        (closed), the hit itself included, as ``(doc_id, start_ms, end_ms)`` in time order (start, end, id);
        ``[]`` for a document without a span. O(log n + the window's size) for spans that do not nest deeply.

        Raises:
            ValueError: ``window_ms`` is not an integer >= 0.
        """
        from bisect import bisect_left, bisect_right

        if isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 0:
            raise ValueError(f"window_ms must be an integer >= 0 (milliseconds), got {window_ms!r}")
        sp = self._spans.get(doc_id)
        if sp is None:
            return []
        rows, starts, max_ends = self._rows[sp.parent]
        lo_ms, hi_ms = sp.start_ms - window_ms, sp.end_ms + window_ms
        first = bisect_left(max_ends, lo_ms)  # before it every span ends before the window opens
        last = bisect_right(starts, hi_ms)  # from it every span starts after the window closes
        return [(d, s, e) for s, e, d in rows[first:last] if e >= lo_ms]

    def window_records(self, doc_id: str, window_ms: int) -> list[dict[str, int | str]]:
        """:meth:`window` as JSON objects ``{"doc_id", "start_ms", "end_ms"}`` (what ``search --json`` and
        ``serve`` put in a hit's ``window``)."""
        return [{"doc_id": d, "start_ms": s, "end_ms": e} for d, s, e in self.window(doc_id, window_ms)]


def transcript(documents: Iterable[Document], window_ms: int) -> Transcript | None:
    """The :class:`Transcript` a config's window stage reads, or None when it has none to read: ``window_ms`` is 0
    or no document has a span (the documents are read only when ``window_ms`` is set)."""
    if not window_ms:
        return None
    spans = spans_of(documents)
    return Transcript(spans) if spans else None
