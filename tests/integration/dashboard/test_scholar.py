"""The scholar's path in headless Chromium (#28): a non-programmer judging alone, two scholars and an
adjudicator, on the real gita build and a real PostgreSQL judgment store.

One ``workbench dashboard`` on 127.0.0.1 without access tokens (the set-up where the faults were
found) serves every test; each test has its own store, raters and browser:

1. guidelines — beside every pair, what 2 / 1 / 0 / cannot judge mean for its query type: the
   dataset's ``guidelines/gita.toml`` where it says something, the built-in text elsewhere;
2. fonts — the Devanagari original renders in the Noto Sans Devanagari the app serves (the machine
   has only DejaVu and Liberation, which have no Devanagari: without it the verse is boxes);
3. blinding — a second tab of the rater's browser opened without ``?s=`` (``/``, the drill-down's
   address, ``/judge``) shows the judging pages only, never an engineer page; signing out gives the
   browser back to the engineer pages; ``workbench dashboard --judging-only`` opened under another
   host name (``localhost``, which the cookie does not reach) shows no engineer page either;
4. scroll and stray clicks — a new pair opens scrolled to the top with its query and the "Saved"
   line in view; Tab out of a note moves nothing, and a click that lands on a grade button only
   because the page moved under a resting pointer grades nothing; keys and a deliberate click do;
5. adjudication — a pair one scholar could not judge and the other graded goes to the adjudicator,
   with both judgments shown; after each decision the "Pair" box names the pair the page shows.

Figures (scroll offsets, font widths) are printed (``pytest -s``); screenshots go to
``test-artifacts/scholar/``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import psycopg
import pytest
from fixtures.paths import REPO

from workbench.dashboard import guidelines, judging
from workbench.judging.store import JudgmentStore, PoolPair

pytestmark = pytest.mark.browser

ROOT = REPO
OUT = Path(os.environ.get("WORKBENCH_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "scholar"
#: What the test's guidelines file says for paraphrases (only there: term and reference keep the built-in texts).
PARA_2 = "TEST-GUIDE: 2 when the verse is the one the query retells."
ENGINEER_PAGES = ("Overview", "Compare two configs", "Query drill-down", "Filters and empty answers", "Study", "Gate")


# ------------------------------------------------------------------ set-up


@pytest.fixture(scope="module")
def browser_found():
    import browser

    found = browser.find_browser()
    if found is None:
        if os.environ.get("WORKBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium and chromedriver are not installed but WORKBENCH_REQUIRE_BROWSER=1 "
                        "(apt-get install chromium chromium-driver)")
        pytest.skip("headless Chromium not installed: apt-get install chromium chromium-driver")
    return found


@pytest.fixture(scope="module")
def home(data_dir, tmp_path_factory):
    """A home with the gita built (only the gita: the other datasets are not needed here)."""
    from workbench.data import catalog

    h = tmp_path_factory.mktemp("scholar-home")
    catalog.build("gita", catalog.load_definitions(), data_dir, h)
    return h


@pytest.fixture(scope="module")
def definitions(tmp_path_factory):
    """The repository's datasets.toml beside a guidelines file that says something for paraphrases only."""
    d = tmp_path_factory.mktemp("definitions")
    shutil.copy(ROOT / "datasets" / "datasets.toml", d / "datasets.toml")
    (d / "guidelines").mkdir()
    (d / "guidelines" / "gita.toml").write_text(f'[paraphrase]\nhighly_relevant = "{PARA_2}"\n', encoding="utf-8")
    return d / "datasets.toml"


@pytest.fixture(scope="module")
def gita(home):
    from workbench.results.store import dataset_files

    return dataset_files(str(home), "gita")


@pytest.fixture(scope="module")
def dash(home, definitions, pg_dsn, browser_found, tmp_path_factory):
    """``workbench dashboard`` on 127.0.0.1 (no access tokens: the engineer pages are open on this machine)."""
    import browser

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
    JudgmentStore(pg_dsn).close()  # the store exists before the dashboard looks for it
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(WORKBENCH_HOME=str(home), WORKBENCH_PG_DSN=pg_dsn, WORKBENCH_DATASETS=str(definitions))
    d = browser.Dashboard(env, tmp_path_factory.mktemp("dash") / "dashboard.log")
    try:
        d.wait()
        yield d
    finally:
        d.stop()


