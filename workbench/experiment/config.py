"""Experiment configs (TOML in ``experiments/``), validated before any retrieval runs.

An experiment names the datasets to evaluate on, the measures, the embedders, the
lanes (each an engine with its parameters) and the *configs*: which lanes are fused and
how. Everything is checked at load: an unknown lane kind or parameter, a config using a
lane that does not exist, weights or depths that do not match the config's lanes, a
bad measure name, an unknown dataset, embedder or split all raise
:class:`~workbench.errors.ConfigError` naming the key, before any database is touched.

Layout::

    name = "seeds"
    datasets = ["gita", "bilara-passages"]
    measures = ["R@10", "nDCG@10"]        # optional; default workbench.eval.evaluate.DEFAULT_MEASURES
    depth = 100                           # candidates per lane kept in the cache
    splits = ["train", "dev", "test"]     # optional; queries of these splits are evaluated
    qrels = "built"                       # optional; built | human | merged (workbench.judging.layers)
    ann_check = true                      # optional; HNSW lanes against an exact scan (workbench.eval.ann);
                                          # default: on datasets whose queries carry filters
    time_tolerance_ms = 2000              # optional; time-span documents: a judged span counts within ±2 s of
                                          # itself (workbench.eval.spans); default 0

    [index]                               # optional HNSW build parameters
    m = 16
    ef_construction = 64

    [embedders.minilm]
    kind = "sentence-transformers"
    model = "all-MiniLM-L6-v2"

    [lanes.vector]
    kind = "pgvector"
    embedder = "minilm"
    ef_search = 100

    [configs.hybrid]
    lanes = ["vector", "fts_simple"]
    fusion = "rrf"                        # rrf | weighted | combsum | combmnz | none (one lane);
                                          # ranx: isr, log_isr, bordafuse, w_bordafuse, combmax, combmin, combmed, combanz
    k = 60
    top_k = 100
    # pin_lane = "ref"                    # optional: a reference lane whose exact answers come first (fusion.pin)
    # lane_min_score = { vector = 0.3 }   # optional: a lane's hits below its own score are not fused
    # window_ms = 15000                   # optional: time-span documents: a hit stands for its span ± 15 s

    [rerankers.by_fts]                    # optional: a stage after fusion (workbench.reranking.stage)
    kind = "lane"
    lane = "fts_simple"

    [configs.hybrid_reranked]
    lanes = ["vector", "fts_simple"]
    rerank = { reranker = "by_fts", depth = 20 }

Lane, reranker and embedder parameters are declared once, by their kind
(:mod:`workbench.registry`, pydantic models): a value out of range (``ef_search =
5000``), an unknown parameter or a wrong type fails here with the file and the key.
Names of lanes, configs, embedders and rerankers must be usable in MLflow parameter
keys (:func:`check_name`), so a run is never rejected by the tracker after it ran.
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from workbench.errors import ConfigError
from workbench.eval.fusion import ALL_METHODS, METHOD_PARAMS, NORMALISATIONS, FusionSpec, readers
from workbench.io.toml import kind_hint, read_toml
from workbench.registry import EMBEDDER_PARAM, Declaration, Params, reranker_kind, retriever_kind
from workbench.types import SPLITS


def _int_at_least(lo):
    return lambda v: "" if isinstance(v, int) and not isinstance(v, bool) and v >= lo else f"must be an integer >= {lo}"


#: Characters MLflow accepts in a parameter key (``mlflow.utils.validation.validate_param_and_metric_name``,
#: POSIX: slashes, word characters, periods, dashes, colons and spaces); names of lanes, configs,
#: embedders and rerankers go into such keys (``lane.<name>.kind``, ``weights.<name>``).
NAME_RE = re.compile(r"[/\w.\- :]+")
#: Longest name: MLflow keys hold 250 characters, and a name is one part of a key (``lane.<name>.max_query_chars``).
MAX_NAME = 100


#: The most rows a config returns (OpenSearch's index.max_result_window; an exported SQL LIMIT stays a bigint).
TOP_K_MAX = 10_000


def check_name(name: Any) -> str:
    """What is wrong with ``name`` as a lane, config, embedder or reranker name, or ``""``.

    The rule is MLflow's for parameter keys (:data:`NAME_RE`, and a key must not normalise
    to another path: no ``//``, ``/./`` or ``/../``), applied to the keys the name becomes
    part of (``lane.<name>.kind``), and at most :data:`MAX_NAME` characters;
    ``tests/integration/registry/test_registry.py`` checks it against MLflow's own validator.
    """
    if not isinstance(name, str) or not name.strip():
        return "must be a non-empty name"
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long; use at most {MAX_NAME} (MLflow keys hold 250)"
    key = f"lane.{name}.kind"
    if not NAME_RE.fullmatch(name) or posixpath.normpath(key) != key:
        return ("is not usable as an MLflow parameter key; use letters, digits, _ - . : space or / (not //, "
                "/./ or /../)")
    return ""


class IndexSpec(Params):
    """The experiment's ``[index]`` table: HNSW build parameters of the PostgreSQL and OpenSearch indexes.

    Limits are pgvector's (``m`` 2..100, ``ef_construction`` 4..1000 and at least ``2 * m``:
    pgvector ``src/hnsw.c``)."""

    m: int = Field(16, ge=2, le=100, description="HNSW neighbours per node")
    ef_construction: int = Field(64, ge=4, le=1000, description="HNSW build candidate list (>= 2 m)")
    halfvec: bool = Field(False, description="store vectors as halfvec (float16) in PostgreSQL")

    @model_validator(mode="after")
    def _ef_at_least_2m(self) -> IndexSpec:
        if self.ef_construction < 2 * self.m:
            raise ValueError(f"ef_construction ({self.ef_construction}) must be at least 2 * m ({2 * self.m})")
        return self


class _IndexDecl(Declaration):
    kind = "index"
    Params = IndexSpec


FUSIONS = ALL_METHODS


@dataclass(frozen=True)
class LaneSpec:
    """A lane: its name, kind and engine parameters (``params`` excludes ``kind``; as written, without
    defaults; :meth:`canonical` fills them in)."""

    name: str
    kind: str
    params: dict[str, Any]

    def parsed(self) -> Any:
        """The parameters validated by the kind's declaration, defaults filled in (a pydantic model).

        Raises:
            ConfigError: the kind is unknown or a parameter invalid (already checked at load).
        """
        return retriever_kind(self.kind).parse(self.params, f"lanes.{self.name}")

    def canonical(self) -> dict[str, Any]:
        """Every parameter with its default filled in (JSON values, declaration order): what keys the
        candidate cache and is logged, so a lane written with or without its defaults is the same lane."""
        return self.parsed().model_dump(mode="json")


@dataclass(frozen=True)
class RerankerSpec:
    """A reranker: ``[rerankers.NAME]`` with its kind and parameters (``params`` excludes ``kind``)."""

    name: str
    kind: str
    params: dict[str, Any]

    def parsed(self) -> Any:
        """The parameters validated by the kind's declaration (see :meth:`LaneSpec.parsed`)."""
        return reranker_kind(self.kind).parse(self.params, f"rerankers.{self.name}")


