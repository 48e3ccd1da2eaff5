"""Tuning studies with Optuna over cached lane candidates (issue #5).

``run_study`` is what ``workbench tune`` calls:

1. the dataset is loaded; each lane's candidates come from the candidate cache of the
   main job (:func:`workbench.experiment.runner.lane_candidates`), or are computed once and cached;
2. every trial draws a point (:func:`workbench.tuning.space.suggest`). **Fusion-only**
   parameters (method, k, weights, depths, lanes on/off, min_score, top_k) are scored
   in memory by :class:`workbench.eval.fasteval.CandidateMatrix` on the study's split (no
   database, no model). **Engine** parameters (``engine.<lane>.<param>``) pick a lane
   variant: its candidates are fetched once per distinct setting (cache, or the engine
   on a miss) and every later trial with that setting reuses them;
3. the objective is the measure's mean on the split, or a weighted mean of per-query-type
   means, judged by the study's qrels layer (``built``, ``human`` or ``merged``:
   :mod:`workbench.judging.layers`; under ``human`` only queries with a human grade count);
   with ``latency = true`` also the p95 latency (ms, sum of the lanes' cached per-query
   latencies), minimised, so the study returns a Pareto front;
4. the baseline config is enqueued as trial 0; the sampler (TPE, or NSGA-II for two
   objectives) is seeded, so a study is reproducible, and a process that does not get
   consecutive trial numbers reseeds from (seed, trial number), so processes sharing a
   study never draw the same points (:func:`seeded_sampler`); storage is a journal file
   under ``<home>/studies/<name>/`` (resumable: a killed study continues where it stopped;
   a cut last record is dropped when it is opened, :func:`open_journal`), memory, or a
   PostgreSQL URL (``--workers N`` processes share it). On resume, trials left running by
   a dead process are failed and a baseline that never completed is enqueued again
   (:func:`fail_dead_trials`, :func:`ensure_baseline`);
5. the chosen trial (the flattest among those within ``tolerance`` of the best, by the
   sensitivity report) is re-evaluated with ir_measures on the dev and test splits,
   with bootstrap confidence intervals and a paired randomisation test against the
   baseline config (:func:`honest_report`).

Statistics: :mod:`workbench.eval.stats` (percentile bootstrap, paired sign-flip randomisation
test), with the study's seed.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from workbench.durable import atomic_path, atomic_write_json, atomic_write_text, mkdirs, remove_temporaries, \
    repair_jsonl_tail, storage_error
from workbench.errors import ConfigError, DataError, StorageError, WorkbenchError
from workbench.eval.fasteval import CandidateMatrix
from workbench.eval.fusion import FusionSpec
from workbench.tuning.space import Range, Study, baseline_params, suggest
from workbench.eval.stats import bootstrap_ci, paired_test
from workbench.settings import PROJECT_ROOT


_UNSET = object()


def study_dir(home: Path, name: str) -> Path:
    """``<home>/studies/<name>``: journal, report, plots, export."""
    return Path(home) / "studies" / name


# ---------------------------------------------------------------- candidates

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


# ---------------------------------------------------------------- settings

def setting_from(study: Study, params: dict[str, Any]) -> FusionSpec | None:
    """The fusion setting of a trial's parameters on top of the baseline config (``None``: every lane off)."""
    cfg = study.experiment.configs[study.baseline]
    lanes = tuple(ln for ln in study.lanes if params.get(f"lanes.{ln}", ln in cfg.lanes))
    if not lanes:
        return None
    method = params.get("fusion", cfg.method)
    if method == "none" and len(lanes) > 1:
        method = "rrf"
    if len(lanes) == 1 and "fusion" not in params and cfg.method == "none":
        method = "none"
    weights = {ln: float(params.get(f"weights.{ln}", (cfg.weights or {}).get(ln, 1.0))) for ln in lanes}
    base_depth = cfg.depth
    depth = {}
    for ln in lanes:
        d = params.get(f"depth.{ln}", base_depth.get(ln) if isinstance(base_depth, dict) else base_depth)
        if d is not None:
            depth[ln] = int(d)
    min_score = params.get("min_score", cfg.min_score)
    tb = cfg.tiebreak_lane if cfg.tiebreak_lane in lanes else None
    return FusionSpec(lanes, method, float(params.get("k", cfg.k)), weights, depth or None,
                      params.get("norm", cfg.norm), min_score, int(params.get("top_k", cfg.top_k)), tb)


def baseline_setting(study: Study) -> FusionSpec:
    """The baseline config exactly as written (not projected into the space)."""
    cfg = study.experiment.configs[study.baseline]
    return FusionSpec(cfg.lanes, cfg.method, cfg.k, cfg.weights, cfg.depth, cfg.norm, cfg.min_score, cfg.top_k,
                      cfg.tiebreak_lane)


def objective_value(study: Study, m: CandidateMatrix, s: FusionSpec | None, queries: dict) -> float:
    """The study's objective on matrix ``m``: the measure's mean, or the weighted mean of per-type means."""
    if s is None or not m.query_ids:
        return 0.0
    vals = m.evaluate(s, [study.measure])[study.measure]
    if not study.type_weights:
        return float(vals.mean())
    types = np.array([queries[q].query_type for q in m.query_ids])
    num = den = 0.0
    for t, w in study.type_weights.items():
        mask = types == t
        if mask.any() and w > 0:
            num += w * float(vals[mask].mean())
            den += w
    return num / den if den else 0.0


# ---------------------------------------------------------------- the study report (report.json)
#
# Each type below turns into the JSON report.json has always held (to_json) and back (from_json);
# StudyReport.save and StudyReport.load write and read the file. from_json raises KeyError,
# TypeError or ValueError on a missing or malformed field; StudyReport.from_json turns them into a
# DataError naming the file.

#: The key of a split's per-query-type table in report.json: the table is of the study's objective
#: measure, which the key names ("R@10 by query_type"). Written and read only here.
_BY_TYPE_KEY = "{measure} by query_type"


def _pair(v: Any) -> tuple[float, float]:
    lo, hi = v
    return float(lo), float(hi)


#: How :class:`_Record` reads a field of each annotated type.
_READ = {"str": str, "int": int, "float": float, "tuple[float, float]": _pair}


