"""The ``workbench`` command.

Exit codes: 0 success, 1 a check failed, 2 usage, configuration or data error (a
one-line message names the file or setting and the fix; a build that fails leaves the
previous build of that dataset in place).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from workbench.errors import WorkbenchError
from workbench.gate.policy import DEFAULT_SEED as _GATE_SEED, GatePolicy as _GatePolicy  # for `gate --help`: the defaults
from workbench.settings import PROJECT_ROOT

app = typer.Typer(help="Evaluation and relevance-tuning workbench for hybrid retrieval over scripture corpora.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
data_app = typer.Typer(help="Build and list datasets and query sets.", no_args_is_help=True)
refs_app = typer.Typer(help="Parse canonical references.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(refs_app, name="ref")
services_app = typer.Typer(help="Start, stop and inspect the local OpenSearch node; serve a cross-encoder reranker.",
                            no_args_is_help=True)
app.add_typer(services_app, name="services")
judge_app = typer.Typer(help="Human relevance judgments: raters, pools, agreement, adjudication, qrels export and "
                        "import (the store lives in the workbench's PostgreSQL).", no_args_is_help=True)
app.add_typer(judge_app, name="judge")
rater_app = typer.Typer(help="Raters and their tokens.", no_args_is_help=True)
judge_app.add_typer(rater_app, name="rater")
SERVICES = ("opensearch", "postgres")

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
    from workbench import notebooks
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
    from workbench import notebooks

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
            typer.secho(f"{done.name}: FAILED in {done.seconds:.0f} s at {done.error} (outputs so far: {done.output})",
                        fg=typer.colors.RED, err=True)
        else:
            typer.echo(f"{done.name}: ok in {done.seconds:.0f} s → {done.output}")
    raise typer.Exit(1 if failed else 0)



def _fail(exc: Exception) -> None:
    """Print ``error: <message>`` on one line to stderr and exit 2 (no traceback)."""
    msg = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    typer.secho(f"error: {msg}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


class _Steps:
    """Progress for a multi-step build: a tqdm bar on a terminal, one line per step otherwise."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.tty = sys.stderr.isatty()
        self.bar = tqdm(total=total, unit="dataset", file=sys.stderr, disable=not self.tty, dynamic_ncols=True)
        self.name = ""

    def step(self, msg: str) -> None:
        if self.tty:
            self.bar.set_postfix_str(f"{self.name}: {msg}")
        else:
            print(f"[data build] {self.name}: {msg}", file=sys.stderr, flush=True)

    def done(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


@data_app.command("build")
def data_build(
    only: Optional[list[str]] = typer.Option(None, "--only", help="Build only this dataset (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the build is current."),
    definitions: Optional[Path] = typer.Option(None, "--definitions", help="Dataset definitions TOML (default datasets/datasets.toml)."),
) -> None:
    """Build the datasets and query sets from WORKBENCH_DATA into WORKBENCH_HOME (skips what is current).

    Only the corpora the selected datasets read must be present. A dataset whose build
    fails keeps its previous build.
    """
    from workbench.data import catalog
    from workbench.settings import data_dir, home_dir

    try:
        defs = catalog.load_definitions(definitions, option="--definitions")
        names = catalog.build_order(defs, only)
        sources = tuple(dict.fromkeys(s for n in names for s in catalog.required_sources(defs.definition(n), defs)))
        data, home = data_dir(sources=sources), home_dir()
        steps = _Steps(len(names))
        rows = []
        try:
            for name in names:
                steps.name = name
                t0 = time.perf_counter()
                manifest, built = catalog.build_or_reuse(name, defs, data, home, force=force, step=steps.step, log=_log)
                rows.append((name, "built" if built else "current", manifest["counts"], time.perf_counter() - t0))
                steps.done()
        finally:
            steps.close()
    except WorkbenchError as exc:
        _fail(exc)
    for name, state, c, secs in rows:
        types = ", ".join(f"{t} {n}" for t, n in c["by_type"].items())
        typer.echo(f"{name:18s} {state:8s} {c['documents']:>7,d} docs  {c['queries']:>5,d} queries ({types})  {secs:5.1f} s")
    typer.echo(f"built into {home / 'datasets'}")


@data_app.command("list")
def data_list(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    definitions: Optional[Path] = typer.Option(None, "--definitions", help="Dataset definitions TOML."),
) -> None:
    """Show the defined datasets, whether each build is current, and counts per query type and split."""
    from workbench.data import catalog
    from workbench.settings import data_dir, home_dir

    try:
        defs = catalog.load_definitions(definitions, option="--definitions")
        sources = tuple(dict.fromkeys(s for n in defs.datasets for s in catalog.required_sources(defs.definition(n), defs)))
        data, home = data_dir(sources=sources), home_dir()
        out = []
        for name in defs.datasets:
            state = catalog.status(name, defs, data, home)
            entry = {"name": name, "source": defs.datasets[name]["source"], "status": state,
                     "path": str(catalog.dataset_dir(name, home))}
            m = catalog.read_manifest(name, home)  # None when missing or unreadable: no counts shown
            if m is not None and catalog.valid_counts(m.get("counts")):
                entry["counts"] = m["counts"]
                entry["inputs_sha256"] = m.get("inputs_sha256")
            out.append(entry)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps({"data": str(data), "home": str(home), "datasets": out}, ensure_ascii=False, indent=1))
        return
    typer.echo(f"data: {data}\nhome: {home}\n")
    for e in out:
        typer.echo(f"{e['name']} ({e['source']}): {e['status']}")
        c = e.get("counts")
        if not c:
            continue
        typer.echo(f"  {c['documents']:,d} documents, {c['queries']:,d} queries, {c['qrels']:,d} judgments")
        typer.echo(f"  {'query_type':12s} {'train':>6s} {'dev':>6s} {'test':>6s} {'total':>6s}")
        for t, by in c["by_type_split"].items():
            typer.echo(f"  {t:12s} {by.get('train', 0):6d} {by.get('dev', 0):6d} {by.get('test', 0):6d} {sum(by.values()):6d}")
        langs = ", ".join(f"{k} {v}" for k, v in c["by_language"].items())
        typer.echo(f"  languages: {langs}")
    if any(e["status"] != "current" for e in out):
        typer.echo("\nrun `workbench data build` to build what is missing or stale")