@pytest.fixture
def store(dash, pg_dsn):
    """A fresh judgment store (the dashboard's sessions open their own connections to it)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
    st = JudgmentStore(pg_dsn)
    yield st
    st.close()


@pytest.fixture
def drivers(browser_found):
    """Headless Chromium windows, each with its own profile, quit after the test."""
    import browser

    made = []

    def new():
        drv = browser.chrome(*browser_found)
        made.append(drv)
        return drv

    yield new
    for drv in made:
        drv.quit()


def _pairs(gita, query_type: str, n: int, skip: int = 0) -> list[tuple[str, str]]:
    """``n`` pairs (query of ``query_type``, a document its built qrels name), each with another document."""
    out, seen = [], set()
    for qid, row in gita.queries.iterrows():
        if row["query_type"] != query_type or (query_type == "paraphrase" and row["language"] != "en"):
            continue
        docs = [row["group"]] if row["group"] in gita.documents else \
            sorted(d for d in gita.qrels.get(qid, {}) if d in gita.documents)
        doc = next((d for d in docs if d not in seen), None)
        if doc is None:
            continue
        seen.add(doc)
        if skip:
            skip -= 1
            continue
        out.append((qid, doc))
        if len(out) == n:
            return out
    raise AssertionError(f"the gita has fewer than {n} usable {query_type} pairs")


def _pool(store, pairs, raters=1) -> int:
    return store.create_pool("gita", [PoolPair(q, d) for q, d in pairs], raters_per_pair=raters, params={"t": 1})


def _rows(store) -> list[tuple]:
    return store.conn().execute("SELECT action, rater_id, query_id, doc_id, grade, cannot_judge, note "
                                "FROM wb_judge.judgments ORDER BY judgment_id").fetchall()


def _body(drv) -> str:
    from selenium.webdriver.common.by import By

    return drv.find_element(By.TAG_NAME, "body").text


def _wait(drv, want, timeout: float = 60) -> str:
    """Wait until ``want`` (a string, or a predicate on the page's text) holds and Streamlit is idle; then
    long enough that a grade for the pair on screen is taken (:data:`judging.MIN_SEEN_S`)."""
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        try:
            text = _body(drv)
            busy = any(el.is_displayed() and ("Running" in el.text or "Stop" in el.text)
                       for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'))
        except Exception:  # noqa: BLE001 - re-rendering
            time.sleep(0.1)
            continue
        if (want(text) if callable(want) else want in text) and not busy:
            time.sleep(judging.MIN_SEEN_S + 0.2)
            return _body(drv)
        time.sleep(0.1)
    raise AssertionError(f"waited {timeout:.0f} s for {want!r}; the page shows: {text[:2000]}")


def _press(drv, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(drv).send_keys(key).perform()


#: The element that scrolls the page (Streamlit scrolls its main section, not the window).
_SCROLLER = """
const cands = [document.querySelector('[data-testid="stMain"]'), document.querySelector('section.main'),
               document.querySelector('[data-testid="stAppViewContainer"]'), document.scrollingElement];
const scroller = cands.find(e => e && e.scrollHeight > e.clientHeight + 1 &&
                            (e === document.scrollingElement || /auto|scroll/.test(getComputedStyle(e).overflowY)))
                 || document.scrollingElement;
"""


def _scroll_top(drv) -> float:
    return float(drv.execute_script(_SCROLLER + "return scroller.scrollTop;"))


def _scroll_by(drv, dy: float) -> float:
    return float(drv.execute_script(_SCROLLER + "scroller.scrollBy(0, arguments[0]); return scroller.scrollTop;", dy))


def _in_view(drv, el) -> bool:
    return bool(drv.execute_script("const r = arguments[0].getBoundingClientRect();"
                                   "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;", el))


def _under(drv, x: float, y: float) -> str:
    """What lies at viewport point (x, y): a grade button's widget key, ``textarea``, or the tag name."""
    return drv.execute_script(
        "const el = document.elementFromPoint(arguments[0], arguments[1]); if (!el) return 'nothing';"
        "const key = el.closest('[class*=\"st-key-judge_\"]');"
        "if (key) return [...key.classList].find(c => c.startsWith('st-key-')).slice(7);"
        "return el.tagName.toLowerCase();", x, y)


def _top(drv, el) -> float:
    return float(drv.execute_script("return arguments[0].getBoundingClientRect().top;", el))


def _center(drv, el) -> tuple[float, float]:
    r = drv.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left + r.width / 2,"
                           " r.top + r.height / 2];", el)
    return float(r[0]), float(r[1])


