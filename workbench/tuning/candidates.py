"""A study's lane candidates: per engine setting, the lanes' runs, latencies and candidate matrices.

:class:`Candidates` fetches each lane's candidates once per distinct engine setting (the candidate
cache of the main job, or the engine on a miss) and builds the in-memory
:class:`workbench.eval.fasteval.CandidateMatrix` every trial of that setting is scored on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

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

    def matrix(self, engine_key: tuple, split: str) -> CandidateMatrix:
        """The candidate matrix of the study's lanes for one engine setting and split."""
        if engine_key not in self._matrices:
            self._matrices[engine_key] = {}
        if split not in self._matrices[engine_key]:
            runs = {lane: self.lane_run(lane, dict(ov))[0] for lane, ov in engine_key}
            qids = [q.query_id for q in self.view.queries if q.split == split]
            self._matrices[engine_key][split] = CandidateMatrix(runs, self.view.qrels, qids)
        return self._matrices[engine_key][split]

    def latencies(self, engine_key: tuple, lanes: tuple[str, ...], query_ids: list[str]) -> np.ndarray:
        """Per-query latency (ms) of a fused config: the sum of its lanes' cached latencies."""
        ov = dict(engine_key)
        total = np.zeros(len(query_ids))
        for lane in lanes:
            lat = self.lane_run(lane, dict(ov[lane]))[1]
            total += np.array([lat.get(q, 0.0) for q in query_ids])
        return total
