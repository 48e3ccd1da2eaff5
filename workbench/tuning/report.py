"""A study's report: what ``workbench tune`` computed (:class:`StudyResult`) and ``report.json``
(:class:`StudyReport`, its ``save`` and ``load`` side by side), what the dashboard's study page reads.

Each type below turns into the JSON report.json has always held (to_json) and back (from_json);
StudyReport.save and StudyReport.load write and read the file. from_json raises KeyError,
TypeError or ValueError on a missing or malformed field; StudyReport.from_json turns them into a
DataError naming the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

from workbench._infra.durable import atomic_write_json
from workbench.errors import DataError
from workbench.eval.fusion import FusionSpec
from workbench.tuning.space import Study
from workbench.tuning.storage import masked_storage

#: The key of a split's per-query-type table in report.json: the table is of the study's objective
#: measure, which the key names ("R@10 by query_type"). Written and read only here.
_BY_TYPE_KEY = "{measure} by query_type"


def number(v: Any) -> float:
    """A number as a report holds it: ``null`` (strict JSON's undefined number, :mod:`workbench._infra.jsonout`)
    is NaN, anything else ``float(v)``."""
    return math.nan if v is None else float(v)


def ci_pair(v: Any) -> tuple[float, float]:
    """A 95% CI as JSON holds it (a list of two numbers, ``null`` where undefined) as a pair of floats."""
    lo, hi = v
    return number(lo), number(hi)


#: How :class:`_Record` reads a field of each annotated type.
_READ: dict[str, Callable[[Any], Any]] = {"str": str, "int": int, "float": number, "tuple[float, float]": ci_pair}


class _Record:
    """``to_json`` / ``from_json`` of a flat frozen dataclass whose fields are ``str``, ``int``, ``float``
    or ``tuple[float, float]`` (a CI, a JSON list): ``from_json`` converts each field by its type and
    takes a field's default when the key is absent."""

    # for the type checker only: every subclass is a dataclass (an annotation without a value creates nothing)
    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        """The fields; a field left at a NaN default (``p_adjusted`` of a report written before it existed)
        is left out, so an old report is written back as it was read."""
        import dataclasses
        import math

        d = asdict(self)
        for f in dataclasses.fields(self):
            v = d[f.name]
            if isinstance(f.default, float) and math.isnan(f.default) and isinstance(v, float) and math.isnan(v):
                del d[f.name]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]):
        import dataclasses

        # f.type is the annotation's text (this module has ``from __future__ import annotations``)
        return cls(**{f.name: _READ[cast(str, f.type)](d[f.name]) for f in dataclasses.fields(cls)
                      if f.name in d or f.default is dataclasses.MISSING})


@dataclass(frozen=True)
class MeasureComparison(_Record):
    """One measure on one split, the chosen trial against the baseline config on the same queries.

    Attributes:
        chosen, baseline: the means of the per-query values (the measure's units, 0-1).
        chosen_ci, baseline_ci: their 95% percentile-bootstrap CIs.
        mean_diff: the mean of chosen − baseline per query; ``ci_low``, ``ci_high`` its 95% bootstrap CI.
        p_value: the paired sign-flip randomisation test's two-sided p-value.
        p_adjusted: ``p_value`` adjusted by Holm–Bonferroni over the split's family: every measure
            and every query type of the report (:func:`workbench.eval.stats.adjust_pvalues`); NaN in
            reports written before it existed.
    """

    chosen: float
    chosen_ci: tuple[float, float]
    baseline: float
    baseline_ci: tuple[float, float]
    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float = math.nan


@dataclass(frozen=True)
class TypeComparison(_Record):
    """The objective measure on the ``n`` queries of one query type of a split: ``chosen`` and
    ``baseline`` means (the measure's units), ``mean_diff`` with its 95% bootstrap CI and the paired
    sign-flip ``p_value`` and its Holm–Bonferroni ``p_adjusted`` (as :class:`MeasureComparison`, without the
    CIs of the two means)."""

    n: int
    chosen: float
    baseline: float
    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float = math.nan


@dataclass(frozen=True)
class SplitReport:
    """The chosen trial against the baseline on one held-out split (dev or test).

    Attributes:
        queries: the queries evaluated; 0 when the split has none (``note`` says why).
        measures: measure -> :class:`MeasureComparison` (the objective and the experiment's measures).
        by_type_measure: the measure ``by_query_type`` is of (the study's objective).
        by_query_type: query type -> :class:`TypeComparison`.
        note: why the split has no queries.

    JSON: ``{"queries", "measures", "<measure> by query_type"}`` (and ``"answers"`` when the study weighs
    abstention), or ``{"queries": 0, "note"}``.
    """

    queries: int
    measures: dict[str, MeasureComparison] = field(default_factory=dict)
    by_type_measure: str = ""
    by_query_type: dict[str, TypeComparison] = field(default_factory=dict)
    note: str = ""
    #: With ``objective.abstention``: ``{"chosen": {...}, "baseline": {...}}``, each
    #: :func:`workbench.tuning.objective.answer_shares` on the split (empty when the study does not weigh it).
    answers: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        if not self.queries:
            return {"queries": 0, "note": self.note}
        out: dict[str, Any] = {"queries": self.queries, "measures": {m: r.to_json() for m, r in self.measures.items()}}
        out[_BY_TYPE_KEY.format(measure=self.by_type_measure)] = {t: r.to_json() for t, r in self.by_query_type.items()}
        if self.note:
            out["note"] = self.note
        if self.answers:
            out["answers"] = self.answers
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
                   {str(t): TypeComparison.from_json(r) for t, r in by_type.items()}, str(d.get("note", "")),
                   {str(k): {str(a): number(b) for a, b in v.items()} for k, v in (d.get("answers") or {}).items()})


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
    """The chosen trial re-evaluated (:func:`workbench.tuning.select.choose_and_report`): ``dev`` and ``test``
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
    """``report.json`` of a study's output folder (:func:`workbench.tuning.outputs.write_outputs`), what the
    dashboard's study page reads.

    Attributes:
        study: the study's name.
        storage: where its trials live (``journal``, ``memory``, ``journal:PATH`` or a URL with the
            password masked); ``""`` in reports written before it was recorded.
        chosen_trial: the chosen trial's number; ``chosen_params`` its Optuna parameters.
        notes: what the choice should be read with (a flatter trial chosen over the best, ...).
        sensitivity: rows ``{"param", "value", "objective", "minus10", "plus10", "drop"}``
            (:func:`workbench.tuning.select.sensitivity`).
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
        return cls(result.study.name, masked_storage(storage or "journal"), result.chosen.number,
                   dict(result.chosen_params), list(result.notes), list(result.sensitivity), result.evaluation)

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
    #: The chosen trial's rerank stage after fusion (:class:`workbench.experiment.config.RerankStage`), or None.
    chosen_rerank: Any = None

    @property
    def report(self) -> dict[str, Any]:
        """:attr:`evaluation` as JSON (``dev``, ``test``, ``train``, ``qrels``, as report.json holds them), for
        readers that take plain dicts (MLflow tracking); typed readers use :attr:`evaluation`."""
        return self.evaluation.to_json()
