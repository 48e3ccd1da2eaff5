"""Study: Optuna history, parameter importances, Pareto front, parallel coordinates, the chosen
trial with its dev/test report, and the production config to export."""

import json

import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError
from workbench.results import studies
from workbench.tuning.outputs import study_figures

st.title("Study")
home = ui.home()
found = ui.study_list(str(home))
if not found:
    st.info(f"No tuning study under `{home / 'studies'}` yet. Run the main job, `{ui.MAIN_JOB}` (its last step is "
            "`workbench tune experiments/tune-kb.toml`), or `workbench tune STUDY.toml`.")
    st.stop()
by_label = {s.label: s for s in found}
label = ui.pick("Study", list(by_label), "study", key="st_study")
outputs = by_label[label]
try:
    rep = studies.report(outputs)
except WorkbenchError as exc:
    ui.stop_with_error(exc)

st.caption(f"Folder `{outputs.folder}` · storage `{outputs.storage or '?'}`")
ev = rep.evaluation
train = ev.train
if train:
    c1, c2, c3 = st.columns(3)
    c1.metric(f"Chosen trial #{rep.chosen_trial}: train objective ({train.objective}, as the "
              "study scores it)", f"{train.chosen:.4f}", f"{train.chosen - train.baseline:+.4f} vs baseline",
              help="The study's objective on its tuning split: with query-type weights, the weighted mean of the "
                   "per-type means, not the mean over queries.")
    c2.metric("Baseline (as written), same objective", f"{train.baseline:.4f}")
    test_m = ev.test.measures.get(train.objective) if ev.test else None
    if test_m:
        c3.metric(f"Held-out test {train.objective} (mean over queries)", f"{test_m.chosen:.4f}",
                  f"{test_m.mean_diff:+.4f} (p = {test_m.p_value:.4f}, Holm-adjusted {test_m.p_adjusted:.4f})")
for note in rep.notes:
    st.warning(note)
left, right = st.columns([1, 2])
try:
    export = studies.export_text(outputs)
except WorkbenchError as exc:
    st.warning(str(exc))
    export = ""
with left:
    st.subheader(f"Chosen trial: #{rep.chosen_trial}")
    if export:
        st.caption("The config it ships as (export.json)")
        st.dataframe(studies.effective_config(json.loads(export)), hide_index=True)
    with st.expander("Raw trial parameters (Optuna's, including ones the config does not use)",
                     expanded=not export):
        st.dataframe([{"parameter": k, "value": studies.fmt_value(v)} for k, v in rep.chosen_params.items()],
                     hide_index=True)
with right:
    st.subheader("Dev and test: chosen vs baseline")
    table = studies.measures_table(rep)
    if table.empty:
        st.info("The report has no dev/test evaluation.")
    else:
        st.dataframe(table, hide_index=True, column_config={
            **{c: st.column_config.NumberColumn(format="%.4f") for c in ("chosen", "baseline", "delta", "p_value")},
            "p_adjusted": st.column_config.NumberColumn("p (Holm–Bonferroni)", format="%.4f")})
    for split in ("dev", "test"):
        part = ev.split(split)
        if part is not None and part.by_query_type:
            st.caption(f"{split}: {part.by_type_measure} by query_type")
            st.dataframe([{"query_type": t, **r.to_json()} for t, r in part.by_query_type.items()], hide_index=True)

if export:
    st.download_button("Export the chosen trial (production config JSON)", export,
                       file_name=f"{outputs.name}-trial{rep.chosen_trial}.json", mime="application/json",
                       type="primary", key="st_export")
    st.caption(f"The same file is `{outputs.folder / 'export.json'}`; `workbench export STUDY.toml -o FILE` writes it "
               "anew with its provenance checked against the stored study.")
    with st.expander("export.json"):
        st.json(json.loads(export))

url = studies.storage_url(outputs, home)
figs = {}
if url is None:
    st.info("This study ran in memory (or its storage URL holds a password), so only its saved plots and "
            "trials are shown.")
else:
    try:
        figs = study_figures(ui.optuna_study(url, outputs.name), "objective")
    except WorkbenchError as exc:
        st.warning(f"{exc} — showing the saved plots instead.")
if figs:
    names = {"history": "Optimisation history", "importances": "Parameter importances",
             "parallel": "Parallel coordinates", "pareto": "Pareto front (objective vs p95 latency)"}
    tabs = st.tabs([names[k] for k in figs])
    for tab, (key, fig) in zip(tabs, figs.items()):
        with tab:
            st.plotly_chart(fig, key=f"st_fig_{key}")
    if "pareto" not in figs:
        st.caption("Pareto front: this study has one objective (set `latency = true` in its [objective] for two).")
elif (outputs.folder / "plots.html").is_file():
    import streamlit.components.v1 as components

    components.html((outputs.folder / "plots.html").read_text(encoding="utf-8"), height=1800, scrolling=True)

if rep.sensitivity:
    with st.expander("Sensitivity: the objective at ±10% of each numeric parameter"):
        st.dataframe(rep.sensitivity, hide_index=True)
try:
    trials = studies.trials(outputs)
except WorkbenchError as exc:
    st.warning(str(exc))
    trials = None
if trials is not None and not trials.empty:
    with st.expander(f"All {len(trials)} trials"):
        st.dataframe(trials, hide_index=True)

shipped = studies.parity_reports(home, outputs.name)
st.subheader("Shipped to the engine: round-trip parity")
if not shipped:
    st.info("Not exported to an engine yet. `workbench export STUDY.toml --format postgres -o DIR --verify` writes "
            "one SQL statement and checks that it ranks every dev and test query as evaluated (or "
            "`--format opensearch`).")
for fmt, doc in shipped.items():
    k = doc.get("k")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(f"{fmt}: parity@{k}", f"{doc.get(f'parity@{k}', 0.0):.4f}",
              help="Share of dev and test queries whose top k from the exported artifact, run on the real engine, "
                   "is identical to the workbench's fused ranking, in order.")
    c2.metric("parity@10", f"{doc.get('parity@10', 0.0):.4f}")
    lat = doc.get("latency_ms") or {}
    c3.metric("exported call p50", f"{lat.get('p50', 0.0):.1f} ms")
    c4.metric("p95", f"{lat.get('p95', 0.0):.1f} ms")
    st.caption(f"{doc.get('source', '')} · {doc.get('queries', 0)} queries of {doc.get('dataset', '?')} "
               f"({', '.join(doc.get('splits') or [])})")
    diffs = doc.get("differences") or []
    if diffs:
        st.dataframe([{"query": d.get("query_id"), "rank": d.get("rank"), "workbench": d.get("workbench"),
                       "engine": d.get("engine"), "cause": d.get("cause")} for d in diffs], hide_index=True)
