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

**Qrels layer.** Both rankings are judged by one qrels layer (:mod:`workbench.judging.layers`):
``--qrels``, else the gate file's ``qrels``, else the experiment's (a gate file's experiment,
or the experiments the candidate and baseline name, which must then agree), else ``built``.
Under ``human`` only queries with a human grade are gated. The result and its report name
the layer and the hash of its qrels.

Exit codes (CLI): 0 pass, 1 regression, 2 usage or data error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from workbench.errors import ConfigError, DataError
from workbench.run import Run
from workbench.tomlfile import read_toml
from workbench.stats import bootstrap_ci



@dataclass
class Ranking:
    """A ranking to gate: the fused run, the lanes' runs (when known) and a label."""

    label: str
    run: Run
    lanes: dict[str, Run] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Check:
    """One decision: measure × stratum."""

    measure: str
    stratum: str
    n: int
    candidate: float
    baseline: float
    diff: float
    ci_low: float
    ci_high: float
    status: str  # pass | fail | inconclusive | too-few
    note: str = ""


@dataclass
class GateResult:
    """Everything the gate found; ``exit_code`` 0 pass, 1 regression."""

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
    from workbench.cache import CandidateCache
    from workbench.job import Engine, fused_run, lane_candidates

    sub = replace(exp, configs={cfg.name: cfg}, splits=("train", "dev", "test"))
    key = (str(exp.path), json.dumps(exp.embedders, sort_keys=True, default=str), str(home))
    engine = _ENGINES.get(key)
    if engine is None:
        engine = _ENGINES[key] = Engine(sub, home, False, log)
    engine.exp = sub
    cache = CandidateCache(home / "cache" / "candidates")
    lanes = lane_candidates(sub, dataset, engine, cache, log)
    runs = {n: lanes[n].run for n in cfg.lanes}
    return Ranking(label, fused_run(cfg, runs), runs)


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
                exp_file = Path(__file__).resolve().parent.parent / exp_file
            return experiment_layer(exp_file)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None


def experiment_layer(path: Path) -> str | None:
    """The ``qrels`` layer an experiment file declares (``built`` when it declares none); None when the
    file does not load (its own error comes when it is read)."""
    from workbench.experiment import load_experiment
    from workbench.errors import WorkbenchError

    try:
        return load_experiment(Path(path)).qrels
    except WorkbenchError:
        return None


def _from_experiment(path: Path, config: str, dataset, home: Path, log) -> Ranking:
    from workbench.experiment import load_experiment

    exp = load_experiment(path)
    if config not in exp.configs:
        raise ConfigError(f"{path} has no config {config!r}; configs: {', '.join(exp.configs)}")
    if dataset.name not in exp.datasets:
        log(f"note: {path.name} does not list dataset {dataset.name}; its lanes run on it anyway")
    return _config_ranking(exp, exp.configs[config], dataset, home, log, f"{path.name}:{config}")


def _from_export(path: Path, dataset, home: Path, log) -> Ranking:
    """An exported production config: lanes with their engine parameters, fusion parameters."""
    from workbench.experiment import LaneSpec, load_experiment

    from workbench.experiment import LANE_KINDS, _check_table, _config

    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
        exp_file = Path(cfg["provenance"]["experiment"])
        if not exp_file.is_absolute() and not exp_file.exists():
            exp_file = Path(__file__).resolve().parent.parent / exp_file  # written relative to the repository
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
            kind, params = _check_table(path, f"lanes.{name}", spec, LANE_KINDS)
            lanes[name] = LaneSpec(name, kind, params)
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


def paired_checks(cand, base, measures: Sequence[str], *, margin: float, min_queries: int,
                  seed: int) -> list[Check]:
    """Per measure and stratum, the paired non-inferiority decision (see the module docstring)."""
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


def expected_checks(cand, expected: dict[str, float], *, margin: float, min_queries: int) -> list[Check]:
    """Against expected values ``{"R@10": 0.5, "R@10/term": 0.4}``: fail below expected − δ."""
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


def judged_check(run: Run, qrels, queries, *, k: int, floor: float, action: str) -> dict[str, Any]:
    """Mean Judged@k of ``run`` over ``queries`` and the unjudged documents of its top k (best-ranked first)."""
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