@dataclass(frozen=True)
class RerankStage:
    """A config's stage after fusion: ``reranker`` (a ``[rerankers.NAME]``) rescoring the top ``depth``;
    ``weight`` is the reranker's share when its score is interpolated with the fused one (1.0: the
    reranker's order alone; :func:`workbench.reranking.stage.apply_rerank`)."""

    reranker: str
    depth: int = 20
    weight: float = 1.0


@dataclass(frozen=True)
class FusedConfig(FusionSpec):
    """One evaluated configuration ``[configs.NAME]``: its :class:`~workbench.eval.fusion.FusionSpec` (lanes and
    fusion parameters, defaults there), its name and its rerank stage."""

    name: str = ""
    #: The rerank stage after fusion, or None (:mod:`workbench.reranking.stage`).
    rerank: RerankStage | None = None
    #: Time-span documents: each hit stands for ``[start - window_ms, end + window_ms]`` of its parent when it is
    #: matched against the judged spans (:mod:`workbench.eval.spans`); 0: its own span. The run is not changed;
    #: ``search`` and ``serve`` add each hit's ``window`` (:class:`workbench.eval.spans.Transcript`).
    window_ms: int = 0

    def flat(self) -> dict[str, Any]:
        """Flattened parameters for tracking (``weights.vector`` = 0.3, …)."""
        out: dict[str, Any] = {"lanes": ",".join(self.lanes), "fusion": self.method, "top_k": self.top_k}
        if self.method == "rrf":
            out["k"] = self.k
        if self.method == "weighted":
            out["norm"] = self.norm
        for key, val in (("weights", self.weights), ("depth", self.depth)):
            if isinstance(val, dict):
                out.update({f"{key}.{k}": v for k, v in sorted(val.items())})
            elif val is not None:
                out[key] = val
        if self.min_score is not None:
            out["min_score"] = self.min_score
        for ln, floor in sorted((self.lane_min_score or {}).items()):
            out[f"lane_min_score.{ln}"] = floor
        if self.tiebreak_lane:
            out["tiebreak_lane"] = self.tiebreak_lane
        if self.pin_lane:
            out["pin_lane"] = self.pin_lane
        if self.rerank is not None:
            out["rerank.reranker"], out["rerank.depth"] = self.rerank.reranker, self.rerank.depth
            if self.rerank.weight != 1.0:
                out["rerank.weight"] = self.rerank.weight
        if self.window_ms:
            out["window_ms"] = self.window_ms
        return out


