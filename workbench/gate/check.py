"""The regression gate (issue #6): does a candidate lose recall against a baseline, on any kind of query?

A **source** of a ranking is one of:

* ``EXPERIMENT.toml:CONFIG`` — a config of an experiment, fused from the candidate cache
  (lanes run only on a cache miss), so its lanes are known;
* a production config exported by ``workbench export`` (``*.json``);
* a TREC run file (6 columns).

``workbench gate`` compares a candidate with either a baseline source (per-query values
of both: **paired** decision) or a file of expected values kept in ``experiments/``
(like Pyserini's regression files: ``gate-*.toml``).

**Decision rule** per measure and stratum (``all`` and each query type), with margin δ:

* paired: the per-query difference d = candidate − baseline; 95% percentile-bootstrap CI
  of mean(d) (Efron and Tibshirani 1993, the seed fixed); **fail** when the CI's upper
  bound is below −δ (a regression beyond the margin), **pass** when its lower bound is
  at least −δ (non-inferior), otherwise **inconclusive** (warns, does not fail);
* expected values: **fail** when the candidate's mean is below expected − δ (the runs
  are deterministic, so the point value is compared, as regression files do);
* a stratum with fewer than ``min_queries`` judged queries is reported, never failed;
* judged coverage: mean Judged@k of the candidate below ``judged_floor`` warns (or
  fails with ``judged_action = "fail"``) and lists the unjudged documents of its top k,
  best-ranked first, to judge next.

**Policy.** δ (``margin``), ``min_queries``, ``judged_floor`` and ``judged_action`` are one
:class:`GatePolicy`, declared once with its defaults (0.01, 30, 0.1, ``"warn"``): a CLI option
wins, else the gate file's key, else the default, on both the paired and the expected-values
path. :func:`run_gate_file` and :func:`run_pair` are what ``workbench gate`` runs (the CLI only
parses, calls and prints).

**Reports.** :class:`GateReport` is the JSON file ``<home>/gates/gate-*.json`` (``save`` and
``load`` side by side, read by the dashboard); :func:`markdown` and :func:`junit` are the
pull-request summary and the CI's test report.

**Qrels layer.** Both rankings are judged by one qrels layer (:mod:`workbench.judging.layers`):
``--qrels``, else the gate file's ``qrels``, else the experiment's (a gate file's experiment,
or the experiments the candidate and baseline name, which must then agree), else ``built``.
Under ``human`` only queries with a human grade are gated. The result and its report name
the layer and the hash of its qrels.

Exit codes (CLI): 0 pass, 1 regression, 2 usage or data error.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import typing
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.errors import ConfigError, DataError
from workbench.run import Run
from workbench.io.toml import read_toml
from workbench.types import SPLITS
from workbench.settings import PROJECT_ROOT

#: The bootstrap seed of paired decisions (``--seed``), and the measures gated when none are named.
DEFAULT_SEED = 20261129
DEFAULT_MEASURES = ("R@10",)


# ---------------------------------------------------------------- the policy

class GatePolicy(BaseModel):
    """The gate's decision parameters, declared once with their defaults: a gate file's keys, the
    CLI's options and callers of :func:`gate_pair` / :func:`gate_expected` all resolve through it
    (a CLI option, else the gate file's key, else the default here: :meth:`override`).

    Defaults:

    * ``margin`` 0.01: one point of the measure (for recall@10, one query in a hundred losing its
      only relevant document); the fall a change may cause before the gate calls it a regression;
    * ``min_queries`` 30: below about 30 queries the bootstrap CI of a mean is too wide and too
      unstable for a non-inferiority decision, so a smaller stratum is reported, never failed;
    * ``judged_floor`` 0.1: a candidate whose top 10 holds on average less than one judged
      document scores mostly unjudged documents as non-relevant, so a "regression" may only mean
      it found documents nobody judged (Buckley and Voorhees 2004). The check warns by default
      (``judged_action`` ``"warn"``, it never fails a gate by itself) and lists the documents to
      judge next. 0 would switch the check off for everyone; a gate whose qrels are complete by
      construction sets 0 explicitly and says why (``experiments/gate-seeds.toml``);
    * ``judged_action`` ``"warn"``.

    Frozen; unknown fields are refused.

    Raises:
        pydantic.ValidationError: from the constructor, on a value out of range or of the wrong
            type (ints are taken for floats; bools and strings are not); :meth:`from_mapping`
            turns it into a :class:`~workbench.errors.ConfigError` naming the source and key.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    margin: float = Field(0.01, ge=0.0, le=1.0, allow_inf_nan=False, description=(
        "the non-inferiority margin δ: the largest fall of a measure's mean still accepted, an absolute "
        "difference in the measure's own units (0.01 = one point of recall@10)"))
    min_queries: int = Field(30, ge=1, description=(
        "the fewest queries a stratum needs to be decided; a smaller stratum is reported as too-few, never failed"))
    judged_floor: float = Field(0.1, ge=0.0, le=1.0, allow_inf_nan=False, description=(
        "the lowest mean Judged@10 of the candidate (the fraction of its top 10 that the qrels judge, 0-1) "
        "accepted without judged_action"))
    judged_action: Literal["warn", "fail"] = Field("warn", description=(
        "what a mean Judged@10 below judged_floor does: warn (listing the documents to judge next) or fail the gate"))

    #: How the CLI spells each field (``--judged-floor``); messages about CLI values use these names.
    OPTIONS: typing.ClassVar[dict[str, str]] = {
        "margin": "--margin", "min_queries": "--min-queries", "judged_floor": "--judged-floor",
        "judged_action": "--judged-action"}

    @classmethod
    def expects(cls, key: str) -> str:
        """What field ``key`` accepts, in words: ``a number in [0, 1]``, ``an integer >= 1``, ``"warn" or "fail"``."""
        info = cls.model_fields[key]
        bounds = {name: getattr(m, name) for m in info.metadata for name in ("ge", "le") if hasattr(m, name)}
        if typing.get_origin(info.annotation) is Literal:
            return " or ".join(f'"{v}"' for v in typing.get_args(info.annotation))
        if info.annotation is int:
            return f"an integer >= {bounds['ge']}"
        return f"a number in [{bounds['ge']:g}, {bounds['le']:g}]"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str, *,
                     names: Mapping[str, str] | None = None) -> GatePolicy:
        """A policy from ``values`` (some or all fields; the rest take their defaults).

        Args:
            values: field name -> value, e.g. a gate file's ``margin``, ``min_queries``, ...
            source: what the values came from, for messages (a gate file's path; ``""``: none).
            names: how to name each field in messages (the CLI's ``--margin``); default: the field name.

        Raises:
            ConfigError: an unknown key, a value of the wrong type or out of range; the message names
                ``source``, the key, what it accepts and the value given (``gate.toml: margin must be a
                number in [0, 1] (got 'abc'): the non-inferiority margin δ ...``).
        """
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            err = exc.errors()[0]
            key = str(err["loc"][0]) if err["loc"] else "?"
            name = (names or {}).get(key, key)
            where = f"{source}: " if source else ""
            if err["type"] == "extra_forbidden":
                raise ConfigError(f"{where}unknown gate policy key {name!r}; the keys are "
                                  f"{', '.join((names or {}).get(k, k) for k in cls.model_fields)}") from None
            raise ConfigError(f"{where}{name} must be {cls.expects(key)} (got {err.get('input')!r}): "
                              f"{cls.model_fields[key].description}") from None

    def override(self, options: Mapping[str, Any]) -> GatePolicy:
        """This policy with the ``options`` that are not None put over it (the CLI's options over a
        gate file's values). Messages name each option as the CLI spells it (:attr:`OPTIONS`).

        Raises:
            ConfigError: an option's value is out of range or of the wrong type.
        """
        given = {k: v for k, v in options.items() if v is not None}
        return self if not given else GatePolicy.from_mapping({**self.model_dump(), **given}, "", names=self.OPTIONS)


