"""The ``mcp`` lane against hostile answers (issue #41, items 16 and 20): an answer past 16 MiB, one nested deeper
than the JSON parser recurses, and a stdio line that is not UTF-8 each cost their own query at most, the others
answered. The server is a real one of the ``mcp`` SDK, over stdio (a script the test writes) and over streamable
HTTP (the same server served by uvicorn in a thread).
"""

from __future__ import annotations

import socket
import sys
import threading
from types import SimpleNamespace

import pytest
import uvicorn

from retrievers.mcp import MAX_ANSWER_BYTES, McpLane, McpParams
from workbench.io.http import MAX_RESPONSE_MB
from workbench.types import Document, Query

SERVER = """
import json
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer(name="hostile")

@server.tool(name="search", structured_output=False)
async def search(query: str, k: int = 10) -> str:
    if query == "big":      # 17 MiB in one answer (one line over stdio)
        return json.dumps({"ok": True, "result": {"hits": [{"ref": "BG 2.47", "s": 1.0, "pad": "x" * (17 << 20)}]}})
    if query == "deep":     # nested deeper than json.loads recurses
        return "[" * 100_000 + "]" * 100_000
    return json.dumps({"ok": True, "result": {"hits": [{"ref": "BG 2.47", "s": 1.0}]}})

if __name__ == "__main__":
    sys.stdout.buffer.write(b"\\xff\\xfe not utf-8\\n")   # one line that is not UTF-8, before the session
    sys.stdout.buffer.flush()
    server.run("stdio")
"""

DS = SimpleNamespace(documents=[Document("bg2.47", "BG 2.47", "bg", "verse", ())])
QUERIES = [Query("q1", "karma", "term", "und", "test"), Query("q2", "big", "term", "und", "test"),
           Query("q3", "deep", "term", "und", "test"), Query("q4", "dharma", "term", "und", "test")]
TOO_LARGE = ("lanes.m: tool search: the answer is larger than 16 MiB (16777216 bytes), the most an mcp lane "
             "reads; ask for fewer hits (k) or make the server's answer smaller")


def _lane(**where) -> McpLane:
    return McpLane("m", McpParams(hits="result.hits", id="ref", score="s", id_map="address", snapshot="t",
                                  timeout_s=30, retries=1, **where), DS)


def _assert_only_the_hostile_queries_failed(lane: McpLane, run) -> None:
    assert {q: [(h.doc_id, h.score) for h in run[q]] for q in ("q1", "q2", "q3", "q4")} == {
        "q1": [("bg2.47", 1.0)], "q2": [], "q3": [], "q4": [("bg2.47", 1.0)]}
    assert lane.last_failures["q2"] == ("too_large", TOO_LARGE)
    cls, msg = lane.last_failures["q3"]
    assert cls == "not_json" and msg.startswith("lanes.m: tool search answered text that is not JSON (JSON nested "
                                                "too deeply): '[[[["), msg
    assert set(lane.last_failures) == {"q2", "q3"}


def test_the_cap_is_the_http_lanes():
    assert MAX_ANSWER_BYTES == int(MAX_RESPONSE_MB * 2**20) == 16 * 2**20


def test_over_stdio_a_huge_answer_a_deep_one_and_a_line_not_utf8_cost_only_their_own_queries(tmp_path, capfd):
    """An endless answer grew the client to 1 GB in 8 s (the SDK joins a line's chunks without a limit); a deeply
    nested answer (RecursionError) and one byte that is not UTF-8 each ended the session for every query."""
    script = tmp_path / "hostile.py"
    script.write_text(SERVER)
    lane = _lane(command=[sys.executable, str(script)])
    run = lane.search(QUERIES, 5)
    _assert_only_the_hostile_queries_failed(lane, run)
    assert lane.last_notes == ["lanes.m: 1 line(s) the server wrote to stdout were not MCP messages and were skipped "
                               "(the first: '\ufffd\ufffd not utf-8'); a stdio server must write only JSON-RPC to "
                               "stdout and its logs to stderr"]
    assert "Traceback" not in capfd.readouterr().err


def _chunked(app):
    """``app`` with its answers' ``Content-Length`` left out: the body is read without knowing its size."""
    async def wrapped(scope, receive, send):
        async def send_chunked(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [(k, v) for k, v in message["headers"] if k.lower() != b"content-length"]}
            await send(message)
        await app(scope, receive, send_chunked if scope["type"] == "http" else send)
    return wrapped


@pytest.fixture(params=["declared", "chunked"])
def http_server(request):
    """The same server over streamable HTTP (JSON answers, with their Content-Length or chunked), in a thread;
    yields its /mcp URL."""
    namespace: dict = {"__name__": "hostile"}
    exec(compile(SERVER, "hostile.py", "exec"), namespace)
    app = namespace["server"].streamable_http_app(json_response=True, stateless_http=True)
    app = _chunked(app) if request.param == "chunked" else app
    sock = socket.create_server(("127.0.0.1", 0))  # listening: the lane's requests wait until uvicorn serves them
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_over_http_a_huge_answer_and_a_deep_one_cost_only_their_own_queries(http_server, capfd):
    """The http lane, the reranker and the embedder stopped at 16 MiB, the mcp lane did not."""
    lane = _lane(url=http_server)
    run = lane.search(QUERIES, 5)
    _assert_only_the_hostile_queries_failed(lane, run)
    assert "Traceback" not in capfd.readouterr().err
