"""Runs: ranked results per query, with the workbench's written tie-break.

A :class:`Run` maps ``query_id`` to a tuple of :class:`Hit` ``(doc_id, score)``, best
first. Scores are "higher is better" in every run (a lane that measures a distance
negates or converts it; each lane documents what its raw score means).

**Tie-break (deterministic):** hits are ordered by score descending, then by the
``tiebreak`` value descending when a run carries one (fusion puts the raw cosine of
the vector lane there, as the AICharya seed does), then by ``doc_id`` ascending. Same
inputs, same run, byte for byte.

TREC run files (``query_id Q0 doc_id rank score tag``) are read and written here.

**Run files follow trec_eval's rule, not the one above.** trec_eval ignores the rank
column and sorts a query's lines by score decreasing, then by docno *decreasing*
(``strcmp``; trec_eval's ``form_res_rels.c``), so among equal scores the larger doc_id
comes first. "Equal" is decided in 32-bit floats: trec_eval 9 (usnistgov/trec_eval 9.0.x, the code
pytrec_eval and ir_measures run) keeps each score as a C ``float`` (``float sim`` in ``trec_format.h``), so
0.92226214537525 and 0.9222621453752586 are one score to it. :func:`read_trec_run` reproduces that: it reads
each score as trec_eval does (rounded to float32), and each hit's ``tiebreak`` is its
position in ascending doc_id order within its query (code-point order, which is the
byte order of UTF-8, as ``strcmp`` compares), so a run read from a file scores what
trec_eval / pytrec_eval / ir_measures score on that file. The candidate cache and the
dashboard read their own files with ``keep_file_order`` instead (the order written).
Because the two rules disagree exactly on ties, :func:`count_ties` counts them and
:func:`reorder_ties` builds the other order, so a caller can warn when ties decide a
measure (the gate does, for run files).
"""

from __future__ import annotations

import gzip
import math
import os
import stat
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

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

    def top(self, k: int) -> Run:
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

    By default the rank column is ignored and hits are ordered as trec_eval orders them:
    score descending, then doc_id *descending* (each hit's ``tiebreak`` is its position
    in ascending doc_id order within the query; see the module docstring). With ``keep_file_order`` each hit's
    ``tiebreak`` is minus its line order within the query, so equal scores keep the order they were written in
    (the candidate cache uses this to return exactly what the lane returned).
    ``allow_empty`` accepts a file with no result lines (a lane that found nothing for
    any query: the candidate cache stores such runs too).

    A UTF-8 byte-order mark at the start (Windows editors write one) is read as nothing.

    In trec_eval order each score is rounded to a 32-bit float, as trec_eval 9 stores it (``float sim``), so
    scores that differ only below float32 resolution are a tie, broken by doc_id; with ``keep_file_order`` the
    scores are kept as written (64-bit).

    Raises:
        DataError: missing or empty file, not a regular file (a device such as ``/dev/zero``, a FIFO), a UTF-16
            file, wrong column count, a non-numeric or NaN score, a score beyond float32's range (trec_eval reads it
            as infinity) in trec_eval order, or a doc_id twice for one query (names the file and line).
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DataError(f"run file {path} does not exist") from None
    except OSError as exc:
        raise DataError(f"run file {path} cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):  # /dev/zero never ends, a FIFO may never answer
        raise DataError(f"run file {path} is not a regular file (a device, a FIFO or a socket); give a TREC run file")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"run file {path} does not exist") from None
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except OSError as exc:
            raise DataError(f"run file {path} is not valid gzip: {exc}") from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise DataError(f"run file {path} is UTF-16 (it starts with a UTF-16 byte-order mark); save it as UTF-8")
    rows: dict[str, list[Hit]] = {}
    seen: set[tuple[str, str]] = set()
    for n, line in enumerate(raw.decode("utf-8-sig", errors="replace").splitlines(), start=1):
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
        if not keep_file_order:
            score = _as_float32(score)
            if not math.isfinite(score):
                raise DataError(f"{path}:{n}: score {cols[4]!r} is beyond a 32-bit float's range (±3.4e38), which "
                                "trec_eval reads as infinity; scale the scores down")
        if (cols[0], cols[2]) in seen:
            raise DataError(f"{path}:{n}: doc {cols[2]!r} appears twice for query {cols[0]!r}")
        seen.add((cols[0], cols[2]))
        hits = rows.setdefault(cols[0], [])
        hits.append(Hit(cols[2], score, -float(len(hits)) if keep_file_order else 0.0))
    if not rows and not allow_empty:
        raise DataError(f"run file {path} holds no results")
    if not keep_file_order:
        rows = {q: _trec_eval_order(hs) for q, hs in rows.items()}
    return Run(rows, name or path.name.split(".")[0])


