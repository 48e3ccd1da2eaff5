"""MLflow tracking for ``workbench eval``: one parent run per invocation, one child per (dataset, config).

* Store: ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<home>/mlflow.db`` (MLflow
  discourages the plain file store); artifacts under ``<home>/mlartifacts``.
* Params: the config flattened (``fusion``, ``k``, ``weights.vector``…), every lane's
  engine parameters (``lane.vector.ef_search``), embedding model ids, splits, depth, and
  the input hashes (documents, queries, qrels, corpus inputs, builder code).
* The qrels layer (:mod:`workbench.judging.layers`): every config run has the param
  ``qrels.layer`` (``built`` | ``human`` | ``merged``) and the tag ``qrels`` (the same, for
  filtering), ``qrels.sha256`` (:func:`workbench.judging.layers.qrels_sha256` of the layer's
  qrels, which changes with every new human grade), ``qrels.human_pairs``, ``qrels.stale``
  and ``qrels.queries_left_out`` (``human``: queries without a human grade); the parent run
  has ``qrels.layer``. A study run has ``qrels.layer`` and ``qrels.sha256``.
* Metrics: names sanitised in exactly one place, :func:`metric_key` (MLflow rejects
  ``@``): ``R@10`` → ``recall_at_10``, ``nDCG@10`` → ``ndcg_at_10``, ``RR@10`` →
  ``mrr_at_10``; per query type ``recall_at_10/paraphrase``, per split
  ``recall_at_10/split_test``; latency ``latency_p50_ms`` / ``latency_p95_ms``.
* Artifacts: per config the TREC run, the per-query table (CSV) and the config (JSON);
  on the parent run the experiment TOML and, per dataset, every lane's candidates
  (``lanes/<dataset>.parquet``: :func:`lane_frame`), and a live lane's raw answers and failures
  (``live/<dataset>/<lane>.json``, when it asked the system rather than the cache), so the dashboard can show which
  lanes found a document, at which rank and score, without querying any service; and the report's tables of
  filtered search and empty answers (``reports/<name>.csv``: :func:`workbench.experiment.report.report_tables`).

Runs under kills (what readers may trust):

* every run the workbench starts carries its writer's identity as tags
  (:func:`writer_tags`: host, pid, and the process's start — boot id, pid namespace and
  start tick on Linux — so a reused pid is not mistaken for the writer);
* a run is ended ``FINISHED`` only after its artifacts were uploaded and listed back
  (:func:`tracked_run`); the tag ``workbench.artifacts`` names them. Any exception ends
  it ``FAILED`` (``KILLED`` for Ctrl-C / SIGTERM); a SIGKILL leaves it ``RUNNING``;
* a run left ``RUNNING`` by a process that is gone is ended ``KILLED`` (with the tag
  ``workbench.ended_by``) the next time the workbench logs to or reads that store
  (:func:`end_dead_runs`). A run whose writer still lives, runs another machine or
  pid namespace started, and runs without the identity tags are never touched;
* readers take a config's runs only when :func:`is_complete` (``FINISHED`` and, for runs
  that carry the identity tags, ``workbench.artifacts``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench._infra.jsonout import dumps as strict_json

if TYPE_CHECKING:
    import pandas as pd

_PREFIX = {"R": "recall", "P": "precision", "nDCG": "ndcg", "RR": "mrr", "Judged": "judged", "AP": "map",
           "Success": "success"}


def metric_key(measure: str) -> str:
    """The MLflow metric name of an ir_measures name: ``R@10`` → ``recall_at_10``; ``nDCG@10`` → ``ndcg_at_10``."""
    name, _, cutoff = str(measure).partition("@")
    base = _PREFIX.get(name, re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_").lower())
    return f"{base}_at_{cutoff}" if cutoff else base


def tracking_uri(home: Path) -> str:
    """``MLFLOW_TRACKING_URI`` or ``sqlite:///<home>/mlflow.db``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(home / 'mlflow.db').resolve()}"


def quiet_logs() -> None:
    """Quiet MLflow for a command-line run: its logging at ERROR, no artifact progress bar, one retry and a
    15 s timeout against a tracking server (environment defaults only: a user's own settings win)."""
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # an unreachable tracking server fails in seconds, not after minutes of retries
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    for name in ("mlflow", "alembic", "sqlalchemy"):  # their failures reach the user as one `error:` line
        logging.getLogger(name).setLevel(logging.CRITICAL)