class _Record:
    """``to_json`` / ``from_json`` of a flat frozen dataclass whose fields are ``str``, ``int``, ``float``
    or ``tuple[float, float]`` (a CI, a JSON list): ``from_json`` converts each field by its type and
    takes a field's default when the key is absent."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]):
        import dataclasses

        return cls(**{f.name: _READ[f.type](d[f.name]) for f in dataclasses.fields(cls)
                      if f.name in d or f.default is dataclasses.MISSING})


@dataclass(frozen=True)
class MeasureComparison(_Record):
    """One measure on one split, the chosen trial against the baseline config on the same queries.

    Attributes:
        chosen, baseline: the means of the per-query values (the measure's units, 0-1).
        chosen_ci, baseline_ci: their 95% percentile-bootstrap CIs.
        mean_diff: the mean of chosen − baseline per query; ``ci_low``, ``ci_high`` its 95% bootstrap CI.
        p_value: the paired sign-flip randomisation test's two-sided p-value.
    """

    chosen: float
    chosen_ci: tuple[float, float]
    baseline: float
    baseline_ci: tuple[float, float]
    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float


@dataclass(frozen=True)
class TypeComparison(_Record):
    """The objective measure on the ``n`` queries of one query type of a split: ``chosen`` and
    ``baseline`` means (the measure's units), ``mean_diff`` with its 95% bootstrap CI and the paired
    sign-flip ``p_value`` (as :class:`MeasureComparison`, without the CIs of the two means)."""

    n: int
    chosen: float
    baseline: float
    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float


@dataclass(frozen=True)
class SplitReport:
    """The chosen trial against the baseline on one held-out split (dev or test).

    Attributes:
        queries: the queries evaluated; 0 when the split has none (``note`` says why).
        measures: measure -> :class:`MeasureComparison` (the objective and the experiment's measures).
        by_type_measure: the measure ``by_query_type`` is of (the study's objective).
        by_query_type: query type -> :class:`TypeComparison`.
        note: why the split has no queries.

    JSON: ``{"queries", "measures", "<measure> by query_type"}``, or ``{"queries": 0, "note"}``.
    """

    queries: int
    measures: dict[str, MeasureComparison] = field(default_factory=dict)
    by_type_measure: str = ""
    by_query_type: dict[str, TypeComparison] = field(default_factory=dict)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        if not self.queries:
            return {"queries": 0, "note": self.note}
        out: dict[str, Any] = {"queries": self.queries, "measures": {m: r.to_json() for m, r in self.measures.items()}}
        out[_BY_TYPE_KEY.format(measure=self.by_type_measure)] = {t: r.to_json() for t, r in self.by_query_type.items()}
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any], by_type_measure: str) -> SplitReport:
        """``by_type_measure``: the study's objective measure (its per-type table's key names it)."""
        key = _BY_TYPE_KEY.format(measure=by_type_measure)
        by_type = d.get(key) or {}
        measures = d.get("measures") or {}
        if not isinstance(by_type, dict) or not isinstance(measures, dict):
            raise TypeError("measures and the per-query-type table must be objects")
        return cls(int(d["queries"]), {str(m): MeasureComparison.from_json(r) for m, r in measures.items()},
                   by_type_measure if key in d else "",
                   {str(t): TypeComparison.from_json(r) for t, r in by_type.items()}, str(d.get("note", "")))


@dataclass(frozen=True)
class TrainSummary(_Record):
    """The objective on the study's tuning split, as the study scores it (with query-type weights, the
    weighted mean of the per-type means): ``objective`` names the measure, ``chosen`` is trial
    ``trial``'s value, ``baseline`` the baseline config's (the measure's units)."""

    objective: str
    chosen: float
    baseline: float
    trial: int


@dataclass(frozen=True)
class QrelsSummary(_Record):
    """The qrels layer a study was judged by: ``layer``, ``sha256`` of its qrels
    (:func:`workbench.judging.layers.qrels_sha256`), ``human_pairs`` (pairs with a human grade), ``stale``
    (judgments left out because the document changed) and ``queries_left_out`` (``human``: queries of
    the dataset without a human grade)."""

    layer: str = "built"
    sha256: str = ""
    human_pairs: int = 0
    stale: int = 0
    queries_left_out: int = 0


@dataclass(frozen=True)
class StudyEvaluation:
    """The chosen trial re-evaluated (:func:`choose_and_report`): ``dev`` and ``test``
    (:class:`SplitReport`), the ``train`` objective and the ``qrels`` layer. Any part is None in a
    report that lacks it (``qrels``: reports written before the layers existed, judged by ``built``)."""

    dev: SplitReport | None
    test: SplitReport | None
    train: TrainSummary | None
    qrels: QrelsSummary | None

    def split(self, name: str) -> SplitReport | None:
        """``dev`` or ``test``."""
        return {"dev": self.dev, "test": self.test}[name]

    def to_json(self) -> dict[str, Any]:
        parts = {"dev": self.dev, "test": self.test, "train": self.train, "qrels": self.qrels}
        return {k: v.to_json() for k, v in parts.items() if v is not None}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StudyEvaluation:
        train = TrainSummary.from_json(d["train"]) if d.get("train") is not None else None
        measure = train.objective if train else ""
        dev, test = (SplitReport.from_json(d[k], measure) if d.get(k) is not None else None for k in ("dev", "test"))
        return cls(dev, test, train, QrelsSummary.from_json(d["qrels"]) if d.get("qrels") is not None else None)


@dataclass(frozen=True)
class StudyReport:
    """``report.json`` of a study's output folder (:func:`write_outputs`), what the dashboard's study page reads.

    Attributes:
        study: the study's name.
        storage: where its trials live (``journal``, ``memory``, ``journal:PATH`` or a URL with the
            password masked); ``""`` in reports written before it was recorded.
        chosen_trial: the chosen trial's number; ``chosen_params`` its Optuna parameters.
        notes: what the choice should be read with (a flatter trial chosen over the best, ...).
        sensitivity: rows ``{"param", "value", "objective", "minus10", "plus10", "drop"}`` (:func:`sensitivity`).
        evaluation: dev, test, train and qrels (:class:`StudyEvaluation`), flattened into the JSON object.
    """

    study: str
    storage: str
    chosen_trial: int
    chosen_params: dict[str, Any]
    notes: list[str]
    sensitivity: list[dict[str, Any]]
    evaluation: StudyEvaluation

    @classmethod
    def of(cls, result: StudyResult, storage: str | None = None) -> StudyReport:
        """The report of ``result``, whose trials live in ``storage`` (None: the journal); a password in a
        URL is masked."""
        return cls(result.study.name, _masked(storage or "journal"), result.chosen.number, dict(result.chosen_params),
                   list(result.notes), list(result.sensitivity), result.evaluation)

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "storage": self.storage, "chosen_trial": self.chosen_trial,
                "chosen_params": self.chosen_params, "notes": self.notes, "sensitivity": self.sensitivity,
                **self.evaluation.to_json()}

    @classmethod
    def from_json(cls, body: Any, source: str | Path) -> StudyReport:
        """The inverse of :meth:`to_json`; ``source`` (the file) is named in errors.

        Raises:
            DataError: not a study report (no ``chosen_trial`` / ``chosen_params``), or a malformed one
                (the message names the file and the key).
        """
        if not isinstance(body, dict) or not isinstance(body.get("chosen_trial"), int) \
                or not isinstance(body.get("chosen_params"), dict):
            raise DataError(f"{source} is not a study report (no chosen_trial / chosen_params); run the study again "
                            "(`workbench tune STUDY.toml`) to rewrite it")
        try:
            notes, sens = body.get("notes") or [], body.get("sensitivity") or []
            if not isinstance(notes, list) or not isinstance(sens, list) or not all(isinstance(r, dict) for r in sens):
                raise TypeError("notes must be a list and sensitivity a list of objects")
            return cls(str(body.get("study", "")), str(body.get("storage", "")), body["chosen_trial"],
                       dict(body["chosen_params"]), [str(n) for n in notes], list(sens),
                       StudyEvaluation.from_json(body))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{source} is not a complete study report ({type(exc).__name__}: {exc}); run the study "
                            "again (`workbench tune STUDY.toml`) to rewrite it") from None

    def save(self, path: Path) -> Path:
        """Write the report to ``path`` (``<output folder>/report.json``) atomically: a crash or a full disk
        leaves the previous file whole. Returns ``path``.

        Raises:
            StorageError: the file cannot be written (names the path and the fix).
        """
        return atomic_write_json(path, self.to_json(), ensure_ascii=True)

    @classmethod
    def load(cls, path: Path) -> StudyReport:
        """Read a ``report.json`` (:meth:`save`'s, or one written before this class existed).

        Raises:
            DataError: the file is missing, unreadable, not JSON or not a (complete) study report.
        """
        return cls.from_json(_read_report(path), path)

    @staticmethod
    def storage_of(path: Path) -> str:
        """The ``storage`` a report file records, ``""`` when it records none or cannot be read (a study
        list shows such a report anyway, and its page says what is wrong)."""
        try:
            body = _read_report(path)
        except DataError:
            return ""
        return str(body.get("storage") or "") if isinstance(body, dict) else ""


def _read_report(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path} does not exist; run the study again (`workbench tune STUDY.toml`)") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {path}: {exc}; run the study again to rewrite it") from None