@dataclass(frozen=True)
class Experiment:
    """A validated experiment (see the module docstring)."""

    path: Path
    name: str
    datasets: tuple[str, ...]
    measures: tuple[str, ...]
    depth: int
    splits: tuple[str, ...]
    index: dict[str, Any]
    embedders: dict[str, dict[str, Any]]
    lanes: dict[str, LaneSpec]
    configs: dict[str, FusedConfig]
    raw: dict[str, Any] = field(repr=False)
    #: The qrels layer evaluations use unless a command's ``--qrels`` says otherwise
    #: (:data:`workbench.judging.layers.LAYERS`).
    qrels: str = "built"
    #: ``[rerankers.NAME]`` tables.
    rerankers: dict[str, RerankerSpec] = field(default_factory=dict)
    #: ``ann_check``: measure each approximate lane (HNSW) against its exact twin on a dataset
    #: (:mod:`workbench.eval.ann`): True on every dataset, False never, None only where queries carry filters.
    ann_check: bool | None = None
    #: ``time_tolerance_ms``: on time-span documents a judged span counts within ``[start - Δ, end + Δ]``
    #: (:mod:`workbench.eval.spans`); 0: exactly.
    time_tolerance_ms: int = 0

    def reranker_lanes(self, config: FusedConfig) -> tuple[str, ...]:
        """The lanes the rerank stage of ``config`` reads (empty without a rerank stage)."""
        if config.rerank is None:
            return ()
        spec = self.rerankers[config.rerank.reranker]
        return tuple(reranker_kind(spec.kind).lanes(spec.parsed()))

    def lanes_used(self) -> list[str]:
        """Lanes that at least one config uses (fused, or read by its reranker), in declaration order."""
        used = {lane for c in self.configs.values() for lane in (*c.lanes, *self.reranker_lanes(c))}
        return [n for n in self.lanes if n in used]


def _err(path: Path, where: str, msg: str) -> ConfigError:
    return ConfigError(f"{path}: {where} {msg}")


