"""Headless Chromium for the dashboard's end-to-end test: start ``workbench dashboard``, open
pages, wait for their content, collect exceptions and screenshots.

Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) driven by
selenium with the driver's path given, so Selenium Manager never downloads anything. The
flags keep Chromium off the network (a closed network refuses its background connections).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_CANDIDATES = ("chromedriver",)


def find_browser() -> tuple[str, str] | None:
    """``(chromium, chromedriver)`` paths, or ``None`` when either is missing."""
    browser = next((p for p in map(shutil.which, CHROMIUM_CANDIDATES) if p), None)
    driver = next((p for p in map(shutil.which, DRIVER_CANDIDATES) if p), None)
    return (browser, driver) if browser and driver else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Dashboard:
    """``workbench dashboard`` in a subprocess, serving the given environment's home."""

    def __init__(self, env: dict[str, str], log: Path, *args: str):
        """Start it on a free port of 127.0.0.1; ``args`` go to ``workbench dashboard`` (``--judging-only``)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        exe = Path(sys.executable).with_name("workbench")
        self.proc = subprocess.Popen([str(exe), "dashboard", "--no-open", "--port", str(self.port), *args], env=env,
                                     stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the dashboard exited ({self.proc.returncode}): {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the dashboard did not answer in {timeout:.0f} s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)


def chrome(browser: str, driver: str):
    """A headless Chromium WebDriver with a fresh profile (1400×2000 window)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1400,2000", f"--user-data-dir={tempfile.mkdtemp(prefix='wb-chrome-')}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def open_page(drv, url: str, expect: list[str], timeout: float = 120) -> dict:
    """Open ``url`` and wait until every string of ``expect`` is on the page and Streamlit is idle.

    Returns:
        ``{"text": the page's visible text, "exceptions": [texts of Streamlit exception boxes],
        "missing": [expected strings never seen]}``.
    """
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    drv.get(url)
    deadline = time.time() + timeout
    text, missing = "", list(expect)
    while time.time() < deadline:
        time.sleep(1.0)
        try:
            text = drv.find_element(By.TAG_NAME, "body").text
            # the status widget shows "Running…" or a "Stop" button while the script still runs
            busy = any(el.is_displayed() and ("Running" in el.text or "Stop" in el.text)
                       for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'))
        except Exception:  # noqa: BLE001 - the page is re-rendering (an element went stale under us)
            continue
        missing = [e for e in expect if e not in text]
        if not missing and not busy:
            break
    time.sleep(1.5)  # let plots finish drawing before the screenshot
    for _ in range(10):  # Streamlit may still replace elements: read again until they hold still
        try:
            exceptions = [el.text for el in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')]
            return {"text": drv.find_element(By.TAG_NAME, "body").text, "exceptions": exceptions, "missing": missing}
        except StaleElementReferenceException:
            time.sleep(0.5)
    raise RuntimeError(f"{url}: the page kept re-rendering")


def screenshot(drv, path: Path) -> Path:
    """A full-page PNG (the window grown to the page's height, at most 6,000 px)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    height = drv.execute_script(
        "const m = document.querySelector('section.main, [data-testid=\"stMain\"]');"
        "return Math.max(document.body.scrollHeight, m ? m.scrollHeight : 0);")
    drv.set_window_size(1400, min(max(int(height) + 100, 1000), 6000))
    time.sleep(0.5)
    drv.save_screenshot(str(path))
    return path
