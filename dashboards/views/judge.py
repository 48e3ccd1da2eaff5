"""Judge: a rater grades one (query, document) pair at a time, blind, from their own shuffled queue.

Sign-in with a rater token only. Shown: the query (text, type, language), the document's
canonical address and its texts (original, transliteration, translations) with the query's
words marked; never a config, lane, rank, score or why the pair was pooled. Grades 0 / 1 / 2
and "cannot judge" with the keys 0, 1, 2, X, and U to undo; an optional note; a progress bar.
Every write goes through :class:`~workbench.judging.store.JudgmentStore` (``judge`` with the
hash of the document shown, ``undo_last``), after this run's token check.
"""

import html

import pandas as pd
import streamlit as st

from workbench.dashboard import judging, ui
from workbench.errors import WorkbenchError

st.title("Judge")
store = ui.judge_store_or_stop()
try:
    rater, signed_out = ui.session_rater()
except WorkbenchError as exc:
    ui.stop_with_error(exc)
if rater is None:
    ui.rater_sign_in_form(signed_out)
    st.stop()

ACTION, FLASH = "_judge_action", "_judge_flash"


def _queue(action: tuple) -> None:
    """Button callback: remember the action; it runs below, after this run's token check (a callback
    runs before the app's checks, so it must not write)."""
    st.session_state[ACTION] = action


def _datasets() -> list[str]:
    try:
        return store.datasets()
    except WorkbenchError as exc:
        ui.stop_with_error(exc)


names = _datasets()
scope = st.sidebar.selectbox("Dataset", ["all", *names], key="judge_dataset",
                             help="Judge the pairs of one dataset only, or of every dataset (your queue's order).")
dataset = None if scope == "all" else scope
derive = st.sidebar.checkbox("Cyrillic transliteration of Latin-script Pali", value=False, key="judge_cyr",
                             help="Derived with Aksharamukha's Russian scheme where a document has no stored one.")

action = st.session_state.pop(ACTION, None)
try:
    if action is not None and action[0] == "judge":
        _kind, assignment_id, grade, doc_hash, note_key, address = action
        store.judge(rater, assignment_id, grade, note=st.session_state.get(note_key) or None, doc_hash=doc_hash,
                    cannot_judge=grade is None)
        st.session_state.pop(note_key, None)
        st.session_state[FLASH] = ("success", f"Saved {address}: {judging.grade_text(grade)}. Press U to undo.")
    elif action is not None and action[0] == "undo":
        undone = store.undo_last(rater, dataset)
        st.session_state[FLASH] = (("success", f"Undone: {undone.query_id} / {undone.doc_id} is yours to judge again.")
                                   if undone else ("info", "Nothing to undo."))
except WorkbenchError as exc:  # a stale page submitting twice, a slot that is not this rater's: nothing written
    st.session_state[FLASH] = ("error", str(exc))

flash = st.session_state.pop(FLASH, None)
if flash:
    getattr(st, flash[0])(flash[1])

try:
    assignment = store.next_assignment(rater, dataset)
    done, total = store.progress(rater, dataset)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
fraction, label = judging.progress_text(done, total)
st.progress(fraction, text=label)


def _undo_button(col) -> None:
    col.button("Undo last", key=judging.UNDO_KEY, shortcut=judging.UNDO_SHORTCUT, on_click=_queue,
               args=(("undo",),), help="Take back your last judgment and show that pair again (key U).")


def _my_judgments() -> None:
    if not st.toggle("Show my judgments", key="judge_mine", help="Only yours: nobody's grades but your own."):
        return
    mine = store.my_judgments(rater, dataset)
    if not mine:
        st.caption("You have not judged anything yet.")
        return
    st.dataframe(pd.DataFrame([{"dataset": m["dataset"], "query_id": m["query_id"], "doc_id": m["doc_id"],
                                "grade": judging.grade_text(m["grade"], m["cannot_judge"]), "note": m["note"] or "",
                                "when": judging.when(m["created_at"])} for m in mine]), hide_index=True)


if assignment is None:
    st.success("Your queue is empty: every pair pooled for you is judged. Thank you! New pairs appear here when the "
               "engineers pool more (reload the page).")
    _undo_button(st)
    _my_judgments()
    st.stop()

try:
    ds = ui.dataset_files(str(ui.home()), assignment.dataset)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
view = judging.pair_view(assignment.dataset, assignment.query_id, assignment.doc_id, ds.queries, ds.documents,
                         derive_cyrillic=derive)

st.caption(f"Query · {view.query_type or 'type unknown'} · language {view.language or '?'} · dataset {view.dataset}")
st.html('<div class="wb-judge-query" style="font-size: 1.45rem; font-weight: 600; line-height: 1.4">'
        f'{html.escape(view.query_text) or "(this query is not in the current build)"}</div>')
st.markdown(f"**Document** `{view.address}`")
if view.missing:
    st.warning(f"{view.doc_id} is not in the current build of {view.dataset}; only “cannot judge” is possible.")

note_key = f"judge_note_{assignment.assignment_id}"
st.text_area("Note (optional)", key=note_key, max_chars=2000, height=68,  # before the buttons: Tab goes to them
             placeholder="Why this grade, a parallel passage, a doubt… then Tab (or click outside) and press a key")
cols = st.columns(len(judging.GRADE_BUTTONS) + 1)
for col, (grade, text, key_, widget) in zip(cols, judging.GRADE_BUTTONS):
    col.button(text, key=widget, shortcut=key_, on_click=_queue, width="stretch",
               type="primary" if grade is not None else "secondary", disabled=view.missing and grade is not None,
               args=(("judge", assignment.assignment_id, grade, view.doc_hash, note_key, view.address),))
_undo_button(cols[-1])
st.caption("Keys: **0** not relevant · **1** relevant · **2** highly relevant · **X** cannot judge · **U** undo. "
           f"{view.marks} word(s) of the query marked in the texts.")
for text_label, block in view.blocks:
    st.markdown(f"**{text_label}**")
    st.html(judging.text_html(block))
_my_judgments()
