"""Compare two configs: per-query deltas as a plot, wins and losses, paired significance."""

import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError
from workbench.eval.stats import P_ADJUST, P_ADJUST_NAME
from workbench.results import views
from workbench.types import SPLITS

st.title("Compare two configs")
uri, runs = ui.runs_or_stop()

dataset = ui.pick("Dataset", sorted(runs["dataset"].unique()), "dataset", key="cmp_dataset", default="gita")
docs_q, docs_error = None, None
try:  # the query texts shown below; read first so a build that no longer matches its manifest is flagged on top
    docs_q = ui.cached_dataset_files(str(ui.home()), dataset).queries
except WorkbenchError as exc:
    docs_error = exc
choices = ui.run_choices(runs, dataset)
labels = list(choices.index)
if len(labels) < 2:
    st.info(f"Only one config has been evaluated on {dataset}; evaluate another (`workbench eval EXPERIMENT.toml`) "
            "to compare.")
    st.stop()
baseline = ui.pick("Baseline (A)", labels, "baseline", key="cmp_baseline", default=labels[0])
rest = [lab for lab in labels if lab != baseline]
candidate = ui.pick("Candidate (B)", rest, "candidate", key="cmp_candidate", default=rest[0])
splits = st.sidebar.multiselect("Splits", list(SPLITS), default=list(SPLITS), key="cmp_splits")
if not splits:
    st.info("Choose at least one split in the sidebar.")
    st.stop()
a_row, b_row = choices.loc[baseline], choices.loc[candidate]
try:
    a = views.select(ui.cached_per_query(a_row["artifact_uri"], a_row["run_id"]), splits)
    b = views.select(ui.cached_per_query(b_row["artifact_uri"], b_row["run_id"]), splits)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
measures = [m for m in views.measures_of(a) if m in set(views.measures_of(b))]
if not measures:
    st.error(f"{baseline} and {candidate} share no measure; evaluate them with the same measures.")
    st.stop()
measure = ui.pick("Measure", measures, "measure", key="cmp_measure", default="R@10" if "R@10" in measures else measures[0])
layer_a, layer_b = a_row.get("qrels", "built"), b_row.get("qrels", "built")
st.caption(f"qrels layer: **{baseline}** {layer_a}, **{candidate}** {layer_b}")
if layer_a != layer_b:
    st.warning(f"The two runs were judged by different qrels layers ({layer_a} and {layer_b}): the deltas below mix "
               "a change of config with a change of judgments. Evaluate both with one `--qrels` layer.")
elif layer_a != "built" and a_row.get("qrels_sha256", "") != b_row.get("qrels_sha256", ""):
    st.warning(f"Both runs use the {layer_a} layer, but judged at different times (new judgments since); "
               "evaluate both again to compare on the same qrels.")
if a_row["hash_queries"] != b_row["hash_queries"]:
    st.warning("The two runs were evaluated on different builds of the query set; only shared query ids are compared.")

cmp = views.query_deltas(a, b, measure)
if cmp.empty:
    st.info("The two runs share no query in the chosen splits.")
    st.stop()


@st.cache_data(show_spinner="Paired randomisation test…", max_entries=64)
def _significance(key: tuple):
    return views.significance(cmp)


sig = _significance((a_row["run_id"], b_row["run_id"], measure, tuple(splits)))
overall = sig.iloc[0]
c1, c2, c3, c4 = st.columns(4)
c1.metric(f"{measure}: {candidate}", f"{overall['candidate']:.3f}", f"{overall['delta']:+.3f} vs {baseline}")
c2.metric("Wins (B better)", int(overall["wins"]))
c3.metric("Losses (B worse)", int(overall["losses"]))
c4.metric("Ties", int(overall["ties"]))
verdict = ("significant" if overall["p_adjusted"] < 0.05 else "not significant")
st.markdown(f"Mean Δ = **{overall['delta']:+.4f}**, 95% CI [{overall['ci_low']:+.4f}, {overall['ci_high']:+.4f}], "
            f"paired randomisation test p = **{overall['p_value']:.4f}**, "
            f"{P_ADJUST_NAME[P_ADJUST]}-adjusted over the {len(sig)} strata below p = **{overall['p_adjusted']:.4f}** "
            f"({verdict} at 0.05; {len(cmp)} queries, 10,000 sign flips).")
st.dataframe(sig, hide_index=True, column_config={
    "p_value": st.column_config.NumberColumn("p", format="%.4f"),
    "p_adjusted": st.column_config.NumberColumn(f"p ({P_ADJUST_NAME[P_ADJUST]})", format="%.4f"),
    **{c: st.column_config.NumberColumn(format="%.4f") for c in ("baseline", "candidate", "delta", "ci_low", "ci_high")}})
st.plotly_chart(views.delta_figure(cmp, measure, baseline, candidate))

st.subheader("Queries that moved most")
if docs_error is not None:
    st.caption(f"Query texts unavailable: {docs_error}")
left, right = st.columns(2)
for col, title, part in ((left, "Losses", cmp[cmp["delta"] < 0].head(50)),
                         (right, "Wins", cmp[cmp["delta"] > 0].sort_values("delta", ascending=False).head(50))):
    with col:
        st.markdown(f"**{title}** ({len(part)} shown) — select a row to open it in the drill-down")
        show = part[["query_id", "delta", "baseline", "candidate", "query_type", "split"]].copy()
        if docs_q is not None:
            show.insert(2, "text", [docs_q["text"].get(q, "") for q in show["query_id"]])
        state = st.dataframe(show, hide_index=True, on_select="rerun", selection_mode="single-row",
                             key=f"cmp_table_{title}")
        rows = state.selection.rows if state is not None else []
        if rows:
            st.session_state["query_id"] = show.iloc[rows[0]]["query_id"]
            st.switch_page("views/query.py")
