"""Overview: configs × measures with 95% bootstrap CIs, per query type, by dataset and split."""

import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError
from workbench.results import views
from workbench.types import SPLITS

st.title("Overview")
uri, runs = ui.runs_or_stop()

dataset = ui.pick("Dataset", sorted(runs["dataset"].unique()), "dataset", key="ov_dataset", default="gita")
choices = ui.eval_choices(runs, dataset)
which = st.sidebar.selectbox("Runs", list(choices), key="ov_eval",
                             help="The newest run of every config, or every config of one `workbench eval`.")
chosen = choices[which]
experiments = sorted(chosen["experiment"].unique())
# one filter state per (dataset, runs): switching either starts from every experiment again
keep = st.sidebar.multiselect("Experiments", experiments, default=experiments, key=f"ov_experiments:{dataset}:{which}")
if len(keep) < len(experiments):
    st.caption(f"Showing {len(keep)} of {len(experiments)} experiments (filter in the sidebar).")
chosen = chosen[chosen["experiment"].isin(keep)]
splits = st.sidebar.multiselect("Splits", list(SPLITS), default=list(SPLITS), key="ov_splits",
                                help="Queries of these splits only (tuning uses train; test is held out).")
if chosen.empty or not splits:
    st.info("Choose at least one experiment and one split in the sidebar.")
    st.stop()

tables = {}
for label, row in chosen.iterrows():
    try:
        tables[label] = ui.cached_per_query(row["artifact_uri"], row["run_id"])
    except WorkbenchError as exc:  # one unreadable run must not hide the others
        st.warning(f"{label} is left out: {exc}")
if not tables:
    st.stop()
chosen = chosen.loc[list(tables)]
all_measures = list(dict.fromkeys(m for t in tables.values() for m in views.measures_of(t)))
default = [m for m in ("R@10", "nDCG@10", "RR@10") if m in all_measures] or all_measures[:3]
measures = st.sidebar.multiselect("Measures", all_measures, default=default, key="ov_measures")
if not measures:
    st.info("Choose at least one measure in the sidebar.")
    st.stop()
layers_shown = sorted(chosen["qrels"].unique()) if "qrels" in chosen else ["built"]
if len(layers_shown) > 1:
    st.warning(f"These runs were judged by different qrels layers ({', '.join(layers_shown)}): their measures are "
               "not comparable. Keep one layer (filter the experiments in the sidebar), or evaluate them again with "
               "one `--qrels` layer.")
elif "qrels" in chosen and chosen["qrels_sha256"].nunique() > 1 and layers_shown != ["built"]:
    st.warning(f"These runs were judged by the {layers_shown[0]} layer at different times (new judgments "
               "since): their measures rest on different qrels; evaluate them again to compare on the same ones.")
if chosen["hash_queries"].nunique() > 1:
    st.warning("These runs were evaluated on different builds of the query set; the table compares them on "
               "the queries they share.")


@st.cache_data(show_spinner="Bootstrapping confidence intervals…", max_entries=64)
def _overview(run_ids: tuple, splits: tuple, measures: tuple):
    return views.overview(tables, list(measures), splits=list(splits))


long = _overview(tuple(chosen["run_id"]), tuple(splits), tuple(measures))
if long.empty:
    st.info("No queries of the chosen splits are shared by these runs.")
    st.stop()
n_all = int(long[long["stratum"] == views.ALL]["n"].iloc[0])
st.caption(f"{len(tables)} configs on **{dataset}**, {n_all} queries ({', '.join(splits)}); qrels layer: "
           f"**{', '.join(layers_shown)}**; mean [95% percentile-bootstrap CI, 2,000 resamples shared by all configs]. "
           f"MLflow store: `{uri}`.")

strata = list(dict.fromkeys(long["stratum"]))
tabs = st.tabs([f"{s} (n={int(long[long['stratum'] == s]['n'].iloc[0])})" for s in strata])
for tab, stratum in zip(tabs, strata):
    with tab:
        st.dataframe(views.overview_wide(long, stratum))

measure = st.selectbox("Plot", measures, key="ov_plot_measure")
st.plotly_chart(views.overview_figure(long, measure))
with st.expander("Runs shown"):
    st.dataframe(chosen[[c for c in ("experiment", "config", "qrels", "lanes", "started", "run_id") if c in chosen]],
                 hide_index=True)
st.download_button("Download the table (CSV)", long.to_csv(index=False), file_name=f"overview-{dataset}.csv",
                   mime="text/csv")