def load_experiment(path: Path, *, known_datasets: set[str] | None = None) -> Experiment:
    """Read and validate an experiment TOML.

    Args:
        path: the file.
        known_datasets: dataset names that exist (default: those of ``datasets/datasets.toml``).

    Raises:
        ConfigError: the file is missing or invalid; the message names the key and the fix.
    """
    from workbench.eval.evaluate import DEFAULT_MEASURES, parse_measures

    path = Path(path)
    raw = read_toml(path, "experiment", "see experiments/ for examples")
    allowed_top = {"name", "description", "datasets", "measures", "depth", "splits", "index", "embedders", "lanes",
                   "configs", "qrels", "rerankers", "ann_check", "time_tolerance_ms"}
    extra = set(raw) - allowed_top
    if extra:
        raise _err(path, "top level", f"has unknown key(s) {sorted(extra)}; allowed: {sorted(allowed_top)}"
                   + kind_hint(raw, "experiment"))
    for key in ("index", "embedders", "lanes", "configs", "rerankers"):
        if key in raw and not isinstance(raw[key], dict):
            raise _err(path, key, f"must be a table ([{key}] or [{key}.NAME])")
    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise _err(path, "name", "must be a non-empty string")
    if not isinstance(raw.get("description", ""), str):
        raise _err(path, "description", "must be a string")
    if known_datasets is None:
        from workbench.data.catalog import load_definitions

        known_datasets = set(load_definitions().datasets)
    datasets = raw.get("datasets")
    if not isinstance(datasets, list) or not datasets or not all(isinstance(d, str) for d in datasets):
        raise _err(path, "datasets", "must be a non-empty list of dataset names")
    if len(set(datasets)) != len(datasets):
        raise _err(path, "datasets", "lists a dataset twice")
    unknown = [d for d in datasets if d not in known_datasets]
    if unknown:
        raise _err(path, "datasets", f"names unknown dataset(s) {unknown}; known: {', '.join(sorted(known_datasets))}")
    measures = raw.get("measures", list(DEFAULT_MEASURES))
    if not isinstance(measures, list) or not measures:
        raise _err(path, "measures", "must be a non-empty list such as [\"R@10\", \"nDCG@10\"]")
    try:
        parse_measures(measures)
    except ConfigError as exc:
        raise _err(path, "measures", str(exc)) from None
    depth = raw.get("depth", 100)
    if _int_at_least(1)(depth):
        raise _err(path, "depth", "must be an integer >= 1 (candidates per lane)")
    splits = raw.get("splits", list(SPLITS))
    if not isinstance(splits, list) or not splits or any(s not in SPLITS for s in splits):
        raise _err(path, "splits", f"must be a non-empty list of {', '.join(SPLITS)}")
    from workbench.judging.layers import DEFAULT_LAYER, check_layer

    qrels = check_layer(raw.get("qrels", DEFAULT_LAYER), f"{path}: qrels")
    index = raw.get("index", {})
    _IndexDecl.parse(index, f"{path}: index")
    embedders = raw.get("embedders", {})
    for ename, spec in embedders.items():
        _check_name(path, f"embedders.{ename}", ename)
        if not isinstance(spec, dict):
            raise _err(path, f"embedders.{ename}", "must be a table with a kind")
        from workbench.embedding.embedders import EMBEDDER_PARAMS, EmbedderKinds

        if spec.get("kind") not in EMBEDDER_PARAMS:
            raise _err(path, f"embedders.{ename}.kind", f"must be one of {', '.join(EMBEDDER_PARAMS)}, "
                       f"got {spec.get('kind')!r}")
        EmbedderKinds.parse(spec, f"{path}: embedders.{ename}")
    lanes: dict[str, LaneSpec] = {}
    for lname, spec in raw.get("lanes", {}).items():
        lanes[lname] = lane_spec(path, lname, spec, embedders, raw)
    for spec in lanes.values():
        limit = retriever_kind(spec.kind).max_depth(spec.parsed())
        if limit is not None and depth > limit:
            raise _err(path, "depth", f"is {depth}, more than {spec.kind} lanes return ({limit}; lane "
                       f"{spec.name}); use a depth <= {limit}")
    from workbench.registry import reranker_kinds

    reranker_kinds()  # a broken or duplicate reranker kind is refused whether or not this file uses one
    rerankers: dict[str, RerankerSpec] = {}
    for rname, spec in raw.get("rerankers", {}).items():
        rerankers[rname] = reranker_spec(path, rname, spec, lanes, embedders)
    configs: dict[str, FusedConfig] = {}
    for cname, spec in raw.get("configs", {}).items():
        if not isinstance(spec, dict):
            raise _err(path, f"configs.{cname}", "must be a table")
        _check_name(path, f"configs.{cname}", cname)
        configs[cname] = fused_config(path, cname, spec, lanes, rerankers)
    if not configs:
        raise _err(path, "configs", "defines no [configs.NAME] table; add at least one")
    ann_check = raw.get("ann_check")
    if ann_check is not None and not isinstance(ann_check, bool):
        raise _err(path, "ann_check", f"must be true (measure every approximate lane against its exact twin), false "
                                      f"(never), or left out (only on datasets whose queries carry filters); got "
                                      f"{ann_check!r}")
    tolerance = raw.get("time_tolerance_ms", 0)
    if _int_at_least(0)(tolerance):
        raise _err(path, "time_tolerance_ms", f"must be an integer >= 0 (milliseconds a judged span is widened by on "
                                              f"each side; 0: exact), got {tolerance!r}")
    return Experiment(path, name, tuple(datasets), tuple(measures), depth, tuple(splits), index, embedders, lanes,
                      configs, raw, qrels, rerankers, ann_check, tolerance)


