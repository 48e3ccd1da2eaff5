"""Adjudicate (adjudicators only): the pairs whose raters disagree, with every rater's grade and note
and the document, and the final grade the adjudicator records (``JudgmentStore.adjudicate``);
then the adjudicator's own recent decisions, each of which can be changed (decided again: the
latest decision wins) or undone (``JudgmentStore.retract_adjudication`` appends a retraction,
and the pair returns to the queue while its grades still differ).

The queue is :func:`workbench.judging.agreement.adjudication_queue` (grades at least the
dataset's ``adjudicate_at`` apart, not adjudicated yet or judged again since); it checks the
rater against the store itself, so a plain rater's or revoked token reads nothing. Pairs are
named by their document's address and query text. As on the Judge page, a final-grade
button's key names the pair shown (:func:`workbench.dashboard.judging.adjudication_key`) and
a decision is taken only for a pair that waits (or is being changed) and has been on screen
for :data:`~workbench.dashboard.judging.MIN_SEEN_S`: a quick second key press never decides
the next pair.

An adjudicator is a rater too: the store gives them pairs to judge blind like any rater (a pair
another rater could not judge, a pool with a slot left), and those never come to this page. The
page says how many pairs wait in their own Judge queue, on this dataset and on others, with a
link to the Judge page (:func:`~workbench.dashboard.judging.own_queue_line`).
"""

import html
import time

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from dashboards import ui
from workbench.dashboard import judging
from workbench.errors import WorkbenchError
from workbench.judging import agreement

st.title("Adjudicate")
store, rater, signed_out = ui.store_and_rater()
if rater is None:
    st.info(signed_out or "Sign in on the Judge page with an adjudicator's rater token to see the adjudication queue.")
    st.stop()
if not rater.is_adjudicator:
    st.error("Only adjudicators see the adjudication queue; your token is a rater's. An adjudicator's token is made "
             "with `workbench judge rater add NAME --adjudicator`.")
    st.stop()

#: Session keys: the queued action, the message for the next run, (pair tag, when the run that drew it
#: ended) of the pair on screen, and the (dataset, query_id, doc_id) of a decision being changed.
ACTION, FLASH, SHOWN, REDECIDE = "_adj_action", "_adj_flash", "_adj_shown", "_adj_redecide"
#: Session key: the tag (:func:`~workbench.dashboard.judging.pair_tag`) of the pair the "Pair" box chose.
PICK = "_adj_pick"
#: How many of the adjudicator's latest decisions are listed.
RECENT = 10
st.html(judging.page_css())


def _queue(action: dict) -> None:
    """Button callback: remember the action; it runs below, after this run's session check."""
    st.session_state[ACTION] = action


def _redecide(pair: tuple[str, str, str] | None) -> None:
    """Button callback ("change", "cancel"): show one of the adjudicator's decided pairs to decide again
    (writes nothing)."""
    if pair is None:
        st.session_state.pop(REDECIDE, None)
    else:
        st.session_state[REDECIDE] = pair


dataset = ui.judged_dataset_or_stop(store, "Nothing is pooled or judged yet.", "judge_dataset_adj", key="adj_dataset")


def _read() -> tuple[list[dict], list[dict]]:
    """The queue, and this adjudicator's current decisions on the dataset, newest first."""
    try:
        queue = agreement.adjudication_queue(store, dataset, rater, doc_hashes=hashes)
        mine = [a for a in store.adjudications(dataset) if a["adjudicator"] == rater.name]
    except WorkbenchError as exc:
        ui.stop_with_error(exc)
    return queue, sorted(mine, key=lambda a: a["created_at"], reverse=True)


try:
    ds = ui.cached_dataset_files(str(ui.home()), dataset)
    hashes = ui.doc_hashes(str(ui.home()), dataset)
    at = store.adjudicate_at(dataset)
except WorkbenchError as exc:
    ui.stop_with_error(exc)
queue, mine = _read()


def _words(qid: str, did: str) -> str:
    return judging.pair_words(dataset, qid, did, ds.queries, ds.documents)


def _waits(qid: str, did: str) -> bool:
    return any((q["query_id"], q["doc_id"]) == (qid, did) for q in queue)


