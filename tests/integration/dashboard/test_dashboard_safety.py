"""The dashboard's safety: MLflow runs under kills, built datasets edited by hand, and who may see it.

1. ``workbench eval`` SIGKILLed during its artifact upload (``tests/faults.py``'s
   :func:`~faults.kill_at` on ``MlflowClient.log_artifacts``, the call that uploads a
   run's artifacts): the reader keeps each config's last *complete* run, and the runs the
   dead process left RUNNING are ended KILLED; a run whose writer lives is never touched.
2. A built dataset file edited after the build: the pages that show its texts say so,
   naming the file and ``workbench data build --only NAME``.
3. ``workbench dashboard --host 0.0.0.0`` without tokens exits 2 with one line naming the
   fix; with a token it serves (and prints the machine's addresses, not localhost), and
   the app shows nothing but its sign-in form until the right token is given.

The evals use the reference lane only (no Postgres) on a copy of the session's gita build.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import faults
import pytest
from fixtures.paths import REPO

from workbench.dashboard import auth, serving
from workbench.experiment.tracking import (
    TAG_ARTIFACTS,
    TAG_ENDED_BY,
    TAG_HOST,
    TAG_PID,
    TAG_PROCESS,
    end_dead_runs,
    is_complete,
    process_identity,
    writer_state,
    writer_tags,
)
from workbench.results import store

ROOT = REPO
PAGES = ROOT / "dashboards" / "views"
APP = ROOT / "dashboards" / "app.py"
#: The MLflow call that uploads a run's artifacts: one call per run (the eval's parent, then each config).
UPLOAD = "mlflow.tracking.client:MlflowClient.log_artifacts"

EXPERIMENT = """
name = "safety"
datasets = ["gita"]
measures = ["R@10", "RR@10"]
depth = 20
[lanes.ref]
kind = "reference"
[configs.first]
lanes = ["ref"]
[configs.second]
lanes = ["ref"]
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "WORKBENCH_FAULT")}
    env["WORKBENCH_HOME"] = str(home)
    return env


def _client(home: Path):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=_uri(home))


def _uri(home: Path) -> str:
    return f"sqlite:///{home / 'mlflow.db'}"


def _all_runs(home: Path) -> list:
    c = _client(home)
    return c.search_runs([e.experiment_id for e in c.search_experiments()], order_by=["attributes.start_time ASC"])


@pytest.fixture(scope="module")
def home(built_home, data_dir, tmp_path_factory):
    """A home with its own copy of the gita build (the edit test changes it) and one complete eval."""
    h = tmp_path_factory.mktemp("safety-home")
    (h / "datasets").mkdir()
    shutil.copytree(built_home / "datasets" / "gita", h / "datasets" / "gita")
    (h / "safety.toml").write_text(EXPERIMENT)
    done = faults.run(["eval", str(h / "safety.toml")], env=_env(h))
    assert done.returncode == 0, done.stderr[-2000:]
    return h


@pytest.fixture(autouse=True)
def _keep_main_module():
    """AppTest replaces ``sys.modules["__main__"]``; put it back (see tests/integration/dashboard/test_app.py)."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture()
def at_home(home, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    return home


@pytest.fixture()
def bind():
    """Set Streamlit's ``server.address`` (what the app sees it is served on) for one test."""
    from streamlit import config

    old = config.get_option("server.address")

    def set_(address):
        config.set_option("server.address", address)

    yield set_
    config.set_option("server.address", old)


def _app(path: Path, **query):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(path), default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# ------------------------------------------------------------------ 1. runs under kills


