"""BM25 over an in-memory inverted index, shared by the lanes that match on lemmas (``sanskrit-lemma``,
``dictionary``).

Robertson & Zaragoza 2009, *The Probabilistic Relevance Framework: BM25 and Beyond*, eq. 3.15, with
Lucene's non-negative idf ``ln(1 + (N − df + 0.5) / (df + 0.5))``; a query term may carry a weight
(1.0: plain BM25), multiplied into its contribution.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping


class Bm25Index:
    """Postings of ``doc_id → term frequencies``; :meth:`scores` ranks documents for weighted query terms.

    Args:
        docs: doc_id → {term: frequency (> 0)}; a document with no term is left out.
        k1, b: BM25's term-frequency saturation and length normalisation (k1 >= 0, 0 <= b <= 1).
    """

    def __init__(self, docs: Mapping[str, Mapping[str, int]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = float(k1), float(b)
        self.postings: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.length: dict[str, int] = {}
        for doc_id, tf in docs.items():
            n = sum(tf.values())
            if n <= 0:
                continue
            self.length[doc_id] = n
            for term, f in tf.items():
                self.postings[term].append((doc_id, f))
        self.n_docs = len(self.length)
        self.avg_length = sum(self.length.values()) / self.n_docs if self.n_docs else 0.0
        self.idf = {t: math.log(1 + (self.n_docs - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}

    def __contains__(self, term: str) -> bool:
        return term in self.postings

    def scores(self, terms: Iterable[tuple[str, float]]) -> dict[str, float]:
        """doc_id → the sum over ``(term, weight)`` of ``weight · idf · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))``;
        unknown terms add nothing."""
        out: dict[str, float] = defaultdict(float)
        for term, weight in terms:
            idf = self.idf.get(term)
            if idf is None:
                continue
            for doc_id, tf in self.postings[term]:
                norm = self.k1 * (1 - self.b + self.b * self.length[doc_id] / self.avg_length)
                out[doc_id] += weight * idf * tf * (self.k1 + 1) / (tf + norm)
        return out


class Bm25Lane:
    """What the in-memory BM25 lanes share: ``search`` ranks by :meth:`Bm25Index.scores` of the query's weighted
    terms (:meth:`query_terms`, implemented by the lane); ties by ``doc_id``; an empty ranking when a query has
    no known term. Subclasses set ``name`` and ``_bm25`` (a :class:`Bm25Index`)."""

    name: str
    _bm25: Bm25Index

    def query_terms(self, text: str) -> Iterable[tuple[str, float]]:
        """``(term, weight)`` pairs a query asks for."""
        raise NotImplementedError

    def search(self, queries, k: int):
        """Top ``k`` documents by BM25 over each query's terms.

        Raises:
            ValueError: ``k`` is not an integer >= 0.
        """
        import time

        from workbench.run import Run

        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ValueError(f"k must be an integer >= 0, got {k!r}")
        rows = {}
        self.last_latencies_ms: dict[str, float] = {}
        for q in queries:
            t0 = time.perf_counter()
            scores = self._bm25.scores(self.query_terms(q.text or "")) if k > 0 else {}
            rows[q.query_id] = sorted(scores.items(), key=lambda ds: (-ds[1], ds[0]))[:k]
            self.last_latencies_ms[q.query_id] = (time.perf_counter() - t0) * 1000
        return Run(rows, self.name)