# ---------------------------------------------------------------- the study

@dataclass
class StudyResult:
    """What ``workbench tune`` computed; :meth:`StudyReport.of` makes its ``report.json``."""

    study: Study
    optuna_study: Any
    chosen: Any
    chosen_params: dict[str, Any]
    chosen_setting: FusionSpec
    baseline_value: float
    sensitivity: list[dict[str, Any]]
    evaluation: StudyEvaluation
    elapsed_s: float
    trials_run: int
    notes: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def report(self) -> dict[str, Any]:
        """:attr:`evaluation` as JSON (``dev``, ``test``, ``train``, ``qrels``, as report.json holds them), for
        readers that take plain dicts (MLflow tracking); typed readers use :attr:`evaluation`."""
        return self.evaluation.to_json()


# ---------------------------------------------------------------- storage, and what survives a fault

#: PostgreSQL storage: seconds between the heartbeats a running trial records, and how long a
#: trial may go without one before any process of the study marks it failed (its process is
#: gone, on whatever machine it ran).
PG_HEARTBEAT_S = 60
PG_GRACE_S = 300
#: A running trial without a ``process`` record (a study from an older workbench, or a kill in
#: the instant between the trial's creation and its first record) is taken for dead after this long.
UNOWNED_STALE_S = 3600
#: What a study's outputs take when none were written yet (``plots.html`` carries plotly.js).
OUTPUTS_BYTES = 5 * 2**20
#: The way out of a study folder that cannot be written.
_ELSEWHERE = "or tune with --storage memory (nothing is kept) or --storage journal:PATH on a writable disk"


def storage_for(study: Study, home: Path, storage: str | None, *, create: bool = True,
                log: Callable[[str], None] = lambda _m: None):
    """Optuna storage: ``None``/``journal`` → the journal file of the study folder, ``memory``,
    ``journal:PATH``, or a ``postgresql://`` URL (``postgresql`` alone: the workbench's server).

    A journal is opened with :func:`open_journal` (a cut last record is dropped and reported
    through ``log``); PostgreSQL storage records a heartbeat of every running trial, so a
    trial whose process died on any machine is marked failed after ``PG_GRACE_S`` seconds.

    Args:
        create: with ``False`` a journal that does not exist yet is an error (``export``),
            and a journal that cannot be written is only read.
        log: where the repair of a journal is reported.

    Raises:
        ConfigError: an unknown spec, a journal path that is a folder or whose folder is
            missing, a PostgreSQL server that refuses the connection (names it and the fix).
        StorageError: the study folder cannot be created or written (a read-only home, a full
            disk), or the journal is damaged before its last record (names the path and the fix).
    """
    import warnings

    import optuna

    spec = (storage or "journal").strip()
    if spec == "memory":
        return optuna.storages.InMemoryStorage()
    if spec == "journal" or spec.startswith("journal:"):
        path = journal_path(study, home, spec)
        if spec == "journal":
            if create:
                try:
                    mkdirs(path.parent)
                except StorageError as exc:
                    raise StorageError(f"{exc}; {_ELSEWHERE}") from None
        else:
            if path.is_dir():
                raise ConfigError(f"--storage {spec}: {path} is a folder; give a file path for the journal")
            if not path.parent.is_dir():
                raise ConfigError(f"--storage {spec}: folder {path.parent} does not exist; create it first")
        if not create and not path.is_file():
            raise ConfigError(f"no study journal at {path}; run `workbench tune {study.path}` first "
                              "(with the same --storage)")
        return open_journal(path, create=create, log=log)
    if spec == "postgresql" or spec.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        url = spec
        if spec == "postgresql":
            from workbench.engines import pg_client as pg

            url = pg.server_dsn(home)
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeat_interval
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True},
                                                  heartbeat_interval=PG_HEARTBEAT_S, grace_period=PG_GRACE_S)
        except Exception as exc:  # sqlalchemy OperationalError and friends
            from workbench.engines.pg_client import redact

            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot use PostgreSQL study storage {redact(spec)}: {first}; check the URL "
                              "and that the server runs, or use --storage journal") from None
    raise ConfigError(f"storage {spec!r} must be memory, journal, journal:PATH, postgresql (the workbench's server) "
                      "or a postgresql:// URL")


def journal_path(study: Study, home: Path, storage: str | None) -> Path | None:
    """The journal file of a ``journal`` or ``journal:PATH`` storage spec (``None`` for other storages).

    Raises:
        ConfigError: ``journal:`` without a path.
    """
    spec = (storage or "journal").strip()
    if spec == "journal":
        return study_dir(home, study.name) / "journal.log"
    if spec.startswith("journal:"):
        raw = spec.partition(":")[2].strip()
        if not raw:
            raise ConfigError("--storage journal:PATH needs a file path, e.g. journal:/tmp/study.log")
        return Path(raw).expanduser()
    return None