@pytest.mark.data
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_during_the_artifact_upload_keeps_the_last_complete_run(home, when, monkeypatch):
    """SIGKILL on the third upload of the eval (parent, config ``first``, then ``second``): ``before``
    it, ``second`` has metrics but no artifacts; ``after`` it, all its artifacts but no FINISHED."""
    before = store.latest_per_config(store.config_runs(_uri(home))).set_index("config")["run_id"].to_dict()
    assert set(before) == {"first", "second"}
    env = faults.kill_at(UPLOAD, 3, when=when, env=_env(home))
    killed = faults.run(["eval", str(home / "safety.toml")], env=env)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])

    # what the dead process left: its eval and the config it was uploading still RUNNING
    running = [r for r in _all_runs(home) if r.info.status == "RUNNING"]
    assert sorted(r.info.run_name for r in running) == ["gita/second", "safety eval"]
    parent = next(r for r in running if r.info.run_name == "safety eval").info.run_id
    dead_child = next(r for r in running if r.info.run_name == "gita/second")
    assert dead_child.data.metrics["recall_at_10"] >= 0  # the metrics were in: the old reader took it as newest
    uploaded = {a.path for a in _client(home).list_artifacts(dead_child.info.run_id)}
    assert uploaded == (set() if when == "before" else {"per_query.csv", "run.trec", "config.json"})
    assert dead_child.data.tags[TAG_PID] != str(os.getpid()) and TAG_ARTIFACTS not in dead_child.data.tags

    # the reader: `second` is still the previous complete run; `first` (finished before the kill) is the new one
    runs = store.config_runs(_uri(home))
    latest = store.latest_per_config(runs).set_index("config")["run_id"].to_dict()
    assert latest["second"] == before["second"]
    new_first = next(r for r in _all_runs(home) if r.info.run_name == "gita/first"
                     and r.data.tags.get("mlflow.parentRunId") == parent)
    assert new_first.info.status == "FINISHED" and latest["first"] == new_first.info.run_id != before["first"]
    assert dead_child.info.run_id not in set(runs["run_id"])

    # ... and reading ended the dead process's runs KILLED, saying who and why
    after = {r.info.run_id: r for r in _all_runs(home)}
    for rid in (parent, dead_child.info.run_id):
        assert after[rid].info.status == "KILLED"
        assert after[rid].data.tags[TAG_ENDED_BY].endswith(
            f"its writer, pid {dead_child.data.tags[TAG_PID]} on {socket.gethostname()}, ended without finishing it")
    assert not [r for r in after.values() if r.info.status == "RUNNING"]

    # the overview shows both configs, `second` from the earlier eval
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    from dashboards import ui

    ui.cached_config_runs.clear()  # the page caches run listings for 30 s; an earlier case of this test read this store
    at = _app(PAGES / "overview.py")
    assert sorted(at.dataframe[0].value.index) == ["safety/first", "safety/second"]
    shown = next(d.value for d in at.dataframe if "run_id" in getattr(d.value, "columns", []))
    assert set(shown["run_id"]) == {latest["first"], before["second"]}
    assert not at.warning


def _mlflow_run(home: Path, tags: dict[str, str]) -> str:
    c = _client(home)
    exp = c.get_experiment_by_name("safety-liveness")
    exp_id = exp.experiment_id if exp else c.create_experiment("safety-liveness", (home / "mlartifacts").as_uri())
    return c.create_run(exp_id, tags={"workbench.kind": "config", "config": "zzz", "dataset": "gita",
                                      **tags}).info.run_id


