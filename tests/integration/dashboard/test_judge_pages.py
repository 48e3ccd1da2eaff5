"""The judging pages on a real PostgreSQL and the real gita build: Judge (a rater grades one pair at a
time, blind), Adjudicate (adjudicators only), Agreement, the drill-down's "send to the judging pool",
and who may see what. Each page's logic through Streamlit's AppTest; then two raters judging the same
20 pairs with the keyboard alone in headless Chromium, an adjudicator resolving their disagreements,
and ``workbench judge export`` writing the qrels that follow from the grades given.

What is asserted follows from the grades the test gives and from the store's rows, read with SQL:
exactly one judgment per click with the hash of the document shown, undo as an appended retraction,
a stale page's second submit refused with nothing written, a quick second key press never grading
the next pair, a judging session that survives a reload (and ends on revocation), the keys working
after a click on another widget and with Shift, an adjudicator changing and undoing a decision, the
words marked and the labels a scholar reads, a rater's page never holding another rater's name or
note.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import sys
import time
from pathlib import Path

import faults
import psycopg
import pytest
from fixtures.paths import REPO

from workbench.dashboard import auth, judging
from workbench.judging.store import JudgmentStore, PoolPair, document_hash

ROOT = REPO
PAGES = ROOT / "dashboards" / "views"
APP = ROOT / "dashboards" / "app.py"
RATER_KEY = "_wb_rater_token"  # dashboards.ui's session key for a rater token just given


def _seen() -> None:
    """Wait until the pair drawn by the last run may be graded (the page refuses a press that comes sooner)."""
    time.sleep(judging.MIN_SEEN_S + 0.05)


def _g(grade: int | None, aid: int) -> str:
    """The widget key of the Judge page's button for ``grade`` (None: cannot judge) on assignment ``aid``."""
    stem = next(stem for g, _t, _k, stem in judging.GRADE_BUTTONS if g == grade)
    return judging.grade_key(stem, aid)


@pytest.fixture(scope="module")
def jhome(built_home, tmp_path_factory):
    """A home that reads the session's built datasets (no runs: the judging pages need none)."""
    home = tmp_path_factory.mktemp("judge-home")
    (home / "datasets").symlink_to(built_home / "datasets")
    return home


@pytest.fixture(scope="module")
def gita(jhome):
    from workbench.results.store import dataset_files

    return dataset_files(str(jhome), "gita")


@pytest.fixture
def store(jhome, pg_dsn, monkeypatch):
    """A fresh judgment store on the session's server, and the environment the pages resolve it from."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(jhome))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    from dashboards import ui

    ui._rater_tokens_exist.clear()
    st = JudgmentStore(pg_dsn)
    yield st
    st.close()
    shutil.rmtree(jhome / "dashboard", ignore_errors=True)  # access tokens a test made


@pytest.fixture(autouse=True)
def _keep_main_module():
    """AppTest replaces ``sys.modules["__main__"]``; put it back (see tests/integration/dashboard/test_app.py)."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture
def bind():
    """Set Streamlit's ``server.address`` (what the app sees it is served on) for one test."""
    from streamlit import config

    old = config.get_option("server.address")
    yield lambda address: config.set_option("server.address", address)
    config.set_option("server.address", old)


def _pairs(gita, n: int) -> list[tuple[str, str]]:
    """``n`` (query, document) pairs of the gita, each with another document: a query and its target verse."""
    out, seen = [], set()
    for qid, row in gita.queries.iterrows():
        doc = row["group"]
        if doc in gita.documents and doc not in seen and row["language"] == "en":
            out.append((qid, doc))
            seen.add(doc)
        if len(out) == n:
            return out
    raise AssertionError(f"the gita has fewer than {n} usable pairs")


def _pool(store, pairs, raters=2) -> int:
    return store.create_pool("gita", [PoolPair(q, d) for q, d in pairs], raters_per_pair=raters, params={"t": 1})


def _app(path: Path, token: str | None = None, **query):
    """Run a page (or the app) once: ``token`` as if just typed into a sign-in form, ``query`` as the address's
    query (``link=…`` stands for ``?token=…``, a sign-in link; ``s=…`` for a judging session's id)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(path), default_timeout=180)
    if token is not None:
        at.session_state[RATER_KEY] = token
    if "link" in query:
        query["token"] = query.pop("link")
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _held(store, rater) -> tuple[int, str, str]:
    """The pair the rater's page shows: the open slot they hold (read with SQL, claiming nothing)."""
    rows = store.conn().execute(
        "SELECT a.assignment_id, p.query_id, p.doc_id FROM wb_judge.assignments a JOIN wb_judge.pairs p USING (pair_id) "
        "WHERE a.rater_id = %s AND a.done_at IS NULL ORDER BY a.claimed_at", (rater.rater_id,)).fetchall()
    assert rows, "the page holds no pair"
    return rows[0]


def _rows(store) -> list[tuple]:
    return store.conn().execute("SELECT action, rater_id, assignment_id, query_id, doc_id, grade, cannot_judge, note, "
                                "doc_sha256 FROM wb_judge.judgments ORDER BY judgment_id").fetchall()


def _everything(at) -> str:
    """Every text the page holds: titles, markdown, captions, HTML, messages, widgets' labels and values, tables."""
    parts = []
    for kind in ("title", "subheader", "markdown", "caption", "text", "success", "info", "warning", "error",
                 "metric", "button", "text_area", "text_input", "selectbox", "toggle", "checkbox"):
        for el in at.get(kind):
            parts.append(str(el.proto))
            if kind in ("text_area", "text_input", "selectbox") and el.value is not None:
                parts.append(str(el.value))
    parts += [el.proto.body for el in at.get("html")]
    parts += [d.value.to_csv() for d in at.dataframe]
    return "\n".join(parts)


def _progress(at) -> str:
    return at.get("progress")[0].proto.text


# ------------------------------------------------------------------ pure: highlighting


def test_query_words_are_marked_with_diacritic_folded_matching():
    terms = judging.query_terms("The satipatthana and the Dhamma of samsara, Сатипаттхана")
    assert terms == ("satipatthana", "dhamma", "samsara", "сатипаттхана")  # stopwords and short words left out
    text = "Satipaṭṭhānaṁ … dhammassa desanā; saṃsāra and the DHAMMO <b> satipaṭṭhāna"
    assert judging.marked_words(text, terms) == ["Satipaṭṭhānaṁ", "dhammassa", "saṃsāra", "DHAMMO", "satipaṭṭhāna"]
    out = judging.highlight_html(text, terms)
    assert "<mark>Satipaṭṭhānaṁ</mark>" in out and "<mark>saṃsāra</mark>" in out
    assert "&lt;b&gt;" in out and "<b>" not in out  # the text is escaped, only the marks are markup
    # a Devanagari word stays whole (its vowel signs and virama are marks, not word breaks)
    deva = judging.query_terms("धर्मक्षेत्रे")
    assert judging.marked_words("धर्मक्षेत्रे कुरुक्षेत्रे", deva) == ["धर्मक्षेत्रे"]
    assert judging.marked_words("dham dhammika", judging.query_terms("dha")) == []  # no ending of "dha" follows


def test_function_words_prefixes_and_short_devanagari_words_are_not_marked():
    """The scholar's report: "among", "the", मैं हूँ में हैं तथा गया करने होता were marked, and पुरुष marked
    पुरुजित्. Function words come from kept lists (scikit-learn's English, Savoy's Hindi), a Devanagari word's
    length is counted in letters, and a word is marked whole or with an inflectional ending only."""
    english = "I am the King-python among snakes, I am the Aqueous Principle among those that live in water"
    assert judging.query_terms(english) == ("king", "python", "snakes", "aqueous", "principle", "live", "water")
    hindi = "मैं (ग्यारह) रुद्रों में शंकर हूँ और यक्ष तथा राक्षसों में धनपति कुबेर हूँ; गया करने होता"
    terms = judging.query_terms(hindi)
    for function_word in ("मैं", "हूँ", "में", "हैं", "तथा", "गया", "करने", "होता", "और"):
        assert judging.fold(function_word) not in terms, function_word
    assert judging.marked_words("रुद्रों शंकर और यक्ष मैं हूँ तथा", terms) == ["रुद्रों", "शंकर", "यक्ष"]
    assert [judging.letters(w) for w in ("मैं", "हूँ", "तथा", "पुरुष")] == [1, 1, 2, 3]
    # a word that merely begins like the query word is not marked; its inflected forms are
    assert judging.marked_words("पुरुजित् पुरुषः पुरुषों पुरुषस्य पुरुष", judging.query_terms("पुरुष")) == [
        "पुरुषः", "पुरुषों", "पुरुषस्य", "पुरुष"]
    assert judging.marked_words("sati satipaṭṭhāna satiyā", judging.query_terms("sati")) == ["sati", "satiyā"]
    assert judging.marked_words("dhammassa dhammo dhammā dhammika dhammaṁ", judging.query_terms("dhamma")) == [
        "dhammassa", "dhammo", "dhammā", "dhammaṁ"]
    assert judging.marked_words("abhāvo abhāvaḥ abhi", judging.query_terms("abhāvaḥ")) == ["abhāvo", "abhāvaḥ"]
    assert judging.marked_words("pleasure pleasures pleasing", judging.query_terms("pleasures")) == [
        "pleasure", "pleasures"]
    # the lists are the kept ones, folded as the words are
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert all(w in judging.STOPWORDS for w in ENGLISH_STOP_WORDS) and "мои" in judging.STOPWORDS  # мой, folded


