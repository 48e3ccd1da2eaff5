"""The main job: index what is missing, run each lane through the candidate cache, fuse, evaluate.

``run_experiment`` is what ``workbench eval`` calls. Per dataset of the experiment:

1. load the built dataset (building it first when it is missing or stale);
2. for each lane some config uses: take its top-``depth`` candidates for *every* query
   of the dataset from the candidate cache, or run the lane (starting Postgres and
   indexing the dataset with the lane's embedder only then) and store them;
3. for each config: fuse the lanes' candidates in memory (:mod:`workbench.fusion`),
   evaluate on the experiment's splits (:mod:`workbench.evaluate`) against the qrels
   layer (the experiment's ``qrels``, or ``--qrels``: :mod:`workbench.judging.layers`;
   ``built`` reads no database, ``human`` and ``merged`` read the judgment store), and
   record latency.

The database and the models are touched only on a cache miss. Latency of a fused
config for one query is the sum of its lanes' latencies for that query (the lanes run
one after the other) plus the fusion time.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from workbench import catalog
from workbench.cache import CandidateCache
from workbench.experiment import Experiment, FusedConfig, LaneSpec
from workbench.run import Run
from workbench.settings import home_dir

BATCH = 256


@dataclass
class LaneResult:
    """A lane's candidates for every query of a dataset, with per-query latency (ms)."""

    run: Run
    latencies_ms: dict[str, float]
    cached: bool


@dataclass
class ConfigResult:
    """One config evaluated on one dataset."""

    dataset: str
    config: FusedConfig
    run: Run
    evaluation: Any  # workbench.evaluate.EvalResult
    latency_ms: dict[str, float]
    fusion_ms: float


@dataclass
class JobResult:
    """Everything ``workbench eval`` computed."""

    experiment: Experiment
    configs: list[ConfigResult] = field(default_factory=list)
    lanes: dict[tuple[str, str], LaneResult] = field(default_factory=dict)
    lane_latency: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    datasets: dict[str, catalog.Dataset] = field(default_factory=dict)
    cache_hits: int = 0
    cache_misses: int = 0
    #: Why the candidate cache could not be written (the results were kept in memory), or None.
    cache_write_error: str | None = None
    model_ids: dict[str, str] = field(default_factory=dict)
    #: The qrels layer used for every dataset (``built``, ``human`` or ``merged``).
    qrels_layer: str = "built"
    #: dataset → its qrels of that layer (:class:`workbench.judging.layers.LayerQrels`).
    qrels: dict[str, Any] = field(default_factory=dict)