def open_journal(path: Path, *, create: bool = True, log: Callable[[str], None] = lambda _m: None):
    """Optuna's journal storage on ``path``, with the journal's tail repaired first.

    Under Optuna's own journal lock (the one every append takes), a last record cut by a
    crash or a full disk is dropped (:func:`workbench.durable.repair_jsonl_tail`) and said in
    one line through ``log``; every append afterwards writes whole records or nothing
    (:func:`_append_whole`). A record damaged before the last one cannot be repaired that way
    and is an error. A journal that cannot be written (``create=False`` on a read-only
    folder or a full disk, for ``export``) is read as it is: Optuna skips a cut last record
    when reading.

    Args:
        path: the journal file (created when missing and ``create``).
        create: ``tune`` (the journal will be written) or ``export`` (only read).
        log: where the repair is reported.

    Raises:
        StorageError: the folder cannot be written (read-only, full: names it and the fix),
            or the journal is damaged before its last record (names the file, the line, and
            the fix: move it aside, or ``--storage`` another journal).
    """
    import optuna

    path = Path(path)
    lock = _journal_lock_type()(path)
    locked = False
    if create or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        try:
            locked = lock.acquire()  # also the probe that the folder can be written
        except OSError as exc:
            if create:
                raise StorageError(f"{storage_error(exc, path.parent, action='write in')}; {_ELSEWHERE}") from None
    if locked:
        try:
            dropped, _text = repair_jsonl_tail(path)
        finally:
            _release(lock)
        if dropped:
            log(f"study journal {path}: dropped a cut last record ({dropped} bytes) left by an interrupted write; "
                f"the complete trials are kept, the cut bytes beside it ({path.name}.cut-*)")
    try:
        return optuna.storages.JournalStorage(_journal_backend_type()(path, lock))
    except OSError as exc:
        raise storage_error(exc, path, action="open") from None
    except Exception as exc:  # noqa: BLE001 - Optuna replays bad records with ValueError, KeyError, ...
        raise _damaged(path, exc) from None