def test_a_pair_view_is_blind_and_hashes_the_document_shown(gita):
    qid, doc = _pairs(gita, 1)[0]
    view = judging.pair_view("gita", qid, doc, gita.queries, gita.documents)
    assert view.doc_hash == document_hash(gita.documents[doc]) and view.address == gita.documents[doc].address
    assert [h for h, _ in view.sections] == ["Original", "Transliterations", "Translations", "Word meanings"]
    assert view.marks > 0 and "<mark>" in "".join(e.text for _, entries in view.sections for e in entries)
    assert set(view.__dataclass_fields__) == {"dataset", "query_id", "doc_id", "query_text", "query_type", "language",
                                              "address", "sections", "doc_hash", "marks"}  # nothing of a run or a pool
    gone = judging.pair_view("gita", qid, "no-such-doc", gita.queries, gita.documents)
    assert gone.missing and gone.sections == ()


def test_texts_are_labelled_in_a_scholars_terms(gita):
    """Transliterations by scheme, translations by translator, an exact duplicate once, field names as words,
    each text with its language tag; no "language und" for a reference query."""
    doc = next(d for d in gita.documents.values()
               if len({t.text for t in d.texts if t.field == "translation"}) < sum(t.field == "translation"
                                                                                  for t in d.texts))
    by_text: dict[str, list[str]] = {}
    for t in doc.texts:
        if t.field == "translation":
            by_text.setdefault(t.text.strip(), []).append(t.source)
    sections = dict(judging.text_sections(doc))
    assert list(sections) == ["Original", "Transliterations", "Translations", "Word meanings"]
    assert [(e.label, e.lang) for e in sections["Original"]] == [("Sanskrit, Devanagari", "sa")]
    assert [(e.label, e.lang) for e in sections["Transliterations"]] == [
        ("the edition's own simplified scheme (ṣh, śh, ch, ṛi for IAST ṣ, ś, c, ṛ)", "sa-Latn"), ("IAST", "sa-Latn")]
    translations = [(e.label, e.text, e.lang) for e in sections["Translations"]]
    assert len(translations) == len(by_text) < sum(t.field == "translation" for t in doc.texts)  # duplicates once
    for label, text, lang in translations:
        lang_word = {"en": "English", "hi": "Hindi"}[lang]
        assert label == f"{'; '.join(by_text[text])} · {lang_word}"
    assert any("; " in label for label, _t, _l in translations)  # the duplicate names both translators
    assert [e.label for e in sections["Word meanings"]] == ["Sanskrit words in the edition's own scheme",
                                                           "Sanskrit words in IAST"]
    ref = gita.queries[(gita.queries["query_type"] == "reference") & (gita.queries["language"] == "und")].index[0]
    view = judging.pair_view("gita", ref, doc.doc_id, gita.queries, gita.documents)
    assert view.caption() == "Query · reference · dataset gita" and view.query_lang == ""
    para = gita.queries[(gita.queries["query_type"] == "paraphrase") & (gita.queries["language"] == "hi")].index[0]
    hview = judging.pair_view("gita", para, doc.doc_id, gita.queries, gita.documents)
    assert hview.caption() == "Query · paraphrase · in Hindi · dataset gita" and hview.query_lang == "hi"
    assert 'lang="hi"' in judging.query_html(hview)


# ------------------------------------------------------------------ Judge: sign-in


def test_the_judge_page_takes_rater_tokens_only(store, gita, jhome):
    _pool(store, _pairs(gita, 3))
    _ann, token = store.add_rater("ann")
    access = auth.FileTokens(jhome).add("engineer")  # a dashboard access token must not let anyone judge
    at = _app(PAGES / "judge.py")
    assert [t.value for t in at.title] == ["Judge"] and not at.get("progress")
    for wrong in ("not-" + token, access):
        at.text_input(key="wb_rater_token_input").input(wrong)
        at.button[0].click().run()
        assert [e.value for e in at.error] == ["That is not a valid rater token (or it was revoked)."]
        assert not at.get("progress") and not _rows(store)
    at.text_input(key="wb_rater_token_input").input(token)
    at.button[0].click().run()
    assert not at.exception and _progress(at) == "0 of 3 judged (3 left)"
    assert token not in str(at.query_params) and len(at.query_params["s"]) >= 40  # a session id, never the token
    store.revoke_rater("ann")  # revoked: signed out at the next click
    at.run()
    assert not at.get("progress") and "s" not in at.query_params
    assert [e.value for e in at.error] == ["Your rater token is no longer valid (it was revoked); sign in with another."]


# ------------------------------------------------------------------ Judge: grading


def test_a_grade_writes_exactly_one_judgment_with_the_document_hash(store, gita):
    pairs = _pairs(gita, 3)
    _pool(store, pairs)
    ann, token = store.add_rater("ann")
    at = _app(PAGES / "judge.py", token)
    aid, qid, doc = _held(store, ann)
    shown = " ".join(m.value for m in at.markdown)
    assert f"`{gita.documents[doc].address}`" in shown
    assert "gita: pool quality: no pooled pair is graded yet" in [c.value for c in at.sidebar.caption]
    assert any(gita.queries.at[qid, "text"][:40].replace('"', "&quot;") in h.proto.body for h in at.get("html"))
    at.text_area(key=f"judge_note_{aid}").input("a parallel verse")
    _seen()
    at.button(key=_g(2, aid)).click().run()
    assert not at.exception and not at.error
    assert _rows(store) == [("judge", ann.rater_id, aid, qid, doc, 2, False, "a parallel verse",
                             document_hash(gita.documents[doc]))]
    assert _progress(at) == "1 of 3 judged (2 left)"
    assert _held(store, ann)[0] != aid  # the next pair is shown
    assert [s.value for s in at.success] == [f"Saved {gita.documents[doc].address}: 2 · highly relevant. "
                                             "Press U to undo."]


def test_cannot_judge_and_undo(store, gita):
    _pool(store, _pairs(gita, 3), raters=1)
    ann, token = store.add_rater("ann")
    at = _app(PAGES / "judge.py", token)
    aid, qid, doc = _held(store, ann)
    _seen()
    at.button(key=_g(None, aid)).click().run()
    assert _rows(store) == [("judge", ann.rater_id, aid, qid, doc, None, True, None, document_hash(gita.documents[doc]))]
    assert _progress(at) == "1 of 3 judged (2 left)"
    at.button(key="judge_undo").click().run()
    assert not at.exception
    assert [r[0] for r in _rows(store)] == ["judge", "retract"]  # appended, never rewritten
    assert _held(store, ann)[0] == aid and _progress(at) == "0 of 3 judged (3 left)"
    address, query = gita.documents[doc].address, judging.shorten(gita.queries.at[qid, "text"], 60)
    assert [s.value for s in at.success] == [f"Undone: your judgment of {address} for “{query}” is taken back; it is "
                                             "yours to judge again, below."]  # the address and query, not ids
    assert f"`{address}`" in " ".join(m.value for m in at.markdown)  # shown again
    assert store.my_judgments(ann, "gita") == []
    _seen()
    at.button(key=_g(1, aid)).click().run()
    assert [(r[0], r[5]) for r in _rows(store)] == [("judge", None), ("retract", None), ("judge", 1)]


