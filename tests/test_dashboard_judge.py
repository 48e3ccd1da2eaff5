"""The judging pages on a real PostgreSQL and the real gita build: Judge (a rater grades one pair at a
time, blind), Adjudicate (adjudicators only), Agreement, the drill-down's "send to the judging pool",
and who may see what. Each page's logic through Streamlit's AppTest; then two raters judging the same
20 pairs with the keyboard alone in headless Chromium, an adjudicator resolving their disagreements,
and ``workbench judge export`` writing the qrels that follow from the grades given.

What is asserted follows from the grades the test gives and from the store's rows, read with SQL:
exactly one judgment per click with the hash of the document shown, undo as an appended retraction,
a stale page's second submit refused with nothing written, a rater's page never holding another
rater's name or note.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest

import faults
from workbench.dashboard import auth, judging
from workbench.judging.store import JudgmentStore, PoolPair, document_hash

pytestmark = pytest.mark.data

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "dashboards" / "views"
APP = ROOT / "dashboards" / "app.py"
RATER_KEY = "_wb_rater_token"  # workbench.dashboard.ui's session key for a rater token


@pytest.fixture(scope="module")
def jhome(built_home, tmp_path_factory):
    """A home that reads the session's built datasets (no runs: the judging pages need none)."""
    home = tmp_path_factory.mktemp("judge-home")
    (home / "datasets").symlink_to(built_home / "datasets")
    return home


@pytest.fixture(scope="module")
def gita(jhome):
    from workbench.dashboard.store import dataset_files

    return dataset_files(str(jhome), "gita")


@pytest.fixture
def store(jhome, pg_dsn, monkeypatch):
    """A fresh judgment store on the session's server, and the environment the pages resolve it from."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(jhome))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    from workbench.dashboard import ui

    ui._rater_tokens_exist.clear()
    st = JudgmentStore(pg_dsn)
    yield st
    st.close()
    shutil.rmtree(jhome / "dashboard", ignore_errors=True)  # access tokens a test made


@pytest.fixture(autouse=True)
def _keep_main_module():
    """AppTest replaces ``sys.modules["__main__"]``; put it back (see tests/test_dashboard.py)."""
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
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(path), default_timeout=180)
    if token is not None:
        at.session_state[RATER_KEY] = token
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
    assert judging.marked_words("dham dhammika", judging.query_terms("dha")) == []  # 3 letters: whole words only


def test_a_pair_view_is_blind_and_hashes_the_document_shown(gita):
    qid, doc = _pairs(gita, 1)[0]
    view = judging.pair_view("gita", qid, doc, gita.queries, gita.documents)
    assert view.doc_hash == document_hash(gita.documents[doc]) and view.address == gita.documents[doc].address
    assert [label for label, _ in view.blocks][:3] == ["Original", "Transliteration", "Translations"]
    assert view.marks > 0 and "<mark>" in "".join(b for _, b in view.blocks)
    assert set(view.__dataclass_fields__) == {"dataset", "query_id", "doc_id", "query_text", "query_type", "language",
                                              "address", "blocks", "doc_hash", "marks"}  # nothing of a run or a pool
    gone = judging.pair_view("gita", qid, "no-such-doc", gita.queries, gita.documents)
    assert gone.missing and gone.blocks == ()


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
    store.revoke_rater("ann")  # revoked: signed out at the next click
    at.run()
    assert not at.get("progress")
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
    assert gita.queries.at[qid, "text"][:40].replace('"', "&quot;") in at.get("html")[0].proto.body
    at.text_area(key=f"judge_note_{aid}").input("a parallel verse")
    at.button(key="judge_g2").click().run()
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
    at.button(key="judge_x").click().run()
    assert _rows(store) == [("judge", ann.rater_id, aid, qid, doc, None, True, None, document_hash(gita.documents[doc]))]
    assert _progress(at) == "1 of 3 judged (2 left)"
    at.button(key="judge_undo").click().run()
    assert not at.exception
    assert [r[0] for r in _rows(store)] == ["judge", "retract"]  # appended, never rewritten
    assert _held(store, ann)[0] == aid and _progress(at) == "0 of 3 judged (3 left)"
    assert f"`{gita.documents[doc].address}`" in " ".join(m.value for m in at.markdown)  # shown again
    assert store.my_judgments(ann, "gita") == []
    at.button(key="judge_g1").click().run()
    assert [(r[0], r[5]) for r in _rows(store)] == [("judge", None), ("retract", None), ("judge", 1)]


def test_a_stale_page_submitting_twice_shows_the_error_and_writes_nothing(store, gita):
    """Two tabs of one rater show the same held pair; the second tab's submit is refused by the store."""
    _pool(store, _pairs(gita, 3))
    ann, token = store.add_rater("ann")
    first = _app(PAGES / "judge.py", token)
    stale = _app(PAGES / "judge.py", token)
    aid, _qid, _doc = _held(store, ann)
    first.button(key="judge_g1").click().run()
    stale.button(key="judge_g0").click().run()
    assert not stale.exception
    [err] = [e.value for e in stale.error]
    assert f"assignment {aid}" in err and "is already judged" in err and "nothing was written" in err
    assert [(r[0], r[2], r[5]) for r in _rows(store)] == [("judge", aid, 1)]
    assert _progress(stale) == "1 of 3 judged (2 left)"  # and the stale tab moved on to the next pair


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
    assert sorted(zip(mine["query_id"], mine["doc_id"])) == sorted(pairs)
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
    grades = at.dataframe[-1].value  # the pair shown: each rater's grade and note
    qid, doc = pairs[0]  # 0 vs 2: the only pair that waits
    assert list(grades["rater"]) == ["ann", "bob"]
    assert list(grades["grade"]) == ["0 · not relevant", "2 · highly relevant"]
    assert list(grades["note"]) == [f"ann on {doc}", f"bob on {doc}"]
    queue = at.dataframe[0].value
    assert list(zip(queue["query_id"], queue["doc_id"])) == [(qid, doc)]
    at.text_area(key=f"adj_note:gita:{qid}:{doc}").input("the verse answers it in part")
    at.button(key="adj_g1").click().run()
    assert not at.exception
    assert [s.value for s in at.success] == [f"Final grade of {qid} / {doc}: 1 · relevant.",
                                             "Nothing waits for adjudication on gita (pairs whose grades differ by 2 "
                                             "or more come here)."]
    [adj] = store.adjudications("gita")
    assert (adj["query_id"], adj["doc_id"], adj["grade"], adj["adjudicator"], adj["note"]) == (
        qid, doc, 1, "cy", "the verse answers it in part")
    assert adj["doc_sha256"] == document_hash(gita.documents[doc])
    final = final_grades(store.current("gita"), store.adjudications("gita"))
    assert (final[(qid, doc)].grade, final[(qid, doc)].basis) == (1, "adjudicated")
    # a stale second click on the same pair writes nothing
    at.session_state["_adj_action"] = ("adjudicate", "gita", qid, doc, 2, adj["doc_sha256"], "none")
    at.run()
    assert [e.value for e in at.error] == [f"{qid} / {doc} no longer waits for adjudication (another adjudicator "
                                           "decided it, or this page was stale); nothing was written."]
    assert len(store.adjudications("gita")) == 1


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


