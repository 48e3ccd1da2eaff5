"""Fusion and evaluation in memory over cached lane candidates, vectorised with numpy (issue #5).

A tuning study evaluates thousands of fusion settings on the *same* candidates. This
module turns the lanes' runs and the qrels into dense arrays once
(:class:`CandidateMatrix`), then fuses and scores a setting with array operations
(:meth:`CandidateMatrix.evaluate`), giving **exactly** what
:func:`workbench.fusion.fuse` followed by :func:`workbench.evaluate.evaluate` (ir_measures,
trec_eval semantics) gives, to 1e-9 (a test proves it on real runs):

* fusion: the formulas and float operations of :mod:`workbench.fusion` (RRF
  ``Σ w / (k + rank)``, weighted sums of per-query min-max / z-scored scores, CombSUM /
  CombMNZ), summed lane by lane in the config's lane order, so fused ties are the same;
* ranking: fused score desc, then the tie-break lane's raw score desc (−inf when that
  lane did not retrieve the document), then doc_id asc (candidate columns are kept in
  doc_id order), after ``min_score``, cut at ``top_k``;
* measures (binary relevance = grade >= 1, :data:`workbench.formats.BINARY_THRESHOLD`):
  ``R@k`` (relevant retrieved in the top k / relevant judged), ``P@k`` (/ k), ``RR@k``
  (1 / rank of the first relevant, 0 past k), ``nDCG@k`` (trec_eval ``ndcg_cut``: gain =
  grade, discount log2(rank + 1), ideal from all judged grades), ``Judged@k``
  (judged documents in the top k / the number retrieved there, at most k). Queries without any judgment are left out, as
  :func:`workbench.evaluate.evaluate` leaves them out; a judged query a setting
  retrieves nothing for (or that has no relevant judgment) scores 0.

Shapes: Q queries × C candidate columns (the union of every lane's hits for a query,
padded); per lane a (Q, D) array of column indices in rank order (−1 = no hit).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from workbench.run import Run

#: Measures the in-memory evaluator computes (name → kind); others need ir_measures.
_MEASURE = re.compile(r"^(R|P|RR|nDCG|Judged)@(\d+)$")


def supported(measure: str) -> bool:
    """Whether :meth:`CandidateMatrix.evaluate` computes ``measure`` (``R@10``, ``nDCG@10``, ``RR@10``, ``P@5``, ``Judged@10``)."""
    m = _MEASURE.match(str(measure).replace("MRR@", "RR@"))
    return bool(m) and int(m.group(2)) >= 1


def _parse(measure: str) -> tuple[str, int]:
    m = _MEASURE.match(str(measure).replace("MRR@", "RR@"))
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"measure {measure!r} is not computed in memory; use one of R@k, P@k, RR@k, nDCG@k, "
                         "Judged@k (k >= 1)")
    return m.group(1), int(m.group(2))


@dataclass(frozen=True)
class FusionSetting:
    """One fusion setting: method (``rrf``, ``weighted``, ``combsum``, ``combmnz``, ``none``), lanes in order,
    per-lane weights and depths (``None``: 1.0 / all), RRF ``k``, ``norm`` (weighted), ``min_score``,
    ``top_k``, ``tiebreak_lane``."""

    lanes: tuple[str, ...]
    method: str = "rrf"
    k: float = 60.0
    weights: Mapping[str, float] | None = None
    depth: int | Mapping[str, int] | None = None
    norm: str = "minmax"
    min_score: float | None = None
    top_k: int = 100
    tiebreak_lane: str | None = None


class CandidateMatrix:
    """The candidates of several lanes for a set of queries, with their judgments, as arrays.

    Args:
        runs: lane name → :class:`~workbench.run.Run` (each query's hits best first).
        qrels: ``(query_id, doc_id, relevance)`` triples (TREC graded qrels).
        query_ids: the queries to evaluate (typically the train split); those without any
            judgment are dropped, as :func:`workbench.evaluate.evaluate` drops them.

    Attributes:
        query_ids: the evaluated queries, in the given order.
        lanes: lane names.
    """

    def __init__(self, runs: Mapping[str, Run], qrels: Sequence, query_ids: Sequence[str]):
        judged: dict[str, dict[str, int]] = {}
        for r in qrels:
            qid, doc, rel = (r.query_id, r.doc_id, r.relevance) if hasattr(r, "query_id") else r
            judged.setdefault(qid, {})[doc] = int(rel)
        from workbench.formats import BINARY_THRESHOLD

        self.threshold = BINARY_THRESHOLD
        self.query_ids = [q for q in query_ids if judged.get(q)]
        self.lanes = list(runs)
        Q = len(self.query_ids)
        columns: list[list[str]] = []
        for q in self.query_ids:
            docs = {h.doc_id for run in runs.values() for h in run.get_hits(q)}
            columns.append(sorted(docs))
        C = max((len(c) for c in columns), default=0) + 1  # one spare column stays empty
        self.doc_ids = columns
        self.n_cols = C
        index = [{d: i for i, d in enumerate(c)} for c in columns]
        self.cols: dict[str, np.ndarray] = {}
        self.scores: dict[str, np.ndarray] = {}
        self._flat: dict[str, np.ndarray] = {}
        self._src: dict[str, np.ndarray] = {}
        self._rank1: dict[str, np.ndarray] = {}
        self._offsets: dict[str, np.ndarray] = {}
        self._counts: dict[tuple, np.ndarray] = {}
        self._stacks: dict[tuple, np.ndarray] = {}
        self._zero: np.ndarray | None = None
        self.raw: dict[str, np.ndarray] = {}  # (Q, C) raw score of the lane, -inf when absent (tie-breaks)
        for lane, run in runs.items():
            D = max((len(run.get_hits(q)) for q in self.query_ids), default=0)
            cols = np.full((Q, max(D, 1)), -1, dtype=np.int64)
            sc = np.full((Q, max(D, 1)), np.nan)
            raw = np.full((Q, C), -np.inf)
            for i, q in enumerate(self.query_ids):
                hits = run.get_hits(q)
                for j, h in enumerate(hits):
                    c = index[i][h.doc_id]
                    cols[i, j] = c
                    sc[i, j] = h.score
                    raw[i, c] = h.score
            self.cols[lane], self.scores[lane], self.raw[lane] = cols, sc, raw
            # the lane's hits as flat (row * C + col) positions, ordered by rank (all rank-1 hits,
            # then rank-2, ...): depth d is then a prefix, ending at offsets[d]
            valid = cols >= 0
            order = np.argsort(np.broadcast_to(np.arange(cols.shape[1]), cols.shape)[valid], kind="stable")
            rows_v = np.broadcast_to(self._row_index(Q), cols.shape)[valid][order]
            ranks_v = np.broadcast_to(np.arange(cols.shape[1]), cols.shape)[valid][order]
            self._flat[lane] = rows_v * C + cols[valid][order]
            self._src[lane] = rows_v * cols.shape[1] + ranks_v  # position in the (Q, D) matrices
            self._rank1[lane] = (ranks_v + 1).astype(float)
            self._offsets[lane] = np.searchsorted(ranks_v, np.arange(cols.shape[1] + 1), side="left")
        self.gain = np.zeros((Q, C))
        self.judged = np.zeros((Q, C), dtype=bool)
        self.n_rel = np.zeros(Q)
        self._ideal: list[np.ndarray] = []
        for i, q in enumerate(self.query_ids):
            js = judged.get(q, {})
            for d, g in js.items():
                c = index[i].get(d)
                if c is not None:
                    self.gain[i, c] = max(g, 0)
                    self.judged[i, c] = True
            self.n_rel[i] = sum(1 for g in js.values() if g >= BINARY_THRESHOLD)
            self._ideal.append(np.array(sorted((max(g, 0) for g in js.values()), reverse=True), dtype=float))
        self._rows = np.arange(Q)[:, None]
        self._idcg: dict[int, np.ndarray] = {}

    @staticmethod
    def _row_index(Q: int) -> np.ndarray:
        return np.arange(Q)[:, None]

    # ------------------------------------------------------------ fusion

    def _contribution(self, lane: str, depth: int | None, norm: str | None) -> tuple[np.ndarray, np.ndarray]:
        """(values, cols) of a lane's top-``depth`` hits: raw reciprocal-rank base or normalised scores."""
        cols = self.cols[lane] if depth is None else self.cols[lane][:, :depth]
        sc = self.scores[lane] if depth is None else self.scores[lane][:, :depth]
        if norm is None:
            return sc, cols
        valid = cols >= 0
        if norm == "minmax":
            lo = np.where(valid, sc, np.inf).min(axis=1, keepdims=True)
            hi = np.where(valid, sc, -np.inf).max(axis=1, keepdims=True)
            span = hi - lo
            with np.errstate(invalid="ignore", divide="ignore"):
                val = np.where(span == 0, 1.0, (sc - lo) / np.where(span == 0, 1.0, span))
        else:  # zscore, summed in rank order as fusion.normalise does (cumsum is sequential)
            n = valid.sum(axis=1, keepdims=True)
            safe = np.where(valid, sc, 0.0)
            mean = np.cumsum(safe, axis=1)[:, -1:] / np.maximum(n, 1)
            var = np.cumsum(np.where(valid, (sc - mean) ** 2, 0.0), axis=1)[:, -1:] / np.maximum(n, 1)
            sd = np.sqrt(var)
            with np.errstate(invalid="ignore", divide="ignore"):
                val = np.where(sd == 0, 0.0, (sc - mean) / np.where(sd == 0, 1.0, sd))
        return np.where(valid, val, np.nan), cols

    def _check(self, s: FusionSetting) -> None:
        unknown = [ln for ln in s.lanes if ln not in self.cols]
        if unknown:
            raise ValueError(f"lanes {unknown} are not in the candidate matrix (lanes: {self.lanes})")
        if s.method not in ("rrf", "weighted", "combsum", "combmnz", "none"):
            raise ValueError(f"unknown fusion method {s.method!r}")
        if s.method == "none" and len(s.lanes) != 1:
            raise ValueError("fusion 'none' takes exactly one lane")

    def fuse(self, s: FusionSetting) -> np.ndarray:
        """Fused scores (Q, C), ``-inf`` where a document is not fused (absent, or below ``min_score``).

        Raises:
            ValueError: an unknown method or norm, or a lane that is not in the matrix.
        """
        self._check(s)
        Q, C = len(self.query_ids), self.n_cols
        w = {ln: float((s.weights or {}).get(ln, 1.0)) for ln in s.lanes}
        F = None
        depths = []
        for lane in s.lanes:
            d = s.depth.get(lane) if isinstance(s.depth, Mapping) else s.depth
            D = self.cols[lane].shape[1]
            d = D if d is None else min(d, D)
            depths.append((lane, d))
            end = self._offsets[lane][d]
            flat = self._flat[lane][:end]  # the lane's hits down to depth d, as flat (query, column) cells
            if s.method == "rrf":
                vals = w[lane] / (s.k + self._rank1[lane][:end])
            elif s.method == "none":  # the lane's own order (its cached order breaks its ties): score = -rank
                vals = -self._rank1[lane][:end]
            else:
                norm, _cols = self._contribution(lane, d, s.norm if s.method == "weighted" else "minmax")
                vals = w[lane] * norm.ravel()[self._src_at(lane, d)[:end]]
            # no cell repeats within a lane, so each bin holds the lane's exact value; lanes are
            # added one after the other, as fusion.py adds them
            contribution = np.bincount(flat, weights=vals, minlength=Q * C)
            F = contribution if F is None else F + contribution
        F = F.reshape(Q, C)
        count, absent = self._count(tuple(depths), Q, C)
        if s.method == "combmnz":
            F = F * count
        score = self.raw[s.lanes[0]] if s.method == "none" else F  # min_score reads the raw score for one lane
        F.ravel()[absent] = -np.inf
        if s.min_score is not None:
            F[score < s.min_score] = -np.inf
        return F

    def _count(self, depths: tuple, Q: int, C: int) -> tuple[np.ndarray, np.ndarray]:
        """(How many of the lanes, each cut at its depth, retrieved each cell (Q, C); the flat indices
        of the cells none retrieved), memoised per (lane, depth) set."""
        got = self._counts.get(depths)
        if got is None:
            count = np.zeros(Q * C, dtype=np.int32)
            for lane, d in depths:
                count[self._flat[lane][: self._offsets[lane][d]]] += 1
            got = (count.reshape(Q, C), np.flatnonzero(count == 0))
            if len(self._counts) < 256:
                self._counts[depths] = got
        return got

    def _src_at(self, lane: str, d: int | None) -> np.ndarray:
        """Positions of the lane's rank-ordered hits in its (Q, min(d, D)) score matrix."""
        D = self.cols[lane].shape[1]
        if d is None or d >= D:
            return self._src[lane]
        src = self._src[lane]
        return (src // D) * d + (src % D)

    def rank(self, s: FusionSetting, depth: int) -> np.ndarray:
        """Column indices (Q, depth) of the top ``min(depth, top_k)`` in tie-break order, −1 past the end.

        Fusion and selection run per query in :func:`workbench._fastkernel.fuse_rank` (numba),
        with the lane values computed here exactly as :meth:`fuse` computes them.
        """
        from workbench._fastkernel import fuse_rank

        self._check(s)
        Q, C = len(self.query_ids), self.n_cols
        cols3 = self._stacked(s.lanes)
        L, _, Dmax = cols3.shape
        w = {ln: float((s.weights or {}).get(ln, 1.0)) for ln in s.lanes}
        depths = np.empty(L, dtype=np.int64)
        for i, lane in enumerate(s.lanes):
            d = s.depth.get(lane) if isinstance(s.depth, Mapping) else s.depth
            D = self.cols[lane].shape[1]
            depths[i] = D if d is None else min(d, D)
        ranks = np.arange(1, Dmax + 1, dtype=float)
        if s.method in ("rrf", "none"):
            table = np.stack([-ranks if s.method == "none" else w[ln] / (s.k + ranks) for ln in s.lanes])
            vals3 = np.ascontiguousarray(table[:, None, :])  # (L, 1, D): one value per rank
        else:
            vals3 = np.zeros((L, Q, Dmax))
            for i, lane in enumerate(s.lanes):
                norm, _cols = self._contribution(lane, int(depths[i]), s.norm if s.method == "weighted" else "minmax")
                vals3[i, :, : norm.shape[1]] = w[lane] * norm
        tb = self.raw[s.tiebreak_lane] if (s.tiebreak_lane and s.method != "none") else self._zeros()
        raw = self.raw[s.lanes[0]] if s.method == "none" else self._zeros()
        K = max(min(depth, s.top_k, C), 0)
        ranked = fuse_rank(cols3, vals3, depths, tb, raw, s.min_score is not None,
                           float(s.min_score) if s.min_score is not None else 0.0, s.method == "none",
                           s.method == "combmnz", C, K)
        if K == depth:
            return ranked
        out = np.full((Q, depth), -1, dtype=np.int64)
        out[:, :K] = ranked
        return out

    def _stacked(self, lanes: tuple[str, ...]) -> np.ndarray:
        """(L, Q, Dmax) hit columns of ``lanes`` (−1 padded), memoised per lane tuple."""
        got = self._stacks.get(lanes)
        if got is None:
            Dmax = max(self.cols[ln].shape[1] for ln in lanes)
            got = np.full((len(lanes), len(self.query_ids), Dmax), -1, dtype=np.int64)
            for i, ln in enumerate(lanes):
                got[i, :, : self.cols[ln].shape[1]] = self.cols[ln]
            self._stacks[lanes] = got
        return got

    def _zeros(self) -> np.ndarray:
        if self._zero is None:
            self._zero = np.zeros((len(self.query_ids), self.n_cols))
        return self._zero

    # ------------------------------------------------------------ measures

    def _idcg_at(self, k: int) -> np.ndarray:
        if k not in self._idcg:
            disc = 1.0 / np.log2(np.arange(2, k + 2))
            self._idcg[k] = np.array([float(np.dot(g[:k], disc[: len(g[:k])])) for g in self._ideal])
        return self._idcg[k]

    def evaluate(self, s: FusionSetting, measures: Sequence[str]) -> dict[str, np.ndarray]:
        """Per-query values (shape (Q,), in ``query_ids`` order) of each measure for setting ``s``.

        Raises:
            ValueError: a measure the in-memory evaluator does not compute, or a bad setting.
        """
        parsed = {m: _parse(m) for m in measures}
        depth = max(k for _kind, k in parsed.values())
        ranked = self.rank(s, depth)
        valid = ranked >= 0
        # -1 (past the end) indexes the last column, the spare one: no gain, not judged
        gains = np.take_along_axis(self.gain, ranked, axis=1)
        judged = np.take_along_axis(self.judged, ranked, axis=1)
        rel = gains >= self.threshold
        out: dict[str, np.ndarray] = {}
        for m, (kind, k) in parsed.items():
            if kind == "R":
                out[m] = np.where(self.n_rel > 0, rel[:, :k].sum(axis=1) / np.maximum(self.n_rel, 1), 0.0)
            elif kind == "P":
                out[m] = rel[:, :k].sum(axis=1) / k
            elif kind == "RR":
                r = rel[:, :k]
                first = np.argmax(r, axis=1)
                out[m] = np.where(r.any(axis=1), 1.0 / (first + 1), 0.0)
            elif kind == "nDCG":
                disc = 1.0 / np.log2(np.arange(2, k + 2))
                dcg = (gains[:, :k] * disc[None, : gains[:, :k].shape[1]]).sum(axis=1)
                idcg = self._idcg_at(k)
                out[m] = np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1.0), 0.0)
            else:  # Judged: over the retrieved top k (ir_measures divides by min(k, retrieved))
                n = valid[:, :k].sum(axis=1)
                out[m] = np.where(n > 0, judged[:, :k].sum(axis=1) / np.maximum(n, 1), 0.0)
        return out

    def mean(self, s: FusionSetting, measures: Sequence[str]) -> dict[str, float]:
        """Mean over the queries of each measure (what ir_measures' aggregate gives)."""
        return {m: float(v.mean()) if len(v) else math.nan for m, v in self.evaluate(s, measures).items()}

    def run(self, s: FusionSetting, depth: int | None = None) -> Run:
        """The fused run for setting ``s`` (for checks and export): fused scores (for ``none``, the lane's
        raw scores), in the evaluated order (each hit's tiebreak is minus its position)."""
        from workbench.run import Hit

        F = self.fuse(s)
        shown = self.raw[s.lanes[0]] if s.method == "none" else F
        ranked = self.rank(s, depth or s.top_k)
        rows = {}
        for i, q in enumerate(self.query_ids):
            rows[q] = [Hit(self.doc_ids[i][c], float(shown[i, c]), -float(j)) for j, c in enumerate(ranked[i]) if c >= 0]
        return Run(rows, "fused")