def _address(text: str) -> str:
    return re.search(r"^Document (.+)$", text, re.M).group(1).strip()


def _grade_button(drv, grade: int):
    from selenium.webdriver.common.by import By

    return drv.find_element(By.CSS_SELECTOR, f'[class*="st-key-judge_g{grade}_"] button')


# ------------------------------------------------------------------ blinding, fonts, guidelines


def test_a_blind_second_tab_the_served_devanagari_font_and_guidelines_beside_each_pair(store, dash, gita, drivers):
    from selenium.webdriver.common.by import By

    pairs = {"paraphrase": _pairs(gita, "paraphrase", 1)[0], "term": _pairs(gita, "term", 1)[0],
             "reference": _pairs(gita, "reference", 1)[0]}
    _pool(store, list(pairs.values()))
    ann, token = store.add_rater("rater-ann")
    drv = drivers()
    drv.get(f"{dash.url}/judge?token={token}")
    text = _wait(drv, "0 of 3 judged")
    assert "Judging as rater-ann (rater)" in text
    judge_url = drv.current_url
    assert re.search(r"[?&]s=[A-Za-z0-9_-]{40,}", judge_url), judge_url

    # 1. a second tab of the same browser, without ?s=: the judging pages only, whatever the address
    first = drv.current_window_handle
    drv.switch_to.new_window("tab")
    for path in ("/", "/query?dataset=gita", "/compare", "/judge"):
        drv.get(dash.url + path)
        text = _wait(drv, lambda t: any(w in t for w in ("Judging as", "Overview", "Sign in", "rater token")))
        nav = " ".join(el.text for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNav"], '
                                                                            '[data-testid="stSidebar"] a'))
        print(f"second tab {path}: nav = {nav!r}; page: {text[:300]!r}")
        assert "Judging as rater-ann (rater)" in text, (path, text[:800])
        for page in ENGINEER_PAGES:
            assert page not in nav and f"\n{page}\n" not in f"\n{text}\n", (path, page, text[:800])
        assert "No evaluation runs" not in text and "fused" not in text and "qrels" not in text, (path, text[:800])
        assert re.search(r"[?&]s=[A-Za-z0-9_-]{40,}", drv.current_url), drv.current_url
    assert "0 of 3 judged" in _body(drv)
    drv.close()
    drv.switch_to.window(first)

    # 2. the font: served by the app, loaded, and what the original is drawn in. Chromium itself says which font
    # drew the original's glyphs (DevTools' CSS.getPlatformFontsForNode): the web font, not a font of this machine,
    # whatever fonts the machine has (widths against a fallback font depend on them: issue #40)
    font = drv.execute_async_script("""
        const done = arguments[arguments.length - 1];
        document.fonts.load('16px "Noto Sans Devanagari"', 'कर्म').then((faces) => {
          const el = document.querySelector('.wb-judge-text[lang="sa"]');
          const width = (family) => {
            const s = document.createElement('span');
            s.style.cssText = 'position:absolute; white-space:nowrap; font-size:20px; font-family:' + family;
            s.textContent = 'कर्मण्येवाधिकारस्ते'; document.body.appendChild(s);
            const w = s.getBoundingClientRect().width; s.remove(); return w;
          };
          done({faces: faces.map((f) => f.family + ' ' + f.status),
                check: document.fonts.check('16px "Noto Sans Devanagari"', 'कर्म'),
                page: el ? width(getComputedStyle(el).fontFamily) : null, noto: width('"Noto Sans Devanagari"'),
                original: el ? el.textContent : null});
        }, (e) => done({error: String(e)}));""")
    print("font:", font)
    drawn = _platform_fonts(drv, '.wb-judge-text[lang="sa"]')
    print("drawn in:", drawn)
    import urllib.request

    with urllib.request.urlopen(f"{dash.url}/app/static/{judging.DEVANAGARI_FONT_FILE}", timeout=10) as r:
        served = (r.status, r.headers.get("Content-Type"), len(r.read()))
    assert served[0] == 200 and served[1] == "font/woff2" and served[2] > 100_000, served  # the app's own file
    assert font.get("faces") and all(f.endswith("loaded") for f in font["faces"]), font
    assert font["check"] is True and font["page"] == pytest.approx(font["noto"], abs=0.5), font
    # the served web font draws the original's Devanagari; a font of the machine may draw at most its other
    # characters (spaces, digits, Latin punctuation: the served subset is Devanagari's)
    devanagari = sum(1 for c in font["original"] if "\u0900" <= c <= "\u097f")
    assert devanagari > 20, font["original"]
    web = sum(f["glyphCount"] for f in drawn if f["isCustomFont"] and f["familyName"] == "Noto Sans Devanagari")
    system = sum(f["glyphCount"] for f in drawn if not f["isCustomFont"])
    assert web > 0 and system <= len(font["original"]) - devanagari, drawn
    # the page warns when the font cannot be had (here it can: no warning)
    assert "Devanagari font" not in _body(drv) or "could not be loaded" not in _body(drv)

    # 3. guidelines beside each pair: the file's text for paraphrases, the built-in texts elsewhere
    seen = set()
    for step in range(3):
        text = _wait(drv, f"{step} of 3 judged")
        box = drv.find_element(By.CSS_SELECTOR, ".wb-guidelines")
        qtype = box.get_attribute("data-query-type")
        seen.add(qtype)
        guide = box.text
        want = guidelines.DEFAULTS[qtype]
        assert "cannot judge" in guide and "2 · highly relevant" in guide and "0 · not relevant" in guide, guide
        if qtype == "paraphrase":
            assert PARA_2 in guide and want.highly_relevant not in guide, guide
            assert want.not_relevant in guide  # the rest is the built-in text
        else:
            assert want.highly_relevant in guide and want.cannot_judge in guide, guide
        assert _in_view(drv, box) and _in_view(drv, drv.find_element(By.CSS_SELECTOR, ".wb-judge-query"))
        if step == 0:
            OUT.mkdir(parents=True, exist_ok=True)
            drv.save_screenshot(str(OUT / "judge-guidelines.png"))
        _press(drv, "1")
    assert seen == {"paraphrase", "term", "reference"}
    _wait(drv, "3 of 3 judged")
    assert [r[4] for r in _rows(store)] == [1, 1, 1]

    # signing out gives the browser back to the engineer pages (open on this machine): a new tab shows them
    drv.find_element(By.XPATH, "//button[.//*[normalize-space(text())='Sign out']]").click()
    _wait(drv, lambda t: "Judging as" not in t)
    drv.switch_to.new_window("tab")
    drv.get(dash.url + "/")
    text = _wait(drv, "Overview")
    assert "Judging as" not in text


