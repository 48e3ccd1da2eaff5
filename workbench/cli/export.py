"""`workbench export`: ship a config as SQL, an OpenSearch pipeline or JSON."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, cast

import typer

from workbench.cli._shared import _fail, _log, app, choices, echo_json, json_option, secho
from workbench.errors import WorkbenchError


@app.command("export")
def export_cmd(
    study_file: Optional[Path] = typer.Argument(None, help="Study TOML whose study has run (journal or PostgreSQL "
                                                "storage); or give -e/-c."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write: a .json file for --format json, a folder "
                             "for postgres / opensearch."),
    fmt: str = typer.Option("json", "--format", "-f", **choices("json", "postgres", "opensearch"),
                            help="json (the workbench's config), postgres (one SQL "
                            "statement and a function), opensearch (hybrid query and search pipeline)."),
    experiment: Optional[Path] = typer.Option(None, "--experiment", "-e", help="Export a config of this experiment "
                                              "instead of a study."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="A config name of the experiment (its "
                                         "\\[configs.NAME] table)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Dataset to verify on (default: the "
                                          "study's, or the experiment's first)."),
    force: bool = typer.Option(False, "--force", help="Replace existing files that are not earlier exports of this "
                               "config (never a folder or a device)."),
    verify: bool = typer.Option(False, "--verify", help="Run the exported artifact on the engine for every dev and "
                                "test query and compare with the workbench's fused ranking."),
    splits: str = typer.Option("dev,test", "--splits", help="Splits --verify reads (comma-separated)."),
    min_parity: Optional[float] = typer.Option(None, "--min-parity", help="With --verify: exit 1 when parity@k is "
                                               "below this (e.g. 1.0 in CI)."),
    storage: str = typer.Option("journal", "--storage", help="Where the study is stored (as for `tune`)."),
    as_json: bool = json_option("the files written and the parity report"),
) -> None:
    """Write a tuned config (a study's chosen trial, or an experiment's config) for production: the workbench's
    JSON, one PostgreSQL statement, or an OpenSearch hybrid query and pipeline; --verify proves it ranks the same."""
    from workbench.export.job import from_experiment, from_study, write
    from workbench.settings import home_dir
    from workbench.types import SPLITS

    try:
        if (study_file is None) == (experiment is None):
            raise WorkbenchError("give a study file, or --experiment EXPERIMENT.toml --config CONFIG (not both)")
        if experiment is not None and not config:
            raise WorkbenchError("--experiment needs --config: name one of the experiment's [configs.NAME]")
        split_list = [s.strip() for s in splits.split(",") if s.strip()]
        bad = [s for s in split_list if s not in SPLITS]
        if bad or not split_list:
            raise WorkbenchError(f"--splits {splits!r}: use some of {', '.join(SPLITS)}")
        if min_parity is not None and (not verify or not 0.0 <= min_parity <= 1.0):
            raise WorkbenchError("--min-parity takes a number in [0, 1] and needs --verify")
        home = home_dir()
        target = out if fmt == "json" else out / "x"
        if not os.access(next((p for p in [target.parent, *target.parent.parents] if p.exists()), Path("/")), os.W_OK):
            raise WorkbenchError(f"cannot write into {out if fmt != 'json' else out.parent}; choose another --out")
        source = (from_study(study_file, storage, home, _log) if study_file is not None
                  # the checks above: without a study file, --experiment and --config are given
                  else from_experiment(cast(Path, experiment), cast(str, config), dataset))
        if dataset is not None and study_file is not None and dataset != source.dataset:
            raise WorkbenchError(f"study {study_file} was tuned on {source.dataset}; --dataset {dataset} would "
                                 "verify it elsewhere: drop --dataset")
        result = write(source, fmt, out, home=home, verify=verify, splits=split_list, log=_log, force=force)
    except WorkbenchError as exc:
        _fail(exc)
    except OSError as exc:  # the path that failed (a file of the home, or --out), not always --out
        from workbench._infra.durable import storage_error

        _fail(storage_error(exc, exc.filename or out))
    report = result["parity"]
    if as_json:
        echo_json({"files": result["files"], "parity": report.to_json() if report else None})
    else:
        typer.echo(f"wrote {', '.join(result['files'])}: {source.label}")
        if report is not None:
            typer.echo(report.summary())
            for d in report.differences[:20]:
                typer.echo(f"  {d.query_id} rank {d.rank}: workbench {d.workbench}, engine {d.engine} — {d.cause}")
            if len(report.differences) > 20:
                typer.echo(f"  … {len(report.differences) - 20} more in the export's parity report")
    if report is not None and min_parity is not None and report.parity < min_parity:
        secho(f"parity@{report.k} {report.parity:.4f} is below --min-parity {min_parity}", err=True, fg="red")
        raise typer.Exit(1)