def check_tracking(home: Path, experiment: str | None = None) -> None:
    """Fail early (before a long evaluation) on a tracking URI that cannot work.

    Checks the scheme, and for ``sqlite:///`` that the database's folder can be created
    and written, and that the MLflow experiment ``experiment`` (the one the job will log to) is not deleted
    (the UI's Delete button: the job ran to its end, then failed with "must be in the 'active' state").
    Remote servers are only reached when logging.

    Raises:
        ConfigError: naming the URI (or the deleted experiment) and the fix.
    """
    from workbench.errors import ConfigError

    uri = tracking_uri(home)
    scheme = uri.split(":", 1)[0].lower()
    fix = "fix or unset MLFLOW_TRACKING_URI, or pass --no-track"
    if scheme not in ("sqlite", "http", "https", "postgresql", "mysql", "databricks"):
        raise ConfigError(f"MLflow tracking URI {uri!r} has an unsupported scheme {scheme!r}; "
                          f"use sqlite:///PATH or http(s)://HOST ({fix})")
    if scheme == "sqlite":
        path = Path(uri.split(":///", 1)[1]) if ":///" in uri else None
        if path is None or not str(path):
            raise ConfigError(f"MLflow tracking URI {uri!r} names no database file ({fix})")
        if not path.is_absolute():
            path = Path.cwd() / path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            probe = path.parent / f".wb-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise ConfigError(f"MLflow database folder {path.parent} is not writable ({exc.strerror or exc}); {fix}") from None
        if path.exists() and path.is_dir():
            raise ConfigError(f"MLflow tracking URI {uri!r} points at a folder, not a database file ({fix})")
        _init_sqlite_store(uri, path)
        if experiment is not None:
            import mlflow

            check_active(mlflow.MlflowClient(tracking_uri=uri).get_experiment_by_name(experiment), uri)


def check_active(exp, uri: str) -> None:
    """Refuse an MLflow experiment (an ``mlflow.entities.Experiment`` or None) that was deleted.

    Raises:
        ConfigError: it is deleted; the message names it and the two ways out (restore it, or remove it for
            good with ``mlflow gc``).
    """
    from workbench.errors import ConfigError

    if exp is not None and getattr(exp, "lifecycle_stage", "active") == "deleted":
        raise ConfigError(
            f"the MLflow experiment {exp.name!r} (id {exp.experiment_id}) in {uri} is deleted (the UI's Delete "
            f"button); restore it: mlflow experiments restore --experiment-id {exp.experiment_id} (with "
            f"MLFLOW_TRACKING_URI={uri}), or remove it for good: mlflow gc --backend-store-uri {uri} "
            f"--experiment-ids {exp.experiment_id}; or pass --no-track")


def _init_sqlite_store(uri: str, path: Path) -> None:
    """Create (or open) the SQLite tracking store under a lock: MLflow creates its tables with
    alembic migrations that fail when two processes run them at once on a new file."""
    from workbench._infra.durable import storage_error_in
    from workbench._infra.locks import FileLock
    from workbench.errors import ConfigError

    quiet_logs()
    with FileLock(path.parent / f".{path.name}.lock", f"the MLflow store {path}"):
        import mlflow

        try:
            mlflow.MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        except Exception as exc:  # noqa: BLE001 - MLflow and SQLAlchemy raise many kinds
            full = storage_error_in(exc, path)
            if full is not None:
                raise full from None
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ConfigError(f"cannot open the MLflow store {path}: {first}; move it aside to start a new one, "
                              "or pass --no-track") from None


def _experiment_id(mlflow, name: str, home: Path) -> str:
    exp = mlflow.get_experiment_by_name(name)
    check_active(exp, tracking_uri(home))
    if exp is not None:
        return exp.experiment_id
    return mlflow.create_experiment(name, artifact_location=(home / "mlartifacts").resolve().as_uri())