def test_a_judging_only_dashboard_under_another_host_name_shows_no_engineer_page(store, home, definitions, pg_dsn,
                                                                                    gita, drivers, tmp_path):
    """A cookie belongs to one host name: for scholars, `workbench dashboard --judging-only` registers no engineer
    page at all. Opened as http://localhost:PORT (not 127.0.0.1) at `/` and at the drill-down's address it shows
    the rater sign-in alone; a rater's link opens the Judge page."""
    import browser
    from selenium.webdriver.common.by import By

    _pool(store, _pairs(gita, "term", 2, skip=3))
    _ann, token = store.add_rater("rater-ann")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(WORKBENCH_HOME=str(home), WORKBENCH_PG_DSN=pg_dsn, WORKBENCH_DATASETS=str(definitions))
    only = browser.Dashboard(env, tmp_path / "judging-only.log", "--judging-only")
    try:
        only.wait()
        assert "--judging-only: no engineer page" in (tmp_path / "judging-only.log").read_text()
        drv = drivers()
        for path in ("/", "/query?dataset=gita"):
            drv.get(f"http://localhost:{only.port}{path}")
            text = _wait(drv, "Sign in to judge")
            nav = " ".join(el.text for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a'))
            assert not any(p in nav or f"\n{p}\n" in f"\n{text}\n" for p in ENGINEER_PAGES), (path, text[:800])
            assert "Leave judging" not in text and "No evaluation runs" not in text
        drv.get(f"http://localhost:{only.port}/judge?token={token}")
        text = _wait(drv, "0 of 2 judged")
        assert "Judging as rater-ann (rater)" in text
    finally:
        only.stop()


# ------------------------------------------------------------------ 4: scroll position, stray clicks


def test_a_new_pair_opens_at_the_top_and_a_click_the_page_moved_under_the_pointer_grades_nothing(store, dash, gita,
                                                                                                   drivers):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _pool(store, _pairs(gita, "paraphrase", 4, skip=1))
    bob, token = store.add_rater("rater-bob")
    drv = drivers()
    drv.set_window_size(1400, 900)  # a laptop's screen: the page is taller than the window
    drv.get(f"{dash.url}/judge?token={token}")
    _wait(drv, "0 of 4 judged")

    # a grade given further down the page: the next pair opens at the top, its query and "Saved" in view
    before = _scroll_by(drv, 350)
    assert before > 0, "the page should be taller than the window"
    _press(drv, "1")
    text = _wait(drv, lambda t: "1 of 4 judged" in t and "Saved" in t)
    top = _scroll_top(drv)
    saved = drv.find_element(By.XPATH, "//*[@data-testid='stAlertContentSuccess' or @data-testid='stAlert']"
                                       "[contains(., 'Saved')]")
    print(f"new pair: scrolled {before:.0f} px before the grade, {top:.0f} px after")
    OUT.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(OUT / "judge-next-pair.png"))  # the window as the scholar sees it
    assert top == 0, f"the next pair opened {top:.0f} px down"
    assert _in_view(drv, drv.find_element(By.CSS_SELECTOR, ".wb-judge-query")) and _in_view(drv, saved)

    # a note typed at the foot of the window (the scholar's case), then Tab: the page does not move, so the
    # pointer still rests on the note and a click there grades nothing
    area = drv.find_element(By.CSS_SELECTOR, "textarea")
    _scroll_by(drv, drv.execute_script("return arguments[0].getBoundingClientRect().bottom - window.innerHeight + 8;",
                                       area))
    time.sleep(0.3)
    ActionChains(drv).move_to_element(area).perform()
    x, y = _center(drv, area)  # where the pointer rests from now on
    ActionChains(drv).click().perform()
    area.send_keys("NOTE-bob: close, but the next verse")
    top = _top(drv, area)
    area.send_keys(Keys.TAB)
    _wait(drv, "1 of 4 judged")  # the note is sent to the server: the page is drawn again
    moved = top - _top(drv, drv.find_element(By.CSS_SELECTOR, "textarea"))  # how far the page moved up
    under = _under(drv, x, y)
    print(f"Tab out of the note: the page moved {moved:.0f} px; under the pointer: {under}")
    n = len(_rows(store))
    ActionChains(drv).click().perform()  # the stray click, where the pointer rests
    time.sleep(1.5)
    assert len(_rows(store)) == n and "1 of 4 judged" in _body(drv), "a click after Tab graded the pair"
    assert moved == 0 and not under.startswith("judge_g"), (moved, under)

    # the page moves under the resting pointer (as when a message appears above) until a grade button lies
    # there: a click on it grades nothing, and says why
    area = drv.find_element(By.CSS_SELECTOR, "textarea")
    ActionChains(drv).move_to_element(area).perform()
    x, y = _center(drv, area)
    bx, by = _center(drv, _grade_button(drv, 2))
    drv.execute_script(
        "const s = document.createElement('div'); s.id = 'wb-test-spacer'; s.style.height = arguments[1] + 'px';"
        "const b = arguments[0]; b.parentNode.insertBefore(s, b);",
        drv.find_element(By.CSS_SELECTOR, '[class*="st-key-judge_grades"]'), y - by)
    time.sleep(0.3)
    under = _under(drv, x, y)
    assert under.startswith("judge_g"), under  # the test put a grade button under the pointer
    ActionChains(drv).click().perform()
    time.sleep(1.5)
    text = _body(drv)
    print(f"a click on {under} that the page moved under the pointer: rows {n} -> {len(_rows(store))}")
    assert len(_rows(store)) == n and "1 of 4 judged" in text, "a click the page moved under the pointer graded"
    assert "move the pointer" in text.lower(), text[:1500]
    drv.execute_script("document.getElementById('wb-test-spacer').remove();")

    # a key grades (the note with it), and so does a deliberate click on a button
    _press(drv, "2")
    _wait(drv, "2 of 4 judged")
    assert _rows(store)[-1][4:] == (2, False, "NOTE-bob: close, but the next verse")
    assert _scroll_top(drv) == 0
    ActionChains(drv).move_to_element(_grade_button(drv, 0)).click().perform()
    _wait(drv, "3 of 4 judged")
    assert _rows(store)[-1][4] == 0
    text = _body(drv)
    assert re.search(r"Keys: 0 not relevant · 1 relevant · 2 highly relevant · X cannot judge · U undo", text), text
    OUT.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(OUT / "judge-after-grade.png"))


