"""The local OpenSearch node's life cycle, with its own home: install, up, reuse, down.

This starts a second node beside the session's (``os_cluster``), so it is one test that
does everything in order and removes its install and data at the end.
"""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.services import opensearch as node


@pytest.mark.opensearch  # installs and starts a node of its own
def test_up_reuse_analyze_down(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WORKBENCH_OS_URL", raising=False)
    home = tmp_path / "home"
    runner = CliRunner()
    try:
        res = runner.invoke(app, ["services", "status", "opensearch"])
        assert res.exit_code == 1 and "opensearch: stopped" in res.output

        res = runner.invoke(app, ["services", "up", "opensearch", "--heap", "384m"])
        assert res.exit_code == 0, res.output
        url = res.stdout.strip().splitlines()[-1]
        assert url.startswith("https://127.0.0.1:")
        st = node.status(home)
        assert st["state"] == "running" and st["health"] in ("green", "yellow") and st["heap"] == "384m"

        again = node.up(home)  # reused: same node
        assert again.url == url and again.pid == st["pid"]

        from workbench.engines import os_client as osearch

        es = osearch.client(url)
        info = osearch.check_cluster(es, url)
        assert info["version"] == node.OPENSEARCH_VERSION
        assert {"opensearch-knn", node.ICU_PLUGIN} <= set(info["plugins"])
        toks = es.indices.analyze(body={"tokenizer": "icu_tokenizer", "filter": ["icu_folding"], "text": "Saṁyutta"})
        assert [t["token"] for t in toks["tokens"]] == ["samyutta"]

        res = runner.invoke(app, ["services", "status", "opensearch", "--json"])
        assert res.exit_code == 0 and '"state": "running"' in res.stdout

        res = runner.invoke(app, ["services", "down", "opensearch"])
        assert res.exit_code == 0
        assert node.status(home) == {"state": "stopped"}
        with pytest.raises(osearch.OpenSearchError, match="cannot reach"):
            osearch.check_cluster(osearch.client(url), url)
        assert node.down(home) is False
    finally:
        node.down(home)
        shutil.rmtree(node.runtime_dir(home), ignore_errors=True)


@pytest.mark.parametrize("args, msg", [
    (["services", "up", "elasticsearch"], "unknown service 'elasticsearch'"),
    (["services", "up", "opensearch", "--heap", "lots"], "must look like 512m or 1g"),
])
def test_bad_service_arguments_exit_2(tmp_path, monkeypatch, args, msg):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and msg in res.output
    assert not node.state_path(tmp_path).exists()


def test_a_dead_node_is_reported_and_restartable(tmp_path):
    node.state_path(tmp_path).parent.mkdir(parents=True)
    runtime = node.runtime_dir(tmp_path)
    node.state_path(tmp_path).write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": 999999999,
                                                     "install": str(runtime / "install"), "data": str(runtime / "data"),
                                                     "log": "", "heap": "512m", "started_at": 0}))
    assert node.status(tmp_path)["state"] == "dead"
    assert node.down(tmp_path) is False and not node.state_path(tmp_path).exists()


@pytest.mark.parametrize("content", ["", "{not json", '{"url": "http://127.0.0.1:9"}', '["a"]',
                                     '{"url": 1, "pid": "x", "install": "", "data": "", "log": "", "heap": "", '
                                     '"started_at": 0}'])
def test_a_corrupt_state_file_is_moved_aside_not_trusted(tmp_path, content):
    path = node.state_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert node.status(tmp_path) == {"state": "stopped"}
    assert not path.exists() and path.with_name("opensearch.json.corrupt").read_text() == content
    assert node.down(tmp_path) is False


def test_down_never_signals_a_process_that_is_not_this_homes_node(tmp_path):
    import json
    import subprocess

    stranger = subprocess.Popen(["sleep", "60"])
    try:
        node.state_path(tmp_path).parent.mkdir(parents=True)
        node.state_path(tmp_path).write_text(json.dumps({
            "url": "http://127.0.0.1:9", "pid": stranger.pid, "install": str(node.runtime_dir(tmp_path) / "opensearch-x"),
            "data": str(node.runtime_dir(tmp_path) / "data"), "log": "", "heap": "512m", "started_at": 0}))
        assert node.status(tmp_path)["state"] == "dead"
        said = []
        assert node.down(tmp_path, log=said.append) is False
        assert stranger.poll() is None, "the stranger was killed"
        assert said and f"pid {stranger.pid}" in said[0] and "left alone" in said[0]
    finally:
        stranger.kill()
        stranger.wait()


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(node.ServiceError, match=rf"port {port} on 127\.0\.0\.1 is in use; choose another --port"):
            node.up(tmp_path, port=port, log=lambda _m: None)
    assert not node.state_path(tmp_path).exists()


@pytest.mark.parametrize("heap, msg", [("0m", "too small"), ("99999g", "more than half"), ("lots", "must look like")])
def test_impossible_heaps_are_refused_up_front(tmp_path, heap, msg):
    with pytest.raises(node.ServiceError, match=msg):
        node.up(tmp_path, heap=heap, log=lambda _m: None)