def _decision(qid: str, did: str) -> dict | None:
    return next((a for a in mine if (a["query_id"], a["doc_id"]) == (qid, did)), None)


redecide = st.session_state.get(REDECIDE)
if redecide is not None and (redecide[0] != dataset or _decision(redecide[1], redecide[2]) is None):
    redecide = None  # another dataset, or no longer this adjudicator's decision
    st.session_state.pop(REDECIDE, None)

action = st.session_state.pop(ACTION, None)
try:
    if action is not None and action["kind"] == "decide":
        qid, did, grade = action["query_id"], action["doc_id"], action["grade"]
        changing = redecide is not None and redecide == (action["dataset"], qid, did)
        shown = st.session_state.get(SHOWN)
        if (action["dataset"] == dataset and not changing and not _waits(qid, did)
                and (done := _decision(qid, did)) is not None and done["grade"] == grade):
            st.session_state[FLASH] = ("success", f"{action['pair']} is already decided as {judging.grade_text(grade)} "
                                                  "(a second press was ignored); nothing more was written.")
        elif action["dataset"] != dataset or not (_waits(qid, did) or changing):
            st.session_state[FLASH] = ("error", f"{action['pair']} no longer waits for adjudication (another "
                                                "adjudicator decided it, or this page was stale); nothing was written.")
        elif shown is None or shown[0] != action["tag"] or time.monotonic() - shown[1] < judging.MIN_SEEN_S:
            st.session_state[FLASH] = ("warning", f"Not saved: that key press reached {action['pair']} before you "
                                                  "could have read it (a quick second press?). Nothing was written; "
                                                  "read it, then press the key again.")
        else:
            before = _decision(qid, did)
            store.adjudicate(rater, dataset, qid, did, grade, note=st.session_state.get(action["note_key"]) or None,
                             doc_hash=action["doc_hash"])
            st.session_state.pop(action["note_key"], None)
            if changing:
                st.session_state.pop(REDECIDE, None)
                redecide = None
                st.session_state[FLASH] = ("success", f"Changed: the final grade of {action['pair']} is now "
                                                      f"{judging.grade_text(grade)} (was "
                                                      f"{judging.grade_text(before['grade'])}).")
            else:
                st.session_state[FLASH] = ("success", f"Final grade of {action['pair']}: {judging.grade_text(grade)}.")
            queue, mine = _read()
    elif action is not None and action["kind"] == "retract":
        qid, did = action["query_id"], action["doc_id"]
        if action["dataset"] != dataset or _decision(qid, did) is None:
            st.session_state[FLASH] = ("error", f"{action['pair']} is not among your current decisions (undone "
                                                "already, or decided again by another adjudicator); nothing was "
                                                "written.")
        else:
            store.retract_adjudication(rater, dataset, qid, did)
            if redecide == (dataset, qid, did):
                st.session_state.pop(REDECIDE, None)
                redecide = None
            queue, mine = _read()
            back = ("the pair is back in the queue." if _waits(qid, did) else
                    "it does not wait for adjudication now (only " + agreement.adjudication_rule(at) + " do).")
            st.session_state[FLASH] = ("success", f"Undone: your final grade of {action['pair']} is withdrawn; {back}")
except WorkbenchError as exc:
    st.session_state[FLASH] = ("error", str(exc))
flash = st.session_state.get(FLASH)  # kept until the next action: a re-draw (a note's Tab) must not move the page
if flash:
    getattr(st, flash[0])(flash[1])


def _own_queue() -> None:
    """How many pairs wait in this adjudicator's own Judge queue, and the way to the Judge page (nothing when none)."""
    try:
        done, total = store.progress(rater, dataset)
        done_all, total_all = store.progress(rater)
    except WorkbenchError as exc:
        ui.stop_with_error(exc)
    line = judging.own_queue_line(total - done, (total_all - done_all) - (total - done), dataset)
    if not line:
        return
    st.info(line)
    try:
        st.page_link("views/judge.py", label="Open the Judge page", icon=":material/rate_review:")
    except StreamlitPageNotFoundError:
        pass  # this page run on its own (no navigation): the line names the page


_own_queue()