def _as_float32(x: float) -> float:
    """``x`` rounded to the nearest IEEE 754 binary32 value (to nearest, ties to even, as C's ``(float)`` cast);
    ``inf`` beyond its range."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def count_float32_ties(run: Run) -> int:
    """Hits of ``run`` (scores as written, e.g. read with ``keep_file_order``) whose score differs from every other
    score of its query but equals another one once both are rounded to float32, as trec_eval 9 stores them
    (``float sim``): ties that trec_eval sees and the file's digits hide. 0 when there are none."""
    n = 0
    for hs in run.values():
        groups: dict[float, set[float]] = {}
        for h in hs:
            groups.setdefault(_as_float32(h.score), set()).add(h.score)
        n += sum(1 for h in hs if len(groups[_as_float32(h.score)]) > 1)
    return n


def _trec_eval_order(hits: Iterable[Hit]) -> list[Hit]:
    """``hits`` with ``tiebreak`` = position in ascending doc_id order (larger doc_id first on a score tie)."""
    return [Hit(h.doc_id, h.score, float(i)) for i, h in enumerate(sorted(hits, key=lambda h: h.doc_id))]


def reorder_ties(run: Run, order: str) -> Run:
    """``run`` with its score ties re-broken; scores and the hits themselves are unchanged.

    Args:
        run: any run.
        order: ``"trec_eval"`` (equal scores: doc_id descending, as trec_eval sorts a run
            file) or ``"doc_id"`` (equal scores: doc_id ascending, the workbench's rule for
            a run without ``tiebreak`` values).

    Raises:
        ValueError: an unknown ``order``.
    """
    if order == "trec_eval":
        return Run({q: _trec_eval_order(hs) for q, hs in run.items()}, run.name)
    if order == "doc_id":
        return Run({q: [Hit(h.doc_id, h.score) for h in hs] for q, hs in run.items()}, run.name)
    raise ValueError(f"unknown tie order {order!r}; use 'trec_eval' or 'doc_id'")


@dataclass(frozen=True, slots=True)
class TieCount:
    """Score ties in a run (see :func:`count_ties`).

    Attributes:
        queries: queries with at least two hits of equal score.
        hits: hits that share their score with another hit of their query.
        straddling: cutoff ``k`` -> queries whose hits at ranks ``k`` and ``k + 1`` have
            equal scores (a tie that crosses the cutoff: which doc is inside @k depends on
            the tie rule).
    """

    queries: int
    hits: int
    straddling: dict[int, int]


def count_ties(run: Run, cutoffs: Iterable[int] = ()) -> TieCount:
    """Count the score ties of ``run`` (exact float equality; a run read from a file in trec_eval order holds
    float32-rounded scores, so scores equal in float32, which trec_eval 9 treats as a tie, are counted).

    Args:
        run: the run.
        cutoffs: ranks ``k`` (>= 1) for :attr:`TieCount.straddling`.

    Raises:
        ValueError: a cutoff below 1.
    """
    ks = sorted(set(int(k) for k in cutoffs))
    if ks and ks[0] < 1:
        raise ValueError(f"tie cutoffs must be >= 1, got {ks[0]}")
    queries = hits = 0
    straddling = {k: 0 for k in ks}
    for hs in run.values():
        counts: dict[float, int] = {}
        for h in hs:
            counts[h.score] = counts.get(h.score, 0) + 1
        tied = sum(c for c in counts.values() if c > 1)
        if tied:
            queries += 1
            hits += tied
        for k in ks:
            if len(hs) > k and hs[k - 1].score == hs[k].score:
                straddling[k] += 1
    return TieCount(queries, hits, straddling)
