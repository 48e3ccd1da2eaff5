"""`workbench dashboard`: the Streamlit dashboard and its access tokens."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app
from workbench.errors import WorkbenchError
from workbench.settings import PROJECT_ROOT


def dashboard_app() -> Path:
    """``dashboards/app.py`` of the source checkout the workbench runs from."""
    return PROJECT_ROOT / "dashboards" / "app.py"


dashboard_typer = typer.Typer(help="Start the Streamlit dashboard on the results in MLflow, the studies and the gate "
                              "reports; `dashboard token` manages the access tokens it asks for.")
app.add_typer(dashboard_typer, name="dashboard")
dashboard_token_app = typer.Typer(help="Access tokens of the dashboard (needed to serve it beyond 127.0.0.1).",
                                  no_args_is_help=True)
dashboard_typer.add_typer(dashboard_token_app, name="token")


@dashboard_typer.callback(invoke_without_command=True)
def dashboard_cmd(
    ctx: typer.Context,
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port to serve on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind. Another than 127.0.0.1 (0.0.0.0: every "
                             "interface) needs access tokens: `workbench dashboard token add NAME`."),
    open_browser: bool = typer.Option(True, "--open/--no-open", help="Open a browser tab (when one is available)."),
    allow_host: Optional[list[str]] = typer.Option(None, "--allow-host", help="One more name browsers may use in "
                                                   "Host / Origin, e.g. the name a reverse proxy serves it as "
                                                   "(repeatable; WORKBENCH_ALLOWED_HOSTS adds more)."),
    judging_only: bool = typer.Option(False, "--judging-only", help="Serve the judging pages only (the scholars' "
                                      "dashboard): no engineer page, whatever the address, host or token. While "
                                      "it serves, the engineers' dashboard of the home asks for an access token."),
) -> None:
    """Start the Streamlit dashboard on the results in MLflow, the studies and the gate reports.

    Reads only what the main job wrote (MLflow store, Optuna storage, artifacts, built
    datasets under WORKBENCH_HOME); it never queries Postgres or OpenSearch. It binds
    127.0.0.1; on any other address it starts only when the home has access tokens
    (`workbench dashboard token add NAME`), and every page then asks for one. Requests
    whose Host or Origin is not this machine's (or a name given with --allow-host) are refused.
    """
    if ctx.invoked_subcommand is not None:
        return
    import socket

    from workbench.dashboard import auth, serving
    from workbench.experiment.tracking import tracking_uri
    from workbench.services import policy
    from workbench.settings import home_dir

    try:
        app_path = dashboard_app()
        if not app_path.is_file() or not app_path.with_name("serve.py").is_file():
            raise WorkbenchError(f"the dashboard app {app_path} is missing; run `workbench dashboard` from a source "
                                 "checkout of the workbench (git clone), where dashboards/ sits beside workbench/")
        home = home_dir()
        kinds = {"access"} if auth.required(auth.sources(home)) else set()
        if not kinds and not auth.is_loopback(host):  # rater tokens count too (they open the judging pages only)
            kinds = auth.token_kinds(home, release=True)
            if not kinds:
                raise WorkbenchError(auth.off_loopback_refusal(host))
        explicit = [*(policy.normal_name(n, what="--allow-host") for n in allow_host or []), *policy.env_names()]
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            try:
                probe.bind((host, port))
            except OSError as exc:
                raise WorkbenchError(f"cannot serve on {host}:{port} ({exc.strerror or exc}); pass --port with a "
                                     "free port, or --host with an address of this machine") from None
        if judging_only:  # held by the server this process becomes: the engineers' dashboard then asks for a sign-in
            auth.hold_judging_only(home, port, host)
            served_raters = []
        else:
            served_raters = [] if kinds else auth.judging_dashboards(home)
    except WorkbenchError as exc:
        _fail(exc)
    access = auth.describe_tokens(kinds) + ("; --judging-only: no engineer page" if judging_only else "")
    if served_raters:
        access += (f"; a judging-only dashboard of this home serves raters (port "
                   f"{', '.join(str(d['port']) for d in served_raters)}): the engineer pages need an access token, "
                   f"`{auth.ADD_COMMAND}`")
    typer.echo(f"[workbench] dashboard on {serving.describe(host, port)} ({access}) — home {home}, "
               f"MLflow {tracking_uri(home)} (Ctrl-C stops it)", err=True)
    sys.stdout.flush()
    # serve.py: app.py behind the served-port policy's Host / Origin check and request bounds
    # launch: Streamlit with the policy's connection bounds (head deadline, head size, connection cap)
    args = [sys.executable, "-m", "dashboards.launch", "run", str(app_path.with_name("serve.py")),
            "--server.port", str(port),
            "--server.address", host, "--server.headless", "false" if open_browser else "true",
            "--browser.gatherUsageStats", "false", "--server.showEmailPrompt", "false", "--server.fileWatcherType", "none",
            "--global.developmentMode", "false", "--client.toolbarMode", "viewer",
            "--server.enableCORS", "true", "--server.enableXsrfProtection", "true", "--server.enableAgentApi", "false",
            "--server.maxUploadSize", "1",
            "--server.enableStaticServing", "true"]  # dashboards/static/ at /app/static/ (the Devanagari font)
    os.environ["WORKBENCH_HOME"] = str(home)  # the server resolves the same home, whatever its cwd
    os.environ[policy.ALLOWED_HOSTS_ENV] = ",".join(dict.fromkeys(explicit))  # read by serving.DashboardGuard
    os.environ["WORKBENCH_DASHBOARD_JUDGING_ONLY"] = "1" if judging_only else ""  # read by dashboards/app.py
    os.execv(sys.executable, args)


@dashboard_token_app.command("add")
def dashboard_token_add(name: str = typer.Argument(..., help="Who or what the token is for (letters, digits, _ . @ -).")) -> None:
    """Create an access token and print it once (only its sha256 is stored, in <home>/dashboard/tokens.json, mode 0600)."""
    from workbench.dashboard import auth
    from workbench.settings import home_dir

    try:
        store = auth.FileTokens(home_dir())
        token = store.add(name)
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(token)
    _log(f"token {name!r} created; it is shown only this once (only its hash is kept in {store.path}). "
         "Sign in with it on the dashboard, or open the dashboard's URL with ?token=TOKEN once")


@dashboard_token_app.command("list")
def dashboard_token_list() -> None:
    """List the access tokens: name and creation time (the tokens themselves are not stored)."""
    from workbench.dashboard import auth
    from workbench.settings import home_dir

    try:
        store = auth.FileTokens(home_dir())
        records = store.records()
    except WorkbenchError as exc:
        _fail(exc)
    if not records:
        _log(f"no dashboard tokens in {store.path}: the dashboard serves 127.0.0.1 only, without sign-in")
        return
    for r in records:
        typer.echo(f"{r.name}\tcreated {r.created}")


@dashboard_token_app.command("revoke")
def dashboard_token_revoke(
    name: str = typer.Argument(..., help="The token's name (see `workbench dashboard token list`)."),
) -> None:
    """Delete an access token; sessions signed in with it are refused from their next click."""
    from workbench.dashboard import auth
    from workbench.settings import home_dir

    try:
        store = auth.FileTokens(home_dir())
        store.revoke(name)
        left = len(store.records())
    except WorkbenchError as exc:
        _fail(exc)
    _log(f"token {name!r} revoked; {left} token(s) left"
         + ("" if left else " (without tokens the dashboard serves 127.0.0.1 only)"))
