"""Tuning studies: the study TOML, its search space, and the one mapping of that space to Optuna.

A study file names an experiment (its datasets, embedders and lanes), one dataset, the
lanes a fused config may use, the baseline config, the objective and the search space::

    name = "tune-kb"
    experiment = "kb.toml"            # relative to this file
    dataset = "bilara-passages"
    lanes = ["vector", "fts_fold", "reference"]
    baseline = "kb-fold-ref"          # a config of the experiment: trial 0 and the comparison
    trials = 300
    seed = 20261129
    split = "train"                   # the split trials are scored on (dev and test stay held out)
    queries = "filtered"              # optional: only the queries that carry a filter (default: all)
    qrels = "merged"                  # optional: built | human | merged | implicit; default the experiment's qrels

    [objective]
    measure = "R@10"                  # R@k, P@k, RR@k, nDCG@k or Judged@k
    weights = { term = 1.0, page_ref = 1.0 }   # optional: a weighted mean of per-query-type means
    latency = false                   # true: also minimise p95 latency (ms) -> a Pareto front
    abstention = 0.5                  # optional: weight of empty answers to unanswerable queries (0-1)

    [space]
    fusion = ["rrf", "weighted"]      # a list is a categorical choice
    k = { low = 1, high = 200, log = true }    # a table is a range (int when both ends are ints)
    min_score = { low = 0.0, high = 0.05 }
    top_k = [10, 100]
    norm = ["minmax", "zscore"]
    weights = { vector = { low = 0.0, high = 2.0 }, reference = { low = 0.0, high = 5.0 } }
    depth = { vector = [20, 50, 100] }
    lane_min_score = { vector = { low = 0.2, high = 0.6 } }   # a lane's floor on its own scores (fusion.cut_lanes)
    lanes = { reference = [true, false] }      # a lane switched on or off
    [space.engine.vector]             # engine parameters: small categorical sets
    ef_search = [40, 100, 200]
    embedder = ["minilm", "e5"]       # the embedding model: names of the experiment's [embedders.*]
    [space.rerank]                    # the rerank stage after fusion (workbench.reranking.stage)
    reranker = ["none", "e5", "ce"]   # names of the experiment's [rerankers.*], or "none" (no stage)
    depth = [10, 20]                  # fused hits the reranker reorders (a list or an int range, >= 1)
    weight = { low = 0.0, high = 1.0 }   # its share of the score interpolated with the fused one

The baseline config is what every trial starts from, its rerank stage included: a trial
without ``rerank.*`` parameters keeps the baseline's stage (or its absence),
``rerank.reranker = "none"`` drops it, and ``rerank.depth`` / ``rerank.weight`` are drawn
only for a trial that reranks. Reranker scores come from the pair-score cache the
experiment's evaluation filled (:meth:`workbench.tuning.candidates.Candidates.rerank_scores`).

Every mistake fails at :func:`load_study`, before anything runs: an empty range, a
log range through zero, weights or depths for a lane the study does not use, an engine
parameter the lane's kind does not have (or a value it refuses), an unknown measure, an
unknown reranker, a rerank depth below 1 or a weight outside [0, 1].

:func:`suggest` is the only place the space meets Optuna: parameter names are
``fusion``, ``k``, ``norm``, ``min_score``, ``top_k``, ``weights.<lane>``, ``lane_min_score.<lane>``,
``depth.<lane>``, ``lanes.<lane>``, ``engine.<lane>.<param>``, ``rerank.reranker``,
``rerank.depth`` and ``rerank.weight``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from workbench.errors import ConfigError
from workbench.eval.fusion import METHOD_PARAMS, METHODS, NORMALISATIONS
from workbench.io.toml import kind_hint, read_toml
from workbench.registry import EMBEDDER_PARAM, retriever_kind
from workbench.types import DEFAULT_SEED

#: Fusion methods a study may choose between (ranx's are slower per trial: :mod:`workbench.eval.fusion`).
FUSION_CHOICES = METHODS
TOP_LEVEL = {"name", "description", "experiment", "dataset", "lanes", "baseline", "trials", "seed", "split",
             "objective", "space", "tolerance", "qrels", "queries"}
SPACE_KEYS = {"fusion", "k", "norm", "min_score", "top_k", "weights", "depth", "lanes", "engine", "rerank",
              "lane_min_score"}
RERANK_KEYS = ("reranker", "depth", "weight")
#: ``rerank.reranker`` value of a trial without a rerank stage.
NO_RERANK = "none"


@dataclass(frozen=True)
class Range:
    """A numeric range ``[low, high]``: ints when both ends are ints, ``log`` scale when asked."""

    low: float
    high: float
    log: bool = False
    integer: bool = False


@dataclass(frozen=True)
class Study:
    """A validated study (see the module docstring)."""

    path: Path
    name: str
    experiment: Any  # workbench.experiment.config.Experiment
    dataset: str
    lanes: tuple[str, ...]
    baseline: str
    trials: int
    seed: int
    split: str
    measure: str
    type_weights: dict[str, float] | None
    latency: bool
    space: dict[str, Any]
    tolerance: float = 0.005
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The qrels layer trials and the honest report are scored on (:mod:`workbench.judging.layers`):
    #: the study file's ``qrels``, else its experiment's; ``workbench tune --qrels`` overrides both.
    qrels: str = "built"
    #: ``objective.abstention``: the weight w of the abstention accuracy on unanswerable queries; the objective
    #: is ``(1 - w) * measure + w * accuracy`` (:func:`workbench.tuning.objective.objective_value`). 0: off.
    abstention: float = 0.0
    #: ``queries``: the queries trials and the honest report are scored on, :data:`QUERY_SUBSETS` (``filtered``:
    #: only those that carry a filter, so a filtered-search setting is tuned on what it changes).
    queries: str = "all"


#: The query subsets a study may be scored on (``queries = ...``).
QUERY_SUBSETS = ("all", "filtered")


def _err(path: Path, where: str, msg: str) -> ConfigError:
    return ConfigError(f"{path}: {where} {msg}")


def _dim(path: Path, where: str, spec: Any, *, numeric_only: bool = False) -> Range | tuple:
    """A dimension: a non-empty list (categorical) or a ``{low, high, log}`` table (range)."""
    if isinstance(spec, list):
        if numeric_only and not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                    for v in spec):
            raise _err(path, where, "must list finite numbers")
        if not spec:
            raise _err(path, where, "is an empty list; give at least one value")
        keys = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v) for v in spec]
        if len(set(keys)) != len(keys):
            raise _err(path, where, "lists a value twice")
        return tuple(spec)
    if isinstance(spec, dict):
        extra = set(spec) - {"low", "high", "log"}
        if extra or "low" not in spec or "high" not in spec:
            raise _err(path, where, "must be a list of values or a table { low = ..., high = ..., log = false }")
        lo, hi, log = spec["low"], spec["high"], spec.get("log", False)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (lo, hi)):
            raise _err(path, where, "low and high must be finite numbers")
        if not isinstance(log, bool):
            raise _err(path, where + ".log", "must be true or false")
        if not lo < hi:
            raise _err(path, where, f"is an empty range: low {lo} must be below high {hi}")
        if log and lo <= 0:
            raise _err(path, where, f"is a log range, so low must be > 0 (got {lo})")
        return Range(float(lo), float(hi), log, isinstance(lo, int) and isinstance(hi, int))
    raise _err(path, where, "must be a list of values or a table { low = ..., high = ... }")


def load_study(path: Path, *, known_datasets: set[str] | None = None) -> Study:
    """Read and validate a study TOML (and the experiment it names).

    Raises:
        ConfigError: the file, the experiment or the space is invalid; the message names the key and the fix.
    """
    from workbench.eval.fasteval import supported
    from workbench.experiment.config import load_experiment
    from workbench.types import QUERY_TYPES

    path = Path(path)
    raw = read_toml(path, "study", "see experiments/tune-*.toml for examples")
    extra = set(raw) - TOP_LEVEL
    if extra:
        raise _err(path, "top level", f"has unknown key(s) {sorted(extra)}; allowed: {sorted(TOP_LEVEL)}"
                   + kind_hint(raw, "study"))
    exp_name = raw.get("experiment")
    if not isinstance(exp_name, str) or not exp_name:
        raise _err(path, "experiment", "must name an experiment TOML (relative to this file), e.g. \"kb.toml\"")
    exp_path = (path.parent / exp_name) if not Path(exp_name).is_absolute() else Path(exp_name)
    exp = load_experiment(exp_path, known_datasets=known_datasets)
    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise _err(path, "name", "must be letters, digits, '.', '_' or '-', starting with a letter or digit "
                   "(it names the study folder and the study in its storage)")
    dataset = raw.get("dataset", exp.datasets[0] if len(exp.datasets) == 1 else None)
    if dataset not in exp.datasets:
        raise _err(path, "dataset", f"must be one of the experiment's datasets {list(exp.datasets)}, got {dataset!r}")
    baseline = raw.get("baseline")
    if baseline not in exp.configs:
        raise _err(path, "baseline", f"must name a config of {exp_path.name}: {', '.join(exp.configs)}; got {baseline!r}")
    lanes = raw.get("lanes", list(exp.configs[baseline].lanes))
    if not isinstance(lanes, list) or not lanes or not all(isinstance(x, str) for x in lanes):
        raise _err(path, "lanes", "must be a non-empty list of lane names")
    if len(set(lanes)) != len(lanes):
        raise _err(path, "lanes", "lists a lane twice")
    unknown = [ln for ln in lanes if ln not in exp.lanes]
    if unknown:
        raise _err(path, "lanes", f"names lane(s) {unknown} that {exp_path.name} does not define "
                   f"(defined: {', '.join(exp.lanes)})")
    missing = [ln for ln in exp.configs[baseline].lanes if ln not in lanes]
    if missing:
        raise _err(path, "lanes", f"must include the baseline's lanes; add {missing}")
    trials = raw.get("trials", 100)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise _err(path, "trials", "must be an integer >= 1")
    seed = raw.get("seed", DEFAULT_SEED)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise _err(path, "seed", "must be an integer")
    split = raw.get("split", "train")
    if split not in ("train", "dev"):
        raise _err(path, "split", "must be train (or dev); test is held out for the honest report")
    subset = raw.get("queries", "all")
    if subset not in QUERY_SUBSETS:
        raise _err(path, "queries", f"must be one of {', '.join(QUERY_SUBSETS)} (filtered: only the queries that carry "
                   f"a filter, in every split), got {subset!r}")
    tolerance = raw.get("tolerance", 0.005)
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 <= tolerance < 1:
        raise _err(path, "tolerance", "must be a number in [0, 1): how far below the best objective a flatter trial may be")
    obj = raw.get("objective", {})
    if not isinstance(obj, dict) or set(obj) - {"measure", "weights", "latency", "abstention"}:
        raise _err(path, "objective", "must be a table with measure, optional weights, latency and abstention")
    abstention = obj.get("abstention", 0.0)
    if not isinstance(abstention, (int, float)) or isinstance(abstention, bool) or not 0 <= abstention <= 1:
        raise _err(path, "objective.abstention", f"must be a number from 0 to 1: the weight of the abstention "
                   f"accuracy on unanswerable queries (workbench.eval.answers) against the measure; got {abstention!r}")
    measure = obj.get("measure", "R@10")
    if not supported(measure):
        raise _err(path, "objective.measure", f"{measure!r} is not computed in memory; use R@k, P@k, RR@k, nDCG@k "
                   "or Judged@k")
    cutoff = int(str(measure).rsplit("@", 1)[1])
    if cutoff > exp.depth:
        raise _err(path, "objective.measure", f"{measure} looks deeper than the {exp.depth} candidates cached per "
                   "lane; use a cutoff <= the experiment's depth")
    tw = obj.get("weights")
    if tw is not None:
        if not isinstance(tw, dict) or not tw:
            raise _err(path, "objective.weights", "must be a table query_type = weight")
        bad = [t for t in tw if t not in QUERY_TYPES]
        if bad:
            raise _err(path, "objective.weights", f"names unknown query type(s) {bad}; types: {', '.join(QUERY_TYPES)}")
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0
               for v in tw.values()) or not sum(tw.values()) > 0:
            raise _err(path, "objective.weights", "must be numbers >= 0 with a positive sum")
    latency = obj.get("latency", False)
    if not isinstance(latency, bool):
        raise _err(path, "objective.latency", "must be true or false")
    from workbench.judging.layers import check_layer

    qrels = check_layer(raw["qrels"], f"{path}: qrels") if "qrels" in raw else exp.qrels
    space = _space(path, raw.get("space", {}), lanes, exp)
    methods = trial_methods(space, exp.configs[baseline].method)
    for param in FUSION_PARAMS:
        if param in space and not any(param in _reads(m, len(lanes)) for m in methods):
            raise _err(path, f"space.{param}", f"is read by no fusion method a trial can use ({', '.join(methods)}); "
                       f"drop it, or list a method that reads it in space.fusion "
                       f"({', '.join(m for m in METHODS if param in METHOD_PARAMS[m])})")
    def top_weight(ln: str) -> float:  # the largest weight a trial can give a lane
        dim = space.get("weights", {}).get(ln)
        if dim is None:
            return float((exp.configs[baseline].weights or {}).get(ln, 1.0))
        return float(dim.high if isinstance(dim, Range) else max(dim))

    if "weights" in space and not any(top_weight(ln) for ln in lanes):
        raise _err(path, "space.weights", "can only draw 0 for every lane: every trial would retrieve nothing; give "
                   "some lane a weight above 0")
    base_lanes = set(exp.configs[baseline].lanes)
    switch = space.get("lanes", {})
    never = [ln for ln in lanes if (True not in switch[ln] if ln in switch else ln not in base_lanes)]
    if never:
        raise _err(path, "lanes", f"lists lane(s) {never} that no trial can switch on; add them to [space.lanes] "
                   "with true among the values, or drop them")
    if all(ln in switch and switch[ln] == (False,) for ln in lanes):
        raise _err(path, "space.lanes", "switches every lane off; keep at least one")
    base_stage = exp.configs[baseline].rerank
    rr = space.get("rerank", {})
    rerankers = [r for r in rr.get("reranker", (base_stage.reranker,) if base_stage else ()) if r != NO_RERANK]
    if not rerankers:
        tuned = [k for k in ("depth", "weight") if k in rr]
        if tuned:
            raise _err(path, f"space.rerank.{tuned[0]}", "tunes a rerank stage no trial has: list a reranker in "
                       "space.rerank.reranker, or name a baseline config with [configs.NAME.rerank]")
    if latency and rerankers:
        raise _err(path, "objective.latency", "cannot be true for a study that reranks: the latency objective sums "
                   "the lanes' cached latencies and has no reranker time; drop [space.rerank] (and use a baseline "
                   "without a rerank stage) or set latency = false")
    return Study(path, name, exp, dataset, tuple(lanes), baseline, trials, seed, split, measure,
                 {k: float(v) for k, v in tw.items()} if tw else None, latency, space, float(tolerance), raw, qrels,
                 float(abstention), subset)


def _space(path: Path, raw: Any, lanes: list[str], exp: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or not raw:
        raise _err(path, "space", "must be a table with at least one dimension (e.g. k = { low = 1, high = 200 })")
    extra = set(raw) - SPACE_KEYS
    if extra:
        raise _err(path, "space", f"has unknown key(s) {sorted(extra)}; allowed: {sorted(SPACE_KEYS)}")
    out: dict[str, Any] = {}
    if "fusion" in raw:
        dim = _dim(path, "space.fusion", raw["fusion"])
        if not isinstance(dim, tuple) or any(f not in FUSION_CHOICES for f in dim):
            raise _err(path, "space.fusion", f"must list fusion methods from {', '.join(FUSION_CHOICES)}")
        out["fusion"] = dim
    if "norm" in raw:
        dim = _dim(path, "space.norm", raw["norm"])
        if not isinstance(dim, tuple) or any(n not in NORMALISATIONS for n in dim):
            raise _err(path, "space.norm", f"must list some of {', '.join(NORMALISATIONS)}")
        out["norm"] = dim
    for key, _lo in (("k", 0.0), ("min_score", None), ("top_k", 1)):
        if key in raw:
            dim = _dim(path, f"space.{key}", raw[key], numeric_only=True)
            values = (dim.low, dim.high) if isinstance(dim, Range) else dim
            if key == "k" and min(values) <= 0:
                raise _err(path, "space.k", "must stay above 0 (the RRF constant)")
            if key == "top_k" and (min(values) < 1 or (isinstance(dim, Range) and not dim.integer) or
                                   (isinstance(dim, tuple) and not all(isinstance(v, int) for v in dim))):
                raise _err(path, "space.top_k", "must be integers >= 1")
            out[key] = dim
    for group in ("weights", "depth", "lanes", "lane_min_score"):
        if group not in raw:
            continue
        table = raw[group]
        if not isinstance(table, dict) or not table:
            raise _err(path, f"space.{group}", "must be a table lane = values")
        unknown = [ln for ln in table if ln not in lanes]
        if unknown:
            raise _err(path, f"space.{group}", f"names lane(s) {unknown} the study does not use (lanes: {lanes})")
        out[group] = {}
        for lane, spec in table.items():
            where = f"space.{group}.{lane}"
            dim = _dim(path, where, spec, numeric_only=group != "lanes")
            if group == "weights" and min((dim.low,) if isinstance(dim, Range) else dim) < 0:
                raise _err(path, where, "must be >= 0")
            if group == "depth" and (min((dim.low,) if isinstance(dim, Range) else dim) < 1 or
                                     (isinstance(dim, Range) and not dim.integer) or
                                     (isinstance(dim, tuple) and not all(isinstance(v, int) for v in dim))):
                raise _err(path, where, "must be integers >= 1")
            if group == "depth" and max((dim.high,) if isinstance(dim, Range) else dim) > exp.depth:
                raise _err(path, where, f"goes beyond the experiment's depth {exp.depth} (candidates cached per lane)")
            if group == "lanes" and (not isinstance(dim, tuple) or not all(isinstance(v, bool) for v in dim)):
                raise _err(path, where, "must be [true, false] (or one of them)")
            out[group][lane] = dim
    if "rerank" in raw:
        out["rerank"] = _rerank_space(path, raw["rerank"], exp)
    if "engine" in raw:
        table = raw["engine"]
        if not isinstance(table, dict) or not table:
            raise _err(path, "space.engine", "must be tables [space.engine.LANE] param = [values]")
        out["engine"] = {}
        for lane, params in table.items():
            if lane not in lanes:
                raise _err(path, f"space.engine.{lane}", f"is not a lane of the study (lanes: {lanes})")
            spec = exp.lanes[lane]
            decl = retriever_kind(spec.kind)
            if not isinstance(params, dict) or not params:
                raise _err(path, f"space.engine.{lane}", "must be a table param = [values]")
            out["engine"][lane] = {}
            fields = decl.fields(spec.params)
            tunable = [p for p in fields if p not in ("mode", "kind")]
            for param, values in params.items():
                where = f"space.engine.{lane}.{param}"
                if param not in tunable:
                    raise _err(path, where, f"is not a tunable parameter of the {spec.kind} lane; it has: "
                               f"{', '.join(tunable) or 'none'}")
                if param == EMBEDDER_PARAM:
                    unknown_emb = [v for v in values if v not in exp.embedders] if isinstance(values, list) else []
                    if unknown_emb:
                        raise _err(path, where, f"names embedder(s) {unknown_emb} the experiment does not declare "
                                   f"([embedders.NAME]: {', '.join(exp.embedders) or 'none'})")
                if not isinstance(values, list):
                    raise _err(path, where, "must be a list of values (engine parameters are small categorical sets)")
                dim = cast(tuple, _dim(path, where, values))  # a list gives a tuple
                for v in dim:
                    try:
                        decl.parse({**spec.params, param: v}, f"space.engine.{lane}")
                    except ConfigError as exc:
                        why = str(exc)
                        why = why[len(where):].lstrip(": ") if why.startswith(where) else why
                        raise _err(path, where, f"value {v!r} {why}") from None
                out["engine"][lane][param] = dim
    return out


def _rerank_space(path: Path, raw: Any, exp: Any) -> dict[str, Any]:
    """``[space.rerank]``: ``reranker`` (names of ``[rerankers.*]`` or ``"none"``), ``depth`` (ints >= 1),
    ``weight`` (in [0, 1])."""
    if not isinstance(raw, dict) or not raw:
        raise _err(path, "space.rerank", f"must be a table with {', '.join(RERANK_KEYS)} (each optional, at least one)")
    extra = set(raw) - set(RERANK_KEYS)
    if extra:
        raise _err(path, "space.rerank", f"has unknown key(s) {sorted(extra)}; allowed: {list(RERANK_KEYS)}")
    out: dict[str, Any] = {}
    if "reranker" in raw:
        where = "space.rerank.reranker"
        if not isinstance(raw["reranker"], list) or not all(isinstance(v, str) for v in raw["reranker"]):
            raise _err(path, where, f"must be a list of reranker names ([rerankers.NAME]) and/or \"{NO_RERANK}\"")
        if NO_RERANK in exp.rerankers:
            raise _err(path, where, f"cannot be tuned: the experiment names a reranker \"{NO_RERANK}\", which is "
                       "also the value of no rerank stage; rename [rerankers.none]")
        dim = _dim(path, where, raw["reranker"])
        # a list (checked above) gives a tuple
        unknown = [v for v in cast(tuple, dim) if v != NO_RERANK and v not in exp.rerankers]
        if unknown:
            raise _err(path, where, f"names reranker(s) {unknown} the experiment does not declare "
                       f"([rerankers.NAME]: {', '.join(exp.rerankers) or 'none'}); \"{NO_RERANK}\" is no rerank stage")
        out["reranker"] = dim
    if "depth" in raw:
        where = "space.rerank.depth"
        dim = _dim(path, where, raw["depth"], numeric_only=True)
        if (min((dim.low,) if isinstance(dim, Range) else dim) < 1 or (isinstance(dim, Range) and not dim.integer)
                or (isinstance(dim, tuple) and not all(isinstance(v, int) for v in dim))):
            raise _err(path, where, "must be integers >= 1 (fused hits sent to the reranker)")
        out["depth"] = dim
    if "weight" in raw:
        where = "space.rerank.weight"
        dim = _dim(path, where, raw["weight"], numeric_only=True)
        values = (dim.low, dim.high) if isinstance(dim, Range) else dim
        if min(values) < 0 or max(values) > 1:
            raise _err(path, where, "must lie in [0, 1]: the reranker's share of the interpolated score "
                       "(1 = the reranker's order alone, 0 = the fused order)")
        if isinstance(dim, Range) and dim.integer:  # { low = 0, high = 1 } is a float range here
            dim = Range(dim.low, dim.high, dim.log, False)
        out["weight"] = dim
    return out


# ---------------------------------------------------------------- the mapping to Optuna

def _suggest_dim(trial, name: str, dim: Range | tuple) -> Any:
    if isinstance(dim, tuple):
        return trial.suggest_categorical(name, list(dim))
    if dim.integer:
        return trial.suggest_int(name, int(dim.low), int(dim.high), log=dim.log)
    return trial.suggest_float(name, dim.low, dim.high, log=dim.log)


#: The space's dimensions that only some fusion methods read (:data:`workbench.eval.fusion.METHOD_PARAMS`).
FUSION_PARAMS = ("k", "norm", "weights")


def trial_methods(space: dict[str, Any], baseline_method: str) -> tuple[str, ...]:
    """The fusion methods a trial can use: ``space.fusion``'s, or the baseline's."""
    return tuple(space["fusion"]) if "fusion" in space else (baseline_method,)


def _reads(method: str, lanes: int) -> frozenset[str]:
    """What a trial of ``method`` reads in a study of ``lanes`` lanes: a one-lane baseline's ``none`` becomes RRF
    when a trial switches more lanes on (:func:`workbench.tuning.objective.setting_from`), which a study of one
    lane never does."""
    return METHOD_PARAMS[method] | (METHOD_PARAMS["rrf"] if method == "none" and lanes > 1 else frozenset())


def suggest(trial, study: Study) -> dict[str, Any]:
    """Draw one point of the space with an Optuna ``trial``: the only place the space meets Optuna.

    Returns:
        the flat parameters, e.g. ``{"fusion": "rrf", "k": 42.0, "weights.vector": 0.7,
        "lanes.reference": True, "engine.vector.ef_search": 100}``.
    """
    sp = study.space
    out: dict[str, Any] = {}
    if "fusion" in sp:
        out["fusion"] = _suggest_dim(trial, "fusion", sp["fusion"])
    # k, norm and weights only for a trial whose method reads them (conditional parameters): a BordaFuse
    # trial drawing weights would spend the sampler's effort and the sensitivity report on nothing
    reads = _reads(out.get("fusion", study.experiment.configs[study.baseline].method), len(study.lanes))
    for key in ("k", "norm", "min_score", "top_k"):
        if key in sp and (key not in FUSION_PARAMS or key in reads):
            out[key] = _suggest_dim(trial, key, sp[key])
    for group in ("lanes", "weights", "depth", "lane_min_score"):
        if group in FUSION_PARAMS and group not in reads:
            continue
        for lane, dim in sp.get(group, {}).items():
            out[f"{group}.{lane}"] = _suggest_dim(trial, f"{group}.{lane}", dim)
    for lane, params in sp.get("engine", {}).items():
        for param, dim in params.items():
            out[f"engine.{lane}.{param}"] = _suggest_dim(trial, f"engine.{lane}.{param}", dim)
    rr = sp.get("rerank", {})
    if "reranker" in rr:
        out["rerank.reranker"] = _suggest_dim(trial, "rerank.reranker", rr["reranker"])
    if rr and out.get("rerank.reranker", _baseline_reranker(study)) != NO_RERANK:
        # depth and weight only for a trial that reranks (conditional parameters)
        for key in ("depth", "weight"):
            if key in rr:
                out[f"rerank.{key}"] = _suggest_dim(trial, f"rerank.{key}", rr[key])
    return out


def study_rerankers(study: Study) -> list[str]:
    """The rerankers a trial of ``study`` may use: those ``space.rerank.reranker`` lists, or the baseline's."""
    listed = study.space.get("rerank", {}).get("reranker", (_baseline_reranker(study),))
    return [r for r in listed if r != NO_RERANK]