@dataclass
class Ranking:
    """A ranking to gate: the fused run, the lanes' runs (when known) and a label."""

    label: str
    run: Run
    lanes: dict[str, Run] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


#: What a check can come to.
STATUSES = ("pass", "fail", "inconclusive", "too-few")
#: Keys of a non-empty ``GateResult.judged`` (:func:`judged_check`).
JUDGED_KEYS = ("k", "mean", "floor", "status", "to_judge")


@dataclass
class Check:
    """One decision: measure × stratum.

    Values are means of the measure over the stratum's queries (its own units, 0-1); ``diff`` is
    candidate − baseline (or − the expected value); ``ci_low`` / ``ci_high`` the 95% bootstrap CI of
    the mean paired difference (NaN against expected values); ``n`` the queries compared.
    """

    measure: str
    stratum: str
    n: int
    candidate: float
    baseline: float
    diff: float
    ci_low: float
    ci_high: float
    status: str  # one of STATUSES
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """The check as a JSON object (NaN stays NaN: the report is written with ``allow_nan``)."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Check:
        """The inverse of :meth:`to_json`.

        Raises:
            KeyError, TypeError, ValueError: a missing key, a value of the wrong type, an unknown status
                (:meth:`GateReport.from_json` names the file).
        """
        if d["status"] not in STATUSES:
            raise ValueError(f"status {d['status']!r} is not one of {', '.join(STATUSES)}")
        return cls(str(d["measure"]), str(d["stratum"]), int(d["n"]), float(d["candidate"]), float(d["baseline"]),
                   float(d["diff"]), float(d["ci_low"]), float(d["ci_high"]), str(d["status"]), str(d.get("note", "")))


@dataclass
class GateResult:
    """Everything the gate found for one candidate; ``exit_code`` 0 pass, 1 regression.

    ``margin`` is the policy's δ (absolute, in the measures' units); ``judged`` is :func:`judged_check`'s
    dict (empty when not checked); ``losses`` is :func:`losses`'s list.
    """

    dataset: str
    candidate: str
    baseline: str
    margin: float
    checks: list[Check]
    judged: dict[str, Any]
    losses: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    #: The qrels layer both rankings were judged by, and :func:`workbench.judging.layers.qrels_sha256` of it.
    qrels: str = "built"
    qrels_sha256: str = ""

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.judged.get("status") == "fail" else 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields (checks as :meth:`Check.to_json`) and ``exit_code``."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "checks"}
        d["checks"] = [c.to_json() for c in self.checks]
        d["exit_code"] = self.exit_code
        return json.loads(json.dumps(d, default=str, allow_nan=True))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GateResult:
        """The inverse of :meth:`to_json` (the stored ``exit_code`` is not read: it follows from the checks).
        Reports written before the qrels layers existed have no ``qrels``: they were judged by ``built``.

        Raises:
            KeyError, TypeError, ValueError: a missing or malformed field (:meth:`GateReport.from_json`
                names the file).
        """
        judged = d.get("judged") or {}
        if not isinstance(judged, dict):
            raise TypeError(f"judged must be an object, not {type(judged).__name__}")
        for key in JUDGED_KEYS if judged else ():
            judged[key]  # noqa: B018 - presence check
        losses = d.get("losses") or []
        warnings = d.get("warnings") or []
        if not isinstance(losses, list) or not isinstance(warnings, list) or not isinstance(d["checks"], list):
            raise TypeError("checks, losses and warnings must be lists")
        return cls(str(d["dataset"]), str(d["candidate"]), str(d["baseline"]), float(d["margin"]),
                   [Check.from_json(c) for c in d["checks"]], dict(judged), list(losses), [str(w) for w in warnings],
                   str(d.get("qrels", "built")), str(d.get("qrels_sha256", "")))


# ---------------------------------------------------------------- sources

def load_source(spec: str, dataset: Any, *, home: Path, log: Callable[[str], None] = lambda _m: None) -> Ranking:
    """Read a ranking source (see the module docstring) for ``dataset``.

    Raises:
        ConfigError: an unknown config, a bad export file.
        DataError: a malformed run file (wrong column count, NaN scores, duplicate doc ids in one
            ranking, empty), or one naming queries the dataset does not have.
    """
    path_part, _, config = spec.rpartition(":") if spec.count(":") and not Path(spec).exists() else (spec, "", "")
    if config and path_part.endswith(".toml"):
        return _from_experiment(Path(path_part), config, dataset, home, log)
    path = Path(spec)
    if path.suffix == ".toml" and path.is_file():
        raise ConfigError(f"{spec} is an experiment; name one of its configs: {spec}:CONFIG")
    if not path.exists():
        raise ConfigError(f"{spec!r} is neither a file nor EXPERIMENT.toml:CONFIG; give a TREC run file, an exported "
                          "config (.json) or e.g. experiments/kb.toml:kb-fold-ref")
    if path.is_dir():
        raise ConfigError(f"{spec} is a folder; give a TREC run file, an exported config or EXPERIMENT.toml:CONFIG")
    if path.suffix == ".json":
        return _from_export(path, dataset, home, log)
    from workbench.run import read_trec_run

    run = read_trec_run(path, name=path.name)
    known = {q.query_id for q in dataset.queries}
    unknown = sorted(set(run) - known)
    if unknown:
        raise DataError(f"run file {path} names {len(unknown)} query id(s) that dataset {dataset.name} does not have "
                        f"(first: {unknown[:3]}); is it a run of another dataset?")
    ranking = Ranking(path.name, run)
    docs = {d.doc_id for d in dataset.documents}
    hits = [h.doc_id for q in run for h in run[q]]
    stray = sum(1 for d in hits if d not in docs)
    if stray:
        ranking.warnings.append(f"{path.name}: {stray} of {len(hits)} ranked doc ids are not documents of "
                                f"{dataset.name} (they count as non-relevant)")
    return ranking


#: Engines (embedders, database handles) shared by the configs of one experiment in one gate run.
_ENGINES: dict[tuple, Any] = {}


def _config_ranking(exp, cfg, dataset, home: Path, log, label: str) -> Ranking:
    from workbench.experiment.cache import CandidateCache
    from workbench.experiment.runner import Engine, config_run, lane_candidates

    sub = replace(exp, configs={cfg.name: cfg}, splits=("train", "dev", "test"))
    key = (str(exp.path), json.dumps(exp.embedders, sort_keys=True, default=str), str(home))
    engine = _ENGINES.get(key)
    if engine is None:
        engine = _ENGINES[key] = Engine(sub, home, False, log)
    engine.exp = sub
    cache = CandidateCache(home / "cache" / "candidates")
    lanes = lane_candidates(sub, dataset, engine, cache, log)
    runs = {n: lanes[n].run for n in cfg.lanes}
    return Ranking(label, config_run(cfg, {n: lr.run for n, lr in lanes.items()}, dataset, engine), runs)


def source_layer(spec: str) -> str | None:
    """The ``qrels`` layer of the experiment a source names (``EXPERIMENT.toml:CONFIG``, or the experiment an
    exported config came from); None for a TREC run file or a source that does not load (its own error
    comes when it is read)."""
    try:
        path_part, _, config = spec.rpartition(":") if spec.count(":") and not Path(spec).exists() else (spec, "", "")
        if config and path_part.endswith(".toml"):
            return experiment_layer(Path(path_part))
        path = Path(spec)
        if path.suffix == ".json" and path.is_file():
            exp_file = Path(json.loads(path.read_text(encoding="utf-8"))["provenance"]["experiment"])
            if not exp_file.is_absolute() and not exp_file.exists():
                exp_file = PROJECT_ROOT / exp_file
            return experiment_layer(exp_file)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None


def experiment_layer(path: Path) -> str | None:
    """The ``qrels`` layer an experiment file declares (``built`` when it declares none); None when the
    file does not load (its own error comes when it is read)."""
    from workbench.experiment.config import load_experiment
    from workbench.errors import WorkbenchError

    try:
        return load_experiment(Path(path)).qrels
    except WorkbenchError:
        return None


def _from_experiment(path: Path, config: str, dataset, home: Path, log) -> Ranking:
    from workbench.experiment.config import load_experiment

    exp = load_experiment(path)
    if config not in exp.configs:
        raise ConfigError(f"{path} has no config {config!r}; configs: {', '.join(exp.configs)}")
    if dataset.name not in exp.datasets:
        log(f"note: {path.name} does not list dataset {dataset.name}; its lanes run on it anyway")
    return _config_ranking(exp, exp.configs[config], dataset, home, log, f"{path.name}:{config}")


def _from_export(path: Path, dataset, home: Path, log) -> Ranking:
    """An exported production config: lanes with their engine parameters, fusion parameters."""
    from workbench.experiment.config import _config, lane_spec, load_experiment

    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
        exp_file = Path(cfg["provenance"]["experiment"])
        if not exp_file.is_absolute() and not exp_file.exists():
            exp_file = PROJECT_ROOT / exp_file  # written relative to the repository
        if not exp_file.is_file():
            raise ConfigError(f"{path}: provenance.experiment {cfg['provenance']['experiment']!r} is not an "
                              "experiment file here; run from the repository root or fix the path")
        exp = load_experiment(exp_file)
        if not isinstance(cfg["lanes"], dict) or not cfg["lanes"]:
            raise ConfigError(f"{path}: lanes must name at least one lane")
        lanes, embedders = {}, dict(exp.embedders)
        for name, spec in cfg["lanes"].items():
            spec = dict(spec)
            if isinstance(spec.get("embedder"), dict):
                emb = dict(spec["embedder"])
                ename = emb.pop("name")
                embedders[ename] = emb
                spec["embedder"] = ename
            lanes[name] = lane_spec(path, name, spec, embedders)
        table = {"lanes": list(cfg["lanes"]), "fusion": cfg["fusion"], "top_k": cfg["top_k"]}
        for key, src in (("k", "rrf_k"), ("weights", "weights"), ("depth", "depth"), ("min_score", "min_score"),
                         ("tiebreak_lane", "tiebreak_lane"), ("norm", "norm")):
            if cfg.get(src) not in (None, {}):
                table[key] = cfg[src]
        if table["fusion"] == "none" and len(table["lanes"]) == 1:
            table.pop("k", None)
        fused = _config(path, path.stem, table, lanes)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path} is not a config written by `workbench export` ({type(exc).__name__}: {exc})") from None
    exp = replace(exp, lanes=lanes, embedders=embedders)
    return _config_ranking(exp, fused, dataset, home, log, path.name)


# ---------------------------------------------------------------- decisions

def _strata(per_query) -> list[tuple[str, Any]]:
    out = [("all", per_query)]
    for t in sorted(per_query["query_type"].unique()):
        out.append((t, per_query[per_query["query_type"] == t]))
    return out


def paired_checks(cand, base, measures: Sequence[str], *, policy: GatePolicy = GatePolicy(),
                  seed: int = DEFAULT_SEED) -> list[Check]:
    """Per measure and stratum, the paired non-inferiority decision (see the module docstring) with
    ``policy.margin`` (absolute, in the measure's units) and ``policy.min_queries``."""
    from workbench.eval.stats import bootstrap_ci

    margin, min_queries = policy.margin, policy.min_queries
    joined = cand.merge(base[["query_id", *measures]], on="query_id", how="inner", suffixes=("", "__base"))
    checks = []
    for m in measures:
        for name, part in _strata(joined):
            a = part[m].to_numpy(float)
            b = part[f"{m}__base"].to_numpy(float)
            d = a - b
            n = len(d)
            lo, hi = bootstrap_ci(d, seed) if n else (math.nan, math.nan)
            if n < min_queries:
                status = "too-few"
            elif hi < -margin:
                status = "fail"
            elif lo >= -margin:
                status = "pass"
            else:
                status = "inconclusive"
            checks.append(Check(m, name, n, float(a.mean()) if n else math.nan, float(b.mean()) if n else math.nan,
                                float(d.mean()) if n else math.nan, lo, hi, status))
    return checks


def expected_checks(cand, expected: dict[str, float], *, policy: GatePolicy = GatePolicy()) -> list[Check]:
    """Against expected values ``{"R@10": 0.5, "R@10/term": 0.4}``: fail below expected − δ (``policy.margin``);
    a stratum with fewer than ``policy.min_queries`` queries is too-few.

    Raises:
        ConfigError: an expected value names a measure that was not evaluated or a stratum without queries.
    """
    margin, min_queries = policy.margin, policy.min_queries
    checks = []
    strata = dict(_strata(cand))
    for key, want in expected.items():
        m, _, stratum = key.partition("/")
        stratum = stratum or "all"
        if m not in cand.columns:
            raise ConfigError(f"expected value {key!r} names measure {m!r} that was not evaluated")
        part = strata.get(stratum)
        if part is None:
            raise ConfigError(f"expected value {key!r}: the dataset has no {stratum!r} queries in the gated splits")
        a = part[m].to_numpy(float)
        n = len(a)
        value = float(a.mean()) if n else math.nan
        if n < min_queries:
            status = "too-few"
        else:
            status = "fail" if value < want - margin else "pass"
        checks.append(Check(m, stratum, n, value, float(want), value - float(want), math.nan, math.nan, status,
                            "against the expected value"))
    return checks


def judged_check(run: Run, qrels, queries, *, k: int = 10, policy: GatePolicy = GatePolicy()) -> dict[str, Any]:
    """Mean Judged@k of ``run`` over ``queries`` (a fraction, 0-1) against ``policy.judged_floor``, and the
    unjudged documents of its top k (best-ranked first, at most 50).

    Returns:
        ``{"k", "mean", "floor", "status" (pass | warn | fail: ``policy.judged_action`` below the floor),
        "to_judge": [{"query_id", "doc_id", "rank"}]}``.
    """
    floor, action = policy.judged_floor, policy.judged_action
    judged = {(r.query_id, r.doc_id) for r in qrels}
    fractions, unjudged = [], {}
    for q in queries:
        top = run.get_hits(q.query_id)[:k]
        if not top:
            continue
        hit = sum((q.query_id, h.doc_id) in judged for h in top)
        fractions.append(hit / len(top))
        for rank, h in enumerate(top, 1):
            if (q.query_id, h.doc_id) not in judged:
                unjudged.setdefault((q.query_id, h.doc_id), rank)
    import numpy as np  # here, not at the top: the CLI imports this module for its --help

    mean = float(np.mean(fractions)) if fractions else 0.0
    status = "pass" if mean >= floor else ("fail" if action == "fail" else "warn")
    to_judge = sorted(unjudged.items(), key=lambda x: (x[1], x[0]))[:50]
    return {"k": k, "mean": mean, "floor": floor, "status": status,
            "to_judge": [{"query_id": q, "doc_id": d, "rank": r} for (q, d), r in to_judge]}


def losses(cand: Ranking, base: Ranking | None, cand_pq, base_pq, qrels, measure: str, k: int,
           top: int = 10) -> list[dict[str, Any]]:
    """The queries that lost most on ``measure``, with the relevant documents the baseline had in
    its top k and the candidate did not, and the baseline lanes that had found each one."""
    if base_pq is None:
        return []
    rel = {}
    for r in qrels:
        if r.relevance >= 1:
            rel.setdefault(r.query_id, set()).add(r.doc_id)
    j = cand_pq[["query_id", measure]].merge(base_pq[["query_id", measure]], on="query_id",
                                              suffixes=("", "_base")).set_index("query_id")
    j["diff"] = j[measure] - j[f"{measure}_base"]
    out = []
    for qid, row in j.sort_values("diff").head(top).iterrows():
        if row["diff"] >= 0:
            break
        got = {h.doc_id for h in cand.run.get_hits(qid)[:k]}
        had = [h.doc_id for h in base.run.get_hits(qid)[:k] if h.doc_id in rel.get(qid, set())]
        dropped = []
        for d in had:
            if d in got:
                continue
            lanes = [ln for ln, r in (base.lanes or {}).items() if any(h.doc_id == d for h in r.get_hits(qid))]
            missing = [ln for ln in lanes if ln not in cand.lanes] if cand.lanes else []  # a run file: lanes unknown
            dropped.append({"doc_id": d, "baseline_lanes": lanes, "lanes_missing_in_candidate": missing})
        out.append({"query_id": qid, "candidate": float(row[measure]), "baseline": float(row[f"{measure}_base"]),
                    "diff": float(row["diff"]), "dropped": dropped})
    return out


# ---------------------------------------------------------------- reports

def markdown(res: GateResult) -> str:
    """A summary fit for a pull-request comment."""
    verdict = "❌ regression" if res.exit_code else "✅ pass"
    sha = f", sha256 `{res.qrels_sha256[:12]}`" if res.qrels_sha256 else ""
    lines = [f"### Retrieval gate: {verdict}", "",
             f"**{res.candidate}** vs **{res.baseline}** on `{res.dataset}` (margin δ = {res.margin:g}; "
             f"qrels **{res.qrels}**{sha})", "",
             "| measure | stratum | n | candidate | baseline | Δ | 95% CI of Δ | result |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for c in res.checks:
        ci = "" if math.isnan(c.ci_low) else f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]"
        lines.append(f"| {c.measure} | {c.stratum} | {c.n} | {c.candidate:.4f} | {c.baseline:.4f} | {c.diff:+.4f} | "
                     f"{ci} | {c.status} |")
    j = res.judged
    if j:
        lines += ["", f"Judged@{j['k']} of the candidate: {j['mean']:.3f} (floor {j['floor']:g}): **{j['status']}**"]
        if j["status"] != "pass" and j["to_judge"]:
            lines.append("Judge next: " + ", ".join(f"`{t['query_id']}` → `{t['doc_id']}`" for t in j["to_judge"][:10]))
    if res.losses:
        lines += ["", "Queries that lost most:", ""]
        for loss in res.losses[:10]:
            why = "; ".join(f"`{d['doc_id']}` (found by {', '.join(d['baseline_lanes']) or 'the baseline'}"
                            + (f"; missing lanes: {', '.join(d['lanes_missing_in_candidate'])}"
                               if d["lanes_missing_in_candidate"] else "") + ")" for d in loss["dropped"][:3])
            lines.append(f"- `{loss['query_id']}`: {loss['baseline']:.3f} → {loss['candidate']:.3f}"
                         + (f" — dropped {why}" if why else ""))
    for w in res.warnings:
        lines.append(f"\n> note: {w}")
    return "\n".join(lines) + "\n"


def _junit_suite(res: GateResult) -> ET.Element:
    """One ``<testsuite>``: a test case per check (failure, or skipped when inconclusive or too-few) and
    one for judged coverage."""
    suite = ET.Element("testsuite", name=f"gate {res.candidate}")
    classname = f"gate.{res.dataset}.{res.candidate}"
    failures = 0
    for c in res.checks:
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"{c.measure} [{c.stratum}]")
        if c.status == "fail":
            failures += 1
            ET.SubElement(case, "failure", message=f"{c.measure} fell by {-c.diff:.4f} beyond the margin "
                                                   f"{res.margin:g}").text = json.dumps(c.to_json(), default=str)
        elif c.status in ("inconclusive", "too-few"):
            ET.SubElement(case, "skipped", message=c.status)
    j = res.judged
    if j:
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"Judged@{j['k']}")
        if j["status"] == "fail":
            failures += 1
            ET.SubElement(case, "failure", message="judged coverage below the floor")
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    return suite


