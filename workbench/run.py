"""Runs: ranked results per query, with the workbench's written tie-break.

A :class:`Run` maps ``query_id`` to a tuple of :class:`Hit` ``(doc_id, score)``, best
first. Scores are "higher is better" in every run (a lane that measures a distance
negates or converts it; each lane documents what its raw score means).

**Tie-break (deterministic):** hits are ordered by score descending, then by the
``tiebreak`` value descending when a run carries one (fusion puts the raw cosine of
the vector lane there, as the AICharya seed does), then by ``doc_id`` ascending. Same
inputs, same run, byte for byte.

TREC run files (``query_id Q0 doc_id rank score tag``) are read and written here.
"""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from workbench.errors import DataError


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked document: ``score`` is higher-is-better; ``tiebreak`` a secondary signal (or 0.0)."""

    doc_id: str
    score: float
    tiebreak: float = 0.0


def sort_hits(hits: Iterable[Hit]) -> tuple[Hit, ...]:
    """Order hits by (score desc, tiebreak desc, doc_id asc)."""
    return tuple(sorted(hits, key=lambda h: (-h.score, -h.tiebreak, h.doc_id)))


class Run(Mapping[str, tuple[Hit, ...]]):
    """Ranked hits per query (immutable). ``run[qid]`` is a tuple of :class:`Hit`, best first.

    Args:
        rows: query_id → hits, or → ``(doc_id, score)`` pairs; re-sorted by the tie-break rule.
        name: the run's tag (a lane or fused config name).

    Raises:
        ValueError: a NaN or infinite score, or a doc_id twice in one query's ranking.
    """

    __slots__ = ("_rows", "name")

    def __init__(self, rows: Mapping[str, Iterable[Hit | tuple[str, float]]] | None = None, name: str = ""):
        data: dict[str, tuple[Hit, ...]] = {}
        for qid, hits in (rows or {}).items():
            hs = [h if isinstance(h, Hit) else Hit(str(h[0]), float(h[1])) for h in hits]
            seen: set[str] = set()
            for h in hs:
                if not math.isfinite(h.score):
                    raise ValueError(f"run {name or '?'}: query {qid!r} doc {h.doc_id!r} has a non-finite score {h.score}")
                if h.doc_id in seen:
                    raise ValueError(f"run {name or '?'}: query {qid!r} ranks doc {h.doc_id!r} twice")
                seen.add(h.doc_id)
            data[str(qid)] = sort_hits(hs)
        self._rows = data
        self.name = name

    def __getitem__(self, qid: str) -> tuple[Hit, ...]:
        return self._rows[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"Run(name={self.name!r}, queries={len(self)})"

    def get_hits(self, qid: str) -> tuple[Hit, ...]:
        """The hits of a query, ``()`` when the run has none (a missing query scores 0)."""
        return self._rows.get(qid, ())

    def top(self, k: int) -> "Run":
        """The first ``k`` hits of every query (``k`` >= 0)."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        return Run({q: h[:k] for q, h in self._rows.items()}, self.name)

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{query_id: {doc_id: score}}`` (the shape ranx and ir_measures take)."""
        return {q: {h.doc_id: h.score for h in hits} for q, hits in self._rows.items()}


def write_trec_run(path: Path, run: Run, tag: str | None = None) -> None:
    """Write a TREC run (``query_id Q0 doc_id rank score tag``), gzip when the path ends in ``.gz``.

    Scores are written with ``repr`` so a round trip is exact; rank starts at 1.
    """
    tag = (tag or run.name or "workbench").replace(" ", "_")
    lines = []
    for qid in sorted(run):
        for rank, h in enumerate(run[qid], start=1):
            lines.append(f"{qid} Q0 {h.doc_id} {rank} {h.score!r} {tag}")
    data = ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


def read_trec_run(path: Path, name: str | None = None, *, keep_file_order: bool = False,
                  allow_empty: bool = False) -> Run:
    """Read a TREC run file (6 whitespace-separated columns; ``.gz`` allowed).

    By default the rank column is ignored, as trec_eval does: hits are ordered by score
    with the tie-break rule. With ``keep_file_order`` each hit's ``tiebreak`` is minus
    its line order within the query, so equal scores keep the order they were written in
    (the candidate cache uses this to return exactly what the lane returned).
    ``allow_empty`` accepts a file with no result lines (a lane that found nothing for
    any query: the candidate cache stores such runs too).

    Raises:
        DataError: missing or empty file, wrong column count, a non-numeric or NaN
            score, or a doc_id twice for one query (names the file and line).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"run file {path} does not exist") from None
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except OSError as exc:
            raise DataError(f"run file {path} is not valid gzip: {exc}") from None
    rows: dict[str, list[Hit]] = {}
    seen: set[tuple[str, str]] = set()
    for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 6:
            raise DataError(f"{path}:{n}: a TREC run line has 6 columns (query_id Q0 doc_id rank score tag), got {len(cols)}")
        try:
            score = float(cols[4])
        except ValueError:
            raise DataError(f"{path}:{n}: score {cols[4]!r} is not a number") from None
        if not math.isfinite(score):
            raise DataError(f"{path}:{n}: score {cols[4]!r} is not finite")
        if (cols[0], cols[2]) in seen:
            raise DataError(f"{path}:{n}: doc {cols[2]!r} appears twice for query {cols[0]!r}")
        seen.add((cols[0], cols[2]))
        hits = rows.setdefault(cols[0], [])
        hits.append(Hit(cols[2], score, -float(len(hits)) if keep_file_order else 0.0))
    if not rows and not allow_empty:
        raise DataError(f"run file {path} holds no results")
    return Run(rows, name or path.name.split(".")[0])
