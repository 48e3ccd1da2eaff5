"""What ``workbench gate`` runs (issue #6): does a candidate lose recall against a baseline, on any kind of query?

``workbench gate`` compares a candidate with either a baseline source (per-query values of both:
**paired** decision, :func:`run_pair`) or a file of expected values kept in ``experiments/``
(like Pyserini's regression files: ``gate-*.toml``, :func:`run_gate_file`). The CLI only parses,
calls and prints. Sources: :mod:`workbench.gate.sources`; the policy and gate files:
:mod:`workbench.gate.policy`; the decision rule: :mod:`workbench.gate.decide`; the reports:
:mod:`workbench.gate.report`.

**Qrels layer.** Both rankings are judged by one qrels layer (:mod:`workbench.judging.layers`):
``--qrels``, else the gate file's ``qrels``, else the experiment's (a gate file's experiment,
or the experiments the candidate and baseline name, which must then agree), else ``built``.
Under ``human`` only queries with a human grade are gated. The result and its report name
the layer and the hash of its qrels.

Exit codes (CLI): 0 pass, 1 regression, 2 usage or data error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError
from workbench.gate.decide import GateResult, gate_expected, gate_pair
from workbench.gate.policy import GATE_MEASURES, GatePolicy, load_gate_file
from workbench.gate.sources import check_source, experiment_layer, load_source, source_layer
from workbench.types import DEFAULT_SEED, SPLITS

if TYPE_CHECKING:
    from workbench.judging.store import JudgmentStore


class _Layers:
    """The qrels layer of each dataset, loaded once and described in the log; the judgment store is
    opened only for a layer other than ``built``, and closed when the ``with`` block ends."""

    def __init__(self, layer: str, home: Path, log: Callable[[str], None]):
        self.layer, self.home, self.log = layer, home, log
        self.store: JudgmentStore | None = None
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
        path: the gate file (:func:`~workbench.gate.policy.load_gate_file`).
        home: the workbench home (built datasets, the candidate cache, the judgment store).
        options: policy values given on the command line (:class:`~workbench.gate.policy.GatePolicy` field ->
            value; None: not given); they override the file's, which override the defaults.
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


def run_pair(candidate: str, baseline: str, dataset: str, *, home: Path, measures: Sequence[str] = GATE_MEASURES,
             options: Mapping[str, Any] | None = None, splits: Sequence[str] = (), qrels: str | None = None,
             seed: int = DEFAULT_SEED, log: Callable[[str], None] = lambda _m: None) -> GateResult:
    """``workbench gate --candidate SOURCE --baseline SOURCE --dataset NAME``: the paired gate.

    Args:
        candidate, baseline: ranking sources (:func:`~workbench.gate.sources.load_source`).
        dataset: the dataset whose queries and qrels judge both.
        measures: the measures to gate (aliases allowed: ``MRR@10`` is ``RR@10``); the first is the one
            losses are listed by.
        options: policy values given on the command line (None: not given) over
            :class:`~workbench.gate.policy.GatePolicy`'s defaults: the same defaults a gate file starts from.
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
    for opt, spec in (("--candidate", candidate), ("--baseline", baseline)):
        try:
            check_source(spec)  # before the dataset is built: a misspelt config costs no build
        except WorkbenchError as exc:
            raise WorkbenchError(f"{opt}: {exc}") from None
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