def _grades(judgments: list[dict]) -> str:
    return " · ".join(f"{j['rater']}: {judging.grade_text(j['grade'], j['cannot_judge'])}" for j in judgments)


def _changing_item(qid: str, did: str) -> dict:
    """A decided pair shown to decide again: every rater's current judgment, as the queue shows its items."""
    try:
        rows = [r for r in store.current(dataset) if (r["query_id"], r["doc_id"]) == (qid, did)]
    except WorkbenchError as exc:
        ui.stop_with_error(exc)
    return {"query_id": qid, "doc_id": did, "previous_adjudication": None,
            "judgments": [{"rater": r["rater"], "grade": None if r["cannot_judge"] else r["grade"],
                           "cannot_judge": bool(r["cannot_judge"]), "note": r["note"], "judged_at": r["created_at"]}
                          for r in rows]}


def _judgments_html(entry: dict) -> str:
    """The pair's judgments, one line each (rater, grade or "cannot judge", note, when), and the queue's
    reason the pair waits (e.g. "cannot judge, no other rater"), as escaped HTML."""
    rows = []
    for j in entry["judgments"]:
        note = (f' — <span class="wb-adj-note">“{html.escape(j["note"])}”</span>' if j.get("note") else "")
        grade = html.escape(judging.grade_text(j["grade"], j["cannot_judge"]))
        rows.append(f'<li><b>{html.escape(j["rater"])}</b>: {grade}{note}'
                    f' <span style="opacity: 0.7">· {html.escape(judging.when(j["judged_at"]))}</span></li>')
    reason = entry.get("reason")
    why = (f'<div style="opacity: 0.75">Waits because: {html.escape(reason)}</div>' if reason else "")
    return f'<div class="wb-adj-judgments"><ul style="margin: 0.2rem 0 0.4rem 0">{"".join(rows)}</ul>{why}</div>'


item = None
if redecide is not None:
    decided = _decision(redecide[1], redecide[2])
    st.info(f"Changing your decision on {_words(redecide[1], redecide[2])}: now "
            f"{judging.grade_text(decided['grade'])}. Press 0, 1 or 2 for the new final grade.")
    st.button("Cancel the change", key="adj_cancel", on_click=_redecide, args=(None,))
    item = _changing_item(redecide[1], redecide[2])
elif not queue:
    st.success(f"Nothing waits for adjudication on {dataset} ({agreement.adjudication_rule(at)} come here).")
else:
    st.caption(f"{len(queue)} pair(s) of {dataset} wait: {agreement.adjudication_rule(at)} "
               f"(`workbench judge settings -d {dataset} --adjudicate-at 1|2`). Largest disagreement first.")
    described = [judging.describe_pair(dataset, q["query_id"], q["doc_id"], ds.queries, ds.documents) for q in queue]
    table = pd.DataFrame([{"document": address, "query": text, "difference": q["difference"],
                           "grades": _grades(q["judgments"]), "reason": q["reason"]}
                          for q, (address, text) in zip(queue, described)])
    with st.expander(f"The queue ({len(queue)})", expanded=False):
        st.dataframe(table, hide_index=True)
    labels = [f"{address} — “{judging.shorten(text, 70)}” ({_grades(q['judgments'])})"
              for q, (address, text) in zip(queue, described)]
    # The box is keyed on the queue itself: when a decision (here or another adjudicator's) changes the queue,
    # a new box is drawn choosing the pair chosen before if it still waits, else the first, which is the pair
    # shown below. (A box keyed on the dataset alone kept the decided pair's name while the page showed the next.)
    tags = [judging.pair_tag(dataset, q["query_id"], q["doc_id"]) for q in queue]
    picked = st.session_state.get(PICK)
    chosen = st.selectbox("Pair", range(len(queue)), index=tags.index(picked) if picked in tags else 0,
                          format_func=lambda i: labels[i],
                          key=f"adj_item:{dataset}:{judging.pair_tag(dataset, '|'.join(tags), str(len(tags)))}")
    chosen = chosen if chosen is not None and chosen < len(queue) else 0
    st.session_state[PICK] = tags[chosen]
    item = queue[chosen]