def _baseline_reranker(study: Study) -> str:
    stage = study.experiment.configs[study.baseline].rerank
    return stage.reranker if stage is not None else NO_RERANK


def baseline_params(study: Study) -> tuple[dict[str, Any], list[str]]:
    """The baseline config as a point of the space (trial 0), and notes on values the space cannot hold.

    A baseline value outside a range is clipped, one missing from a list is replaced by
    the list's first value; each such change is noted (the baseline itself is still
    evaluated as it is, for the comparison). The baseline's rerank stage maps to
    ``rerank.reranker`` / ``rerank.depth`` / ``rerank.weight`` (no stage: ``"none"``, and no depth
    or weight, as :func:`suggest` draws them only for a trial that reranks).
    """
    cfg = study.experiment.configs[study.baseline]
    lanes_spec = study.experiment.lanes
    sp = study.space
    want: dict[str, Any] = {"fusion": cfg.method if cfg.method != "none" else "rrf", "k": cfg.k, "norm": cfg.norm,
                            "min_score": cfg.min_score if cfg.min_score is not None else 0.0, "top_k": cfg.top_k}
    for lane in study.lanes:
        want[f"lanes.{lane}"] = lane in cfg.lanes
        want[f"weights.{lane}"] = float((cfg.weights or {}).get(lane, 1.0))
        d = cfg.depth.get(lane) if isinstance(cfg.depth, dict) else cfg.depth
        want[f"depth.{lane}"] = d if d is not None else study.experiment.depth
        want[f"lane_min_score.{lane}"] = (cfg.lane_min_score or {}).get(lane)
        for param in sp.get("engine", {}).get(lane, {}):
            want[f"engine.{lane}.{param}"] = lanes_spec[lane].canonical().get(param)  # its default when unwritten
    from workbench.experiment.config import RerankStage

    stage = cfg.rerank or RerankStage(NO_RERANK)  # no stage: the defaults where a trial of the space must rerank
    want.update({"rerank.reranker": stage.reranker, "rerank.depth": stage.depth, "rerank.weight": stage.weight})
    out: dict[str, Any] = {}
    notes: list[str] = []
    dims: dict[str, Any] = {k: sp[k] for k in ("fusion", "k", "norm", "min_score", "top_k") if k in sp}
    for group in ("lanes", "weights", "depth", "lane_min_score"):
        dims.update({f"{group}.{ln}": d for ln, d in sp.get(group, {}).items()})
    for lane, params in sp.get("engine", {}).items():
        dims.update({f"engine.{lane}.{p}": d for p, d in params.items()})
    dims.update({f"rerank.{k}": d for k, d in sp.get("rerank", {}).items()})
    for name, dim in dims.items():  # "fusion" comes first: what the others read depends on it
        if name in ("rerank.depth", "rerank.weight") and out.get("rerank.reranker", want["rerank.reranker"]) == NO_RERANK:
            continue  # drawn only for a trial that reranks (see suggest)
        group = name.split(".")[0]
        if group in FUSION_PARAMS and group not in _reads(out.get("fusion", cfg.method), len(study.lanes)):
            continue  # drawn only for a method that reads it (see suggest)
        v = want.get(name)
        if isinstance(dim, tuple):
            if v in dim:
                out[name] = v
            else:
                out[name] = dim[0]
                notes.append(f"baseline {name} = {v!r} is not among {list(dim)}; trial 0 uses {dim[0]!r}")
        else:
            x = float(v) if v is not None else dim.low
            if v is None and group == "lane_min_score":
                notes.append(f"baseline has no {name}; trial 0 uses the space's lowest, {dim.low!r}")
            clipped = min(max(x, dim.low), dim.high)
            out[name] = int(round(clipped)) if dim.integer else clipped
            if clipped != x:
                notes.append(f"baseline {name} = {v!r} lies outside [{dim.low}, {dim.high}]; trial 0 uses {out[name]!r}")
    return out, notes


