"""`workbench tune`: run a study file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app, echo_json, json_option, qrels_option, secho
from workbench.errors import WorkbenchError


@app.command("tune")
def tune_cmd(
    study_file: Path = typer.Argument(..., help="Study TOML, e.g. experiments/tune-kb.toml."),
    trials: Optional[int] = typer.Option(None, "--trials", min=1, help="Complete trials wanted in all (default: the file's)."),
    storage: str = typer.Option("journal", "--storage", help="journal (resumable, default), memory, journal:PATH, "
                                "postgresql (the workbench's server) or a postgresql:// URL."),
    workers: int = typer.Option(1, "--workers", min=1, help="Processes sharing the study (needs PostgreSQL storage)."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the study to MLflow."),
    qrels: Optional[str] = qrels_option("the study file (else its experiment)'s"),
    as_json: bool = json_option("the study's report (report.json's object, plus trials_run, elapsed_s and folder) "
                                 "instead of the summary"),
) -> None:
    """Tune fusion and engine parameters with Optuna over cached candidates; report on dev and test."""
    from dataclasses import replace

    from workbench.data.catalog import data_for
    from workbench.errors import StorageError
    from workbench.judging.layers import check_layer
    from workbench.settings import home_dir
    from workbench.tuning.outputs import summary, write_outputs
    from workbench.tuning.space import load_study
    from workbench.tuning.study import run_study

    try:
        layer = check_layer(qrels, "--qrels") if qrels is not None else None
        st = load_study(study_file)
        if layer is not None:
            st = replace(st, qrels=layer)
        _log(f"qrels layer: {st.qrels}" + (" (--qrels)" if layer is not None else ""))
        data_for(list(st.experiment.datasets))  # the corpora its datasets read (none for source = "files")
        home = home_dir()
        if track:
            from workbench.experiment.tracking import check_tracking

            check_tracking(home, st.experiment.name)
        result = run_study(st, home=home, storage=storage, trials=trials, workers=workers, log=_log,
                           progress=True)
        try:
            folder = write_outputs(result, home, storage)
        except StorageError as exc:
            if storage.strip() != "memory":
                raise
            folder = None  # a study in memory still reports (the way out of a read-only or full home)
            secho(f"warning: the report was not written: {exc}", fg=typer.colors.YELLOW, err=True)
    except WorkbenchError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        where = "nothing was kept (memory storage)" if storage == "memory" else \
            f"the complete trials are kept in {storage} storage; run the same command to resume"
        secho(f"interrupted: {where}", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(130) from None
    if as_json:
        from workbench.tuning.report import StudyReport

        body = {**StudyReport.of(result, storage).to_json(), "trials_run": result.trials_run,
                "elapsed_s": round(result.elapsed_s, 3), "folder": str(folder) if folder else None}
        echo_json(body)
    else:
        typer.echo(summary(result))
        typer.echo(f"\n{result.trials_run} trials run by this command in {result.elapsed_s:.1f} s; "
                   + (f"report, export and plots in {folder}" if folder else "no report written"))
    if track and folder is not None:
        from workbench.experiment.tracking import log_study, tracking_uri

        try:
            run_id = log_study(result, home, folder)
        except Exception as exc:
            _fail(WorkbenchError(f"could not track in MLflow at {tracking_uri(home)}: {str(exc).splitlines()[0][:200]}; "
                                 "pass --no-track"))
        secho(f"tracked in MLflow: {tracking_uri(home)} (run {run_id})", err=True)
