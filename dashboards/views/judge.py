"""Judge: a rater grades one (query, document) pair at a time, blind, from their own shuffled queue.

Sign-in with a rater token only; the judging session then survives a reload (``?s=``:
:func:`dashboards.ui.session_rater`). Shown: the query (text, type, language), the
document's canonical address and its texts (original, transliterations named by scheme,
translations named by translator, word meanings) with the query's words marked; never a
config, lane, rank, score or why the pair was pooled. Grades 0 / 1 / 2 and "cannot judge"
with the keys 0, 1, 2, X (either case, wherever the focus is but a text field:
:func:`dashboards.ui.keyboard_shortcuts`), and U to undo; an optional note; a
progress bar.

Layout (#28, "the scholar's path"): the line saying what was saved and the progress bar on top;
then the pair on the left (query, address, texts) and, beside it and in view while the texts
scroll, the grade buttons, the keys, the note *below* the buttons, and the guideline of the
query's type (:func:`dashboards.ui.cached_guideline_html`: what 2 / 1 / 0 / cannot judge mean).
Each new pair opens scrolled to the top (:func:`dashboards.ui.scroll_to_top`); the
saved line stays until the next action, so the run a note sends draws nothing new above the pair;
Tab or Esc out of the note moves nothing; and a mouse click on a grade counts only when the
pointer was moved onto it (:func:`dashboards.ui.keyboard_shortcuts`): a click that the
page moved a button under never grades.

A grade button's widget key and the action it queues carry the assignment of the pair on
screen (:func:`workbench.dashboard.judging.grade_key`), and the page writes only when that is
the assignment the rater holds now and it has been on screen for
:data:`~workbench.dashboard.judging.MIN_SEEN_S` (from the end of the run that drew it): a quick
second key press, meant for the pair just judged, never grades the next one; and a second press of the
grade just saved says "already saved as 0 · not relevant (a second press was ignored)", never "Not saved"
(:func:`~workbench.dashboard.judging.press_refusal` decides). Every write goes
through :class:`~workbench.judging.store.JudgmentStore` (``judge`` with the hash of the document
shown, ``undo_last``), after this run's session check; the store also refuses a slot that is
not open.
"""

import time

import pandas as pd
import streamlit as st

from dashboards import ui
from workbench.dashboard import judging
from workbench.errors import WorkbenchError
from workbench.judging import pooling

st.title("Judge")
store, rater, signed_out = ui.store_and_rater()
if rater is None:
    ui.rater_sign_in_form(signed_out)
    st.stop()

#: Session keys: the queued action, the message for the next run, and (assignment id, when the run that
#: drew it ended) of the pair on screen.
ACTION, FLASH, SHOWN = "_judge_action", "_judge_flash", "_judge_shown"
#: The keys, on the page beside the grade buttons.
KEYS_HELP = ("Keys: **0** not relevant · **1** relevant · **2** highly relevant · **X** cannot judge · **U** undo "
             "(either case; anywhere but in the note: Tab or Esc leaves it). With the mouse: move onto a grade, then "
             "click.")
#: The column beside the pair stays in view while the texts scroll (wide windows; narrow ones stack the columns),
#: and scrolls by itself when it is taller than the window, so the guideline at its foot can always be read; the
#: grade buttons stay at its top meanwhile (#41: the mouse wheel over them scrolled them out of the window), drawn
#: over what scrolls under them in the page's own background colour (each element around them takes it from the
#: app's, whatever the theme).
SIDE_CSS = ("<style>[data-testid=\"stColumn\"]:has(.st-key-judge_side) { position: sticky; top: 3.75rem; "
            "align-self: flex-start; max-height: calc(100vh - 4.5rem); overflow-y: auto; } "
            "div:has(> .st-key-judge_grades) { position: sticky; top: 0; z-index: 2; padding-bottom: 0.5rem; } "
            "[data-testid=\"stApp\"] :has(.st-key-judge_grades) { background-color: inherit; }</style>")
st.html(judging.page_css())


def _queue(action: dict) -> None:
    """Button callback: remember the action; it runs below, after this run's session check (a callback
    runs before the app's checks, so it must not write)."""
    st.session_state[ACTION] = action