class Engine:
    """Lazily started services and models for one job: Postgres, embedders, indexes.

    Nothing is started until a lane actually has to run (a cache miss).
    """

    def __init__(self, experiment: Experiment, home: Path, progress: bool = False,
                 log: Callable[[str], None] = lambda _m: None):
        self.exp = experiment
        self.home = home
        self.progress = progress
        self.log = log
        self._dsn: str | None = None
        self._reader: str | None = None
        self._embedders: dict[str, Any] = {}
        self._indexes: dict[tuple[str, str], Any] = {}
        self._os: tuple[Any, str] | None = None
        self._os_indexes: dict[tuple[str, str | None], Any] = {}
        self._lexicon: Any = None
        self.model_ids: dict[str, str] = {}

    def dsn(self) -> str:
        """The admin DSN (embedded server by default), checked and with the reader role in place."""
        if self._dsn is None:
            from workbench import pg

            self.log("connecting to Postgres (the embedded server unless WORKBENCH_PG_DSN is set)")
            self._dsn = pg.server_dsn(self.home)
            with pg.connect(self._dsn) as conn:
                pg.check_server(conn)
                pg.ensure_reader(conn)
            self._reader = pg.reader_dsn(self._dsn)
        return self._dsn

    def reader(self) -> str:
        """The read-only DSN every lane connects with."""
        self.dsn()
        return self._reader  # type: ignore[return-value]

    def embedder(self, name: str):
        """The cached embedder declared as ``[embedders.NAME]``."""
        if name not in self._embedders:
            from retrievers.embedders import make_embedder

            self.log(f"loading embedder {name}")
            self._embedders[name] = make_embedder(self.exp.embedders[name], log=self.log,
                                                  cache_path=self.home / "cache" / "embeddings.sqlite")
        return self._embedders[name]

    def model_id(self, name: str) -> str:
        """The model id of an embedder (loads it: the id depends on the resolved model)."""
        self.model_ids[name] = self.embedder(name).model_id
        return self.model_ids[name]

    def text_embedder_name(self) -> str:
        """The embedder whose index the text lanes (full text, trigram) read: the first declared."""
        if not self.exp.embedders:
            from workbench.errors import ConfigError

            raise ConfigError(f"{self.exp.path}: full-text and trigram lanes read the Postgres index, which needs "
                              "an [embedders.NAME] table; declare one (e.g. kind = \"sentence-transformers\")")
        return next(iter(self.exp.embedders))

    def index(self, ds: catalog.Dataset, embedder_name: str):
        """The dataset's Postgres index for this embedder, built when missing."""
        key = (ds.name, embedder_name)
        if key not in self._indexes:
            from workbench.indexer import index_dataset

            self.log(f"indexing {ds.name} with {embedder_name}")
            self._indexes[key] = index_dataset(self.dsn(), ds, self.embedder(embedder_name),
                                               progress=self.progress, **self.exp.index)
        return self._indexes[key]

    def opensearch(self) -> tuple[Any, str]:
        """``(client, url)`` of the checked cluster: ``WORKBENCH_OS_URL``, else the local node (started if needed)."""
        if self._os is None:
            from workbench import osearch

            url = osearch.cluster_url(self.home, start=True, log=self.log)
            es = osearch.client(url)
            osearch.check_cluster(es, url)
            self._os = (es, url)
        return self._os

    def lexicon(self):
        """The ms-dpd lexicon (lemma synonyms of the OpenSearch index), loaded once."""
        if self._lexicon is None:
            from workbench.loaders.dpd import load_dpd
            from workbench.settings import data_dir

            self.log("loading ms-dpd for the OpenSearch lemma synonyms")
            self._lexicon = load_dpd(data_dir(sources=("ms-dpd",)))
        return self._lexicon

    def os_index(self, ds: catalog.Dataset, embedder_name: str | None):
        """The dataset's OpenSearch index with this embedder's vectors (``None``: no vector field), built when missing."""
        key = (ds.name, embedder_name)
        if key not in self._os_indexes:
            from workbench.os_index import index_dataset

            es, url = self.opensearch()
            pali = any(t.language == "pi" for d in ds.documents for t in d.texts)
            self.log(f"OpenSearch index of {ds.name}" + (f" with {embedder_name}" if embedder_name else ""))
            index = {k: v for k, v in self.exp.index.items() if k in ("m", "ef_construction")}
            self._os_indexes[key] = index_dataset(
                es, url, ds, self.embedder(embedder_name) if embedder_name else None,
                lexicon=self.lexicon() if pali else None, progress=self.progress, **index)
        return self._os_indexes[key]

    def lane(self, ds: catalog.Dataset, spec: LaneSpec):
        """A live Retriever for this lane on this dataset."""
        if spec.kind == "reference":
            from retrievers.reference import ReferenceLane

            return ReferenceLane(spec.name, ds.documents)
        if spec.kind == "pgvector":
            from retrievers.pgvector import VectorLane

            info = self.index(ds, spec.params["embedder"])
            p = {k: v for k, v in spec.params.items() if k != "embedder"}
            return VectorLane(spec.name, self.reader(), info.table, self.embedder(spec.params["embedder"]), **p)
        if spec.kind == "opensearch":
            from retrievers.opensearch import OpenSearchLane

            emb = spec.params.get("embedder") or (next(iter(self.exp.embedders)) if self.exp.embedders else None)
            info = self.os_index(ds, emb)
            es, url = self.opensearch()
            p = {k: v for k, v in spec.params.items() if k not in ("embedder", "mode")}
            if "fuzziness" in p:
                p["fuzziness"] = str(p["fuzziness"])
            return OpenSearchLane(spec.name, es, info.name, spec.params["mode"], url=url,
                                  embedder=self.embedder(emb) if spec.params["mode"] == "semantic" else None, **p)
        info = self.index(ds, self.text_embedder_name())
        if spec.kind == "fulltext":
            from retrievers.fulltext import FullTextLane

            return FullTextLane(spec.name, self.reader(), info.table, **spec.params)
        if spec.kind == "trigram":
            from retrievers.trigram import TrigramLane

            return TrigramLane(spec.name, self.reader(), info.table, **spec.params)
        raise ValueError(f"unknown lane kind {spec.kind!r}")

    def cache_parts(self, ds: catalog.Dataset, spec: LaneSpec) -> dict[str, Any]:
        """Everything that shapes this lane's candidates (the cache key)."""
        outputs = ds.manifest["outputs"]
        parts: dict[str, Any] = {"dataset": ds.name, "documents": outputs["documents.jsonl"],
                                 "queries": outputs["queries.tsv"], "lane": spec.kind, "params": spec.params,
                                 "depth": self.exp.depth, "code": lane_code_fingerprint(spec.kind)}
        if spec.kind == "pgvector" or (spec.kind == "opensearch" and spec.params["mode"] == "semantic"):
            parts["model_id"] = self.model_id(spec.params["embedder"])
            parts["index"] = dict(self.exp.index)
        if spec.kind == "opensearch" and spec.params["mode"] == "lemma":
            parts["dpd"] = dpd_digest()
        return parts