@pytest.mark.data
def test_only_runs_whose_writer_is_certainly_dead_are_ended(home):
    """A live writer (this test), another host or machine, no writer tags: left RUNNING. A writer
    that exited, whose pid now belongs to another process, or that ran before a reboot: KILLED."""
    gone = subprocess.Popen(["sleep", "60"])
    gone_tags = {TAG_HOST: socket.gethostname(), TAG_PID: str(gone.pid), TAG_PROCESS: process_identity(gone.pid) or ""}
    assert writer_state(gone_tags) == "alive"
    gone.kill()
    gone.wait()
    me = writer_tags()
    kind, machine, boot, ns, tick = me[TAG_PROCESS].split(":")
    assert kind == "linux" and machine, "this test needs /proc and a machine id"
    ids = {"alive": _mlflow_run(home, me), "other host": _mlflow_run(home, {**me, TAG_HOST: "elsewhere.example"}),
           "other machine": _mlflow_run(home, {**me, TAG_PROCESS: f"linux:0ther:{boot}:{ns}:{tick}"}),
           "other container": _mlflow_run(home, {**me, TAG_PROCESS: f"linux:{machine}:{boot}:1:{tick}"}),
           "untagged": _mlflow_run(home, {}), "exited": _mlflow_run(home, gone_tags),
           "pid reused": _mlflow_run(home, {**me, TAG_PROCESS: f"linux:{machine}:{boot}:{ns}:1"}),
           "rebooted": _mlflow_run(home, {**me, TAG_PROCESS: f"linux:{machine}:an-earlier-boot:{ns}:{tick}"})}
    assert writer_state(me) == "alive" and writer_state(gone_tags) == "dead"
    ended = end_dead_runs(_client(home), [_client(home).get_experiment_by_name("safety-liveness").experiment_id])
    assert sorted(ended) == sorted([ids["exited"], ids["pid reused"], ids["rebooted"]])
    c = _client(home)
    status = {k: c.get_run(v).info.status for k, v in ids.items()}
    assert status == {"alive": "RUNNING", "other host": "RUNNING", "other machine": "RUNNING",
                      "other container": "RUNNING", "untagged": "RUNNING", "exited": "KILLED",
                      "pid reused": "KILLED", "rebooted": "KILLED"}
    runs = store.config_runs(_uri(home))  # none of them is a result, and reading ended no live one
    assert not set(ids.values()) & set(runs["run_id"]) and "zzz" not in set(runs["config"])
    assert c.get_run(ids["alive"]).info.status == "RUNNING"
    for k in ("alive", "other host", "other machine", "other container", "untagged"):
        c.set_terminated(ids[k], "FAILED")


def test_is_complete_needs_finished_and_for_tagged_runs_the_artifacts_tag():
    tagged = {TAG_PID: "12"}
    assert is_complete("FINISHED", {}) is True  # runs of older versions: FINISHED only
    assert is_complete("FINISHED", {**tagged, TAG_ARTIFACTS: "per_query.csv,run.trec"}) is True
    assert is_complete("FINISHED", tagged) is False
    for status in ("RUNNING", "FAILED", "KILLED", "SCHEDULED"):
        assert is_complete(status, {**tagged, TAG_ARTIFACTS: "x"}) is False


# ------------------------------------------------------------------ 2. a dataset edited by hand


@pytest.mark.data
def test_a_dataset_edited_after_its_build_is_flagged_on_every_page_showing_its_texts(at_home):
    from workbench.data import catalog

    queries = at_home / "datasets" / "gita" / "queries.tsv"
    original = queries.read_bytes()
    at = _app(PAGES / "query.py")
    assert not [w for w in at.warning if "manifest" in w.value]  # the intact build: no warning
    edited = original.replace(b"\tBhagavad-gita 1.2\t", b"\tBhagavad-gita 1.2 EDITED BY HAND\t", 1)
    assert edited != original
    try:
        queries.write_bytes(edited)
        # the command line calls it stale for the same reason
        assert catalog.status("gita", home=at_home) == "stale: output queries.tsv was modified or removed"
        assert store.modified_files(at_home, "gita") == ("queries.tsv",)
        expected = (f"Dataset gita: queries.tsv in {at_home / 'datasets' / 'gita'} does not match the build's "
                    "manifest (edited or replaced after `workbench data build`), so the texts and queries shown here "
                    "may not be the ones evaluated. Rebuild it: `workbench data build --only gita`")
        at = _app(PAGES / "query.py")
        at.selectbox(key="q_baseline").set_value("safety/first").run()
        at.multiselect(key="q_types").set_value(["reference"]).run()
        at.selectbox(key="q_query").set_value("gita-ref-00001").run()
        assert not at.exception
        assert [w.value for w in at.warning if "manifest" in w.value] == [expected]
        assert any("Bhagavad-gita 1.2 EDITED BY HAND" in m.value for m in at.markdown)  # the edited text, flagged
        at = _app(PAGES / "compare.py")
        assert [w.value for w in at.warning if "manifest" in w.value] == [expected]
    finally:
        queries.write_bytes(original)
    assert store.modified_files(at_home, "gita") == ()
    at = _app(PAGES / "query.py")  # the restored build reads again (new file version), without the warning
    assert not [w for w in at.warning if "manifest" in w.value]


