"""Helpers for the fault tests: kills at named functions, a small full disk, a read-only folder, another local user.

* :func:`kill_at` — the environment that makes a ``workbench`` subprocess kill itself
  (SIGKILL by default) on the N-th call of a named function (see
  ``tests/faultinject/sitecustomize.py``);
* :func:`small_disk` — a tmpfs of a few MB mounted on a folder (root only; otherwise
  the test is skipped with the reason);
* :func:`read_only` — a read-only bind mount of a folder (root only);
* :func:`other_user` — a second local user to run commands as (root only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WORKBENCH = [sys.executable, "-m", "workbench.cli"]
OTHER_USER = "wb_test_other"


def kill_at(target: str, n: int = 1, *, when: str = "before", sig: str = "SIGKILL",
            env: dict | None = None) -> dict:
    """The environment for a subprocess that kills itself on the ``n``-th call of ``target``.

    Args:
        target: ``module:Qualified.name``, e.g. ``workbench.experiment.cache:CandidateCache.put``.
        n: which call (1 = the first).
        when: ``before`` the call runs, or ``after`` it returned.
        sig: the signal's name (SIGKILL, SIGTERM, ...).
        env: the environment to extend (default: this process's).
    """
    base = dict(os.environ if env is None else env)
    spec = f"{target}:{n}:{when}:{sig}"
    path = str(REPO / "tests" / "faultinject")
    base["PYTHONPATH"] = os.pathsep.join(p for p in (path, str(REPO), base.get("PYTHONPATH", "")) if p)
    base["WORKBENCH_FAULT"] = ";".join(filter(None, (base.get("WORKBENCH_FAULT", ""), spec)))
    return base


def run(args: list[str], *, env: dict | None = None, timeout: float = 600, cwd: Path = REPO,
        user: str | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m workbench.cli ARGS`` (as ``user`` when given) and capture its output."""
    cmd = [*WORKBENCH, *args]
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def is_root() -> bool:
    return os.geteuid() == 0


@contextmanager
def small_disk(folder: Path, size: str = "4m"):
    """Mount a tmpfs of ``size`` on ``folder`` for the block (root only; skips otherwise)."""
    if not is_root() or shutil.which("mount") is None:
        pytest.skip("a small full file system needs root to mount a tmpfs")
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` until at most ``leave`` bytes are free."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    with open(folder / ".filler", "wb") as fh:
        chunk = b"\0" * 65536
        remaining = free - leave
        while remaining > 0:
            try:
                fh.write(chunk[: min(len(chunk), remaining)])
                fh.flush()
            except OSError:
                break
            remaining -= len(chunk)


@contextmanager
def read_only(folder: Path):
    """Make ``folder`` read-only with a read-only bind mount for the block (root only; skips otherwise)."""
    if not is_root():
        pytest.skip("a read-only folder that binds root too needs a read-only bind mount (root)")
    a = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True)
    if a.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {a.stderr.strip()}")
    b = subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True, text=True)
    try:
        if b.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {b.stderr.strip()}")
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def other_user() -> str:
    """A second local user (created once) to act as another person on this machine (root only; skips otherwise)."""
    if not is_root():
        pytest.skip("acting as another local user needs root")
    import pwd

    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        proc = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                              capture_output=True, text=True)
        if proc.returncode != 0 and "already exists" not in proc.stderr:
            pytest.skip(f"cannot create a second local user: {proc.stderr.strip()}")
    return OTHER_USER


def _reachable(path: Path) -> bool:
    p = Path(path).resolve()
    return all(os.stat(d).st_mode & 0o001 for d in [p.parent, *p.parent.parents]) and bool(os.stat(p).st_mode & 0o001)


def user_python() -> tuple[list[str], dict]:
    """(interpreter, environment additions) another local user can run with this project importable.

    This interpreter when its path is open to others; otherwise (a pyenv Python under a private
    ``/root``) the system Python of the same version, given this environment's site-packages.
    Skips the test when neither works.
    """
    import sysconfig

    extra = {"PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])}
    if _reachable(Path(sys.executable)):
        return [sys.executable], extra
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if system.is_file() and _reachable(system):
        return [str(system)], extra
    pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that another user may run "
                f"({sys.executable} is below a private folder)")


def as_user(user: str, code: str, timeout: float = 60, args: list[str] | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run Python ``code`` as ``user`` (see :func:`user_python`; outside any home) and capture its output."""
    py, extra = user_python()
    return subprocess.run(["runuser", "-u", user, "--", *py, "-c", code, *(args or [])], capture_output=True,
                          text=True, timeout=timeout, cwd="/", env={**os.environ, **(env or {}), **extra})


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def workbench_server(args: list[str], env: dict, log: Path, ready_url: str, ready, wait_s: float = 90,
                     what: str = "the server"):
    """``workbench ARGS`` in its own process group, its stderr in ``log``; yields the process once
    ``ready(body)`` is true of what ``ready_url`` answers (the test fails with the log's tail if it exits or
    stays silent ``wait_s`` seconds); stopped with SIGTERM (then SIGKILL) afterwards."""
    import signal
    import time
    import urllib.request

    proc = subprocess.Popen([*WORKBENCH, *args], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=log.open("wb"), start_new_session=True)
    try:
        deadline = time.time() + wait_s
        while time.time() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as r:
                    if ready(r.read()):
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"{what} did not answer: {log.read_text()[-3000:]}")
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@contextmanager
def dashboard(port: int, env: dict, log: Path, *args: str, wait_s: float = 90):
    """``workbench dashboard --port PORT --no-open *ARGS`` (:func:`workbench_server`), ready once
    ``/_stcore/health`` answers ``ok``."""
    with workbench_server(["dashboard", *args, "--port", str(port), "--no-open"], env, log,
                          f"http://127.0.0.1:{port}/_stcore/health", lambda body: body.strip() == b"ok", wait_s,
                          "the dashboard") as proc:
        yield proc


class JsonHandler:
    """A mixin for ``http.server.BaseHTTPRequestHandler`` subclasses of test servers: quiet, HTTP/1.1, and
    ``send(code, body, headers)`` with a JSON content type and a Content-Length."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code: int, raw: bytes, headers: dict | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@contextmanager
def http_server(handler):
    """A real threading HTTP server on 127.0.0.1 with ``handler`` (a ``BaseHTTPRequestHandler`` class); yields
    its base URL, shut down after."""
    import threading
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


#: No model hub: every model comes from a folder here.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@contextmanager
def rerank_service(ce_folder: Path, log: Path, *args: str, env: dict | None = None, host: str = "127.0.0.1",
                   max_length: int = 64):
    """``python -m workbench.services.reranker`` on a free port with ``args``; yields ``(port, process)``
    once /health answers (with the token of ``env`` when it holds one)."""
    port = free_port()
    import time

    import requests

    from workbench.services import policy

    env = {**os.environ, **OFFLINE, **(env or {})}
    token = env.get(policy.RERANK_TOKEN_ENV)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "workbench.services.reranker", "--model", str(ce_folder),
                                 "--host", host, "--port", str(port), "--max-length", str(max_length), *args],
                                stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the reranker exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", headers=headers, timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the reranker did not answer in 120 s: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield port, proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
