"""The contracts between the core and its plug-ins: retrievers (lanes), rerankers, embedders.

The core (``workbench``) only ever talks to these protocols; the adapters that implement
them live in ``retrievers/`` (or in any installed distribution) and are found through
:mod:`workbench.registry`. ``workbench.testing.check_lane`` checks a lane against
:class:`Retriever` and is shipped for plug-in authors.

Threads and determinism (for every protocol here): an instance is used by one thread at
a time; the same inputs give the same output, byte for byte (ties are cut by the run's
written rule, :func:`workbench.run.sort_hits`). Connections, models and caches are
passed in by the runner, never created inside ``search`` / ``rerank`` / ``embed_*``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from workbench.run import Run
from workbench.types import Document, Query


@runtime_checkable
class Retriever(Protocol):
    """A lane: a batch of queries in, a :class:`~workbench.run.Run` out.

    Attributes:
        name: the lane's name in experiment configs (``vector``, ``fts_simple``).
        score_kind: what the raw score means, e.g. ``"cosine similarity, higher is better"``.
        last_latencies_ms: per query_id of the last ``search``, the time that query cost
            in ms (the runner reads it after each batch; a lane may leave it empty).

    ``search(queries, k)`` returns, for every query, at most ``k`` hits sorted by the
    run tie-break rule; exactly ``k`` when the corpus has that many matching documents.
    An empty or whitespace-only query yields an empty ranking, never an error; one bad
    query never costs the others their rankings. The same inputs give the same run.
    ``config()`` returns the engine parameters that shape the ranking (informative: the
    candidate cache is keyed by the kind's declared parameters and code fingerprint,
    :meth:`workbench.registry.RetrieverKind.cache_key`).
    """

    name: str
    score_kind: str

    def search(self, queries: Sequence[Query], k: int) -> Run: ...

    def config(self) -> dict[str, Any]: ...


@runtime_checkable
class Reranker(Protocol):
    """A rerank stage after fusion: rescoring the top candidates of a fused run.

    Attributes:
        name: the reranker's name in experiment configs (``[rerankers.NAME]``).
        score_kind: what its scores mean (higher is better), e.g. ``"cross-encoder logit"``.

    ``rerank(queries, run, documents, depth)`` receives the fused run and returns a run
    of the reranker's own scores (higher is better) for candidates among the top
    ``depth`` hits of each query of ``run``. A candidate it cannot score may be left
    out: :func:`workbench.reranking.stage.apply_rerank` keeps it after the scored ones, in
    fused order, and the hits below ``depth`` after those. ``documents`` maps doc_id to
    :class:`~workbench.types.Document` (the texts a cross-encoder reads).
    """

    name: str
    score_kind: str

    def rerank(self, queries: Sequence[Query], run: Run, documents: Mapping[str, Document], depth: int) -> Run: ...


@runtime_checkable
class Embedder(Protocol):
    """Text → unit-length vectors.

    Attributes:
        model_id: a stable id of the model and its settings (cache key), e.g.
            ``sentence-transformers/all-MiniLM-L6-v2``.
        dim: vector dimension.

    ``embed_queries`` and ``embed_passages`` return float32 arrays of shape
    ``(len(texts), dim)``, L2-normalised, so the dot product is the cosine similarity.
    Models with query/passage prefixes (E5) apply them here.
    """

    model_id: str
    dim: int

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...


class Resources(Protocol):
    """What a retriever or reranker kind may ask of the runner when it opens on a dataset
    (:class:`workbench.experiment.runner.Engine` implements it). Everything is started lazily:
    nothing a kind does not ask for is started or loaded.
    """

    home: Any
    #: ``log(message)``: a line for the job's log (stderr or the progress stream).
    log: Any

    def reader(self) -> str:
        """The read-only PostgreSQL DSN lanes connect with (starts the embedded server if needed)."""

    def embedder(self, name: str) -> Embedder:
        """The experiment's ``[embedders.NAME]`` (the model loads on its first embedding)."""

    def model_id(self, name: str) -> str:
        """The model id of ``[embedders.NAME]`` (known without loading the model)."""

    def pg_index(self, ds: Any, embedder_name: str | None) -> Any:
        """The dataset's PostgreSQL index (``None``: the text index of the first declared embedder)."""

    def opensearch(self) -> tuple[Any, str]:
        """``(client, url)`` of the checked OpenSearch cluster (the local node unless configured)."""

    def os_index(self, ds: Any, embedder_name: str | None) -> Any:
        """The dataset's OpenSearch index (``None``: no vector field), built when missing."""

    def pair_scores(self) -> Any:
        """The job's :class:`workbench.reranking.scorers.PairScoreCache` (``<home>/cache/pair_scores.sqlite``), which
        rerankers score through."""

    def index_params(self) -> dict[str, Any]:
        """The experiment's ``[index]`` table (HNSW ``m``, ``ef_construction``, ``halfvec``) as given."""
