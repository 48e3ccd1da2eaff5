"""The gate's policy and gate files.

**Policy.** δ (``margin``), ``min_queries``, ``judged_floor``, ``judged_action``, ``empty_floor`` and
``false_empty_ceiling`` are one :class:`GatePolicy`, declared once with its defaults (0.01, 30, 0.1, ``"warn"``,
0, 1): a CLI option
wins, else the gate file's key, else the default, on both the paired and the expected-values
path.

**Gate files** (``experiments/gate-*.toml``, like Pyserini's regression files) keep the expected
values of an experiment's configs, with the file's policy (:func:`load_gate_file`).

Light on purpose: the CLI imports it for ``workbench gate --help`` (the defaults it shows).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.errors import ConfigError
from workbench.io.toml import kind_hint, read_toml
from workbench.types import SPLITS

#: The measures gated when none are named (the bootstrap seed of paired decisions is :data:`workbench.types.DEFAULT_SEED`).
GATE_MEASURES = ("R@10",)


class GatePolicy(BaseModel):
    """The gate's decision parameters, declared once with their defaults: a gate file's keys, the
    CLI's options and callers of :func:`~workbench.gate.decide.gate_pair` /
    :func:`~workbench.gate.decide.gate_expected` all resolve through it (a CLI option, else the gate
    file's key, else the default here: :meth:`override`).

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
    * ``judged_action`` ``"warn"``;
    * ``empty_floor`` 0 and ``false_empty_ceiling`` 1: honest empty answers are not checked unless a gate asks
      (:func:`~workbench.gate.decide.answers_check`: a candidate that pads its answers to unanswerable queries
      below the floor, or empties answerable ones above the ceiling, fails). Off by default because most query
      sets hold no unanswerable query; a gate over one that does states its own.

    Frozen; unknown fields are refused.

    Raises:
        pydantic.ValidationError: from the constructor, on a value out of range or of the wrong
            type (ints are taken for floats; bools and strings are not); :meth:`from_mapping`
            turns it into a :class:`~workbench.errors.ConfigError` naming the source and key.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    margin: float = Field(default=0.01, ge=0.0, le=1.0, allow_inf_nan=False, description=(
        "the non-inferiority margin δ: the largest fall of a measure's mean still accepted, an absolute "
        "difference in the measure's own units (0.01 = one point of recall@10)"))
    min_queries: int = Field(default=30, ge=1, description=(
        "the fewest queries a stratum needs to be decided; a smaller stratum is reported as too-few, never failed"))
    judged_floor: float = Field(default=0.1, ge=0.0, le=1.0, allow_inf_nan=False, description=(
        "the lowest mean Judged@10 of the candidate (the fraction of its top 10 that the qrels judge, 0-1) "
        "accepted without judged_action"))
    judged_action: Literal["warn", "fail"] = Field(default="warn", description=(
        "what a mean Judged@10 below judged_floor does: warn (listing the documents to judge next) or fail the gate"))
    empty_floor: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False, description=(
        "the lowest share of the dataset's unanswerable queries (type negative) the candidate must answer with "
        "nothing, 0-1; below it the gate fails (0: not checked)"))
    false_empty_ceiling: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False, description=(
        "the highest share of answerable queries (a relevant judgment) the candidate may answer with nothing, 0-1; "
        "above it the gate fails (1: not checked)"))

    #: How the CLI spells each field (``--judged-floor``); messages about CLI values use these names.
    OPTIONS: typing.ClassVar[dict[str, str]] = {
        "margin": "--margin", "min_queries": "--min-queries", "judged_floor": "--judged-floor",
        "judged_action": "--judged-action", "empty_floor": "--empty-floor", "false_empty_ceiling": "--false-empty-ceiling"}

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
        allowed = sorted({*GATE_FILE_KEYS, *GatePolicy.model_fields})
        raise ConfigError(f"{path}: unknown key(s) {sorted(extra)}; allowed: {allowed}" + kind_hint(raw, "gate"))
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
