"""Streamlit glue shared by the pages in ``dashboards/``: cached loaders, selections that
persist across pages, and the "nothing yet" messages.

Caching: run listings for 30 s (new evals appear without a restart); artifacts of a run,
datasets and lane candidates for the life of the server, keyed by run id (artifacts of a
finished run do not change). Large objects use ``st.cache_resource`` (shared, not copied).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import streamlit as st

from workbench.dashboard import gates, store, studies
from workbench.errors import WorkbenchError

MAIN_JOB = "make main"


def home() -> Path:
    """The workbench home (``WORKBENCH_HOME`` or ``~/.workbench``; :func:`workbench.settings.home_dir`);
    a home that cannot be used stops the page with the settings error."""
    from workbench.settings import home_dir

    try:
        return home_dir()
    except WorkbenchError as exc:
        stop_with_error(exc)


def stop_with_error(exc: Exception) -> None:
    """Show a workbench error as a message (not a traceback) and stop the page."""
    st.error(str(exc))
    st.stop()


@st.cache_data(ttl=30, show_spinner="Reading MLflow runs…")
def config_runs(uri: str) -> pd.DataFrame:
    """:func:`workbench.dashboard.store.config_runs`, cached for 30 s."""
    return store.config_runs(uri)


def runs_or_stop() -> tuple[str, pd.DataFrame]:
    """The tracking URI and its config runs; stops the page with what to run when there are none."""
    from workbench.tracking import tracking_uri

    uri = tracking_uri(home())
    try:
        runs = config_runs(uri)
    except WorkbenchError as exc:
        stop_with_error(exc)
    if runs.empty:
        st.info(f"No evaluation runs in the MLflow store `{uri}` yet. Run the main job, `{MAIN_JOB}` "
                "(or `workbench eval experiments/seeds.toml`), then reload this page. Another store: set "
                "`MLFLOW_TRACKING_URI` or `WORKBENCH_HOME` before `workbench dashboard`.")
        st.stop()
    return uri, runs


@st.cache_resource(show_spinner="Reading per-query results…", max_entries=256)
def per_query(artifact_uri: str, run_id: str) -> pd.DataFrame:
    """A run's per-query table (shared, read once per server: treat it as read-only)."""
    return store.per_query(artifact_uri, run_id)


@st.cache_resource(show_spinner="Reading the run…", max_entries=64)
def fused_run(artifact_uri: str, run_id: str):
    """A run's fused ranking (:class:`~workbench.run.Run`), read once per server."""
    return store.fused_run(artifact_uri, run_id)


@st.cache_resource(show_spinner="Reading the lanes' candidates…", max_entries=8)
def lane_index(parent_uri: str, dataset: str) -> tuple[pd.DataFrame | None, dict[str, Any]]:
    """The lane candidates of one eval and a query_id → row positions index (one pass, then O(1) per query)."""
    df = store.lane_hits(parent_uri, dataset)
    if df is None:
        return None, {}
    return df, df.groupby("query_id", sort=False, observed=True).indices


def lane_hits_for(parent_uri: str, dataset: str, query_id: str) -> pd.DataFrame | None:
    """The lanes' candidates for one query (``None`` when the eval did not log them)."""
    df, index = lane_index(parent_uri, dataset)
    if df is None:
        return None
    return df.iloc[index.get(query_id, [])]


@st.cache_resource(show_spinner="Reading the dataset…", max_entries=8)
def dataset_files(home_path: str, name: str):
    """A built dataset's queries, qrels and documents (:class:`~workbench.dashboard.store.DatasetFiles`)."""
    return store.dataset_files(home_path, name)


def pick(label: str, options: Sequence[Any], state: str, *, key: str, fmt=str, default: Any = None,
         sidebar: bool = True, help: str | None = None) -> Any:
    """A selectbox whose choice is kept in ``st.session_state[state]`` and shared by every page."""
    options = list(options)
    if not options:
        return None
    current = st.session_state.get(state, default)
    index = options.index(current) if current in options else (options.index(default) if default in options else 0)
    where = st.sidebar if sidebar else st
    value = where.selectbox(label, options, index=index, format_func=fmt, key=key, help=help)
    st.session_state[state] = value
    return value


def run_choices(runs: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Config runs of a dataset, newest per (experiment, config), labelled ``experiment/config``; the
    newest experiment first, its configs in the experiment's order."""
    part = store.latest_per_config(runs[runs["dataset"] == dataset])
    # newest experiment first, and within it the experiment's own config order (children start in that order),
    # so the first two labels are the first two configs of the latest eval (a seed and its variant)
    newest = part.groupby("experiment")["started"].transform("max")
    part = part.assign(_newest=newest).sort_values(["_newest", "started"], ascending=[False, True], kind="stable")
    return _labelled(part.drop(columns="_newest"))


def _labelled(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs indexed (and keyed in a ``label`` column) by ``experiment/config``."""
    return runs.assign(label=[store.label(r) for _, r in runs.iterrows()]).set_index("label", drop=False)


def eval_choices(runs: pd.DataFrame, dataset: str) -> dict[str, pd.DataFrame]:
    """``latest of each config`` plus one entry per eval (parent run), newest first."""
    part = runs[runs["dataset"] == dataset]
    out = {"latest of each config": run_choices(runs, dataset)}
    for parent, g in sorted(part.groupby("parent_run_id"), key=lambda kv: -kv[1]["started"].max().value):
        when = g["started"].min().strftime("%Y-%m-%d %H:%M UTC")
        out[f"{g['experiment'].iloc[0]} eval of {when} ({parent[:8]})"] = _labelled(g)
    return out


def parent_uri(row: pd.Series) -> str:
    """The artifact root of the eval (parent run) a config run belongs to (``""`` when none)."""
    return store.parent_artifact_uri(row["artifact_uri"], row["run_id"], row["parent_run_id"])


@st.cache_data(ttl=30)
def study_list(home_path: str) -> list[studies.StudyOutputs]:
    """The study output folders under the home, newest first (cached 30 s)."""
    return studies.find(Path(home_path))


@st.cache_resource(show_spinner="Loading the Optuna study…", ttl=60)
def optuna_study(url: str, name: str):
    """The Optuna study from its storage (cached 60 s, so a running study's new trials appear)."""
    return studies.load(url, name)


@st.cache_data(ttl=30)
def gate_list(home_path: str) -> list[Path]:
    """The saved gate reports, newest first (cached 30 s)."""
    return gates.find(Path(home_path))