# ------------------------------------------------------------------ the bind rule with rater tokens


def test_beyond_loopback_rater_tokens_let_raters_in_and_nobody_else(store, gita, jhome, bind):
    _pool(store, _pairs(gita, 2))
    bind("0.0.0.0")
    at = _app(APP)  # no token of either kind: the refusal names both commands
    [err] = [e.value for e in at.error]
    assert "without access tokens, so it shows nothing" in err and "`workbench judge rater add NAME`" in err
    _ann, token = store.add_rater("ann")
    from workbench.dashboard import ui

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
    at = _app(APP, token=token)
    assert [t.value for t in at.title] == ["Judge"] and "token" not in at.query_params


def test_the_dashboard_serves_beyond_loopback_with_rater_tokens_only(store, jhome, pg_dsn):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(WORKBENCH_HOME=str(jhome), WORKBENCH_PG_DSN=pg_dsn)
    refused = faults.run(["dashboard", "--host", "0.0.0.0", "--port", str(port), "--no-open"], env=env, timeout=120)
    assert refused.returncode == 2 and "`workbench judge rater add NAME`" in refused.stderr
    store.add_rater("ann")
    log = jhome / "dashboard-judge.log"
    proc = subprocess.Popen([*faults.WORKBENCH, "dashboard", "--host", "0.0.0.0", "--port", str(port), "--no-open"],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True)
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"the dashboard did not answer: {log.read_text()[-2000:]}")
        assert "(rater token required: the judging pages only, no access token exists)" in log.read_text()
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            time.sleep(0.3)  # let the widgets of the new run settle
            return drv.find_element(By.TAG_NAME, "body").text
        time.sleep(0.1)
    raise AssertionError(f"waited {timeout:.0f} s for {want!r}; the page shows: {text[:1500]}")


def _press(drv, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(drv).send_keys(key).perform()


def test_two_raters_judge_by_keyboard_an_adjudicator_resolves_and_export_writes_the_qrels(store, gita, jhome, pg_dsn,
                                                                                            tmp_path):
    """Two raters judge the same 20 pairs with the keyboard only (0, 1, 2, X, U, Tab out of a note),
    an adjudicator resolves the 8 pairs two grades apart, and `workbench judge export` writes the
    qrels that follow: adjudicated 1, agreed grades, one grade apart the lower one. Neither rater's
    page ever holds the other's name or notes. Screenshots in test-artifacts/judge/."""
    import browser
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    found = browser.find_browser()
    if found is None:
        if os.environ.get("WORKBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium and chromedriver are not installed but WORKBENCH_REQUIRE_BROWSER=1 "
                        "(apt-get install chromium chromium-driver)")
        pytest.skip("headless Chromium not installed: apt-get install chromium chromium-driver")
    out = Path(os.environ.get("WORKBENCH_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "judge"
    pairs = _pairs(gita, 20)
    _pool(store, pairs)
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
                text = _wait_text(drv, lambda t: f"{step} of 20 judged" in t)
                html = drv.page_source
                assert other not in html and f"NOTE-{other}" not in html, f"{name}'s page shows {other}'s work"
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