def junit(res: GateResult) -> str:
    """JUnit XML: one test case per check (and one for judged coverage)."""
    from xml.sax.saxutils import escape, quoteattr

    cases = []
    for c in res.checks:
        name = quoteattr(f"{c.measure} [{c.stratum}]")
        body = ""
        if c.status == "fail":
            body = (f"<failure message={quoteattr(f'{c.measure} fell by {-c.diff:.4f} beyond the margin {res.margin:g}')}>"
                    f"{escape(json.dumps(c.__dict__, default=str))}</failure>")
        elif c.status in ("inconclusive", "too-few"):
            body = f"<skipped message={quoteattr(c.status)}/>"
        cases.append(f'<testcase classname={quoteattr(f"gate.{res.dataset}.{res.candidate}")} name={name}>{body}'
                     '</testcase>')
    j = res.judged
    if j:
        body = f"<failure message={quoteattr('judged coverage below the floor')}/>" if j["status"] == "fail" else ""
        cases.append(f'<testcase classname={quoteattr(f"gate.{res.dataset}.{res.candidate}")} name="Judged@{j["k"]}">'
                     f'{body}</testcase>')
    fails = sum("<failure" in c for c in cases)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(f"gate {res.candidate}")} tests="{len(cases)}" '
            f'failures="{fails}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def to_dict(res: GateResult) -> dict[str, Any]:
    """A JSON-ready dict of a :class:`GateResult` (what the dashboard's gate page reads)."""
    d = {k: v for k, v in res.__dict__.items() if k != "checks"}
    d["checks"] = [c.__dict__ for c in res.checks]
    d["exit_code"] = res.exit_code
    return json.loads(json.dumps(d, default=str, allow_nan=True))


def save_report(results: Sequence[GateResult], home: Path, command: Sequence[str]) -> Path:
    """Write the gate's results to ``<home>/gates/gate-<UTC time>-<pid>.json`` and return the path.

    The file holds ``created`` (ISO 8601, UTC), ``command`` (argv), ``exit_code`` and
    ``results`` (:func:`to_dict` of each); the newest is the dashboard's "latest gate".
    It is written atomically (:func:`workbench.durable.atomic_write_json`: a temporary
    file, ``fsync``, rename), so a reader never sees half a report and a failed write
    leaves nothing behind.

    Raises:
        StorageError: the folder cannot be created or written (a full disk, a read-only
            home); the message names the path and the fix.
    """
    import datetime as _dt
    import os

    from workbench import durable

    now = _dt.datetime.now(_dt.timezone.utc)
    folder = home / "gates"
    path = folder / f"gate-{now:%Y%m%dT%H%M%S%fZ}-{os.getpid()}.json"
    body = {"created": now.isoformat(timespec="seconds"), "command": list(command),
            "exit_code": max((r.exit_code for r in results), default=0), "results": [to_dict(r) for r in results]}
    durable.mkdirs(folder)
    durable.remove_temporaries(folder)
    return durable.atomic_write_json(path, body, ensure_ascii=True)


# ---------------------------------------------------------------- gate files

