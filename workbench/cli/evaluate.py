"""`workbench eval`: run an experiment file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app, json_option, qrels_option, secho
from workbench.errors import WorkbenchError


@app.command("eval")
def eval_cmd(
    experiment: Path = typer.Argument(..., help="Experiment TOML, e.g. experiments/seeds.toml."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log params, metrics and artifacts to MLflow."),
    as_json: bool = json_option("the comparison's records", "a JSON list"),
    qrels: Optional[str] = qrels_option("the experiment file's"),
) -> None:
    """Index what is missing, evaluate every config on every dataset, print the comparison, track it in MLflow."""
    from workbench.data.catalog import data_for
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import run_experiment
    from workbench.judging.layers import check_layer
    from workbench.settings import home_dir

    try:
        layer = check_layer(qrels, "--qrels") if qrels is not None else None
        exp = load_experiment(experiment)
        layer = layer or exp.qrels
        data_for(list(exp.datasets))  # the corpora its datasets read (none for source = "files")
        home = home_dir()
        if track:
            from workbench.experiment.tracking import check_tracking

            check_tracking(home, exp.name)
        _log(f"qrels layer: {layer}" + (" (--qrels)" if qrels is not None else f" ({experiment}"
                                        + (": qrels)" if "qrels" in exp.raw else ": the default)")))
        t0 = time.perf_counter()
        result = run_experiment(exp, home=home, progress=True, log=_log, qrels=layer)
        elapsed = time.perf_counter() - t0
    except WorkbenchError as exc:
        _fail(exc)
    from workbench.experiment import report

    if as_json:
        typer.echo(report.comparison_frame(result).to_json(orient="records", indent=1))
    else:
        typer.echo(report.render(result))
        typer.echo(f"\n{len(result.configs)} config runs in {elapsed:.1f} s; candidate cache: "
                   f"{result.cache_hits} hits, {result.cache_misses} misses")
    if track:
        from workbench.experiment.tracking import log_job, tracking_uri

        try:
            run_id = log_job(result, home)
        except Exception as exc:  # MLflow raises many kinds; the comparison above is already printed
            from workbench._infra.durable import storage_error_in

            uri = tracking_uri(home)
            store = Path(uri.split(":///", 1)[1]) if uri.startswith("sqlite:///") else home / "mlartifacts"
            full = storage_error_in(exc, store)  # a full disk or a read-only home, however MLflow wrapped it
            why = str(full) if full else (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            _fail(WorkbenchError(f"could not track in MLflow at {uri}: {why}; the comparison above was not tracked "
                                 "(fix that, or unset MLFLOW_TRACKING_URI, or pass --no-track)"))
        secho(f"tracked in MLflow: {tracking_uri(home)} (parent run {run_id})", err=True)
