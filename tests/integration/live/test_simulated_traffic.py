"""Simulated readers and agents against the real ``workbench serve`` (issue #43, item 6).

A seed-shaped pair on the gita: ``with-ref`` (full text + the reference lane, RRF, as ``aicharya-rrf60-ref`` adds the
reference lane to ``aicharya-rrf60``) and ``no-ref`` (full text alone), served interleaved (team-draft) with a UBI
log, behind uvicorn on loopback as ``serve`` runs it. 96 sessions ask 12 reference and 12 paraphrase queries of
the test split in turn (each about four times): readers over HTTP (``GET /search``, then ``POST /click``), agents
over MCP with the ``mcp`` SDK's client (tool ``search``, then tool ``fetch`` of the hit they use). Each scans the
hits top down and uses the first it finds attractive, the cascade model, attractiveness from the built qrels
(grade 2: 0.9, grade 1: 0.6, else 0.05), seeded. Then the log is imported and:

* interleaving names ``with-ref`` the winner (the reference lane answers a reference query with the addressed verse
  first; full text alone seldom does), and the sign test says so within 48 sessions;
* the position-based model fitted to the same log ranks the judged relevant documents above the others
  (AUC >= 0.8 over the pairs shown at least 3 times).
"""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from workbench.data import catalog

EXP = """
name = "simulated"
datasets = ["gita"]
depth = 40
[embedders.h]
kind = "hash"
dim = 64
[lanes.vector]
kind = "pgvector"
embedder = "h"
[lanes.fts]
kind = "fulltext"
config = "wb_fold"
[lanes.reference]
kind = "reference"
[configs.with-ref]
lanes = ["fts", "reference"]
fusion = "rrf"
k = 60
top_k = 10
[configs.no-ref]
lanes = ["fts"]
top_k = 10
"""
ATTRACTIVE = {2: 0.9, 1: 0.6}
SESSIONS = 96


@pytest.fixture(scope="module")
def home(data_dir, home_with, pg_dsn):
    return home_with("sim-home", "gita")


def _serve(searcher):
    import uvicorn

    from workbench.live.serve import SERVE_BOUNDS, guarded_app, mcp_server
    from workbench.services import policy

    app = guarded_app(searcher, mcp_server(searcher), host="127.0.0.1", explicit=[], bearer=None)
    sock = socket.create_server(("127.0.0.1", 0), backlog=64)
    server = uvicorn.Server(policy.uvicorn_config(app, SERVE_BOUNDS, log_level="warning", access_log=False,
                                                  lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


def _used(hits, grades, rng):
    """The cascade reader: the first hit found attractive (by its grade), or None."""
    for h in hits:
        if rng.random() < ATTRACTIVE.get(grades.get(h["doc_id"], 0), 0.05):
            return h["doc_id"]
    return None


async def _agents(base, asked, grades, rng):
    """Agents over MCP: search, then fetch the hit they use, one session of the SDK's client each."""
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    for i, q in asked:
        client = create_mcp_http_client(headers={"X-Client-Id": f"agent-{i}"})
        async with Client(streamable_http_client(f"{base}/mcp", http_client=client), cache=None) as c:
            got = (await c.call_tool("search", {"query": q.text, "k": 10})).structured_content
            hits = got["result"]["hits"]
            use = _used(hits, grades[q.query_id], rng)
            if use is not None:
                fetched = (await c.call_tool("fetch", {"doc_id": use})).structured_content
                assert fetched["ok"] and fetched["result"]["doc_id"] == use


def test_simulated_readers_and_agents_pick_the_config_with_the_reference_lane(home, pg_dsn, tmp_path, monkeypatch):
    import anyio
    import requests

    from workbench.live.serve import Searcher
    from workbench.traffic.clicks import pbm
    from workbench.traffic.implicit import impressions
    from workbench.traffic.importer import load_log_set, read_logs, write_log_set
    from workbench.traffic.interleave import compare_log
    from workbench.traffic.log import TrafficLog
    from workbench.traffic.sample import normalise

    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    (tmp_path / "e.toml").write_text(EXP)
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    grades: dict[str, dict[str, int]] = {}
    for r in ds.qrels:
        grades.setdefault(r.query_id, {})[r.doc_id] = r.relevance
    # 12 queries of each type, each asked about four times: the implicit judgments need repeated impressions
    pools = {t: [q for q in ds.queries if q.split == "test" and q.query_type == t and q.query_id in grades][:12]
             for t in ("reference", "paraphrase")}
    rng = random.Random(43)
    asked = [(i, rng.choice(pools["reference" if i % 2 else "paraphrase"])) for i in range(SESSIONS)]
    searcher = Searcher(tmp_path / "e.toml", "with-ref", "gita", home, interleave="no-ref")
    searcher.traffic = TrafficLog(tmp_path / "ubi")
    base, server, thread = _serve(searcher)
    try:
        for _ in range(100):
            try:
                if requests.get(f"{base}/health", timeout=2).ok:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        readers = [(i, q) for i, q in asked if i % 4]  # three in four over HTTP, the rest over MCP
        with requests.Session() as s:
            for i, q in readers:
                got = s.get(f"{base}/search", params={"q": q.text, "k": 10}, headers={"X-Client-Id": f"reader-{i}"})
                body = got.json()["result"]
                use = _used(body["hits"], grades[q.query_id], rng)
                if use is not None:
                    assert s.post(f"{base}/click", json={"query_id": body["query_id"], "doc_id": use}).ok
        anyio.run(_agents, base, [(i, q) for i, q in asked if not i % 4], grades, rng)
    finally:
        server.should_exit = True
        thread.join(10)
        searcher.traffic.close()
    write_log_set(home / "logs" / "sim", *read_logs([tmp_path / "ubi"], "sim"))
    queries, events = load_log_set(home, "sim")
    assert len(queries) == SESSIONS and set(events["action"]) == {"click", "fetch"}
    (pair,) = compare_log(queries, events)
    c = pair.comparison
    assert (pair.a, pair.b, c.verdict) == ("with-ref", "no-ref", "A"), pair.as_dict()
    assert c.first_significant is not None and pair.sessions_needed <= 48, pair.as_dict()
    # implicit judgments from the same log against the qrels: AUC of the PBM attractiveness, relevant vs not
    fit = pbm(impressions(queries, events), min_impressions=3)
    by_key = {normalise(q.text): q.query_id for q in ds.queries}
    scored = [(s.value, grades.get(by_key[k], {}).get(d, 0) > 0) for (k, d), s in fit.attractiveness.items()
              if k in by_key]
    pos = [v for v, rel in scored if rel]
    neg = [v for v, rel in scored if not rel]
    auc = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))
    assert len(pos) >= 10 and auc >= 0.8, (auc, len(pos), len(neg))