# ------------------------------------------------------------------ 5: adjudication


def test_a_cannot_judge_pair_goes_to_the_adjudicator_and_the_pair_box_names_the_pair_shown(store, dash, gita,
                                                                                             drivers):
    pairs = _pairs(gita, "paraphrase", 3, skip=6)
    _pool(store, pairs, raters=2)
    ann, _t = store.add_rater("rater-ann")
    bob, _t = store.add_rater("rater-bob")
    # bob grades the first pair 2, ann cannot judge it, and nobody else is there to ask: it goes to adjudication
    # (the adjudicator is added after: with them there, the store gives the pair to them to judge first).
    # The other two pairs are 0 against 2.
    grades = {"rater-ann": (None, 0, 2), "rater-bob": (2, 2, 0)}
    for rater in (bob, ann):
        for _ in pairs:
            a = store.next_assignment(rater, "gita")
            g = grades[rater.name][pairs.index((a.query_id, a.doc_id))]
            store.judge(rater, a.assignment_id, g, cannot_judge=g is None,
                        note=f"NOTE-{rater.name}" if g is None else None)
    cy, cy_token = store.add_rater("lead-cy", "adjudicator")
    address = {d: gita.documents[d].address for _q, d in pairs}
    drv = drivers()
    drv.get(f"{dash.url}/adjudicate?token={cy_token}")
    _wait(drv, "3 pair(s) of gita wait")

    def pair_box() -> str:
        """What the "Pair" select box displays (its label, then the chosen option, as the reader sees it)."""
        return drv.execute_script(
            "const box = [...document.querySelectorAll('[data-testid=\"stSelectbox\"]')]"
            "  .find((b) => b.innerText.trim().startsWith('Pair'));"
            "if (!box) return '';"
            "const input = box.querySelector('input');"
            "return input ? input.value : '';")

    decided = []
    for left in (3, 2, 1):
        text = _wait(drv, f"{left} pair(s) of gita wait")
        shown = _address(text)
        box = pair_box()
        print(f"{left} waiting: page shows {shown}; the Pair box says {box!r}")
        assert shown in box and not any(a in box for a in decided), (shown, box)
        doc = next(d for d, a in address.items() if a == shown)
        if doc == pairs[0][1]:  # the pair ann could not judge: both judgments are shown, and why it waits
            assert "rater-ann" in text and "cannot judge" in text and "NOTE-rater-ann" in text
            assert "rater-bob" in text and "2 · highly relevant" in text
            assert "cannot judge, no other rater" in text
            OUT.mkdir(parents=True, exist_ok=True)
            drv.save_screenshot(str(OUT / "adjudicate-cannot-judge.png"))
        _press(drv, "1" if doc != pairs[0][1] else "2")
        decided.append(shown)
    _wait(drv, "Nothing waits for adjudication on gita")
    final = {a["doc_id"]: a["grade"] for a in store.adjudications("gita")}
    assert final == {pairs[0][1]: 2, pairs[1][1]: 1, pairs[2][1]: 1}