@functools.lru_cache(maxsize=1)
def _journal_lock_type():
    """Optuna's journal lock interface on an ``flock`` of ``<journal>.flock`` (0600, never through a link).

    Optuna's own file locks (a symbolic link or a lock file) outlive a process killed while it
    holds them, and the next process waits 30 s before it breaks them; the kernel drops an
    ``flock`` with its holder, so a killed ``tune`` costs the next one nothing. Every workbench
    process on a journal takes this lock; a plain Optuna process using its own lock would not
    be excluded (do not mix them on one journal).
    """
    import fcntl

    class FlockJournalLock:  # Optuna's journal takes any object with acquire() and release()
        def __init__(self, journal: Path) -> None:
            self._path = Path(f"{journal}.flock")
            self._fd: int | None = None

        def acquire(self) -> bool:
            """Raises OSError (the caller names the folder and the fix) when the lock file cannot be made."""
            if self._fd is None:
                flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                self._fd = os.open(self._path, flags, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            return True

        def release(self) -> None:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    return FlockJournalLock


def _release(lock) -> None:
    try:
        lock.release()
    except RuntimeError:  # another process broke a lock it took for stale (Optuna's 30 s grace)
        pass


def _damaged(path: Path, exc: Exception) -> StorageError:
    """The error for a journal that Optuna cannot replay, naming the first bad line."""
    bad, total = None, 0
    try:
        with open(path, "rb") as fh:
            for total, line in enumerate(fh, 1):
                if bad is None and (not line.endswith(b"\n") or not _json_record(line)):
                    bad = total
    except OSError:
        pass
    what = (f"at line {bad} of {total} (not a complete JSON record)" if bad else
            f"({type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:120]})")
    return StorageError(f"study journal {path} is damaged {what}, not only at its end, so it cannot be repaired; "
                        f"move it aside (mv {path} {path}.damaged) to start the study afresh, or give --storage "
                        "another journal:PATH or a postgresql:// URL")


def _json_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` and ``fsync`` it; when a write or the ``fsync`` fails (a full
    disk, an I/O error) the file is truncated back to where it was, so it never ends in a cut
    record. The caller holds the journal lock.

    Raises:
        OSError: the write failed (``filename`` is ``path``); the file is as it was (or, if even
            the truncation failed, :func:`open_journal` drops the cut record on the next open).
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def _journal_backend_type():
    """Optuna's ``JournalFileBackend`` whose appends are whole records or nothing (:func:`_append_whole`)."""
    from optuna.storages.journal import JournalFileBackend

    class WholeRecordJournal(JournalFileBackend):
        """A study journal file: Optuna's reader and lock, appends through :func:`_append_whole`."""

        def __init__(self, path: Path, lock) -> None:
            super().__init__(str(path), lock_obj=lock)
            self.wb_path, self.wb_lock = Path(path), lock

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            data = ("\n".join(json.dumps(rec, separators=(",", ":")) for rec in logs) + "\n").encode("utf-8")
            self.wb_lock.acquire()
            try:
                _append_whole(self.wb_path, data)
            finally:
                _release(self.wb_lock)

    return WholeRecordJournal


# ---------------------------------------------------------------- the sampler: one seed, many processes

def trial_seed(seed: int, number: int) -> int:
    """The sampler seed of trial ``number`` in a study seeded ``seed``, used whenever a process
    did not draw that trial's predecessor itself (see :func:`seeded_sampler`)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{seed}:{number}".encode()).digest()[:4], "big")


def seeded_sampler(study: Study):
    """The study's sampler (TPE, multivariate; NSGA-II with latency), seeded per stretch of trials.

    A process draws its trials from one random stream seeded with the study's seed as long as
    it gets trial numbers 0, 1, 2, ... one after another: a fresh study run by one process draws
    exactly what that seed always drew. Whenever a trial's number is not the one after this
    process's previous trial (a resumed study, or another process took trials in between), the
    sampler starts again from :func:`trial_seed` of (study seed, trial number). Trial numbers
    are handed out by the storage, one per trial, so two processes on one study never draw from
    the same stream, and a resumed study never repeats the draws it made before.
    """
    import optuna

    def make(seed: int):
        if study.latency:
            return optuna.samplers.NSGAIISampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)

    return _seeded_sampler_type()(make, study.seed)


@functools.lru_cache(maxsize=1)
def _seeded_sampler_type():
    from optuna.samplers import BaseSampler

    class StretchSeededSampler(BaseSampler):
        """Delegates to a sampler made with the study's seed, made anew from
        :func:`trial_seed` when the trial numbers this process gets are not consecutive."""

        def __init__(self, make: Callable[[int], Any], seed: int) -> None:
            self._make, self._seed = make, seed
            self._inner = make(seed)
            self._next = 0

        def before_trial(self, study, trial) -> None:
            if trial.number != self._next:
                self._inner = self._make(trial_seed(self._seed, trial.number))
            self._next = trial.number + 1
            self._inner.before_trial(study, trial)

        def infer_relative_search_space(self, study, trial):
            return self._inner.infer_relative_search_space(study, trial)

        def sample_relative(self, study, trial, search_space):
            return self._inner.sample_relative(study, trial, search_space)

        def sample_independent(self, study, trial, param_name, param_distribution):
            return self._inner.sample_independent(study, trial, param_name, param_distribution)

        def after_trial(self, study, trial, state, values) -> None:
            self._inner.after_trial(study, trial, state, values)

        def reseed_rng(self) -> None:
            self._inner.reseed_rng()

    return StretchSeededSampler


# ---------------------------------------------------------------- trials left running by a dead process

def this_process() -> dict[str, Any]:
    """Who runs this process's trials, recorded on each as the ``process`` user attribute
    (:func:`workbench.procs.record`: host, pid and an identity that a reused pid does not share)."""
    from workbench import procs

    return procs.record()


def process_alive(owner: Any) -> bool | None:
    """Whether the process recorded as a trial's ``process`` still runs: ``True``/``False`` when this
    machine can tell, ``None`` when it cannot (it ran elsewhere, or the record is missing or malformed)."""
    from workbench import procs

    return {"alive": True, "dead": False}.get(procs.state(owner))


def fail_dead_trials(ost, log: Callable[[str], None] = lambda _m: None) -> list[int]:
    """Mark failed the trials left running by a process that is gone; returns their numbers.

    A running trial is failed when its recorded process ran on this machine and no longer
    runs (pid and start time), or when it has no process record and started more than
    ``UNOWNED_STALE_S`` ago. With PostgreSQL storage Optuna's heartbeats also fail the
    trials of processes gone on other machines (``PG_GRACE_S`` after their last heartbeat).
    A trial whose process ran on another machine of a journal study is left as it is.
    """
    import warnings

    import optuna
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    running = {t.number for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if not running:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(ost)  # heartbeats (PostgreSQL); nothing for a journal
    dead = [t.number for t in ost.get_trials(deepcopy=False, states=(TrialState.FAIL,)) if t.number in running]
    now = datetime.datetime.now()
    for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get("process")
        unowned_old = owner is None and t.datetime_start is not None and \
            (now - t.datetime_start).total_seconds() > UNOWNED_STALE_S
        if process_alive(owner) is False or unowned_old:
            try:
                ost.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            except (UpdateFinishedTrialError, ValueError):  # another process failed it first
                continue
            dead.append(t.number)
    dead.sort()
    if dead:
        many = len(dead) > 1
        log(f"study {ost.study_name}: trial{'s' if many else ''} {', '.join(map(str, dead))} "
            f"{'were' if many else 'was'} left running by a process that is gone (killed, or stopped by a "
            f"storage error); marked failed")
    return dead


def ensure_baseline(study: Study, ost, log: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Enqueue the baseline (user attribute ``baseline``) unless a trial of it completed, waits,
    or runs in a live process of this machine; returns the notes of :func:`baseline_params`
    when it enqueued it (none otherwise).

    So a new study starts with the baseline, and a study whose baseline trial was killed or
    failed runs it again when it resumes. A baseline trial running on another machine may be
    evaluated twice; that costs one trial and changes nothing else.
    """
    from optuna.trial import TrialState

    base = [t for t in ost.get_trials(deepcopy=False) if t.user_attrs.get("baseline")]
    if any(t.state in (TrialState.COMPLETE, TrialState.WAITING) for t in base):
        return []
    if any(t.state == TrialState.RUNNING and process_alive(t.user_attrs.get("process")) for t in base):
        return []
    params, notes = baseline_params(study)
    ost.enqueue_trial(params, user_attrs={"baseline": True})
    if base:
        log(f"study {study.name}: the baseline trial ({', '.join(f'{t.number} {t.state.name.lower()}' for t in base)}) "
            "never completed; the baseline is enqueued again")
    return notes


def _storage_failure(exc: BaseException, study: Study, home: Path, storage: str | None, ost,
                     n_target: int) -> StorageError | None:
    """A :class:`StorageError` for the file-system error ``exc`` is, or that an ``AssertionError``
    hides (Optuna's ``_run_trial`` asserts on the trial's state in a ``finally`` when the write
    that ends a trial fails, so the ``OSError`` is only its context); ``None`` for anything else."""
    import errno

    journal = journal_path(study, home, storage)
    seen: set[int] = set()
    e: BaseException | None = exc
    while isinstance(e, (OSError, AssertionError)) and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError):
            path = e.filename or journal or home
            needed = None
            if e.errno in (errno.ENOSPC, errno.EDQUOT) and journal is not None and Path(path) == journal:
                needed = _space_needed(journal, ost, n_target, outputs_dir(home, study.name, storage))
            msg = str(storage_error(e, path, needed=needed))
            if journal is not None:
                msg += "; the complete trials are kept: run the same command to resume"
            return StorageError(msg)
        e = e.__cause__ or e.__context__
    return None


def _space_needed(journal: Path, ost, n_target: int, outputs: Path) -> int | None:
    """Bytes the rest of the study needs: its journal's bytes per trial times the trials still
    wanted, and its outputs (as large as the last ones, or ``OUTPUTS_BYTES``)."""
    from optuna.trial import TrialState

    try:
        size = journal.stat().st_size
        trials = ost.get_trials(deepcopy=False) if ost is not None else []
        out = sum(p.stat().st_size for p in outputs.iterdir() if p.is_file()) if outputs.is_dir() else 0
    except Exception:  # noqa: BLE001 - an estimate for a message; never the reason it fails
        return None
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    per_trial = size / max(len(trials), 1)
    return int(per_trial * max(n_target - complete, 1)) + (out or OUTPUTS_BYTES)


# ---------------------------------------------------------------- the study

def definition(study: Study) -> dict[str, Any]:
    """What a stored study was made for: dataset, lanes, baseline, split, objective and space
    (a stored study is only resumed or exported for the same definition)."""
    d = {"dataset": study.dataset, "lanes": list(study.lanes), "baseline": study.baseline,
         "split": study.split, "measure": study.measure, "weights": study.type_weights,
         "latency": study.latency, "space": study.space, "experiment": str(study.experiment.path.name)}
    layer = getattr(study, "qrels", "built")
    if layer != "built":  # studies stored before qrels layers (all built) keep their definition
        d["qrels"] = layer
    return json.loads(json.dumps(d, default=repr, sort_keys=True))


def make_study(study: Study, storage) -> Any:
    """Create or load the Optuna study (same name, same storage → the same study, resumed),
    with the sampler of :func:`seeded_sampler`.

    Raises:
        ConfigError: the stored study of that name was made for another definition.
    """
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    directions = ["maximize", "minimize"] if study.latency else ["maximize"]
    try:
        ost = optuna.create_study(study_name=study.name, storage=storage, directions=directions,
                                  sampler=seeded_sampler(study), load_if_exists=True)
    except ValueError as exc:  # e.g. a stored study with another number of objectives
        raise ConfigError(f"study {study.name} in this storage does not fit {study.path} ({exc}); give the study a "
                          "new name or use another --storage") from None
    want = definition(study)
    have = ost.user_attrs.get("workbench_definition")
    if have is None:
        ost.set_user_attr("workbench_definition", want)
    elif have != want:
        diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
        if diff == ["qrels"]:
            stored, asked = have.get("qrels", "built"), want.get("qrels", "built")
            raise ConfigError(f"study {study.name} in this storage was tuned on the {stored} qrels, not {asked}; "
                              f"pass --qrels {stored} to `workbench tune`, or set qrels = \"{stored}\" in {study.path} "
                              "(what `workbench export` reads), or give the study a new name")
        raise ConfigError(f"study {study.name} in this storage was made for another definition (differs: "
                          f"{', '.join(diff)}); give the study a new name or use another --storage")
    return ost


def run_study(study: Study, *, home: Path, storage: str | None = None, trials: int | None = None,
              workers: int = 1, log: Callable[[str], None] = lambda _m: None, progress: bool = False,
              candidates: Candidates | None = None) -> StudyResult:
    """Run (or resume) a study until it has ``trials`` complete trials, then choose and report.

    On resume, trials left running by a process that is gone are marked failed
    (:func:`fail_dead_trials`) and the baseline is enqueued again when no trial of it completed
    (:func:`ensure_baseline`).

    Raises:
        ConfigError, DataError, StaleError, PgError, OpenSearchError: with messages naming the fix.
        StorageError: the study's storage cannot be written (a full disk: the path and the space
            needed; a read-only folder) or its journal is damaged; the complete trials are kept.
    """
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    t0 = time.perf_counter()
    if workers > 1 and not (storage or "").startswith("postgres"):
        raise ConfigError("--workers > 1 needs a storage several processes can share: --storage postgresql "
                          "(the workbench's server) or a postgresql:// URL")
    n_target = trials or study.trials
    store = storage_for(study, home, storage, log=log)
    ost = None
    try:
        ost = make_study(study, store)
        cands = candidates or Candidates(study, home, log, progress)
        check_split(study, cands)
        notes_qrels = _qrels_changed(ost, cands, log)
        fail_dead_trials(ost, log)
        notes = ensure_baseline(study, ost, log)
        done = [t for t in ost.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if done:
            log(f"resuming study {study.name}: {len(done)} complete trial(s) in storage")
        # warm the candidates of the baseline's engine setting (fills the cache once)
        base_key = cands.engine_key(baseline_params(study)[0])
        cands.matrix(base_key, study.split)
        remaining = max(n_target - len(done), 0)
        if workers > 1 and remaining:
            _run_workers(study, home, storage, remaining, workers, log)
        elif remaining:
            objective = make_objective(study, cands)
            callbacks = [optuna.study.MaxTrialsCallback(n_target, states=(optuna.trial.TrialState.COMPLETE,))]
            ost.optimize(objective, n_trials=remaining, callbacks=callbacks, show_progress_bar=progress)
    except WorkbenchError:
        raise
    except Exception as exc:
        err = _storage_failure(exc, study, home, storage, ost, n_target)
        if err is None:
            raise
        raise err from None
    ost = make_study(study, storage_for(study, home, storage)) if workers > 1 else ost
    result = choose_and_report(study, ost, cands, log)
    result.elapsed_s = time.perf_counter() - t0
    result.trials_run = remaining
    result.notes = notes_qrels + notes + result.notes
    return result


def _qrels_changed(ost, cands: Candidates, log: Callable[[str], None]) -> list[str]:
    """Record the hash of the study's qrels on the stored study; when a resumed study's earlier trials
    were scored on other qrels (new human grades since), say so (their values are not comparable)."""
    sha = cands.layer.sha256
    have = ost.user_attrs.get("workbench_qrels_sha256")
    if have == sha:
        return []
    ost.set_user_attr("workbench_qrels_sha256", sha)
    if have is None:
        return []
    note = (f"the {cands.layer.layer} qrels changed since earlier trials of this study (sha256 {have[:12]} -> "
            f"{sha[:12]}: new judgments); earlier trial values were scored on the old qrels — start a new study "
            "(another name) for values scored on one set")
    log(note)
    return [note]


def check_split(study: Study, cands: Candidates) -> None:
    """The study's split has judged queries, and of every query type the objective weighs.

    Raises:
        ConfigError: naming the split, the dataset and the types it has.
    """
    qs = [q for q in cands.view.queries if q.split == study.split]
    types = sorted({q.query_type for q in qs})
    if not qs and cands.layer.layer == "human" and any(q.split == study.split for q in cands.ds.queries):
        from workbench.judging.store import JudgeError

        raise JudgeError(f"{study.path}: no {study.split} query of {study.dataset} has a human grade yet, so the human "
                         "layer has nothing to tune on; judge a pool first (`workbench judge pool`) or use "
                         "--qrels merged")
    if not qs:
        raise ConfigError(f"{study.path}: dataset {study.dataset} has no {study.split} queries; choose another split")
    missing = [t for t, w in (study.type_weights or {}).items() if w > 0 and t not in types]
    if missing:
        raise ConfigError(f"{study.path}: objective.weights weighs query type(s) {missing} that have no "
                          f"{study.split} queries in {study.dataset} (it has: {', '.join(types)}); drop them")


def make_objective(study: Study, cands: Candidates) -> Callable[[Any], Any]:
    """The Optuna objective: record the trial's process (:func:`this_process`), then suggest,
    fuse and score in memory (engine variants through the cache)."""
    owner = this_process()

    def objective(trial):
        trial.set_user_attr("process", owner)
        params = suggest(trial, study)
        key = cands.engine_key(params)
        m = cands.matrix(key, study.split)
        s = setting_from(study, params)
        value = objective_value(study, m, s, cands.queries)
        if not study.latency:
            return value
        lat = cands.latencies(key, s.lanes, m.query_ids) if s is not None else np.zeros(1)
        return value, float(np.percentile(lat, 95)) if len(lat) else 0.0

    return objective


def _worker(path: str, home: str, storage: str, n: int) -> None:  # pragma: no cover - subprocess
    import optuna

    from workbench.tuning.space import load_study

    st = load_study(Path(path))
    cands = Candidates(st, Path(home))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ost = make_study(st, storage_for(st, Path(home), storage))
    ost.optimize(make_objective(st, cands), n_trials=n)


def _run_workers(study: Study, home: Path, storage: str | None, remaining: int, workers: int,
                 log: Callable[[str], None]) -> None:
    import multiprocessing as mp

    if not storage or not storage.startswith("postgres"):
        raise ConfigError("--workers > 1 needs a storage several processes can share: --storage postgresql "
                          "(the workbench's server) or a postgresql:// URL")
    share = [remaining // workers + (1 if i < remaining % workers else 0) for i in range(workers)]
    log(f"{workers} worker processes share {remaining} trials ({share})")
    ctx = mp.get_context("spawn")
    # each worker draws from its own random stream: trial numbers are unique (see seeded_sampler)
    procs = [ctx.Process(target=_worker, args=(str(study.path), str(home), storage, n)) for n in share if n]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise ConfigError(f"{len(bad)} tuning worker(s) failed (exit codes {bad}); run with --workers 1 to see why")


# ---------------------------------------------------------------- choosing, sensitivity, honest results

def _numeric_dims(study: Study) -> dict[str, Range]:
    out = {k: study.space[k] for k in ("k", "min_score", "top_k") if isinstance(study.space.get(k), Range)}
    for group in ("weights", "depth"):
        out.update({f"{group}.{ln}": d for ln, d in study.space.get(group, {}).items() if isinstance(d, Range)})
    return out


def sensitivity(study: Study, cands: Candidates, params: dict[str, Any]) -> list[dict[str, Any]]:
    """For each numeric parameter: the objective at -10% and +10% of its value (clipped to its range).

    Returns:
        rows ``{"param", "value", "objective", "minus10", "plus10", "drop"}`` where ``drop`` is
        the largest fall of the objective (>= 0); a flat optimum has small drops.
    """
    key = cands.engine_key(params)
    m = cands.matrix(key, study.split)
    setting = setting_from(study, params)
    base = objective_value(study, m, setting, cands.queries)
    used = set(setting.lanes) if setting is not None else set()
    rows = []
    for name, dim in _numeric_dims(study).items():
        if name not in params or (name.split(".")[0] in ("weights", "depth") and name.split(".", 1)[1] not in used):
            continue
        if name == "k" and (setting is None or setting.method != "rrf"):
            continue
        v = params[name]
        vals = []
        for f in (0.9, 1.1):
            x = min(max(v * f, dim.low), dim.high)
            x = int(round(x)) if dim.integer else x
            p2 = {**params, name: x}
            vals.append(objective_value(study, m, setting_from(study, p2), cands.queries))
        rows.append({"param": name, "value": v, "objective": base, "minus10": vals[0], "plus10": vals[1],
                     "drop": max(0.0, base - min(vals))})
    return rows


def choose_and_report(study: Study, ost, cands: Candidates, log: Callable[[str], None]) -> StudyResult:
    """Choose the trial (flattest within ``tolerance`` of the best; on two objectives, from the
    Pareto front), then evaluate it and the baseline on dev and test."""
    import optuna

    complete = [t for t in ost.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise ConfigError(f"study {study.name} has no complete trial; run it with more trials")
    pool = [t for t in (ost.best_trials if study.latency else complete) if setting_from(study, t.params) is not None]
    if not pool:
        raise ConfigError(f"study {study.name}: every complete trial switched all lanes off; widen [space.lanes]")
    best = max(t.values[0] for t in pool)
    near = sorted((t for t in pool if t.values[0] >= best - study.tolerance), key=lambda t: -t.values[0])[:10]
    scored = []
    for t in near:
        sens = sensitivity(study, cands, t.params)
        worst = max((r["drop"] for r in sens), default=0.0)
        scored.append((t.values[0] - worst, t.values[0], -t.number, t, sens))
    scored.sort(key=lambda x: (x[0], x[1], x[2]), reverse=True)
    _robust, _v, _n, chosen, sens = scored[0]
    notes = []
    if chosen.values[0] < best:
        notes.append(f"chose trial {chosen.number} ({chosen.values[0]:.4f}) over the best ({best:.4f}): "
                     "its ±10% neighbourhood is flatter")
    setting = setting_from(study, chosen.params)
    splits = honest_report(study, cands, chosen.params, setting)
    base_m = cands.matrix(cands.engine_key({}), study.split)  # the baseline as written: no engine overrides
    base_val = objective_value(study, base_m, baseline_setting(study), cands.queries)
    evaluation = StudyEvaluation(splits["dev"], splits["test"],
                                 TrainSummary(study.measure, chosen.values[0], base_val, chosen.number),
                                 qrels_report(cands))
    manifest = {k: cands.ds.manifest.get(k) for k in ("inputs", "outputs")}
    return StudyResult(study, ost, chosen, dict(chosen.params), setting, base_val, sens, evaluation, 0.0, 0, notes,
                       manifest)


def qrels_report(cands: Candidates) -> QrelsSummary:
    """The study's qrels layer for the report and the export (:class:`QrelsSummary`)."""
    lq = cands.layer
    return QrelsSummary(lq.layer, lq.sha256, lq.human_pairs, lq.stale, lq.left_out(cands.ds.queries))


def honest_report(study: Study, cands: Candidates, params: dict[str, Any],
                  setting: FusionSpec) -> dict[str, SplitReport]:
    """The chosen setting and the baseline on dev and test (``{"dev": ..., "test": ...}``): measures with
    95% CIs, the paired test, and the objective measure per query type.

    Evaluated with :func:`workbench.eval.evaluate.evaluate` (ir_measures) on the fused runs, not
    with the in-memory evaluator the study used.
    """
    from workbench.eval.evaluate import evaluate

    measures = list(dict.fromkeys([study.measure, *study.experiment.measures]))
    measures = [m for m in measures if _fast(m)]
    out: dict[str, SplitReport] = {}
    key = cands.engine_key(params)
    base_lanes_key = cands.engine_key({})  # the baseline as written: no engine overrides
    for split in ("dev", "test"):
        qs = [q for q in cands.view.queries if q.split == split]
        if not qs:
            why = " with a human grade" if cands.layer.layer == "human" else ""
            out[split] = SplitReport(0, note=f"no {split} queries{why} in {cands.ds.name}")
            continue
        m = cands.matrix(key, split)
        mb = cands.matrix(base_lanes_key, split)
        ev = evaluate(m.run(setting), cands.view.qrels, qs, measures).per_query.set_index("query_id")
        evb = evaluate(mb.run(baseline_setting(study)), cands.view.qrels, qs, measures).per_query.set_index("query_id")
        qids = [q for q in ev.index if q in evb.index]
        rows = {}
        for meas in measures:
            a, b = ev.loc[qids, meas].to_numpy(float), evb.loc[qids, meas].to_numpy(float)
            rows[meas] = MeasureComparison(float(a.mean()), _pair(bootstrap_ci(a, study.seed)), float(b.mean()),
                                           _pair(bootstrap_ci(b, study.seed)), **paired_test(a, b, study.seed))
        by_type = {}
        types = ev.loc[qids, "query_type"]
        for t in sorted(set(types)):
            mask = (types == t).to_numpy()
            a = ev.loc[qids, study.measure].to_numpy(float)[mask]
            b = evb.loc[qids, study.measure].to_numpy(float)[mask]
            by_type[t] = TypeComparison(int(mask.sum()), float(a.mean()), float(b.mean()),
                                        **paired_test(a, b, study.seed))
        out[split] = SplitReport(len(qids), rows, study.measure, by_type)
    return out


def _fast(measure: str) -> bool:
    from workbench.eval.fasteval import supported

    return supported(measure)


# ---------------------------------------------------------------- export

def export_config(result: StudyResult, home: Path) -> dict[str, Any]:
    """The production config of the chosen trial, with provenance (what ``workbench export`` writes).

    Fields a seed system loads: ``lanes`` (kind and engine parameters, ef_search included),
    ``fusion``, ``rrf_k``, ``weights``, ``depth``, ``min_score``, ``top_k``,
    ``tiebreak_lane``, ``norm``. ``provenance``: study, trial, storage folder, objective,
    dataset input and output hashes, the code commit, and the dev/test measures with
    95% CIs and the paired test against the baseline.
    """
    import subprocess

    st, s = result.study, result.chosen_setting
    lanes = {}
    for ln in s.lanes:
        spec = st.experiment.lanes[ln]
        params = {**spec.params, **{k.split(".", 2)[2]: v for k, v in result.chosen_params.items()
                                    if k.startswith(f"engine.{ln}.")}}
        if "embedder" in params:
            params["embedder"] = {"name": params["embedder"], **st.experiment.embedders[params["embedder"]]}
        lanes[ln] = {"kind": spec.kind, **params}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=PROJECT_ROOT, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    manifest = result.manifest
    return {
        "lanes": lanes,
        "fusion": s.method,
        "rrf_k": s.k if s.method == "rrf" else None,
        "weights": dict(s.weights or {}),
        "depth": dict(s.depth) if isinstance(s.depth, dict) else s.depth,
        "norm": s.norm if s.method == "weighted" else None,
        "min_score": s.min_score,
        "top_k": s.top_k,
        "tiebreak_lane": s.tiebreak_lane,
        "provenance": {
            "study": st.name, "study_file": str(st.path), "trial": result.chosen.number,
            "objective": {"measure": st.measure, "split": st.split, "type_weights": st.type_weights,
                          "value": result.chosen.values[0], "baseline": result.baseline_value},
            "baseline_config": st.baseline, "experiment": str(st.experiment.path), "dataset": st.dataset,
            "qrels": (result.evaluation.qrels or QrelsSummary()).to_json(),
            "inputs": manifest.get("inputs"), "outputs": manifest.get("outputs"), "code_commit": commit,
            **{split: (part.to_json() if part is not None else None)
               for split, part in (("dev", result.evaluation.dev), ("test", result.evaluation.test))},
            "sensitivity": result.sensitivity, "seed": st.seed,
            "home": str(home),
        },
    }


# ---------------------------------------------------------------- artifacts and the summary

def outputs_dir(home: Path, name: str, storage: str | None) -> Path:
    """``latest/`` for the default journal; ``latest-memory/`` or ``latest-<hash of the storage>/`` otherwise,
    so a quick in-memory run never overwrites the report of a stored study."""
    import hashlib

    spec = (storage or "journal").strip()
    if spec == "journal":
        return study_dir(home, name) / "latest"
    if spec == "memory":
        return study_dir(home, name) / "latest-memory"
    return study_dir(home, name) / f"latest-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


def _masked(spec: str) -> str:
    """A storage spec with any password in a URL replaced by ``***`` (it goes into report.json)."""
    import re

    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", spec)


def study_figures(optuna_study, measure: str) -> dict[str, Any]:
    """Optuna's own plotly figures of a study: ``history``, ``importances``, ``parallel`` and, for a
    two-objective study (objective, p95 latency ms), ``pareto``; used by ``plots.html`` and the
    dashboard. A figure Optuna cannot draw (importances need two complete trials whose
    parameters vary) is left out."""
    import warnings

    import optuna.visualization as vis

    multi = len(optuna_study.directions) > 1
    target = (lambda t: t.values[0]) if multi else None
    makers = {"history": lambda: vis.plot_optimization_history(optuna_study, target=target, target_name=measure),
              "importances": lambda: vis.plot_param_importances(optuna_study, target=target, target_name=measure),
              "parallel": lambda: vis.plot_parallel_coordinate(optuna_study, target=target, target_name=measure)}
    if multi:
        makers["pareto"] = lambda: vis.plot_pareto_front(optuna_study, target_names=[measure, "p95 latency ms"])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, make in makers.items():
            try:
                out[key] = make()
            except Exception:  # noqa: BLE001 - Optuna raises several types when a plot has too little data
                continue
    return out


def write_outputs(result: StudyResult, home: Path, storage: str | None = None) -> Path:
    """Write ``report.json``, ``export.json``, ``trials.csv`` and ``plots.html`` (Optuna's history,
    parameter importances, parallel coordinates and, with two objectives, the Pareto front)
    into :func:`outputs_dir`; returns that folder.

    Each file is replaced atomically (:mod:`workbench.durable`): a crash or a full disk leaves
    the previous file whole, never half a report.

    Raises:
        StorageError: the folder cannot be created or a file cannot be written (names the
            path, the space needed and the fix).
    """
    out = mkdirs(outputs_dir(home, result.study.name, storage))
    remove_temporaries(out)
    report = StudyReport.of(result, storage)
    export = export_config(result, home)
    trials = result.optuna_study.trials_dataframe()
    figs = list(study_figures(result.optuna_study, f"train {result.study.measure}").values())
    html = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs)]
    report.save(out / "report.json")
    atomic_write_json(out / "export.json", export, ensure_ascii=True)
    with atomic_path(out / "trials.csv") as tmp:
        trials.to_csv(tmp, index=False)
    atomic_write_text(out / "plots.html", "<html><head><meta charset='utf-8'><title>study "
                      f"{result.study.name}</title></head><body>" + "\n".join(html) + "</body></html>\n")
    return out


def summary(result: StudyResult) -> str:
    """A plain-text summary: train objective, dev/test measures with CIs and p-values, sensitivity."""
    st = result.study
    q = result.evaluation.qrels or QrelsSummary(getattr(st, "qrels", "built"))
    lines = [f"study {st.name}: {len(result.optuna_study.trials)} trials on {st.dataset} ({st.split}), "
             f"objective {st.measure}" + (" weighted by query type" if st.type_weights else ""),
             f"  qrels: {q.layer}" + (f" (sha256 {q.sha256[:12]}, {q.human_pairs} human grades"
                                      + (f", {q.stale} stale judgments left out" if q.stale else "")
                                      + (f", {q.queries_left_out} queries without a human grade left out"
                                         if q.queries_left_out and q.layer == "human" else "") + ")"
                                      if q.sha256 else ""),
             f"  {st.split}: chosen trial {result.chosen.number} = {result.chosen.values[0]:.4f}   "
             f"baseline {st.baseline} = {result.baseline_value:.4f}"]
    for note in result.notes:
        lines.append(f"  note: {note}")
    s = result.chosen_setting
    lines.append(f"  chosen: lanes {', '.join(s.lanes)}; {s.method}" + (f" k={s.k:g}" if s.method == "rrf" else "") +
                 f"; weights {', '.join(f'{k}={v:.3g}' for k, v in (s.weights or {}).items())}; top_k {s.top_k}")
    for split in ("dev", "test"):
        rep = result.evaluation.split(split)
        if rep is None or not rep.queries:
            lines.append(f"  {split}: {(rep.note if rep else '') or 'no queries'}")
            continue
        lines.append(f"  {split} ({rep.queries} queries)   chosen [95% CI]   baseline [95% CI]   diff   p")
        for m, r in rep.measures.items():
            lines.append(f"    {m:10s} {r.chosen:.4f} [{r.chosen_ci[0]:.3f}, {r.chosen_ci[1]:.3f}]   "
                         f"{r.baseline:.4f} [{r.baseline_ci[0]:.3f}, {r.baseline_ci[1]:.3f}]   "
                         f"{r.mean_diff:+.4f}   {r.p_value:.4f}")
        for t, r in rep.by_query_type.items():
            lines.append(f"    {rep.by_type_measure} {t:10s} n={r.n:4d}  {r.chosen:.4f} vs {r.baseline:.4f}  "
                         f"{r.mean_diff:+.4f}  p={r.p_value:.4f}")
    if result.sensitivity:
        lines.append("  sensitivity (objective at -10% / +10% of each numeric parameter):")
        for r in result.sensitivity:
            lines.append(f"    {r['param']:22s} {r['value']!s:>10.8}  {r['minus10']:.4f} / {r['plus10']:.4f}  "
                         f"drop {r['drop']:.4f}")
    return "\n".join(lines)
