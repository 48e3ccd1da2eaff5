"""Fusion and evaluation in memory over cached lane candidates, vectorised with numpy (issue #5).

A tuning study evaluates thousands of fusion settings on the *same* candidates. This
module turns the lanes' runs and the qrels into dense arrays once
(:class:`CandidateMatrix`), then fuses and scores a setting with array operations
(:meth:`CandidateMatrix.evaluate`), giving **exactly** what
:func:`workbench.eval.fusion.fuse` followed by :func:`workbench.eval.evaluate.evaluate` (ir_measures,
trec_eval semantics) gives, to 1e-9 (a test proves it on real runs):

* fusion: the formulas and float operations of :mod:`workbench.eval.fusion` (RRF
  ``Σ w / (k + rank)``, weighted sums of per-query min-max / z-scored scores, CombSUM /
  CombMNZ), summed lane by lane in the config's lane order, so fused ties are the same. The
  methods ranx computes (:data:`workbench.eval.fusion.RANX_METHODS`: ISR, BordaFuse, CombMAX…) take a
  slower path, and so does a setting with a ``pin_lane`` (:func:`workbench.eval.fusion.pin`): the lanes'
  runs are rebuilt from the arrays and fused by :func:`workbench.eval.fusion.fuse` (so the result is the
  same by construction), then put back into columns; scoring and reranking are the same arrays as for
  the others;
* ranking: fused score desc, then the tie-break lane's raw score desc (−inf when that
  lane did not retrieve the document), then doc_id asc (candidate columns are kept in
  doc_id order), after ``min_score``, cut at ``top_k``;
* measures (binary relevance = grade >= 1, :data:`workbench.io.formats.BINARY_THRESHOLD`):
  ``R@k`` (relevant retrieved in the top k / relevant judged), ``P@k`` (/ k), ``RR@k``
  (1 / rank of the first relevant, 0 past k), ``nDCG@k`` (trec_eval ``ndcg_cut``: gain =
  grade, discount log2(rank + 1), ideal from all judged grades), ``Judged@k``
  (judged documents in the top k / the number retrieved there, at most k). Queries without any judgment are left out, as
  :func:`workbench.eval.evaluate.evaluate` leaves them out; a judged query a setting
  retrieves nothing for (or that has no relevant judgment) scores 0;
* an optional rerank stage after fusion (:meth:`CandidateMatrix.reranked`): a reranker's scores per
  candidate column put into the fused order by :func:`workbench.reranking.stage.rerank_ranked`, the rule of
  :func:`workbench.reranking.stage.apply_rerank` that :func:`workbench.experiment.runner.config_run` applies.

* time-span documents (:mod:`workbench.eval.spans`, built with ``spans``): each query's top k is walked top down
  and each position gets the grade of the judged document it is credited with (:func:`workbench.eval.spans.credit`,
  the rule :func:`workbench.eval.spans.rewrite_run` applies before :func:`workbench.eval.evaluate.evaluate`), so a
  position's gain depends on the positions above it; this walk runs per query in Python, and only when the
  matching is active (without it the gains are the plain array lookups).

Shapes: Q queries × C candidate columns (the union of every lane's hits for a query,
padded); per lane a (Q, D) array of column indices in rank order (−1 = no hit).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from itertools import takewhile

import numpy as np

from workbench.eval.fusion import CONSTANT_RTOL, FAST_METHODS, RANX_METHODS, FusionSpec
from workbench.eval.spans import SpanMatching, credit
from workbench.run import Hit, Run

#: Measures the in-memory evaluator computes (name → kind); others need ir_measures.
_MEASURE = re.compile(r"^(R|P|RR|nDCG|Judged)@(\d+)$")


def supported(measure: str) -> bool:
    """Whether :meth:`CandidateMatrix.evaluate` computes ``measure`` (``R@10``, ``nDCG@10``, ``RR@10``, ``P@5``,
    ``Judged@10``)."""
    m = _MEASURE.match(str(measure).replace("MRR@", "RR@"))
    return m is not None and int(m.group(2)) >= 1


def _parse(measure: str) -> tuple[str, int]:
    m = _MEASURE.match(str(measure).replace("MRR@", "RR@"))
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"measure {measure!r} is not computed in memory; use one of R@k, P@k, RR@k, nDCG@k, "
                         "Judged@k (k >= 1)")
    return m.group(1), int(m.group(2))


class CandidateMatrix:
    """The candidates of several lanes for a set of queries, with their judgments, as arrays.

    Args:
        runs: lane name → :class:`~workbench.run.Run` (each query's hits best first).
        qrels: ``(query_id, doc_id, relevance)`` triples (TREC graded qrels).
        query_ids: the queries to evaluate (typically the train split); those without any
            judgment are dropped, as :func:`workbench.eval.evaluate.evaluate` drops them.
        keep_unjudged: keep them instead (unanswerable queries, whose answer is judged by being empty:
            :meth:`empty`); their measures are 0.
        spans: time-tolerant matching of span documents (:mod:`workbench.eval.spans`; the config's ``window_ms``
            and the experiment's ``time_tolerance_ms``); None or inactive: exact ids.

    Attributes:
        query_ids: the evaluated queries, in the given order.
        lanes: lane names.
    """

    def __init__(self, runs: Mapping[str, Run], qrels: Sequence, query_ids: Sequence[str], *,
                 keep_unjudged: bool = False, spans: SpanMatching | None = None):
        judged: dict[str, dict[str, int]] = {}
        for r in qrels:
            qid, doc, rel = (r.query_id, r.doc_id, r.relevance) if hasattr(r, "query_id") else r
            judged.setdefault(qid, {})[doc] = int(rel)
        from workbench.io.formats import BINARY_THRESHOLD

        self.threshold = BINARY_THRESHOLD
        self.query_ids = [q for q in query_ids if judged.get(q) or keep_unjudged]
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
        self._stacks: dict[tuple, np.ndarray] = {}
        self._zero: np.ndarray | None = None
        self._lane_runs: dict[str, Run] = {}
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
        self.gain = np.zeros((Q, C))
        self.judged = np.zeros((Q, C), dtype=bool)
        self.n_rel = np.zeros(Q)
        self._ideal: list[np.ndarray] = []
        for i, q in enumerate(self.query_ids):
            js = judged.get(q, {})
            for d, g in js.items():
                col = index[i].get(d)
                if col is not None:
                    self.gain[i, col] = max(g, 0)
                    self.judged[i, col] = True
            self.n_rel[i] = sum(1 for g in js.values() if g >= BINARY_THRESHOLD)
            self._ideal.append(np.array(sorted((max(g, 0) for g in js.values()), reverse=True), dtype=float))
        self._rows = np.arange(Q)[:, None]
        self._idcg: dict[int, np.ndarray] = {}
        # span matching: per query, each candidate column's judged documents in credit order, and their grades
        self._span_options: list[list[tuple[str, ...]]] | None = None
        self._span_grades: list[dict[str, int]] = []
        if spans is not None and spans.active:
            self._span_options = []
            for i, q in enumerate(self.query_ids):
                grades = judged.get(q, {})
                matches = spans.matcher(grades)
                self._span_options.append([matches(d) for d in columns[i]])
                self._span_grades.append(grades)

    def empty(self, s: FusionSpec) -> np.ndarray:
        """(Q,) bool: whether setting ``s`` answers each query with no document (every hit below its
        ``min_score``, or no lane returned anything), as :func:`workbench.eval.fusion.fuse_spec` would."""
        cols, _scores = self.rank(s, 1)
        return cols[:, 0] < 0 if cols.shape[1] else np.ones(len(self.query_ids), dtype=bool)

    # ------------------------------------------------------------ fusion

    def _normalised(self, lane: str, depth: int, norm: str) -> np.ndarray:
        """(Q, depth) per-query ``minmax``, ``zscore`` or ``raw`` scores of a lane's top-``depth`` hits (NaN past its end),
        with the operations of :func:`workbench.eval.fusion.normalise` (its ``CONSTANT_RTOL`` rule included)."""
        cols = self.cols[lane][:, :depth]
        sc = self.scores[lane][:, :depth]
        valid = cols >= 0
        if norm == "raw":
            return np.where(valid, sc, np.nan)
        lo = np.where(valid, sc, np.inf).min(axis=1, keepdims=True)
        hi = np.where(valid, sc, -np.inf).max(axis=1, keepdims=True)
        span = hi - lo
        with np.errstate(invalid="ignore"):  # rows with no hits: inf - inf; they are all NaN below
            constant = span <= CONSTANT_RTOL * np.maximum(np.abs(lo), np.abs(hi))
        if norm == "minmax":
            with np.errstate(invalid="ignore", divide="ignore"):
                val = np.where(constant, 1.0, (sc - lo) / np.where(constant, 1.0, span))
        else:  # zscore, summed in rank order as fusion.normalise does (cumsum is sequential)
            n = valid.sum(axis=1, keepdims=True)
            safe = np.where(valid, sc, 0.0)
            mean = np.cumsum(safe, axis=1)[:, -1:] / np.maximum(n, 1)
            var = np.cumsum(np.where(valid, (sc - mean) ** 2, 0.0), axis=1)[:, -1:] / np.maximum(n, 1)
            sd = np.sqrt(var)
            with np.errstate(invalid="ignore", divide="ignore"):
                val = np.where(constant, 0.0, (sc - mean) / np.where(constant | (sd == 0), 1.0, sd))
        return np.where(valid, val, np.nan)

    def _check(self, s: FusionSpec) -> None:
        unknown = [ln for ln in s.lanes if ln not in self.cols]
        if unknown:
            raise ValueError(f"lanes {unknown} are not in the candidate matrix (lanes: {self.lanes})")
        if s.method not in (*FAST_METHODS, *RANX_METHODS, "none"):
            raise ValueError(f"unknown fusion method {s.method!r}")
        if s.method == "none" and len(s.lanes) != 1:
            raise ValueError("fusion 'none' takes exactly one lane")
        if s.pin_lane is not None and s.pin_lane not in s.lanes:
            raise ValueError(f"pin_lane {s.pin_lane!r} is not among the setting's lanes {list(s.lanes)}")

    def rank(self, s: FusionSpec, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``min(depth, top_k)`` per query in tie-break order: column indices (Q, depth), −1 past
        the end, and their fused scores (Q, depth) (for ``none``, minus the lane rank).

        The lane values are computed here with the float operations of :mod:`workbench.eval.fusion`
        (RRF terms per rank, per-query normalised scores); adding them up, ``min_score`` and the
        selection run per query in :func:`workbench.eval._fastkernel.fuse_rank` (numba).

        Raises:
            ValueError: an unknown method, a lane not in the matrix, ``none`` with several lanes.
        """
        from workbench.eval._fastkernel import fuse_rank

        self._check(s)
        if s.method in RANX_METHODS or s.pin_lane is not None or s.lane_min_score:
            return self._rank_by_fuse(s, depth)
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
                norm = self._normalised(lane, int(depths[i]), s.norm if s.method == "weighted" else "minmax")
                vals3[i, :, : norm.shape[1]] = w[lane] * norm
        tb = self.raw[s.tiebreak_lane] if (s.tiebreak_lane and s.method != "none") else self._zeros()
        raw = self.raw[s.lanes[0]] if s.method == "none" else self._zeros()
        K = max(min(depth, s.top_k, C), 0)
        ranked, scores = fuse_rank(cols3, vals3, depths, tb, raw, s.min_score is not None,
                                   float(s.min_score) if s.min_score is not None else 0.0, s.method == "none",
                                   s.method == "combmnz", C, K)
        if K == depth:
            return ranked, scores
        out = np.full((Q, depth), -1, dtype=np.int64)
        out[:, :K] = ranked
        sc = np.full((Q, depth), -np.inf)
        sc[:, :K] = scores
        return out, sc

    def lane_run(self, lane: str) -> Run:
        """The lane's run over :attr:`query_ids` as the matrix holds it (hits in rank order, raw scores)."""
        got = self._lane_runs.get(lane)
        if got is None:
            cols, sc = self.cols[lane], self.scores[lane]
            got = Run({q: [Hit(self.doc_ids[i][c], float(sc[i, j])) for j, c in enumerate(cols[i]) if c >= 0]
                       for i, q in enumerate(self.query_ids)}, lane)
            self._lane_runs[lane] = got
        return got

    def _rank_by_fuse(self, s: FusionSpec, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`rank` for a method of ranx, a ``pin_lane`` or per-lane floors (``lane_min_score``):
        :func:`workbench.eval.fusion.fuse_spec` on the lanes' runs, its order put back into columns (the slow
        path; the tie rule is fusion's, the same as the kernel's)."""
        from dataclasses import replace

        from workbench.eval.fusion import fuse_spec

        K = max(min(depth, s.top_k, self.n_cols), 0)
        fused = fuse_spec({ln: self.lane_run(ln) for ln in s.lanes}, replace(s, top_k=K))
        out = np.full((len(self.query_ids), depth), -1, dtype=np.int64)
        sc = np.full((len(self.query_ids), depth), -np.inf)
        for i, q in enumerate(self.query_ids):
            col = {d: c for c, d in enumerate(self.doc_ids[i])}
            for j, h in enumerate(fused.get_hits(q)):
                out[i, j] = col[h.doc_id]
                sc[i, j] = h.score
        return out, sc

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

    def evaluate(self, s: FusionSpec, measures: Sequence[str], rerank: tuple | None = None) -> dict[str, np.ndarray]:
        """Per-query values (shape (Q,), in ``query_ids`` order) of each measure for setting ``s``.

        Args:
            rerank: a rerank stage after fusion, ``(scores, depth, weight)``: ``scores`` (Q, C) the
                reranker's score per query and candidate column (NaN: not scored), ``depth`` the fused
                hits it reorders, ``weight`` its share of the interpolated score
                (:meth:`reranked`); None: fusion alone.

        Raises:
            ValueError: a measure the in-memory evaluator does not compute, or a bad setting.
        """
        parsed = {m: _parse(m) for m in measures}
        depth = max(k for _kind, k in parsed.values())
        if rerank is None:
            ranked, _scores = self.rank(s, depth)
        else:
            ranked = self.reranked(s, depth, *rerank)
        valid = ranked >= 0
        if self._span_options is None:
            # -1 (past the end) indexes the last column, the spare one: no gain, not judged
            gains = np.take_along_axis(self.gain, ranked, axis=1)
            judged = np.take_along_axis(self.judged, ranked, axis=1)
        else:
            gains, judged = self._credited(ranked)
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

    def _credited(self, ranked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Q, depth) gains and judged flags of ``ranked`` (column indices, −1 past the end) under span matching:
        each position credited by :func:`workbench.eval.spans.credit` with one judged document at most."""
        assert self._span_options is not None
        gains = np.zeros(ranked.shape)
        judged = np.zeros(ranked.shape, dtype=bool)
        for i, row in enumerate(ranked):
            options, grades = self._span_options[i], self._span_grades[i]
            for pos, j in enumerate(credit(options[c] for c in takewhile(lambda c: c >= 0, row))):
                if j is not None:
                    gains[i, pos] = max(grades[j], 0)
                    judged[i, pos] = True
        return gains, judged

    def mean(self, s: FusionSpec, measures: Sequence[str], rerank: tuple | None = None) -> dict[str, float]:
        """Mean over the queries of each measure (what ir_measures' aggregate gives); ``rerank`` as in
        :meth:`evaluate`."""
        return {m: float(v.mean()) if len(v) else math.nan for m, v in self.evaluate(s, measures, rerank).items()}

    def reranked(self, s: FusionSpec, depth: int, scores: np.ndarray, rerank_depth: int,
                 weight: float = 1.0) -> np.ndarray:
        """The top ``depth`` per query of setting ``s`` followed by a rerank stage: (Q, depth) column indices,
        −1 past the end, exactly the order of :func:`workbench.experiment.runner.config_run`.

        As there, the fusion keeps ``max(top_k, rerank_depth)`` hits, the top ``rerank_depth`` are
        reordered by :func:`workbench.reranking.stage.rerank_ranked` (the rule of
        :func:`workbench.reranking.stage.apply_rerank`, PyTerrier's ``% depth >>`` cascade, interpolated as in
        Nogueira & Cho 2019 when ``weight`` < 1) and ``top_k`` applies to the reranked list.

        Args:
            scores: (Q, C) the reranker's score per query and candidate column, NaN where it gave none.
            rerank_depth: fused hits per query the reranker reorders (>= 1).
            weight: the reranker's share of the interpolated score, in [0, 1].
        """
        from dataclasses import replace

        from workbench.reranking.stage import rerank_ranked

        if scores.shape != (len(self.query_ids), self.n_cols):
            raise ValueError(f"rerank scores have shape {scores.shape}; this matrix needs "
                             f"{(len(self.query_ids), self.n_cols)}")
        deep = replace(s, top_k=max(s.top_k, int(rerank_depth)))
        ranked, fused = self.rank(deep, max(depth, int(rerank_depth)))
        if s.method == "none":  # the fused run of `none` holds the lane's raw scores (fusion.fuse)
            fused = np.take_along_axis(self.raw[s.lanes[0]], ranked, axis=1)
        out = rerank_ranked(ranked, fused, scores, int(rerank_depth), weight, depth)
        out[:, s.top_k:] = -1
        return out

    def run(self, s: FusionSpec, depth: int | None = None) -> Run:
        """The fused run for setting ``s`` (for checks and export): fused scores (for ``none``, the lane's
        raw scores), in the evaluated order (each hit's tiebreak is minus its position)."""
        ranked, scores = self.rank(s, depth or s.top_k)
        rows = {}
        for i, q in enumerate(self.query_ids):
            shown = self.raw[s.lanes[0]][i] if s.method == "none" else scores[i]
            rows[q] = [Hit(self.doc_ids[i][c], float(shown[c] if s.method == "none" else shown[j]), -float(j))
                       for j, c in enumerate(ranked[i]) if c >= 0]
        return Run(rows, "fused")