def _check_name(path: Path, where: str, name: Any) -> None:
    problem = check_name(name)
    if problem:
        raise _err(path, where, f"{problem} (the name {name!r})")


def lane_spec(path: Path, name: str, spec: Any, embedders: dict[str, Any], raw: dict[str, Any] | None = None) -> LaneSpec:
    """Validate one ``[lanes.NAME]`` table through its kind's declaration (:mod:`workbench.registry`).

    Args:
        path: the file (for messages).
        embedders: the experiment's ``[embedders]`` tables (a lane's ``embedder`` must name one).
        raw: the whole experiment TOML, for the kind's cross-table rules (:meth:`RetrieverKind.check`).

    Raises:
        ConfigError: ``<path>: lanes.<name>.<key> <what is wrong>``: an unusable name, an unknown kind
            (the registered ones listed), an unknown parameter (the allowed ones listed), a value out of
            range or of the wrong type, an embedder that is not declared.
    """
    where = f"lanes.{name}"
    from workbench.registry import retriever_kinds

    kind, params, parsed = _kind_table(path, where, name, spec, retriever_kinds())
    decl = retriever_kinds()[kind]
    emb = getattr(parsed, EMBEDDER_PARAM, None)
    if emb is not None and emb not in embedders:
        raise _err(path, f"{where}.{EMBEDDER_PARAM}", f"names no [embedders.{emb}] table")
    problem = decl.check(parsed, raw or {})
    if problem:
        raise _err(path, where, problem)
    return LaneSpec(name, kind, params)


def _kind_table(path: Path, where: str, name: str, spec: Any, kinds: dict[str, Any]) -> tuple[str, dict, Any]:
    """A ``[lanes.NAME]`` or ``[rerankers.NAME]`` table checked against its kind: (kind, params as written,
    params validated by the kind's declaration)."""
    _check_name(path, where, name)
    if not isinstance(spec, dict):
        raise _err(path, where, "must be a table with a kind")
    kind = spec.get("kind")
    if kind not in kinds:
        raise _err(path, f"{where}.kind", f"must be one of {', '.join(sorted(kinds)) or 'none'}, got {kind!r}")
    params = {k: v for k, v in spec.items() if k != "kind"}
    return kind, params, kinds[kind].parse(params, f"{path}: {where}")


def reranker_spec(path: Path, name: str, spec: Any, lanes: dict[str, LaneSpec],
                   embedders: dict[str, Any] | None = None) -> RerankerSpec:
    """The reranker ``[rerankers.<name>]`` of experiment ``path`` parsed and checked against its kind's declaration.

    Raises:
        ConfigError: an unknown kind, bad parameters or an unknown lane, naming the file and the key.
    """
    where = f"rerankers.{name}"
    from workbench.registry import reranker_kinds

    kinds = reranker_kinds()
    kind, params, parsed = _kind_table(path, where, name, spec, kinds)
    emb = getattr(parsed, EMBEDDER_PARAM, None)
    if emb is not None and emb not in (embedders or {}):
        raise _err(path, f"{where}.{EMBEDDER_PARAM}", f"names no [embedders.{emb}] table; defined: "
                   f"{', '.join(embedders or {}) or 'none'}")
    missing = [ln for ln in kinds[kind].lanes(parsed) if ln not in lanes]
    if missing:
        raise _err(path, where, f"reads lane(s) {missing} the experiment does not define "
                   f"(lanes: {', '.join(lanes) or 'none'})")
    return RerankerSpec(name, kind, params)