def test_a_stale_page_submitting_twice_shows_the_error_and_writes_nothing(store, gita):
    """Two tabs of one rater show the same held pair; the second tab's submit is refused by the store."""
    _pool(store, _pairs(gita, 3))
    ann, token = store.add_rater("ann")
    first = _app(PAGES / "judge.py", token)
    stale = _app(PAGES / "judge.py", token)
    aid, qid, doc = _held(store, ann)
    _seen()
    first.button(key=_g(1, aid)).click().run()
    stale.button(key=_g(0, aid)).click().run()
    assert not stale.exception
    address, query = gita.documents[doc].address, judging.shorten(gita.queries.at[qid, "text"], 60)
    assert [w.value for w in stale.warning] == [
        f"Not saved: {address} for “{query}” is no longer open for you — judged already (a second key press, or "
        "another tab or window), or taken over by another rater after a long pause. Nothing was written; the pair "
        "below is your next one."]
    assert [(r[0], r[2], r[5]) for r in _rows(store)] == [("judge", aid, 1)]
    assert _progress(stale) == "1 of 3 judged (2 left)"  # and the stale tab moved on to the next pair
    # the store refuses it too, whoever asks: the slot is not open
    from workbench.judging.store import JudgeError

    with pytest.raises(JudgeError, match="already judged"):
        store.judge(ann, aid, 0)
    assert len(_rows(store)) == 1


def test_a_quick_second_press_never_grades_the_next_pair(store, gita):
    """The scholar pressed 1 twice, 80-300 ms apart, and the second grade landed on a pair they never saw.
    The buttons' keys now carry the assignment shown: the second press reaches either the judged pair's
    button (no longer open: refused) or, once drawn, the next pair's, which is refused until it has been
    on screen for MIN_SEEN_S. Exactly one judgment; the next pair stays open."""
    _pool(store, _pairs(gita, 3), raters=1)
    ann, token = store.add_rater("ann")
    at = _app(PAGES / "judge.py", token)
    first, _q, _d = _held(store, ann)
    _seen()
    at.button(key=_g(1, first)).click().run()  # press 1
    second, qid, doc = _held(store, ann)
    assert second != first and not at.button(key=_g(1, second)).disabled
    with pytest.raises(KeyError):
        at.button(key=_g(1, first))  # the judged pair's buttons are gone: no key names two pairs
    at.button(key=_g(1, second)).click().run()  # press 1 again at once: the next pair, just drawn
    address, query = gita.documents[doc].address, judging.shorten(gita.queries.at[qid, "text"], 60)
    [warning] = [w.value for w in at.warning]
    assert re.fullmatch(rf"Not saved: that key press came 0\.\d\d s after {re.escape(address)} for “{re.escape(query)}” "
                        r"appeared — too soon to have read it \(a quick second press\?\)\. Nothing was written; read it, "
                        r"then press the key again\.", warning), warning
    # a press queued before the redraw (the callback of the judged pair's button) is refused too
    at.session_state["_judge_action"] = {"kind": "judge", "assignment_id": first, "grade": 1, "doc_hash": None,
                                         "note_key": "none", "address": "BG ?", "pair": "the judged pair"}
    at.run()
    assert [s.value for s in at.success] == [
        "the judged pair is already saved as 1 · relevant (a second press was ignored); nothing more was written. "
        "The pair below is your next one."]
    assert [(r[2], r[5]) for r in _rows(store)] == [(first, 1)]  # exactly one judgment
    assert _held(store, ann)[0] == second and _progress(at) == "1 of 3 judged (2 left)"  # the next pair ungraded
    _seen()
    at.button(key=_g(2, second)).click().run()  # read, then pressed: taken
    assert [(r[2], r[5]) for r in _rows(store)] == [(first, 1), (second, 2)] and not at.warning


# ------------------------------------------------------------------ Judge: sessions that survive a reload


def test_a_rater_stays_signed_in_across_a_reload_and_revocation_still_ends_it(store, gita, bind):
    """A reload is a new Streamlit session: the rater comes back by the ``?s=`` session id in the address (an
    opaque id, never the token), to the same held pair. Signing out ends it on the server; so does revocation,
    at the next run; 12 hours without use end it too."""
    from dashboards import ui

    _pool(store, _pairs(gita, 3))
    ann, token = store.add_rater("ann")
    bind("127.0.0.1")
    at = _app(APP, link=token)  # the ?token= link
    assert [t.value for t in at.title] == ["Judge"] and "token" not in at.query_params
    sid = at.query_params["s"]
    assert len(sid) >= 40 and token not in sid and auth.digest(token) not in sid
    held = _held(store, ann)
    reloaded = _app(APP, s=sid)  # only the address: a reload
    assert [t.value for t in reloaded.title] == ["Judge"] and _progress(reloaded) == "0 of 3 judged (3 left)"
    assert "Judging as **ann** (rater)" in [m.value for m in reloaded.sidebar.markdown]
    assert _held(store, ann) == held  # the same pair on screen, nothing claimed twice
    reloaded.button(key="wb_rater_sign_out").click().run()
    assert "s" not in reloaded.query_params and not reloaded.get("progress")
    gone = _app(APP, s=sid)
    assert [w.value for w in gone.warning] == ["Your judging session has ended (you signed out, or the dashboard was "
                                               "restarted); sign in again with your rater token."]
    assert not gone.get("progress") and "s" not in gone.query_params
    # 12 hours without use
    idle = _app(APP, link=token).query_params["s"]
    sessions = ui.rater_sessions()
    sessions._clock = lambda: time.monotonic() + 12 * 3600 + 1
    try:
        expired = _app(APP, s=idle)
    finally:
        sessions._clock = time.monotonic
    assert [w.value for w in expired.warning] == ["Your judging session ended after 12 hours without use; sign in "
                                                  "again with your rater token."]
    # revocation ends a live session at its next run, and the server forgets it
    live = _app(APP, link=token).query_params["s"]
    store.revoke_rater("ann")
    revoked = _app(APP, s=live)
    assert [w.value for w in revoked.warning] == ["Your rater token is no longer valid (it was revoked); sign in with "
                                                  "another."]
    assert not revoked.get("progress") and ui.rater_sessions().lookup(live) == (None, "unknown")


def test_judging_sessions_slide_and_expire_after_12_hours_without_use():
    now = [1000.0]
    sessions = auth.RaterSessions(clock=lambda: now[0])
    assert sessions.ttl == 12 * 3600
    sid, other = sessions.start("d" * 64), sessions.start("e" * 64)
    assert sid != other and len(sessions) == 2
    for _ in range(3):  # each use moves the end on: 33 hours after the start, used every 11 hours
        now[0] += 11 * 3600
        assert sessions.lookup(sid) == ("d" * 64, "")
    now[0] += 12 * 3600
    assert sessions.lookup(sid) == (None, "expired") and sessions.lookup(sid) == (None, "unknown")
    assert sessions.lookup("made-up") == (None, "unknown") and sessions.lookup(None) == (None, "unknown")
    sessions.start("f" * 64)  # a new session forgets the expired ones
    assert len(sessions) == 1


def test_an_adjudicator_lands_on_adjudicate_and_claims_no_pair(store, gita, bind):
    _pool(store, _pairs(gita, 2))
    cy, token = store.add_rater("cy", "adjudicator")
    bind("127.0.0.1")
    at = _app(APP, link=token)  # a link to the dashboard
    assert [t.value for t in at.title] == ["Adjudicate"]
    at = _app(APP)  # a link to the Judge page
    at.query_params["token"] = token
    at.switch_page("views/judge.py").run()
    assert not at.exception and [t.value for t in at.title] == ["Adjudicate"]
    claimed = store.conn().execute("SELECT count(*) FROM wb_judge.assignments WHERE rater_id = %s",
                                   (cy.rater_id,)).fetchone()[0]
    assert claimed == 0  # opening Judge would have claimed a pair
    at.switch_page("views/judge.py").run()  # Judge is one click away
    assert [t.value for t in at.title] == ["Judge"] and _progress(at) == "0 of 2 judged (2 left)"


def test_a_bad_token_link_says_so_on_loopback_too(store, gita, bind):
    bind("127.0.0.1")
    at = _app(APP, link="not-a-token")
    assert "token" not in at.query_params
    assert [w.value for w in at.warning] == ["The token in the link is not valid (or was revoked); the pages below are "
                                             "open on this machine without one. Raters sign in on the Judge page."]
    _ann, token = store.add_rater("ann")
    store.revoke_rater("ann")
    at = _app(APP, link=token)
    assert [w.value for w in at.warning][0].startswith("The token in the link is not valid (or was revoked)")


