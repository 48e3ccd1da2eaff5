"""Query drill-down: the query and its qrels, two configs' ranked lists side by side with each
document's texts, judged marks, and the lanes that found each document (rank and score)."""

import streamlit as st

from dashboards import ui
from workbench.dashboard import judging
from workbench.errors import WorkbenchError
from workbench.results import store, views

st.title("Query drill-down")
uri, runs = ui.runs_or_stop()

params = st.query_params  # deep links: ?dataset=gita&a=seeds/aicharya-rrf60&b=…&q=gita-ref-0001
linked = {}
for state, name in (("dataset", "dataset"), ("baseline", "a"), ("candidate", "b"), ("query_id", "q")):
    if name in params and not st.session_state.get(f"_qp_{name}"):
        st.session_state[state] = linked[name] = params[name]
        st.session_state[f"_qp_{name}"] = True


def _linked(name: str, value, known) -> None:
    if name in linked and linked[name] != value:
        st.warning(f"The link names {name} = {linked[name]!r}, which is not here (known: "
                   f"{', '.join(map(str, list(known)[:8]))}{'…' if len(known) > 8 else ''}); showing {value!r}.")

dataset = ui.pick("Dataset", sorted(runs["dataset"].unique()), "dataset", key="q_dataset", default="gita")
_linked("dataset", dataset, sorted(runs["dataset"].unique()))
choices = ui.run_choices(runs, dataset)
labels = list(choices.index)
baseline = ui.pick("Config A", labels, "baseline", key="q_baseline", default=labels[0])
candidate = ui.pick("Config B", labels, "candidate", key="q_candidate",
                    default=labels[1] if len(labels) > 1 else labels[0])
_linked("a", baseline, labels)
_linked("b", candidate, labels)
k = st.sidebar.slider("Documents per list", 5, 100, 10, key="q_k")
derive = st.sidebar.checkbox("Cyrillic transliteration of Latin-script Pali", value=False, key="q_cyr",
                             help="Derived with Aksharamukha's Russian scheme where a document has no stored "
                                  "transliteration.")
try:
    ds = ui.cached_dataset_files(str(ui.home()), dataset)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
rows = {lab: choices.loc[lab] for lab in dict.fromkeys([baseline, candidate])}
for lab, row in rows.items():
    if row["hash_queries"] and ds.hashes.get("queries.tsv") and row["hash_queries"] != ds.hashes["queries.tsv"]:
        st.warning(f"{lab} was evaluated on another build of {dataset}'s queries than the one in this home; "
                   "texts and qrels shown are the current build's.")

try:
    pq = {lab: ui.cached_per_query(r["artifact_uri"], r["run_id"]).set_index("query_id") for lab, r in rows.items()}
    fused = {lab: ui.cached_fused_run(r["artifact_uri"], r["run_id"]) for lab, r in rows.items()}
except WorkbenchError as exc:
    ui.stop_with_error(exc)

first = pq[baseline]
measures = views.measures_of(first.reset_index())
with st.sidebar:
    types = st.multiselect("Query types", sorted(first["query_type"].unique()), key="q_types")
    only_diff = st.checkbox("Only queries where A and B differ on", value=False, key="q_only_diff")
    diff_measure = st.selectbox("measure", measures, index=measures.index("R@10") if "R@10" in measures else 0,
                                key="q_diff_measure", label_visibility="collapsed")
    text_filter = st.text_input("Query text contains", key="q_text")
ids = list(first.index)
if types:
    ids = [q for q in ids if first.at[q, "query_type"] in types]
if only_diff and candidate in pq:
    other = pq[candidate]
    ids = [q for q in ids if q in other.index and abs(first.at[q, diff_measure] - other.at[q, diff_measure]) > 1e-12]
if text_filter:
    needle = text_filter.casefold()
    ids = [q for q in ids if q in ds.queries.index and needle in ds.queries.at[q, "text"].casefold()]
if not ids:
    st.info("No query matches the filters in the sidebar.")
    st.stop()


def _fmt(q: str) -> str:
    text = ds.queries.at[q, "text"] if q in ds.queries.index else "(not in this build)"
    return f"{q} — {text[:80]}"


query_id = ui.pick(f"Query ({len(ids)})", ids, "query_id", key="q_query", fmt=_fmt, sidebar=False)
_linked("q", query_id, ids)
st.query_params.update({"dataset": dataset, "a": baseline, "b": candidate, "q": query_id})

meta = ds.queries.loc[query_id] if query_id in ds.queries.index else None
if meta is not None:
    st.markdown(f"### “{meta['text']}”")
    st.caption(f"`{query_id}` · type **{meta['query_type']}** · language {meta['language']} · split {meta['split']} "
               f"· group `{meta['group']}`")