@pytest.mark.data
def test_modified_outputs_names_each_changed_file_and_an_unreadable_manifest(home, tmp_path):
    copy = tmp_path / "h"
    shutil.copytree(home / "datasets" / "gita", copy / "datasets" / "gita")
    folder = copy / "datasets" / "gita"
    assert store.modified_files(copy, "gita") == ()
    with (folder / "documents.jsonl").open("ab") as fh:
        fh.write(b"\n")
    (folder / "qrels.txt").unlink()
    assert store.modified_files(copy, "gita") == ("documents.jsonl", "qrels.txt")
    (folder / "manifest.json").write_text("{not json")
    assert store.modified_files(copy, "gita") == ("manifest.json",)


# ------------------------------------------------------------------ 3. who may see the dashboard



def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_off_loopback_without_tokens_it_refuses_with_one_line(host, tmp_path):
    port = faults.free_port()
    res = faults.run(["dashboard", "--host", host, "--port", str(port), "--no-open"], env=_env(tmp_path), timeout=120)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --host {host} would serve every result to the network "
                                                   "without authentication")
    assert "`workbench dashboard token add NAME`" in lines[0]
    assert res.stdout == "" and not _listening(port)
    assert not (tmp_path / "dashboard").exists()  # refusing creates nothing


def test_token_add_prints_it_once_and_stores_only_its_hash_0600(tmp_path):
    env = _env(tmp_path)
    add = faults.run(["dashboard", "token", "add", "ci-bot"], env=env, timeout=120)
    assert add.returncode == 0, add.stderr
    token = add.stdout.strip()
    assert len(add.stdout.splitlines()) == 1 and len(token) >= 43  # token_urlsafe(32)
    path = tmp_path / "dashboard" / "tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert token not in text
    body = json.loads(text)
    [rec] = body["tokens"]
    import hashlib

    assert rec["name"] == "ci-bot" and rec["sha256"] == hashlib.sha256(token.encode()).hexdigest()
    import calendar

    assert abs(calendar.timegm(time.strptime(rec["created"], "%Y-%m-%dT%H:%M:%SZ")) - time.time()) < 300
    assert not list(path.parent.glob(".tmp-*"))  # written atomically: no temporary left
    second = faults.run(["dashboard", "token", "add", "ops"], env=env, timeout=120).stdout.strip()
    assert second != token
    listed = faults.run(["dashboard", "token", "list"], env=env, timeout=120)
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["ci-bot", "ops"]
    assert token not in listed.stdout and second not in listed.stdout
    again = faults.run(["dashboard", "token", "add", "ops"], env=env, timeout=120)
    assert again.returncode == 2 and "a dashboard token named 'ops' exists" in again.stderr
    newline = faults.run(["dashboard", "token", "add", "ops\n"], env=env, timeout=120)  # looked like 'ops' once listed
    assert newline.returncode == 2 and "token name 'ops\\n' is not valid" in newline.stderr, newline.stderr
    gone = faults.run(["dashboard", "token", "revoke", "nobody"], env=env, timeout=120)
    assert gone.returncode == 2 and "no dashboard token is named 'nobody' (tokens: ci-bot, ops)" in gone.stderr
    assert faults.run(["dashboard", "token", "revoke", "ops"], env=env, timeout=120).returncode == 0
    src = auth.sources(tmp_path)
    assert auth.check_token(token, src) == "ci-bot" and auth.check_token(second, src) is None
    assert auth.check_token(token[:-1], src) is None and auth.check_token("", src) is None
    # a token file others can read is refused, never trusted
    path.chmod(0o644)
    res = faults.run(["dashboard", "token", "list"], env=env, timeout=120)
    assert res.returncode == 2 and f"run `chmod 600 {path}`" in res.stderr
    from workbench.errors import ConfigError

    with pytest.raises(ConfigError, match="can be read by other users"):
        auth.check_token(token, src)