def test_an_empty_queue_says_how_to_look_for_more_without_reloading(store, gita):
    _pool(store, _pairs(gita, 1), raters=1)
    ann, token = store.add_rater("ann")
    a = store.next_assignment(ann, "gita")
    store.judge(ann, a.assignment_id, 1)
    at = _app(PAGES / "judge.py", token)
    assert [s.value for s in at.success] == [
        "Your queue is empty: every pair pooled for you is judged. Thank you! New pairs appear here when the engineers "
        "pool more: press “Check for new pairs” (you stay signed in)."]
    assert "reload the page" not in _everything(at)
    _pool(store, _pairs(gita, 2)[1:], raters=1)  # the engineers pool more
    at.button(key="judge_refresh").click().run()
    assert _progress(at) == "1 of 2 judged (1 left)"


# ------------------------------------------------------------------ Judge: what the scholar reads


def test_the_judge_page_labels_texts_tags_their_language_and_colours_the_grades(store, gita, jhome):
    from workbench.results.store import dataset_files

    doc = next(d for d in gita.documents.values()
               if len({t.text for t in d.texts if t.field == "translation"}) < sum(t.field == "translation"
                                                                                  for t in d.texts))
    qid = gita.queries[(gita.queries["language"] == "und") & (gita.queries["query_type"] == "reference")].index[0]
    store.create_pool("gita", [PoolPair(qid, doc.doc_id)], raters_per_pair=1)
    pali = dataset_files(str(jhome), "bilara-passages")
    pqid = pali.queries[pali.queries["query_type"] == "term"].index[0]
    pdoc = next(iter(pali.documents))
    store.create_pool("bilara-passages", [PoolPair(pqid, pdoc)], raters_per_pair=1)
    _ann, token = store.add_rater("ann")
    at = _app(PAGES / "judge.py", token)
    at.selectbox(key="judge_dataset").set_value("gita").run()
    assert [c.value for c in at.caption][0] == "Query · reference · dataset gita"  # no "language und"
    assert "judge_cyr" not in [c.key for c in at.sidebar.checkbox]  # Pali only
    bodies = "\n".join(h.proto.body for h in at.get("html"))
    for lang in ("sa", "sa-Latn", "hi", "en"):
        assert f'class="wb-judge-text" lang="{lang}"' in bodies, lang
    for label in ("Sanskrit, Devanagari", "IAST", "the edition&#x27;s own simplified scheme", "Swami Sivananda · English",
                  "Swami Ramsukhdas · Hindi", "Sanskrit words in IAST"):
        assert f">{label}" in bodies, label
    assert "; " in "".join(re.findall(r'class="wb-judge-label"[^>]*>([^<]*)<', bodies))  # a duplicate, two names
    assert "[word_meanings" not in _everything(at) and "Word meanings" in [m.value.strip("*") for m in at.markdown]
    style = judging.page_css()
    assert "Noto Sans Devanagari" in style and style in bodies
    # Streamlit's own fonts get the served Devanagari too (guideline, tables, select boxes, lists), same descriptors
    faces = re.findall(r'@font-face \{ font-family: "([^"]+)"; font-style: (\w+); font-weight: 100 900;[^}]*'
                       + re.escape(judging.DEVANAGARI_FONT_FILE) + r'[^}]*unicode-range: U\+0900-097F', style)
    assert sorted(faces) == sorted([("Noto Sans Devanagari", "normal")] + [(f, s) for f in
                                   ("Source Sans", "Source Serif", "Source Code Pro") for s in ("normal", "italic")])
    colours = {g: re.search(rf'st-key-judge_g{g}_"\] button, [^{{]*{{ background-color: (#[0-9a-f]{{6}})', style).group(1)
               for g in (0, 1, 2)}
    assert len(set(colours.values())) == 3, colours
    at.selectbox(key="judge_dataset").set_value("bilara-passages").run()
    assert "judge_cyr" in [c.key for c in at.sidebar.checkbox]
    assert 'class="wb-judge-text" lang="pi"' in "\n".join(h.proto.body for h in at.get("html"))
    assert [c.value for c in at.caption][0] == "Query · term · in Pali · dataset bilara-passages"


# ------------------------------------------------------------------ who sees what


def test_a_plain_rater_sees_only_their_own_judgments_and_no_adjudication(store, gita, bind):
    pairs = _pairs(gita, 2)
    _pool(store, pairs)
    ann, ann_token = store.add_rater("rater-ann")
    bob, bob_token = store.add_rater("rater-bob")
    for rater, grade, note in ((ann, 0, "ANN-SECRET-NOTE"), (bob, 2, "BOB-OWN-NOTE")):
        for _ in pairs:
            a = store.next_assignment(rater, "gita")
            store.judge(rater, a.assignment_id, grade, note=note)
    at = _app(PAGES / "judge.py", bob_token)
    at.toggle(key="judge_mine").set_value(True).run()
    mine = at.dataframe[0].value
    assert list(mine.columns) == ["document", "query", "grade", "note", "when"]  # in words: no ids
    assert sorted(zip(mine["document"], mine["query"])) == sorted(
        (gita.documents[d].address, judging.shorten(gita.queries.at[q, "text"])) for q, d in pairs)
    assert set(mine["grade"]) == {"2 · highly relevant"} and set(mine["note"]) == {"BOB-OWN-NOTE"}
    page = _everything(at)
    assert "ANN-SECRET-NOTE" not in page and "rater-ann" not in page and "not relevant" not in " ".join(mine["grade"])
    # the app: a rater's session registers the judging page only
    bind("127.0.0.1")  # even where the engineer pages are open to anyone on this machine
    app = _app(APP, bob_token)
    assert [t.value for t in app.title] == ["Judge"]
    for other in ("adjudicate", "agreement", "query", "overview"):
        with pytest.raises(ValueError, match=r"Known pages: \['Judging', '[^']*judge\.py'\]"):
            app.switch_page(f"views/{other}.py")
    # and the pages themselves refuse a plain rater, whoever runs them
    adj = _app(PAGES / "adjudicate.py", bob_token)
    assert [e.value for e in adj.error][0].startswith("Only adjudicators see the adjudication queue")
    assert not adj.dataframe and "ANN-SECRET-NOTE" not in _everything(adj)
    agr = _app(PAGES / "agreement.py", bob_token)
    assert [e.value for e in agr.error][0].startswith("Agreement figures are for adjudicators and the engineers")
    assert not agr.dataframe and not agr.metric


def test_the_adjudicator_sees_both_grades_and_notes_and_records_the_final_grade(store, gita):
    from workbench.judging import agreement
    from workbench.judging.layers import final_grades

    pairs = _pairs(gita, 2)
    _pool(store, pairs)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    cy, cy_token = store.add_rater("cy", "adjudicator")
    for rater, grades in ((ann, {pairs[0]: 0, pairs[1]: 1}), (bob, {pairs[0]: 2, pairs[1]: 1})):
        for _ in pairs:
            a = store.next_assignment(rater, "gita")
            store.judge(rater, a.assignment_id, grades[(a.query_id, a.doc_id)], note=f"{rater.name} on {a.doc_id}")
    at = _app(PAGES / "adjudicate.py", cy_token)
    # the pair shown: each rater's grade and note, as text (a data grid is a canvas: a browser's find and copy miss it)
    [grades] = [h.proto.body for h in at.get("html") if "wb-adj-judgments" in h.proto.body]
    qid, doc = pairs[0]  # 0 vs 2: the only pair that waits
    assert re.findall(r"<li><b>(\w+)</b>: ([^<]+?) — <span[^>]*>“([^”]+)”", grades) == [
        ("ann", "0 · not relevant", f"ann on {doc}"), ("bob", "2 · highly relevant", f"bob on {doc}")]
    assert "Waits because: not adjudicated" in grades
    address, query = gita.documents[doc].address, gita.queries.at[qid, "text"]
    queue = at.dataframe[0].value
    assert list(zip(queue["document"], queue["query"])) == [(address, judging.shorten(query))]
    [picker] = [s for s in at.selectbox if s.label == "Pair"]  # keyed on the queue: see adjudicate.py
    assert picker.options == [f"{address} — “{judging.shorten(query, 70)}” (ann: 0 · not relevant · bob: 2 · highly "
                              "relevant)"]  # the address and the query, not ids
    at.text_area(key=f"adj_note:gita:{qid}:{doc}").input("the verse answers it in part")
    _seen()
    at.button(key=judging.adjudication_key(1, "gita", qid, doc)).click().run()
    assert not at.exception
    assert [s.value for s in at.success] == [f"Final grade of {address} for “{judging.shorten(query, 60)}”: "
                                             "1 · relevant.",
                                             "Nothing waits for adjudication on gita "
                                             f"({agreement.adjudication_rule(store.adjudicate_at('gita'))} come here)."]
    [adj] = store.adjudications("gita")
    assert (adj["query_id"], adj["doc_id"], adj["grade"], adj["adjudicator"], adj["note"]) == (
        qid, doc, 1, "cy", "the verse answers it in part")
    assert adj["doc_sha256"] == document_hash(gita.documents[doc])
    final = final_grades(store.current("gita"), store.adjudications("gita"))
    assert (final[(qid, doc)].grade, final[(qid, doc)].basis) == (1, "adjudicated")
    # a stale second click on the same pair writes nothing
    at.session_state["_adj_action"] = {"kind": "decide", "dataset": "gita", "query_id": qid, "doc_id": doc,
                                       "grade": 2, "doc_hash": adj["doc_sha256"], "note_key": "none",
                                       "tag": judging.pair_tag("gita", qid, doc), "pair": "that pair"}
    at.run()
    assert [e.value for e in at.error] == ["that pair no longer waits for adjudication (another adjudicator decided "
                                           "it, or this page was stale); nothing was written."]
    assert len(store.adjudications("gita")) == 1