def fused_config(path: Path, cname: str, spec: dict[str, Any], lanes: dict[str, LaneSpec],
                 rerankers: dict[str, RerankerSpec] | None = None) -> FusedConfig:
    """The config ``[configs.<cname>]`` of experiment ``path`` parsed and checked (lanes, fusion, weights,
    depth, ``min_score``, per-lane floors, tie-break and pinned lanes, rerank stage, ``window_ms``).

    Raises:
        ConfigError: an unknown key or lane, or a value out of range, naming the file and the key.
    """
    where = f"configs.{cname}"
    allowed = {"lanes", "fusion", "k", "weights", "depth", "min_score", "top_k", "tiebreak_lane", "norm", "rerank",
               "pin_lane", "lane_min_score", "window_ms"}
    extra = set(spec) - allowed
    if extra:
        raise _err(path, where, f"has unknown key(s) {sorted(extra)}; allowed: {sorted(allowed)}")
    use = spec.get("lanes")
    if not isinstance(use, list) or not use:
        raise _err(path, f"{where}.lanes", "must be a non-empty list of lane names")
    unknown = [x for x in use if x not in lanes]
    if unknown:
        raise _err(path, f"{where}.lanes", f"names unknown lane(s) {unknown}; defined: {', '.join(lanes) or 'none'}")
    if len(set(use)) != len(use):
        raise _err(path, f"{where}.lanes", "lists a lane twice")
    fusion = spec.get("fusion", "rrf" if len(use) > 1 else "none")
    if fusion not in FUSIONS:
        raise _err(path, f"{where}.fusion", f"must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    if fusion == "none" and len(use) != 1:
        raise _err(path, f"{where}.fusion", "'none' takes exactly one lane; choose a fusion method for several")
    k = spec.get("k", 60)
    if not (isinstance(k, (int, float)) and not isinstance(k, bool) and math.isfinite(k) and k > 0):
        raise _err(path, f"{where}.k", "must be a number > 0 (the RRF constant)")
    weights = spec.get("weights")
    if weights is not None:
        if not isinstance(weights, dict) or set(weights) != set(use):
            raise _err(path, f"{where}.weights", f"must give one weight for each lane of the config: {use}")
        if any(not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0)
               for v in weights.values()):
            raise _err(path, f"{where}.weights", "must be numbers >= 0")
    for param in ("k", "weights", "norm"):  # a parameter the method would ignore is a mistake, not a setting
        if param in spec and param not in METHOD_PARAMS[fusion]:
            are = "are" if param == "weights" else "is"
            raise _err(path, f"{where}.{param}", f"{are} not read by fusion {fusion!r}; drop it or choose one of "
                       f"{', '.join(readers(param))}")
    if weights is not None and all(float(v) == 0.0 for v in weights.values()):
        raise _err(path, f"{where}.weights", "are all 0: every document would score 0 and the list would be in "
                   "doc_id order; give at least one lane a weight > 0")
    depth = spec.get("depth")
    if isinstance(depth, dict):
        bad = set(depth) - set(use)
        if bad:
            raise _err(path, f"{where}.depth", f"names lanes not in the config: {sorted(bad)}")
        if any(_int_at_least(1)(v) for v in depth.values()):
            raise _err(path, f"{where}.depth", "values must be integers >= 1")
    elif depth is not None and _int_at_least(1)(depth):
        raise _err(path, f"{where}.depth", "must be an integer >= 1 or a table lane = integer")
    min_score = spec.get("min_score")
    if min_score is not None and (isinstance(min_score, bool) or not (isinstance(min_score, (int, float))
                                                                    and math.isfinite(min_score))):
        raise _err(path, f"{where}.min_score", "must be a number")
    top_k = spec.get("top_k", 100)
    if _int_at_least(1)(top_k) or top_k > TOP_K_MAX:
        raise _err(path, f"{where}.top_k", f"must be an integer from 1 to {TOP_K_MAX:,} (rows shown, not scanned: "
                                           "depth sets how deep each lane reads)")
    tb = spec.get("tiebreak_lane")
    if tb is not None and tb not in use:
        raise _err(path, f"{where}.tiebreak_lane", f"must be one of the config's lanes {use}")
    pin_lane = spec.get("pin_lane")
    if pin_lane is not None:
        if pin_lane not in use:
            raise _err(path, f"{where}.pin_lane", f"must be one of the config's lanes {use}")
        if lanes[pin_lane].kind != "reference":
            raise _err(path, f"{where}.pin_lane", f"names lane {pin_lane!r} of kind {lanes[pin_lane].kind!r}; only a "
                       "reference lane's exact answers can be pinned ahead of the fused list")
    norm = spec.get("norm", "minmax")
    if norm not in NORMALISATIONS:
        raise _err(path, f"{where}.norm", f"must be one of {', '.join(NORMALISATIONS)}")
    rerank = _rerank_stage(path, f"{where}.rerank", spec["rerank"], rerankers or {}) if "rerank" in spec else None
    window = spec.get("window_ms", 0)
    if _int_at_least(0)(window):
        raise _err(path, f"{where}.window_ms", f"must be an integer >= 0 (milliseconds of transcript shown on each "
                                               f"side of a hit; 0: the hit's own span), got {window!r}")
    floors = spec.get("lane_min_score")
    if floors is not None:
        if not isinstance(floors, dict) or not floors or set(floors) - set(use):
            raise _err(path, f"{where}.lane_min_score", f"must be a table of the config's lanes ({', '.join(use)}) = the "
                       f"lowest raw score of that lane's hits that are fused, e.g. {{ {use[0]} = 0.3 }}; got {floors!r}")
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in floors.values()):
            raise _err(path, f"{where}.lane_min_score", f"must be finite numbers (a lane's own score scale); got {floors!r}")
    return FusedConfig(lanes=tuple(use), method=fusion, k=float(k), weights=dict(weights) if weights else None,
                       depth=dict(depth) if isinstance(depth, dict) else depth,
                       min_score=float(min_score) if min_score is not None else None, top_k=top_k, tiebreak_lane=tb,
                       pin_lane=pin_lane, lane_min_score={ln: float(v) for ln, v in floors.items()} if floors else None,
                       norm=norm, name=cname, rerank=rerank, window_ms=window)