@refs_app.command("parse")
def ref_parse(
    reference: list[str] = typer.Argument(..., help="References such as 'BG 2.47', 'ШБ 5.5.3', 'M i 56', 'P1.56'."),
    collection: Optional[str] = typer.Option(None, help="Collection for bare CST notation (M, D, S, Ps)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Parse references; unresolvable ones print the reason (exit 1 if any did not resolve, 2 on a bad --collection)."""
    from workbench.text import refs

    def shown(text: str, limit: int = 60) -> str:
        return text if len(text) <= limit else text[: limit - 1] + "…"

    if collection is not None:
        try:
            refs.parse("", collection=collection)
        except ValueError:
            _fail(WorkbenchError(f"unknown --collection {shown(collection)!r}; use one of {', '.join(refs.COLLECTIONS)}"))
    results = []
    for r in reference:
        res = refs.parse(r, collection=collection)
        results.append({"input": shown(r), "canonical": res.ref.canonical() if res else None, "reason": res.reason})
    if as_json:
        typer.echo(json.dumps(results, ensure_ascii=False, indent=1))
    else:
        for x in results:
            typer.echo(f"{x['input']!r:24s} -> {x['canonical'] or 'unresolved: ' + x['reason']}")
    if any(x["canonical"] is None for x in results):
        raise typer.Exit(1)


def _log(msg: str) -> None:
    typer.secho(f"[workbench] {msg}", err=True, fg=typer.colors.BLUE)


def _service(name: str) -> None:
    if name not in SERVICES:
        raise WorkbenchError(f"unknown service {name!r}; services: {', '.join(SERVICES)}")


@services_app.command("up")
def services_up(
    service: str = typer.Argument(..., help="opensearch, or reranker (with --model)"),
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
            raise WorkbenchError(f"unknown service {service!r}; `services up` starts: {', '.join(SERVICES)}, reranker")
        if model is not None or host is not None or max_length is not None or allow_host or max_body_mb is not None:
            raise WorkbenchError("--model, --host, --max-length, --allow-host and --max-body-mb are options of "
                                 "`workbench services up reranker`")
        if service == "postgres":
            raise WorkbenchError("the embedded PostgreSQL starts by itself when a command needs it and stops when the "
                                 "last one ends; `workbench services status postgres` shows it")
        st = node.up(home_dir(), port=port, heap=heap, timeout=timeout, log=_log)
    except WorkbenchError as exc:
        _fail(exc)
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
def services_down(service: str = typer.Argument(..., help="opensearch or postgres")) -> None:
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
    _log(f"{what} stopped" if was else f"{what} was not running")


@services_app.command("remove")
def services_remove(
    service: str = typer.Argument(..., help="opensearch or postgres"),
    yes: bool = typer.Option(False, "--yes", help="Really delete (without it, only say what would go)."),
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
        if not yes:
            _log(f"would stop {service} and delete {', '.join(map(str, where))}"
                 + (" — with the judgment store: export it first (`workbench judge export`)" if service == "postgres"
                    else "") + "; run again with --yes")
            raise typer.Exit(1)
        if service == "postgres":
            postgres.remove(home)
            gone = where
        else:
            gone = node.remove(home, log=_log)
    except WorkbenchError as exc:
        _fail(exc)
    _log(f"{service} stopped; deleted " + (", ".join(map(str, gone)) or "nothing (there was nothing)"))


@services_app.command("status")
def services_status(
    service: str = typer.Argument("opensearch", help="opensearch or postgres"),
    as_json: bool = typer.Option(False, "--json", help="Print the state as JSON."),
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
        typer.echo(json.dumps(st, indent=1) if as_json else
                   f"postgres: {st['state']}" + (f", pid {st['pid']}, socket in {st['socket_dir']}" if st["pid"] else "")
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
        typer.echo(json.dumps(st, indent=1))
    else:
        typer.echo(f"opensearch: {st['state']}" + (f" at {st['url']} ({st.get('health') or 'no answer'}), pid {st['pid']}, "
                                                   f"{len(st.get('indexes', []))} workbench indexes, log {st['log']}"
                                                   if st["state"] != "stopped" else ""))

    from workbench.engines.os_client import URL_ENV

    if os.environ.get(URL_ENV, "").strip():
        _log(f"note: {URL_ENV}={os.environ[URL_ENV].strip()} is set, so the lanes use that cluster, not this local node")
    if st["state"] != "running":
        raise typer.Exit(1)


@app.command("eval")
def eval_cmd(
    experiment: Path = typer.Argument(..., help="Experiment TOML, e.g. experiments/seeds.toml."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log params, metrics and artifacts to MLflow."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON records."),
    qrels: Optional[str] = typer.Option(None, "--qrels", help="Qrels layer: built (corpus-derived labels), human "
                                        "(scholars' final grades) or merged (human over built); "
                                        "default: the experiment file's."),
) -> None:
    """Index what is missing, evaluate every config on every dataset, print the comparison, track it in MLflow."""
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import run_experiment
    from workbench.judging.layers import check_layer
    from workbench.settings import data_dir, home_dir

    try:
        layer = check_layer(qrels, "--qrels") if qrels is not None else None
        exp = load_experiment(experiment)
        layer = layer or exp.qrels
        data_dir()
        home = home_dir()
        if track:
            from workbench.experiment.tracking import check_tracking

            check_tracking(home)
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
            from workbench.durable import storage_error_in

            uri = tracking_uri(home)
            store = Path(uri.split(":///", 1)[1]) if uri.startswith("sqlite:///") else home / "mlartifacts"
            full = storage_error_in(exc, store)  # a full disk or a read-only home, however MLflow wrapped it
            why = str(full) if full else (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            _fail(WorkbenchError(f"could not track in MLflow at {uri}: {why}; the comparison above was not tracked "
                                 "(fix that, or unset MLFLOW_TRACKING_URI, or pass --no-track)"))
        typer.secho(f"tracked in MLflow: {tracking_uri(home)} (parent run {run_id})", err=True)


@app.command("tune")
def tune_cmd(
    study_file: Path = typer.Argument(..., help="Study TOML, e.g. experiments/tune-kb.toml."),
    trials: Optional[int] = typer.Option(None, "--trials", min=1, help="Complete trials wanted in all (default: the file's)."),
    storage: str = typer.Option("journal", "--storage", help="journal (resumable, default), memory, journal:PATH, "
                                "postgresql (the workbench's server) or a postgresql:// URL."),
    workers: int = typer.Option(1, "--workers", min=1, help="Processes sharing the study (needs PostgreSQL storage)."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the study to MLflow."),
    qrels: Optional[str] = typer.Option(None, "--qrels", help="Qrels layer: built (corpus-derived labels), human "
                                        "(scholars' final grades) or merged (human over built); "
                                        "default: the study file (else its experiment)'s."),
) -> None:
    """Tune fusion and engine parameters with Optuna over cached candidates; report on dev and test."""
    from dataclasses import replace

    from workbench.errors import StorageError
    from workbench.judging.layers import check_layer
    from workbench.settings import data_dir, home_dir
    from workbench.tuning.outputs import summary, write_outputs
    from workbench.tuning.space import load_study
    from workbench.tuning.study import run_study

    try:
        layer = check_layer(qrels, "--qrels") if qrels is not None else None
        st = load_study(study_file)
        if layer is not None:
            st = replace(st, qrels=layer)
        _log(f"qrels layer: {st.qrels}" + (" (--qrels)" if layer is not None else ""))
        data_dir()
        home = home_dir()
        if track:
            from workbench.experiment.tracking import check_tracking

            check_tracking(home)
        result = run_study(st, home=home, storage=storage, trials=trials, workers=workers, log=_log,
                           progress=True)
        try:
            folder = write_outputs(result, home, storage)
        except StorageError as exc:
            if storage.strip() != "memory":
                raise
            folder = None  # a study in memory still reports (the way out of a read-only or full home)
            typer.secho(f"warning: the report was not written: {exc}", fg=typer.colors.YELLOW, err=True)
    except WorkbenchError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        where = "nothing was kept (memory storage)" if storage == "memory" else \
            f"the complete trials are kept in {storage} storage; run the same command to resume"
        typer.secho(f"interrupted: {where}", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(130)
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
        typer.secho(f"tracked in MLflow: {tracking_uri(home)} (run {run_id})", err=True)


@app.command("export")
def export_cmd(
    study_file: Optional[Path] = typer.Argument(None, help="Study TOML whose study has run (journal or PostgreSQL "
                                                "storage); or give -e/-c."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write: a .json file for --format json, a folder "
                             "for postgres / opensearch."),
    fmt: str = typer.Option("json", "--format", "-f", help="json (the workbench's config), postgres (one SQL "
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
    as_json: bool = typer.Option(False, "--json", help="Print the files written and the parity report as JSON."),
) -> None:
    """Write a tuned config (a study's chosen trial, or an experiment's config) for production: the workbench's
    JSON, one PostgreSQL statement, or an OpenSearch hybrid query and pipeline; --verify proves it ranks the same."""
    from workbench.export.job import from_experiment, from_study, write
    from workbench.settings import data_dir, home_dir
    from workbench.types import SPLITS

    try:
        if (study_file is None) == (experiment is None):
            raise WorkbenchError("give a study file, or --experiment EXPERIMENT.toml --config CONFIG (not both)")
        if experiment is not None and not config:
            raise WorkbenchError(f"--experiment needs --config: name one of the experiment's [configs.NAME]")
        split_list = [s.strip() for s in splits.split(",") if s.strip()]
        bad = [s for s in split_list if s not in SPLITS]
        if bad or not split_list:
            raise WorkbenchError(f"--splits {splits!r}: use some of {', '.join(SPLITS)}")
        if min_parity is not None and (not verify or not 0.0 <= min_parity <= 1.0):
            raise WorkbenchError("--min-parity takes a number in [0, 1] and needs --verify")
        data_dir()
        home = home_dir()
        target = out if fmt == "json" else out / "x"
        if not os.access(next((p for p in [target.parent, *target.parent.parents] if p.exists()), Path("/")), os.W_OK):
            raise WorkbenchError(f"cannot write into {out if fmt != 'json' else out.parent}; choose another --out")
        source = (from_study(study_file, storage, home, _log) if study_file is not None
                  else from_experiment(experiment, config, dataset))
        if dataset is not None and study_file is not None and dataset != source.dataset:
            raise WorkbenchError(f"study {study_file} was tuned on {source.dataset}; --dataset {dataset} would "
                                 "verify it elsewhere: drop --dataset")
        result = write(source, fmt, out, home=home, verify=verify, splits=split_list, log=_log, force=force)
    except WorkbenchError as exc:
        _fail(exc)
    except OSError as exc:  # the path that failed (a file of the home, or --out), not always --out
        from workbench.durable import storage_error

        _fail(storage_error(exc, exc.filename or out))
    report = result["parity"]
    if as_json:
        typer.echo(json.dumps({"files": result["files"], "parity": report.to_json() if report else None},
                              indent=1, default=str))
    else:
        typer.echo(f"wrote {', '.join(result['files'])}: {source.label}")
        if report is not None:
            typer.echo(report.summary())
            for d in report.differences[:20]:
                typer.echo(f"  {d.query_id} rank {d.rank}: workbench {d.workbench}, engine {d.engine} — {d.cause}")
            if len(report.differences) > 20:
                typer.echo(f"  … {len(report.differences) - 20} more in the export's parity report")
    if report is not None and min_parity is not None and report.parity < min_parity:
        typer.secho(f"parity@{report.k} {report.parity:.4f} is below --min-parity {min_parity}", err=True, fg="red")
        raise typer.Exit(1)


def _policy_help(key: str) -> str:
    """The --help of a gate policy option: the field's description and its default, both from
    :class:`workbench.gate.policy.GatePolicy` (where the defaults are declared, once)."""
    info = _GatePolicy.model_fields[key]
    return f"{info.description[0].upper()}{info.description[1:]} (default: the gate file's, else {info.default})."


@app.command("gate")
def gate_cmd(
    gate_file: Optional[Path] = typer.Argument(None, help="A gate file of expected values (experiments/gate-*.toml)."),
    candidate: Optional[str] = typer.Option(None, "--candidate", help="EXPERIMENT.toml:CONFIG, an exported .json or a TREC run."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="EXPERIMENT.toml:CONFIG, an exported .json or a TREC run."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="The dataset whose queries and qrels judge both."),
    measure: Optional[list[str]] = typer.Option(None, "--measure", "-m", help="Measures to gate (first: the one losses "
                                                "are listed by; default R@10)."),
    margin: Optional[float] = typer.Option(None, "--margin", min=0.0, max=1.0, help=_policy_help("margin")),
    min_queries: Optional[int] = typer.Option(None, "--min-queries", min=1, help=_policy_help("min_queries")),
    split: list[str] = typer.Option([], "--split", help="Splits to gate on (default: the gate file's, else all)."),
    judged_floor: Optional[float] = typer.Option(None, "--judged-floor", min=0.0, max=1.0,
                                                 help=_policy_help("judged_floor")),
    judged_action: Optional[str] = typer.Option(None, "--judged-action", help=_policy_help("judged_action")),
    empty_floor: Optional[float] = typer.Option(None, "--empty-floor", min=0.0, max=1.0,
                                                help=_policy_help("empty_floor")),
    false_empty_ceiling: Optional[float] = typer.Option(None, "--false-empty-ceiling", min=0.0, max=1.0,
                                                        help=_policy_help("false_empty_ceiling")),
    markdown_out: Optional[Path] = typer.Option(None, "--markdown", help="Also write the Markdown summary here."),
    junit_out: Optional[Path] = typer.Option(None, "--junit", help="Write JUnit XML here."),
    seed: int = typer.Option(_GATE_SEED, "--seed", min=0, max=2**32 - 1, help="Bootstrap seed."),
    qrels: Optional[str] = typer.Option(None, "--qrels", help="Qrels layer: built (corpus-derived labels), human "
                                        "(scholars' final grades) or merged (human over built); "
                                        "default: the gate file's, else the experiment's."),
) -> None:
    """Gate a candidate against a baseline or expected values: exit 0 pass, 1 regression, 2 usage or data error.

    The policy options (--margin, --min-queries, --judged-floor, --judged-action, --empty-floor,
    --false-empty-ceiling) override a gate file's
    values, which override the defaults of workbench.gate.policy.GatePolicy; the rules are in workbench.gate.decide.
    """
    from workbench import durable
    from workbench.gate.policy import DEFAULT_MEASURES
    from workbench.gate.report import GateReport, junit, markdown
    from workbench.gate.runner import run_gate_file, run_pair
    from workbench.settings import data_dir, home_dir

    options = {"margin": margin, "min_queries": min_queries, "judged_floor": judged_floor,
               "judged_action": judged_action, "empty_floor": empty_floor, "false_empty_ceiling": false_empty_ceiling}
    try:
        data_dir()
        home = home_dir()
        for opt, out in (("--markdown", markdown_out), ("--junit", junit_out)):
            if out is not None and (out.is_dir() or (out.exists() and not os.access(out, os.W_OK))):
                raise WorkbenchError(f"{opt} {out} is a folder or not writable; give a file path")
        if markdown_out and junit_out and markdown_out.resolve() == junit_out.resolve():
            raise WorkbenchError("--markdown and --junit name the same file; give two paths")
        if gate_file is not None:
            if candidate or baseline or dataset or measure:
                raise WorkbenchError("a gate file names its configs, datasets and measures; do not add --candidate, "
                                     "--baseline, --dataset or --measure")
            results = run_gate_file(gate_file, home=home, options=options, splits=split, qrels=qrels, log=_log)
        else:
            if not (candidate and baseline and dataset):
                raise WorkbenchError("give a gate file, or --candidate, --baseline and --dataset")
            results = [run_pair(candidate, baseline, dataset, home=home, measures=measure or DEFAULT_MEASURES,
                                options=options, splits=split, qrels=qrels, seed=seed, log=_log)]
    except WorkbenchError as exc:
        _fail(exc)
    text = "\n".join(markdown(r) for r in results)
    typer.echo(text)
    try:
        command = ["workbench", "gate"] + ([str(gate_file)] if gate_file is not None else [])
        for opt, val in (("--candidate", candidate), ("--baseline", baseline), ("--dataset", dataset),
                         ("--margin", margin), ("--min-queries", min_queries), ("--judged-floor", judged_floor),
                         ("--judged-action", judged_action), ("--empty-floor", empty_floor),
                         ("--false-empty-ceiling", false_empty_ceiling), ("--qrels", qrels)):
            command += [opt, str(val)] if val is not None else []
        if gate_file is None:  # the measures as gated: canonical names (MRR@10 -> RR@10), in order
            command += [x for m in dict.fromkeys(c.measure for r in results for c in r.checks) for x in ("-m", m)]
        command += [x for sp in split for x in ("--split", sp)]
        saved = GateReport.of(results, command).save(home)
        typer.echo(f"[workbench] gate report saved: {saved} (the dashboard's gate page shows the latest)", err=True)
    except WorkbenchError as exc:  # a full disk, a read-only home: the report is part of the command's work
        _fail(WorkbenchError(f"the gate report was not saved: {exc}; the gate's result is above"))
    try:
        if markdown_out:
            durable.atomic_write_text(markdown_out, text)
        if junit_out:
            durable.atomic_write_text(junit_out, junit(results))
    except WorkbenchError as exc:
        _fail(WorkbenchError(f"the report was not written: {exc}; the gate's result is above"))
    raise typer.Exit(max((r.exit_code for r in results), default=0))


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
                                      "dashboard): no engineer page, whatever the address, host or token."),
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
    from workbench.services import policy
    from workbench.settings import home_dir
    from workbench.experiment.tracking import tracking_uri

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
    except WorkbenchError as exc:
        _fail(exc)
    access = auth.describe_tokens(kinds) + ("; --judging-only: no engineer page" if judging_only else "")
    typer.echo(f"[workbench] dashboard on {serving.describe(host, port)} ({access}) — home {home}, "
               f"MLflow {tracking_uri(home)} (Ctrl-C stops it)", err=True)
    sys.stdout.flush()
    # serve.py: app.py behind the served-port policy's Host / Origin check and request bounds
    # launch: Streamlit with the policy's connection bounds (head deadline, head size, connection cap)
    args = [sys.executable, "-m", "workbench.dashboard.launch", "run", str(app_path.with_name("serve.py")), "--server.port", str(port),
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
def dashboard_token_add(name: str = typer.Argument(..., help="Who or what the token is for (letters, digits, _ . -).")) -> None:
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
def dashboard_token_revoke(name: str = typer.Argument(..., help="The token's name (see `workbench dashboard token list`).")) -> None:
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


# ---------------------------------------------------------------- judge

def _judge_store():
    """The judgment store of the workbench's server (the home's embedded PostgreSQL unless WORKBENCH_PG_DSN)."""
    from workbench.judging.store import JudgmentStore
    from workbench.settings import home_dir

    return JudgmentStore.open(home_dir())


@rater_app.command("add")
def judge_rater_add(
    name: str = typer.Argument(..., help="The rater's name (letters, digits, _ . @ -)."),
    adjudicator: bool = typer.Option(False, "--adjudicator", help="May also resolve disagreements (sees both grades)."),
) -> None:
    """Create a rater and print their token once (only its sha256 is stored); they sign in to the Judge page with it."""
    try:
        rater, token = _judge_store().add_rater(name, "adjudicator" if adjudicator else "rater")
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(token)
    _log(f"{rater.role} {rater.name!r} created; the token above is shown only this once (only its hash is stored). "
         "Give it to them: they open the dashboard's Judge page and paste it")


@rater_app.command("token")
def judge_rater_token(name: str = typer.Argument(..., help="The rater's name (active or revoked).")) -> None:
    """Give a rater a new token and print it once (the old one stops signing in); a revoked rater becomes
    active again with all their grades under the same name."""
    try:
        store = _judge_store()
        was_active = any(r.name == name for r in store.raters())
        rater, token = store.new_token(name)
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(token)
    _log(f"{rater.role} {rater.name!r} has a new token (above, shown only this once); their old token no longer "
         "signs in")
    if not was_active:
        _log(f"{rater.name} was revoked; this new token makes {rater.name} active again (all their grades stay "
             f"under that name); `workbench judge rater revoke {rater.name}` undoes it")


@rater_app.command("list")
def judge_rater_list(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the active raters and their roles (tokens are not stored, so never shown)."""
    try:
        raters = _judge_store().raters()
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps([{"name": r.name, "role": r.role} for r in raters], indent=1))
        return
    if not raters:
        _log("no raters yet: `workbench judge rater add NAME` (add --adjudicator for one who resolves disagreements)")
    for r in raters:
        typer.echo(f"{r.name}\t{r.role}")


@rater_app.command("revoke")
def judge_rater_revoke(name: str = typer.Argument(..., help="The rater's name.")) -> None:
    """Revoke a rater's token (their judgments stay in the history)."""
    try:
        _judge_store().revoke_rater(name)
    except WorkbenchError as exc:
        _fail(exc)
    _log(f"the token of {name!r} no longer signs in; their judgments are kept")


@judge_app.command("pool")
def judge_pool(
    experiment: Path = typer.Option(..., "--experiment", "-e", help="Experiment TOML whose configs are pooled."),
    config: list[str] = typer.Option([], "--config", "-c", help="A config to pool over (repeatable; default: all)."),
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset to pool (one of the experiment's)."),
    depth: int = typer.Option(10, "--depth", help="Pool each config's and lane's top DEPTH (TREC depth-k pooling)."),
    split: list[str] = typer.Option([], "--split", help="Pool queries of this split (repeatable; default: the "
                                    "experiment's splits)."),
    max_pairs: Optional[int] = typer.Option(None, "--max-pairs", help="Keep the N pairs of highest priority "
                                            "(audit included); default: every pair."),
    raters_per_pair: int = typer.Option(2, "--raters-per-pair", help="Different raters who judge each pair (1-10)."),
    audit: Optional[int] = typer.Option(None, "--audit", help="Built labels sampled for the scholars to audit "
                                        "(default: 5% of the pool; 0: none)."),
    seed: int = typer.Option(20261129, "--seed", help="Breaks priority ties and draws the audit sample."),
    as_json: bool = typer.Option(False, "--json", help="Print the pool's summary as JSON."),
) -> None:
    """Pool unjudged (query, document) pairs from the candidate cache for scholars to judge, most useful first.

    Depth-k pooling over the configs' fused top DEPTH and their lanes' top DEPTH, minus pairs already judged,
    pooled or labelled by the built qrels (but for an audit sample of those); ordered by priority tiers. Prints
    the pool's size and each config's Judged@10 now and once the pool is judged.
    """
    from workbench.experiment.config import load_experiment
    from workbench.judging import pooling
    from workbench.settings import data_dir, home_dir

    try:
        exp = load_experiment(experiment)
        request = dict(configs=config or None, depth=depth, splits=split or None, max_pairs=max_pairs,
                       raters_per_pair=raters_per_pair, audit=audit, seed=seed)
        pooling.check_request(exp, dataset, **request)  # every option, before anything is read or written
        data_dir()
        home = home_dir()
        store = _judge_store()
        try:
            plan = pooling.plan_pool(exp, dataset, **request, home=home, store=store, log=_log)
            pool_id, stored = pooling.store_pool(plan, store) if plan.pairs else (None, 0)
        finally:
            store.close()
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps({"pool_id": pool_id, "dataset": plan.dataset, "pairs": stored,
                               "pool_pairs": plan.pool_pairs, "audit_pairs": plan.audit_pairs,
                               "slots": stored * plan.raters_per_pair, "raters_per_pair": plan.raters_per_pair,
                               "queries": plan.queries, "candidates": plan.candidates, "excluded": plan.excluded,
                               "capped": plan.capped, "tiers": plan.tiers, "open_elsewhere": plan.open_elsewhere,
                               "stale": plan.stale, "skipped": plan.params["skipped"],
                               "judged_at_10_now": plan.params["judged_at_10_now"],
                               "judged_at_10_after": plan.params["judged_at_10_after"],
                               "elapsed_s": round(plan.elapsed_s, 3)}, indent=1))
    else:
        typer.echo(pooling.summary(plan))
    if pool_id is None:
        _log(f"nothing to pool: every pair in the top {depth} of these configs on {dataset} is judged, pooled or "
             "labelled (raise --depth, or add --audit N to audit built labels)")
        return
    if stored < len(plan.pairs):
        _log(f"{len(plan.pairs) - stored} of the planned pairs were pooled meanwhile by another command; "
             f"pool {pool_id} holds {stored}")
    _log(f"pool {pool_id} stored: {stored} pairs, {stored * plan.raters_per_pair} judging slots, in "
         f"{plan.elapsed_s:.1f} s of planning; raters judge them on the dashboard's Judge page "
         "(`workbench judge rater add NAME` makes a token)")


# ---------------------------------------------------------------- judge: agreement, adjudication settings, export, import
# (workbench.judging.agreement and workbench.judging.trecio)

def _judge_dataset(name: str, *, build: bool = True):
    """The built dataset ``name`` (built first when missing or stale), or only its checked name (``build=False``)."""
    from workbench.data import catalog
    from workbench.settings import home_dir

    defs = catalog.load_definitions()
    defs.definition(name)  # ConfigError naming the defined datasets
    if not build:
        return name
    return catalog.ensure(name, defs, home=home_dir(), log=_log)


@judge_app.command("agreement")
def judge_agreement(
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset whose judgments to compare."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    seed: int = typer.Option(20261129, "--seed", min=0, max=2**32 - 1, help="Bootstrap seed."),
    resamples: int = typer.Option(2000, "--resamples", min=0, max=100_000, help="Bootstrap resamples (0: no CIs)."),
) -> None:
    """Inter-rater agreement: Krippendorff's alpha (ordinal) overall, per query type and per rater, Cohen's kappa
    (linear) per rater pair, with 95% bootstrap CIs over (query, document) pairs, and the pooled confusion table."""
    from workbench.judging import agreement as ag

    try:
        ds = _judge_dataset(dataset)
        with _judge_store() as store, store.snapshot():
            rows, adjudications = store.current(dataset), store.adjudications(dataset)
            at = store.adjudicate_at(dataset)
        hashes = ag.doc_hashes_of(ds, (r["doc_id"] for r in (*rows, *adjudications)))
        report = ag.agreement(rows, query_types={q.query_id: q.query_type for q in ds.queries}, doc_hashes=hashes,
                              seed=seed, resamples=resamples)
        report["adjudicate_at"] = at
        report["awaiting_adjudication"] = len(ag.disagreements(rows, adjudications, at, doc_hashes=hashes))
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps({"dataset": dataset, **report}, indent=1, default=str))
        return
    if not rows:
        _log(f"no judgments on {dataset} yet: pool pairs (`workbench judge pool`) and judge them on the dashboard's "
             "Judge page, or `workbench judge import`")
    typer.echo(ag.render(report, dataset))
    typer.echo(f"\n{report['awaiting_adjudication']:,d} pair(s) await adjudication (0 vs 1 or 2 always; grades "
               f"{report['adjudicate_at']} or more apart; left short by 'cannot judge' with no other rater; "
               f"`workbench judge settings -d {dataset} --adjudicate-at 1|2`)")


@judge_app.command("settings")
def judge_settings(
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset."),
    adjudicate_at: Optional[int] = typer.Option(None, "--adjudicate-at",
                                                help="Send pairs whose grades differ by this much (1, the default: every "
                                                     "disagreement; 2: 1 vs 2 settles as 1) to adjudication; 0 vs 1 "
                                                     "or 2 always goes."),
) -> None:
    """Show or change a dataset's judging settings (when a disagreement goes to the adjudicators)."""
    try:
        _judge_dataset(dataset, build=False)
        with _judge_store() as store:
            if adjudicate_at is not None:
                store.set_adjudicate_at(dataset, adjudicate_at)
            now = store.adjudicate_at(dataset)
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(f"{dataset}: pairs whose grades differ by {now} or more go to adjudication"
               + (" (and 0 vs 1, always; 1 vs 2 resolves to 1 without an adjudicator; `--adjudicate-at 1` sends "
                  "1 vs 2 too)" if now == 2 else " (every disagreement: 0 vs 1, 0 vs 2, 1 vs 2)"))


@judge_app.command("export")
def judge_export(
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset whose judgments to export."),
    out: Path = typer.Option(..., "--output", "-o", help="The qrels file to write (a provenance JSON goes beside it)."),
    layer: str = typer.Option("human", "--layer", help="human (human grades only) or merged (human over the built labels)."),
    fmt: str = typer.Option("trec", "--format", help="trec (the layer's qrels) or csv (each rater's current grades, "
                                                       "the import format; not a backup: `workbench judge backup FILE`)."),
) -> None:
    """Write the human judgments as TREC qrels (or CSV), with FILE.provenance.json: raters, counts, agreement,
    stale judgments left out, the qrels' sha256, the store's schema version and the dataset's manifest hash.

    Not a backup: it holds current grades only (no adjudications, notes, "cannot judge", undo history or
    settings). `workbench judge backup FILE` writes the whole store."""
    from workbench.judging import trecio

    try:
        if out.is_dir():
            raise WorkbenchError(f"--output {out} is a folder; give a file path, e.g. {out / 'qrels.txt'}")
        trecio.check_export(layer, fmt)
        ds = _judge_dataset(dataset)
        with _judge_store() as store:
            prov = trecio.export(store, ds, out, layer=layer, fmt=fmt)
    except WorkbenchError as exc:
        _fail(exc)
    what = f"{prov['lines']:,d} qrels ({prov['layer']})" if fmt == "trec" else f"{prov['lines']:,d} judgments"
    stale = prov["stale"]["judgments"] + prov["stale"]["adjudications"]
    typer.echo(f"wrote {what} to {out}" + (f" (sha256 {prov['qrels_sha256'][:12]})" if prov["qrels_sha256"] else ""))
    typer.echo(f"provenance: {trecio.provenance_path(out)}")
    if stale:
        _log(f"{stale} stale judgment(s) left out: the document changed after they were made; re-judge them")
    if prov["awaiting_adjudication"]:
        _log(f"{prov['awaiting_adjudication']} pair(s) await adjudication; until then they carry the mean grade "
             "rounded down")


@judge_app.command("backup")
def judge_backup(
    file: Path = typer.Argument(..., help="The backup to write: JSON Lines, gzip-compressed when FILE ends in .gz "
                                          "(e.g. judge-2026-12-04.jsonl.gz). An existing FILE is refused unless --force."),
    force: bool = typer.Option(False, "--force", help="Replace FILE when it exists (its old backup is lost)."),
) -> None:
    """Back up the whole judgment store: raters (without their tokens), pools, pairs, slots, queues, every
    judgment with its grade, "cannot judge", note, time and undo history, every adjudication, and the settings.
    `workbench judge restore FILE` puts it into an empty store. An existing FILE is kept unless --force; a
    store that holds no judgment is backed up all the same, with a warning."""
    from workbench.judging import backup as bk

    try:
        if file.is_dir():
            raise WorkbenchError(f"{file} is a folder; give a file path, e.g. {file / 'judge.jsonl.gz'}")
        if file.exists() and not force:
            raise WorkbenchError(f"{file} exists and would be overwritten; give a new file name, or pass --force "
                                 "to replace it")
        with _judge_store() as store:
            counts = bk.backup(store, file)
    except WorkbenchError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(WorkbenchError(f"cannot write the backup {file}: {exc.strerror or exc}; choose a writable path"))
    typer.echo(f"wrote {file}: " + ", ".join(f"{n:,d} {t}" for t, n in counts.items()))
    if not counts.get("judgments"):
        _log("warning: the store backed up holds no judgment (0 judgments); if you expected grades, check "
             "WORKBENCH_PG_DSN / WORKBENCH_HOME point at the store the raters use, and keep your older backups")
    _log("tokens are not in the backup: after a restore, `workbench judge rater token NAME` gives each rater a new one")


@judge_app.command("restore")
def judge_restore(file: Path = typer.Argument(..., help="A file `workbench judge backup` wrote.")) -> None:
    """Restore a backup into an empty judgment store (the file is checked whole first; one transaction)."""
    from workbench.judging import backup as bk

    try:
        with _judge_store() as store:
            counts = bk.restore(store, file, log=_log)
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(f"restored {file}: " + ", ".join(f"{n:,d} {t}" for t, n in counts.items()))


@judge_app.command("import")
def judge_import(
    file: Path = typer.Argument(..., help="TREC qrels (needs --rater) or CSV with the header "
                                          "query_id,doc_id,relevance,rater."),
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset the judgments are for."),
    rater: Optional[str] = typer.Option(None, "--rater", help="Who judged a TREC qrels file."),
) -> None:
    """Import judgments from another tool; every line is checked first (ids in the built dataset, grades 0-2),
    and a file with any bad line writes nothing."""
    from workbench.judging import trecio

    try:
        ds = _judge_dataset(dataset)
        with _judge_store() as store:
            got = trecio.import_file(store, ds, file, rater=rater)
    except WorkbenchError as exc:
        _fail(exc)
    who = ", ".join(f"{n} {c:,d}" for n, c in got["raters"].items())
    typer.echo(f"imported {got['rows']:,d} judgments ({got['format']}) into {dataset}: {who}")
    if got["replaced"]:
        _log(f"{got['replaced']} of them replace an earlier grade by the same rater (the history keeps both)")
    if got["new_raters"]:
        _log(f"new rater(s) {', '.join(got['new_raters'])} recorded without a token (imported raters do not sign in)")


#: How a file in another encoding is converted, by the script its readers write (the hint of :func:`_decode_lines`).
ICONV_HINT = ("convert it from its encoding, e.g. iconv -f CP1251 -t UTF-8 FILE > FILE.utf8 for Russian text, "
              "-f LATIN1 for Western European; Devanagari has no common 8-bit encoding: save it as UTF-8")


def _decode_lines(raw: bytes, name: str) -> str:
    """``raw`` decoded as UTF-8 (a byte-order mark dropped), line by line: a line that is not UTF-8 is left
    out and named on stderr with its number, so one bad line never costs the other queries their answers.

    Raises:
        WorkbenchError: no line is UTF-8 (the whole file is in another encoding; names the fix).
    """
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    good, bad = [], []
    for number, line in enumerate(re.split(rb"\r\n|\n|\r", raw), 1):
        try:
            good.append(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad.append(f"line {number} (byte {line[exc.start]:#04x} at column {exc.start + 1})")
    if not any(g.strip() for g in good):
        raise WorkbenchError(f"{name} is not UTF-8: {', '.join(bad[:3])}{' …' if len(bad) > 3 else ''} cannot be "
                             f"read; {ICONV_HINT}")
    _log(f"{name}: {len(bad)} line(s) are not UTF-8 and are left out: {', '.join(bad[:5])}"
         f"{' …' if len(bad) > 5 else ''}; fix them, or if the file is in another encoding, {ICONV_HINT}")
    return "\n".join(good)


def _read_queries(queries: list[str], file: Optional[Path]) -> list[str]:
    """Query texts from the arguments and the file (``utf-8-sig``: a byte-order mark is not part of the first
    query), each cleaned by :func:`workbench.text.query.clean`; lines empty after cleaning are left out."""
    from workbench.text.query import clean

    texts = list(queries)
    if file is not None:
        name = "standard input" if str(file) == "-" else f"query file {file}"
        try:
            raw = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
            if raw[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):  # before UTF-16: its mark starts the same
                raise WorkbenchError(f"{name} is UTF-32; convert it: iconv -f UTF-32 -t UTF-8 FILE > FILE.utf8")
            if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
                raise WorkbenchError(f"{name} is UTF-16; convert it: iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8")
            src = _decode_lines(raw, name)
        except FileNotFoundError:
            raise WorkbenchError(f"query file {file} does not exist; give a UTF-8 text file, one query per line") from None
        except IsADirectoryError:
            raise WorkbenchError(f"query file {file} is a folder; give a UTF-8 text file, one query per line") from None
        except OSError as exc:
            raise WorkbenchError(f"cannot read {name}: {exc.strerror or exc}") from None
        if b"\x00" in raw and raw.count(b"\x00") * 4 > len(raw):  # UTF-16 without a byte-order mark
            raise WorkbenchError(f"{name} looks like UTF-16 without a byte-order mark (every other byte is NUL); "
                                 "convert it: iconv -f UTF-16LE -t UTF-8 FILE > FILE.utf8")
        texts += re.split(r"\r\n|\n|\r", src)  # one query per line; U+2028, U+0085… inside a query do not split it
    return [t for t in map(clean, texts) if t]


@app.command("kinds")
def kinds_cmd(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List the registered retriever and reranker kinds, and the embedder kinds, with their parameters (type,
    default, range, meaning), read from each kind's declaration (built-in kinds and installed plug-ins alike)."""
    from workbench.embedders import EmbedderKinds
    from workbench.registry import describe_kind, reranker_kinds, retriever_kinds

    try:
        groups = {"retriever": retriever_kinds(), "reranker": reranker_kinds(), "embedder": {"[embedders.NAME]": EmbedderKinds()}}
    except WorkbenchError as exc:
        _fail(exc)
    out = [{"group": g, "kind": name, "summary": k.summary, "module": type(k).__module__, "params": describe_kind(k)}
           for g, kinds in groups.items() for name, k in sorted(kinds.items())]
    if as_json:
        typer.echo(json.dumps(out, ensure_ascii=False, indent=1))
        return
    for entry in out:
        typer.echo(f"{entry['group']} kind {entry['kind']}  ({entry['module']})  {entry['summary']}")
        for r in entry["params"]:
            rng = f" [{r['constraint']}]" if r["constraint"] else ""
            variant = f"{r['variant']}: " if r["variant"] else ""
            typer.echo(f"    {variant}{r['param']}: {r['type']} = {r['default']}{rng}  {r['description']}")
        if not entry["params"]:
            typer.echo("    (no parameters)")


@app.command("serve")
def serve_cmd(
    config: str = typer.Option(..., "--config", "-c", help="A config name of the experiment."),
    experiment: Path = typer.Option(Path("experiments/seeds.toml"), "--experiment", "-e", help="Experiment TOML."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Dataset (default: the experiment's first)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (beyond loopback: needs access tokens, "
                                                        "`workbench dashboard token add NAME`)."),
    port: int = typer.Option(8790, "--port", min=1, max=65535, help="Port to serve on."),
    stdio: bool = typer.Option(False, "--stdio", help="Speak MCP over standard input and output instead of a port."),
    allow_host: Optional[list[str]] = typer.Option(None, "--allow-host", help="One more name clients may use in "
                                                   "Host (a reverse proxy's); repeatable."),
) -> None:
    """Serve one config as an HTTP search API (/search) and an MCP server (/mcp, tool `search`), to shadow it.

    Every answer is the {ok, result | error} envelope; the hits are the config's run exactly as `eval` computes
    it. Read it back with an `http` or `mcp` lane (the line printed at start is one).
    """
    from workbench.live.serve import SERVE_BOUNDS, Searcher, http_app, mcp_server
    from workbench.services import policy
    from workbench.settings import home_dir

    try:
        home = home_dir()
        bearer = None
        if not stdio:
            from workbench.dashboard import auth

            sources = auth.sources(home)
            if auth.required(sources):
                bearer = lambda token: auth.check_token(token, sources) is not None  # noqa: E731
            policy.require_tokens_off_loopback("the search API", host, bearer is not None,
                                               "create an access token first (`workbench dashboard token add NAME`; "
                                               "clients send it as 'Authorization: Bearer TOKEN')")
            explicit = [*(policy.normal_name(n, what="--allow-host") for n in allow_host or []), *policy.env_names()]
            sock = _bind_or_fail(host, port)
        searcher = Searcher(experiment, config, dataset, home, log=_log)
        server = mcp_server(searcher)
    except WorkbenchError as exc:
        _fail(exc)
    if stdio:
        import anyio

        _log(f"MCP over stdio: tool search over {config} on {searcher.served.dataset} (Ctrl-D or close stdin stops it)")
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    app = policy.Guard(http_app(searcher, server), service="the search API",
                       allowed=policy.allowed_names(host, explicit), explicit=frozenset(explicit), bounds=SERVE_BOUNDS,
                       bearer_check=bearer, body_fix="send one query per request")
    shown = (socket.gethostname() or "localhost") if host in ("0.0.0.0", "::", "") else host
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{sock.getsockname()[1]}"
    auth_line = ("\nheaders = {Authorization = \"Bearer ${WORKBENCH_SERVE_TOKEN}\"}   # export WORKBENCH_SERVE_TOKEN="
                 "<an access token>" if bearer else "")
    _log(f"serving {config} of {experiment} on {searcher.served.dataset} at {base}/search and MCP at {base}/mcp "
         f"({'access token required' if bearer else 'this machine only, no token'}; Ctrl-C stops it). As a lane:\n"
         f'[lanes.served]\nkind = "http"\nurl = "{base}/search"\nmethod = "POST"\n'
         f'body = {{query = "{{query}}", k = "{{k}}", filters = "{{filters}}"}}\nhits = "result.hits"\nid = "doc_id"\n'
         f'score = "score"\n'
         f'snapshot = "{config}"{auth_line}')
    sys.stdout.flush()
    sock.listen(128)
    cfg = policy.uvicorn_config(app, SERVE_BOUNDS, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(cfg).run(sockets=[sock])


def _bind_or_fail(host: str, port: int) -> "socket.socket":
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


@app.command("search")
def search_cmd(
    queries: list[str] = typer.Argument(None, help="Query texts (or use --file)."),
    config: str = typer.Option(..., "--config", "-c", help="A config name of the experiment."),
    experiment: Path = typer.Option(Path("experiments/seeds.toml"), "--experiment", "-e", help="Experiment TOML."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Dataset (default: the experiment's first)."),
    k: int = typer.Option(10, "-k", min=1, help="Hits to show."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Read queries from a file, one per line ('-' = stdin)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Run one config live and show each hit with its address, a snippet and its rank and score in every lane."""
    from workbench.data import catalog
    from workbench.text.doctext import beside, snippet
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import Engine, config_run
    from workbench.settings import home_dir
    from workbench.types import Query

    try:
        exp = load_experiment(experiment)
        if config not in exp.configs:
            raise WorkbenchError(f"unknown config {config!r}; {experiment} defines: {', '.join(exp.configs)}")
        cfg = exp.configs[config]
        name = dataset or exp.datasets[0]
        texts = _read_queries(queries or [], file)
        if not texts:
            if file is not None:
                raise WorkbenchError(f"no query in {'standard input' if str(file) == '-' else file}: it is empty or "
                                     "holds only blank lines or invisible characters; one query per line")
            raise WorkbenchError("no query given: pass query texts, or --file FILE ('-' reads stdin)")
        home = home_dir()
        defs = catalog.load_definitions()
        ds = catalog.ensure(name, defs, home=home, log=_log)
        engine = Engine(exp, home, progress=False, log=_log)
        engine.check_rerankers([name], [cfg.rerank.reranker] if cfg.rerank is not None else [])
        if k > cfg.top_k:
            _log(f"-k {k}: config {cfg.name} keeps its top {cfg.top_k} (top_k in {experiment.name}); showing at most "
                 f"{cfg.top_k} hits per query")
        qs = [Query(f"q{i + 1}", t, "paraphrase", "und", "test") for i, t in enumerate(texts)]
        depth = max(exp.depth, k)
        lane_runs = {}
        failures: dict[str, list[dict]] = {}  # query_id → a live lane's failures: shown, never silent "no hits"
        needed = list(dict.fromkeys((*cfg.lanes, *exp.reranker_lanes(cfg))))
        for lane_name in needed:
            lane = engine.lane(ds, exp.lanes[lane_name])
            lane_runs[lane_name] = lane.search(qs, depth)
            for qid, (cls, msg) in (getattr(lane, "last_failures", None) or {}).items():
                failures.setdefault(qid, []).append({"lane": lane_name, "class": cls, "message": msg})
        fused = config_run(cfg, lane_runs, ds, engine, qs)
    except WorkbenchError as exc:
        _fail(exc)
    docs = {d.doc_id: d for d in ds.documents}
    records = []
    for q in qs:
        hits = []
        for rank, h in enumerate(fused.get_hits(q.query_id)[:k], start=1):
            per_lane = {}
            for lane_name, run in lane_runs.items():
                for r, lh in enumerate(run.get_hits(q.query_id), start=1):
                    if lh.doc_id == h.doc_id:
                        per_lane[lane_name] = {"rank": r, "score": lh.score}
                        break
            d = docs.get(h.doc_id)
            hits.append({"rank": rank, "doc_id": h.doc_id, "address": d.address if d else "",
                         "beside": beside(d) if d else "", "score": h.score,
                         "snippet": snippet(d) if d else "", "lanes": per_lane,
                         # a rerank stage's own score (the run's score is then a rank score: workbench.eval.rerank)
                         **({"rerank_score": h.tiebreak} if cfg.rerank is not None else {})})
        rec = {"query": q.text, "dataset": name, "config": cfg.name, "hits": hits}
        if q.query_id in failures:
            rec["failures"] = failures[q.query_id]
        note = _reference_note(q, [lane_runs[n] for n in needed if exp.lanes[n].kind == "reference"])
        if note:
            rec["reference_note"] = note
        records.append(rec)
    # a live lane that failed for every query answered nothing: not "no hits" but an error (exit 2, as eval)
    dead = sorted({f["lane"] for rec in records for f in rec.get("failures", [])
                   if all(any(g["lane"] == f["lane"] for g in r.get("failures", [])) for r in records)})
    if as_json:
        typer.echo(json.dumps(records, ensure_ascii=False, indent=1))
    else:
        _print_search(records)
    if dead:
        first = next(f for rec in records for f in rec.get("failures", []) if f["lane"] == dead[0])
        _fail(WorkbenchError(f"lanes.{dead[0]}: every query failed ({first['class']}); first: {first['message']}; "
                             "check that the endpoint is up and the lane's url, headers and key variable"))


def _print_search(records: list[dict]) -> None:
    """``workbench search``'s text output: per query its hits, a live lane's failures and the reference note."""
    for rec in records:
        shown = rec["query"] if len(rec["query"]) <= 80 else rec["query"][:79] + "…"
        typer.secho(f"\n{shown!r}  ({rec['config']} on {rec['dataset']})", bold=True)
        for f in rec.get("failures", []):
            typer.secho(f"  lane {f['lane']} failed ({f['class']}): {f['message']}", fg="red")
        if not rec["hits"]:
            typer.echo("  no hits" + (" (a lane failed: see above)" if rec.get("failures") else ""))
        if rec.get("reference_note"):
            typer.secho(f"  reference lane: {rec['reference_note']}", fg="yellow")
        for h in rec["hits"]:
            lanes = "  ".join(f"{n}#{v['rank']}:{v['score']:.4g}" for n, v in h["lanes"].items()) or "-"
            rr = f"  rerank {h['rerank_score']:.4g}" if "rerank_score" in h else ""
            where = f"{h['address']} ({h['beside']})" if h["beside"] else h["address"]
            typer.echo(f"{h['rank']:3d}. {where:<22s} {h['score']:.5f}{rr}  [{lanes}]")
            typer.echo(f"     {h['snippet']}")


def _reference_note(q, ref_runs: list) -> str | None:
    """Why the config's reference lane answered nothing for a query that names a known book or collection
    (``BG 19.99`` → "BG has 18 chapters, not 19"); None for ordinary text or when the lane answered."""
    from workbench.text import refs

    if not ref_runs or any(r.get_hits(q.query_id) for r in ref_runs):
        return None
    res = refs.parse(q.text)
    if res or "unknown book code" in res.reason or "empty reference" in res.reason or "too long" in res.reason:
        return None
    return res.reason


reranker_app = typer.Typer(help="Cross-encoder rerankers: fine-tune one from the judgments.", no_args_is_help=True)
app.add_typer(reranker_app, name="reranker")


@reranker_app.command("train")
def reranker_train(
    dataset: str = typer.Option(..., "-d", "--dataset", help="The dataset whose train split and qrels train the model."),
    experiment: Optional[Path] = typer.Option(None, "-e", "--experiment", help="Experiment TOML whose lanes give the hard "
                                              "negatives (from the candidate cache); default experiments/kb.toml."),
    lanes: Optional[str] = typer.Option(None, "--lanes", help="Comma-separated lanes for the negatives (default: every "
                                        "lane the experiment's configs use, but the reference lane)."),
    qrels: Optional[str] = typer.Option(None, "--qrels", help="Qrels layer: built, human or merged (default: the "
                                        "experiment file's)."),
    base: Optional[str] = typer.Option(None, "--base", help="Model to start from: a local folder (a sentence-"
                                       "transformers bi-encoder or a cross-encoder) or all-MiniLM-L6-v2 (default)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimisation steps.", show_default=False),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Pairs per step.", show_default=False),
    max_length: Optional[int] = typer.Option(None, "--max-length", help="Word pieces per (query, document) pair.",
                                   show_default=False),
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate (AdamW).", show_default=False),
    negatives: Optional[int] = typer.Option(None, "--negatives", help="Hard negatives per query.", show_default=False),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the sampler, the head and dropout.", show_default=False),
    split: str = typer.Option("train", "--split", help="Must be train: dev and test are held out for evaluation."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Model folder (default <home>/models/<dataset>-ce)."),
    force: bool = typer.Option(False, "--force", help="Replace a non-empty output folder."),
    skip_existing: bool = typer.Option(False, "--skip-existing", help="When the output folder already holds a "
                                       "cross-encoder, keep it and exit 0 (what `make main` does on a second run)."),
    track: bool = typer.Option(True, "--mlflow/--no-mlflow", help="Log the run and the model to MLflow."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Torch threads (default: one per free core, or "
                                          "WORKBENCH_THREADS).", show_default=False),
    freeze_layers: Optional[int] = typer.Option(None, "--freeze-layers", help="Bottom layers kept frozen with the word "
                                                "embeddings (0: train every weight).", show_default=False),
    query_types: Optional[str] = typer.Option(None, "--query-types", help="Comma-separated query types to learn from "
                                              "(default paraphrase,term: a reference's relevance is not in the text); "
                                              "all: every type.", show_default=False),
    text_order: Optional[str] = typer.Option(None, "--text-order", help="Document text order in the pairs: latin-first "
                                             "(default: English translations first) or index.", show_default=False),
) -> None:
    """Fine-tune a cross-encoder on the train split's judgments, reproducibly, on CPU.

    Positives: the qrels' relevant pairs; hard negatives: the lanes' top candidates not judged relevant
    (judged non-relevant first, then unjudged). Writes the model with a model card, then prints how to use it.
    Defaults: the recipe of workbench.rerank_train (--steps 300 --batch-size 16 --max-length 64 --lr 1e-4
    --freeze-layers 4 --text-order latin-first --query-types paraphrase,term --negatives 4 --seed 0): about
    3 minutes on the 2-core machine (gita, cached candidates).
    """
    from workbench import rerank_train as rt
    from workbench.data import catalog
    from workbench.experiment.config import load_experiment
    from workbench.judging import layers
    from workbench.settings import data_dir, home_dir

    t0 = time.perf_counter()
    steps = rt.DEFAULT_STEPS if steps is None else steps
    batch_size = rt.DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    max_length = rt.DEFAULT_MAX_LENGTH if max_length is None else max_length
    lr = rt.DEFAULT_LR if lr is None else lr
    negatives = rt.DEFAULT_NEGATIVES if negatives is None else negatives
    seed = rt.DEFAULT_SEED if seed is None else seed
    try:
        rt.check_split(split)
        freeze_layers = rt.DEFAULT_FREEZE_LAYERS if freeze_layers is None else freeze_layers
        text_order = rt.DEFAULT_TEXT_ORDER if text_order is None else text_order
        rt.check_recipe(steps=steps, batch_size=batch_size, max_length=max_length, lr=lr, negatives_per_query=negatives,
                        threads=threads, freeze_layers=freeze_layers, text_order=text_order)
        from workbench.threads import default_threads, env_threads

        env_threads()  # a bad WORKBENCH_THREADS is refused before any work
        layer = layers.check_layer(qrels, "--qrels") if qrels is not None else None
        rt.resolve_base(base)
        rt.check_freeze(base, freeze_layers)  # before any lane runs
        home = home_dir()
        dest = out if out is not None else rt.default_output(dataset, home)
        defs = catalog.load_definitions()
        catalog.build_order(defs, [dataset])  # an unknown dataset: the catalog's own message
        exp = load_experiment(experiment if experiment is not None else PROJECT_ROOT / "experiments" / "kb.toml")
        chosen = rt.choose_lanes(exp, lanes.split(",") if lanes is not None else None)
        # every argument is checked before a kept model ends the command (a misspelt -d is an error either way)
        if skip_existing and not force and (Path(dest) / "config.json").is_file():
            from workbench.scorers import check_cross_encoder_folder, missing_model_parts

            # something else in its place is an error, not a model to keep
            check_cross_encoder_folder(dest, complete=False)
            # usable (config, weights, tokenizer) is kept: a cross-encoder from elsewhere has no model card, and
            # training writes its folder whole (a temporary folder renamed into place), so a card-less folder
            # is never one it left half-written
            missing = missing_model_parts(dest, card=False)
            if not missing:
                typer.echo(f"{dest} already holds a cross-encoder: kept (--force retrains it)")
                return
            _log(f"{dest} holds an incomplete cross-encoder (missing: {'; '.join(missing)}): training it again")
            force = True  # replaces the incomplete folder only once the new model is whole
        folder = rt.check_destination(dest, force)
        rt.check_space(folder, base)  # a disk without room for the model fails now, not after the training
        layer = layer or exp.qrels
        data_dir()
        if track:
            from workbench.experiment.tracking import check_tracking

            try:
                check_tracking(home)
            except WorkbenchError as exc:
                typer.secho(f"warning: not tracking in MLflow ({exc}); the model is written all the same",
                            fg=typer.colors.YELLOW, err=True)
                track = False
        ds = catalog.ensure(dataset, defs, home=home, log=_log)
        lq = layers.load_layer(layer, ds, home=home)
        if dataset not in exp.datasets:
            _log(f"note: {exp.path} does not evaluate {dataset}; its lanes run live on it unless cached")
        types = rt.choose_query_types(query_types, ds)  # before the lanes run
        runs, cached = rt.cached_lane_runs(exp, ds, chosen, home=home, progress=True, log=_log)
        _log("candidates of " + ", ".join(f"{n} ({'cache' if c else 'live'})" for n, c in cached.items()))
        candidates = rt.union_candidates(runs, [q.query_id for q in ds.queries if q.split == split])
        pairs, stats = rt.training_pairs(ds, lq.qrels, candidates, split=split, negatives_per_query=negatives, seed=seed,
                                         text_order=text_order, query_types=types)
        _log(f"{stats.pairs} pairs from {stats.queries} {split} queries of {dataset} (qrels {lq.layer}): "
             f"{stats.positives} positive, {stats.judged_negatives} judged negative, {stats.unjudged_negatives} "
             f"unjudged negative ({rt.UNJUDGED_WARNING})")
        # a bar with rate and ETA on a terminal; in a log (make main's), a line at least every 30 s
        from workbench.progress import bar as progress_bar

        threads = default_threads(threads)
        _log(f"training with {threads} torch thread(s) (one per free core; --threads or WORKBENCH_THREADS to choose)")
        bar = progress_bar(steps, f"training {folder.name}", "step")
        seen: list[float] = []

        def progress(step: int, loss: float) -> None:
            seen.append(loss)
            bar.set_postfix_str(f"loss {rt.smooth(seen)[-1]:.4f} (smoothed)", refresh=False)
            bar.update(1)

        t_train = time.perf_counter()
        try:
            model, losses = rt.train(pairs, base=base, steps=steps, batch_size=batch_size, lr=lr, max_length=max_length,
                                     seed=seed, progress=progress, threads=threads, freeze_layers=freeze_layers)
        finally:
            bar.close()
        train_s = time.perf_counter() - t_train
        card = rt.model_card(base=base, ds=ds, layer=lq, stats=stats, steps=steps, batch_size=batch_size, lr=lr,
                             max_length=max_length, seed=seed, negatives_per_query=negatives, losses=losses,
                             wall_s=time.perf_counter() - t0, train_s=train_s, folder=folder,
                             candidates={"experiment": str(exp.path), "lanes": chosen, "depth": exp.depth,
                                         "cached": cached}, threads=threads, freeze_layers=freeze_layers,
                             text_order=text_order, query_types=types)
        folder = rt.write_model(model, folder, card, force=force)
    except WorkbenchError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        typer.secho("interrupted: no model was written", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(130)
    if track:
        from workbench.experiment.tracking import tracking_uri

        try:
            run_id = rt.log_to_mlflow(card, folder, home)
            typer.secho(f"tracked in MLflow: {tracking_uri(home)} (experiment {rt.MLFLOW_EXPERIMENT}, run {run_id})",
                        err=True)
        except Exception as exc:  # MLflow raises many kinds; the model is on disk already
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            typer.secho(f"warning: could not track in MLflow at {tracking_uri(home)}: {why}; the model is kept in "
                        f"{folder}", fg=typer.colors.YELLOW, err=True)
    final = card["loss"]["summary"].get("final_smoothed", float("nan"))
    typer.echo(f"trained {folder}: {stats.pairs} pairs ({stats.positives} positive, {stats.negatives} negative, "
               f"{stats.unjudged_negatives} of them unjudged), final loss {final:.4f} (smoothed), "
               f"{time.perf_counter() - t0:.0f} s; use it:{rt.usage_line(folder, max_length)}")


def _terminate(signum, _frame) -> None:
    """SIGTERM / SIGHUP end a command the way Ctrl-C does: ``finally`` blocks and exit handlers
    run, so the embedded server this process started is stopped and temporary files are removed."""
    import signal

    signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
    raise SystemExit(128 + signum)


def main() -> None:  # pragma: no cover - console entry (tests run it as ``python -m workbench.cli``)
    """The ``workbench`` console entry: signal handling, then the command; a file-system error no
    command translated ends as one line naming the path and the fix (exit 2), never a traceback."""
    import signal

    from workbench.durable import storage_error

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    try:
        app()
    except BrokenPipeError:  # `workbench search ... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except OSError as exc:
        msg = str(storage_error(exc, exc.filename))
        typer.secho(f"error: {msg}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":  # pragma: no cover
    main()