def test_an_adjudicator_changes_and_undoes_a_decision(store, gita):
    """A slip of the key is not final: the Adjudicate page lists the adjudicator's recent decisions (address and
    query, not ids); "change" decides the pair again (the latest decision wins, the first stays in the store),
    "undo" appends a retraction and the pair, its grades still two apart, waits in the queue again."""
    from workbench.judging.layers import final_grades

    pairs = _pairs(gita, 2)
    _pool(store, pairs)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    _cy, cy_token = store.add_rater("cy", "adjudicator")
    for rater, grade in ((ann, 0), (bob, 2)):  # both pairs two apart
        for _ in pairs:
            a = store.next_assignment(rater, "gita")
            store.judge(rater, a.assignment_id, grade)
    at = _app(PAGES / "adjudicate.py", cy_token)
    assert [c.value for c in at.caption][0].startswith("2 pair(s) of gita wait")
    assert [c.value for c in at.caption][-1] == "You have not decided any pair of gita yet."
    qid, doc = sorted(pairs)[0]  # the queue's order: by query_id, doc_id
    words = f"{gita.documents[doc].address} for “{judging.shorten(gita.queries.at[qid, 'text'], 60)}”"
    tag = judging.pair_tag("gita", qid, doc)
    _seen()
    at.button(key=judging.adjudication_key(1, "gita", qid, doc)).click().run()  # the slip: 1
    assert [s.value for s in at.success] == [f"Final grade of {words}: 1 · relevant."]
    listed = [h.proto.body for h in at.get("html") if "→" in h.proto.body]
    assert len(listed) == 1 and listed[0].startswith(
        f"<b>{gita.documents[doc].address}</b> — “{html.escape(judging.shorten(gita.queries.at[qid, 'text'], 90))}” → "
        "<b>1 · relevant</b> · ")
    # change: the pair is shown again and decided again
    at.button(key=f"adj_change_{tag}").click().run()
    assert [i.value for i in at.info] == [f"Changing your decision on {words}: now 1 · relevant. Press 0, 1 or 2 for "
                                          "the new final grade."]
    _seen()
    at.button(key=judging.adjudication_key(2, "gita", qid, doc)).click().run()
    assert [s.value for s in at.success][0] == (f"Changed: the final grade of {words} is now 2 · highly relevant "
                                                "(was 1 · relevant).")
    [adj] = [a for a in store.adjudications("gita") if (a["query_id"], a["doc_id"]) == (qid, doc)]
    assert adj["grade"] == 2 and adj["adjudicator"] == "cy"
    rows = store.conn().execute("SELECT grade FROM wb_judge.adjudications WHERE query_id = %s AND doc_id = %s "
                                "ORDER BY adjudication_id", (qid, doc)).fetchall()
    assert rows == [(1,), (2,)]  # appended: the slip stays on record
    assert [c.value for c in at.caption][0].startswith("1 pair(s) of gita wait")
    # undo: a retraction is appended, and the pair, still 0 against 2, waits again
    at.button(key=f"adj_undo_{tag}").click().run()
    assert not at.exception
    assert [s.value for s in at.success] == [f"Undone: your final grade of {words} is withdrawn; the pair is back in "
                                             "the queue."]
    assert store.adjudications("gita") == []
    assert [c.value for c in at.caption][0].startswith("2 pair(s) of gita wait")
    assert final_grades(store.current("gita"), store.adjudications("gita"))[(qid, doc)].basis == "mean"
    assert store.conn().execute("SELECT count(*) FROM wb_judge.adjudications WHERE query_id = %s AND doc_id = %s",
                                (qid, doc)).fetchone()[0] == 3
    # an undo for a decision that is no longer there (a second click) writes nothing
    at.session_state["_adj_action"] = {"kind": "retract", "dataset": "gita", "query_id": qid, "doc_id": doc,
                                       "pair": words}
    at.run()
    assert [e.value for e in at.error] == [f"{words} is not among your current decisions (undone already, or "
                                           "decided again by another adjudicator); nothing was written."]
    assert store.conn().execute("SELECT count(*) FROM wb_judge.adjudications").fetchone()[0] == 3


def test_a_quick_second_press_never_decides_the_next_pair_either(store, gita, monkeypatch):
    # a longer guard than the page's 0.5 s, so that a loaded CI machine cannot make the second press "slow"
    monkeypatch.setattr(judging, "MIN_SEEN_S", 4.0)
    pairs = _pairs(gita, 2)
    _pool(store, pairs)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    _cy, cy_token = store.add_rater("cy", "adjudicator")
    for rater, grade in ((ann, 0), (bob, 2)):
        for _ in pairs:
            a = store.next_assignment(rater, "gita")
            store.judge(rater, a.assignment_id, grade)
    at = _app(PAGES / "adjudicate.py", cy_token)
    (q1, d1), (q2, d2) = sorted(pairs)
    _seen()
    at.button(key=judging.adjudication_key(1, "gita", q1, d1)).click().run()
    at.button(key=judging.adjudication_key(1, "gita", q2, d2)).click().run()  # at once: the next pair, just drawn
    assert [w.value for w in at.warning][0].startswith(f"Not saved: that key press reached "
                                                       f"{gita.documents[d2].address} for “")
    assert [(a["query_id"], a["doc_id"]) for a in store.adjudications("gita")] == [(q1, d1)]


def test_the_agreement_panel_shows_the_agreement_modules_numbers(store, gita, bind):
    from workbench.judging import agreement

    pairs = _pairs(gita, 6)
    _pool(store, pairs)
    ann, _ = store.add_rater("ann")
    bob, _ = store.add_rater("bob")
    given = {"ann": [0, 1, 2, 2, 1, 0], "bob": [0, 2, 2, 1, 1, 0]}
    for rater in (ann, bob):
        for _ in pairs:
            a = store.next_assignment(rater, "gita")
            store.judge(rater, a.assignment_id, given[rater.name][pairs.index((a.query_id, a.doc_id))])
    bind("127.0.0.1")  # an engineer on this machine: the Agreement page is in the navigation
    at = _app(APP)
    at.switch_page("views/agreement.py").run()
    assert not at.exception and [t.value for t in at.title] == ["Agreement"]
    want = agreement.agreement(store.current("gita"), query_types=dict(zip(gita.queries.index,
                                                                           gita.queries["query_type"])))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Krippendorff's alpha (ordinal)"] == f"{want['alpha']['value']:.3f}"
    assert metrics["Pairs with two or more grades"] == "6" and metrics["Raters"] == "2"
    pair = next(d.value for d in at.dataframe if "kappa [95% CI]" in d.value.columns).iloc[0]
    k = want["pairs"][0]["kappa"]
    assert pair["kappa [95% CI]"] == f"{k['value']:.3f} [{k['low']:.3f}, {k['high']:.3f}]"
    table = next(d.value for d in at.dataframe if "second 0" in d.value.columns)
    assert table.to_numpy().tolist() == want["pooled_confusion"] == [[2, 0, 0], [0, 1, 1], [0, 1, 1]]
    # the pool's quality (issue #41): pairs 1 and 6 agreed on 0, the other four are 1 or 2
    assert any(c.value.startswith("pool quality: 2 of 6 graded pooled pairs were 0 (33 %)") for c in at.caption)


