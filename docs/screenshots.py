"""Take the documentation's dashboard screenshots into docs/img/.

Starts ``workbench dashboard`` on 127.0.0.1 (a free port, no browser tab) over a workbench home where
``make main`` ran, opens its pages in headless Chromium and saves one PNG per page:

    docs/img/dashboard.png   the Overview (the README's picture)
    docs/img/compare.png     Compare two configs
    docs/img/query.png       Query drill-down
    docs/img/filters.png     Filters and empty answers
    docs/img/study.png       a tuning study
    docs/img/gate.png        the gate report
    docs/img/agreement.png   judges' agreement           (with --rater-token of an adjudicator)
    docs/img/judge.png       the Judge page, next pair    (with --rater-token)
    docs/img/judge-after-grade.png   after one grade      (with --rater-token and --grade)

Usage, from the repository root, with Debian's ``chromium`` and ``chromium-driver`` installed
(``apt-get install chromium chromium-driver``; selenium is in the ``test`` extra)::

    .venv/bin/python docs/screenshots.py                      # the engineer pages
    TOKEN=$(.venv/bin/workbench judge rater add docs-adjudicator --adjudicator | tail -1)
    .venv/bin/python docs/screenshots.py --rater-token "$TOKEN"   # and the judging pages

The home is ``WORKBENCH_HOME`` (default ``~/.workbench``), as for every command. Nothing is written
into it, except with ``--grade``, which gives one real grade as that rater (use a throwaway rater).
Chromium runs with its network features off and a fresh profile; the driver's path is given, so
Selenium Manager never downloads anything. Exit status 1 when a page shows an exception or misses
the text it is expected to show (the PNG is still written, to look at).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"

#: page file name -> (URL path, strings the page must show before the screenshot)
ENGINEER_PAGES: dict[str, tuple[str, list[str]]] = {
    "dashboard": ("", ["Overview"]),
    "compare": ("compare", ["Compare two configs"]),
    "query": ("query", ["Query drill-down"]),
    "filters": ("filters", ["Filters and empty answers"]),
    "study": ("study", ["Chosen trial"]),
    "gate": ("gate", []),
}
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_browser() -> tuple[str, str]:
    browser = next((p for p in map(shutil.which, CHROMIUM) if p), None)
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        sys.exit("chromium and chromedriver are needed: apt-get install chromium chromium-driver")
    return browser, driver


def workbench_exe() -> str:
    exe = Path(sys.executable).with_name("workbench")
    return str(exe) if exe.exists() else (shutil.which("workbench") or sys.exit("workbench is not installed here"))


def start_dashboard(port: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen([workbench_exe(), "dashboard", "--no-open", "--port", str(port)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the dashboard exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"the dashboard did not answer in {timeout:.0f} s:\n{log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)


def chrome(browser: str, driver: str, width: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", f"--window-size={width},1000",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='wb-docs-chrome-')}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def settle(drv, expect: list[str], timeout: float = 120) -> list[str]:
    """Wait until every string of ``expect`` is on the page and Streamlit is idle; the exceptions shown."""
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    while time.time() < deadline:
        time.sleep(1.0)
        try:
            text = drv.find_element(By.TAG_NAME, "body").text
            busy = any(el.is_displayed() and ("Running" in el.text or "Stop" in el.text)
                       for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'))
        except Exception:  # noqa: BLE001 - the page re-renders under us
            continue
        if all(e in text for e in expect) and not busy:
            break
    else:
        print(f"  missing after {timeout:.0f} s: {[e for e in expect if e not in text]}", file=sys.stderr)
        return ["missing: " + ", ".join(e for e in expect if e not in text)]
    time.sleep(1.5)  # plots finish drawing
    return [el.text for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')]


def shoot(drv, path: Path, width: int, full_page: bool) -> None:
    if full_page:
        height = drv.execute_script(
            "const m = document.querySelector('section.main, [data-testid=\"stMain\"]');"
            "return Math.max(document.body.scrollHeight, m ? m.scrollHeight : 0);")
        drv.set_window_size(width, min(max(int(height) + 100, 800), 4000))
    else:
        drv.set_window_size(width, 900)  # what a reader sees first: the README's picture
    time.sleep(0.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(path))
    print(f"  {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KiB)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder of the PNGs (default docs/img)")
    ap.add_argument("--width", type=int, default=1400, help="window width in pixels")
    ap.add_argument("--rater-token", default=os.environ.get("WORKBENCH_DOCS_RATER_TOKEN"),
                    help="a rater's token (an adjudicator's for the agreement page): the judging pages too")
    ap.add_argument("--grade", action="store_true", help="give one grade (1) as that rater, for judge-after-grade.png")
    ap.add_argument("--full-page", action="store_true", help="the whole page, not the first screen")
    args = ap.parse_args(argv)

    browser, driver = find_browser()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkdtemp(prefix="wb-docs-")) / "dashboard.log"
    proc = start_dashboard(port, log)
    drv = None
    problems: list[tuple[str, list[str]]] = []
    try:
        wait_healthy(proc, url, log)
        drv = chrome(browser, driver, args.width)
        print(f"dashboard at {url}, home {os.environ.get('WORKBENCH_HOME', '~/.workbench')}")
        for name, (path, expect) in ENGINEER_PAGES.items():
            drv.get(f"{url}/{path}")
            shown = settle(drv, expect)
            shoot(drv, args.out / f"{name}.png", args.width, args.full_page)
            if shown:
                problems.append((name, shown))
        if args.rater_token:
            # a fresh browser: the rater's session must not carry the engineer pages' state
            drv.quit()
            drv = chrome(browser, driver, args.width)
            drv.get(f"{url}/judge?token={args.rater_token}")
            shown = settle(drv, ["Judging as"])
            shoot(drv, args.out / "judge.png", args.width, args.full_page)
            if shown:
                problems.append(("judge", shown))
            if args.grade:
                from selenium.webdriver.common.action_chains import ActionChains

                time.sleep(1.0)  # a grade counts once the pair has been on screen for half a second
                ActionChains(drv).send_keys("1").perform()
                shown = settle(drv, ["Saved"])
                shoot(drv, args.out / "judge-after-grade.png", args.width, args.full_page)
                if shown:
                    problems.append(("judge-after-grade", shown))
            drv.get(f"{url}/agreement")
            shown = settle(drv, ["Agreement"])
            shoot(drv, args.out / "agreement.png", args.width, args.full_page)
            if shown:
                problems.append(("agreement", shown))
    finally:
        if drv is not None:
            drv.quit()
        stop(proc)
    for name, shown in problems:
        print(f"{name}: {shown}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
