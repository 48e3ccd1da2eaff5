"""Rankings to gate, from their sources.

A **source** of a ranking is one of:

* ``EXPERIMENT.toml:CONFIG`` — a config of an experiment, fused from the candidate cache
  (lanes run only on a cache miss), so its lanes are known;
* a production config exported by ``workbench export`` (``*.json``);
* a TREC run file (6 columns).

:func:`load_source` reads one into a :class:`Ranking`; :func:`source_layer` says which qrels layer
the experiment behind a source declares.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError, DataError
from workbench.run import Run
from workbench.settings import PROJECT_ROOT


@dataclass
class Ranking:
    """A ranking to gate: the fused run, the lanes' runs (when known) and a label.

    ``from_file`` is True for a TREC run file: its ties are broken as trec_eval breaks them
    (:func:`workbench.run.read_trec_run`), and the gate warns when that decides a measure.
    """

    label: str
    run: Run
    lanes: dict[str, Run] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    from_file: bool = False
    #: hits of a run file tied with another only as 32-bit floats (:func:`workbench.run.count_float32_ties`)
    float32_ties: int = 0


def _split(spec: str) -> tuple[str, str]:
    """``(experiment path, config)`` of ``EXPERIMENT.toml:CONFIG``, else ``(spec, "")``."""
    path_part, _, config = spec.rpartition(":") if spec.count(":") and not Path(spec).exists() else (spec, "", "")
    return (path_part, config) if config and path_part.endswith(".toml") else (spec, "")


def check_source(spec: str) -> Any:
    """Check what a ranking source names before any slow work (a dataset build, a lane run): the experiment
    file loads and has the config, or the file exists and is not a folder or a bare experiment. Returns the
    loaded :class:`~workbench.experiment.config.Experiment` for ``EXPERIMENT.toml:CONFIG``, else None.

    Raises:
        ConfigError: an experiment file that does not load or lacks the config (the message lists its
            configs), a bare experiment file, a missing path, a folder.
    """
    from workbench.experiment.config import load_experiment

    path_part, config = _split(spec)
    if config:
        exp = load_experiment(Path(path_part))
        if config not in exp.configs:
            raise ConfigError(f"{path_part} has no config {config!r}; configs: {', '.join(exp.configs)}")
        return exp
    path = Path(spec)
    if path.suffix == ".toml" and path.is_file():
        raise ConfigError(f"{spec} is an experiment; name one of its configs: {spec}:CONFIG")
    if not path.exists():
        raise ConfigError(f"{spec!r} is neither a file nor EXPERIMENT.toml:CONFIG; give a TREC run file, an exported "
                          "config (.json) or e.g. experiments/kb.toml:kb-fold-ref")
    if path.is_dir():
        raise ConfigError(f"{spec} is a folder; give a TREC run file, an exported config or EXPERIMENT.toml:CONFIG")
    if not path.is_file():  # /dev/zero is read until memory runs out, a FIFO may never answer
        raise ConfigError(f"{spec} is not a regular file (a device, a FIFO or a socket); give a TREC run file, an "
                          "exported config or EXPERIMENT.toml:CONFIG")
    return None


def load_source(spec: str, dataset: Any, *, home: Path, log: Callable[[str], None] = lambda _m: None) -> Ranking:
    """Read a ranking source (see the module docstring) for ``dataset``.

    Raises:
        ConfigError: an unknown config, a bad export file, what :func:`check_source` refuses.
        DataError: a malformed run file (wrong column count, NaN scores, duplicate doc ids in one
            ranking, empty), or one naming queries the dataset does not have.
    """
    exp = check_source(spec)
    path_part, config = _split(spec)
    if config:
        return _from_experiment(exp, Path(path_part), config, dataset, home, log)
    path = Path(spec)
    if path.suffix == ".json":
        return _from_export(path, dataset, home, log)
    from workbench.run import count_float32_ties, count_ties, read_trec_run

    run = read_trec_run(path, name=path.name)
    known = {q.query_id for q in dataset.queries}
    unknown = sorted(set(run) - known)
    if unknown:
        raise DataError(f"run file {path} names {len(unknown)} query id(s) that dataset {dataset.name} does not have "
                        f"(first: {unknown[:3]}); is it a run of another dataset?")
    ranking = Ranking(path.name, run, from_file=True)
    if count_ties(run).hits:  # which of them only trec_eval's 32-bit floats make (read again as written)
        ranking.float32_ties = count_float32_ties(read_trec_run(path, name=path.name, keep_file_order=True))
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
    engine.check_rerankers([dataset.name])  # a missing model fails before the lanes run
    cache = CandidateCache(home / "cache" / "candidates")
    lanes = lane_candidates(sub, dataset, engine, cache, log)
    runs = {n: lanes[n].run for n in cfg.lanes}
    # a reranker costs model time per query: only the queries of the experiment's own splits are reranked
    queries = [q for q in dataset.queries if q.split in exp.splits] if cfg.rerank is not None else None
    return Ranking(label, config_run(cfg, {n: lr.run for n, lr in lanes.items()}, dataset, engine, queries), runs)


def source_layer(spec: str) -> str | None:
    """The ``qrels`` layer of the experiment a source names (``EXPERIMENT.toml:CONFIG``, or the experiment an
    exported config came from); None for a TREC run file or a source that does not load (its own error
    comes when it is read)."""
    try:
        path_part, config = _split(spec)
        if config:
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
    from workbench.errors import WorkbenchError
    from workbench.experiment.config import load_experiment

    try:
        return load_experiment(Path(path)).qrels
    except WorkbenchError:
        return None


def _from_experiment(exp, path: Path, config: str, dataset, home: Path, log) -> Ranking:
    """The ranking of ``config`` of the loaded experiment ``exp`` (from ``path``; :func:`check_source` found the
    config there)."""
    if dataset.name not in exp.datasets:
        log(f"note: {path.name} does not list dataset {dataset.name}; its lanes run on it anyway")
    return _config_ranking(exp, exp.configs[config], dataset, home, log, f"{path.name}:{config}")


def _from_export(path: Path, dataset, home: Path, log) -> Ranking:
    """An exported production config: lanes with their engine parameters, fusion parameters, and the rerank
    stage with its reranker's kind and parameters when it has one."""
    from workbench.tuning.export import read_export

    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path} is not a config written by `workbench export` (not JSON: {exc})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} is not a config written by `workbench export` (not a JSON object)")
    exp, fused = read_export(cfg, path)
    fused = replace(fused, name=path.stem)
    return _config_ranking(exp, fused, dataset, home, log, path.name)