# ---------------------------------------------------------------- finite spaces

#: The most settings :func:`finite_settings` lists; a larger (or any infinite) space is left to the sampler.
MAX_ENUMERATED = 100_000


class _Infinite(Exception):
    """A float range: the space has no end to list."""


class _TooMany(Exception):
    """More settings than :data:`MAX_ENUMERATED`."""


class _PathTrial:
    """A stand-in for an Optuna trial that answers each ``suggest_*`` call with the option ``path`` names at that
    call (the first option past its end), recording how many options each call had: one walk of
    :func:`suggest` along one branch of the space, conditional parameters included."""

    def __init__(self, path: list[int]) -> None:
        self.path: list[int] = path
        self.sizes: list[int] = []

    def _pick(self, options: list[Any]) -> Any:
        i = len(self.sizes)
        self.sizes.append(len(options))
        return options[self.path[i] if i < len(self.path) else 0]

    def suggest_categorical(self, name: str, choices: list[Any]) -> Any:
        return self._pick(list(choices))

    def suggest_int(self, name: str, low: int, high: int, log: bool = False) -> int:
        if high - low + 1 > MAX_ENUMERATED:
            raise _TooMany
        return self._pick(list(range(low, high + 1)))

    def suggest_float(self, name: str, low: float, high: float, log: bool = False) -> float:
        raise _Infinite