#: Source files whose code shapes each lane kind's candidates (defaults included).
_LANE_CODE = {
    "pgvector": ("retrievers/pgvector.py", "workbench/pg.py", "workbench/indexer.py", "workbench/doctext.py"),
    "fulltext": ("retrievers/fulltext.py", "workbench/pg.py", "workbench/indexer.py", "workbench/doctext.py"),
    "trigram": ("retrievers/trigram.py", "workbench/pg.py", "workbench/indexer.py", "workbench/doctext.py"),
    "reference": ("retrievers/reference.py", "workbench/refs.py"),
    "opensearch": ("retrievers/opensearch.py", "workbench/os_index.py", "workbench/doctext.py", "workbench/refs.py",
                   "workbench/services/icu_plugin/WorkbenchIcuPlugin.java"),
}


def dpd_digest() -> str:
    """sha256 (16 hex) of the ms-dpd files behind the OpenSearch lemma synonyms (form index, headwords)."""
    from workbench.settings import data_dir

    return _dpd_digest(data_dir(sources=("ms-dpd",)))


@functools.lru_cache(maxsize=4)
def _dpd_digest(data: Path) -> str:
    import hashlib

    from workbench.loaders.dpd import dpd_files

    files = dpd_files(data)
    h = hashlib.sha256()
    for role in ("index", "pali"):
        h.update(files[role].read_bytes())
    return h.hexdigest()[:16]


def lane_code_fingerprint(kind: str) -> str:
    """sha256 (16 hex) of the source of the modules behind a lane kind, so a code change
    (a new default, a fixed query builder) never reads candidates made by the old code."""
    import hashlib

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for rel in _LANE_CODE.get(kind, ()):
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    return h.hexdigest()[:16]


def _run_lane(lane, queries, depth: int, progress: bool, label: str) -> tuple[Run, dict[str, float]]:
    from tqdm import tqdm

    rows: dict = {}
    lat: dict[str, float] = {}
    batches = [queries[i:i + BATCH] for i in range(0, len(queries), BATCH)]
    for batch in tqdm(batches, desc=label, unit="batch", disable=not progress, file=sys.stderr, leave=False):
        run = lane.search(batch, depth)
        rows.update({q: run[q] for q in run})
        lat.update(getattr(lane, "last_latencies_ms", {}) or {})
    return Run(rows, lane.name), lat


def lane_result(spec: LaneSpec, ds: catalog.Dataset, engine: Engine, cache: CandidateCache, depth: int,
                log: Callable[[str], None] = lambda _m: None) -> LaneResult:
    """One lane's top-``depth`` candidates for all queries of ``ds``: from the cache, or run live and cached.

    A cache that cannot be written (a full disk, a read-only home) does not cost the
    lane's work: the run is returned from memory and the cache says so once
    (:meth:`CandidateCache.put_best_effort`). A damaged entry is a miss.

    Raises:
        ConfigError, DataError, PgError: from the lane or its services (never from the cache).
    """
    parts = engine.cache_parts(ds, spec)
    got = cache.get(parts)
    if got is not None:
        return LaneResult(got[0], got[1], cached=True)
    log(f"{ds.name}: running lane {spec.name} on {len(ds.queries)} queries")
    lane = engine.lane(ds, spec)
    run, lat = _run_lane(lane, ds.queries, depth, engine.progress, f"{ds.name}/{spec.name}")
    cache.put_best_effort(parts, run, lat)
    return LaneResult(run, lat, cached=False)


def lane_candidates(exp: Experiment, ds: catalog.Dataset, engine: Engine, cache: CandidateCache,
                    log: Callable[[str], None] = lambda _m: None) -> dict[str, LaneResult]:
    """Every used lane's candidates for all queries of ``ds``, from the cache or live."""
    return {name: lane_result(exp.lanes[name], ds, engine, cache, exp.depth, log) for name in exp.lanes_used()}


