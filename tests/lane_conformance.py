"""The conformance check every lane passes (Postgres lanes, the reference lane, OpenSearch).

``check_lane(lane, queries, k, matches=...)`` runs the lane and asserts the
:class:`retrievers.base.Retriever` contract; it returns the run for further checks.
Also here: :class:`HashEmbedder`, a tiny deterministic embedder for lane tests that
need no model.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from typing import Mapping, Sequence

import numpy as np

from workbench.run import Run, sort_hits
from workbench.types import Query

#: A query made only of quotes, tsquery operators and SQL metacharacters.
NASTY = "' \" ; -- DROP TABLE x; ( ) : * & | ! \\ %"


def _q(qid: str, text: str) -> Query:
    return Query(qid, text, "paraphrase", "und", "test")


def _pairs(run: Run, qid: str) -> list[tuple[str, float]]:
    return [(h.doc_id, h.score) for h in run[qid]]


def check_lane(lane, queries: Sequence[Query], k: int, *, matches: Mapping[str, int] | int | None = None) -> Run:
    """Assert the lane contract on ``queries`` at depth ``k``; return the lane's run.

    Args:
        lane: a :class:`retrievers.base.Retriever`.
        queries: non-empty queries (distinct query_ids) the lane can answer.
        k: the depth.
        matches: how many documents of the lane's corpus match each query (a dict by
            query_id, or one number for all; ``None``: unknown). Where given, the
            ranking must hold exactly ``min(k, matches)`` hits.

    Checks: ``name``/``score_kind``/``config()``; every query_id present; each ranking
    sorted by the tie-break rule (score desc, tiebreak desc, doc_id asc), at most ``k``
    hits, finite scores, no duplicates; row counts as stated; two calls equal; empty and
    whitespace-only queries give empty rankings; ``k = 0`` gives empty rankings; a query
    of quotes and SQL / tsquery metacharacters and a 10,000-character query raise
    nothing; NFD text ranks exactly as NFC text; latencies (when the lane records
    ``last_latencies_ms``) are finite and >= 0 for every query.
    """
    assert isinstance(lane.name, str) and lane.name
    assert isinstance(lane.score_kind, str) and lane.score_kind
    cfg = lane.config()
    assert isinstance(cfg, dict) and cfg
    json.dumps(cfg, sort_keys=True)  # the candidate cache keys on it
    assert queries, "check_lane needs at least one query"

    run = lane.search(queries, k)
    assert isinstance(run, Run)
    assert set(run) == {q.query_id for q in queries}
    for q in queries:
        hits = run[q.query_id]
        assert len(hits) <= k, (q.query_id, len(hits))
        assert hits == sort_hits(hits), f"{q.query_id}: not in tie-break order"
        assert all(math.isfinite(h.score) for h in hits)
        assert len({h.doc_id for h in hits}) == len(hits)
        n = matches.get(q.query_id) if isinstance(matches, Mapping) else matches
        if n is not None:
            assert len(hits) == min(k, n), f"{q.query_id}: {len(hits)} hits, expected min(k={k}, matches={n})"

    lat = getattr(lane, "last_latencies_ms", None)
    if lat is not None:
        assert set(lat) >= {q.query_id for q in queries}
        assert all(math.isfinite(v) and v >= 0 for v in lat.values())

    again = lane.search(queries, k)
    assert all(_pairs(again, q.query_id) == _pairs(run, q.query_id) for q in queries), "not deterministic"

    empty = lane.search([_q("empty", ""), _q("blank", "  \t\n ")], k)
    assert set(empty) == {"empty", "blank"} and not empty["empty"] and not empty["blank"]
    assert all(not hits for hits in lane.search(queries[:1], 0).values())

    nasty = lane.search([_q("nasty", NASTY), _q("nasty2", queries[0].text + " " + NASTY)], k)
    assert set(nasty) == {"nasty", "nasty2"} and len(nasty["nasty2"]) <= k

    base = (queries[0].text.strip() or "a") + " "
    long_text = (base * (10_000 // len(base) + 1))[:10_000]
    long_run = lane.search([_q("long", long_text)], k)
    assert len(long_run["long"]) <= k

    nfd = [_q(q.query_id, unicodedata.normalize("NFD", q.text)) for q in queries]
    nfd_run = lane.search(nfd, k)
    for q in queries:
        assert _pairs(nfd_run, q.query_id) == _pairs(run, q.query_id), f"{q.query_id}: NFD ranks differently"
    return run


class HashEmbedder:
    """A deterministic bag-of-words embedder for tests: each word (NFC, lower case) adds ±1
    to a hashed coordinate; vectors are L2-normalised (a small constant keeps them non-zero)."""

    def __init__(self, dim: int = 64, model_id: str | None = None):
        self.dim = dim
        self.model_id = model_id or f"test/hash-bow-{dim}"

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float64)
        v[0] = 1e-3
        for w in re.findall(r"\w+", unicodedata.normalize("NFC", text).lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        return (v / np.linalg.norm(v)).astype(np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_queries(texts)