def test_with_a_token_it_serves_every_interface_and_prints_their_addresses(tmp_path):
    env = _env(tmp_path)
    assert faults.run(["dashboard", "token", "add", "t"], env=env, timeout=120).returncode == 0
    port = faults.free_port()
    log = tmp_path / "dashboard.log"
    with faults.dashboard(port, env, log, "--host", "0.0.0.0"):
        first = log.read_text().splitlines()[0]
        assert first.startswith(f"[workbench] dashboard on all interfaces of {socket.gethostname()}, port {port}")
        assert "(access token required)" in first
        assert "localhost" not in first and "127.0.0.1" not in first
        for addr in serving.machine_addresses(ipv6=False):
            assert f"http://{addr}:{port}" in first
            with urllib.request.urlopen(f"http://{addr}:{port}/_stcore/health", timeout=5) as r:  # really served there
                assert r.read().strip() == b"ok"


def test_loopback_addresses_and_the_printed_address():
    assert auth.is_loopback("127.0.0.1") and auth.is_loopback("::1") and auth.is_loopback("localhost")
    assert not any(auth.is_loopback(h) for h in ("0.0.0.0", "::", "", None, "192.0.2.7"))
    assert serving.describe("127.0.0.1", 8501) == "http://127.0.0.1:8501"
    assert serving.describe("::1", 8501) == "http://[::1]:8501"
    wild = serving.describe("0.0.0.0", 8501)
    assert wild.startswith(f"all interfaces of {socket.gethostname()}, port 8501") and "localhost" not in wild


@pytest.mark.data
def test_the_app_shows_only_the_sign_in_until_the_token_matches(at_home, bind, monkeypatch):
    bind("0.0.0.0")
    token = auth.FileTokens(at_home).add("viewer")
    try:
        at = _app(APP)
        assert [t.value for t in at.title] == ["Workbench dashboard"]
        assert at.text_input(key="wb_token_input").label == "Access token"
        assert not at.dataframe and not at.sidebar.selectbox and not at.warning  # nothing of the results
        at.text_input(key="wb_token_input").input("not-" + token)
        at.button[0].click().run()
        assert [t.value for t in at.title] == ["Workbench dashboard"] and not at.dataframe
        assert [e.value for e in at.error] == ["That token is not valid (or was revoked)."]
        at.text_input(key="wb_token_input").input(token)
        at.button[0].click().run()
        assert not at.exception
        assert [t.value for t in at.title] == ["Overview"]
        assert sorted(at.dataframe[0].value.index) == ["safety/first", "safety/second"]
        # revoked: the same session is signed out on its next run
        auth.FileTokens(at_home).revoke("viewer")
        token2 = auth.FileTokens(at_home).add("viewer2")
        at.run()
        assert [t.value for t in at.title] == ["Workbench dashboard"] and not at.dataframe
        assert [e.value for e in at.error] == ["Your token is no longer valid (it was revoked); sign in with another."]
        # ?token= once in the URL: signed in, and the token leaves the URL
        at = _app(APP, token=token2)
        assert [t.value for t in at.title] == ["Overview"] and "token" not in at.query_params
        at = _app(APP, token="wrong")
        assert [t.value for t in at.title] == ["Workbench dashboard"] and not at.dataframe
        assert [e.value for e in at.error] == ["The token in the link is not valid (or was revoked)."]
    finally:
        shutil.rmtree(at_home / "dashboard", ignore_errors=True)


@pytest.mark.data
def test_the_app_without_tokens_shows_its_pages_on_loopback_only(at_home, bind):
    bind("127.0.0.1")
    at = _app(APP)
    assert [t.value for t in at.title] == ["Overview"]
    for address in ("0.0.0.0", None):  # None: `streamlit run` without --server.address binds every interface
        bind(address)
        at = _app(APP)
        assert not at.title and not at.dataframe
        [err] = [e.value for e in at.error]
        assert err.startswith("This dashboard is served on ") and "without access tokens, so it shows nothing" in err
        assert "`workbench dashboard token add NAME`" in err


