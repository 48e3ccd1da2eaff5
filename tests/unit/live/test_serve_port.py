"""``workbench serve``'s port against hostile clients (issue #41, items 15 and 20).

A real uvicorn server, configured as ``workbench serve`` configures it (:func:`workbench.services.policy.uvicorn_config`
with :data:`workbench.live.serve.SERVE_BOUNDS`), serves the real guarded app (:func:`workbench.live.serve.guarded_app`
with the home's access tokens, :func:`workbench.cli.serve.access_check`) over a stand-in searcher that answers at
once (the config's lanes are not what these tests are about). Idle sockets, keys given twice and a token file made
readable by others while serving each get one clear answer, and other clients keep theirs.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time

import pytest
import requests
import uvicorn
from fixtures.searcher import ONE_HIT, StandInSearcher

from workbench.cli.serve import access_check
from workbench.dashboard import auth
from workbench.live.serve import SERVE_BOUNDS, guarded_app, mcp_server
from workbench.services import policy


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The port on a home with one access token: ``(base URL, token, searcher, log lines, server, token file)``."""
    home = tmp_path_factory.mktemp("serve-home")
    token = auth.FileTokens(home).add("ci")
    searcher, log = StandInSearcher(ONE_HIT), []
    app = guarded_app(searcher, mcp_server(searcher), host="127.0.0.1", explicit=[], bearer=access_check(home),
                      log=log.append)
    sock = socket.create_server(("127.0.0.1", 0), backlog=256)  # listening now: clients queue until uvicorn runs
    server = uvicorn.Server(policy.uvicorn_config(app, SERVE_BOUNDS, log_level="warning", access_log=False,
                                                  lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield (f"http://127.0.0.1:{sock.getsockname()[1]}", token, searcher, log, server,
               auth.tokens_path(home))
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _closed_by_server(sockets: list[socket.socket], at_least: int, within_s: float = 5.0) -> set[socket.socket]:
    """The sockets the server has closed, waiting (on select, no sleep) until ``at_least`` are or ``within_s``
    passes."""
    closed: set[socket.socket] = set()
    deadline = time.monotonic() + within_s
    while len(closed) < at_least and time.monotonic() < deadline:
        ready, _, _ = select.select([s for s in sockets if s not in closed], [], [], deadline - time.monotonic())
        for s in ready:
            try:
                if s.recv(1) == b"":
                    closed.add(s)
            except ConnectionResetError:
                closed.add(s)
    return closed


def _search(base: str, token: str, **kw):
    return requests.get(f"{base}/search", params={"q": "karma yoga", "k": 1}, timeout=10,
                        headers={"Authorization": f"Bearer {token}"}, **kw)


def test_idle_sockets_give_way_to_a_request_and_a_peer_flooding_them_loses_its_own(served):
    """64 idle sockets (no token needed: nothing was requested) held the port's 64 connections and every
    request got 503 for 30 s. Now a new connection closes a waiting one while the port is full: the flooding
    peer's, not a client's that waits between its requests."""
    base, token, _searcher, _log, server, _path = served
    port = int(base.rsplit(":", 1)[1])
    limit = SERVE_BOUNDS.max_connections
    assert limit == 64
    # the same address floods: the longest-waiting sockets make room, and the request is answered
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(limit)]
    try:
        evicted = _closed_by_server(idle, at_least=1)  # the 64th made room (before: none, and the port was full)
        t0 = time.monotonic()
        got = _search(base, token)
        took = time.monotonic() - t0
        assert got.status_code == 200, (got.status_code, got.text[:200])  # was 503 "Service Unavailable"
        assert got.json()["result"]["hits"] == [{"rank": 1, "doc_id": "bg2.47", "address": "BG 2.47", "score": 0.5,
                                                 "tiebreak": None}]
        assert took < 5, took
        assert idle[0] in evicted  # the longest-waiting socket gave way
    finally:
        for s in idle:
            s.close()
    # another peer (127.0.0.2) floods twice the cap while a client (127.0.0.1) waits between its requests on
    # the oldest connection: the flood's own sockets give way, the client's stays open and is answered
    client = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.1", 0))
    flood = [socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0))
             for _ in range(2 * limit)]
    try:
        assert len(_closed_by_server(flood, at_least=limit)) >= limit
        assert len(server.server_state.connections) < limit
        client.sendall(f"GET /search?q=karma&k=1 HTTP/1.1\r\nHost: {base[7:]}\r\nAuthorization: Bearer {token}\r\n"
                       "Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), answer[:200]
        assert json.loads(body)["result"]["hits"][0]["doc_id"] == "bg2.47"
    finally:
        for s in [client, *flood]:
            s.close()


def test_a_key_or_parameter_given_twice_is_a_400_naming_it(served):
    """``?q=a&q=b`` and ``{"query": "a", "query": "b"}`` were answered for one of the two, silently (the docs list
    a key given twice as a 400)."""
    base, token, searcher, _log, _server, _path = served
    auth_header = {"Authorization": f"Bearer {token}"}
    before = len(searcher.calls)
    got = requests.get(f"{base}/search?q=karma&q=dharma&k=2", headers=auth_header, timeout=10)
    assert (got.status_code, got.json()) == (400, {"ok": False, "error": {
        "code": "invalid_argument", "message": "parameter(s) ['q'] given more than once; give each once"}})
    for body, key in ((b'{"query": "karma", "k": 2, "query": "dharma"}', "query"),
                      (b'{"query": "karma", "filters": {"chapter": 2, "chapter": 3}}', "chapter")):
        got = requests.post(f"{base}/search", data=body, timeout=10,
                            headers={**auth_header, "Content-Type": "application/json"})
        assert (got.status_code, got.json()) == (400, {"ok": False, "error": {
            "code": "invalid_argument", "message": f"the body gives key {key!r} more than once; give each key once"}})
    assert len(searcher.calls) == before  # none reached the search
    got = requests.post(f"{base}/search", json={"query": "karma", "k": 2}, headers=auth_header, timeout=10)
    assert got.status_code == 200 and searcher.calls[-1] == ("karma", 2, None)


def test_a_token_file_made_readable_by_others_while_serving_is_one_clear_json_error_and_one_log_line(served):
    """A bare 500 with a traceback per request; now a 503 envelope naming the file and ``chmod 600``, said once
    in the log; fixed, the same token is served again."""
    base, token, _searcher, log, _server, path = served
    path.chmod(0o644)
    try:
        answers = [_search(base, token) for _ in range(3)]
    finally:
        path.chmod(0o600)
    problem = f"the dashboard token file {path} can be read by other users (mode 0644); run `chmod 600 {path}`"
    for got in answers:
        assert (got.status_code, got.json()) == (503, {"ok": False, "error": {
            "code": "dependency_failed", "message": f"the search API cannot check access tokens: {problem}"}})
    assert log == [f"the search API refuses every request until this is fixed: {problem}"]
    got = _search(base, token)
    assert got.status_code == 200 and got.json()["result"]["query"] == "karma yoga"
    no_token = requests.get(f"{base}/search?q=karma", timeout=10)  # the port's other refusals are envelopes too
    assert (no_token.status_code, no_token.json()) == (401, {"ok": False, "error": {
        "code": "invalid_argument", "message": "the search API needs 'Authorization: Bearer TOKEN' with an access "
                                               "token of its home"}})
