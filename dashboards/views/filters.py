"""Filters and empty answers: filtered queries by selectivity, approximate lanes against an exact scan, and the
min_score trade-off on unanswerable queries, from one eval's report tables (workbench.experiment.report)."""

import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError
from workbench.results import store, views

st.title("Filters and empty answers")
uri, runs = ui.runs_or_stop()
dataset = ui.pick("Dataset", sorted(runs["dataset"].unique()), "dataset", key="fl_dataset", default="bilara-filtered")
choices = {k: v for k, v in ui.eval_choices(runs, dataset).items() if k != "latest of each config"}
which = st.sidebar.selectbox("Eval", list(choices), key="fl_eval",
                             help="One `workbench eval`: its tables were computed together.")
if which is None:
    st.stop()
parent = ui.parent_uri(choices[which].iloc[0])
tables = {}
for name in ("by_filter", "ann_check", "answers", "min_score_curve"):
    try:
        frame = store.report_table(parent, name)
    except WorkbenchError as exc:  # one unreadable table must not hide the others
        st.warning(str(exc))
        continue
    if frame is not None and "dataset" in frame and not frame[frame["dataset"] == dataset].empty:
        tables[name] = frame[frame["dataset"] == dataset].drop(columns=["dataset"])
if not tables:
    st.info(f"This eval of **{dataset}** has no filtered and no unanswerable queries. Evaluate a dataset that has "
            "them: `workbench eval experiments/filters.toml` (bilara-filtered, cst4-mn-filtered) or "
            "`workbench eval experiments/min-score.toml` (gita-negatives).")
    st.stop()

if "by_filter" in tables:
    st.subheader("Filtered queries by selectivity")
    st.caption("Each filtered query beside the same query without its filter (`unfiltered`); `short`: answered "
               "with fewer than min(top_k, admitted) documents although the filter admits more.")
    st.dataframe(tables["by_filter"], hide_index=True)
if "ann_check" in tables:
    st.subheader("Approximate lanes against an exact scan")
    st.caption("Per HNSW lane and selectivity: the share of the exact filtered top 10 it found, and how often it "
               "returned fewer rows than the exact scan (pgvector filters after the graph scan; iterative scan "
               "goes on until enough rows pass).")
    st.plotly_chart(views.ann_figure(tables["ann_check"]), key="fl_ann")
    st.dataframe(tables["ann_check"], hide_index=True)
if "min_score_curve" in tables or "answers" in tables:
    st.subheader("Unanswerable queries: the min_score trade-off")
    ran = tables.get("answers")
    if "min_score_curve" in tables:
        chosen = {r["config"]: (r["empty on negatives"], r["false empty"]) for _i, r in ran.iterrows()} \
            if ran is not None else {}
        st.caption("Raising min_score empties more unanswerable queries (up is better) and more answerable ones "
                   "(right is worse); a star is the config as it ran.")
        st.plotly_chart(views.min_score_figure(tables["min_score_curve"], chosen), key="fl_curve")
    if ran is not None:
        st.dataframe(ran, hide_index=True)
