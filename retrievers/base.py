"""The one retriever protocol, and the embedder protocol the vector lanes use.

A *lane* answers a batch of queries with a :class:`~workbench.run.Run`. Adapters only
translate: connections and embedders are passed in, never created inside ``search``.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from workbench.run import Run
from workbench.types import Query


@runtime_checkable
class Retriever(Protocol):
    """A lane.

    Attributes:
        name: the lane's name in experiment configs (``vector``, ``fts_simple``).
        score_kind: what the raw score means, e.g. ``"cosine similarity, higher is better"``.

    ``search(queries, k)`` returns, for every query, at most ``k`` hits sorted by the
    run tie-break rule; exactly ``k`` when the corpus has that many matching documents.
    An empty or whitespace-only query yields an empty ranking, never an error. The same
    inputs give the same run. ``config()`` returns the engine parameters that key the
    candidate cache (everything that changes the ranking).
    """

    name: str
    score_kind: str

    def search(self, queries: Sequence[Query], k: int) -> Run: ...

    def config(self) -> dict[str, Any]: ...


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
