"""`workbench serve`: serve a config over HTTP and MCP."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app
from workbench.errors import WorkbenchError


@app.command("serve")
def serve_cmd(
    config: Optional[str] = typer.Option(None, "--config", "-c", help="A config name of the experiment."),
    experiment: Path = typer.Option(Path("experiments/seeds.toml"), "--experiment", "-e", help="Experiment TOML."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Dataset (default: the experiment's first)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (beyond loopback: needs access tokens, "
                                                        "`workbench dashboard token add NAME`)."),
    port: int = typer.Option(8790, "--port", min=1, max=65535, help="Port to serve on."),
    stdio: bool = typer.Option(False, "--stdio", help="Speak MCP over standard input and output instead of a port."),
    allow_host: Optional[list[str]] = typer.Option(None, "--allow-host", help="One more name clients may use in "
                                                   "Host (a reverse proxy's); repeatable."),
    ubi_log: Optional[Path] = typer.Option(None, "--ubi-log", help="Record each search as a UBI query and each click "
                                           "or follow-up fetch as a UBI event, as JSON lines in this folder (off by "
                                           "default; clients hashed; nothing leaves this machine)."),
    ubi_max_mb: int = typer.Option(64, "--ubi-max-mb", min=1, help="Rotate a UBI log file at this size (MB)."),
    ubi_keep: int = typer.Option(4, "--ubi-keep", min=0, help="Rotated UBI log files kept per stream (the log "
                                 "holds at most 2 x (keep + 1) x max-mb)."),
    interleave: Optional[str] = typer.Option(None, "--interleave", help="A,B: show each reader one list made of "
                                             "two configs' rankings and log which config each hit came from (needs "
                                             "--ubi-log; compare with `workbench logs compare`)."),
    method: str = typer.Option("team-draft", "--interleave-method", help="team-draft or balanced."),
) -> None:
    """Serve one config as an HTTP search API (/search) and an MCP server (/mcp, tool `search`), to shadow it.

    Every answer is the {ok, result | error} envelope; the hits are the config's run exactly as `eval` computes
    it. Read it back with an `http` or `mcp` lane (the line printed at start is one). A hit's document: /fetch
    and the MCP tool `fetch`. With --ubi-log, searches, clicks (POST /click) and follow-up fetches are logged in
    UBI's schema for `workbench logs import`.

    Example: workbench serve -e experiments/seeds.toml -c aicharya-rrf60-ref --ubi-log ~/ubi
    Interleaving two configs: workbench serve --interleave aicharya-rrf60,aicharya-rrf60-ref --ubi-log ~/ubi
    """
    from workbench.live.serve import SERVE_BOUNDS, Searcher, guarded_app, mcp_server
    from workbench.services import policy
    from workbench.settings import home_dir

    try:
        config, other = _configs(config, interleave, ubi_log is not None)
        home = home_dir()
        bearer = None
        if not stdio:
            bearer = access_check(home)
            policy.require_tokens_off_loopback("the search API", host, bearer is not None,
                                               "create an access token first (`workbench dashboard token add NAME`; "
                                               "clients send it as 'Authorization: Bearer TOKEN')")
            explicit = [*(policy.normal_name(n, what="--allow-host") for n in allow_host or []), *policy.env_names()]
            sock = _bind_or_fail(host, port)
        searcher = Searcher(experiment, config, dataset, home, log=_log, interleave=other, method=method)
        if ubi_log is not None:
            from workbench.traffic.log import TrafficLog

            try:
                searcher.traffic = TrafficLog(ubi_log, max_bytes=ubi_max_mb * 2**20, keep=ubi_keep, attributes={
                    "config": config, "dataset": searcher.served.dataset, "experiment": experiment.name})
            except OSError as exc:
                raise WorkbenchError(f"--ubi-log {ubi_log}: cannot write there ({exc.strerror or exc}); name a folder "
                                     "you can write") from None
            _log(f"UBI log on: {ubi_log}/ubi_queries.jsonl and ubi_events.jsonl (clients hashed; rotated at "
                 f"{ubi_max_mb} MB, {ubi_keep} kept; read them with workbench logs import)")
        server = mcp_server(searcher)
    except WorkbenchError as exc:
        _fail(exc)
    if stdio:
        import anyio

        _log(f"MCP over stdio: tool search over {config} on {searcher.served.dataset} (Ctrl-D or close stdin stops it)")
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    app = guarded_app(searcher, server, host=host, explicit=explicit, bearer=bearer, log=_log)
    shown = (socket.gethostname() or "localhost") if host in ("0.0.0.0", "::", "") else host
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{sock.getsockname()[1]}"
    auth_line = ("\nheaders = {Authorization = \"Bearer ${WORKBENCH_SERVE_TOKEN}\"}   # export WORKBENCH_SERVE_TOKEN="
                 "<an access token>" if bearer else "")
    what = f"{config} interleaved with {other} ({method})" if other else config
    _log(f"serving {what} of {experiment} on {searcher.served.dataset} at {base}/search and MCP at {base}/mcp "
         f"({'access token required' if bearer else 'this machine only, no token'}; Ctrl-C stops it). As a lane:\n"
         f'[lanes.served]\nkind = "http"\nurl = "{base}/search"\nmethod = "POST"\n'
         f'body = {{query = "{{query}}", k = "{{k}}", filters = "{{filters}}"}}\nhits = "result.hits"\nid = "doc_id"\n'
         f'score = "score"\n'
         f'snapshot = "{config}"{auth_line}')
    sys.stdout.flush()
    sock.listen(128)
    cfg = policy.uvicorn_config(app, SERVE_BOUNDS, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(cfg).run(sockets=[sock])


def _configs(config: str | None, interleave: str | None, logging: bool) -> tuple[str, str | None]:
    """The config served and the one interleaved with it (or None), from ``-c`` and ``--interleave A,B``.

    Raises:
        WorkbenchError: neither given, ``--interleave`` not two names, ``-c`` another than A, no ``--ubi-log``.
    """
    if interleave is None:
        if config is None:
            raise WorkbenchError("name the config to serve: -c NAME (or --interleave A,B to serve two interleaved)")
        return config, None
    names = [n.strip() for n in interleave.split(",")]
    if len(names) != 2 or not all(names):
        raise WorkbenchError(f"--interleave {interleave!r}: give two config names, A,B")
    if config is not None and config != names[0]:
        raise WorkbenchError(f"-c {config} and --interleave {interleave}: A is the config served; drop -c or make it A")
    if not logging:
        raise WorkbenchError("--interleave needs --ubi-log DIR: the comparison is made from what readers click")
    return names[0], names[1]


def access_check(home: Path) -> Callable[[str], bool] | None:
    """The bearer check of a served port from ``home``'s access tokens (``workbench dashboard token add``): a
    function telling whether a presented token is one of them, or None when the home has none (then the port
    serves loopback only, without a token).

    The function reads the token file at each request (a revoked token stops working at once), so it raises
    ``ConfigError`` when the file turns untrustworthy while serving (made readable by others: the message names
    the file and ``chmod 600``); :class:`workbench.services.policy.Guard` answers that with one 503 per request
    and one log line.

    Raises:
        ConfigError: the token file cannot be read or trusted now (names the file and the fix).
    """
    from workbench.dashboard import auth

    sources = auth.sources(home)
    if not auth.required(sources):
        return None
    return lambda token: auth.check_token(token, sources) is not None


def _bind_or_fail(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (not yet listening).

    Raises:
        WorkbenchError: the address is taken or not this machine's (names the fix)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise WorkbenchError(f"cannot serve on {host}:{port} ({exc.strerror or exc}); pass --port with a free port, "
                             "or --host with an address of this machine") from None
    return sock
