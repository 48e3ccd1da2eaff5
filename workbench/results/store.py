"""Reading what the main job left behind: MLflow runs, their artifacts, the built datasets.

Nothing here queries a retrieval service: the tracking store (``MLFLOW_TRACKING_URI`` or
``sqlite:///<home>/mlflow.db``, :func:`workbench.experiment.tracking.tracking_uri`), the artifacts
``workbench eval`` logged (``per_query.csv``, ``run.trec``, ``config.json`` per config run;
``lanes/<dataset>.parquet`` per eval), and the files of ``<home>/datasets/<name>/``.

Everything returns plain pandas / dataclasses; the pages cache them
(:mod:`dashboards.ui`: artifacts of a finished run never change, so by run id).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pandas as pd

from workbench.errors import DataError
from workbench.run import Run, read_trec_run

#: Columns of :func:`config_runs` besides the metrics (``metric.<mlflow name>``).
RUN_COLUMNS = ("run_id", "parent_run_id", "experiment", "dataset", "config", "started", "artifact_uri",
               "hash_queries", "hash_qrels", "hash_documents", "lanes", "qrels", "qrels_sha256")


def config_runs(uri: str) -> pd.DataFrame:
    """Every complete config run ``workbench eval`` logged (tag ``workbench.kind = config``), newest first.

    Complete: ended ``FINISHED`` with its artifacts in (:func:`workbench.experiment.tracking.is_complete`);
    a run still RUNNING (its eval is under way, or was killed) or FAILED is not a result and
    is left out, so "the newest run of a config" is its newest complete one. Before reading,
    runs left RUNNING by processes that are gone are ended KILLED
    (:func:`workbench.experiment.tracking.end_dead_runs`; skipped where the store cannot be written).

    Returns:
        one row per run: :data:`RUN_COLUMNS` (``started`` a UTC timestamp, ``lanes`` the
        config's lanes, comma-separated, ``qrels`` the qrels layer it was judged by — ``built``
        for runs logged before layers existed — and ``qrels_sha256`` the hash of that layer's
        qrels, empty for those) and one ``metric.<name>`` column per logged
        metric (``metric.recall_at_10``…). Empty (with those columns) when the store has
        no runs or does not exist yet.

    Raises:
        DataError: the store cannot be read (names the URI and the fix).
    """
    from workbench.experiment.tracking import end_dead_runs, is_complete, quiet_logs

    quiet_logs()  # quiet logs; an unreachable server fails in seconds (one retry, 15 s timeout)
    if uri.startswith("sqlite:///"):
        path = Path(uri.split(":///", 1)[1])
        if not path.is_file():  # do not let MLflow create an empty store just by looking
            return pd.DataFrame(columns=list(RUN_COLUMNS))
    import mlflow

    try:
        mlflow.set_tracking_uri(uri)
        client = mlflow.MlflowClient(tracking_uri=uri)
        exps = {e.experiment_id: e.name for e in client.search_experiments()}
        if not exps:
            return pd.DataFrame(columns=list(RUN_COLUMNS))
        try:
            end_dead_runs(client, list(exps))
        except Exception:  # a read-only copy of the store: those runs stay RUNNING and are left out below
            pass
        df = mlflow.search_runs(experiment_ids=list(exps),
                                filter_string="tags.`workbench.kind` = 'config' and attributes.status = 'FINISHED'",
                                output_format="pandas", max_results=50_000)
    except Exception as exc:  # MLflow raises many types for an unreadable store
        raise DataError(f"cannot read the MLflow store {uri}: {exc}; check MLFLOW_TRACKING_URI "
                        "(or WORKBENCH_HOME) points at the store `workbench eval` writes") from None
    if not df.empty:
        tag_cols = [c for c in df.columns if c.startswith("tags.")]
        complete = [is_complete(str(status), {c[5:]: v for c, v in zip(tag_cols, tags) if isinstance(v, str)})
                    for status, tags in zip(df["status"], df[tag_cols].itertuples(index=False, name=None))]
        df = df[complete].reset_index(drop=True)
    if df.empty:
        return pd.DataFrame(columns=list(RUN_COLUMNS))

    def col(name: str) -> pd.Series:
        return df[name] if name in df.columns else pd.Series([""] * len(df), index=df.index)

    out = pd.DataFrame({
        "run_id": df["run_id"],
        "parent_run_id": col("tags.mlflow.parentRunId").fillna(""),
        "experiment": df["experiment_id"].map(exps),
        "dataset": col("tags.dataset").fillna(""),
        "config": col("tags.config").fillna(""),
        "started": pd.to_datetime(df["start_time"], utc=True),
        "artifact_uri": df["artifact_uri"],
        "hash_queries": col("params.hash.queries").fillna(""),
        "hash_qrels": col("params.hash.qrels").fillna(""),
        "hash_documents": col("params.hash.documents").fillna(""),
        "lanes": col("params.fusion.lanes").fillna(""),
        "qrels": col("params.qrels.layer").fillna("").replace("", "built"),
        "qrels_sha256": col("params.qrels.sha256").fillna(""),
    })
    if uri.startswith("sqlite:///"):
        base = Path(uri.split(":///", 1)[1]).parent
        out["artifact_uri"] = [rebase(u, base) for u in out["artifact_uri"]]
    metrics = df[[c for c in df.columns if c.startswith("metrics.")]]
    metrics.columns = ["metric." + c.split(".", 1)[1] for c in metrics.columns]
    out = pd.concat([out, metrics], axis=1)
    return out.sort_values("started", ascending=False, kind="stable").reset_index(drop=True)


def rebase(artifact_uri: str, base: Path) -> str:
    """A ``file:`` artifact URI moved under ``base/mlartifacts`` when the store's home was copied or moved.

    MLflow records absolute artifact paths (``file:///old/home/mlartifacts/<exp>/<run>/artifacts``).
    When ``base/mlartifacts/<exp>/<run>/artifacts`` exists (the store's own folder), that copy is
    used, so a home copied to another machine reads its own artifacts; otherwise the URI is
    returned unchanged.
    """
    parsed = urlparse(artifact_uri)
    if parsed.scheme not in ("", "file"):
        return artifact_uri
    parts = Path(unquote(parsed.path)).parts
    if "mlartifacts" not in parts:
        return artifact_uri
    i = len(parts) - 1 - parts[::-1].index("mlartifacts")
    local = base.joinpath("mlartifacts", *parts[i + 1:])
    return local.resolve().as_uri() if local.is_dir() else artifact_uri


def latest_per_config(runs: pd.DataFrame) -> pd.DataFrame:
    """The newest run of each (experiment, dataset, config) — what the overview shows by default.

    ``runs`` comes from :func:`config_runs`, which holds complete runs only, so this is the
    newest *complete* run: an eval killed before a config's artifacts were in leaves that
    config's previous run in place."""
    if runs.empty:
        return runs
    return (runs.sort_values("started", ascending=False, kind="stable")
            .drop_duplicates(["experiment", "dataset", "config"]).reset_index(drop=True))


def label(row: pd.Series | dict) -> str:
    """``experiment/config`` — how a config run is named on every page."""
    return f"{row['experiment']}/{row['config']}"


def _artifact_path(artifact_uri: str, rel: str) -> Path:
    """A local path to an artifact: read in place for ``file:`` stores, downloaded otherwise."""
    parsed = urlparse(artifact_uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path)) / rel
    import mlflow

    return Path(mlflow.artifacts.download_artifacts(artifact_uri=f"{artifact_uri.rstrip('/')}/{rel}"))


def _require(path: Path, what: str, run_id: str) -> Path:
    if not path.is_file():
        raise DataError(f"run {run_id} has no {what} artifact ({path}): it was deleted, the home was copied "
                        "without its mlartifacts/ folder, or an older workbench logged it; run `workbench eval` on "
                        "its experiment again")
    return path


def per_query(artifact_uri: str, run_id: str) -> pd.DataFrame:
    """The run's per-query table: ``query_id, query_type, split, language, script`` (``script`` missing from
    tables written before #12) and one column per measure.

    Raises:
        DataError: the artifact is missing.
    """
    path = _require(_artifact_path(artifact_uri, "per_query.csv"), "per_query.csv", run_id)
    try:
        df = pd.read_csv(path, dtype={"query_id": str, "query_type": str, "split": str, "language": str, "script": str},
                         keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise DataError(f"run {run_id}: cannot read {path} ({exc}); run `workbench eval` again") from None
    from workbench.eval.evaluate import GROUP_COLUMNS

    missing = [c for c in ("query_id", "query_type", "split") if c not in df.columns]
    measures = [c for c in df.columns if c not in ("query_id", *GROUP_COLUMNS)]
    bad = [m for m in measures if not pd.api.types.is_numeric_dtype(df[m])]
    if missing or not measures or bad:
        raise DataError(f"run {run_id}: {path} is not a per-query table (missing {missing or 'measures'}"
                        + (f", non-numeric {bad}" if bad else "") + "); run `workbench eval` again")
    return df


def read_fused_run(artifact_uri: str, run_id: str) -> Run:
    """The config's fused ranking (``run.trec``), in its written order.

    Raises:
        DataError: the artifact is missing or malformed.
    """
    path = _require(_artifact_path(artifact_uri, "run.trec"), "run.trec", run_id)
    return read_trec_run(path, keep_file_order=True)


def parent_artifact_uri(artifact_uri: str, run_id: str, parent_run_id: str) -> str:
    """The parent (eval) run's artifact root, derived from the child's (same experiment)."""
    if not parent_run_id:
        return ""
    base = artifact_uri.rstrip("/")
    suffix = f"{run_id}/artifacts"
    if base.endswith(suffix):
        return base[: -len(suffix)] + f"{parent_run_id}/artifacts"
    import mlflow

    return mlflow.MlflowClient().get_run(parent_run_id).info.artifact_uri


def _logged(parent_artifact_uri: str, rel: str) -> Path | None:
    """The local path of the eval's artifact ``rel``, or None when there is no eval or it did not log one."""
    if not parent_artifact_uri:
        return None
    path = _artifact_path(parent_artifact_uri, rel)
    return path if path.is_file() else None


def lane_hits(parent_artifact_uri: str, dataset: str) -> pd.DataFrame | None:
    """Every lane's candidates of one eval on one dataset (``lanes/<dataset>.parquet``:
    ``lane, query_id, doc_id, rank, score``, :func:`workbench.experiment.tracking.lane_frame`), or
    ``None`` when that eval did not log them (older runs)."""
    path = _logged(parent_artifact_uri, f"lanes/{dataset}.parquet")
    if path is None:
        return None
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise DataError(f"cannot read the lane candidates {path} ({exc}); run `workbench eval` again") from None
    if not {"lane", "query_id", "doc_id", "rank", "score"} <= set(df.columns):
        raise DataError(f"{path} is not a lane-candidates table; run `workbench eval` again")
    for c in ("lane", "query_id", "doc_id"):
        df[c] = df[c].astype(str)
    return df


def live_answers(parent_artifact_uri: str, dataset: str, lane: str) -> dict | None:
    """A live lane's raw answers and failures as one eval logged them (``live/<dataset>/<lane>.json``:
    ``{"raw": {query_id: JSON text}, "failures": {query_id: [class, message]}}``), or ``None`` when it read its
    candidates from the cache (or is not a live lane)."""
    path = _logged(parent_artifact_uri, f"live/{dataset}/{lane}.json")
    if path is None:
        return None
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {path} ({exc}); run `workbench eval` again") from None
    return got if isinstance(got, dict) else None


def report_table(parent_artifact_uri: str, name: str) -> pd.DataFrame | None:
    """One of an eval's report tables (``reports/<name>.csv``:
    :func:`workbench.experiment.report.report_tables`), or ``None`` when that eval logged none of that name
    (no filtered queries, no negatives, or an older run).

    Raises:
        DataError: the file is there but unreadable.
    """
    path = _logged(parent_artifact_uri, f"reports/{name}.csv")
    if path is None:
        return None
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {path} ({exc}); run `workbench eval` again") from None


@dataclass
class DatasetFiles:
    """A built dataset as the dashboard needs it: queries (``query_id``-indexed), qrels, documents.

    ``modified`` names the files that no longer match the build's manifest (edited or
    replaced after ``workbench data build``; ``manifest.json`` itself when it is unreadable);
    the pages warn with :func:`modified_message` whenever it is not empty.
    """

    name: str
    queries: pd.DataFrame
    qrels: dict[str, dict[str, int]]
    documents: dict[str, Any] = field(repr=False)
    hashes: dict[str, str] = field(default_factory=dict)
    folder: Path | None = None
    modified: tuple[str, ...] = ()


def modified_files(home: str | Path, name: str) -> tuple[str, ...]:
    """The files of ``<home>/datasets/<name>/`` that no longer match the build's manifest
    (:func:`workbench.data.catalog.modified_outputs`; corpus inputs are not hashed: the dashboard
    may run on a copy of the home without the corpora)."""
    from workbench.data import catalog

    return catalog.modified_outputs(name, Path(home))


def modified_message(ds: DatasetFiles) -> str:
    """The warning for a dataset whose files no longer match its build: names them and the command to rebuild."""
    files = ", ".join(ds.modified)
    where = f" in {ds.folder}" if ds.folder else ""
    verb = "does" if len(ds.modified) == 1 else "do"
    return (f"Dataset {ds.name}: {files}{where} {verb} not match the build's manifest (edited or replaced after "
            f"`workbench data build`), so the texts and queries shown here may not be the ones evaluated. "
            f"Rebuild it: `workbench data build --only {ds.name}`")


def dataset_signature(home: str, name: str) -> tuple:
    """``(size, mtime_ns, inode)`` of the dataset's manifest and files: a cache key that changes
    when any of them is edited or replaced, so a cached dataset is read (and checked) again."""
    from workbench.data import catalog

    folder = Path(home) / "datasets" / name
    sig: list[tuple[Any, ...]] = []
    for f in ("manifest.json", *catalog.OUTPUTS):
        try:
            st = (folder / f).stat()
            sig.append((f, st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            sig.append((f, None))
    return tuple(sig)


def dataset_files(home: str, name: str) -> DatasetFiles:
    """Read ``<home>/datasets/<name>/`` and check its files against the build's manifest
    (:func:`modified_files`; a mismatch is reported in ``modified``, not raised). The
    corpora are not consulted: the drill-down compares the manifest's hashes with the run's.

    Raises:
        DataError: the dataset is not built in this home (names the command to build it),
            or a file is missing or cannot be parsed (names it and the rebuild command).
    """
    from workbench.data import catalog
    from workbench.io.formats import read_documents, read_qrels, read_queries

    folder = Path(home) / "datasets" / name
    if not (folder / "manifest.json").is_file():
        raise DataError(f"dataset {name} is not built in {home}; run `workbench data build --only {name}` "
                        "(or point WORKBENCH_HOME at the home the runs were made in)")
    modified = modified_files(home, name)
    manifest = catalog.read_manifest(name, Path(home)) or {}
    outputs = manifest.get("outputs")
    try:
        queries = pd.DataFrame([dataclasses.asdict(q) for q in read_queries(folder / "queries.tsv")])
        queries = queries.set_index("query_id") if not queries.empty else queries
        qrels: dict[str, dict[str, int]] = {}
        for r in read_qrels(folder / "qrels.txt"):
            qrels.setdefault(r.query_id, {})[r.doc_id] = r.relevance
        docs = {d.doc_id: d for d in read_documents(folder / "documents.jsonl")}
    except DataError:
        raise
    except OSError as exc:
        raise DataError(f"dataset {name}: cannot read {exc.filename or folder} ({exc.strerror or exc}); "
                        f"run `workbench data build --only {name}`") from None
    except ValueError as exc:  # not UTF-8, or a record the readers reject
        raise DataError(f"dataset {name} in {folder} cannot be read ({exc}); "
                        f"run `workbench data build --only {name}`") from None
    return DatasetFiles(name, queries, qrels, docs, dict(outputs) if isinstance(outputs, dict) else {}, folder,
                        modified)
