"""`workbench services`: the local OpenSearch node, the embedded PostgreSQL, a reranker server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app, choices, echo_json, json_option
from workbench.errors import WorkbenchError

services_app = typer.Typer(help="Start, stop and inspect the local OpenSearch node; serve a cross-encoder reranker.",
                            no_args_is_help=True)
app.add_typer(services_app, name="services")
SERVICES = ("opensearch", "postgres")


def _service(name: str) -> None:
    if name not in SERVICES:
        raise WorkbenchError(f"unknown service {name!r}; services: {', '.join(SERVICES)}")


@services_app.command("up")
def services_up(
    service: str = typer.Argument(..., **choices("opensearch", "reranker", argument=True),
                            help="The service (reranker needs --model)."),
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535, help="HTTP port (OpenSearch, on 127.0.0.1: "
                                       "default a free one; reranker: default 8787)."),
    heap: Optional[str] = typer.Option(None, "--heap", help="JVM heap, e.g. 512m or 1g (default WORKBENCH_OS_HEAP or 512m)."),
    timeout: float = typer.Option(240.0, "--timeout", min=1, help="Seconds to wait for the cluster to be healthy."),
    model: Optional[Path] = typer.Option(None, "--model", help="reranker: the cross-encoder folder to serve."),
    host: Optional[str] = typer.Option(None, "--host", help="reranker: the address to listen on (default 127.0.0.1; "
                                       "any other needs a token in WORKBENCH_RERANK_TOKEN)."),
    max_length: Optional[int] = typer.Option(None, "--max-length", min=8, max=512, help="reranker: word pieces per "
                                             "pair (default: the window the model card says it was trained with, "
                                             "else 256)."),
    allow_host: Optional[list[str]] = typer.Option(None, "--allow-host", help="reranker: one more name clients may "
                                                   "give in Host / Origin, e.g. a reverse proxy's (repeatable)."),
    max_body_mb: Optional[float] = typer.Option(None, "--max-body-mb", help="reranker: the largest request body, "
                                                "in MiB (default 16; larger: HTTP 413)."),
    as_json: bool = json_option("the node's url, pid and log (opensearch)"),
) -> None:
    """Fetch (Maven, cached in ~/.m2), install and start the local node; print its URL. Reuses a running one.

    `up reranker --model FOLDER` instead serves a cross-encoder over HTTP in the foreground (Ctrl-C stops it)
    for an `http` reranker of an experiment."""
    if service == "reranker":
        _reranker_up(model, host or "127.0.0.1", port or 8787, heap is not None, max_length, allow_host or [],
                     max_body_mb)
        return
    from workbench.services import opensearch as node
    from workbench.settings import home_dir

    try:
        if service not in SERVICES:
            raise WorkbenchError(f"unknown service {service!r}; `services up` starts opensearch or reranker (the "
                                 "embedded PostgreSQL starts by itself when a command needs it)")
        if model is not None or host is not None or max_length is not None or allow_host or max_body_mb is not None:
            raise WorkbenchError("--model, --host, --max-length, --allow-host and --max-body-mb are options of "
                                 "`workbench services up reranker`")
        if service == "postgres":
            raise WorkbenchError("the embedded PostgreSQL starts by itself when a command needs it and stops when the "
                                 "last one ends; `workbench services status postgres` shows it")
        st = node.up(home_dir(), port=port, heap=heap, timeout=timeout, log=_log)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"service": service, "url": st.url, "pid": st.pid, "log": str(st.log)})
    else:
        typer.echo(st.url)
    _log(f"OpenSearch is up at {st.url} (pid {st.pid}, log {st.log}); this home's clients find its credentials in "
         f"{node.credentials_path(home_dir())}; from another home set WORKBENCH_OS_URL={st.url}, WORKBENCH_OS_USER, "
         f"WORKBENCH_OS_PASSWORD (from that file) and WORKBENCH_OS_CA_CERTS={node.ca_path(home_dir())}; "
         "`workbench services down opensearch` stops it")


def _reranker_up(model: Optional[Path], host: str, port: int, heap: bool, max_length: Optional[int],
                 allow_host: list[str], max_body_mb: Optional[float]) -> None:
    """`services up reranker`: serve the cross-encoder of ``model`` until Ctrl-C (see workbench.services.reranker)."""
    try:
        if model is None:
            raise WorkbenchError("`workbench services up reranker` needs --model FOLDER, a cross-encoder folder "
                                 "(`workbench reranker train -o FOLDER` writes one)")
        if heap:
            raise WorkbenchError("--heap is an option of `workbench services up opensearch`")
        from workbench.services import reranker
        from workbench.settings import home_dir

        # a relative folder is read from here, else from the home, as experiment files name models
        # (`models/gita-ce` is where `workbench reranker train` writes)
        in_home = home_dir() / model
        if not model.expanduser().is_absolute() and not model.exists() and in_home.exists():
            _log(f"serving {in_home} (no {model} here; found in the workbench home)")
            model = in_home
        if max_length is None:
            max_length = reranker.trained_max_length(model) or 256
        reranker.serve(model, host=host, port=port, max_length=max_length, allow_hosts=allow_host,
                       bounds=reranker.bounds_for(max_body_mb), log=_log)
    except WorkbenchError as exc:
        _fail(exc)


@services_app.command("down")
def services_down(service: str = typer.Argument(..., **choices("opensearch", "postgres", argument=True), help="The service."),
                  as_json: bool = json_option("whether the service was running and is stopped")) -> None:
    """Stop the local node or the embedded PostgreSQL of this home (their data stay for the next start)."""
    from workbench.services import opensearch as node
    from workbench.services import postgres
    from workbench.settings import home_dir

    try:
        _service(service)
        if service == "postgres":
            was = postgres.stop_server(postgres.layout(home_dir()).pgdata)
        else:
            was = node.down(home_dir(), log=_log)
    except WorkbenchError as exc:
        _fail(exc)
    what = "the embedded PostgreSQL" if service == "postgres" else "OpenSearch"
    if as_json:
        echo_json({"service": service, "stopped": bool(was)})
    _log(f"{what} stopped" if was else f"{what} was not running")


@services_app.command("remove")
def services_remove(
    service: str = typer.Argument(..., **choices("opensearch", "postgres", argument=True), help="The service."),
    yes: bool = typer.Option(False, "--yes", help="Really delete (without it, only say what would go)."),
    as_json: bool = json_option("the folders deleted"),
) -> None:
    """Stop a service of this home and delete its data (PostgreSQL: indexes and the judgment store; OpenSearch:
    install, indexes, secrets). As root both live outside the home, so deleting the home does not remove them."""
    from workbench.services import opensearch as node
    from workbench.services import postgres
    from workbench.settings import home_dir

    try:
        _service(service)
        home = home_dir()
        where = [postgres.layout(home).pgdata] if service == "postgres" else [node.runtime_dir(home)]
        if not yes:  # a dry run: what would go (exit 1: nothing was done)
            present = [w for w in where if w.exists()]
            if as_json:
                echo_json({"service": service, "dry_run": True, "would_delete": [str(w) for w in present],
                           "deleted": []})
            if not present:
                _log(f"{service} has no data in this home ({', '.join(map(str, where))} does not exist); "
                     "nothing to delete")
            else:
                _log(f"would stop {service} and delete {', '.join(map(str, present))}"
                     + (" — with the judgment store: back it up first (`workbench judge backup FILE`; "
                        "`judge export` writes only the qrels)" if service == "postgres" else "")
                     + "; run again with --yes")
            raise typer.Exit(1)
        if service == "postgres":
            postgres.remove(home)
            gone = where
        else:
            gone = node.remove(home, log=_log)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"service": service, "dry_run": False, "would_delete": [], "deleted": [str(g) for g in gone]})
    _log(f"{service} stopped; deleted " + (", ".join(map(str, gone)) or "nothing (there was nothing)"))


@services_app.command("status")
def services_status(
    service: str = typer.Argument("opensearch", **choices("opensearch", "postgres", argument=True), help="The service."),
    as_json: bool = json_option("the service's state"),
) -> None:
    """Say whether the local node (URL, health, workbench indexes) or the embedded PostgreSQL (pid, socket,
    data folder) runs. Exit 1 when it is not running."""
    from workbench.services import opensearch as node
    from workbench.settings import home_dir

    try:
        _service(service)
        if service == "postgres":
            from workbench.services import postgres

            st = postgres.status(home_dir())
        else:
            st = node.status(home_dir(), log=_log)
    except WorkbenchError as exc:
        _fail(exc)
    if service == "postgres":
        if as_json:
            echo_json(st)
        else:
            typer.echo(f"postgres: {st['state']}" + (f", pid {st['pid']}, socket in {st['socket_dir']}" if st["pid"] else "")
                       + f", data {st['pgdata']}, log {st['log']}")
        if st["state"] != "running":
            raise typer.Exit(1)
        return
    if st["state"] == "running":
        try:
            from workbench.engines import os_client as osearch

            es = osearch.client(st["url"])
            st["indexes"] = sorted(i["index"] for i in es.cat.indices(index="wb-*", format="json"))
        except Exception:
            st["indexes"] = []
    if as_json:
        echo_json(st)
    else:
        typer.echo(f"opensearch: {st['state']}" + (f" at {st['url']} ({st.get('health') or 'no answer'}), pid {st['pid']}, "
                                                   f"{len(st.get('indexes', []))} workbench indexes, log {st['log']}"
                                                   if st["state"] != "stopped" else ""))

    from workbench.engines.os_client import URL_ENV

    if os.environ.get(URL_ENV, "").strip():
        _log(f"note: {URL_ENV}={os.environ[URL_ENV].strip()} is set, so the lanes use that cluster, not this local node")
    if st["state"] != "running":
        raise typer.Exit(1)