# ------------------------------------------------------------------ Devanagari beyond the texts; no "Page not found"

#: Measures, once the served faces are loaded, whether the Devanagari in Streamlit's own font (what every element
#: but the texts draws in) has the served glyphs: its width against Noto Sans Devanagari's and against boxes.
_DEVANAGARI_WIDTHS = """
const done = arguments[arguments.length - 1];
const text = arguments[0];
Promise.all([document.fonts.load('16px "Source Sans"', text), document.fonts.load('16px "Noto Sans Devanagari"', text)])
  .then(() => {
    const width = (family) => {
      const s = document.createElement('span');
      s.style.cssText = 'position:absolute; white-space:nowrap; font-size:20px; font-family:' + family;
      s.textContent = text; document.body.appendChild(s);
      const w = s.getBoundingClientRect().width; s.remove(); return w;
    };
    const guide = document.querySelector('.wb-guidelines');
    done({check: document.fonts.check('16px "Source Sans"', text),
          guide: guide ? width(getComputedStyle(guide).fontFamily) : null,
          body: width(getComputedStyle(document.body).fontFamily),
          noto: width('"Noto Sans Devanagari"'), tofu: width('"wb-no-such-font"')});
  }, (e) => done({error: String(e)}));
"""


def test_devanagari_draws_beyond_the_texts_and_a_revoked_raters_reload_shows_the_sign_in_alone(store, dash, gita,
                                                                                                drivers):
    """Beyond the pair texts (the guideline's "(अभ्यास)", the "Show my judgments" table, lists, select boxes)
    Devanagari draws in the served font: it is joined to Streamlit's own font. A revoked rater who reloads
    ``/judge`` (a browser marked as a rater's), and a wrong ``?token=`` there, get the sign-in with no "Page not
    found" over it; a new token signs them in from that form."""
    from selenium.webdriver.common.by import By

    _pool(store, _pairs(gita, "term", 3, skip=1))
    ann, token = store.add_rater("rater-ann")
    a = store.next_assignment(ann, "gita")
    store.judge(ann, a.assignment_id, 1, note="ठीक है — अभ्यास")
    drv = drivers()
    drv.get(f"{dash.url}/judge?token={token}")
    _wait(drv, "1 of 3 judged")
    drv.find_element(By.XPATH, "//label[.//*[normalize-space(text())='Show my judgments']]").click()
    _wait(drv, lambda t: "Show my judgments" in t and "not judged anything" not in t)
    time.sleep(1.5)  # the grid draws again once the face is in
    widths = drv.execute_async_script(_DEVANAGARI_WIDTHS, "अभ्यासठीकहै")  # no space: each font has its own
    print("Devanagari in Streamlit's font:", widths)
    OUT.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(OUT / "judge-devanagari-table.png"))
    assert widths.get("check") is True, widths
    for where in ("guide", "body"):
        assert widths[where] == pytest.approx(widths["noto"], abs=0.5), (where, widths)
    assert abs(widths["noto"] - widths["tofu"]) > 5, widths
    assert "अभ्यास" in drv.find_element(By.CSS_SELECTOR, ".wb-guidelines").text

    # revoked: the reload of /judge shows the sign-in alone, no "Page not found" dialog over it
    store.revoke_rater("rater-ann")
    for url in (f"{dash.url}/judge", f"{dash.url}/judge?token=WRONG"):
        drv.get(url)
        text = _wait(drv, "Sign in to judge")
        time.sleep(1)
        text = _body(drv)
        dialogs = [d.text for d in drv.find_elements(By.CSS_SELECTOR, '[role="dialog"]') if d.is_displayed()]
        print(url, "dialogs:", dialogs, "page:", text[:300])
        assert not dialogs and "Page not found" not in text, (url, dialogs, text[:800])
        assert "the pages below" not in text, text[:800]
    assert "The token in the link is not valid (or was revoked); sign in below with your rater token" in text
    drv.save_screenshot(str(OUT / "judge-revoked-sign-in.png"))
    _ann, token = store.new_token("rater-ann")
    field = drv.find_element(By.CSS_SELECTOR, 'input[type="password"]')
    field.send_keys(token)
    drv.find_element(By.XPATH, "//button[.//*[normalize-space(text())='Sign in to judge']]").click()
    text = _wait(drv, "1 of 3 judged")
    assert "Judging as rater-ann (rater)" in text