if item is not None:
    qid, did = item["query_id"], item["doc_id"]
    tag = judging.pair_tag(dataset, qid, did)
    view = judging.pair_view(dataset, qid, did, ds.queries, ds.documents)
    ui.scroll_to_top(tag)  # each pair opens at the top: its query and the last decision's line in view
    st.caption(view.caption(with_dataset=False))
    st.html(judging.query_html(view, size="1.35rem"))
    st.markdown(f"**Document** `{view.address}`")
    # Every rater's judgment as text (not a data grid, which is drawn on a canvas): read, found and copied
    # like the rest of the page; then why the pair waits.
    st.html(_judgments_html(item))
    if guide := ui.cached_guideline_html(dataset, view.query_type):  # what 0 / 1 / 2 / cannot judge mean for this type
        st.html(guide)
    prev = item.get("previous_adjudication")
    if prev:
        st.info(f"Adjudicated before by {prev['adjudicator']}: {judging.grade_text(prev['grade'])}"
                + (f" — “{prev['note']}”" if prev.get("note") else "") + "; a rater judged it again since.")
    note_key = f"adj_note:{dataset}:{qid}:{did}"
    st.text_area("Note (optional)", key=note_key, max_chars=2000, height=68,  # before the buttons: Tab goes to them
                 placeholder="Why this final grade… then Tab (or click outside) and press 0, 1 or 2")
    cols = st.columns(3)
    words = _words(qid, did)
    for col, (grade, text, key_, _stem) in zip(cols, judging.GRADE_BUTTONS[:3]):
        col.button(f"Final: {text}", key=judging.adjudication_key(grade, dataset, qid, did), shortcut=key_,
                   on_click=_queue, width="stretch", type="primary", disabled=view.missing,
                   args=({"kind": "decide", "dataset": dataset, "query_id": qid, "doc_id": did, "grade": grade,
                          "doc_hash": view.doc_hash, "note_key": note_key, "tag": tag, "pair": words},))
    ui.keyboard_shortcuts()
    st.caption("Keys: **0**, **1**, **2** record the final grade of the pair shown (anywhere but in the note).")
    if view.missing:
        st.warning(f"{view.doc_id} is not in the current build of {dataset}; rebuild the dataset before adjudicating.")
    if damaged := judging.damage_html(dataset, did, ui.home()):  # e.g. a translation that lost "qu"
        st.html(damaged)
    for heading, entries in view.sections:
        st.markdown(f"**{heading}**")
        st.html(judging.section_html(entries))
    held = st.session_state.get(SHOWN)
    if held is None or held[0] != tag:  # on screen from now: a decision on it is taken from MIN_SEEN_S on
        st.session_state[SHOWN] = (tag, time.monotonic())
else:
    st.session_state.pop(SHOWN, None)

st.subheader("Your recent decisions")
if not mine:
    st.caption(f"You have not decided any pair of {dataset} yet.")
for a in mine[:RECENT]:
    pair = (dataset, a["query_id"], a["doc_id"])
    tag = judging.pair_tag(*pair)
    address, text = judging.describe_pair(dataset, a["query_id"], a["doc_id"], ds.queries, ds.documents, 90)
    row = st.columns([8, 1, 1], vertical_alignment="center")
    note = f" · note: {html.escape(judging.shorten(a['note'], 60))}" if a.get("note") else ""
    row[0].html(f"<b>{html.escape(address)}</b> — “{html.escape(text)}” → <b>{judging.grade_text(a['grade'])}</b> · "
                f"{judging.when(a['created_at'])}{note}")
    row[1].button("change", key=f"adj_change_{tag}", on_click=_redecide, args=(pair,),
                  help="Decide this pair again: your new final grade replaces this one.")
    row[2].button("undo", key=f"adj_undo_{tag}", on_click=_queue,
                  args=({"kind": "retract", "dataset": dataset, "query_id": a["query_id"], "doc_id": a["doc_id"],
                         "pair": _words(a["query_id"], a["doc_id"])},),
                  help="Withdraw this decision: the pair returns to the queue while its grades still differ.")
if len(mine) > RECENT:
    st.caption(f"… and {len(mine) - RECENT} earlier decision(s) of yours on {dataset}.")