def setting_key(params: dict[str, Any]) -> tuple:
    """A hashable key of a trial's parameters (``{"k": 60, "fusion": "rrf"}``): equal for equal settings, 60 and
    60.0 included (``==`` and ``hash`` agree on them)."""
    return tuple(sorted(params.items()))


def finite_settings(study: Study) -> list[dict[str, Any]] | None:
    """Every distinct setting of ``study``'s space, in a fixed order, when the space is finite: only lists and
    integer ranges, conditional parameters followed as :func:`suggest` draws them (a BordaFuse branch draws
    no weights, so it counts once). None when a float range makes it infinite or it holds more than
    :data:`MAX_ENUMERATED` settings (the sampler then draws as usual).

    A depth-first walk: each walk of :func:`suggest` records the number of options at each of its calls; the
    next walk advances the last call that has options left and starts every later call afresh.
    """
    out: list[dict[str, Any]] = []
    path: list[int] = []
    try:
        while True:
            t = _PathTrial(path)
            out.append(suggest(t, study))
            if len(out) > MAX_ENUMERATED:
                return None
            path = path + [0] * (len(t.sizes) - len(path))
            i = len(path) - 1
            while i >= 0 and path[i] + 1 >= t.sizes[i]:
                i -= 1
            if i < 0:
                return out
            path = path[:i] + [path[i] + 1]
    except (_Infinite, _TooMany):
        return None
