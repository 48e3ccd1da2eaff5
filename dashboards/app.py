"""The workbench dashboard: ``workbench dashboard`` (or ``streamlit run dashboards/app.py --server.address 127.0.0.1``).

The engineer pages read only the MLflow store, the Optuna storage and the artifacts and
files the main job wrote under the workbench home; they never query a retrieval service:
overview, compare two configs, query drill-down, study, gate, online (the UBI log sets). The judging pages read and
write the judgment store (:mod:`workbench.judging.store`): Judge (a rater grades one pair at a
time), Adjudicate (adjudicators only) and Agreement (adjudicators and engineers).

Access (:mod:`workbench.dashboard.auth`): when the home has dashboard tokens, every page
shows only the sign-in form until a valid token is given (password field, or ``?token=``
in the URL once); without tokens the app shows its pages only when it listens on a
loopback address (a ``?token=`` link whose token is nobody's is still said to be so). A
rater token (``workbench judge rater add NAME``) makes the session a judging session: it
shows the Judge page (an adjudicator's also Adjudicate and Agreement) and nothing else until
the rater signs out; the session survives a reload (``?s=`` in the address, kept by the
server: :func:`dashboards.ui.session_rater`). After signing in a rater lands on
Judge, an adjudicator on Adjudicate (opening Judge would claim a pair for them). Rater
tokens also let the app serve beyond this machine, where then only raters get in until an
access token exists.

Blind however it is opened (#28): signing in marks the browser as a rater's with a cookie that
carries the judging session's id (:func:`dashboards.ui.judging_cookie`), so every other
tab of that browser — ``/``, an engineer page's address, a bookmark without ``?s=`` — opens the
same judging session, and once that session has ended, the rater sign-in alone: never an engineer
page, even on 127.0.0.1 without tokens. Signing out (or "Leave judging on this browser") removes
the mark. A browser that never signed in as a rater is not marked: on this machine without tokens
it sees the engineer pages, as before. A judging cookie of another port (a judging-only dashboard on
8502 marks the browser that judged there, and the browser sends that cookie to 8501 too) marks it
here as well: the rater sign-in alone ("Leave judging" removes that mark too). And
while a judging-only dashboard of the same home serves (:func:`workbench.dashboard.auth.judging_dashboards`),
the engineers' dashboard without an access token shows nothing but why and the fix: under another host
name (127.0.0.1 and localhost) the browser sends no cookie, so only a sign-in keeps a rater blind. A
cookie is the browser's for one host name, so for scholars who may open it under any name, serve
them ``workbench dashboard --judging-only`` (environment ``WORKBENCH_DASHBOARD_JUDGING_ONLY=1``): it
registers no engineer page at all, whatever the address, host or token; the engineers keep their own
``workbench dashboard``.
"""

from pathlib import Path

import streamlit as st

from dashboards import ui
from workbench.errors import WorkbenchError

HERE = Path(__file__).resolve().parent / "views"  # not "pages/": that name would turn on Streamlit's older page discovery

st.set_page_config(page_title="Workbench", page_icon=":material/search:", layout="wide")


def _engineer_pages() -> list:
    return [
        st.Page(HERE / "overview.py", title="Overview", icon=":material/leaderboard:", default=True),  # served at /
        st.Page(HERE / "compare.py", title="Compare two configs", icon=":material/compare_arrows:", url_path="compare"),
        st.Page(HERE / "query.py", title="Query drill-down", icon=":material/manage_search:", url_path="query"),
        st.Page(HERE / "filters.py", title="Filters and empty answers", icon=":material/filter_alt:",
                url_path="filters"),
        st.Page(HERE / "study.py", title="Study", icon=":material/tune:", url_path="study"),
        st.Page(HERE / "gate.py", title="Gate", icon=":material/traffic:", url_path="gate"),
        st.Page(HERE / "online.py", title="Online", icon=":material/query_stats:", url_path="online"),
    ]


def _judging_pages(adjudicator: bool, engineer: bool) -> list:
    pages = [st.Page(HERE / "judge.py", title="Judge", icon=":material/rate_review:", url_path="judge")]
    if adjudicator:
        pages.append(st.Page(HERE / "adjudicate.py", title="Adjudicate", icon=":material/balance:",
                             url_path="adjudicate"))
    if adjudicator or engineer:
        pages.append(st.Page(HERE / "agreement.py", title="Agreement", icon=":material/handshake:",
                             url_path="agreement"))
    return pages


def _signed_out() -> None:
    """The default page of a signed-out judging browser: nothing (the sign-in form is drawn around it)."""


state, message = ui.access()  # decided before anything is drawn
rater, rater_message = None, ""
if state != "refused":
    try:
        rater, rater_message = ui.session_rater()  # a judging session: its token re-checked on every run
    except WorkbenchError as exc:
        state, message = "refused", str(exc)
judging_only = ui.judging_only()  # `workbench dashboard --judging-only`
if rater is None and state != "refused" and (judging_only or ui.rater_browser()):
    # A rater's browser whose judging session ended (or another of its tabs signed out), or a judging-only
    # dashboard: the rater sign-in alone, whatever the address — never an engineer page (the judging pages
    # registered but hidden, so that a link to one survives the sign-in). The default page is served at "/"
    # only, so none of them may be it: /judge (a bad ?token= link, a revoked rater's reload) would be "Page not
    # found" over the sign-in form; a page that draws nothing is the default instead.
    st.navigation([st.Page(_signed_out, title="Sign in", url_path="sign-in", default=True),
                   *_judging_pages(True, False)], position="hidden")
    elsewhere = [] if judging_only else ui.other_judging_marks()  # marked by the judging dashboard of another port
    ui.rater_browser_sign_in(message or rater_message or ui.marked_elsewhere_message(elsewhere),
                             leave=not judging_only)
elif rater is not None:  # judging pages only, whatever else this session may see (the rater stays blind)
    judging = _judging_pages(rater.is_adjudicator, False)
    first = judging[1] if rater.is_adjudicator else judging[0]  # an adjudicator's: Adjudicate (Judge claims a pair)

    def _start_judging() -> None:
        st.switch_page(first)

    # The default page is served at "/" only, so /judge (a link, a sign-in from the Judge page) would be
    # "not found" if Judge were the default: "/" forwards to the rater's first page instead, and the sidebar
    # lists the real pages.
    page = st.navigation([st.Page(_start_judging, title="Judging", url_path="start", default=True), *judging],
                         position="hidden")
    if ui.just_signed_in() and page.url_path == "judge" and first.url_path != "judge":
        st.switch_page(first)  # an adjudicator who signed in on (or with a link to) Judge
    for p in judging:
        st.sidebar.page_link(p)
    ui.rater_sidebar(rater)
    page.run()
elif state in ("open", "granted"):
    page = st.navigation(_engineer_pages() + _judging_pages(False, True), position="sidebar")
    ui.judging_cookie(None)  # a rater who just signed out: the browser is no longer marked as a rater's
    if state == "granted":
        ui.sign_out_button()
    for note in (message, rater_message):
        if note:
            st.warning(note)
    page.run()
else:  # every page registered but hidden, so that a link to one survives the sign-in
    st.navigation(_engineer_pages() + _judging_pages(True, True), position="hidden")
    ui.judging_cookie(None)
    if state == "login":
        ui.sign_in_form(message or rater_message)
    else:
        st.error(message)