def _datasets() -> list[str]:
    try:
        return store.datasets()
    except WorkbenchError as exc:
        ui.stop_with_error(exc)


def _files(name: str):
    try:
        return ui.cached_dataset_files(str(ui.home()), name)
    except WorkbenchError as exc:
        ui.stop_with_error(exc)


def _pair_words(name: str, query_id: str, doc_id: str) -> str:
    ds = _files(name)
    return judging.pair_words(name, query_id, doc_id, ds.queries, ds.documents)


names = _datasets()
scope = st.sidebar.selectbox("Dataset", ["all", *names], key="judge_dataset",
                             help="Judge the pairs of one dataset only, or of every dataset (your queue's order).")
dataset = None if scope == "all" else scope

action = st.session_state.pop(ACTION, None)
try:
    if action is not None and action["kind"] == "judge":
        held = store.next_assignment(rater, dataset)  # what this rater holds now (the pair the page shows)
        aid = action["assignment_id"]
        refused = judging.press_refusal(store, rater, action, held, st.session_state.get(SHOWN), time.monotonic())
        if refused is not None:  # a second press of a saved grade, a pair no longer open, or one not yet read
            st.session_state[FLASH] = refused
        else:
            grade, note_key = action["grade"], action["note_key"]
            try:
                store.judge(rater, aid, grade, note=st.session_state.get(note_key) or None,
                            doc_hash=action["doc_hash"], cannot_judge=grade is None)
            except WorkbenchError:  # judged meanwhile from another tab: the same grade is no loss
                again = judging.press_refusal(store, rater, action, None, None, time.monotonic())
                if again is None or again[0] != "success":
                    raise
                st.session_state[FLASH] = again
            else:
                st.session_state.pop(note_key, None)
                st.session_state[FLASH] = ("success",
                                           f"Saved {action['address']}: {judging.grade_text(grade)}. Press U to undo.")
    elif action is not None and action["kind"] == "undo":
        undone = store.undo_last(rater, dataset)
        st.session_state[FLASH] = (
            ("success", f"Undone: your judgment of {_pair_words(undone.dataset, undone.query_id, undone.doc_id)} is "
                        "taken back; it is yours to judge again, below.")
            if undone else ("info", "Nothing to undo."))
except WorkbenchError as exc:  # a slot that is not open or not this rater's (the store refuses it): nothing written
    st.session_state[FLASH] = ("error", str(exc))

# The last action's line stays until the next action: a note sent, a toggle, a reload draw the page again
# with it, so nothing above the pair appears or vanishes under the reader's pointer (#28: it was taken away
# on the run that a Tab out of the note causes, and the page jumped 72 px).
flash = st.session_state.get(FLASH)
if flash:
    getattr(st, flash[0])(flash[1])

try:
    assignment = store.next_assignment(rater, dataset)
    done, total = store.progress(rater, dataset)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
fraction, label = judging.progress_text(done, total)
st.progress(fraction, text=label)


@st.cache_data(ttl=60, show_spinner=False, max_entries=64)
def _pool_quality(name: str, _store) -> str:
    """How much of ``name``'s pool was noise (graded 0), read at most once a minute: never per key press."""
    return pooling.store_pool_quality(_store, name, ui.doc_hashes(str(ui.home()), name)).line()


for name in ([dataset] if dataset else names):  # the pool as a whole; no pair, config or grade of a pair is named
    try:
        st.sidebar.caption(f"{name}: {_pool_quality(name, store)}")
    except WorkbenchError:
        pass  # a dataset the home cannot read: the page says so where it matters


def _undo_button(col) -> None:
    col.button("Undo last", key=judging.UNDO_KEY, shortcut=judging.UNDO_SHORTCUT, on_click=_queue,
               args=({"kind": "undo"},), help="Take back your last judgment and show that pair again (key U).")