def junit(results: Sequence[GateResult]) -> str:
    """JUnit XML of the gate's results: one ``<testsuite>`` per result (a ``<testsuites>`` root around
    them when there are several, with the total tests and failures), one test case per check and one
    for judged coverage. Built with :mod:`xml.etree.ElementTree`, so names are escaped."""
    suites = [_junit_suite(r) for r in results]
    if len(suites) == 1:
        root = suites[0]
    else:
        root = ET.Element("testsuites", tests=str(sum(int(s.get("tests")) for s in suites)),
                          failures=str(sum(int(s.get("failures")) for s in suites)))
        root.extend(suites)
    ET.indent(root, space="")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@dataclass
class GateReport:
    """One run of ``workbench gate``: what ``<home>/gates/gate-<UTC time>-<pid>.json`` holds and the
    dashboard's gate page shows (the newest file is its "latest gate").

    Attributes:
        created: when the gate ran (UTC; the file keeps it to the second, ISO 8601); None for a file
            without it.
        command: the command line that ran it (argv).
        exit_code: 0 pass, 1 regression: the largest of the results' (:meth:`of`), as recorded.
        results: one :class:`GateResult` per gated pair or expected-values config.

    The JSON object has the keys ``created``, ``command``, ``exit_code`` and ``results``
    (:meth:`GateResult.to_json` of each); files written before this class existed have the same
    layout and load as they are.
    """

    created: _dt.datetime | None
    command: list[str]
    exit_code: int
    results: list[GateResult]

    @classmethod
    def of(cls, results: Sequence[GateResult], command: Sequence[str]) -> GateReport:
        """A report of ``results`` made now."""
        return cls(_dt.datetime.now(_dt.timezone.utc), list(command), max((r.exit_code for r in results), default=0),
                   list(results))

    @property
    def verdict(self) -> str:
        """``pass`` or ``regression`` (exit code 0 or 1)."""
        return "regression" if self.exit_code else "pass"

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to the report file."""
        return {"created": self.created.isoformat(timespec="seconds") if self.created else None,
                "command": list(self.command), "exit_code": self.exit_code,
                "results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, body: Any, source: str | Path) -> GateReport:
        """The inverse of :meth:`to_json`; ``source`` (the file) is named in errors.

        Raises:
            DataError: not a gate report (not an object, no non-empty ``results`` list), or an incomplete
                one (a missing or malformed key: the message names the file and the key).
        """
        if not isinstance(body, dict) or not isinstance(body.get("results"), list) or not body["results"]:
            raise DataError(f"{source} is not a gate report (no 'results' list); `workbench gate` writes them")
        try:
            created = body.get("created")
            command = body.get("command") or []
            if not isinstance(command, list):
                raise TypeError(f"command must be a list, not {type(command).__name__}")
            return cls(_dt.datetime.fromisoformat(created) if created else None, [str(x) for x in command],
                       int(body.get("exit_code", 0)), [GateResult.from_json(r) for r in body["results"]])
        except (TypeError, KeyError, ValueError) as exc:
            raise DataError(f"{source} is not a complete gate report ({type(exc).__name__}: {exc}); `workbench gate` "
                            "writes them") from None

    def save(self, home: Path) -> Path:
        """Write the report to ``<home>/gates/gate-<created, UTC to the microsecond>-<pid>.json``; returns the path.

        Written atomically (:func:`workbench.durable.atomic_write_json`: a temporary file, ``fsync``,
        rename), so a reader never sees half a report and a failed write leaves nothing behind.

        Raises:
            StorageError: the folder cannot be created or written (a full disk, a read-only home); the
                message names the path and the fix.
        """
        import os

        from workbench import durable

        created = self.created or _dt.datetime.now(_dt.timezone.utc)
        folder = home / "gates"
        path = folder / f"gate-{created:%Y%m%dT%H%M%S%fZ}-{os.getpid()}.json"
        body = self.to_json()
        durable.mkdirs(folder)
        durable.remove_temporaries(folder)
        return durable.atomic_write_json(path, body, ensure_ascii=True)

    @classmethod
    def load(cls, path: Path) -> GateReport:
        """Read a report file (:meth:`save`'s, or one written before this class existed).

        Raises:
            DataError: unreadable, not JSON, or not a (complete) gate report; the message names the file.
        """
        try:
            body = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"cannot read the gate report {path}: {exc}") from None
        return cls.from_json(body, path)


# ---------------------------------------------------------------- gate files

#: The keys of a gate file besides the policy's (:class:`GatePolicy`'s fields).
GATE_FILE_KEYS = ("experiment", "splits", "expected", "description", "qrels")


@dataclass(frozen=True)
class GateFile:
    """A checked gate file (``experiments/gate-*.toml``).

    Attributes:
        path: the file.
        experiment: the experiment TOML whose configs it gates (relative paths resolved against the
            file's folder).
        expected: dataset -> config -> ``measure`` or ``measure/query type`` (canonical measure names,
            ``MRR@10`` is ``RR@10``) -> the expected mean (the measure's units, 0-1).
        policy: the file's ``margin``, ``min_queries``, ``judged_floor``, ``judged_action`` over the
            defaults (:class:`GatePolicy`).
        splits: the splits gated (all when the file names none).
        qrels: the qrels layer the file names; None: its experiment's.
        description: free text.
    """

    path: Path
    experiment: Path
    expected: dict[str, dict[str, dict[str, float]]]
    policy: GatePolicy
    splits: tuple[str, ...]
    qrels: str | None = None
    description: str = ""


def load_gate_file(path: Path) -> GateFile:
    """Read and check a gate file: experiment, dataset(s), policy, expected values per config.

    Layout::

        experiment = "seeds.toml"
        margin = 0.01            # the policy's keys (GatePolicy); each optional
        min_queries = 30
        judged_floor = 0.0
        judged_action = "warn"
        [expected.gita.aicharya-rrf60-ref]
        "R@10" = 0.70
        "R@10/reference" = 0.93

    Raises:
        ConfigError: a missing or malformed file, an unknown key, a policy value out of range or of the
            wrong type, a bad measure; the message names the file and the key.
    """
    from workbench.eval.evaluate import parse_measures

    raw = read_toml(path, "gate")
    extra = set(raw) - set(GATE_FILE_KEYS) - set(GatePolicy.model_fields)
    if extra:
        raise ConfigError(f"{path}: unknown key(s) {sorted(extra)}")
    if not isinstance(raw.get("experiment"), str):
        raise ConfigError(f"{path}: experiment must name an experiment TOML (relative to this file)")
    policy = GatePolicy.from_mapping({k: raw[k] for k in GatePolicy.model_fields if k in raw}, str(path))
    if "qrels" in raw:
        from workbench.judging.layers import check_layer

        check_layer(raw["qrels"], f"{path}: qrels")
    splits = raw.get("splits", list(SPLITS))
    if not isinstance(splits, list) or not splits or any(x not in SPLITS for x in splits):
        raise ConfigError(f"{path}: splits must be a non-empty list of {', '.join(SPLITS)}")
    exp = raw.get("expected")
    if not isinstance(exp, dict) or not exp:
        raise ConfigError(f"{path}: [expected.DATASET.CONFIG] tables with measure = value are missing")
    expected: dict[str, dict[str, dict[str, float]]] = {}
    for ds, configs in exp.items():
        if not isinstance(configs, dict) or not configs:
            raise ConfigError(f"{path}: expected.{ds} must hold [expected.{ds}.CONFIG] tables")
        expected[ds] = {}
        for cfg, values in configs.items():
            if not isinstance(values, dict) or not values or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values.values()):
                raise ConfigError(f"{path}: expected.{ds}.{cfg} must map measures to finite numbers")
            canonical = {}
            for key, v in values.items():
                m, _, stratum = key.partition("/")
                try:
                    name = str(parse_measures([m])[0])
                except ConfigError as exc:
                    raise ConfigError(f"{path}: expected.{ds}.{cfg}: {key!r}: {exc}") from None
                canonical[f"{name}/{stratum}" if stratum else name] = float(v)
            expected[ds][cfg] = canonical
    return GateFile(Path(path), Path(path).parent / raw["experiment"], expected, policy, tuple(splits),
                    raw.get("qrels"), str(raw.get("description", "")))


# ---------------------------------------------------------------- the gate

def _evaluate(ranking: Ranking, dataset, splits: Sequence[str], measures: Sequence[str]):
    from workbench.eval.evaluate import evaluate

    queries = [q for q in dataset.queries if q.split in splits]
    ev = evaluate(ranking.run, dataset.qrels, queries, list(measures))
    ranking.warnings.extend(f"{ranking.label}: {w}" for w in ev.warnings)
    return ev.per_query, queries


def _judged_by(dataset, layer, splits: Sequence[str]):
    """``dataset`` as ``layer`` judges it (None: the built qrels as they are)."""
    if layer is None:
        return dataset
    from workbench.judging.layers import evaluation_view

    return evaluation_view(dataset, layer, splits)


def _stamp(res: GateResult, layer) -> GateResult:
    if layer is not None:
        res.qrels, res.qrels_sha256 = layer.layer, layer.sha256
        if layer.stale:
            res.warnings.append(f"{layer.stale} stale human judgment(s) of {res.dataset} were left out (the document "
                                "changed since); re-judge them")
    return res


def gate_pair(candidate: Ranking, baseline: Ranking, dataset, *, measures: Sequence[str] = DEFAULT_MEASURES,
              policy: GatePolicy = GatePolicy(), splits: Sequence[str] = SPLITS, seed: int = DEFAULT_SEED,
              judged_k: int = 10, layer: Any = None) -> GateResult:
    """Candidate vs a baseline ranking: paired decisions per measure and stratum, judged coverage, losses.

    Args:
        measures: canonical measure names; the first is the one losses are listed by.
        policy: margin, min_queries, judged floor and action (:class:`GatePolicy`; default: its defaults).
        splits: the query splits gated.
        seed: the bootstrap seed.
        judged_k: the depth of the Judged@k check.
        layer: the qrels to judge by (:class:`workbench.judging.layers.LayerQrels` of ``dataset``);
            None: ``dataset.qrels`` as they are.

    Raises:
        JudgeError: ``human`` and no query of ``splits`` has a human grade.
    """
    dataset = _judged_by(dataset, layer, splits)
    cand_pq, queries = _evaluate(candidate, dataset, splits, measures)
    base_pq, _ = _evaluate(baseline, dataset, splits, measures)
    checks = paired_checks(cand_pq, base_pq, measures, policy=policy, seed=seed)
    judged = judged_check(candidate.run, dataset.qrels, queries, k=judged_k, policy=policy)
    k = int(str(measures[0]).rsplit("@", 1)[1]) if "@" in str(measures[0]) else 10
    lost = losses(candidate, baseline, cand_pq, base_pq, dataset.qrels, measures[0], k)
    return _stamp(GateResult(dataset.name, candidate.label, baseline.label, policy.margin, checks, judged, lost,
                             list(dict.fromkeys(candidate.warnings + baseline.warnings))), layer)


def gate_expected(candidate: Ranking, expected: dict[str, float], dataset, *, policy: GatePolicy = GatePolicy(),
                  splits: Sequence[str] = SPLITS, judged_k: int = 10, layer: Any = None) -> GateResult:
    """Candidate vs expected values kept as data (the other arguments as for :func:`gate_pair`).

    Raises:
        ConfigError: an expected value names a measure or stratum that was not evaluated.
        JudgeError: ``human`` and no query of ``splits`` has a human grade.
    """
    dataset = _judged_by(dataset, layer, splits)
    measures = list(dict.fromkeys(k.partition("/")[0] for k in expected))
    cand_pq, queries = _evaluate(candidate, dataset, splits, measures)
    checks = expected_checks(cand_pq, expected, policy=policy)
    judged = judged_check(candidate.run, dataset.qrels, queries, k=judged_k, policy=policy)
    return _stamp(GateResult(dataset.name, candidate.label, "expected values", policy.margin, checks, judged, [],
                             list(dict.fromkeys(candidate.warnings))), layer)


# ---------------------------------------------------------------- what `workbench gate` runs

class _Layers:
    """The qrels layer of each dataset, loaded once and described in the log; the judgment store is
    opened only for a layer other than ``built``, and closed when the ``with`` block ends."""

    def __init__(self, layer: str, home: Path, log: Callable[[str], None]):
        self.layer, self.home, self.log = layer, home, log
        self.store = None
        self.loaded: dict[str, Any] = {}

    def __call__(self, ds) -> Any:
        from workbench.judging import layers

        if ds.name not in self.loaded:
            if self.layer != "built" and self.store is None:
                from workbench.judging.store import JudgmentStore

                self.store = JudgmentStore.open(self.home)
            self.loaded[ds.name] = layers.load_layer(self.layer, ds, store=self.store)
            self.log(self.loaded[ds.name].describe())
        return self.loaded[ds.name]

    def __enter__(self) -> _Layers:
        return self

    def __exit__(self, *_exc) -> None:
        if self.store is not None:
            self.store.close()


def _checked(splits: Sequence[str], qrels: str | None) -> tuple[tuple[str, ...], str | None]:
    """``--split`` values and ``--qrels``, checked.

    Raises:
        ConfigError: a split that is not one, an unknown qrels layer.
    """
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise ConfigError(f"--split {bad[0]!r} is not a split; use {', '.join(SPLITS)}")
    if qrels is not None:
        from workbench.judging.layers import check_layer

        qrels = check_layer(qrels, "--qrels")
    return tuple(splits), qrels


def run_gate_file(path: Path, *, home: Path, options: Mapping[str, Any] | None = None, splits: Sequence[str] = (),
                  qrels: str | None = None, log: Callable[[str], None] = lambda _m: None) -> list[GateResult]:
    """``workbench gate GATE_FILE``: each config of the file against its expected values.

    Args:
        path: the gate file (:func:`load_gate_file`).
        home: the workbench home (built datasets, the candidate cache, the judgment store).
        options: policy values given on the command line (:class:`GatePolicy` field -> value; None: not
            given); they override the file's, which override the defaults.
        splits: the splits to gate (empty: the file's, else all).
        qrels: the qrels layer (None: the file's, else its experiment's, else ``built``).

    Raises:
        ConfigError: a bad gate file, option, split, layer or dataset (names the file, key or option).
        WorkbenchError: a config that cannot be gated; the message names the file and its
            ``[expected.DATASET.CONFIG]`` table.
    """
    from workbench.data import catalog
    from workbench.errors import WorkbenchError

    splits, qrels = _checked(splits, qrels)
    gf = load_gate_file(path)
    policy = gf.policy.override(options or {})
    layer = qrels or gf.qrels or experiment_layer(gf.experiment) or "built"
    log(f"qrels layer: {layer}")
    defs = catalog.load_definitions()
    results = []
    with _Layers(layer, home, log) as layer_of:
        for ds_name, configs in gf.expected.items():
            if ds_name not in defs.datasets:
                raise ConfigError(f"{path}: expected.{ds_name} names an unknown dataset; known: "
                                  f"{', '.join(defs.datasets)}")
            ds = catalog.ensure(ds_name, defs, home=home, log=log)
            for cfg_name, values in configs.items():
                try:
                    cand = load_source(f"{gf.experiment}:{cfg_name}", ds, home=home, log=log)
                    results.append(gate_expected(cand, values, ds, policy=policy, splits=splits or gf.splits,
                                                 layer=layer_of(ds)))
                except WorkbenchError as exc:
                    raise WorkbenchError(f"{path}: [expected.{ds_name}.{cfg_name}]: {exc}") from None
    return results


def run_pair(candidate: str, baseline: str, dataset: str, *, home: Path, measures: Sequence[str] = DEFAULT_MEASURES,
             options: Mapping[str, Any] | None = None, splits: Sequence[str] = (), qrels: str | None = None,
             seed: int = DEFAULT_SEED, log: Callable[[str], None] = lambda _m: None) -> GateResult:
    """``workbench gate --candidate SOURCE --baseline SOURCE --dataset NAME``: the paired gate.

    Args:
        candidate, baseline: ranking sources (:func:`load_source`).
        dataset: the dataset whose queries and qrels judge both.
        measures: the measures to gate (aliases allowed: ``MRR@10`` is ``RR@10``); the first is the one
            losses are listed by.
        options: policy values given on the command line (None: not given) over :class:`GatePolicy`'s
            defaults: the same defaults a gate file starts from.
        splits: the splits to gate (empty: all).
        qrels: the qrels layer (None: the experiments' the sources name, which must agree, else ``built``).
        seed: the bootstrap seed.

    Raises:
        ConfigError: a bad option, measure, split, layer or dataset; sources whose experiments name
            different layers.
        WorkbenchError: a source that cannot be read (the message starts with ``--candidate`` or
            ``--baseline``).
    """
    from workbench.data import catalog
    from workbench.errors import WorkbenchError
    from workbench.eval.evaluate import parse_measures

    policy = GatePolicy().override(options or {})
    splits, qrels = _checked(splits, qrels)
    measures = list(dict.fromkeys(str(m) for m in parse_measures(list(measures))))  # canonical: MRR@10 -> RR@10
    defs = catalog.load_definitions()
    if dataset not in defs.datasets:
        raise ConfigError(f"--dataset {dataset!r} is unknown; known: {', '.join(defs.datasets)}")
    layer = qrels
    if layer is None:
        named = {"--candidate": source_layer(candidate), "--baseline": source_layer(baseline)}
        found = {v for v in named.values() if v is not None}
        if len(found) > 1:
            raise ConfigError(f"the candidate's experiment uses qrels {named['--candidate']!r} and the "
                              f"baseline's {named['--baseline']!r}; pass --qrels to judge both by one layer")
        layer = found.pop() if found else "built"
    log(f"qrels layer: {layer}")
    ds = catalog.ensure(dataset, defs, home=home, log=log)
    sources = {}
    for opt, spec in (("--candidate", candidate), ("--baseline", baseline)):
        try:
            sources[opt] = load_source(spec, ds, home=home, log=log)
        except WorkbenchError as exc:
            raise WorkbenchError(f"{opt}: {exc}") from None
    with _Layers(layer, home, log) as layer_of:
        return gate_pair(sources["--candidate"], sources["--baseline"], ds, measures=measures, policy=policy,
                         splits=splits or SPLITS, seed=seed, layer=layer_of(ds))
