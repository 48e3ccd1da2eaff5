"""``workbench export``: resolve what is exported, write it in the chosen format, and verify it on the engine.

What is exported (:class:`ExportSource`): a study's chosen trial (``STUDY.toml``, as tuned) or an experiment's config
(``-e EXPERIMENT.toml -c CONFIG``). Formats (:data:`FORMATS`):

* ``json`` — the workbench's own production config with provenance (one file: ``-o FILE.json``);
* ``postgres`` — :mod:`workbench.export.postgres` (a folder: ``-o DIR``);
* ``opensearch`` — :mod:`workbench.export.opensearch` (a folder: ``-o DIR``).

Every engine format also writes ``<config>.export.json``: the json export plus what the engine artifact is
(function, inputs, settings or pipeline) and, with ``verify``, the parity report
(:mod:`workbench.export.parity`). The same report is kept in ``<home>/exports/<name>.<format>.json`` for the
dashboard's study page (``<name>``: the study's name, or ``<experiment file stem>.<config>``).

**Files.** File names come from the config's name made safe (:func:`workbench.export.names.file_stem`: a name
such as ``sub/dir`` stays in the folder). Every target is checked before anything is written: a path that is
not a regular file (a folder, a device such as ``/dev/null``) is refused, and so is an existing file that is not
a workbench export of the same config (its ``<config>.export.json``, or for ``json`` the file itself, with the
export's ``provenance``) unless ``force``. Header values that may hold secrets (live lanes' ``headers`` and
``env`` values other than ``${VAR}`` references) are written as ``***``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench._infra.jsonout import dumps as strict_json
from workbench.errors import ConfigError

if TYPE_CHECKING:
    from workbench.export.opensearch import OpenSearchExport
    from workbench.export.postgres import PostgresExport

FORMATS = ("json", "postgres", "opensearch")
#: The files an engine format writes beside ``<stem>.export.json``.
SUFFIXES = {"postgres": (".sql", ".statement.sql"), "opensearch": (".search.json", ".pipeline.json", ".opensearch.md")}


@dataclass
class ExportSource:
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

    def resolved(self) -> ExportSource:
        """This source with its experiment and config read back from the json export (a study's trial is read
        only for an engine format: ``--format json`` writes the export as the study chose it)."""
        if self.exp is None:
            from dataclasses import replace

            from workbench.tuning.export import read_export

            exp, cfg = read_export(self.config_json, self.path or Path("export"))
            self.exp, self.cfg = exp, replace(cfg, name=self.config_json["provenance"].get("study") or cfg.name)
        return self


def from_experiment(path: Path, config: str, dataset: str | None) -> ExportSource:
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
    return ExportSource(exp, cfg, ds, config_export(exp, cfg, ds), f"{path.name}:{config}")


def from_study(study_file: Path, storage: str, home: Path, log: Callable[[str], None]) -> ExportSource:
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
    return ExportSource(None, None, st.dataset, config, label, study_file)


def export_identity(config_json: Mapping[str, Any]) -> tuple[str, ...]:
    """What names one exported config: ``("study", name)`` for a tuned study's config, else
    ``("config", experiment file, config name)``, the file as resolved when it was exported
    (``provenance.experiment_file``: another clone's ``experiments/seeds.toml`` is another file, and one file typed
    two ways is one), else as typed (exports written before it); ``()`` when the json carries no provenance."""
    prov = config_json.get("provenance")
    if not isinstance(prov, dict):
        return ()
    if prov.get("study"):
        return ("study", str(prov["study"]))
    return ("config", str(prov.get("experiment_file") or prov.get("experiment")), str(prov.get("config")))


def _is_export(path: Path, source: ExportSource) -> bool:
    """Whether ``path`` is an earlier workbench export of ``source``'s config: a json object whose
    ``provenance`` names the same study, or the same experiment and config (another config's export is
    someone else's file: replacing it needs ``--force``)."""
    if not path.is_file():  # never read a FIFO or a device (a FIFO blocks, /dev/zero never ends)
        return False
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and export_identity(doc) != () and export_identity(doc) == export_identity(source.config_json)


def check_targets(targets: Sequence[Path], ours: bool, force: bool) -> None:
    """Refuse, before anything is written, a target that is not a regular file, or (without ``force``) an
    existing file when ``ours`` is False (the folder holds no earlier export of this config).

    Raises:
        ConfigError: naming the path and the fix.
    """
    dangling = [t for t in targets if t.is_symlink() and not t.exists()]
    if dangling:  # writing would replace the link with a file: someone's link, pointing at what is not there yet
        raise ConfigError(f"--out: {dangling[0]} is a link to {os.readlink(dangling[0])}, which does not exist; "
                          "remove the link or choose another --out")
    present = [t for t in targets if t.exists()]  # a link is judged by what it points at (/dev/stdout: a pipe)
    for t in present:
        if not t.is_file():
            kind = "a folder" if t.is_dir() else "not a regular file (a device, a socket or a pipe)"
            raise ConfigError(f"--out: {t} is {kind}; the export would replace it: choose another --out")
    if present and not ours and not force:
        raise ConfigError(f"--out: {present[0]} exists and is not an earlier workbench export of this config; pass "
                          "--force to replace it, or choose another --out")


def masked(config_json: dict[str, Any]) -> dict[str, Any]:
    """The json export with live lanes' literal ``headers`` and ``env`` values as ``***`` (``${VAR}`` references
    are kept: they name a variable, not a secret)."""
    import copy
    import re

    out = copy.deepcopy(config_json)
    for lane in (out.get("lanes") or {}).values():
        for key in ("headers", "env"):
            table = lane.get(key) if isinstance(lane, dict) else None
            if isinstance(table, dict):
                for name, value in table.items():
                    if not (isinstance(value, str) and re.fullmatch(r"[^$]*(\$\{[A-Za-z_][A-Za-z0-9_]*\}[^$]*)+",
                                                                    value)):
                        table[name] = "***"
    return out


def kept_report_name(source: ExportSource) -> str:
    """The name of the parity report kept in ``<home>/exports``: the study's name, or
    ``<experiment stem>.<config>`` (two experiments' configs of one name keep apart)."""
    from workbench.export.names import file_stem

    ident = export_identity(source.config_json)
    if ident[:1] == ("study",):
        return file_stem(ident[1])
    experiment = ident[1] if ident else "experiment"
    return file_stem(f"{Path(experiment).stem}.{source.cfg.name}")


def write(source: ExportSource, fmt: str, out: Path, *, home: Path, verify: bool = False,
          splits: Sequence[str] = ("dev", "test"), log: Callable[[str], None] = lambda _m: None,
          force: bool = False) -> dict[str, Any]:
    """Write ``source`` as ``fmt`` to ``out`` (a file for ``json``, a folder otherwise) and, with ``verify``, run
    the parity check on the engine. Returns ``{"files": [...], "parity": report-json or None}``. Targets are
    checked first (module docstring; ``force``: replace existing files that are not earlier exports).

    Raises:
        ConfigError: an unknown format, a config the engine cannot express (naming the lane), ``out`` of the
            wrong shape, a target that is not a regular file or (without ``force``) is someone else's file.
        PgError / OpenSearchError: the engine refuses the artifact.
    """
    from workbench._infra.durable import atomic_write_text, mkdirs
    from workbench.export.names import file_stem

    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "json":
        if verify:
            raise ConfigError("--verify runs an engine artifact; use it with --format postgres or opensearch")
        if out.is_dir():
            raise ConfigError(f"--out {out} is a folder; give a file path such as {out / 'config.json'}")
        check_targets([out], _is_export(out, source), force)
        mkdirs(out.parent)
        atomic_write_text(out, strict_json(masked(source.config_json), indent=1, default=str) + "\n")
        return {"files": [str(out)], "parity": None}
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is not a folder; --format {fmt} writes several files: give a folder")
    if fmt == "opensearch":
        exp, cfg = source.resolved().exp, source.resolved().cfg
        others = [ln for ln in cfg.lanes if exp.lanes[ln].kind != "opensearch"]
        if others:  # before any work: a dataset build, lanes run
            raise ConfigError(f"config {cfg.name}: lane {others[0]} (kind {exp.lanes[others[0]].kind}) "
                              f"is not an OpenSearch lane, so the config is not one OpenSearch request; export a "
                              f"config of opensearch lanes, or use --format postgres / json")
    stem = file_stem(source.resolved().cfg.name)
    meta = out / f"{stem}.export.json"
    check_targets([out / f"{stem}{suffix}" for suffix in SUFFIXES[fmt]] + [meta], _is_export(meta, source), force)
    from workbench.data import catalog
    from workbench.experiment.cache import CandidateCache

    source = source.resolved()
    from workbench.experiment.runner import Engine

    ds = catalog.ensure(source.dataset, home=home, log=log)
    engine = Engine(source.exp, home, False, log)
    cache = CandidateCache(home / "cache" / "candidates")
    report = None
    artifact: PostgresExport | OpenSearchExport
    if fmt == "postgres":
        from workbench.export import parity, postgres

        artifact = postgres.build(source.cfg, source.exp, ds, engine)
        if verify:
            log(f"verifying {artifact.function} on {ds.name} ({', '.join(splits)} queries) against the workbench's fusion")
            report = parity.verify_postgres(artifact, source.exp, source.cfg, ds, engine, cache, splits=splits, log=log)
        engine_info = {"function": artifact.function, "inputs": [p.__dict__ for p in artifact.params],
                       "settings": artifact.settings, "rows": artifact.limit}
    else:
        from dataclasses import replace

        from workbench.export import opensearch as os_export
        from workbench.export import parity

        cfg, stage_note = source.cfg, None
        if cfg.rerank is not None:  # not in the request: the application reranks what it returns
            stage = source.exp.rerankers[cfg.rerank.reranker]
            stage_note = (f"Rerank stage (not in the request; run it in the application): reranker "
                          f"{cfg.rerank.reranker} (kind {stage.kind}, {dict(stage.params)}) rescoring the top "
                          f"{cfg.rerank.depth}, weight {cfg.rerank.weight} (workbench.reranking.stage.apply_rerank), then "
                          f"the top {cfg.top_k}; the request returns the fused top {max(cfg.top_k, cfg.rerank.depth)}.")
            cfg = replace(cfg, top_k=max(cfg.top_k, cfg.rerank.depth), rerank=None)
        lanes = {ln: engine.lane(ds, source.exp.lanes[ln]) for ln in cfg.lanes}
        first = next(iter(lanes.values()))
        artifact = os_export.build_opensearch_export(cfg.name, lanes, cfg, first.es, first.index,
                                                     depth=source.exp.depth)
        if stage_note:
            artifact.differences.append(stage_note)
        if artifact.production:
            log(f"production index {artifact.index} at {first.url}, read only: nothing is installed or written there"
                + ("; --verify sends the pipeline in each request's body" if verify and artifact.pipeline else ""))
        if verify:
            log(f"verifying {'pipeline ' + artifact.pipeline_id if artifact.pipeline_id else 'the request'} on "
                f"{ds.name} ({', '.join(splits)} queries) against the workbench's fusion")
            report = parity.verify_run(artifact.search, "opensearch", source.exp, cfg, ds, engine, cache,
                                       splits=splits, hints=os_export.parity_hints(cfg), log=log)
        engine_info = {"index": artifact.index, "pipeline_id": artifact.pipeline_id, "pipeline": artifact.pipeline,
                       "request": artifact.request, "min_score": artifact.min_score,
                       "differences": artifact.differences, "read_only": artifact.production}
    doc = {**masked(source.config_json), fmt: engine_info,
           "parity": report.to_json() if report is not None else None}
    files = artifact.files({"source": source.label, "dataset": source.dataset,
                            "code_commit": source.config_json.get("provenance", {}).get("code_commit"),
                            **({"parity": report.summary()} if report is not None else {})})
    check_targets([out / name for name in files] + [meta], _is_export(meta, source), force)  # all, before any is written
    mkdirs(out)
    written = []
    for name, text in files.items():
        atomic_write_text(out / name, text)
        written.append(str(out / name))
    atomic_write_text(meta, strict_json(doc, indent=1, default=str) + "\n")
    written.append(str(meta))
    if report is not None:
        keep = home / "exports" / f"{kept_report_name(source)}.{fmt}.json"
        mkdirs(keep.parent)
        atomic_write_text(keep, strict_json({"source": source.label, **report.to_json()}, indent=1, default=str) + "\n")
    return {"files": written, "parity": report}
