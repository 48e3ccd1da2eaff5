"""Gate: the latest report of `workbench gate` (or an earlier one), its checks, judged coverage and losses."""

import pandas as pd
import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError
from workbench.gate.report import GateReport
from workbench.results import gates

st.title("Gate")
home = ui.home()
reports = ui.gate_list(str(home))
if not reports:
    st.info(f"No gate report under `{home / 'gates'}` yet. The main job (`{ui.MAIN_JOB}`) gates the seed configs; "
            "or run `workbench gate experiments/gate-seeds.toml` (or `--candidate … --baseline …`).")
    st.stop()
def _when(p) -> str:  # gate-20261130T014400194378Z-7174 -> 2026-11-30 01:44:00 UTC
    stamp = p.stem.split("-")[1] if p.stem.count("-") >= 2 else p.stem
    try:
        return f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]} UTC"
    except IndexError:
        return p.stem


path = st.sidebar.selectbox("Report", reports, format_func=_when, key="gate_report")
if path is None:
    st.stop()
try:
    report = GateReport.load(path)
except WorkbenchError as exc:
    ui.stop_with_error(exc)

created = report.created.isoformat(timespec="seconds") if report.created else ""
if report.verdict == "pass":
    st.success(f"PASS — {len(report.results)} gated config(s), {created}")
else:
    st.error(f"REGRESSION — exit {report.exit_code}, {created}")
st.code(" ".join(report.command), language="bash")

checks = gates.checks_frame(report)
if not checks.empty:
    margin = max(r.margin for r in report.results)
    st.plotly_chart(gates.figure(checks, margin), key="gate_fig")
if not checks.empty:
    colours = {"pass": "#e8f5e9", "fail": "#ffebee", "inconclusive": "#fff8e1", "too-few": "#f5f5f5"}
    styled = checks.style.apply(lambda row: [f"background-color: {colours.get(row['status'], '')}"] * len(row), axis=1)
    st.dataframe(styled, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.4f")
        for c in ("candidate_value", "baseline_value", "diff", "ci_low", "ci_high")})
for r in report.results:
    with st.expander(f"{r.dataset}: {r.candidate} vs {r.baseline} (margin {r.margin:g})",
                     expanded=bool(r.losses) or r.exit_code != 0):
        j = r.judged
        if j:
            st.markdown(f"Judged@{j['k']}: **{j['mean']:.3f}** (floor {j['floor']:g}) — {j['status']}")
            if j.get("to_judge"):
                st.caption("Judge next")
                st.dataframe(pd.DataFrame(j["to_judge"]).head(50), hide_index=True)
        if r.losses:
            st.caption("Queries that lost most (and the relevant documents the candidate dropped)")
            st.dataframe(pd.DataFrame([{
                "query_id": x["query_id"], "baseline": x["baseline"], "candidate": x["candidate"], "diff": x["diff"],
                "dropped": "; ".join(f"{d['doc_id']} (found by {', '.join(d['baseline_lanes']) or 'the baseline'}"
                                     + (f"; missing lanes: {', '.join(d['lanes_missing_in_candidate'])}"
                                        if d['lanes_missing_in_candidate'] else "") + ")" for d in x["dropped"])}
                for x in r.losses]), hide_index=True)
        for w in r.warnings:
            st.warning(w)