# ------------------------------------------------------------------ the bind rule with rater tokens


def test_beyond_loopback_rater_tokens_let_raters_in_and_nobody_else(store, gita, jhome, bind):
    _pool(store, _pairs(gita, 2))
    bind("0.0.0.0")
    at = _app(APP)  # no token of either kind: the refusal names both commands
    [err] = [e.value for e in at.error]
    assert "without access tokens, so it shows nothing" in err and "`workbench judge rater add NAME`" in err
    _ann, token = store.add_rater("ann")
    from dashboards import ui

    ui._rater_tokens_exist.clear()
    assert auth.token_kinds(jhome) == {"rater"}
    at = _app(APP)  # now a sign-in form; a rater token opens the Judge page and nothing else
    assert [t.value for t in at.title] == ["Workbench dashboard"] and not at.error
    at.text_input(key="wb_token_input").input("wrong").run()
    at.button[0].click().run()
    assert [e.value for e in at.error] == ["That token is not valid (or was revoked)."]
    at.text_input(key="wb_token_input").input(token)
    at.button[0].click().run()
    assert [t.value for t in at.title] == ["Judge"] and _progress(at) == "0 of 2 judged (2 left)"
    with pytest.raises(ValueError, match="Known pages"):
        at.switch_page("views/overview.py")
    # ?token= once in a link works for a rater too, and leaves the address bar
    at = _app(APP, link=token)
    assert [t.value for t in at.title] == ["Judge"] and "token" not in at.query_params
    assert len(at.query_params["s"]) >= 40 and token not in at.query_params["s"]


def test_the_dashboard_serves_beyond_loopback_with_rater_tokens_only(store, jhome, pg_dsn):
    port = faults.free_port()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(WORKBENCH_HOME=str(jhome), WORKBENCH_PG_DSN=pg_dsn)
    refused = faults.run(["dashboard", "--host", "0.0.0.0", "--port", str(port), "--no-open"], env=env, timeout=120)
    assert refused.returncode == 2 and "`workbench judge rater add NAME`" in refused.stderr
    store.add_rater("ann")
    log = jhome / "dashboard-judge.log"
    with faults.dashboard(port, env, log, "--host", "0.0.0.0"):
        assert "(rater token required: the judging pages only, no access token exists)" in log.read_text()



# ------------------------------------------------------------------ the drill-down's send-to-pool


EXPERIMENT = """
name = "judgeboard"
datasets = ["gita"]
measures = ["R@10"]
depth = 20
[embedders.h]
kind = "hash"
dim = 16
[lanes.fts]
kind = "fulltext"
config = "wb_fold"
[lanes.ref]
kind = "reference"
[configs.both]
lanes = ["fts", "ref"]
fusion = "rrf"
k = 60
[configs.fts]
lanes = ["fts"]
"""


@pytest.fixture(scope="module")
def evaluated(built_home, pg_dsn, tmp_path_factory):
    """A home with one eval of two configs on the gita (full text and references; a tiny hash embedder for the table)."""
    from typer.testing import CliRunner

    from workbench.cli import app

    home = tmp_path_factory.mktemp("judge-eval-home")
    for shared in ("datasets", "cache"):
        (built_home / shared).mkdir(exist_ok=True)
        (home / shared).symlink_to(built_home / shared)
    (home / "judgeboard.toml").write_text(EXPERIMENT)
    mp = pytest.MonkeyPatch()
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    mp.setenv("WORKBENCH_HOME", str(home))
    mp.setenv("WORKBENCH_PG_DSN", pg_dsn)
    try:
        res = CliRunner().invoke(app, ["eval", str(home / "judgeboard.toml")])
        assert res.exit_code == 0, res.output
    finally:
        mp.undo()
    return home


def test_the_drill_down_sends_its_unjudged_documents_to_the_pool(store, evaluated, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(evaluated))
    at = _app(PAGES / "query.py")
    at.selectbox(key="q_baseline").set_value("judgeboard/both").run()
    at.selectbox(key="q_candidate").set_value("judgeboard/fts").run()
    at.multiselect(key="q_types").set_value(["paraphrase"]).run()
    qid = at.selectbox(key="q_query").value
    lists = [d.value for d in at.dataframe if "lanes" in getattr(d.value, "columns", [])]
    unjudged = list(dict.fromkeys(d for t in lists for d, j in zip(t["doc_id"], t["judged"]) if j == "unjudged"))
    assert unjudged, "the two top-10 lists hold no unlabelled document"
    send = at.button(key="q_send_pool")
    assert send.label == f"Send {len(unjudged)} unjudged to the judging pool"
    send.click().run()
    assert not at.exception
    [ok] = [s.value for s in at.success]
    assert ok.startswith("Pool 1: ") and f"{len(unjudged)} pair(s) of {qid} sent, 2 rater(s) each" in ok
    rows = store.conn().execute("SELECT query_id, doc_id, reason FROM wb_judge.pairs ORDER BY pair_id").fetchall()
    assert sorted(rows) == sorted((qid, d, "sent") for d in unjudged)
    assert store.conn().execute("SELECT count(*) FROM wb_judge.assignments").fetchone()[0] == 2 * len(unjudged)
    at.button(key="q_send_pool").click().run()  # again: nothing new, no empty pool
    assert [i.value for i in at.info][-1] == ("Every one of these pairs is already in a judging pool or judged; "
                                              "nothing was added.")
    assert store.conn().execute("SELECT count(*) FROM wb_judge.pools").fetchone()[0] == 1


# ------------------------------------------------------------------ guidelines, and a judging-only dashboard


def test_every_query_type_has_a_built_in_guideline_and_the_shipped_files_pass():
    """Each query type states what 2, 1, 0 and cannot judge mean; each shipped ``datasets/guidelines/NAME.toml``
    names a dataset of datasets.toml and only that dataset's query types."""
    import tomllib

    from workbench.dashboard import guidelines
    from workbench.types import QUERY_TYPES

    assert set(guidelines.DEFAULTS) == set(QUERY_TYPES)
    for qtype, g in guidelines.DEFAULTS.items():
        assert g.query_type == qtype and g.source == "built-in"
        assert all(text.strip() for _heading, text in g.items()), qtype
    defs = tomllib.loads((ROOT / "datasets" / "datasets.toml").read_text(encoding="utf-8"))["dataset"]
    shipped = sorted((ROOT / "datasets" / "guidelines").glob("*.toml"))
    assert [p.stem for p in shipped] == ["gita"]
    for path in shipped:
        assert path.stem in defs, path
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        assert set(raw) <= set(defs[path.stem]["query_types"]), path
        guides = guidelines.load(path.stem, path)
        for qtype in raw:
            assert guides[qtype].source == str(path)
            for key, text in raw[qtype].items():
                assert getattr(guides[qtype], key) == text.strip()
    # the three places where the first two scholars split (#28) are settled in the gita's file
    gita = guidelines.load("gita", ROOT / "datasets" / "guidelines" / "gita.toml")
    assert "chapter reference" in gita["reference"].relevant
    assert "synonym" in gita["term"].relevant
    assert "neighbouring verse" in gita["paraphrase"].not_relevant.replace("**", "")


