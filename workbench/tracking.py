"""MLflow tracking for ``workbench eval``: one parent run per invocation, one child per (dataset, config).

* Store: ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<home>/mlflow.db`` (MLflow
  discourages the plain file store); artifacts under ``<home>/mlartifacts``.
* Params: the config flattened (``fusion``, ``k``, ``weights.vector``…), every lane's
  engine parameters (``lane.vector.ef_search``), embedding model ids, splits, depth, and
  the input hashes (documents, queries, qrels, corpus inputs, builder code).
* Metrics: names sanitised in exactly one place, :func:`metric_key` (MLflow rejects
  ``@``): ``R@10`` → ``recall_at_10``, ``nDCG@10`` → ``ndcg_at_10``, ``RR@10`` →
  ``mrr_at_10``; per query type ``recall_at_10/paraphrase``, per split
  ``recall_at_10/split_test``; latency ``latency_p50_ms`` / ``latency_p95_ms``.
* Artifacts: per config the TREC run, the per-query table (CSV) and the config (JSON);
  on the parent run the experiment TOML and, per dataset, every lane's candidates
  (``lanes/<dataset>.parquet``: :func:`lane_frame`), so the dashboard can show which
  lanes found a document, at which rank and score, without querying any service.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

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


def _quiet() -> None:
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # an unreachable tracking server fails in seconds, not after minutes of retries
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.ERROR)


def check_tracking(home: Path) -> None:
    """Fail early (before a long evaluation) on a tracking URI that cannot work.

    Checks the scheme, and for ``sqlite:///`` that the database's folder can be created
    and written. Remote servers are only reached when logging.

    Raises:
        ConfigError: naming the URI and the fix.
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


def _experiment_id(mlflow, name: str, home: Path) -> str:
    exp = mlflow.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    return mlflow.create_experiment(name, artifact_location=(home / "mlartifacts").resolve().as_uri())


def config_params(result, cr) -> dict[str, Any]:
    """The params logged for one (dataset, config) child run."""
    exp = result.experiment
    ds = result.datasets[cr.dataset]
    params: dict[str, Any] = {"dataset": cr.dataset, "config": cr.config.name, "splits": ",".join(exp.splits),
                              "depth": exp.depth, "measures": ",".join(exp.measures)}
    params.update({f"fusion.{k}": v for k, v in cr.config.flat().items()})
    for lane in cr.config.lanes:
        spec = exp.lanes[lane]
        params[f"lane.{lane}.kind"] = spec.kind
        params.update({f"lane.{lane}.{k}": v for k, v in spec.params.items()})
        if spec.kind == "pgvector":
            params[f"lane.{lane}.model_id"] = result.model_ids.get(spec.params["embedder"], "")
    params.update({f"index.{k}": v for k, v in exp.index.items()})
    outputs = ds.manifest["outputs"]
    params.update({"hash.documents": outputs["documents.jsonl"], "hash.queries": outputs["queries.tsv"],
                   "hash.qrels": outputs["qrels.txt"], "hash.inputs": ds.manifest.get("inputs_sha256", ""),
                   "hash.code": ds.manifest.get("code_sha256", "")})
    return {k: str(v)[:500] for k, v in params.items()}


def config_metrics(cr) -> dict[str, float]:
    """The metrics logged for one (dataset, config) child run."""
    from workbench.evaluate import latency_or_nan

    
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


