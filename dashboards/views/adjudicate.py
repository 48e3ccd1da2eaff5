"""Adjudicate (adjudicators only): the pairs whose raters disagree, with every rater's grade and note
and the document, and the final grade the adjudicator records (``JudgmentStore.adjudicate``).

The queue is :func:`workbench.judging.agreement.adjudication_queue` (grades at least the
dataset's ``adjudicate_at`` apart, not adjudicated yet or judged again since); it checks the
rater against the store itself, so a plain rater's or revoked token reads nothing.
"""

import html

import pandas as pd
import streamlit as st

from workbench.dashboard import judging, ui
from workbench.errors import WorkbenchError
from workbench.judging import agreement

st.title("Adjudicate")
store = ui.judge_store_or_stop()
try:
    rater, signed_out = ui.session_rater()
except WorkbenchError as exc:
    ui.stop_with_error(exc)
if rater is None:
    st.info(signed_out or "Sign in on the Judge page with an adjudicator's rater token to see the adjudication queue.")
    st.stop()
if not rater.is_adjudicator:
    st.error("Only adjudicators see the adjudication queue; your token is a rater's. An adjudicator's token is made "
             "with `workbench judge rater add NAME --adjudicator`.")
    st.stop()

ACTION, FLASH = "_adj_action", "_adj_flash"


def _queue(action: tuple) -> None:
    """Button callback: remember the action; it runs below, after this run's token check."""
    st.session_state[ACTION] = action


try:
    names = store.datasets()
except WorkbenchError as exc:
    ui.stop_with_error(exc)
if not names:
    st.info("Nothing is pooled or judged yet.")
    st.stop()
dataset = ui.pick("Dataset", names, "judge_dataset_adj", key="adj_dataset")
try:
    ds = ui.dataset_files(str(ui.home()), dataset)
    hashes = ui.doc_hashes(str(ui.home()), dataset)
    queue = agreement.adjudication_queue(store, dataset, rater, doc_hashes=hashes)
except WorkbenchError as exc:
    ui.stop_with_error(exc)

action = st.session_state.pop(ACTION, None)
if action is not None:
    _kind, a_dataset, qid, did, grade, doc_hash, note_key = action
    if a_dataset != dataset or not any((q["query_id"], q["doc_id"]) == (qid, did) for q in queue):
        st.session_state[FLASH] = ("error", f"{qid} / {did} no longer waits for adjudication (another adjudicator "
                                            "decided it, or this page was stale); nothing was written.")
    else:
        try:
            store.adjudicate(rater, dataset, qid, did, grade, note=st.session_state.get(note_key) or None,
                             doc_hash=doc_hash)
            st.session_state.pop(note_key, None)
            st.session_state[FLASH] = ("success", f"Final grade of {qid} / {did}: {judging.grade_text(grade)}.")
            queue = agreement.adjudication_queue(store, dataset, rater, doc_hashes=hashes)
        except WorkbenchError as exc:
            st.session_state[FLASH] = ("error", str(exc))
flash = st.session_state.pop(FLASH, None)
if flash:
    getattr(st, flash[0])(flash[1])

try:
    at = store.adjudicate_at(dataset)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
if not queue:
    st.success(f"Nothing waits for adjudication on {dataset} (pairs whose grades differ by {at} or more come here).")
    st.stop()


def _grades(item: dict) -> str:
    return " · ".join(f"{j['rater']}: {judging.grade_text(j['grade'], j['cannot_judge'])}" for j in item["judgments"])


st.caption(f"{len(queue)} pair(s) of {dataset} wait: grades {at} or more apart "
           f"(`workbench judge settings -d {dataset} --adjudicate-at 1|2`). Largest disagreement first.")
table = pd.DataFrame([{"query_id": q["query_id"], "doc_id": q["doc_id"], "difference": q["difference"],
                       "grades": _grades(q), "reason": q["reason"]} for q in queue])
with st.expander(f"The queue ({len(queue)})", expanded=False):
    st.dataframe(table, hide_index=True)

labels = [f"{q['query_id']} / {q['doc_id']}" for q in queue]
chosen = st.selectbox("Pair", range(len(queue)), format_func=lambda i: labels[i], key=f"adj_item:{dataset}")
item = queue[chosen if chosen is not None and chosen < len(queue) else 0]
view = judging.pair_view(dataset, item["query_id"], item["doc_id"], ds.queries, ds.documents)

st.caption(f"Query · {view.query_type or 'type unknown'} · language {view.language or '?'}")
st.html('<div class="wb-adj-query" style="font-size: 1.35rem; font-weight: 600; line-height: 1.4">'
        f'{html.escape(view.query_text) or "(this query is not in the current build)"}</div>')
st.markdown(f"**Document** `{view.address}`")
st.dataframe(pd.DataFrame([{"rater": j["rater"], "grade": judging.grade_text(j["grade"], j["cannot_judge"]),
                            "note": j["note"] or "", "judged": judging.when(j["judged_at"])} for j in item["judgments"]]),
             hide_index=True)
prev = item.get("previous_adjudication")
if prev:
    st.info(f"Adjudicated before by {prev['adjudicator']}: {judging.grade_text(prev['grade'])}"
            + (f" — “{prev['note']}”" if prev.get("note") else "") + "; a rater judged it again since.")

note_key = f"adj_note:{dataset}:{item['query_id']}:{item['doc_id']}"
st.text_area("Note (optional)", key=note_key, max_chars=2000, height=68,  # before the buttons: Tab goes to them
             placeholder="Why this final grade… then Tab (or click outside) and press 0, 1 or 2")
cols = st.columns(3)
for col, (grade, text, key_, _widget) in zip(cols, judging.GRADE_BUTTONS[:3]):
    col.button(f"Final: {text}", key=f"adj_g{grade}", shortcut=key_, on_click=_queue, width="stretch", type="primary",
               disabled=view.missing,
               args=(("adjudicate", dataset, item["query_id"], item["doc_id"], grade, view.doc_hash, note_key),))
st.caption("Keys: **0**, **1**, **2** record the final grade of the pair shown.")
if view.missing:
    st.warning(f"{view.doc_id} is not in the current build of {dataset}; rebuild the dataset before adjudicating.")
for text_label, block in view.blocks:
    st.markdown(f"**{text_label}**")
    st.html(judging.text_html(block))
