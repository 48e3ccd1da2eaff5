"""Streamlit glue shared by the pages in ``dashboards/``: cached loaders, selections that
persist across pages, and the "nothing yet" messages.

Caching: run listings for 30 s (new evals appear without a restart); artifacts of a run,
datasets and lane candidates for the life of the server, keyed by run id (artifacts of a
finished run do not change). Large objects use ``st.cache_resource`` (shared, not copied).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd
import streamlit as st

from workbench.errors import WorkbenchError
from workbench.judging.store import RATER_ADD_COMMAND, JudgmentStore, store_exists
from workbench.results import gates, store, studies

MAIN_JOB = "make main"


def home() -> Path:
    """The workbench home (``WORKBENCH_HOME`` or ``~/.workbench``; :func:`workbench.settings.home_dir`);
    a home that cannot be used stops the page with the settings error."""
    from workbench.settings import home_dir

    try:
        return home_dir()
    except WorkbenchError as exc:
        stop_with_error(exc)


#: Session key of the token a viewer signed in with (re-checked on every run, so a revoked token stops working).
_TOKEN_KEY = "_wb_access_token"
#: Session key of a rater token just given (sign-in form, ``?token=`` link): the next :func:`session_rater`
#: turns it into a judging session and forgets it.
_RATER_KEY = "_wb_rater_token"
#: Session key of this browser session's judging-session id (:class:`workbench.dashboard.auth.RaterSessions`).
_SID_KEY = "_wb_rater_session"
#: Session key set for the one run in which a rater signed in (the app then opens their first page).
_SIGNED_IN_KEY = "_wb_rater_signed_in"
#: The URL query parameter that carries the judging-session id (never the token).
SESSION_PARAM = "s"
#: Session key of this session's judgment store (one connection per browser session).
_STORE_KEY = "_wb_judge_store"
#: Session key of a judging cookie this Streamlit session must no longer use (the rater signed out with it:
#: the browser sent it when the tab connected, and ``st.context.cookies`` keeps it for the tab's life).
_COOKIE_GONE_KEY = "_wb_judging_cookie_gone"
#: Session key of the judging cookies of other ports' dashboards this session left judging with (deleted by
#: :func:`judging_cookie`, and no longer read by :func:`other_judging_marks`).
_OTHERS_GONE_KEY = "_wb_other_judging_cookies_gone"


#: The environment variable ``workbench dashboard --judging-only`` sets to ``1`` (read by ``dashboards/app.py``).
JUDGING_ONLY_ENV = "WORKBENCH_DASHBOARD_JUDGING_ONLY"


def judging_only() -> bool:
    """Whether this dashboard serves the judging pages only (``workbench dashboard --judging-only``)."""
    import os

    return os.environ.get(JUDGING_ONLY_ENV) == "1"


def access() -> tuple[str, str]:
    """Whether this viewer may see the pages: ``(state, message)``, drawing nothing.

    ``open``: no tokens exist and the server listens on a loopback address only (``message``
    then says when a ``?token=`` link brought a token that is neither an access nor a rater token);
    ``granted``: the session holds (or the URL's ``?token=`` brings, once) a valid token;
    ``login``: tokens exist and none valid was given (``message`` says why, or is empty);
    ``refused``: the token file cannot be trusted, the server listens beyond this
    machine without any token, or — on the engineers' dashboard without an access token — a
    judging-only dashboard of the home serves raters (:func:`workbench.dashboard.auth.judging_dashboards`:
    the engineer pages then need a sign-in, whatever the host name a rater's browser uses); ``message``
    names the fix. A ``?token=`` is removed from the
    URL once read, and kept in the session instead (:mod:`workbench.dashboard.auth`).

    These states are about the engineer pages and access tokens. Beyond this machine with
    rater tokens but no access token, the state is ``login`` (raters may sign in; nobody gets
    the engineer pages). A rater token, typed in or brought by ``?token=``, is kept apart
    (:func:`session_rater` decides about it); it never grants this access.
    """
    from workbench.dashboard import auth
    from workbench.settings import home_dir

    try:
        sources = auth.sources(home_dir())
        on = auth.required(sources)
    except WorkbenchError as exc:
        return "refused", str(exc)
    linked = None
    if "token" in st.query_params:  # taken out of the address bar at once, whatever it turns out to be
        linked = str(st.query_params["token"])
        del st.query_params["token"]
        try:
            if not (on and auth.check_token(linked, sources)) and _is_rater_token(linked):
                st.session_state[_RATER_KEY] = linked.strip()  # a judging session (see session_rater)
                linked = None
        except WorkbenchError as exc:
            return "refused", str(exc)
    if not on:
        bind = st.get_option("server.address")
        if auth.is_loopback(bind):  # open to this machine; a link's token that is nobody's still gets a word
            if not judging_only() and (serving := auth.judging_dashboards(home_dir())):
                return "refused", auth.judging_dashboard_refusal(serving)  # a rater's browser may be on this machine
            if linked is None:
                return "open", ""
            if judging_only() or rater_browser():  # the app shows the rater sign-in alone: no pages below
                return "open", ("The token in the link is not valid (or was revoked); sign in below with your "
                                "rater token, or ask for a new one.")
            return "open", ("The token in the link is not valid (or was revoked); the pages below are open on this "
                            "machine without one. Raters sign in on the Judge page.")
        try:
            raters = _rater_tokens_exist(str(home_dir()))
        except WorkbenchError as exc:
            return "refused", str(exc)
        if not raters:
            where = f"on {bind}" if bind else "on every interface (server.address is not set)"
            return "refused", (f"This dashboard is served {where} without access tokens, so it shows nothing. Create "
                               f"one on the server with `{auth.ADD_COMMAND}` (raters' tokens from "
                               f"`{RATER_ADD_COMMAND}` open the judging pages) and reload, or serve it on this "
                               "machine only with `workbench dashboard` (127.0.0.1).")
    message = ""
    if linked is not None:
        st.session_state[_TOKEN_KEY] = linked
        message = "The token in the link is not valid (or was revoked)."
    token = st.session_state.get(_TOKEN_KEY)
    try:
        if token and auth.check_token(token, sources):
            return "granted", ""
    except WorkbenchError as exc:
        return "refused", str(exc)
    if token and not message:
        message = "Your token is no longer valid (it was revoked); sign in with another."
    st.session_state.pop(_TOKEN_KEY, None)
    return "login", message


def sign_in_form(message: str = "") -> None:
    """The only thing a viewer without a valid token sees: a password field for the token — an access
    token (the engineer pages) or a rater token (the judging pages only)."""
    from workbench.dashboard import auth
    from workbench.settings import home_dir

    st.title("Workbench dashboard")
    st.markdown("This dashboard needs an access token. Its owner creates one on the server with "
                f"`{auth.ADD_COMMAND}`. Scholars who judge relevance sign in with the rater token they were given "
                f"(`{RATER_ADD_COMMAND}`).")
    with st.form("wb_sign_in"):
        token = st.text_input("Access token", type="password", key="wb_token_input")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        try:
            name = auth.check_token(token, auth.sources(home_dir()))
            rater = None if name else _is_rater_token(token)
        except WorkbenchError as exc:
            stop_with_error(exc)
        if name:
            st.session_state[_TOKEN_KEY] = token.strip()
            st.rerun()
        if rater:
            st.session_state[_RATER_KEY] = token.strip()
            st.rerun()
        message = "That token is not valid (or was revoked)."
    if message:
        st.error(message)


def sign_out_button() -> None:
    """A sidebar button that forgets this session's token."""
    if st.sidebar.button("Sign out", key="wb_sign_out"):
        st.session_state.pop(_TOKEN_KEY, None)
        st.rerun()


# ---------------------------------------------------------------- judging sessions (rater tokens)


@st.cache_data(ttl=10, show_spinner=False)
def _rater_tokens_exist(home_path: str) -> bool:
    """Whether the home's judgment store has active raters (False without a store; cached 10 s)."""
    from workbench.dashboard import auth

    return "rater" in auth.token_kinds(Path(home_path))


def _is_rater_token(token: str | None) -> bool:
    """Whether ``token`` is an active rater's (False without a judgment store; nothing is created by looking)."""
    if not token or not isinstance(token, str):
        return False
    store = judge_store()
    if store is None:
        return False
    from workbench.dashboard import auth

    return auth.check_rater(token, auth.RaterTokens(store)) is not None


def judge_store(create: bool = False):
    """This browser session's judgment store (:class:`~workbench.judging.store.JudgmentStore`): one
    connection per session, opened (and migrated) once, reopened when broken, so a click costs no
    connect. None when the home has no store (:func:`workbench.judging.store.store_exists`:
    looking creates no server) unless ``create`` (an action that writes to it: the embedded
    server and the schema are then made when missing).

    Raises:
        PgError: the store's server cannot be started or reached (names it and the fix).
    """

    h = home()
    if not create and not store_exists(h):
        return None
    held = st.session_state.get(_STORE_KEY)
    if held is not None and held[0] == (str(h), os.environ.get("WORKBENCH_PG_DSN", "")):
        return held[1]
    store = JudgmentStore.open(h)
    st.session_state[_STORE_KEY] = ((str(h), os.environ.get("WORKBENCH_PG_DSN", "")), store)
    return store


def judge_store_or_stop():
    """:func:`judge_store`, or the page stopped with what to run (no store) or the error."""

    try:
        store = judge_store()
    except WorkbenchError as exc:
        stop_with_error(exc)
    if store is None:
        st.info(f"This home has no judgment store yet. Add a rater on the server with `{RATER_ADD_COMMAND}` "
                "(it prints their token) and pool pairs to judge (`workbench judge pool`, or the query drill-down's "
                "“Send to the judging pool”).")
        st.stop()
    return store


@st.cache_resource(show_spinner=False)
def rater_sessions():
    """The server's judging sessions (:class:`workbench.dashboard.auth.RaterSessions`): one map per
    dashboard process, shared by every browser session, so a reload (a new Streamlit session) finds
    its rater again by the ``?s=`` id in the address."""
    from workbench.dashboard import auth

    return auth.RaterSessions()


def _forget_session(sid: str | None = None) -> None:
    """Drop this browser session's judging session: the server's entry, the session key and ``?s=``."""
    rater_sessions().end(sid or st.session_state.get(_SID_KEY))
    st.session_state.pop(_SID_KEY, None)
    if SESSION_PARAM in st.query_params:
        del st.query_params[SESSION_PARAM]


def session_rater():
    """``(rater, message)``: the :class:`~workbench.judging.store.Rater` this session signed in as, or
    None, drawing nothing.

    A rater token just given (the sign-in forms, a ``?token=`` link) is checked and turned into a
    judging session (:func:`rater_sessions`): its id goes into the address as ``?s=`` and into
    this Streamlit session, the token is forgotten. A reload starts a new Streamlit session, which
    finds the rater again by ``?s=``. On every run the session's token digest is checked against
    the store's active raters in constant time
    (:func:`workbench.dashboard.auth.check_rater_digest`), so a revoked rater is signed out at
    their next click; a session unused for 12 hours, or one made before the dashboard restarted,
    has ended (``message`` says which). Without a rater token or session the store is not touched.

    Raises:
        PgError: the store's server cannot be reached.
    """
    from workbench.dashboard import auth

    sessions = rater_sessions()
    token = st.session_state.pop(_RATER_KEY, None)
    if token:
        store = judge_store()
        rater = auth.check_rater(token, auth.RaterTokens(store)) if store is not None else None
        if rater is None:
            return None, "That is not a valid rater token (or it was revoked)."
        _forget_session()  # a new sign-in replaces whatever session this browser tab had
        st.session_state[_SID_KEY] = sessions.start(auth.digest(token.strip()))
        st.session_state.pop(_CLEAR_COOKIE_KEY, None)  # the new session's id goes into the cookie (judging_cookie)
        st.session_state[_SIGNED_IN_KEY] = True
    sid = st.session_state.get(_SID_KEY)
    if not sid and SESSION_PARAM in st.query_params:
        sid = str(st.query_params[SESSION_PARAM])
    if not sid:
        sid = _cookie_sid()  # another tab of a rater's browser, opened without ?s= (a bookmark, "/", a new tab)
    if not sid:
        return None, ""
    token_digest, why = sessions.lookup(sid)
    if token_digest is None:
        _forget_session(sid)
        return None, ("Your judging session ended after 12 hours without use; sign in again with your rater token."
                      if why == "expired" else
                      "Your judging session has ended (you signed out, or the dashboard was restarted); sign in again "
                      "with your rater token.")
    store = judge_store()
    rater = auth.check_rater_digest(token_digest, auth.RaterTokens(store)) if store is not None else None
    if rater is None:
        _forget_session(sid)
        return None, "Your rater token is no longer valid (it was revoked); sign in with another."
    st.session_state[_SID_KEY] = sid
    if st.query_params.get(SESSION_PARAM) != sid:  # back into the address after a page change dropped it
        st.query_params[SESSION_PARAM] = sid
    return rater, ""


def store_and_rater():
    """The judging pages' common start: the judgment store (or the page stops saying why) and
    ``(rater, why_signed_out)`` of this session (:func:`session_rater`; an error stops the page)."""
    store = judge_store_or_stop()
    try:
        rater, signed_out = session_rater()
    except WorkbenchError as exc:
        stop_with_error(exc)
    return store, rater, signed_out


def judged_dataset_or_stop(store, empty: str, state: str, *, key: str) -> str:
    """The dataset picked among those with pooled or judged pairs; the page stops with ``empty`` when there
    is none (or with the store's error)."""
    try:
        names = store.datasets()
    except WorkbenchError as exc:
        stop_with_error(exc)
    if not names:
        st.info(empty)
        st.stop()
    return pick("Dataset", names, state, key=key)


def just_signed_in() -> bool:
    """Whether a rater signed in during this run (true once: the app then opens their first page)."""
    return bool(st.session_state.pop(_SIGNED_IN_KEY, False))


def rater_sign_in_form(message: str = "") -> None:
    """The Judge page's sign-in: a rater token only (an access token does not let anyone judge)."""

    st.markdown("Sign in with your **rater token** to judge. The workbench's owner creates one for you with "
                f"`{RATER_ADD_COMMAND}` (a dashboard access token does not let anyone judge).")
    with st.form("wb_rater_sign_in"):
        token = st.text_input("Rater token", type="password", key="wb_rater_token_input")
        submitted = st.form_submit_button("Sign in to judge")
    if submitted:
        try:
            ok = _is_rater_token(token)
        except WorkbenchError as exc:
            stop_with_error(exc)
        if ok:
            st.session_state[_RATER_KEY] = token.strip()  # the next run makes it a judging session
            st.rerun()
        message = "That is not a valid rater token (or it was revoked)."
    if message:
        st.error(message)


def rater_sidebar(rater) -> None:
    """Who is judging, and a button that signs the rater out: their judging session ends on the server
    too, so the address's ``?s=`` opens nothing afterwards (an engineer session goes back to its pages)."""
    st.sidebar.markdown(f"Judging as **{rater.name}** ({rater.role})")
    st.sidebar.caption("You stay signed in on reload for 12 hours after your last click; keep this address "
                       "(its `?s=`) to yourself, like your token.")
    if st.sidebar.button("Sign out", key="wb_rater_sign_out"):
        leave_judging()
        st.rerun()
    judging_cookie(st.session_state.get(_SID_KEY))


#: Session key set when this session signed out of judging: its runs then delete the browser's judging cookie.
_CLEAR_COOKIE_KEY = "_wb_judging_cookie_clear"
#: How long a browser stays marked as a rater's (seconds; Chrome's cap, 400 days): until the rater signs out.
COOKIE_MAX_AGE = 400 * 24 * 3600


def cookie_name() -> str:
    """The judging cookie's name: ``wb_judging_<port>`` (a cookie is not bound to a port, so two dashboards on
    one machine each have their own)."""
    from workbench.dashboard import auth

    return auth.judging_cookie_name(st.get_option("server.port"))


def other_judging_marks() -> list[str]:
    """The ports of the other dashboards whose judging cookie this browser carries
    (:func:`workbench.dashboard.auth.other_judging_marks`): a rater's browser there is a rater's here too."""
    from workbench.dashboard import auth

    gone = set(st.session_state.get(_OTHERS_GONE_KEY, ()))
    try:
        cookies = st.context.cookies
        names = [k for k in cookies if isinstance(k, str) and k not in gone]
        return auth.other_judging_marks({k: cookies.get(k) for k in names}, st.get_option("server.port"))
    except Exception:  # noqa: BLE001 - no browser connection (AppTest, a bare script run)
        return []


def _browser_cookie() -> str | None:
    """The judging cookie the browser sent when this tab connected (None without one, or outside a browser)."""
    try:
        value = st.context.cookies.get(cookie_name())
    except Exception:  # noqa: BLE001 - no browser connection (AppTest, a bare script run)
        return None
    return value if isinstance(value, str) and value else None  # (AppTest's stand-in gives a mock object)


def _cookie_sid() -> str | None:
    """The judging-session id the browser's cookie carries, unless this session signed out with it."""
    value = _browser_cookie()
    return None if not value or value == st.session_state.get(_COOKIE_GONE_KEY) else value


def rater_browser() -> bool:
    """Whether this browser is a rater's: it carries a judging cookie (:func:`judging_cookie`) that this session
    did not sign out with, whatever its judging session's state (one that ended still marks the browser). The
    app then shows nothing but the judging pages, or the rater sign-in, in every tab of it: a rater stays
    blind however the dashboard is opened — a second tab, ``/``, an engineer page's address, no ``?s=``. A judging
    cookie of another dashboard of this host name (another port: :func:`other_judging_marks`) marks it too."""
    return _cookie_sid() is not None or bool(other_judging_marks())


_COOKIE_SCRIPT = """<script>
(() => {
  // dashboards.ui.judging_cookie: mark (or unmark) this browser as a rater's, for every tab of it.
  document.cookie = %s;
})();
</script>"""


def judging_cookie(sid: str | None) -> None:
    """Keep the browser's judging cookie (:func:`cookie_name`) in step with this session: set to ``sid`` (a
    judging session: every tab of the browser opened later finds the rater by it, :func:`session_rater`), or
    deleted after the rater signed out (:func:`leave_judging`; with the judging cookies of other ports' dashboards
    that this browser left judging with here). ``SameSite=Strict``, the whole site's path; it
    carries the same session id as ``?s=``, never the token. Draws an invisible script; nothing when there is
    nothing to change."""
    import json

    name = cookie_name()
    where: Any  # the sidebar or the page (the st module): both have .html
    if sid:
        values = [f"{name}={sid}; path=/; max-age={COOKIE_MAX_AGE}; samesite=strict"]
        where = st.sidebar
    elif st.session_state.get(_CLEAR_COOKIE_KEY):  # this port's cookie, and those of others it left judging with
        values = [f"{n}=; path=/; max-age=0; samesite=strict"
                  for n in dict.fromkeys([name, *st.session_state.get(_OTHERS_GONE_KEY, ())])]
        where = st
    else:
        return
    for value in values:
        where.html(_COOKIE_SCRIPT % json.dumps(value), unsafe_allow_javascript=True)


def leave_judging() -> None:
    """Sign this browser out of judging: the judging session ends on the server, ``?s=`` leaves the address,
    and the browser's judging cookie is deleted (on this session's next run) and no longer read by it — and so are
    the judging cookies of other ports' dashboards it carries (:func:`other_judging_marks`)."""
    from workbench.dashboard import auth

    others = [auth.judging_cookie_name(p) for p in other_judging_marks()]  # another port's mark goes too
    st.session_state[_OTHERS_GONE_KEY] = [*st.session_state.get(_OTHERS_GONE_KEY, ()), *others]
    _forget_session()
    gone = _browser_cookie()
    if gone:
        st.session_state[_COOKIE_GONE_KEY] = gone
    st.session_state[_CLEAR_COOKIE_KEY] = True


def marked_elsewhere_message(ports: Sequence[str]) -> str:
    """What a browser marked as a rater's by the dashboard of another port (:func:`other_judging_marks`) reads
    above the rater sign-in here; ``""`` for none."""
    if not ports:
        return ""
    where = ", ".join(ports)
    return (f"This browser signed in to judge on the dashboard of port {where}, so this dashboard shows it none of "
            "its other pages (they would unblind a rater). Judge there, or sign in here with your rater token.")


def rater_browser_sign_in(message: str = "", *, leave: bool = True) -> None:
    """What a rater's browser (:func:`rater_browser`) shows when its judging session has ended, and what a
    judging-only dashboard shows before a rater signs in: the rater sign-in alone (no engineer page, however
    the dashboard was opened); with ``leave``, a button that deliberately gives this browser back to the
    engineer pages (it removes the judging marks of other ports' dashboards too)."""
    st.title("Judge")
    if not leave:
        rater_sign_in_form(message)
        st.caption("This dashboard serves the judging pages only.")
        return
    rater_sign_in_form(message or "Your judging session has ended; sign in again with your rater token.")
    st.divider()
    st.caption("This browser was used for judging, so it shows only the judging pages. Not a rater? Leave judging "
               "on this browser to see the other pages.")
    if st.button("Leave judging on this browser", key="wb_leave_judging"):
        leave_judging()
        st.rerun()


#: The pages' keyboard shortcuts: key (lower case) -> the prefixes of the widget keys of the buttons it
#: presses. A grade button's key ends with the pair it grades (``judge_g1_<assignment id>``), so a
#: press can only ever click the button of the pair on screen.
SHORTCUT_KEYS: dict[str, tuple[str, ...]] = {
    "0": ("judge_g0_", "adj_g0_"),
    "1": ("judge_g1_", "adj_g1_"),
    "2": ("judge_g2_", "adj_g2_"),
    "x": ("judge_x_",),
    "u": ("judge_undo",),
}

_SHORTCUT_SCRIPT = """<script>
(() => {
  // The judging pages' keys (dashboards.ui.keyboard_shortcuts). Streamlit's own button shortcuts
  // ignore a key while any input element has the focus (a toggle, a checkbox) and take Shift+X for another
  // key; this listener, on the page's window before Streamlit's, presses the button itself. (No angle
  // brackets in here: Streamlit's HTML sanitiser drops a script whose text has one.)
  window.__wbShortcutKeys = %s;
  if (window.__wbShortcuts) return;
  window.__wbShortcuts = true;
  const NOT_TEXT = new Set(["checkbox", "radio", "button", "submit", "reset", "range", "color", "file", "image"]);
  const typing = (e) => (e.composedPath ? e.composedPath() : [e.target]).some((el) => {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && !NOT_TEXT.has((el.type || "text").toLowerCase());
  });
  // A key by the character it types or, where that is none of ours, by its place on the keyboard
  // (KeyboardEvent.code): a Russian layout types "ч" on the X key (KeyX), AZERTY "à" on the 0 key (Digit0).
  const place = (code) => {
    const m = /^(?:Key([A-Z])|Digit([0-9])|Numpad([0-9]))$/.exec(code || "");
    return m ? (m[1] || m[2] || m[3]).toLowerCase() : "";
  };
  window.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing || !e.key || e.key.length !== 1) return;
    const keys = window.__wbShortcutKeys;
    const prefixes = keys[e.key.toLowerCase()] || keys[place(e.code)];
    if (!prefixes || typing(e)) return;
    let button = null;
    for (const p of prefixes) {
      button = document.querySelector('[class*="st-key-' + p + '"] button');
      if (button) break;
    }
    if (!button) return;
    e.preventDefault();
    e.stopImmediatePropagation();  // Streamlit's handler would press it a second time
    if (!e.repeat && !button.disabled) button.click();
  }, true);

  // Leaving the note (Tab, Shift+Tab, Esc) moves the focus to the grading panel without scrolling: the
  // browser would scroll the next button into view, and the page would move under a resting pointer.
  const NOTE = '[class*="st-key-judge_note_"], [class*="st-key-adj_note"]';
  const PANEL = '[class*="st-key-judge_grades"], [class*="st-key-adj_grades"]';
  window.addEventListener("keydown", (e) => {
    if ((e.key !== "Tab" && e.key !== "Escape") || e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    const area = e.target;
    if (!area || area.tagName !== "TEXTAREA" || !area.closest(NOTE)) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    const panel = document.querySelector(PANEL);
    if (panel) {
      panel.tabIndex = -1;
      panel.focus({preventScroll: true});
    } else {
      area.blur();
    }
  }, true);

  // A grade button takes a mouse click only when the reader moved the pointer onto it: a click that lands
  // on one because the page moved under a resting pointer (a scroll, a message above, the next pair drawn)
  // grades nothing and says so. Keys, Enter or Space on a focused button, a touch or a pen are not affected.
  const GRADE = '[class*="st-key-judge_g"], [class*="st-key-judge_x_"], [class*="st-key-adj_g"]';
  const gradeButton = (el) => {
    const holder = el && el.closest ? el.closest(GRADE) : null;
    return holder ? holder.querySelector("button") : null;
  };
  let aimed = null;
  window.addEventListener("pointermove", (e) => {
    if (e.pointerType !== "mouse" || (e.movementX === 0 && e.movementY === 0)) return;  // moved by the hand
    aimed = gradeButton(e.target);
  }, true);
  window.addEventListener("scroll", () => { aimed = null; }, true);
  const hint = () => {
    let el = document.getElementById("wb-click-hint");
    if (!el) {
      el = document.createElement("div");
      el.id = "wb-click-hint";
      el.setAttribute("role", "status");
      el.style.cssText = "position: fixed; left: 50%%; bottom: 1.5rem; transform: translateX(-50%%); z-index: 1000; " +
        "background: #6b4a00; color: #fff; padding: 0.6rem 1rem; border-radius: 0.4rem; font-size: 0.95rem; " +
        "max-width: 42rem; box-shadow: 0 2px 8px rgba(0, 0, 0, 0.3)";
      document.body.appendChild(el);
    }
    el.textContent = "Not graded: the page moved under the pointer. Move the pointer onto the grade you mean and " +
      "click it, or press its key.";
    el.hidden = false;
    clearTimeout(window.__wbHintTimer);
    window.__wbHintTimer = setTimeout(() => { el.hidden = true; }, 6000);
  };
  window.addEventListener("click", (e) => {
    const button = gradeButton(e.target);
    if (!button || !e.isTrusted || e.detail === 0) return;  // our keys click untrusted; Enter/Space: detail 0
    if (e.pointerType && e.pointerType !== "mouse") return;  // a tap is aimed
    if (aimed === button) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    hint();
  }, true);
})();
</script>"""


_TOP_SCRIPT = """<script>
(() => {
  // dashboards.ui.scroll_to_top: a new pair opens at the top of the page.
  const pair = %s;
  if (window.__wbPairOnTop === pair) return;
  window.__wbPairOnTop = pair;
  const top = () => {
    for (const el of [document.querySelector('[data-testid="stMain"]'), document.querySelector("section.main"),
                      document.querySelector('[data-testid="stAppViewContainer"]'), document.scrollingElement,
                      ...document.querySelectorAll('[data-testid="stColumn"]')]) {  // a column that scrolls itself
      if (el && el.scrollTop) el.scrollTop = 0;
    }
  };
  top();
  requestAnimationFrame(top);
  setTimeout(top, 150);
  setTimeout(top, 500);
})();
</script>"""


def scroll_to_top(pair: str) -> None:
    """Scroll the page to its top once per pair shown (``pair``: anything naming it, e.g. the assignment id):
    the next pair opens with its query and the "Saved" line above it in view, whatever depth the reader had
    scrolled the last one to. A small script (``st.html`` with JavaScript); the same pair drawn again (a note
    saved, a toggle) leaves the page where the reader put it."""
    import json

    st.html(_TOP_SCRIPT % json.dumps(str(pair)), unsafe_allow_javascript=True)


@st.cache_resource(show_spinner=False, max_entries=32)
def _guidelines(dataset: str, path: str, signature: tuple | None) -> dict:
    from workbench.dashboard import guidelines

    return guidelines.load(dataset, Path(path))


def cached_guideline_html(dataset: str, query_type: str) -> str:
    """The guideline for ``query_type`` on ``dataset`` as HTML (:func:`workbench.dashboard.guidelines.guideline_html`):
    the dataset's ``guidelines/<dataset>.toml`` over the built-in texts, read again when the file changes;
    ``""`` for a query type the workbench does not know. A file that does not pass its checks is named in a
    warning on the page, and the built-in guidelines are shown meanwhile."""
    from workbench.dashboard import guidelines, judging

    path = guidelines.guidelines_path(dataset)
    try:
        stat = path.stat()
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    except OSError:
        signature = None
    try:
        guides = _guidelines(dataset, str(path), signature)
    except WorkbenchError as exc:
        st.warning(f"{exc}. The built-in guidelines are shown meanwhile.", icon=":material/warning:")
        guides = guidelines.DEFAULTS
    guide = guides.get(query_type)
    return "" if guide is None else guidelines.guideline_html(guide, judging.QUERY_TYPE_WORDS.get(query_type, query_type))


def keyboard_shortcuts() -> None:
    """Make the judging pages' keys (:data:`SHORTCUT_KEYS`) work wherever the focus is (a button, a toggle, a
    checkbox), except in a text field (the note, a select box's search), in either case (``x`` or Shift+``X``)
    and in any keyboard layout: a key counts by the character it types or, when that is none of the keys, by its
    place on the keyboard (``KeyboardEvent.code``: a Russian layout types ``ч`` on the X key, ``KeyX``); a held
    key presses once. A small script in the page (``st.html`` with JavaScript, not sandboxed: it must reach the
    page's buttons): it finds the button by its widget key's CSS class (``st-key-…``) and clicks it, so
    what it does goes through the button's own callback like a mouse click.

    The same script keeps a stray click from grading (#28: after a note, Tab scrolled the page 72 px and
    the resting pointer was then on "2 · highly relevant"): Tab, Shift+Tab or Esc in the note
    (``judge_note_…``, ``adj_note…``) moves the focus to the grading panel (the container keyed
    ``judge_grades`` / ``adj_grades``) without scrolling; and a grade button (``judge_g…``, ``judge_x_…``,
    ``adj_g…``) takes a mouse click only when the pointer was moved onto it by hand since the page last
    moved — otherwise nothing is graded and a line at the foot of the window says to move the pointer
    or press the key."""
    import json

    st.html(_SHORTCUT_SCRIPT % json.dumps(SHORTCUT_KEYS, sort_keys=True), unsafe_allow_javascript=True)


def stop_with_error(exc: Exception) -> NoReturn:  # as st.stop() is declared
    """Show a workbench error as a message (not a traceback) and stop the page."""
    st.error(str(exc))
    st.stop()


@st.cache_data(ttl=30, show_spinner="Reading MLflow runs…")
def cached_config_runs(uri: str) -> pd.DataFrame:
    """:func:`workbench.results.store.config_runs`, cached for 30 s."""
    return store.config_runs(uri)


def runs_or_stop() -> tuple[str, pd.DataFrame]:
    """The tracking URI and its config runs; stops the page with what to run when there are none."""
    from workbench.experiment.tracking import tracking_uri

    uri = tracking_uri(home())
    try:
        runs = cached_config_runs(uri)
    except WorkbenchError as exc:
        stop_with_error(exc)
    if runs.empty:
        st.info(f"No evaluation runs in the MLflow store `{uri}` yet. Run the main job, `{MAIN_JOB}` "
                "(or `workbench eval experiments/seeds.toml`), then reload this page. Another store: set "
                "`MLFLOW_TRACKING_URI` or `WORKBENCH_HOME` before `workbench dashboard`.")
        st.stop()
    return uri, runs


@st.cache_resource(show_spinner="Reading per-query results…", max_entries=256)
def cached_per_query(artifact_uri: str, run_id: str) -> pd.DataFrame:
    """A run's per-query table (shared, read once per server: treat it as read-only)."""
    return store.per_query(artifact_uri, run_id)


@st.cache_resource(show_spinner="Reading the run…", max_entries=64)
def cached_fused_run(artifact_uri: str, run_id: str):
    """A run's fused ranking (:class:`~workbench.run.Run`), read once per server."""
    return store.read_fused_run(artifact_uri, run_id)


@st.cache_resource(show_spinner="Reading the lanes' candidates…", max_entries=8)
def lane_index(parent_uri: str, dataset: str) -> tuple[pd.DataFrame | None, dict[str, Any]]:
    """The lane candidates of one eval and a query_id → row positions index (one pass, then O(1) per query)."""
    df = store.lane_hits(parent_uri, dataset)
    if df is None:
        return None, {}
    return df, df.groupby("query_id", sort=False, observed=True).indices


def lane_hits_for(parent_uri: str, dataset: str, query_id: str) -> pd.DataFrame | None:
    """The lanes' candidates for one query (``None`` when the eval did not log them)."""
    df, index = lane_index(parent_uri, dataset)
    if df is None:
        return None
    return df.iloc[index.get(query_id, [])]


@st.cache_resource(show_spinner="Reading the dataset…", max_entries=8)
def _dataset_files(home_path: str, name: str, signature: tuple):
    return store.dataset_files(home_path, name)


def cached_dataset_files(home_path: str, name: str):
    """A built dataset's queries, qrels and documents (:class:`~workbench.results.store.DatasetFiles`),
    read once per version of its files (the cache key is their size, mtime and inode), and a
    warning on the page naming any file that no longer matches the build's manifest and the
    command to rebuild it. Every page that shows a dataset's texts or queries reads it here.

    Raises:
        DataError: as :func:`workbench.results.store.dataset_files`.
    """
    ds = _dataset_files(home_path, name, store.dataset_signature(home_path, name))
    if ds.modified:
        st.warning(store.modified_message(ds), icon=":material/warning:")
    return ds


@st.cache_resource(show_spinner="Hashing the dataset's documents…", max_entries=8)
def _doc_hashes(home_path: str, name: str, signature: tuple) -> dict[str, str]:
    from workbench.judging.store import document_hash

    ds = _dataset_files(home_path, name, signature)
    return {doc_id: document_hash(doc) for doc_id, doc in ds.documents.items()}


def doc_hashes(home_path: str, name: str) -> dict[str, str]:
    """doc_id → :func:`~workbench.judging.store.document_hash` of every document of a built dataset, computed
    once per version of its files (what tells a stale judgment: one made on another text).

    Raises:
        DataError: as :func:`dataset_files`.
    """
    return _doc_hashes(home_path, name, store.dataset_signature(home_path, name))


def pick(label: str, options: Sequence[Any], state: str, *, key: str, fmt=str, default: Any = None,
         sidebar: bool = True, help: str | None = None) -> Any:
    """A selectbox whose choice is kept in ``st.session_state[state]`` and shared by every page."""
    options = list(options)
    if not options:
        return None
    current = st.session_state.get(state, default)
    index = options.index(current) if current in options else (options.index(default) if default in options else 0)
    where = st.sidebar if sidebar else st
    value = where.selectbox(label, options, index=index, format_func=fmt, key=key, help=help)
    st.session_state[state] = value
    return value


def run_choices(runs: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Config runs of a dataset, newest per (experiment, config), labelled ``experiment/config``; the
    newest experiment first, its configs in the experiment's order."""
    part = store.latest_per_config(runs[runs["dataset"] == dataset])
    # newest experiment first, and within it the experiment's own config order (children start in that order),
    # so the first two labels are the first two configs of the latest eval (a seed and its variant)
    newest = part.groupby("experiment")["started"].transform("max")
    part = part.assign(_newest=newest).sort_values(["_newest", "started"], ascending=[False, True], kind="stable")
    return _labelled(part.drop(columns="_newest"))


def _labelled(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs indexed (and keyed in a ``label`` column) by ``experiment/config``."""
    return runs.assign(label=[store.label(r) for _, r in runs.iterrows()]).set_index("label", drop=False)


def eval_choices(runs: pd.DataFrame, dataset: str) -> dict[str, pd.DataFrame]:
    """``latest of each config`` plus one entry per eval (parent run), newest first."""
    part = runs[runs["dataset"] == dataset]
    out = {"latest of each config": run_choices(runs, dataset)}
    for parent, g in sorted(part.groupby("parent_run_id"), key=lambda kv: -kv[1]["started"].max().value):
        when = g["started"].min().strftime("%Y-%m-%d %H:%M UTC")
        out[f"{g['experiment'].iloc[0]} eval of {when} ({parent[:8]})"] = _labelled(g)
    return out


def parent_uri(row: pd.Series) -> str:
    """The artifact root of the eval (parent run) a config run belongs to (``""`` when none)."""
    return store.parent_artifact_uri(row["artifact_uri"], row["run_id"], row["parent_run_id"])


@st.cache_data(ttl=30)
def study_list(home_path: str) -> list[studies.StudyOutputs]:
    """The study output folders under the home, newest first (cached 30 s)."""
    return studies.find(Path(home_path))


@st.cache_resource(show_spinner="Loading the Optuna study…", ttl=60)
def optuna_study(url: str, name: str):
    """The Optuna study from its storage (cached 60 s, so a running study's new trials appear)."""
    return studies.load(url, name)


@st.cache_data(ttl=30)
def gate_list(home_path: str) -> list[Path]:
    """The saved gate reports, newest first (cached 30 s)."""
    return gates.find(Path(home_path))