def lane_frame(lanes: dict) -> "pd.DataFrame":
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
    """Log a :class:`~workbench.job.JobResult` to MLflow; returns the parent run id."""
    _quiet()
    import mlflow
    from mlflow.entities import Metric, Param

    from workbench.run import write_trec_run

    mlflow.set_tracking_uri(tracking_uri(home))
    exp = result.experiment
    exp_id = _experiment_id(mlflow, exp.name, home)
    client = mlflow.MlflowClient()
    with mlflow.start_run(experiment_id=exp_id, run_name=f"{exp.name} eval") as parent:
        mlflow.log_params({"experiment_file": str(exp.path), "datasets": ",".join(exp.datasets),
                           "configs": ",".join(exp.configs)})
        mlflow.log_artifact(str(exp.path))
        lanes = {f"{d}/{lane}": s for (d, lane), s in result.lane_latency.items()}
        mlflow.log_dict(lanes, "lane_latency_ms.json")
        with tempfile.TemporaryDirectory() as tmp:
            for ds in exp.datasets:
                runs = {lane: lr.run for (d, lane), lr in result.lanes.items() if d == ds}
                if runs:
                    lane_frame(runs).to_parquet(Path(tmp) / f"{ds}.parquet", index=False)
            mlflow.log_artifacts(tmp, "lanes")
        for cr in result.configs:
            with mlflow.start_run(experiment_id=exp_id, run_name=f"{cr.dataset}/{cr.config.name}", nested=True) as child:
                now = int(__import__("time").time() * 1000)
                client.log_batch(child.info.run_id,
                                 metrics=[Metric(k, v, now, 0) for k, v in config_metrics(cr).items()],
                                 params=[Param(k, v) for k, v in config_params(result, cr).items()])
                mlflow.set_tags({"dataset": cr.dataset, "config": cr.config.name, "workbench.kind": "config"})
                with tempfile.TemporaryDirectory() as tmp:
                    t = Path(tmp)
                    write_trec_run(t / "run.trec", cr.run, tag=cr.config.name)
                    cr.evaluation.per_query.to_csv(t / "per_query.csv", index=False)
                    (t / "config.json").write_text(json.dumps(cr.config.flat(), indent=1, default=str))
                    mlflow.log_artifacts(tmp)
        return parent.info.run_id



def log_study(result, home: Path, folder: Path) -> str:
    """Log a tuning study to MLflow: one parent run, the trials' values as metrics batched by
    step (= trial number), the chosen parameters, the dev/test report and the study folder's
    files (plots, report, export) as artifacts. Returns the run id."""
    _quiet()
    import mlflow
    from mlflow.entities import Metric, Param

    st = result.study
    mlflow.set_tracking_uri(tracking_uri(home))
    exp_id = _experiment_id(mlflow, f"{st.experiment.name}", home)
    client = mlflow.MlflowClient()
    with mlflow.start_run(experiment_id=exp_id, run_name=f"study {st.name}") as run:
        now = int(__import__("time").time() * 1000)
        metrics = []
        for t in result.optuna_study.trials:
            if t.values:
                metrics.append(Metric("trial_objective", float(t.values[0]), now, t.number))
                if len(t.values) > 1:
                    metrics.append(Metric("trial_latency_p95_ms", float(t.values[1]), now, t.number))
        for i in range(0, len(metrics), 1000):  # MLflow takes at most 1,000 metrics per batch
            client.log_batch(run.info.run_id, metrics=metrics[i:i + 1000])
        params = {"study": st.name, "dataset": st.dataset, "baseline": st.baseline, "objective": st.measure,
                  "split": st.split, "seed": st.seed, "trials": len(result.optuna_study.trials),
                  "chosen_trial": result.chosen.number}
        params.update({f"chosen.{k}": v for k, v in result.chosen_params.items()})
        client.log_batch(run.info.run_id, params=[Param(k, str(v)[:500]) for k, v in params.items()])
        final = {"train_objective_chosen": result.chosen.values[0], "train_objective_baseline": result.baseline_value}
        for split in ("dev", "test"):
            for m, row in (result.report.get(split, {}).get("measures") or {}).items():
                final[f"{split}/{metric_key(m)}/chosen"] = row["chosen"]
                final[f"{split}/{metric_key(m)}/baseline"] = row["baseline"]
                final[f"{split}/{metric_key(m)}/p_value"] = row["p_value"]
        mlflow.log_metrics({k: float(v) for k, v in final.items() if v is not None})
        mlflow.set_tags({"workbench.kind": "study", "dataset": st.dataset})
        mlflow.log_artifact(str(st.path))
        mlflow.log_artifacts(str(folder))
        return run.info.run_id
