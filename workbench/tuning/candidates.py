"""A study's lane candidates: per engine setting, the lanes' runs, latencies and candidate matrices.

:class:`Candidates` fetches each lane's candidates once per distinct engine setting (the candidate
cache of the main job, or the engine on a miss) and builds the in-memory
:class:`workbench.eval.fasteval.CandidateMatrix` every trial of that setting is scored on. For a
study that tunes the rerank stage it also holds each reranker's scores of the candidates, per
engine setting, split and reranker, as a (Q, C) array filled lazily (:meth:`Candidates.rerank_scores`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from workbench.eval.fasteval import CandidateMatrix
from workbench.tuning.space import Study

_UNSET = object()


class Candidates:
    """Lane candidates of the study's dataset, per engine setting, as runs and candidate matrices.

    Lanes run on every query of the dataset (``ds``: the candidate cache is keyed by the whole
    query set); matrices and reports judge by the study's qrels layer (``view``: the layer's qrels
    and the queries it evaluates, :func:`workbench.judging.layers.evaluation_view`).

    Args:
        study: the validated study.
        home: the workbench home (datasets, caches).
        log: progress messages.
        store: the judgment store for ``human`` / ``merged`` (default: the home's).

    Raises:
        PgError: ``human`` / ``merged`` and the store's server cannot be reached.
    """

    def __init__(self, study: Study, home: Path, log: Callable[[str], None] = lambda _m: None,
                 progress: bool = False, store: Any = None):
        from workbench.data import catalog
        from workbench.experiment.cache import CandidateCache
        from workbench.experiment.runner import Engine
        from workbench.judging import layers

        self.study, self.home, self.log = study, Path(home), log
        self.ds = catalog.ensure(study.dataset, catalog.load_definitions(), home=self.home, log=log)
        self._layer = layers.load_layer(getattr(study, "qrels", "built"), self.ds, store=store, home=self.home)
        self._view = layers.evaluation_view(self.ds, self._layer)
        self.engine = Engine(study.experiment, self.home, progress, log)
        self.cache = CandidateCache(self.home / "cache" / "candidates")
        self._runs: dict[tuple, Any] = {}
        self._lat: dict[tuple, dict[str, float]] = {}
        self._matrices: dict[tuple, dict[str, CandidateMatrix]] = {}
        self.queries = {q.query_id: q for q in self.ds.queries}

    @property
    def layer(self):
        """The study's qrels (:class:`workbench.judging.layers.LayerQrels`; ``built`` when none was loaded)."""
        if getattr(self, "_layer", None) is None:
            from workbench.judging.layers import built_layer

            self._layer = built_layer(self.ds)
        return self._layer

    @property
    def view(self):
        """The dataset as the study's layer judges it: the layer's qrels, the queries it evaluates."""
        if getattr(self, "_view", None) is None:
            from workbench.judging.layers import evaluation_view

            self._view = evaluation_view(self.ds, self.layer)
        return self._view

    @property
    def spans(self):
        """The time-span matching of the baseline config's ``window_ms`` and the experiment's ``time_tolerance_ms``
        on the dataset (:func:`workbench.eval.spans.span_matching`; None: exact ids)."""
        if not hasattr(self, "_spans"):
            from workbench.eval.spans import span_matching

            cfg = self.study.experiment.configs[self.study.baseline]
            self._spans = span_matching(self.ds.documents, cfg.window_ms, self.study.experiment.time_tolerance_ms)
        return self._spans

    def lane_run(self, lane: str, overrides: dict[str, Any]):
        """(run, latencies) of ``lane`` with engine parameter ``overrides`` (cache first)."""
        from workbench.experiment.config import LaneSpec
        from workbench.experiment.runner import lane_result

        key = (lane, tuple(sorted(overrides.items())))
        if key not in self._runs:
            base = self.study.experiment.lanes[lane]
            spec = LaneSpec(lane, base.kind, {**base.params, **overrides})
            got = lane_result(spec, self.ds, self.engine, self.cache, self.study.experiment.depth, self.log)
            self._runs[key], self._lat[key] = got.run, got.latencies_ms
        return self._runs[key], self._lat[key]

    def engine_key(self, params: dict[str, Any]) -> tuple:
        """The engine setting of a trial: ((lane, ((param, value), ...)), ...)."""
        out = []
        for lane in self.study.lanes:
            base = self.study.experiment.lanes[lane].params
            ov = {k.split(".", 2)[2]: v for k, v in params.items() if k.startswith(f"engine.{lane}.")}
            ov = {k: v for k, v in ov.items() if base.get(k, _UNSET) != v}  # a value equal to the lane's own is no override
            out.append((lane, tuple(sorted(ov.items()))))
        return tuple(out)

    def split_queries(self, split: str) -> list:
        """The queries of ``split`` trials and reports are scored on: those the study's qrels layer evaluates,
        and with ``queries = "filtered"`` only those that carry a filter."""
        subset = getattr(self.study, "queries", "all")
        return [q for q in self.view.queries if q.split == split and (subset != "filtered" or q.filter)]

    def matrix(self, engine_key: tuple, split: str) -> CandidateMatrix:
        """The candidate matrix of the study's lanes for one engine setting and split."""
        if engine_key not in self._matrices:
            self._matrices[engine_key] = {}
        if split not in self._matrices[engine_key]:
            runs = {lane: self.lane_run(lane, dict(ov))[0] for lane, ov in engine_key}
            qids = [q.query_id for q in self.split_queries(split)]
            self._matrices[engine_key][split] = CandidateMatrix(runs, self.view.qrels, qids, spans=self.spans)
        return self._matrices[engine_key][split]

    def negatives(self, engine_key: tuple, split: str) -> CandidateMatrix:
        """The candidate matrix of the split's unanswerable queries (:data:`workbench.types.
        UNANSWERABLE_QUERY_TYPES`: no judgment by construction, kept all the same), for the abstention part of
        the objective (:func:`workbench.tuning.objective.abstention`)."""
        from workbench.types import UNANSWERABLE_QUERY_TYPES

        key = ("negatives", engine_key)
        if key not in self._matrices:
            self._matrices[key] = {}
        if split not in self._matrices[key]:
            runs = {lane: self.lane_run(lane, dict(ov))[0] for lane, ov in engine_key}
            qids = [q.query_id for q in self.ds.queries
                    if q.split == split and q.query_type in UNANSWERABLE_QUERY_TYPES]
            self._matrices[key][split] = CandidateMatrix(runs, [], qids, keep_unjudged=True)
        return self._matrices[key][split]

    def latencies(self, engine_key: tuple, lanes: tuple[str, ...], query_ids: list[str]) -> np.ndarray:
        """Per-query latency (ms) of a fused config: the sum of its lanes' cached latencies."""
        ov = dict(engine_key)
        total = np.zeros(len(query_ids))
        for lane in lanes:
            lat = self.lane_run(lane, dict(ov[lane]))[1]
            total += np.array([lat.get(q, 0.0) for q in query_ids])
        return total

    # ------------------------------------------------------------ the rerank stage

    def documents(self) -> dict[str, Any]:
        """doc_id → :class:`workbench.types.Document` of the dataset (what a cross-encoder reads), built once."""
        docs = self.__dict__.get("_documents")
        if docs is None:
            docs = self.__dict__["_documents"] = {d.doc_id: d for d in self.ds.documents}
        return docs

    def reranker(self, engine_key: tuple, name: str):
        """The live reranker ``[rerankers.NAME]`` (:class:`workbench.protocols.Reranker`), opened once through
        :meth:`workbench.experiment.runner.Engine.reranker` with the runs of the lanes it reads (those of
        the engine setting ``engine_key`` when they are study lanes; a model reranker reads none)."""
        from workbench.registry import reranker_kind

        spec = self.study.experiment.rerankers[name]
        lanes = tuple(reranker_kind(spec.kind).lanes(spec.parsed()))
        ov = dict(engine_key)
        key = (name, tuple((ln, ov.get(ln, ())) for ln in lanes))
        opened = self.__dict__.setdefault("_rerankers", {})
        if key not in opened:
            runs = {ln: self.lane_run(ln, dict(ov.get(ln, ())))[0] for ln in lanes}
            opened[key] = self.engine.reranker(self.ds, name, runs)
        return opened[key]

    def rerank_scores(self, engine_key: tuple, split: str, reranker_name: str, ranked_head: np.ndarray) -> np.ndarray:
        """The reranker's scores of the candidates of :meth:`matrix` ``(engine_key, split)``, with every
        candidate of ``ranked_head`` asked.

        The (Q, C) array (NaN: not scored) is kept per (engine setting, split, reranker) and filled
        lazily: the (query, column) pairs of ``ranked_head`` never asked go to the reranker in one call
        (:meth:`workbench.protocols.Reranker.rerank` on a run holding only those candidates, in fused
        order), and what it returns is stored; pairs it leaves out stay NaN but are remembered as asked,
        so nothing is asked twice. A model reranker reads and fills the persistent pair-score cache
        (:class:`workbench.reranking.scorers.CachedScorer`), so after ``workbench eval`` of the experiment almost
        no pair reaches a model. A reranker's score of a pair does not depend on the other candidates
        sent with it (true of the ``lane``, ``cross-encoder``, ``embedding`` and ``http`` kinds).

        Args:
            ranked_head: (Q, H) column indices of the matrix's queries (−1: none), e.g. the top
                ``depth`` of a fused ranking.

        Returns:
            the (Q, C) score array (shared: do not write into it).
        """
        from workbench.run import Hit, Run

        m = self.matrix(engine_key, split)
        Q, C = len(m.query_ids), m.n_cols
        store = self.__dict__.setdefault("_rerank_scores", {})
        skey = (engine_key, split, reranker_name)
        if skey not in store:
            store[skey] = (np.full((Q, C), np.nan), np.zeros((Q, C), dtype=bool))
        scores, asked = store[skey]
        head = np.asarray(ranked_head, dtype=np.int64)
        if head.ndim != 2 or head.shape[0] != Q:
            raise ValueError(f"ranked_head has shape {head.shape}; the matrix has {Q} queries")
        valid = head >= 0
        need = valid & ~np.take_along_axis(asked, np.where(valid, head, C - 1), axis=1)
        rows = np.flatnonzero(need.any(axis=1))
        if not len(rows):
            return scores
        queries, hits, wanted = [], {}, {}
        for i in rows:
            cols = list(dict.fromkeys(int(c) for c in head[i][need[i]]))
            qid = m.query_ids[i]
            queries.append(self.queries[qid])
            hits[qid] = [Hit(m.doc_ids[i][c], float(-j)) for j, c in enumerate(cols)]  # fused order kept
            wanted[i] = cols
        n = sum(len(c) for c in wanted.values())
        if n >= 200:  # the first ask of a reranker, not every trial's few new pairs
            self.log(f"reranker {reranker_name}: scoring {n} candidate pairs of {len(rows)} {split} queries "
                     "(from the pair-score cache where it has them)")
        got = self.reranker(engine_key, reranker_name).rerank(queries, Run(hits, "candidates"), self.documents(),
                                                               max(len(c) for c in wanted.values()))
        for i, cols in wanted.items():
            index = {m.doc_ids[i][c]: c for c in cols}
            for h in got.get_hits(m.query_ids[i]):
                c = index.get(h.doc_id)
                if c is not None:
                    scores[i, c] = h.score
            asked[i, cols] = True
        return scores
