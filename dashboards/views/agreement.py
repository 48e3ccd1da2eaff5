"""Agreement (adjudicators and engineers, never a plain rater): Krippendorff's alpha (ordinal) overall,
per query type and per rater, Cohen's linear kappa per rater pair, with 95% bootstrap CIs, and the
pooled confusion table — :func:`workbench.judging.agreement.agreement` on the store's current
judgments (the numbers ``workbench judge agreement`` prints)."""

import hashlib

import pandas as pd
import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError
from workbench.judging import agreement, pooling

st.title("Agreement")
store, rater, signed_out = ui.store_and_rater()
if rater is not None and not rater.is_adjudicator:
    st.error("Agreement figures are for adjudicators and the engineers; a rater sees only their own judgments "
             "(Judge page).")
    st.stop()
if rater is None and ui.access()[0] not in ("open", "granted"):
    st.error("Agreement figures need an adjudicator's rater token or a dashboard access token; sign in first.")
    st.stop()

dataset = ui.judged_dataset_or_stop(store, "Nothing is pooled or judged yet: `workbench judge pool …`, then raters "
                                   "judge on the Judge page.", "judge_dataset_agr", key="agr_dataset")
try:
    ds = ui.cached_dataset_files(str(ui.home()), dataset)
    hashes = ui.doc_hashes(str(ui.home()), dataset)
    rows = store.current(dataset)
    adjudications = store.adjudications(dataset)
    at = store.adjudicate_at(dataset)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
if not rows:
    st.info(f"No judgments on {dataset} yet.")
    st.stop()

fingerprint = hashlib.sha256(repr(sorted((r["query_id"], r["doc_id"], r["rater"], r["grade"], r["cannot_judge"],
                                          r["doc_sha256"]) for r in rows)).encode()).hexdigest()


@st.cache_data(show_spinner="Bootstrapping the agreement figures…", max_entries=32)
def _report(dataset: str, fingerprint: str, signature: tuple) -> dict:
    return agreement.agreement(rows, query_types=dict(zip(ds.queries.index, ds.queries["query_type"])),
                               doc_hashes=hashes)


try:
    report = _report(dataset, fingerprint, tuple(sorted(ds.hashes.items())))
    waiting = agreement.disagreements(rows, adjudications, at, doc_hashes=hashes)
    quality = pooling.store_pool_quality(store, dataset, hashes)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
st.caption(f"{quality.line()}: the share of the pool that was noise (`workbench judge pool` keeps out pairs only "
           "systems that do not answer the query's language ranked, and pairs every system ranks low).")


def _est(e: dict | None) -> str:
    if not e or e.get("value") is None:
        return "n/a"
    ci = "" if e.get("low") is None else f" [{e['low']:.3f}, {e['high']:.3f}]"
    return f"{e['value']:.3f}{ci}"


c1, c2, c3, c4 = st.columns(4)
c1.metric("Krippendorff's alpha (ordinal)", _est(report["alpha"]).split(" [")[0],
          help="1 perfect agreement, 0 what chance gives, below 0 systematic disagreement")
c2.metric("Pairs with two or more grades", f"{report['pairable_units']:,d}", f"of {report['units']:,d} judged",
          delta_color="off", delta_arrow="off")
c3.metric("Raters", len(report["raters"]))
c4.metric("Waiting for adjudication", len(waiting), f"grades {at}+ apart", delta_color="off", delta_arrow="off")
b = report["bootstrap"]
st.caption(f"95% CIs: percentile bootstrap over (query, document) pairs, {b['resamples']:,d} resamples, seed "
           f"{b['seed']}. “Cannot judge” is missing data ({report['cannot_judge']:,d} left out)"
           + (f"; {report['stale']:,d} stale judgment(s) left out (the document changed since)." if report["stale"]
              else "."))
st.markdown(f"Alpha, all pairs: **{_est(report['alpha'])}** on {report['alpha']['units']:,d} pairs")

if report["by_type"]:
    st.subheader("Per query type (alpha)")
    st.dataframe(pd.DataFrame([{"query type": t, "alpha [95% CI]": _est(e), "pairs": e["units"]}
                               for t, e in report["by_type"].items()]), hide_index=True)
st.subheader("Per rater")
counts = agreement.grade_counts(rows)
st.dataframe(pd.DataFrame([{"rater": name, "grades": r["grades"], "alpha over their pairs": _est(r["alpha"]),
                            "mean linear kappa": _est(r["mean_kappa"]), "with": ", ".join(r["partners"]),
                            **{f"# {k}": v for k, v in counts.get(name, {}).items()}}
                           for name, r in report["by_rater"].items()]), hide_index=True)
if report["pairs"]:
    st.subheader("Per rater pair (Cohen's kappa, linearly weighted)")
    st.dataframe(pd.DataFrame([{"raters": f"{p['a']} / {p['b']}", "kappa [95% CI]": _est(p["kappa"]),
                                "pairs": p["kappa"]["units"], "exact agreement": p["exact_agreement"],
                                "unweighted kappa": p["kappa_unweighted"]} for p in report["pairs"]]),
                 hide_index=True, column_config={"exact agreement": st.column_config.NumberColumn(format="percent")})
    st.subheader("Confusion table, pooled over rater pairs")
    st.caption("Rows: the grade of each pair's first rater (by name); columns: the second's.")
    st.dataframe(pd.DataFrame(report["pooled_confusion"], index=[f"first {g}" for g in agreement.VALUES],
                              columns=[f"second {g}" for g in agreement.VALUES]))
    for p in report["pairs"]:
        with st.expander(f"Confusion table: {p['a']} (rows) / {p['b']} (columns)"):
            st.dataframe(pd.DataFrame(p["confusion"], index=[f"{p['a']} {g}" for g in agreement.VALUES],
                                      columns=[f"{p['b']} {g}" for g in agreement.VALUES]))
