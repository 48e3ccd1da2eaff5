"""The main job: index what is missing, run each lane through the candidate cache, fuse, evaluate.

``run_experiment`` is what ``workbench eval`` calls. Per dataset of the experiment:

1. load the built dataset (building it first when it is missing or stale);
2. for each lane some config uses: take its top-``depth`` candidates for *every* query
   of the dataset from the candidate cache, or run the lane (starting Postgres and
   indexing the dataset with the lane's embedder only then) and store them;
3. for each config: fuse the lanes' candidates in memory (:mod:`workbench.eval.fusion`),
   evaluate on the experiment's splits (:mod:`workbench.eval.evaluate`) against the qrels
   layer (the experiment's ``qrels``, or ``--qrels``: :mod:`workbench.judging.layers`;
   ``built`` reads no database, ``human`` and ``merged`` read the judgment store), and
   record latency.

The database and the models are touched only on a cache miss. Latency of a fused
config for one query is the sum of its lanes' latencies for that query (the lanes run
one after the other) plus the fusion time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from workbench.data import catalog
from workbench.experiment.cache import CandidateCache
from workbench.experiment.config import Experiment, FusedConfig, LaneSpec
from workbench.registry import reranker_kind, retriever_kind
from workbench.run import Run
from workbench.settings import home_dir

BATCH = 256


@dataclass
class LaneResult:
    """A lane's candidates for every query of a dataset, with per-query latency (ms).

    ``failures``: query_id → ``(error class, message)`` of the queries a live lane could not answer (they have
    an empty ranking and score 0); ``unmapped``: ids a live system returned that named no document;
    ``unscored``: hits it returned without a finite score (dropped, the query's other hits kept)."""

    run: Run
    latencies_ms: dict[str, float]
    cached: bool
    failures: dict[str, tuple[str, str]] = field(default_factory=dict)
    unmapped: int = 0
    unscored: int = 0
    #: the first ids that named no document (for messages), and query_id → ``(unmapped ids, ids read)``.
    unmapped_ids: list[str] = field(default_factory=list)
    unmapped_by_query: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: what a live lane said about the system beyond single queries (one line each; logged).
    notes: list[str] = field(default_factory=list)
    #: query_id → the live system's raw answer (JSON text, clipped), when a live lane ran (not from the cache).
    raw: dict[str, str] = field(default_factory=dict)

    def ids_read(self) -> int:
        """The ids a live lane read (mapped hits kept plus unmapped ones), over every query."""
        return sum(n for _u, n in self.unmapped_by_query.values())

    def unmapped_share(self) -> float:
        """The share of the ids a live lane read that named no document (0.0 when it read none)."""
        read = self.ids_read()
        return self.unmapped / read if read else 0.0

    def failure_classes(self) -> dict[str, int]:
        """Error class → number of failed queries, most first."""
        from collections import Counter

        return dict(Counter(cls for cls, _ in self.failures.values()).most_common())


@dataclass
class ConfigResult:
    """One config evaluated on one dataset."""

    dataset: str
    config: FusedConfig
    run: Run
    evaluation: Any  # workbench.eval.evaluate.EvalResult
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
    #: (dataset, lane) → the lane's exact twin's result (:func:`exact_twins`; ``ann_check``).
    exact: dict[tuple[str, str], LaneResult] = field(default_factory=dict)


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
        self._pair_scores: Any = None
        self.model_ids: dict[str, str] = {}

    def dsn(self) -> str:
        """The admin DSN (embedded server by default), checked and with the reader role in place."""
        if self._dsn is None:
            from workbench.engines import pg_client as pg

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
        """The cached embedder declared as ``[embedders.NAME]`` (its model loads on the first text that is
        not in the embedding cache: :class:`workbench.embedding.embedders.LazyEmbedder`)."""
        if name not in self._embedders:
            from workbench.embedding.embedders import make_embedder

            self._embedders[name] = make_embedder(self.exp.embedders[name], log=self.log,
                                                  cache_path=self.home / "cache" / "embeddings.sqlite")
        return self._embedders[name]

    def model_id(self, name: str) -> str:
        """The model id of an embedder (known without loading the model)."""
        self.model_ids[name] = self.embedder(name).model_id
        return self.model_ids[name]

    def first_embedder(self) -> str | None:
        """The first declared ``[embedders.NAME]`` (whose index the text lanes read), or None."""
        return next(iter(self.exp.embedders), None)

    def pair_scores(self):
        """The pair-score cache rerankers read and fill (:class:`workbench.reranking.scorers.PairScoreCache`), opened once."""
        if self._pair_scores is None:
            from workbench.reranking.scorers import PairScoreCache

            self._pair_scores = PairScoreCache(self.home / "cache" / "pair_scores.sqlite", log=self.log)
        return self._pair_scores

    def index_params(self) -> dict[str, Any]:
        """The experiment's ``[index]`` table as written."""
        return dict(self.exp.index)

    def pg_index(self, ds: catalog.Dataset, embedder_name: str | None):
        """The dataset's Postgres index for this embedder (None: the text lanes' one, the first declared),
        built when missing.

        Raises:
            ConfigError: ``None`` and the experiment declares no embedder.
        """
        if embedder_name is None:
            embedder_name = self.first_embedder()
            if embedder_name is None:
                from workbench.errors import ConfigError

                raise ConfigError(f"{self.exp.path}: full-text and trigram lanes read the Postgres index, which needs "
                                  "an [embedders.NAME] table; declare one (e.g. kind = \"sentence-transformers\")")
        key = (ds.name, embedder_name)
        if key not in self._indexes:
            from workbench.engines.pg_index import index_dataset

            self.log(f"Postgres index of {ds.name} with {embedder_name} (built only when missing)")
            self._indexes[key] = index_dataset(self.dsn(), ds, self.embedder(embedder_name),
                                               progress=self.progress, **self.exp.index)
        return self._indexes[key]

    def opensearch(self) -> tuple[Any, str]:
        """``(client, url)`` of the checked cluster: ``WORKBENCH_OS_URL``, else the local node (started if needed)."""
        if self._os is None:
            from workbench.engines import os_client as osearch

            url = osearch.cluster_url(self.home, start=True, log=self.log)
            es = osearch.client(url)
            osearch.check_cluster(es, url)
            self._os = (es, url)
        return self._os

    def lexicon(self):
        """The ms-dpd lexicon (the OpenSearch lemma synonyms, the dictionary and pali-lemma lanes), loaded once."""
        if self._lexicon is None:
            from workbench.data.loaders.dpd import load_dpd
            from workbench.settings import data_dir

            self.log("loading ms-dpd (the DPD: forms, lemmas, meanings, compound constructions)")
            self._lexicon = load_dpd(data_dir(sources=("ms-dpd",)))
        return self._lexicon

    def os_index(self, ds: catalog.Dataset, embedder_name: str | None):
        """The dataset's OpenSearch index with this embedder's vectors (``None``: no vector field), built when missing."""
        key = (ds.name, embedder_name)
        if key not in self._os_indexes:
            from workbench.engines.os_index import index_dataset

            es, url = self.opensearch()
            pali = any(t.language == "pi" for d in ds.documents for t in d.texts)
            self.log(f"OpenSearch index of {ds.name}" + (f" with {embedder_name}" if embedder_name else ""))
            index = {k: v for k, v in self.exp.index.items() if k in ("m", "ef_construction")}
            self._os_indexes[key] = index_dataset(
                es, url, ds, self.embedder(embedder_name) if embedder_name else None,
                lexicon=self.lexicon() if pali else None, progress=self.progress, **index)
        return self._os_indexes[key]

    def lane(self, ds: catalog.Dataset, spec: LaneSpec):
        """A live Retriever for this lane on this dataset, opened by its kind (:mod:`workbench.registry`)."""
        return retriever_kind(spec.kind).open(spec.name, spec.parsed(), ds, self)

    def lane_queries(self, ds: catalog.Dataset, spec: LaneSpec) -> list:
        """The queries a lane is run on: every query of ``ds``, or for a remote lane (a kind with
        :attr:`~workbench.registry.RetrieverKind.remote`: each query is a request to someone's system) only those
        of the experiment's splits, which then key its cache (:meth:`cache_parts`)."""
        if retriever_kind(spec.kind).remote:
            return [q for q in ds.queries if q.split in self.exp.splits]
        return list(ds.queries)

    def cache_parts(self, ds: catalog.Dataset, spec: LaneSpec) -> dict[str, Any]:
        """Everything that shapes this lane's candidates (the cache key): the dataset's hashes, the kind, its
        parameters with defaults filled in (:meth:`LaneSpec.canonical`), the depth, the kind's code fingerprint and what the
        kind adds (:meth:`workbench.registry.RetrieverKind.cache_extra`: a model id, a lexicon digest), and the query
        normaliser's fingerprint (:func:`workbench.text.query.fingerprint`)."""
        from workbench.text.query import fingerprint as query_fingerprint

        kind = retriever_kind(spec.kind)
        outputs = ds.manifest["outputs"]
        parts: dict[str, Any] = {"dataset": ds.name, "documents": outputs["documents.jsonl"],
                                 "queries": outputs["queries.tsv"], "lane": spec.kind, "params": spec.canonical(),
                                 "depth": self.exp.depth, "code": kind.code_fingerprint(),
                                 "query_normaliser": query_fingerprint()}
        if kind.remote:  # its candidates cover only these splits' queries
            parts["splits"] = sorted(self.exp.splits)
        parts.update(kind.cache_extra(spec.parsed(), ds, self))
        return parts

    def check_rerankers(self, datasets, names=None) -> None:
        """Check rerankers on every dataset (:meth:`workbench.registry.RerankerKind.check`: model folders,
        URLs), before any lane runs, so a missing model fails first, not after an hour. ``eval``,
        ``search``, ``gate`` and ``tune`` call it.

        Args:
            datasets: dataset names.
            names: the ``[rerankers.NAME]`` to check; default every reranker some config of the
                experiment uses.

        Raises:
            ConfigError: naming the reranker, the dataset and the fix.
        """
        if names is None:
            names = {c.rerank.reranker for c in self.exp.configs.values() if c.rerank is not None}
        for name in sorted(set(names)):
            spec = self.exp.rerankers[name]
            for dataset in datasets:
                reranker_kind(spec.kind).check(name, spec.parsed(), dataset, self)

    def reranker(self, ds: catalog.Dataset, name: str, runs: dict[str, Run]):
        """A live Reranker ``[rerankers.NAME]`` on this dataset; ``runs``: the lanes' runs it may read."""
        spec = self.exp.rerankers[name]
        kind = reranker_kind(spec.kind)
        parsed = spec.parsed()
        return kind.open(name, parsed, ds, self, {ln: runs[ln] for ln in kind.lanes(parsed)})


def _unmapped_fix(spec: LaneSpec) -> str:
    """What to fix when a lane returns ids that name no document: a live lane's id rule or crosswalk, a team
    table's id column, a team index's id field."""
    params = spec.params
    if "table" in params:
        return ("the team table's id column (table.id) must hold the dataset's doc ids as text: bring the corpus as a "
                "files dataset exported from that table")
    if "index" in params and spec.kind == "opensearch":
        return ("the team index's id field (index.id_field) must hold the dataset's doc ids: bring the corpus as a "
                "files dataset exported from that index")
    return "fix the lane's id, id_rewrite or id_map (a crosswalk: id_map = \"table:FILE\")"


def _run_lane(lane, queries, depth: int, progress: bool, label: str) -> LaneResult:
    """Run ``lane`` over ``queries`` in batches of :data:`BATCH`: its run and per-query latency, and for a live
    lane what it reports per batch (``last_failures``, ``last_unmapped``, ``last_unscored``, ``last_raw``)."""
    from workbench._infra.progress import bar as progress_bar
    from workbench.text.query import clean_queries

    result = LaneResult(Run({}, lane.name), {}, cached=False)
    rows: dict = {}
    queries = clean_queries(list(queries))
    with progress_bar(len(queries), label, "query", enabled=progress, leave=False) as bar:
        for i in range(0, len(queries), BATCH):
            batch = queries[i:i + BATCH]
            run = lane.search(batch, depth)
            rows.update({q: run[q] for q in run})
            result.latencies_ms.update(getattr(lane, "last_latencies_ms", {}) or {})
            result.failures.update(getattr(lane, "last_failures", {}) or {})
            result.unmapped += int(getattr(lane, "last_unmapped", 0) or 0)
            result.unmapped_by_query.update(getattr(lane, "last_unmapped_by_query", {}) or {})
            result.unmapped_ids.extend(i for i in getattr(lane, "last_unmapped_ids", ()) or ()
                                       if i not in result.unmapped_ids and len(result.unmapped_ids) < 5)
            result.unscored += int(getattr(lane, "last_unscored", 0) or 0)
            result.raw.update(getattr(lane, "last_raw", {}) or {})
            result.notes.extend(n for n in getattr(lane, "last_notes", ()) or () if n not in result.notes)
            bar.update(len(batch))
    result.run = Run(rows, lane.name)
    return result


def filter_hits(run: Run, queries, index) -> tuple[Run, int]:
    """``run`` with each filtered query's hits restricted to the documents its filter admits
    (:class:`workbench.io.facets.FacetIndex`), order kept, and how many hits were removed. Queries without a
    filter keep their hits."""
    rows, removed = {}, 0
    by_id = {q.query_id: q for q in queries}
    for qid in run:
        hits = run[qid]
        q = by_id.get(qid)
        allowed = index.admitted(q.filter) if q is not None and q.filter else None
        if allowed is not None:
            kept = tuple(h for h in hits if h.doc_id in allowed)
            removed += len(hits) - len(kept)
            hits = kept
        rows[qid] = hits
    return Run(rows, run.name), removed


def _apply_filters(result: LaneResult, spec: LaneSpec, ds: catalog.Dataset, queries) -> None:
    """Hold a lane's run to its queries' filters (:func:`filter_hits`); a lane that cannot filter natively is
    filtered after the fact, and a note says so (it may return fewer than k for a filtered query); a native lane
    that returned hits its filter excludes gets a note too (a live system ignoring the filter)."""
    if not any(q.filter for q in queries):
        return
    result.run, removed = filter_hits(result.run, queries, ds.facet_index)
    note = _after_the_fact(spec, queries)
    if note:
        result.notes.append(note)
    elif removed:
        result.notes.append(f"returned {removed} hit(s) that their queries' filters exclude (removed); the system "
                            "does not apply the filter it is sent")


def _after_the_fact(spec: LaneSpec, queries) -> str | None:
    """The note for a lane that cannot apply its queries' filters itself, or None (it can, or none has one)."""
    n = sum(1 for q in queries if q.filter)
    if not n or retriever_kind(spec.kind).filters_natively(spec.parsed()):
        return None
    return (f"kind {spec.kind} cannot apply a filter itself: the hits of its {n} filtered queries are filtered "
            "after the fact, so such a query may get fewer hits than the depth")


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
        cached = LaneResult(got[0], got[1], cached=True)
        note = _after_the_fact(spec, engine.lane_queries(ds, spec))
        if note:
            cached.notes.append(note)
        return cached
    queries = engine.lane_queries(ds, spec)
    log(f"{ds.name}: running lane {spec.name} on {len(queries)} queries")
    lane = engine.lane(ds, spec)
    result = _run_lane(lane, queries, depth, engine.progress, f"{ds.name}/{spec.name}")
    _apply_filters(result, spec, ds, queries)
    failures = result.failures
    for note in result.notes:
        log(f"{ds.name}/{spec.name}: {note}")
    if result.unmapped:
        share, most = result.unmapped_share(), getattr(getattr(lane, "params", None), "max_unmapped", 1.0)
        first = ", ".join(repr(i) for i in result.unmapped_ids)
        if share > most:  # a wrong crosswalk is not a bad system: nothing scored, nothing cached
            from workbench.errors import ConfigError

            raise ConfigError(f"lanes.{spec.name}: {share:.1%} of the ids it returned on {ds.name} "
                              f"({result.unmapped:,} of {result.ids_read():,}) "
                              f"name no document (first: {first}), above max_unmapped = {most:g}; {_unmapped_fix(spec)}; "
                              "nothing was cached")
        log(f"{ds.name}/{spec.name}: {result.unmapped} returned id(s) ({share:.1%}) named no document of {ds.name} "
            f"and were dropped (first: {first}); {_unmapped_fix(spec)}")
    if result.unscored:
        log(f"{ds.name}/{spec.name}: {result.unscored} returned hit(s) had no finite score and were dropped (the "
            "other hits of their queries kept); check the lane's score expression and the raw answers")
    if failures:  # nothing half-cached: a later run asks the live system again
        classes = ", ".join(f"{c} {n}" for c, n in result.failure_classes().items())
        first = next(iter(failures.values()))[1]
        if len(failures) >= sum(1 for q in queries if q.text.strip()):  # nothing could run: not a measurement
            from workbench.errors import RemoteError

            raise RemoteError(f"lanes.{spec.name}: every query of {ds.name} failed ({classes}); first: {first}; "
                              "check that the endpoint is up and the lane's url, headers and key variable",
                              next(iter(result.failure_classes())))
        log(f"{ds.name}/{spec.name}: {len(failures)} of {len(queries)} queries failed ({classes}); they score 0 "
            f"and stay in every mean; the run is not cached. First: {first}")
        return result
    asked = [q for q in queries if q.text.strip()]
    if getattr(lane, "last_raw", None) is not None and asked and not any(result.run.get_hits(q.query_id)
                                                                         for q in asked):
        # a live system that answers nothing to anything is misread, not measured: cached, its zeros would stand
        # for the system under its snapshot label
        from workbench.errors import RemoteError

        raise RemoteError(f"lanes.{spec.name}: the endpoint answered every query of {ds.name} with no hits "
                          f"({len(asked)} queries); check the lane's url, arguments and hits path against one "
                          "answer (the dashboard keeps raw answers); nothing was cached", "empty")
    cache.put_best_effort(parts, result.run, result.latencies_ms)
    return result


def lane_candidates(exp: Experiment, ds: catalog.Dataset, engine: Engine, cache: CandidateCache,
                    log: Callable[[str], None] = lambda _m: None) -> dict[str, LaneResult]:
    """Every used lane's candidates for all queries of ``ds``, from the cache or live."""
    return {name: lane_result(exp.lanes[name], ds, engine, cache, exp.depth, log) for name in exp.lanes_used()}


def exact_twins(exp: Experiment, ds: catalog.Dataset, engine: Engine, cache: CandidateCache,
                log: Callable[[str], None] = lambda _m: None) -> dict[str, LaneResult]:
    """Lane name → the result of its exact twin (:meth:`workbench.registry.RetrieverKind.exact_twin`: the same
    lane scanning every row, named ``<lane>~exact``, cached like any lane) for every used approximate lane, when
    the experiment's ``ann_check`` asks for it on ``ds`` (None: only if a query of ``ds`` carries a filter).
    Empty when it does not."""
    check = exp.ann_check if exp.ann_check is not None else any(q.filter for q in ds.queries)
    if not check:
        return {}
    out = {}
    for name in exp.lanes_used():
        spec = exp.lanes[name]
        twin = retriever_kind(spec.kind).exact_twin(spec.parsed())
        if twin is not None:
            out[name] = lane_result(LaneSpec(f"{name}~exact", spec.kind, {**spec.params, **twin}), ds, engine, cache,
                                    exp.depth, log)
    return out


def fused_run(cfg: FusedConfig, runs: dict[str, Run]) -> Run:
    """The fused run of ``cfg`` from its lanes' runs (:func:`workbench.eval.fusion.fuse`; ``none`` included),
    before any rerank stage."""
    from workbench.eval.fusion import fuse_spec

    return fuse_spec(runs, cfg, cfg.name)


def config_run(cfg: FusedConfig, runs: dict[str, Run], ds: catalog.Dataset, engine: Engine,
               queries=None) -> Run:
    """The run of ``cfg``: fused, then its rerank stage when it has one (:mod:`workbench.reranking.stage`).

    Args:
        runs: lane name → run, holding the config's lanes and those its reranker reads.
        queries: the queries to rerank, and of the returned run when the config reranks (default: all of
            ``ds``); a reranker costs model time per query, so evaluations pass only the splits they read.
    """
    if cfg.rerank is None:
        return fused_run(cfg, runs)
    from dataclasses import replace

    from workbench.reranking.stage import PROGRESS_MIN_QUERIES, apply_rerank

    # fused as deep as the reranker reads (top_k applies to the reranked list: "rerank 20, show 6")
    run = fused_run(replace(cfg, top_k=max(cfg.top_k, cfg.rerank.depth)), runs)
    reranker = engine.reranker(ds, cfg.rerank.reranker, runs)
    docs = {d.doc_id: d for d in ds.documents}
    queries = list(queries if queries is not None else ds.queries)
    run = Run({q.query_id: run.get_hits(q.query_id) for q in queries}, run.name)
    # no bar in a log (stderr is not a terminal): a line before and after, so a long model pass is not silent
    say = not engine.progress and len(queries) >= PROGRESS_MIN_QUERIES
    if say:
        engine.log(f"{cfg.name} on {ds.name}: reranking the top {cfg.rerank.depth} of {len(queries)} queries with "
                   f"{cfg.rerank.reranker} (pairs not in the cache go to the model: minutes on a CPU)")
    t0 = time.perf_counter()
    rescored = reranker.rerank(queries, run, docs, cfg.rerank.depth)
    if say:
        engine.log(f"{cfg.name} on {ds.name}: reranked in {time.perf_counter() - t0:.0f} s")
    return apply_rerank(run, rescored, cfg.rerank.depth, cfg.name, cfg.rerank.weight).top(cfg.top_k)


def evaluate_config(exp: Experiment, ds: catalog.Dataset, cfg: FusedConfig, lanes: dict[str, LaneResult],
                    layer: Any = None, engine: Engine | None = None) -> ConfigResult:
    """Fuse the lanes of ``cfg`` in memory (then rerank, for a config with a rerank stage) and evaluate
    on the experiment's splits.

    Args:
        layer: the qrels to judge by (:class:`workbench.judging.layers.LayerQrels` of ``ds``);
            None: the built qrels. Under ``human`` only queries with a human grade are evaluated.
        engine: the job's engine (a reranker opens through it); None: a new one on the default home.
    """
    from workbench.eval.evaluate import evaluate
    from workbench.eval.spans import span_matching

    if cfg.rerank is not None and engine is None:
        engine = Engine(exp, home_dir())
    queries = [q for q in ds.queries if q.split in exp.splits]
    t0 = time.perf_counter()
    # with a rerank stage, engine is set above
    run = config_run(cfg, {n: lr.run for n, lr in lanes.items()}, ds, cast(Engine, engine), queries) if cfg.rerank is not None \
        else fused_run(cfg, {n: lanes[n].run for n in cfg.lanes})
    fusion_ms = (time.perf_counter() - t0) * 1000
    judged_by = ds.qrels
    if layer is not None:
        queries = layer.evaluated(queries)
        judged_by = layer.qrels
    wanted = {q.query_id for q in queries}
    qrels = [r for r in judged_by if r.query_id in wanted]
    evaluation = evaluate(run, qrels, queries, list(exp.measures),
                          spans=span_matching(ds.documents, cfg.window_ms, exp.time_tolerance_ms))
    per_q = fusion_ms / max(len(queries) if cfg.rerank is not None else len(ds.queries), 1)
    used = {*cfg.lanes, *exp.reranker_lanes(cfg)}
    latency = {q.query_id: sum(lanes[n].latencies_ms.get(q.query_id, 0.0) for n in used) + per_q for q in queries}
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
    from workbench.eval.evaluate import latency_or_nan
    from workbench.judging import layers

    home = home or home_dir()
    layer = layers.check_layer(qrels, "--qrels") if qrels is not None else exp.qrels
    defs = catalog.load_definitions()
    engine = Engine(exp, home, progress, log)
    engine.check_rerankers(exp.datasets)
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
            for lane_name, lr in exact_twins(exp, ds, engine, cache, log).items():
                result.exact[(name, lane_name)] = lr
            from workbench.data.sources.files import SPAN_PARENT

            widths = sorted(({"time_tolerance_ms"} if exp.time_tolerance_ms else set())
                            | {f"configs.{c.name}.window_ms" for c in exp.configs.values() if c.window_ms})
            if widths and not any(d.metadata and SPAN_PARENT in d.metadata for d in ds.documents):
                log(f"{name}: {', '.join(widths)} asks for time-span matching, but no document of {name} has a span "
                    "(declare span = { parent, start, end } in its files section); ids match exactly")
            for cfg in exp.configs.values():
                result.configs.append(evaluate_config(exp, ds, cfg, lanes, lq, engine))
    finally:
        if own_store is not None:
            own_store.close()
    result.cache_hits, result.cache_misses = cache.hits, cache.misses
    result.cache_write_error = str(cache.write_error) if cache.write_error else None
    result.model_ids = dict(engine.model_ids)
    return result