def test_a_guidelines_file_replaces_what_it_names_and_bad_ones_are_refused_with_the_fix(tmp_path):
    from workbench.dashboard import guidelines
    from workbench.errors import ConfigError

    path = tmp_path / "guidelines" / "gita.toml"
    assert guidelines.guidelines_path("gita", tmp_path / "datasets.toml") == path
    assert guidelines.load("gita", path) == guidelines.DEFAULTS  # no file: the built-in texts
    path.parent.mkdir()
    path.write_text('[term]\nrelevant = """A synonym:\n**1**."""\n', encoding="utf-8")
    guides = guidelines.load("gita", path)
    assert guides["term"].relevant == "A synonym:\n**1**." and guides["term"].source == str(path)
    assert guides["term"].highly_relevant == guidelines.DEFAULTS["term"].highly_relevant
    assert guides["paraphrase"] == guidelines.DEFAULTS["paraphrase"]
    html_ = guidelines.guideline_html(guides["term"], "term")
    assert "A synonym: <b>1</b>." in html_ and 'data-query-type="term"' in html_ and "from gita.toml" in html_
    assert "&lt;script&gt;" in guidelines.guideline_html(
        guidelines.Guideline("term", "<script>", "a", "b", "c", "d"), "term")  # escaped, never markup
    for text, words in [
        ("[terms]\nrelevant = 'x'\n", ["[terms] is not a query type", "[paraphrase], [term], [reference], [page_ref]"]),
        ("[term]\nrelevent = 'x'\n", ["unknown key 'relevent'", "highly_relevant, relevant"]),
        ("[term]\nrelevant = 2\n", ["[term] relevant must be a non-empty text in quotes", "leave the key out"]),
        ("[term]\nrelevant = ''\n", ["must be a non-empty text"]),
        ("term = 'x'\n", ["term must be a section"]),
        ("[term\n", ["is not valid TOML", "remove it to show the built-in guidelines"]),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            guidelines.load("gita", path)
        assert str(path) in str(err.value) and all(w in str(err.value) for w in words), (text, str(err.value))


def test_the_judge_page_shows_the_pairs_guideline_from_the_datasets_file(store, gita, tmp_path, monkeypatch):
    """Beside the pair: the guideline of its query type, the dataset's file over the built-in texts; a file that
    does not pass is named in a warning and the built-in guideline is shown meanwhile."""
    from workbench.dashboard import guidelines

    shutil.copy(ROOT / "datasets" / "datasets.toml", tmp_path / "datasets.toml")
    (tmp_path / "guidelines").mkdir()
    (tmp_path / "guidelines" / "gita.toml").write_text('[term]\nnot_relevant = "GUIDE-TERM-0"\n', encoding="utf-8")
    monkeypatch.setenv("WORKBENCH_DATASETS", str(tmp_path / "datasets.toml"))
    qid = gita.queries[gita.queries["query_type"] == "term"].index[0]
    store.create_pool("gita", [PoolPair(qid, next(iter(gita.qrels[qid])))], raters_per_pair=1)
    _ann, token = store.add_rater("ann")
    at = _app(PAGES / "judge.py", token)
    [box] = [h.proto.body for h in at.get("html") if 'class="wb-guidelines"' in h.proto.body]
    assert 'data-query-type="term"' in box and "GUIDE-TERM-0" in box
    assert html.escape(guidelines.DEFAULTS["term"].highly_relevant) in box
    (tmp_path / "guidelines" / "gita.toml").write_text("[term]\nnot_relevent = 'x'\n", encoding="utf-8")
    at.run()
    [warning] = [w.value for w in at.warning if "guidelines" in w.value]
    assert "unknown key 'not_relevent'" in warning and "The built-in guidelines are shown meanwhile." in warning
    [box] = [h.proto.body for h in at.get("html") if 'class="wb-guidelines"' in h.proto.body]
    assert "GUIDE-TERM-0" not in box and html.escape(guidelines.DEFAULTS["term"].not_relevant) in box


def test_a_judging_only_dashboard_shows_no_engineer_page_whatever_the_address_or_token(store, gita, jhome, bind,
                                                                                      monkeypatch):
    """`workbench dashboard --judging-only` (WORKBENCH_DASHBOARD_JUDGING_ONLY=1): on 127.0.0.1 without tokens, and
    with a valid access token, the rater sign-in alone; a rater gets the judging pages, as anywhere."""
    _pool(store, _pairs(gita, 2))
    _ann, token = store.add_rater("ann")
    bind("127.0.0.1")
    monkeypatch.setenv("WORKBENCH_DASHBOARD_JUDGING_ONLY", "1")
    for query in ({}, {"dataset": "gita"}):
        at = _app(APP, **query)
        assert [t.value for t in at.title] == ["Judge"] and "Sign in to judge" in _everything(at)
        assert not at.get("progress") and "Overview" not in _everything(at)
        assert "Leave judging" not in _everything(at)
    at = _app(APP, link="not-a-token")  # a wrong link: the sign-in says so, and names no pages that are not there
    assert [e.value for e in at.error] == ["The token in the link is not valid (or was revoked); sign in below with "
                                           "your rater token, or ask for a new one."]
    assert "pages below" not in _everything(at) and "Overview" not in _everything(at)
    access = auth.FileTokens(jhome).add("eng")
    at = _app(APP, link=access)  # an engineer's access token opens nothing more here
    assert [t.value for t in at.title] == ["Judge"] and "Sign in to judge" in _everything(at)
    at = _app(APP, link=token)
    assert [t.value for t in at.title] == ["Judge"] and _progress(at) == "0 of 2 judged (2 left)"
    with pytest.raises(ValueError, match="Known pages"):
        at.switch_page("views/overview.py")
    monkeypatch.delenv("WORKBENCH_DASHBOARD_JUDGING_ONLY")
    at = _app(APP, link=access)  # the engineers' own dashboard, as before
    assert [t.value for t in at.title] == ["Overview"]


# ------------------------------------------------------------------ the browser: keyboard only


#: Each rater's grade of pair i (by i % 5): equal, 1 apart, equal, 2 apart, 2 apart.
ANN, BOB = (0, 1, 2, 0, 2), (0, 2, 2, 2, 0)
#: What the adjudicator decides for every pair 2 apart.
FINAL = 1


def _wait_text(drv, want, timeout: float = 60) -> str:
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        try:
            text = drv.find_element(By.TAG_NAME, "body").text
            busy = any(el.is_displayed() and ("Running" in el.text or "Stop" in el.text)
                       for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'))
        except Exception:  # noqa: BLE001 - re-rendering
            time.sleep(0.1)
            continue
        if (want(text) if callable(want) else want in text) and not busy:
            time.sleep(judging.MIN_SEEN_S + 0.1)  # settled, and long enough on screen for a grade to be taken
            return drv.find_element(By.TAG_NAME, "body").text
        time.sleep(0.1)
    raise AssertionError(f"waited {timeout:.0f} s for {want!r}; the page shows: {text[:1500]}")


def _press(drv, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(drv).send_keys(key).perform()


def _browser_or_skip():
    import browser

    found = browser.find_browser()
    if found is None:
        if os.environ.get("WORKBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium and chromedriver are not installed but WORKBENCH_REQUIRE_BROWSER=1 "
                        "(apt-get install chromium chromium-driver)")
        pytest.skip("headless Chromium not installed: apt-get install chromium chromium-driver")
    return found


@pytest.mark.browser
def test_keys_in_the_browser_one_grade_per_press_after_a_toggle_with_shift_and_across_a_reload(store, gita, jhome,
                                                                                                 pg_dsn, tmp_path):
    """The scholar's browser session, replayed: signed in by a link, the token leaves the address and a
    session id takes its place, and a reload keeps the rater signed in on the same pair; pressing 1 twice
    80, 200 and 300 ms apart grades exactly one pair each time and leaves the next ungraded; after a click
    on the "Show my judgments" toggle (the focus stays on it) the keys still work, and Shift+X, Shift+U
    do what x and u do; the three grade buttons have three colours; the texts carry their languages.
    Screenshot in test-artifacts/judge/keys.png."""
    import browser
    from selenium.webdriver.common.by import By

    found = _browser_or_skip()
    out = Path(os.environ.get("WORKBENCH_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "judge"
    _pool(store, _pairs(gita, 8), raters=1)
    ann, token = store.add_rater("rater-ann")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(WORKBENCH_HOME=str(jhome), WORKBENCH_PG_DSN=pg_dsn)
    dash = browser.Dashboard(env, tmp_path / "dashboard.log")
    drv = None
    try:
        dash.wait()
        drv = browser.chrome(*found)
        res = browser.open_page(drv, f"{dash.url}/judge?token={token}", ["0 of 8 judged"])
        assert not res["exceptions"] and "Judging as rater-ann (rater)" in res["text"], res
        url = drv.current_url
        assert token not in url and re.search(r"[?&]s=[A-Za-z0-9_-]{40,}", url), url
        held = _held(store, ann)
        drv.refresh()  # a reload: a new Streamlit session, the same rater and pair
        text = _wait_text(drv, "0 of 8 judged")
        assert "Judging as rater-ann (rater)" in text and "Sign in to judge" not in text and _held(store, ann) == held
        # two quick presses of 1: one judgment, the next pair ungraded
        for step, gap in enumerate((0.08, 0.2, 0.3)):
            _wait_text(drv, f"{step} of 8 judged")
            _press(drv, "1")
            time.sleep(gap)
            _press(drv, "1")
            _wait_text(drv, f"{step + 1} of 8 judged")
            time.sleep(1.0)  # anything the second press did has happened by now
            _wait_text(drv, f"{step + 1} of 8 judged")
            assert [(r[0], r[5]) for r in _rows(store)] == [("judge", 1)] * (step + 1), f"gap {gap}"
            assert len(store.my_judgments(ann)) == step + 1
        # the keys after a click on the toggle, whose input keeps the focus
        drv.find_element(By.XPATH, "//label[.//*[contains(text(), 'Show my judgments')]]").click()
        _wait_text(drv, "3 of 8 judged")
        assert drv.find_element(By.CSS_SELECTOR, ".st-key-judge_mine input").is_selected()  # the table is shown
        assert drv.switch_to.active_element.get_attribute("type") == "checkbox"
        _press(drv, "2")
        _wait_text(drv, "4 of 8 judged")
        assert _rows(store)[-1][5] == 2
        _press(drv, "X")  # Shift+X
        _wait_text(drv, "5 of 8 judged")
        assert _rows(store)[-1][6] is True  # cannot judge
        _press(drv, "U")  # Shift+U
        _wait_text(drv, lambda t: "Undone:" in t and "4 of 8 judged" in t)
        assert _rows(store)[-1][0] == "retract"
        colours = drv.execute_script(
            "return [0, 1, 2].map(g => getComputedStyle(document.querySelector("
            "'[class*=\"st-key-judge_g' + g + '_\"] button')).backgroundColor)")
        assert len(set(colours)) == 3, colours
        langs = {el.get_attribute("lang") for el in drv.find_elements(By.CSS_SELECTOR, ".wb-judge-text")}
        assert {"sa", "sa-Latn", "hi", "en"} <= langs, langs
        family = drv.execute_script("return getComputedStyle(document.querySelector('.wb-judge-text')).fontFamily")
        assert "Noto Sans Devanagari" in family, family
        browser.screenshot(drv, out / "keys.png")
    finally:
        if drv is not None:
            drv.quit()
        dash.stop()
    assert len(_rows(store)) == 6 and (out / "keys.png").stat().st_size > 10_000


@pytest.mark.browser
def test_two_raters_judge_by_keyboard_an_adjudicator_resolves_and_export_writes_the_qrels(store, gita, jhome, pg_dsn,
                                                                                            tmp_path):
    """Two raters judge the same 20 pairs with the keyboard only (0, 1, 2, X, U, Tab out of a note),
    an adjudicator resolves the 8 pairs two grades apart, and `workbench judge export` writes the
    qrels that follow: adjudicated 1, agreed grades, one grade apart the lower one. Neither rater's
    page ever holds the other's name or notes. Screenshots in test-artifacts/judge/."""
    import browser
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    found = _browser_or_skip()
    out = Path(os.environ.get("WORKBENCH_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "judge"
    pairs = _pairs(gita, 20)
    _pool(store, pairs)
    store.set_adjudicate_at("gita", 2)  # only the pairs two grades apart wait (the default, 1, sends 1 vs 2 too)
    by_address = {gita.documents[d].address: i for i, (_q, d) in enumerate(pairs)}
    tokens = {name: store.add_rater(name)[1] for name in ("rater-ann", "rater-bob")}
    _cy, cy_token = store.add_rater("lead-cy", "adjudicator")
    grades = {"rater-ann": ANN, "rater-bob": BOB}
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(WORKBENCH_HOME=str(jhome), WORKBENCH_PG_DSN=pg_dsn)
    dash = browser.Dashboard(env, tmp_path / "dashboard.log")
    drivers = []
    try:
        dash.wait()
        for name, other in (("rater-ann", "rater-bob"), ("rater-bob", "rater-ann")):
            drv = browser.chrome(*found)
            drivers.append(drv)
            res = browser.open_page(drv, f"{dash.url}/judge?token={tokens[name]}", ["0 of 20 judged"])
            assert not res["exceptions"] and "Page not found" not in res["text"], res
            assert f"Judging as {name} (rater)" in res["text"]
            step = 0
            while True:
                text = _wait_text(drv, lambda t, step=step: f"{step} of 20 judged" in t)
                source = drv.page_source
                assert other not in source and f"NOTE-{other}" not in source, f"{name}'s page shows {other}'s work"
                if step == 20:
                    break
                address = re.search(r"^Document (.+)$", text, re.M).group(1).strip()
                i = by_address[address]
                g = grades[name][i % 5]
                if step == 0:  # cannot judge, then undo it: the same pair comes back
                    _press(drv, "x")
                    _wait_text(drv, "1 of 20 judged")
                    _press(drv, "u")
                    again = _wait_text(drv, "Undone:")
                    assert f"Document {address}\n" in again and "0 of 20 judged" in again
                if i % 4 == 1:  # a note, typed, then Tab out of the field and the key
                    area = drv.find_element(By.CSS_SELECTOR, "textarea")
                    area.click()
                    area.send_keys(f"NOTE-{name} on pair {i} (1, 2, x)")
                    area.send_keys(Keys.TAB)
                    _wait_text(drv, f"{step} of 20 judged")
                _press(drv, str(g))
                step += 1
                if step == 10:
                    browser.screenshot(drv, out / f"judge-{name}.png")
        # every grade as given, notes with them, one "cannot judge" retracted per rater
        cur = {(r["rater"], r["query_id"], r["doc_id"]): r for r in store.current("gita")}
        for name in grades:
            for i, (q, d) in enumerate(pairs):
                row = cur[(name, q, d)]
                assert row["grade"] == grades[name][i % 5] and not row["cannot_judge"]
                assert row["doc_sha256"] == document_hash(gita.documents[d])
                assert row["note"] == (f"NOTE-{name} on pair {i} (1, 2, x)" if i % 4 == 1 else None)
        retracts = store.conn().execute("SELECT count(*) FROM wb_judge.judgments WHERE action = 'retract'").fetchone()
        assert retracts[0] == 2

        # the adjudicator: the 8 pairs two grades apart, resolved with the keyboard
        drv = browser.chrome(*found)
        drivers.append(drv)
        res = browser.open_page(drv, f"{dash.url}/adjudicate?token={cy_token}", ["8 pair(s) of gita wait"])
        assert not res["exceptions"] and "Page not found" not in res["text"], res
        browser.screenshot(drv, out / "adjudicate.png")
        for left in range(8, 0, -1):
            _wait_text(drv, f"{left} pair(s) of gita wait")
            _press(drv, str(FINAL))
        _wait_text(drv, "Nothing waits for adjudication on gita")
        res = browser.open_page(drv, f"{dash.url}/agreement?token={cy_token}",
                                ["Krippendorff's alpha (ordinal)", "Per rater pair", "Judging as lead-cy (adjudicator)"])
        assert not res["exceptions"] and not res["missing"], res
        browser.screenshot(drv, out / "agreement.png")
    finally:
        for drv in drivers:
            drv.quit()
        dash.stop()

    # export: adjudicated pairs carry the final grade, agreed ones their grade, one apart the lower one
    qrels = tmp_path / "qrels.txt"
    done = faults.run(["judge", "export", "-d", "gita", "-o", str(qrels)], env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = {}
    for i, (q, d) in enumerate(pairs):
        a, b = ANN[i % 5], BOB[i % 5]
        expected[(q, d)] = FINAL if abs(a - b) == 2 else min(a, b)
    written = {}
    for line in qrels.read_text().splitlines():
        q, _zero, d, rel = line.split()
        written[(q, d)] = int(rel)
    assert written == expected
    from workbench.judging.layers import final_grades, human_qrels

    hashes = {d: document_hash(gita.documents[d]) for _q, d in pairs}
    assert {(r.query_id, r.doc_id): r.relevance for r in
            human_qrels(final_grades(store.current("gita"), store.adjudications("gita"), hashes))} == expected
    assert all((out / f).stat().st_size > 10_000 for f in ("judge-rater-ann.png", "judge-rater-bob.png",
                                                           "adjudicate.png", "agreement.png"))
