"""``workbench export``: resolve what is exported, write it in the chosen format, and verify it on the engine.

What is exported (:class:`Source`): a study's chosen trial (``STUDY.toml``, as tuned) or an experiment's config
(``-e EXPERIMENT.toml -c CONFIG``). Formats (:data:`FORMATS`):

* ``json`` — the workbench's own production config with provenance (one file: ``-o FILE.json``);
* ``postgres`` — :mod:`workbench.export.postgres` (a folder: ``-o DIR``);
* ``opensearch`` — :mod:`workbench.export.opensearch` (a folder: ``-o DIR``).

Every engine format also writes ``<config>.export.json``: the json export plus what the engine artifact is
(function, inputs, settings or pipeline) and, with ``verify``, the parity report
(:mod:`workbench.export.parity`). The same report is kept in ``<home>/exports/<config>.<format>.json`` for the
dashboard's study page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from workbench.errors import ConfigError

FORMATS = ("json", "postgres", "opensearch")


@dataclass
class Source:
    """The config to export: the experiment (with the exported lanes in place), the config, the dataset it is
    verified on, and the json export (:func:`workbench.tuning.export.export_config` or
    :func:`~workbench.tuning.export.config_export`)."""

    exp: Any
    cfg: Any
    dataset: str
    config_json: dict[str, Any]
    label: str
    #: Where the json export is read from for an engine format (a study's file, in errors).
    path: Path | None = None

    def resolved(self) -> "Source":
        """This source with its experiment and config read back from the json export (a study's trial is read
        only for an engine format: ``--format json`` writes the export as the study chose it)."""
        if self.exp is None:
            from dataclasses import replace

            from workbench.tuning.export import read_export

            exp, cfg = read_export(self.config_json, self.path or Path("export"))
            self.exp, self.cfg = exp, replace(cfg, name=self.config_json["provenance"].get("study") or cfg.name)
        return self


def from_experiment(path: Path, config: str, dataset: str | None) -> Source:
    """``[configs.CONFIG]`` of the experiment at ``path``, verified on ``dataset`` (default: its first dataset).

    Raises:
        ConfigError: the experiment does not load, has no such config, or does not list ``dataset``.
    """
    from workbench.experiment.config import load_experiment
    from workbench.tuning.export import config_export

    exp = load_experiment(path)
    if config not in exp.configs:
        raise ConfigError(f"{path} has no config {config!r}; configs: {', '.join(exp.configs)}")
    ds = dataset or exp.datasets[0]
    if ds not in exp.datasets:
        raise ConfigError(f"{path} does not evaluate dataset {ds!r}; choose one of {', '.join(exp.datasets)} with --dataset")
    cfg = exp.configs[config]
    return Source(exp, cfg, ds, config_export(exp, cfg, ds), f"{path.name}:{config}")


def from_study(study_file: Path, storage: str, home: Path, log: Callable[[str], None]) -> Source:
    """The chosen trial of the study at ``study_file`` in ``storage`` (only read; nothing is written to it).

    Raises:
        ConfigError / WorkbenchError: the study is not stored, has no trials, or was stored for another definition.
    """
    from workbench.errors import WorkbenchError
    from workbench.tuning.candidates import Candidates
    from workbench.tuning.export import export_config, load_stored_study
    from workbench.tuning.select import choose_and_report
    from workbench.tuning.space import load_study
    from workbench.tuning.storage import storage_for

    st = load_study(study_file)
    if storage == "memory":
        raise WorkbenchError("an in-memory study is gone when `tune` ends; export from journal or PostgreSQL "
                             "storage (or take export.json from the study folder)")
    ost = load_stored_study(st, storage_for(st, home, storage, create=False, log=log))  # writes nothing
    if not ost.trials:
        raise WorkbenchError(f"study {st.name} has no trials in {storage} storage; run `workbench tune {study_file}` first")
    result = choose_and_report(st, ost, Candidates(st, home, log), log)
    config = export_config(result, home)
    test = result.evaluation.test.measures if result.evaluation.test else {}
    label = (f"trial {result.chosen.number} of study {st.name}, test "
             + ", ".join(f"{m} {r.chosen:.4f}" for m, r in test.items()))
    return Source(None, None, st.dataset, config, label, study_file)


def write(source: Source, fmt: str, out: Path, *, home: Path, verify: bool = False,
          splits: Sequence[str] = ("dev", "test"), log: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Write ``source`` as ``fmt`` to ``out`` (a file for ``json``, a folder otherwise) and, with ``verify``, run
    the parity check on the engine. Returns ``{"files": [...], "parity": report-json or None}``.

    Raises:
        ConfigError: an unknown format, a config the engine cannot express (naming the lane), ``out`` of the
            wrong shape.
        PgError / OpenSearchError: the engine refuses the artifact.
    """
    from workbench.durable import atomic_write_text, mkdirs

    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "json":
        if verify:
            raise ConfigError("--verify runs an engine artifact; use it with --format postgres or opensearch")
        if out.is_dir():
            raise ConfigError(f"--out {out} is a folder; give a file path such as {out / 'config.json'}")
        mkdirs(out.parent)
        atomic_write_text(out, json.dumps(source.config_json, indent=1, default=str) + "\n")
        return {"files": [str(out)], "parity": None}
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; --format {fmt} writes several files: give a folder")
    from workbench.data import catalog
    from workbench.experiment.cache import CandidateCache

    source = source.resolved()
    from workbench.experiment.runner import Engine

    ds = catalog.ensure(source.dataset, home=home, log=log)
    engine = Engine(source.exp, home, False, log)
    cache = CandidateCache(home / "cache" / "candidates")
    report = None
    if fmt == "postgres":
        from workbench.export import parity, postgres

        artifact = postgres.build(source.cfg, source.exp, ds, engine)
        if verify:
            log(f"verifying {artifact.function} on {ds.name} ({', '.join(splits)} queries) against the workbench's fusion")
            report = parity.verify_postgres(artifact, source.exp, source.cfg, ds, engine, cache, splits=splits, log=log)
        engine_info = {"function": artifact.function, "inputs": [p.__dict__ for p in artifact.params],
                       "settings": artifact.settings, "rows": artifact.limit}
    else:
        from workbench.export import opensearch as os_export, parity

        others = [ln for ln in source.cfg.lanes if source.exp.lanes[ln].kind != "opensearch"]
        if others:
            raise ConfigError(f"config {source.cfg.name}: lane {others[0]} (kind {source.exp.lanes[others[0]].kind}) "
                              f"is not an OpenSearch lane, so the config is not one OpenSearch request; export a "
                              f"config of opensearch lanes, or use --format postgres / json")
        from dataclasses import replace

        cfg, stage_note = source.cfg, None
        if cfg.rerank is not None:  # not in the request: the application reranks what it returns
            stage = source.exp.rerankers[cfg.rerank.reranker]
            stage_note = (f"Rerank stage (not in the request; run it in the application): reranker "
                          f"{cfg.rerank.reranker} (kind {stage.kind}, {dict(stage.params)}) rescoring the top "
                          f"{cfg.rerank.depth}, weight {cfg.rerank.weight} (workbench.eval.rerank.apply_rerank), then "
                          f"the top {cfg.top_k}; the request returns the fused top {max(cfg.top_k, cfg.rerank.depth)}.")
            cfg = replace(cfg, top_k=max(cfg.top_k, cfg.rerank.depth), rerank=None)
        lanes = {ln: engine.lane(ds, source.exp.lanes[ln]) for ln in cfg.lanes}
        first = next(iter(lanes.values()))
        artifact = os_export.build_opensearch_export(cfg.name, lanes, cfg, first.es, first.index,
                                                     depth=source.exp.depth)
        if stage_note:
            artifact.differences.append(stage_note)
        if verify:
            log(f"verifying {'pipeline ' + artifact.pipeline_id if artifact.pipeline_id else 'the request'} on "
                f"{ds.name} ({', '.join(splits)} queries) against the workbench's fusion")
            report = parity.verify_run(artifact.search, "opensearch", source.exp, cfg, ds, engine, cache,
                                       splits=splits, hints=os_export.parity_hints(cfg), log=log)
        engine_info = {"index": artifact.index, "pipeline_id": artifact.pipeline_id, "pipeline": artifact.pipeline,
                       "request": artifact.request, "min_score": artifact.min_score,
                       "differences": artifact.differences}
    doc = {**source.config_json, fmt: engine_info, "parity": report.to_json() if report is not None else None}
    files = artifact.files({"source": source.label, "dataset": source.dataset,
                            "code_commit": source.config_json.get("provenance", {}).get("code_commit"),
                            **({"parity": report.summary()} if report is not None else {})})
    mkdirs(out)
    written = []
    for name, text in files.items():
        atomic_write_text(out / name, text)
        written.append(str(out / name))
    meta = out / f"{source.cfg.name}.export.json"
    atomic_write_text(meta, json.dumps(doc, indent=1, default=str) + "\n")
    written.append(str(meta))
    if report is not None:
        keep = home / "exports" / f"{source.cfg.name}.{fmt}.json"
        mkdirs(keep.parent)
        atomic_write_text(keep, json.dumps({"source": source.label, **report.to_json()}, indent=1, default=str) + "\n")
    return {"files": written, "parity": report}
