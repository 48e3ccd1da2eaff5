"""Online: readers' traffic (UBI logs): what each log set holds, which interleaved config readers preferred, and
the query sets drawn from traffic scored beside the built ones."""

import plotly.express as px
import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError
from workbench.results import traffic

st.title("Online")
home = ui.home()
sets = traffic.log_sets(home)
if not sets:
    st.info(f"No log set under `{home / 'logs'}` yet. Serve a config with a UBI log "
            "(`workbench serve -c CONFIG --ubi-log DIR`, or `--interleave A,B` to compare two), then "
            "`workbench logs import NAME DIR`.")
    st.stop()
name = st.sidebar.selectbox("Log set", sets, key="on_set")
report = traffic.import_report(home, name)
cols = st.columns(4)
cols[0].metric("Searches", f"{report.get('queries', 0):,}")
cols[1].metric("Events", f"{report.get('events', 0):,}")
cols[2].metric("Clients", f"{report.get('clients', 0):,}")
cols[3].metric("Sessions", f"{report.get('sessions', 0):,}")
if report.get("first"):
    st.caption(f"{report['first']} to {report['last']}; actions: "
               + (", ".join(f"{a} {n:,}" for a, n in sorted((report.get("actions") or {}).items())) or "none"))
skipped = traffic.skipped_frame(report)
if not skipped.empty:
    with st.expander(f"{int(skipped['count'].sum()):,} lines skipped at import"):
        st.dataframe(skipped, hide_index=True)

st.subheader("Interleaving")
alpha = st.sidebar.number_input("Sign test alpha", 0.001, 0.5, 0.05, 0.01, key="on_alpha")
try:
    pairs = traffic.interleaving(home, name, alpha)
    running = traffic.cumulative_wins(home, name)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
if pairs.empty:
    st.info("No interleaved search in this log set (`workbench serve --interleave A,B --ubi-log DIR` writes them).")
else:
    st.dataframe(pairs, hide_index=True, column_config={"p_value": st.column_config.NumberColumn(format="%.4g")})
    if not running.empty:
        long = running.melt(id_vars=["pair", "search"], value_vars=["wins_a", "wins_b"], var_name="team",
                            value_name="wins")
        fig = px.line(long, x="search", y="wins", color="team", facet_row="pair",
                      labels={"search": "searches with a preference"})
        st.plotly_chart(fig, key="on_running")

st.subheader("Query sets drawn from traffic")
from workbench.experiment.tracking import tracking_uri  # noqa: E402

try:
    runs = ui.cached_config_runs(tracking_uri(home))
except WorkbenchError as exc:
    ui.stop_with_error(exc)
tables = {}
for label, row in runs.iterrows():
    try:
        tables[label] = ui.cached_per_query(row["artifact_uri"], row["run_id"])
    except WorkbenchError:
        continue
measures = ["R@10", "nDCG@10"]
scores = traffic.traffic_vs_built(tables, measures)
if scores.empty:
    st.info("No evaluated run holds a query drawn from traffic yet: draw a set (`workbench logs sample NAME -o FILE`), "
            "name it in a dataset's `traffic_queries`, judge it (scholars, or `workbench logs judge`), and evaluate.")
else:
    st.dataframe(scores, hide_index=True, column_config={m: st.column_config.NumberColumn(format="%.3f")
                                                         for m in measures})