def load_gate_file(path: Path) -> dict[str, Any]:
    """A gate file (``experiments/gate-*.toml``): experiment, dataset(s), margin, expected values per config.

    Layout::

        experiment = "seeds.toml"
        margin = 0.01
        min_queries = 30
        [expected.gita.aicharya-rrf60-ref]
        "R@10" = 0.70
        "R@10/reference" = 0.93

    Raises:
        ConfigError: a missing or malformed file (names the key).
    """
    from workbench.evaluate import parse_measures

    raw = read_toml(path, "gate")
    extra = set(raw) - {"experiment", "margin", "min_queries", "judged_floor", "judged_action", "splits", "expected",
                        "description", "qrels"}
    if extra:
        raise ConfigError(f"{path}: unknown key(s) {sorted(extra)}")
    if not isinstance(raw.get("experiment"), str):
        raise ConfigError(f"{path}: experiment must name an experiment TOML (relative to this file)")
    def bad(key, msg):
        return ConfigError(f"{path}: {key} {msg}")

    def number(v, lo, hi):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi

    if "margin" in raw and not number(raw["margin"], 0, 1):
        raise bad("margin", "must be a number in [0, 1] (an absolute difference of the measure)")
    if "min_queries" in raw and not (isinstance(raw["min_queries"], int) and not isinstance(raw["min_queries"], bool)
                                     and raw["min_queries"] >= 1):
        raise bad("min_queries", "must be an integer >= 1")
    if "judged_floor" in raw and not number(raw["judged_floor"], 0, 1):
        raise bad("judged_floor", "must be a number in [0, 1]")
    if raw.get("judged_action", "warn") not in ("warn", "fail"):
        raise bad("judged_action", "must be \"warn\" or \"fail\"")
    if "qrels" in raw:
        from workbench.judging.layers import check_layer

        check_layer(raw["qrels"], f"{path}: qrels")
    from workbench.types import SPLITS

    splits = raw.get("splits", list(SPLITS))
    if not isinstance(splits, list) or not splits or any(x not in SPLITS for x in splits):
        raise bad("splits", f"must be a non-empty list of {', '.join(SPLITS)}")
    exp = raw.get("expected")
    if not isinstance(exp, dict) or not exp:
        raise ConfigError(f"{path}: [expected.DATASET.CONFIG] tables with measure = value are missing")
    for ds, configs in exp.items():
        if not isinstance(configs, dict) or not configs:
            raise ConfigError(f"{path}: expected.{ds} must hold [expected.{ds}.CONFIG] tables")
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
                canonical[f"{name}/{stratum}" if stratum else name] = v
            configs[cfg] = canonical
    return raw


# ---------------------------------------------------------------- the gate

def _evaluate(ranking: Ranking, dataset, splits: Sequence[str], measures: Sequence[str]):
    from workbench.evaluate import evaluate

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


def gate_pair(candidate: Ranking, baseline: Ranking, dataset, *, measures: Sequence[str], margin: float,
              min_queries: int, splits: Sequence[str], judged_floor: float, judged_action: str, seed: int,
              judged_k: int = 10, layer: Any = None) -> GateResult:
    """Candidate vs a baseline ranking: paired decisions per measure and stratum, judged coverage, losses.

    Args:
        layer: the qrels to judge by (:class:`workbench.judging.layers.LayerQrels` of ``dataset``);
            None: ``dataset.qrels`` as they are.

    Raises:
        JudgeError: ``human`` and no query of ``splits`` has a human grade.
    """
    dataset = _judged_by(dataset, layer, splits)
    cand_pq, queries = _evaluate(candidate, dataset, splits, measures)
    base_pq, _ = _evaluate(baseline, dataset, splits, measures)
    checks = paired_checks(cand_pq, base_pq, measures, margin=margin, min_queries=min_queries, seed=seed)
    judged = judged_check(candidate.run, dataset.qrels, queries, k=judged_k, floor=judged_floor, action=judged_action)
    k = int(str(measures[0]).rsplit("@", 1)[1]) if "@" in str(measures[0]) else 10
    lost = losses(candidate, baseline, cand_pq, base_pq, dataset.qrels, measures[0], k)
    return _stamp(GateResult(dataset.name, candidate.label, baseline.label, margin, checks, judged, lost,
                             list(dict.fromkeys(candidate.warnings + baseline.warnings))), layer)


def gate_expected(candidate: Ranking, expected: dict[str, float], dataset, *, margin: float, min_queries: int,
                  splits: Sequence[str], judged_floor: float, judged_action: str, judged_k: int = 10,
                  layer: Any = None) -> GateResult:
    """Candidate vs expected values kept as data (``layer`` as for :func:`gate_pair`).

    Raises:
        ConfigError: an expected value names a measure or stratum that was not evaluated.
        JudgeError: ``human`` and no query of ``splits`` has a human grade.
    """
    dataset = _judged_by(dataset, layer, splits)
    measures = list(dict.fromkeys(k.partition("/")[0] for k in expected))
    cand_pq, queries = _evaluate(candidate, dataset, splits, measures)
    checks = expected_checks(cand_pq, expected, margin=margin, min_queries=min_queries)
    judged = judged_check(candidate.run, dataset.qrels, queries, k=judged_k, floor=judged_floor, action=judged_action)
    return _stamp(GateResult(dataset.name, candidate.label, "expected values", margin, checks, judged, [],
                             list(dict.fromkeys(candidate.warnings))), layer)