# ------------------------------------------------------------------ 4. blinding across dashboards (#41 item 10)


def test_while_a_judging_only_dashboard_serves_the_engineer_pages_ask_for_a_sign_in(tmp_path, bind, monkeypatch):
    """A rater signed in on `workbench dashboard --judging-only` opened the engineers' dashboard (127.0.0.1, no
    tokens) in the same browser and saw configs, ranks and the raters' confusion table. While a judging-only
    dashboard of the home serves, the engineers' shows only why and the fix until an access token signs in."""
    from workbench.errors import BusyError

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    for name in ("MLFLOW_TRACKING_URI", "WORKBENCH_PG_DSN", "WORKBENCH_DASHBOARD_JUDGING_ONLY"):
        monkeypatch.delenv(name, raising=False)
    bind("127.0.0.1")
    assert [t.value for t in _app(APP).title] == ["Overview"]  # as before: open to this machine

    fd = auth.hold_judging_only(home, 8502, "127.0.0.1")
    try:
        assert auth.judging_dashboards(home) == [{"host": "127.0.0.1", "port": 8502, "pid": os.getpid()}]
        with pytest.raises(BusyError, match="already serves port 8502"):
            auth.hold_judging_only(home, 8502, "127.0.0.1")
        at = _app(APP)
        assert not at.title and not at.dataframe and not at.info
        assert [e.value for e in at.error] == [
            "A judging-only dashboard of this home serves raters (port 8502), so this dashboard shows its pages only "
            "after sign-in: they show configs, ranks and other raters' grades, which would unblind a rater who opened "
            "this address in the same browser. Raters: judge on that dashboard's port. Engineers: create an access "
            "token with `workbench dashboard token add NAME` and sign in with it here."]
        monkeypatch.setenv("WORKBENCH_DASHBOARD_JUDGING_ONLY", "1")  # the judging-only dashboard itself: its sign-in
        assert [t.value for t in _app(APP).title] == ["Judge"]
        monkeypatch.delenv("WORKBENCH_DASHBOARD_JUDGING_ONLY")
        token = auth.FileTokens(home).add("eng")
        assert [t.value for t in _app(APP).title] == ["Workbench dashboard"]  # the sign-in form
        assert [t.value for t in _app(APP, token=token).title] == ["Overview"]
        auth.FileTokens(home).revoke("eng")
    finally:
        os.close(fd)
    assert auth.judging_dashboards(home) == []  # let go: the file left behind is no dashboard
    assert [t.value for t in _app(APP).title] == ["Overview"]

    # the same browser's cookie of another port marks it here too (a cookie is not bound to a port)
    cookies = {"wb_judging_8502": "sid-there", "wb_judging_8501": "sid-here", "wb_judging_9000": "", "other": "x"}
    assert auth.other_judging_marks(cookies, 8501) == ["8502"]
    assert auth.other_judging_marks(cookies, "8502") == ["8501"]
    assert auth.other_judging_marks({"wb_judging_8501": "sid"}, 8501) == []


def test_the_judging_only_dashboard_holds_its_mark_while_it_serves(tmp_path):
    """`workbench dashboard --judging-only` takes the lock before it becomes Streamlit (exec): held by the server
    while it serves, and let go by the kernel when it stops (no file to clean up after a crash)."""
    port = faults.free_port()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "WORKBENCH_PG_DSN")}
    env["WORKBENCH_HOME"] = str(home)
    with faults.dashboard(port, env, tmp_path / "judging-only.log", "--judging-only") as proc:
        assert auth.judging_dashboards(home) == [{"host": "127.0.0.1", "port": port, "pid": proc.pid}]
    assert proc.poll() is not None and auth.judging_dashboards(home) == []

