"""`workbench notebooks`: JupyterLab on notebooks/, or run them headless."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from workbench.cli._shared import _fail, app, secho
from workbench.errors import WorkbenchError

notebooks_typer = typer.Typer(help="The analysis notebooks of notebooks/ (jupytext pairs on workbench.results): "
                              "start JupyterLab on them, or `notebooks run` them headless.")
app.add_typer(notebooks_typer, name="notebooks")


@notebooks_typer.callback(invoke_without_command=True)
def notebooks_cmd(
    ctx: typer.Context,
    port: int = typer.Option(8888, "--port", min=1, max=65535, help="Port to serve on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    open_browser: bool = typer.Option(True, "--open/--no-open", help="Open a browser tab (when one is available)."),
) -> None:
    """Start JupyterLab on notebooks/ with the workbench's environment (the `notebooks` extra).

    The notebooks read WORKBENCH_HOME's results (after `make main`) through workbench.results;
    open the `.py` files as notebooks (jupytext); outputs go to the git-ignored `.ipynb` beside them.
    """
    if ctx.invoked_subcommand is not None:
        return
    from workbench.results import notebooks
    from workbench.settings import home_dir

    try:
        notebooks.find()
        from workbench.services import policy

        # the served-port policy: the names WORKBENCH_ALLOWED_HOSTS allows pass Jupyter's Host check too
        home = home_dir()
        # off loopback a token of the workbench's own, which no Jupyter config file can turn off
        forced, token = policy.jupyter_token_config(host, home / "run")
        args = notebooks.lab_command(port, host, open_browser) + policy.jupyter_args(host) + forced
    except WorkbenchError as exc:
        _fail(exc)
    if token:
        shown = "$" + policy.JUPYTER_TOKEN_ENV if os.environ.get(policy.JUPYTER_TOKEN_ENV, "").strip() else token
        typer.echo(f"[workbench] off loopback JupyterLab always asks for a token: {shown} (open "
                   f"http://{host}:{port}/lab?token=...; a Jupyter config without a token cannot turn it off)",
                   err=True)
    typer.echo(f"[workbench] JupyterLab on http://{host}:{port} over {notebooks.NOTEBOOKS_DIR} — home {home} "
               "(Ctrl-C stops it)", err=True)
    sys.stdout.flush()
    os.environ["WORKBENCH_HOME"] = str(home)
    os.execv(sys.executable, args)


@notebooks_typer.command("run")
def notebooks_run(
    names: list[str] = typer.Argument(None, help="Notebooks to run (quickstart, failure_analysis, tuning, "
                                      "judgments); default every one."),
    out: Path = typer.Option(Path("notebooks/out"), "--out", "-o", help="Folder for the executed .ipynb files."),
    timeout: int = typer.Option(1200, "--timeout", min=1, help="Seconds one cell may take."),
) -> None:
    """Run notebooks top to bottom in fresh kernels on WORKBENCH_HOME's results and keep their outputs.

    Exit 1 when a notebook fails (its cell and error are printed; the others still run), 2 on bad input.
    """
    from workbench.results import notebooks

    try:
        paths = notebooks.find(names or ())
    except WorkbenchError as exc:
        _fail(exc)
    failed = 0
    for path in paths:
        try:
            done = notebooks.execute(path, out, timeout=timeout)
        except WorkbenchError as exc:
            _fail(exc)
        if done.error:
            failed += 1
            secho(f"{done.name}: FAILED in {done.seconds:.0f} s at {done.error} (outputs so far: {done.output})",
                        fg=typer.colors.RED, err=True)
        else:
            typer.echo(f"{done.name}: ok in {done.seconds:.0f} s → {done.output}")
    raise typer.Exit(1 if failed else 0)