scores = {lab: {m: float(t.at[query_id, m]) for m in measures if query_id in t.index} for lab, t in pq.items()}
st.dataframe([{"config": lab, **vals} for lab, vals in scores.items()], hide_index=True)

qrels = ds.qrels.get(query_id, {})
with st.expander(f"Qrels: {len(qrels)} judged documents", expanded=len(qrels) <= 10):
    st.dataframe(views.qrels_table(qrels, fused, query_id, ds.documents), hide_index=True)

cols = st.columns(len(rows))
shown: dict[str, list[str]] = {}  # each config's documents on the page, for the judging pool
for col, (lab, row) in zip(cols, rows.items()):
    with col:
        cfg_lanes = [x for x in str(row["lanes"]).split(",") if x]
        hits = ui.lane_hits_for(ui.parent_uri(row), dataset, query_id)
        found = views.lanes_for(hits, query_id, cfg_lanes)
        table = views.ranked_list(fused[lab], query_id, qrels, found, cfg_lanes, ds.documents, k=k)
        shown[lab] = list(table["doc_id"])
        st.subheader(lab)
        st.caption(f"lanes: {', '.join(cfg_lanes) or '?'}" + ("" if hits is not None else
                   " — lane ranks were not logged by this eval (re-run `workbench eval` to log them)"))
        for lane in cfg_lanes:  # a live lane: what the system answered (or why it did not), for debugging
            live = store.live_answers(ui.parent_uri(row), dataset, lane)
            if live is None:
                continue
            failed = live.get("failures", {}).get(query_id)
            with st.expander(f"{lane}: the live system's raw answer" + (f" — failed ({failed[0]})" if failed else "")):
                if failed:
                    st.error(failed[1])
                raw = live.get("raw", {}).get(query_id)
                st.code(raw if raw else "(no answer kept for this query)", language="json")
        if table.empty:
            st.info(f"{lab} returned nothing for this query.")
        st.dataframe(table[["rank", "address", "judged", "lanes", "score", "doc_id"]], hide_index=True, column_config={
            "score": st.column_config.NumberColumn(format="%.6f", help="fused score (6 decimals, so ties show)"),
            "judged": st.column_config.TextColumn(help="qrels grade (2, 1, 0) or unjudged"),
            "lanes": st.column_config.TextColumn(width="large", help="each lane of the config that retrieved it: "
                                                                     "#rank (raw lane score)")})
        for r in table.itertuples():
            mark = {"2": ":green-badge[2]", "1": ":orange-badge[1]", "0": ":gray-badge[0]"}.get(r.judged,
                                                                                            ":violet-badge[unjudged]")
            with st.expander(f"{r.rank}. {r.address} {mark}"):
                doc = ds.documents.get(r.doc_id)
                if doc is None:
                    st.write("This document is not in the current build of the dataset.")
                    continue
                texts = views.doc_texts(doc, derive_cyrillic=derive)
                for part in ("original", "transliteration", "translation", "other"):
                    if texts[part]:
                        st.markdown(f"**{part}**")
                        st.text(texts[part][:4000])
                if r.lanes:
                    st.caption(f"found by {r.lanes}")

unjudged = judging.unjudged_docs(shown.values(), qrels)
with st.container(border=True):
    st.markdown(f"**Human judging** — {len(unjudged)} of the documents listed above have no label for this query. "
                "Sending them puts each (query, document) pair in the judging pool (reason *sent*; pairs already "
                "pooled or judged are skipped); raters then see them, blind, on the Judge page.")
    c1, c2, c3 = st.columns([1, 1, 1], vertical_alignment="bottom")
    per_pair = c1.number_input("Raters per pair", min_value=1, max_value=10, value=2, key="q_pool_raters")
    send = c2.button(f"Send {len(unjudged)} unjudged to the judging pool", key="q_send_pool", disabled=not unjudged,
                     icon=":material/send:")
    if c3.button("Open the Judge page", key="q_open_judge", icon=":material/rate_review:"):
        st.switch_page("views/judge.py")
    if send:
        try:
            pool_id, added = judging.send_to_pool(ui.judge_store(create=True), dataset, query_id, unjudged,
                                                  raters_per_pair=int(per_pair),
                                                  params={"configs": list(shown), "k": k})
        except WorkbenchError as exc:
            st.error(str(exc))
        else:
            if pool_id is None:
                st.info("Every one of these pairs is already in a judging pool or judged; nothing was added.")
            else:
                st.success(f"Pool {pool_id}: {added} pair(s) of {query_id} sent, {int(per_pair)} rater(s) each "
                           f"({len(unjudged) - added} already pooled or judged).")