def _my_judgments() -> None:
    if not st.toggle("Show my judgments", key="judge_mine", help="Only yours: nobody's grades but your own."):
        return
    try:
        mine = store.my_judgments(rater, dataset)
    except WorkbenchError as exc:
        ui.stop_with_error(exc)
    if not mine:
        st.caption("You have not judged anything yet.")
        return
    several = len({m["dataset"] for m in mine}) > 1
    rows = []
    for m in mine:
        ds = _files(m["dataset"])
        address, text = judging.describe_pair(m["dataset"], m["query_id"], m["doc_id"], ds.queries, ds.documents)
        rows.append({**({"dataset": m["dataset"]} if several else {}), "document": address, "query": text,
                     "grade": judging.grade_text(m["grade"], m["cannot_judge"]), "note": m["note"] or "",
                     "when": judging.when(m["created_at"])})
    st.dataframe(pd.DataFrame(rows), hide_index=True)


if assignment is None:
    st.session_state.pop(SHOWN, None)
    st.success("Your queue is empty: every pair pooled for you is judged. Thank you! New pairs appear here when the "
               "engineers pool more: press “Check for new pairs” (you stay signed in).")
    cols = st.columns([2, 1, 5])
    cols[0].button("Check for new pairs", key="judge_refresh", help="Look at the store again.")
    _undo_button(cols[1])
    ui.keyboard_shortcuts()
    _my_judgments()
    st.stop()

ds = _files(assignment.dataset)
derive = False
if judging.is_pali(ds.documents):  # a derived Cyrillic transliteration only means something for Pali
    derive = st.sidebar.checkbox("Cyrillic transliteration of Latin-script Pali", value=False, key="judge_cyr",
                                 help="Derived with Aksharamukha's Russian scheme where a document has no stored one.")
view = judging.pair_view(assignment.dataset, assignment.query_id, assignment.doc_id, ds.queries, ds.documents,
                         derive_cyrillic=derive)
words = judging.pair_words(assignment.dataset, assignment.query_id, assignment.doc_id, ds.queries, ds.documents)

aid = assignment.assignment_id
ui.scroll_to_top(aid)  # a new pair opens at the top: its query and the "Saved" line above it in view
note_key = f"judge_note_{aid}"
st.html(SIDE_CSS)
left, right = st.columns([3, 2], gap="large")
with left:  # the pair: the query, the document's address, its texts
    st.caption(view.caption())
    st.html(judging.query_html(view))
    st.markdown(f"**Document** `{view.address}`")
    if view.missing:
        st.warning(f"{view.doc_id} is not in the current build of {view.dataset}; only “cannot judge” is possible.")
    if damaged := judging.damage_html(view.dataset, view.doc_id, ui.home()):  # e.g. a translation that lost "qu"
        st.html(damaged)
    for heading, entries in view.sections:
        st.markdown(f"**{heading}**")
        st.html(judging.section_html(entries))
    st.caption(f"{view.marks} word(s) of the query marked in the texts.")
with right, st.container(key="judge_side"):  # beside it, in view while the texts scroll: grades, note, guideline
    with st.container(key="judge_grades"):  # Tab out of the note comes here, without moving the page
        # one under another, each the column's width: side by side, "cannot judge" and "Undo last" were cut to
        # "c…" and "U…" in a window 820 px wide (#41)
        for grade, text, key_, stem in judging.GRADE_BUTTONS:
            st.button(text, key=judging.grade_key(stem, aid), shortcut=key_, on_click=_queue, width="stretch",
                      type="primary" if grade is not None else "secondary", disabled=view.missing and grade is not None,
                      args=({"kind": "judge", "assignment_id": aid, "grade": grade, "doc_hash": view.doc_hash,
                             "note_key": note_key, "address": view.address, "pair": words},))
        _undo_button(st)
    st.caption(KEYS_HELP)
    # below the grades: leaving it (Tab, Esc) moves nothing, and nothing that grades lies under it
    st.text_area("Note (optional)", key=note_key, max_chars=2000, height=68,
                 placeholder="Why this grade, a parallel passage, a doubt… then Tab (or Esc) and press a key")
    guide = ui.cached_guideline_html(assignment.dataset, view.query_type)
    if guide:
        st.html(guide)
ui.keyboard_shortcuts()
_my_judgments()
held = st.session_state.get(SHOWN)
if held is None or held[0] != aid:  # the pair is on screen from now: a grade for it is taken from MIN_SEEN_S on
    st.session_state[SHOWN] = (aid, time.monotonic())
