"""The per-query fusion and top-k kernel of :mod:`workbench.eval.fasteval`, compiled with numba.

Kept apart so that the arithmetic is visible in one place: for each query, lane values are
added to their document's cell lane after lane (as :mod:`workbench.eval.fusion` adds them), then
the top ``K`` cells are selected and ordered by (fused score desc, tie-break score desc,
column asc = doc_id asc). ``cache=True`` keeps the compiled code on disk between runs.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange


def fuse_rank(cols, vals, depths, tb, raw, use_min, min_score, none_mode, mnz, n_cols, K):
    """Top ``K`` column indices per query, ``-1`` past the end: (Q, K) int64; and their fused scores (Q, K).

    Queries are split into one chunk per numba thread (``NUMBA_NUM_THREADS``).

    Args:
        cols: (L, Q, D) int64 column of each lane hit in rank order, -1 = no hit.
        vals: (L, Q, D) float64 value each hit adds (weighted normalised score), or (L, 1, D) when the
            value depends on the rank only (RRF term, -rank for "none").
        depths: (L,) int64 hits of each lane that enter.
        tb: (Q, C) float64 tie-break scores (-inf absent, or all zero).
        raw: (Q, C) float64 scores ``min_score`` is compared with when ``none_mode`` (else unused).
        use_min, min_score: drop cells below ``min_score``.
        none_mode: one lane, no fusion (``min_score`` reads ``raw``).
        mnz: multiply by the number of lanes that retrieved the cell (CombMNZ).
        n_cols: C; K: list length.
    """
    Q = cols.shape[1]
    chunks = max(1, min(get_num_threads(), Q // 64 or 1))
    bounds = np.linspace(0, Q, chunks + 1).astype(np.int64)
    return _fuse_rank(cols, vals, depths, tb, raw, use_min, min_score, none_mode, mnz, n_cols, K, bounds)


@njit(cache=True, parallel=True)
def _fuse_rank(cols, vals, depths, tb, raw, use_min, min_score, none_mode, mnz, n_cols, K, bounds):  # pragma: no cover
    L, Q, D = cols.shape
    out = np.full((Q, K), -1, np.int64)
    out_scores = np.full((Q, K), -np.inf)
    for chunk in prange(len(bounds) - 1):
        _chunk(cols, vals, depths, tb, raw, use_min, min_score, none_mode, mnz, n_cols, K, bounds[chunk],
               bounds[chunk + 1], out, out_scores)
    return out, out_scores


@njit(cache=True)
def _chunk(cols, vals, depths, tb, raw, use_min, min_score, none_mode, mnz, n_cols, K, q0, q1, out,
           out_scores):  # pragma: no cover
    """Queries ``q0 .. q1 - 1`` of :func:`fuse_rank`, written into ``out`` and ``out_scores``."""
    L, Q, D = cols.shape
    F = np.zeros(n_cols)
    cnt = np.zeros(n_cols, np.int64)
    touched = np.empty(n_cols, np.int64)
    score = np.empty(n_cols)
    cc = np.empty(n_cols, np.int64)
    ff = np.empty(n_cols)
    tt = np.empty(n_cols)
    buf = np.empty(max(K, 1))
    for q in range(q0, q1):
        nt = 0
        qv = q if vals.shape[1] > 1 else 0  # RRF and "none" pass one row of values per rank for all queries
        for lane in range(L):
            d = min(depths[lane], D)
            for j in range(d):
                c = cols[lane, q, j]
                if c < 0:
                    break
                if cnt[c] == 0:
                    touched[nt] = c
                    nt += 1
                F[c] += vals[lane, qv, j]
                cnt[c] += 1
        # one pass over the touched cells: the final score (-inf when below min_score), the k-th
        # best so far (a sorted buffer of the k best, ascending: buf[0] is the k-th), and the reset
        k = min(K, nt)
        for i in range(k):
            buf[i] = -np.inf
        nk = 0
        for i in range(nt):
            c = touched[i]
            f = F[c] * cnt[c] if mnz else F[c]
            F[c] = 0.0
            cnt[c] = 0
            if use_min and (raw[q, c] if none_mode else f) < min_score:
                score[i] = -np.inf
                continue
            score[i] = f
            nk += 1
            if k > 0 and f > buf[0]:
                j = 0
                while j + 1 < k and buf[j + 1] < f:
                    buf[j] = buf[j + 1]
                    j += 1
                buf[j] = f
        k = min(k, nk)
        if k == 0:
            continue
        kth = buf[min(K, nt) - k]  # with fewer than K kept cells, the buffer's first slots stay -inf
        m = 0
        for i in range(nt):
            if score[i] >= kth and score[i] > -np.inf:
                c = touched[i]
                cc[m] = c
                ff[m] = score[i]
                tt[m] = tb[q, c]
                m += 1
        # order by (score desc, tie-break desc, column asc): insertion sort of the m (about k) cells
        for i in range(1, m):
            c0, f0, t0 = cc[i], ff[i], tt[i]
            j = i - 1
            while j >= 0 and (ff[j] < f0 or (ff[j] == f0 and (tt[j] < t0 or (tt[j] == t0 and cc[j] > c0)))):
                cc[j + 1], ff[j + 1], tt[j + 1] = cc[j], ff[j], tt[j]
                j -= 1
            cc[j + 1], ff[j + 1], tt[j + 1] = c0, f0, t0
        for i in range(k):
            out[q, i] = cc[i]
            out_scores[q, i] = ff[i]