def _rerank_stage(path: Path, where: str, spec: Any, rerankers: dict[str, RerankerSpec]) -> RerankStage:
    shape = "a table { reranker = \"NAME\", depth = N, weight = W } ([rerankers.NAME]; weight optional)"
    if not isinstance(spec, dict):
        raise _err(path, where, f"must be {shape}")
    unknown = sorted(set(spec) - {"reranker", "depth", "weight"})
    if unknown:
        raise _err(path, where, f"has unknown key(s) {unknown}; it must be {shape}")
    name = spec.get("reranker")
    if name is None:
        raise _err(path, where, "needs reranker = \"NAME\" (a [rerankers.NAME] table)")
    if name not in rerankers:
        raise _err(path, f"{where}.reranker", f"names no [rerankers.{name}] table; defined: "
                   f"{', '.join(rerankers) or 'none'}")
    depth = spec.get("depth", RerankStage.__dataclass_fields__["depth"].default)
    if _int_at_least(1)(depth):
        raise _err(path, f"{where}.depth", "must be an integer >= 1 (fused hits sent to the reranker)")
    weight = spec.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
        raise _err(path, f"{where}.weight", "must be a number in [0, 1]: the reranker's share of the interpolated "
                   "score (1 = the reranker's order alone, 0 = the fused order)")
    return RerankStage(name, depth, float(weight))