def fused_run(cfg: FusedConfig, runs: dict[str, Run]) -> Run:
    """The run of ``cfg`` from its lanes' runs: :func:`workbench.fusion.fuse`, or for ``none`` the one
    lane's run with ``min_score`` and ``top_k`` applied."""
    from workbench.fusion import fuse

    if cfg.fusion == "none":
        run = runs[cfg.lanes[0]]
        if cfg.min_score is not None:
            run = Run({q: [h for h in hits if h.score >= cfg.min_score] for q, hits in run.items()}, cfg.name)
        return Run({q: hits[: cfg.top_k] for q, hits in run.items()}, cfg.name)
    return fuse({n: runs[n] for n in cfg.lanes}, cfg.fusion, **cfg.fusion_params())


def evaluate_config(exp: Experiment, ds: catalog.Dataset, cfg: FusedConfig, lanes: dict[str, LaneResult],
                    layer: Any = None) -> ConfigResult:
    """Fuse the lanes of ``cfg`` in memory and evaluate on the experiment's splits.

    Args:
        layer: the qrels to judge by (:class:`workbench.judging.layers.LayerQrels` of ``ds``);
            None: the built qrels. Under ``human`` only queries with a human grade are evaluated.
    """
    from workbench.evaluate import evaluate

    t0 = time.perf_counter()
    run = fused_run(cfg, {n: lanes[n].run for n in cfg.lanes})
    fusion_ms = (time.perf_counter() - t0) * 1000
    queries = [q for q in ds.queries if q.split in exp.splits]
    judged_by = ds.qrels
    if layer is not None:
        queries = layer.evaluated(queries)
        judged_by = layer.qrels
    wanted = {q.query_id for q in queries}
    qrels = [r for r in judged_by if r.query_id in wanted]
    evaluation = evaluate(run, qrels, queries, list(exp.measures))
    per_q = fusion_ms / max(len(ds.queries), 1)
    latency = {q.query_id: sum(lanes[n].latencies_ms.get(q.query_id, 0.0) for n in cfg.lanes) + per_q
               for q in queries}
    return ConfigResult(ds.name, cfg, run, evaluation, latency, fusion_ms)


def run_experiment(exp: Experiment, *, home: Path | None = None, progress: bool = False,
                   log: Callable[[str], None] = lambda _m: None, qrels: str | None = None,
                   store: Any = None) -> JobResult:
    """Run every config of ``exp`` on every dataset (see the module docstring).

    A candidate cache that cannot be written is said once through ``log`` and recorded
    in :attr:`JobResult.cache_write_error`; the results are complete all the same.

    Args:
        qrels: the qrels layer (overrides the experiment's ``qrels``); None: the experiment's.
        store: the judgment store for ``human`` / ``merged`` (default: the home's, opened
            only for those layers).

    Raises:
        ConfigError, DataError, StaleError, PgError: with messages naming the fix.
        JudgeError: ``human`` and no query of the experiment's splits has a human grade.
        StorageError: a dataset that had to be built cannot be written (a full disk,
            a read-only home); the message names the path and the fix.
    """
    from workbench.evaluate import latency_or_nan
    from workbench.judging import layers

    home = home or home_dir()
    layer = layers.check_layer(qrels, "--qrels") if qrels is not None else exp.qrels
    defs = catalog.load_definitions()
    engine = Engine(exp, home, progress, log)
    cache = CandidateCache(home / "cache" / "candidates", log=log)
    result = JobResult(exp, qrels_layer=layer)
    own_store = None
    try:
        for name in exp.datasets:
            ds = catalog.ensure(name, defs, home=home, log=log)
            result.datasets[name] = ds
            if layer != "built" and store is None and own_store is None:
                from workbench.judging.store import JudgmentStore

                own_store = JudgmentStore.open(home)
            lq = layers.load_layer(layer, ds, store=store or own_store)
            layers.evaluation_view(ds, lq, exp.splits)  # human: refuse a layer with nothing to evaluate
            result.qrels[name] = lq
            log(lq.describe([q for q in ds.queries if q.split in exp.splits]))
            lanes = lane_candidates(exp, ds, engine, cache, log)
            for lane_name, lr in lanes.items():
                result.lanes[(name, lane_name)] = lr
                result.lane_latency[(name, lane_name)] = latency_or_nan(list(lr.latencies_ms.values()))
            for cfg in exp.configs.values():
                result.configs.append(evaluate_config(exp, ds, cfg, lanes, lq))
    finally:
        if own_store is not None:
            own_store.close()
    result.cache_hits, result.cache_misses = cache.hits, cache.misses
    result.cache_write_error = str(cache.write_error) if cache.write_error else None
    result.model_ids = dict(engine.model_ids)
    return result