#: Tags naming the process that writes a run (see :func:`writer_tags`).
TAG_HOST, TAG_PID, TAG_PROCESS = "workbench.writer.host", "workbench.writer.pid", "workbench.writer.process"
#: Tag set when a run's artifacts are all in (comma-separated names), just before it is ended FINISHED.
TAG_ARTIFACTS = "workbench.artifacts"
#: Tag set on a run this module ended because its writer was gone.
TAG_ENDED_BY = "workbench.ended_by"


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` apart from a later process that reuses its pid (:func:`workbench._infra.procs.identity`)."""
    from workbench._infra import procs

    return procs.identity(pid)


def writer_tags() -> dict[str, str]:
    """The tags that let a later process decide whether this one, the run's writer, is still alive."""
    from workbench._infra import procs

    me = procs.record()
    return {TAG_HOST: me["host"], TAG_PID: str(me["pid"]), TAG_PROCESS: me["process"] or ""}


def writer_state(tags: dict[str, str]) -> str:
    """``alive``, ``dead`` or ``unknown``: whether the process named by a run's :func:`writer_tags`
    still runs (:func:`workbench._infra.procs.state`: ``dead`` only when that is certain)."""
    from workbench._infra import procs

    return procs.state({"host": tags.get(TAG_HOST), "pid": tags.get(TAG_PID), "process": tags.get(TAG_PROCESS)})


def is_complete(status: str, tags: dict[str, str]) -> bool:
    """Whether a run may be read as a result: ``FINISHED``, and — for a run this module wrote
    (it has :func:`writer_tags`) — its artifacts were all uploaded (``workbench.artifacts``).
    Runs without the writer tags (older workbench versions, other tools) need ``FINISHED`` only."""
    if status != "FINISHED":
        return False
    return TAG_PID not in tags or bool(tags.get(TAG_ARTIFACTS))


def end_dead_runs(client, experiment_ids: list[str] | None = None, *, log: Callable[[str], None] | None = None) -> list[str]:
    """End ``KILLED`` every ``RUNNING`` run whose writer process is gone (:func:`writer_state` ``dead``).

    A run whose writer lives, or whose writer cannot be judged from here (another host or
    container, no identity tags), is left as it is. The run gets the tag
    ``workbench.ended_by`` saying who ended it and why.

    Args:
        client: an ``mlflow.MlflowClient`` on the store.
        experiment_ids: where to look (default: every active experiment).
        log: told one line per run ended.

    Returns:
        the ids of the runs ended.

    Raises:
        Exception: whatever MLflow raises when the store cannot be searched or written
            (callers that only read catch it: the runs stay RUNNING and are not read).
    """
    ids = experiment_ids if experiment_ids is not None else [e.experiment_id for e in client.search_experiments()]
    if not ids:
        return []
    ended, token = [], None
    while True:
        page = client.search_runs(ids, filter_string="attributes.status = 'RUNNING'", max_results=1000, page_token=token)
        for run in page:
            tags = run.data.tags
            if TAG_PID not in tags or writer_state(tags) != "dead":
                continue
            why = (f"pid {os.getpid()} on {socket.gethostname()} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: "
                   f"its writer, pid {tags[TAG_PID]} on {tags.get(TAG_HOST)}, ended without finishing it")
            client.set_tag(run.info.run_id, TAG_ENDED_BY, why)
            client.set_terminated(run.info.run_id, status="KILLED")
            ended.append(run.info.run_id)
            if log is not None:
                log(f"MLflow run {run.info.run_id} ({run.info.run_name}) was left RUNNING by a process that is gone; "
                    "marked KILLED")
        token = page.token
        if not token:
            return ended


@contextmanager
def tracked_run(mlflow, experiment_id: str, name: str, tags: dict[str, str], *, nested: bool = False) -> Iterator[Any]:
    """Start a run tagged with :func:`writer_tags`; end it ``FINISHED`` only on a clean exit of the block.

    The block uploads the run's artifacts and calls :func:`seal` last. Any exception ends
    the run ``FAILED`` (``KILLED`` for KeyboardInterrupt / SystemExit, i.e. Ctrl-C and
    SIGTERM) and is re-raised; a SIGKILL leaves it ``RUNNING`` for :func:`end_dead_runs`.
    """
    run = mlflow.start_run(experiment_id=experiment_id, run_name=name, nested=nested, tags={**tags, **writer_tags()})
    try:
        yield run
    except BaseException as exc:
        _drop_local_artifacts(run)  # half an upload (a full disk) is never left behind
        try:
            mlflow.end_run("KILLED" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else "FAILED")
        except Exception:  # the store itself failed; the original error says more
            pass
        raise
    mlflow.end_run("FINISHED")


def _drop_local_artifacts(run) -> None:
    """Remove the artifact folder of a run that failed, when the artifact store is a local folder."""
    from urllib.parse import unquote, urlparse

    uri = getattr(run.info, "artifact_uri", "") or ""
    if uri.startswith("file:"):
        shutil.rmtree(unquote(urlparse(uri).path), ignore_errors=True)


def _listed(client, run_id: str, folder: str | None = None) -> set[str]:
    out: set[str] = set()
    for info in client.list_artifacts(run_id, folder):
        out |= _listed(client, run_id, info.path) if info.is_dir else {info.path}
    return out


def seal(client, run_id: str, expected: list[str]) -> None:
    """Check that every artifact in ``expected`` (paths relative to the run's root) is listed by
    the store, then tag the run ``workbench.artifacts`` with them.

    Raises:
        StorageError: an artifact is missing after its upload (names the run and the
            files; the run then ends FAILED and readers keep the previous complete one).
    """
    from workbench.errors import StorageError

    missing = sorted(set(expected) - _listed(client, run_id))
    if missing:
        raise StorageError(f"MLflow run {run_id} lacks the artifacts {', '.join(missing)} after their upload; "
                           "check the artifact store's space and permissions, then run the command again")
    client.set_tag(run_id, TAG_ARTIFACTS, ",".join(sorted(expected))[:5000])


def _upload(client, run_id: str, folder: Path) -> list[str]:
    """Upload every file under ``folder`` to the run's artifact root in one ``MlflowClient.log_artifacts``
    call; returns their artifact paths (relative, ``/``-separated)."""
    client.log_artifacts(run_id, str(folder))
    return sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file())


def _end_dead_runs_quietly(client) -> None:
    """:func:`end_dead_runs` before logging; a failure here must not stop the logging itself."""
    try:
        end_dead_runs(client, log=lambda m: logging.getLogger("workbench").warning(m))
    except Exception:
        pass


def config_params(result, cr) -> dict[str, Any]:
    """The params logged for one (dataset, config) child run."""
    exp = result.experiment
    ds = result.datasets[cr.dataset]
    params: dict[str, Any] = {"dataset": cr.dataset, "config": cr.config.name, "splits": ",".join(exp.splits),
                              "depth": exp.depth, "measures": ",".join(exp.measures)}
    params.update({f"fusion.{k}": v for k, v in cr.config.flat().items()})
    from workbench.registry import retriever_kind

    lanes = list(cr.config.lanes)
    if cr.config.rerank is not None:
        rspec = exp.rerankers[cr.config.rerank.reranker]
        params["rerank.kind"] = rspec.kind
        params.update({f"rerank.{k}": v for k, v in rspec.params.items()})
        lanes += [ln for ln in exp.reranker_lanes(cr.config) if ln not in lanes]
    for lane in lanes:
        spec = exp.lanes[lane]
        params[f"lane.{lane}.kind"] = spec.kind
        params.update({f"lane.{lane}.{k}": v for k, v in spec.canonical().items()})
        emb = retriever_kind(spec.kind).embedder_of(spec.parsed())  # every kind that reads a model, OpenSearch too
        if emb is not None:
            params[f"lane.{lane}.model_id"] = result.model_ids.get(emb, "")
    params.update({f"index.{k}": v for k, v in exp.index.items()})
    outputs = ds.manifest["outputs"]
    params.update({"hash.documents": outputs["documents.jsonl"], "hash.queries": outputs["queries.tsv"],
                   "hash.qrels": outputs["qrels.txt"], "hash.inputs": ds.manifest.get("inputs_sha256", ""),
                   "hash.code": ds.manifest.get("code_sha256", "")})
    params.update(qrels_params(result, cr.dataset))
    return {k: str(v)[:500] for k, v in params.items()}


def qrels_params(result, dataset: str) -> dict[str, Any]:
    """The qrels-layer params of one dataset of a job (see the module docstring); ``built`` with the
    built qrels' hash for a result made without layers."""
    from workbench.judging.layers import built_layer

    lq = (getattr(result, "qrels", None) or {}).get(dataset)
    if lq is None:
        lq = built_layer(result.datasets[dataset])
    exp = result.experiment
    queries = [q for q in result.datasets[dataset].queries if q.split in exp.splits]
    return {"qrels.layer": lq.layer, "qrels.sha256": lq.sha256, "qrels.human_pairs": lq.human_pairs,
            "qrels.stale": lq.stale, "qrels.queries_left_out": lq.left_out(queries)}


def config_metrics(cr) -> dict[str, float]:
    """The metrics logged for one (dataset, config) child run."""
    from workbench.eval.evaluate import latency_or_nan


    ev = cr.evaluation
    out: dict[str, float] = {metric_key(m): float(v) for m, v in ev.overall.items()}
    for by in ("query_type", "split"):
        table = ev.aggregate(by)
        for group, row in table.iterrows():
            label = str(group) if by == "query_type" else f"split_{group}"
            for m in ev.overall:
                out[f"{metric_key(m)}/{label}"] = float(row[m])
    lat = latency_or_nan(list(cr.latency_ms.values()))
    out["latency_p50_ms"], out["latency_p95_ms"] = lat["p50"], lat["p95"]
    out["queries"] = float(len(ev.per_query))
    return out


def lane_frame(lanes: dict) -> pd.DataFrame:
    """One row per (lane, query, hit) of the lanes' runs, best first.

    Args:
        lanes: lane name → :class:`~workbench.run.Run` (hits higher-is-better, each lane's own score).

    Returns:
        columns ``lane, query_id, doc_id, rank`` (1-based, int32), ``score`` (float64, the
        lane's raw score); ``lane``, ``query_id`` and ``doc_id`` are categorical.
    """
    import pandas as pd

    cols: dict[str, list] = {"lane": [], "query_id": [], "doc_id": [], "rank": [], "score": []}
    for name, run in lanes.items():
        for qid, hits in run.items():
            for rank, h in enumerate(hits, 1):
                cols["lane"].append(name)
                cols["query_id"].append(qid)
                cols["doc_id"].append(h.doc_id)
                cols["rank"].append(rank)
                cols["score"].append(h.score)
    df = pd.DataFrame(cols)
    for c in ("lane", "query_id", "doc_id"):
        df[c] = df[c].astype("category")
    df["rank"] = df["rank"].astype("int32")
    df["score"] = df["score"].astype("float64")
    return df


def log_job(result, home: Path) -> str:
    """Log a :class:`~workbench.experiment.runner.JobResult` to MLflow; returns the parent run id.

    Runs left RUNNING in the store by dead processes are ended first (:func:`end_dead_runs`).
    Each run is tagged with its writer (:func:`writer_tags`) and ended FINISHED only after
    its artifacts are uploaded and listed back (:func:`tracked_run`, :func:`seal`), so a
    process killed mid-upload leaves no run that readers take for a result.

    Raises:
        StorageError: an artifact is missing after its upload.
        Exception: what MLflow raises for a store it cannot write (the CLI reports it on one line).
    """
    quiet_logs()
    import mlflow
    from mlflow.entities import Metric, Param

    from workbench.run import write_trec_run

    mlflow.set_tracking_uri(tracking_uri(home))
    exp = result.experiment
    exp_id = _experiment_id(mlflow, exp.name, home)
    client = mlflow.MlflowClient()
    _end_dead_runs_quietly(client)
    with tracked_run(mlflow, exp_id, f"{exp.name} eval", {"workbench.kind": "eval"}) as parent:
        pid = parent.info.run_id
        client.log_batch(pid, params=[Param(k, str(v)[:500]) for k, v in {
            "experiment_file": str(exp.path), "datasets": ",".join(exp.datasets),
            "configs": ",".join(exp.configs), "qrels.layer": getattr(result, "qrels_layer", "built")}.items()])
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            shutil.copyfile(exp.path, t / Path(exp.path).name)
            lanes = {f"{d}/{lane}": s for (d, lane), s in result.lane_latency.items()}
            (t / "lane_latency_ms.json").write_text(strict_json(lanes, indent=2, default=str), encoding="utf-8")
            (t / "lanes").mkdir()
            for ds in exp.datasets:
                runs = {lane: lr.run for (d, lane), lr in result.lanes.items() if d == ds}
                if runs:
                    lane_frame(runs).to_parquet(t / "lanes" / f"{ds}.parquet", index=False)
            for (ds, lane), lr in result.lanes.items():  # a live system's raw answers, for the drill-down
                if getattr(lr, "raw", None) or getattr(lr, "failures", None):
                    (t / "live" / ds).mkdir(parents=True, exist_ok=True)
                    (t / "live" / ds / f"{lane}.json").write_text(strict_json(
                        {"raw": lr.raw, "failures": {q: list(f) for q, f in lr.failures.items()}},
                        ensure_ascii=False), encoding="utf-8")
            from workbench.experiment.report import report_tables

            tables = report_tables(result)
            if tables:  # filtered search and empty answers, for the dashboard's page of them
                (t / "reports").mkdir()
                for name, frame in tables.items():
                    frame.to_csv(t / "reports" / f"{name}.csv", index=False)
            parent_artifacts = _upload(client, pid, t)
        for cr in result.configs:
            tags = {"dataset": cr.dataset, "config": cr.config.name, "workbench.kind": "config",
                    "qrels": getattr(result, "qrels_layer", "built")}
            with tracked_run(mlflow, exp_id, f"{cr.dataset}/{cr.config.name}", tags, nested=True) as child:
                cid = child.info.run_id
                now = int(time.time() * 1000)
                client.log_batch(cid, metrics=[Metric(k, v, now, 0) for k, v in config_metrics(cr).items()],
                                 params=[Param(k, v) for k, v in config_params(result, cr).items()])
                with tempfile.TemporaryDirectory() as tmp:
                    t = Path(tmp)
                    cr.evaluation.per_query.to_csv(t / "per_query.csv", index=False)
                    write_trec_run(t / "run.trec", cr.run, tag=cr.config.name)
                    (t / "config.json").write_text(strict_json(cr.config.flat(), indent=1, default=str))
                    names = _upload(client, cid, t)
                seal(client, cid, names)
        seal(client, pid, parent_artifacts)
        return pid


def log_study(result, home: Path, folder: Path) -> str:
    """Log a tuning study to MLflow: one parent run, the trials' values as metrics batched by
    step (= trial number), the chosen parameters, the dev/test report and the study folder's
    files (plots, report, export) as artifacts. Returns the run id.

    Like :func:`log_job`: dead writers' runs are ended first, and the run is FINISHED only
    once its artifacts are in.

    Raises:
        StorageError: an artifact is missing after its upload.
        Exception: what MLflow raises for a store it cannot write.
    """
    quiet_logs()
    import mlflow
    from mlflow.entities import Metric, Param

    st = result.study
    mlflow.set_tracking_uri(tracking_uri(home))
    exp_id = _experiment_id(mlflow, f"{st.experiment.name}", home)
    client = mlflow.MlflowClient()
    _end_dead_runs_quietly(client)
    with tracked_run(mlflow, exp_id, f"study {st.name}", {"workbench.kind": "study", "dataset": st.dataset,
                                                          "qrels": getattr(st, "qrels", "built")}) as run:
        rid = run.info.run_id
        now = int(time.time() * 1000)
        metrics = []
        for t in result.optuna_study.trials:
            if t.values:
                metrics.append(Metric("trial_objective", float(t.values[0]), now, t.number))
                if len(t.values) > 1:
                    metrics.append(Metric("trial_latency_p95_ms", float(t.values[1]), now, t.number))
        for i in range(0, len(metrics), 1000):  # MLflow takes at most 1,000 metrics per batch
            client.log_batch(rid, metrics=metrics[i:i + 1000])
        params = {"study": st.name, "dataset": st.dataset, "baseline": st.baseline, "objective": st.measure,
                  "split": st.split, "seed": st.seed, "trials": len(result.optuna_study.trials),
                  "chosen_trial": result.chosen.number, "qrels.layer": getattr(st, "qrels", "built"),
                  "qrels.sha256": result.report.get("qrels", {}).get("sha256", "")}
        params.update({f"chosen.{k}": v for k, v in result.chosen_params.items()})
        client.log_batch(rid, params=[Param(k, str(v)[:500]) for k, v in params.items()])
        final = {"train_objective_chosen": result.chosen.values[0], "train_objective_baseline": result.baseline_value}
        for split in ("dev", "test"):
            for m, row in (result.report.get(split, {}).get("measures") or {}).items():
                final[f"{split}/{metric_key(m)}/chosen"] = row["chosen"]
                final[f"{split}/{metric_key(m)}/baseline"] = row["baseline"]
                final[f"{split}/{metric_key(m)}/p_value"] = row["p_value"]
                if "p_adjusted" in row:
                    final[f"{split}/{metric_key(m)}/p_adjusted"] = row["p_adjusted"]
        values = [Metric(k, float(v), now, 0) for k, v in final.items() if v is not None]
        for i in range(0, len(values), 1000):
            client.log_batch(rid, metrics=values[i:i + 1000])
        client.log_artifact(rid, str(st.path))
        seal(client, rid, [Path(st.path).name, *_upload(client, rid, Path(folder))])
        return rid