def _platform_fonts(drv, selector: str) -> list[dict]:
    """The fonts Chromium drew the text of the first element matching ``selector`` in, as DevTools reports them:
    ``[{"familyName", "postScriptName", "isCustomFont" (a web font), "glyphCount"}]``."""
    drv.execute_cdp_cmd("DOM.enable", {})
    drv.execute_cdp_cmd("CSS.enable", {})
    root = drv.execute_cdp_cmd("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = drv.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    assert node, f"no element {selector} on the page"
    return drv.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


# ------------------------------------------------------------------ #41 item 14: a narrow window, the wheel, a Russian X

#: Each visible button of the grading panel (grades, cannot judge, undo) as the browser lays it out: its widget key,
#: its box, whether a text inside it is cut (wider than its box: an ellipsis), and whether the button is what lies
#: at its centre (nothing drawn over it).
_PANEL_BUTTONS = """
return [...document.querySelectorAll('[class*="st-key-judge_g"] button, [class*="st-key-judge_x_"] button,'
                                     + ' [class*="st-key-judge_undo"] button')]
  .filter((b) => b.getBoundingClientRect().height > 0)
  .map((b) => {
    const r = b.getBoundingClientRect();
    const holder = b.closest('[class*="st-key-judge_"]');
    const key = [...holder.classList].find((c) => c.startsWith('st-key-')).slice(7).replace(/_\\d+$/, '');
    const cut = [b, ...b.querySelectorAll('*')].some((el) => el.scrollWidth > el.clientWidth + 1);
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return {key, left: r.left, right: r.right, top: r.top, bottom: r.bottom, cut, covered: !b.contains(top)};
  });
"""


def test_at_820_px_the_buttons_show_whole_stay_in_view_under_the_wheel_and_a_russian_x_grades(store, dash, gita,
                                                                                                drivers):
    """#41 item 14: in a window 820 px wide (the sidebar open beside the pair) every button of the grading panel
    shows whole — none is cut or covered — and stays in view while the mouse wheel scrolls the panel's column and
    the texts; and with a Russian layout (``ч`` on the X key) the X key grades "cannot judge" while the "Show my
    judgments" toggle, a checkbox, has the focus."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
    from selenium.webdriver.common.by import By

    _pool(store, _pairs(gita, "paraphrase", 2, skip=10))
    ann, token = store.add_rater("rater-ann")
    drv = drivers()
    drv.set_window_size(820, 900)
    drv.get(f"{dash.url}/judge?token={token}")
    text = _wait(drv, "0 of 2 judged")
    width, height = drv.execute_script("return [window.innerWidth, window.innerHeight];")
    assert width == 820, width

    def check(when: str) -> None:
        buttons = drv.execute_script(_PANEL_BUTTONS)
        print(when, [(b["key"], round(b["left"]), round(b["right"]), round(b["top"]), round(b["bottom"]), b["cut"],
                      b["covered"]) for b in buttons])
        assert sorted(b["key"] for b in buttons) == ["judge_g0", "judge_g1", "judge_g2", "judge_undo", "judge_x"]
        for b in buttons:
            assert 0 <= b["left"] and b["right"] <= width and 0 <= b["top"] and b["bottom"] <= height, (when, b)
            assert not b["cut"] and not b["covered"], (when, b)

    check("drawn:")
    OUT.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(OUT / "judge-820px.png"))
    # the wheel over the grade buttons (it scrolls their column, then the page), then over the texts
    column = drv.find_element(By.CSS_SELECTOR, '[data-testid="stColumn"]:has(.st-key-judge_side)')
    ActionChains(drv).scroll_from_origin(ScrollOrigin.from_element(_grade_button(drv, 1)), 0, 900).perform()
    time.sleep(0.8)
    scrolled = (drv.execute_script("return arguments[0].scrollTop;", column), _scroll_top(drv))
    print(f"the wheel over the buttons scrolled their column {scrolled[0]:.0f} px and the page {scrolled[1]:.0f} px")
    assert sum(scrolled) > 300, scrolled  # it did scroll something under the pointer
    check("after the wheel over the buttons:")
    panel = drv.execute_script("return getComputedStyle(document.querySelector('.st-key-judge_grades').parentElement)"
                               ".backgroundColor;")
    assert panel == drv.execute_script("return getComputedStyle(document.querySelector('[data-testid=\"stApp\"]'))"
                                       ".backgroundColor;") and panel.startswith("rgb("), panel  # the guideline is hidden
    ActionChains(drv).scroll_from_origin(ScrollOrigin.from_element(
        drv.find_element(By.CSS_SELECTOR, ".wb-judge-query")), 0, -300).perform()
    time.sleep(0.3)
    texts = drv.find_elements(By.CSS_SELECTOR, ".wb-judge-text")
    ActionChains(drv).scroll_from_origin(ScrollOrigin.from_element(texts[0]), 0, 1200).perform()
    time.sleep(0.8)
    print(f"the wheel over the texts: the page at {_scroll_top(drv):.0f} px")
    assert _scroll_top(drv) > 300
    check("after the wheel over the texts:")
    drv.save_screenshot(str(OUT / "judge-820px-scrolled.png"))

    # a Russian layout: the X key gives "ч" (code KeyX), pressed while the toggle (a checkbox) has the focus
    address = _address(text)
    toggle = drv.find_element(By.CSS_SELECTOR, '[class*="st-key-judge_mine"] input[type="checkbox"]')
    drv.execute_script("arguments[0].focus({preventScroll: true});", toggle)
    assert drv.execute_script("return document.activeElement === arguments[0];", toggle)
    for kind in ("keyDown", "keyUp"):
        drv.execute_cdp_cmd("Input.dispatchKeyEvent", {"type": kind, "key": "ч", "code": "KeyX", "text": "ч",
                                                       "unmodifiedText": "ч", "windowsVirtualKeyCode": 88})
    _wait(drv, "1 of 2 judged")
    [row] = _rows(store)
    assert row[:2] == ("judge", ann.rater_id) and row[4:] == (None, True, None), row
    assert gita.documents[row[3]].address == address
