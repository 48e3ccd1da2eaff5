"""Live lanes and ``workbench serve``, against real servers (no mock).

The faithfulness proof: a config served by ``workbench serve`` (HTTP and MCP on one port, and MCP over stdio)
and read back through the ``http`` and ``mcp`` lanes gives, per query, the in-process config's ranking (doc
ids, scores and the order of ties), and so the same measures, on the gita and the bilara passages. The config
fuses a vector lane (hash embedder: no model), full text, trigram and the reference lane by RRF with the
vector lane's cosine breaking ties and the reference lane pinned: RRF makes many equal scores, so the order
of ties is tested for real. The trigram lane reads queries of up to six words (terms and references; a
paraphrase costs it 70-350 ms against the whole gita, and minutes across the queries read back three ways),
as a production config keeps it (``max_query_words``).

Then the faults a live endpoint has (each a local server written here): down, hanging, 401/500, not JSON, an
error envelope, 10,000 hits, ids that map to nothing, a 429 storm; and bad configs, refused at load.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import faults
import pytest
from fixtures.paths import REPO

from workbench.data import catalog
from workbench.errors import ConfigError
from workbench.experiment.cache import CandidateCache
from workbench.experiment.config import load_experiment
from workbench.experiment.runner import Engine, config_run, lane_candidates, run_experiment
from workbench.run import Run

REPO = REPO

LOCAL = """
name = "live-{dataset}"
datasets = ["{dataset}"]
depth = 40
[embedders.h]
kind = "hash"
dim = 64
[lanes.vector]
kind = "pgvector"
embedder = "h"
[lanes.fts]
kind = "fulltext"
config = "simple"
[lanes.trigram]
kind = "trigram"
max_query_words = 6
[lanes.reference]
kind = "reference"
[configs.hybrid]
lanes = {lanes}
fusion = "rrf"
k = 60
top_k = 20
tiebreak_lane = "vector"
pin_lane = "reference"
"""

LIVE = """
[lanes.via_http]
kind = "http"
url = "{base}/search"
method = "POST"
body = {{query = "{{query}}", k = "{{k}}"}}
hits = "result.hits"
score = "score"
snapshot = "t1"
concurrency = 8
[lanes.via_get]
kind = "http"
url = "{base}/search?q={{query}}&k={{k}}"
hits = "result.hits"
score = "score"
snapshot = "t1"
concurrency = 8
[lanes.via_mcp]
kind = "mcp"
url = "{base}/mcp"
hits = "result.hits"
score = "score"
snapshot = "t1"
concurrency = 8
[configs.live_http]
lanes = ["via_http"]
top_k = 20
[configs.live_mcp]
lanes = ["via_mcp"]
top_k = 20
"""


@pytest.fixture(scope="module")
def home(data_dir: Path, home_with, pg_dsn) -> Path:
    return home_with("live-home", "gita", "bilara-passages")


def _local(dataset: str) -> str:
    """The in-process experiment: the bilara passages leave out trigram (whole-passage trigram similarity costs
    minutes a query set; kb.toml does the same)."""
    lanes = ["vector", "fts", "trigram", "reference"] if dataset == "gita" else ["vector", "fts", "reference"]
    return LOCAL.format(dataset=dataset, lanes=json.dumps(lanes))


def _env(home: Path, pg_dsn: str) -> dict:
    return {**os.environ, "WORKBENCH_HOME": str(home), "WORKBENCH_PG_DSN": pg_dsn}


@contextmanager
def serving(exp: Path, config: str, dataset: str, env: dict, log: Path, *args: str):
    """``workbench serve`` (:func:`faults.workbench_server`) until /health answers; yields its base URL."""
    port = faults.free_port()
    base = f"http://127.0.0.1:{port}"
    with faults.workbench_server(["serve", "-e", str(exp), "-c", config, "-d", dataset, "--port", str(port), *args],
                                 env, log, f"{base}/health", lambda body: json.loads(body)["status"] == "ok", 240,
                                 "workbench serve"):
        yield base


def _ranked(run, qid):
    return [(h.doc_id, h.score) for h in run.get_hits(qid)]


@pytest.mark.parametrize("dataset, every, tied", [("gita", 6, 50), ("bilara-passages", 10, 10)])
def test_a_served_config_reads_back_identically_through_http_and_mcp(home, pg_dsn, tmp_path, monkeypatch,
                                                                     dataset, every, tied):
    from workbench.eval.evaluate import evaluate

    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    local = tmp_path / "local.toml"
    local.write_text(_local(dataset))
    exp = load_experiment(local)
    full = catalog.load(dataset, catalog.load_definitions(), home=home)
    queries = full.queries[::every]
    # the in-process side runs the queries read back only (each query's lanes and fusion are its own), with a
    # candidate cache of its own: the cache is keyed by the whole query set
    ds = dataclasses.replace(full, queries=queries)
    engine = Engine(exp, home)
    lanes = lane_candidates(exp, ds, engine, CandidateCache(tmp_path / "candidates"))
    want = config_run(exp.configs["hybrid"], {n: r.run for n, r in lanes.items()}, ds, engine)
    ties = sum(1 for q in queries for a, b in zip(want.get_hits(q.query_id), want.get_hits(q.query_id)[1:])
               if a.score == b.score)
    assert ties > tied, ties  # the order of ties is under test for real

    with serving(local, "hybrid", dataset, _env(home, pg_dsn), tmp_path / "serve.log") as base:
        live = tmp_path / "live.toml"
        live.write_text(_local(dataset) + LIVE.format(base=base))
        lexp = load_experiment(live)
        got = {}
        for lane, asked in (("via_http", queries), ("via_mcp", queries), ("via_get", queries[::4])):
            opened = engine.lane(ds, lexp.lanes[lane])
            got[lane] = opened.search(asked, lexp.depth)
            assert not opened.last_failures, list(opened.last_failures.values())[:2]
            differ = [q.query_id for q in asked if _ranked(got[lane], q.query_id) != _ranked(want, q.query_id)]
            assert not differ, (lane, differ[:3], _ranked(got[lane], differ[0])[:5], _ranked(want, differ[0])[:5])
    # and so the measures, per query, as eval computes them (ir_measures, the run's own order)
    judged = {r.query_id for r in ds.qrels}
    asked = [q for q in queries if q.query_id in judged]
    mine = evaluate(Run({q.query_id: want.get_hits(q.query_id) for q in asked}, "hybrid"), ds.qrels, asked)
    for lane in ("via_http", "via_mcp"):
        theirs = evaluate(got[lane], ds.qrels, asked)
        assert theirs.per_query[list(mine.measures)].equals(mine.per_query[list(mine.measures)]), lane
        assert len(mine.per_query) >= 50


def test_serve_applies_a_filter_sent_by_get_as_by_post(home, pg_dsn, tmp_path):
    """A newcomer found GET ignoring ``filters=``: the hits of both methods are the same, all in chapter 2 (the
    gita's 72 verses of it), and a bad filter is a 400 naming the facet, by either method."""
    import urllib.error
    import urllib.parse

    local = tmp_path / "local.toml"
    local.write_text(_local("gita"))
    flt = '{"chapter": 2}'
    with serving(local, "hybrid", "gita", _env(home, pg_dsn), tmp_path / "serve.log") as base:
        got = json.loads(urllib.request.urlopen(
            f"{base}/search?" + urllib.parse.urlencode({"q": "the self is never born", "k": 20, "filters": flt}),
            timeout=60).read())
        req = urllib.request.Request(f"{base}/search", json.dumps(
            {"query": "the self is never born", "k": 20, "filters": json.loads(flt)}).encode(),
            {"Content-Type": "application/json"})
        posted = json.loads(urllib.request.urlopen(req, timeout=60).read())
        bad = []
        typo = urllib.request.Request(f"{base}/search", json.dumps({"query": "karma", "filter": {"chapter": 2}}).encode(),
                                      {"Content-Type": "application/json"})
        deep = "[" * 5000 + "]" * 5000
        get = f"{base}/search?"
        for req in (get + urllib.parse.urlencode({"q": "karma", "filters": '{"sutta": "x"}'}), typo,
                    get + urllib.parse.urlencode({"q": "karma", "filters": deep}),
                    # a newcomer's attack: a GET typo, a filter that admits nothing, NaN, a key given twice
                    get + urllib.parse.urlencode({"q": "karma", "filter": flt}),
                    get + urllib.parse.urlencode({"q": "karma", "filters": '{"chapter": {"$gt": 5, "$lt": 3}}'}),
                    get + urllib.parse.urlencode({"q": "karma", "filters": '{"chapter": {"$gt": NaN}}'}),
                    get + urllib.parse.urlencode({"q": "karma", "filters": '{"chapter": {"$gte": 2, "$gte": 30}}'})):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(req, timeout=60)
            bad.append((err.value.code, json.loads(err.value.read())))
    ids = [h["doc_id"] for h in got["result"]["hits"]]
    assert got["ok"] and len(ids) == 20 and all(i.startswith("bg2.") for i in ids), ids
    assert [h for h in got["result"]["hits"]] == [h for h in posted["result"]["hits"]]
    code, env = bad[0]
    assert code == 400 and env["error"]["code"] == "invalid_argument" and "'sutta'" in env["error"]["message"]
    assert bad[1][0] == 400 and "unknown key(s) ['filter']" in bad[1][1]["error"]["message"]  # not unfiltered hits
    assert bad[2][0] == 400 and "nested too deeply" in bad[2][1]["error"]["message"]  # not a 502
    assert bad[3][0] == 400 and "unknown parameter(s) ['filter']" in bad[3][1]["error"]["message"]
    assert bad[4][0] == 400 and "admits no document of gita" in bad[4][1]["error"]["message"]
    assert bad[5][0] == 400 and "NaN is not a finite number" in bad[5][1]["error"]["message"]
    assert bad[6][0] == 400 and "key '$gte' is given twice" in bad[6][1]["error"]["message"]
    assert 'filters = "{filters}"' in (tmp_path / "serve.log").read_text()  # the lane table it prints sends them


def test_mcp_over_stdio_reads_back_identically(home, pg_dsn, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    local = tmp_path / "local.toml"
    local.write_text(_local("gita"))
    exp = load_experiment(local)
    full = catalog.load("gita", catalog.load_definitions(), home=home)
    queries = full.queries[::40]
    ds = dataclasses.replace(full, queries=queries)  # the queries read back only, cached apart (as above)
    engine = Engine(exp, home)
    lanes = lane_candidates(exp, ds, engine, CandidateCache(tmp_path / "candidates"))
    want = config_run(exp.configs["hybrid"], {n: r.run for n, r in lanes.items()}, ds, engine)
    env = 'WORKBENCH_HOME = "${WORKBENCH_HOME}", WORKBENCH_PG_DSN = "${WORKBENCH_PG_DSN}", WORKBENCH_DATA = "${WORKBENCH_DATA}"'
    stdio = _local("gita") + f"""
[lanes.via_stdio]
kind = "mcp"
command = {json.dumps([*faults.WORKBENCH, "serve", "--stdio", "-e", str(local), "-c", "hybrid", "-d", "gita"])}
env = {{{env}}}
hits = "result.hits"
score = "score"
snapshot = "t1"
"""
    path = tmp_path / "stdio.toml"
    path.write_text(stdio)
    sexp = load_experiment(path)
    lane = engine.lane(ds, sexp.lanes["via_stdio"])
    got = lane.search(queries, sexp.depth)
    assert not lane.last_failures, list(lane.last_failures.values())[:2]
    assert all(_ranked(got, q.query_id) == _ranked(want, q.query_id) for q in queries)


# ---------------------------------------------------------------- a hostile endpoint, written here

class _Endpoint:
    """A search API whose behaviour per query text a test sets (``modes[text]``)."""

    def __init__(self) -> None:
        self.modes: dict[str, str] = {}
        self.default = "ok"
        self.calls = 0
        self.auth: list = []
        api = self

        class Handler(faults.JsonHandler, BaseHTTPRequestHandler):
            def do_GET(self):
                from urllib.parse import parse_qs, urlsplit

                api.calls += 1
                api.auth.append(self.headers.get("Authorization"))
                q = parse_qs(urlsplit(self.path).query).get("q", [""])[0]
                mode = api.modes.get(q, api.default)
                if mode == "hang":
                    time.sleep(5)
                if mode in ("500", "401"):
                    return self.send(int(mode), b'{"detail": "no"}')
                if mode == "429":
                    return self.send(429, b'{"detail": "slow down"}', {"Retry-After": "0"})
                if mode == "garbage":
                    return self.send(200, b"<html>")
                if mode == "envelope":
                    return self.send(200, json.dumps({"ok": False, "error": {"code": "dependency_failed",
                                                                             "message": "db down"}}).encode())
                hits = [{"ref": "BG 2.47", "s": 3.0}, {"ref": "бг 2.48", "s": 2.0}, {"ref": "XX 9.99", "s": 1.0}]
                if mode == "many":
                    hits = [{"ref": f"BG 2.{i % 72 + 1}", "s": 10000.0 - i} for i in range(10_000)]
                if mode == "empty":
                    return self.send(200, json.dumps({"ok": True, "result": {"hits": []}}).encode())
                if mode == "unscored":  # one hit without a score, one with a word for a score: the rest stand
                    hits = [{"ref": "BG 2.47", "s": 3.0}, {"ref": "BG 2.48"}, {"ref": "BG 2.49", "s": "high"},
                            {"ref": "BG 2.50", "s": 1.0}]
                if mode == "noscores":
                    hits = [{"ref": "BG 2.47", "score": 3.0}, {"ref": "BG 2.48", "score": 2.0}]
                if mode == "tracks":  # AICharya's shape: a transcript hit is a track and a time, not a doc_id
                    hits = [{"track_id": "trk-7", "start_ms": 1000, "s": 3.0},
                            {"track_id": "trk-9", "start_ms": 0, "s": 2.0},
                            {"track_id": "trk-7", "start_ms": 4000, "s": 1.0}]
                if mode == "dashed":  # mint's related_id shape: "2-47" for chapter 2, verse 47
                    hits = [{"related_id": "2-47", "s": 2.0}, {"related_id": "18-66", "s": 1.0}]
                if mode == "nopath":
                    return self.send(200, json.dumps({"items": hits}).encode())
                self.send(200, json.dumps({"ok": True, "result": {"hits": hits}}).encode())

        self.handler = Handler


@pytest.fixture
def endpoint():
    e = _Endpoint()
    with faults.http_server(e.handler) as base:
        e.base = base
        yield e


def _lane_toml(url: str, **extra) -> str:
    def toml(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {toml(x)}" for k, x in v.items()) + "}"
        return json.dumps(v)

    lines = "\n".join(f"{k} = {toml(v)}" for k, v in extra.items())
    return f"""
name = "faults"
datasets = ["gita"]
[lanes.prod]
kind = "http"
url = "{url}"
hits = "result.hits"
id = "ref"
score = "s"
id_map = "reference"
snapshot = "2026-12-04"
timeout_s = 1.0
retries = 1
backoff_s = 0.0
{lines}
[configs.prod]
lanes = ["prod"]
"""


def _q(qid, text):
    from workbench.types import Query

    return Query(qid, text, "paraphrase", "und", "test")


def test_every_fault_costs_only_its_own_query(endpoint, home, tmp_path, monkeypatch):
    monkeypatch.setenv("WB_TEST_LIVE_KEY", "k-123456789")
    path = tmp_path / "f.toml"
    path.write_text(_lane_toml(endpoint.base + "/api/v3/search?q={query}&size={k}",
                               headers={"Authorization": "Bearer ${WB_TEST_LIVE_KEY}"}))
    exp = load_experiment(path)
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    lane = Engine(exp, home).lane(ds, exp.lanes["prod"])
    endpoint.modes.update({"h": "hang", "e": "500", "a": "401", "g": "garbage", "v": "envelope", "n": "nopath",
                           "m": "many", "r": "429", "u": "unscored", "s": "noscores"})
    qs = [_q("ok", "fine"), *(_q(t, t) for t in ("h", "e", "a", "g", "v", "n", "m", "r", "u", "s")),
          _q("blank", "  ")]
    t0 = time.monotonic()
    run = lane.search(qs, 10)
    assert time.monotonic() - t0 < 30
    # the good query's answer, mapped through the reference grammar (Latin and Cyrillic); XX 9.99 maps to nothing
    assert [(h.doc_id, h.score) for h in run["ok"]] == [("bg2.47", 3.0), ("bg2.48", 2.0)]
    assert [h.doc_id for h in run["m"]] == [f"bg2.{i}" for i in range(1, 11)]  # 10,000 hits: the first k kept
    assert run["blank"] == () and "blank" not in lane.last_failures  # an empty query asks nothing
    classes = {q: c for q, (c, _m) in lane.last_failures.items()}
    assert classes == {"h": "timeout", "e": "http_5xx", "a": "http_401", "g": "not_json", "v": "dependency_failed",
                       "n": "malformed", "r": "http_429", "s": "malformed"}, classes
    assert all(run[q] == () for q in classes)
    assert "hits = 'result.hits' selects nothing" in lane.last_failures["n"][1]
    # hits without a finite score are dropped and counted, the query's other hits kept (one such hit failed the
    # whole query as malformed); a score path that fits no hit at all is a malformed answer
    assert [(h.doc_id, h.score) for h in run["u"]] == [("bg2.47", 3.0), ("bg2.50", 1.0)]
    assert lane.last_unscored == 2
    assert "score = 's' gives no hit a finite number (hit 1: 'None')" in lane.last_failures["s"][1]
    msgs = " ".join(m for _c, m in lane.last_failures.values())
    assert "k-123456789" not in msgs and endpoint.auth[0] == "Bearer k-123456789"
    assert lane.last_unmapped >= 1  # XX 9.99
    assert json.loads(lane.last_raw["ok"])["result"]["hits"][0]["ref"] == "BG 2.47"


def test_a_crosswalk_table_and_an_id_rewrite_map_a_systems_ids_and_a_wrong_one_fails_naming_the_lane(
        endpoint, home, tmp_path):
    """Ids a system owns reach the dataset's doc_ids through a crosswalk file (many to one, relative to the
    experiment file, its digest keying the cache) or a rewrite rule; a crosswalk of another corpus maps nothing
    and fails the eval in one line naming the lane and the first ids, nothing cached (not a system scoring 0)."""
    walk = tmp_path / "walk.csv"
    walk.write_text("track_id,doc_id\ntrk-7@1000,bg2.47\ntrk-9@0,bg2.48\ntrk-7@4000,bg2.47\ntrk-1@0,mn10:1.1\n")
    path = tmp_path / "x.toml"
    path.write_text(_lane_toml(endpoint.base + "/s?q={query}&k={k}", concurrency=8)
                    .replace('id = "ref"', "id = \"join('@', [track_id, to_string(start_ms)])\"")
                    .replace('id_map = "reference"', 'id_map = "table:walk.csv"'))
    exp = load_experiment(path)
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    engine = Engine(exp, home)
    lane = engine.lane(ds, exp.lanes["prod"])
    endpoint.modes.update({"t": "tracks", "d": "dashed"})
    run = lane.search([_q("t", "t")], 10)
    # trk-7@4000 is another span of the same verse: dropped after its first (a document is ranked once)
    assert [(h.doc_id, h.score) for h in run["t"]] == [("bg2.47", 3.0), ("bg2.48", 2.0)]
    assert lane.last_unmapped == 0 and lane.reader.mapper.crosswalk_outside == 1  # mn10:1.1 is not in the gita
    key = engine.cache_parts(ds, exp.lanes["prod"])["crosswalk"]
    walk.write_text(walk.read_text().replace("bg2.48", "bg2.49"))
    assert engine.cache_parts(ds, exp.lanes["prod"])["crosswalk"] != key  # a new crosswalk is a new candidate set

    rewrite = tmp_path / "r.toml"
    rewrite.write_text(_lane_toml(endpoint.base + "/s?q={query}&k={k}", id_rewrite=[r"^(\d+)-(\d+)$", r"bg\1.\2"])
                       .replace('id = "ref"', 'id = "related_id"').replace('id_map = "reference"', 'id_map = "doc_id"'))
    exp2 = load_experiment(rewrite)
    lane2 = Engine(exp2, home).lane(ds, exp2.lanes["prod"])
    assert [(h.doc_id, h.score) for h in lane2.search([_q("d", "d")], 10)["d"]] == [("bg2.47", 2.0),
                                                                                    ("bg18.66", 1.0)]

    walk.write_text("track_id,doc_id\ntrk-1@0,bg1.1\n")  # another system's crosswalk
    endpoint.default = "tracks"
    with pytest.raises(ConfigError) as err:
        run_experiment(load_experiment(path), home=home, log=lambda _m: None)
    msg = str(err.value)
    assert msg.startswith("lanes.prod: 100.0% of the ids it returned on gita (") and "name no document (first: " \
        "'trk-7@1000', 'trk-9@0', 'trk-7@4000'), above max_unmapped = 0.5" in msg and "nothing was cached" in msg, msg
    assert "\n" not in msg
    parts = Engine(load_experiment(path), home).cache_parts(ds, exp.lanes["prod"])
    assert CandidateCache(home / "cache" / "candidates").get(parts) is None


def test_failed_queries_score_zero_stay_in_the_means_and_are_not_cached(endpoint, home, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    path = tmp_path / "f.toml"
    # the test split only (354 queries; the whole set asks 1,800 a run, four runs): failures are per query either way
    path.write_text(_lane_toml(endpoint.base + "/s?q={query}&k={k}", concurrency=4)
                    .replace('datasets = ["gita"]', 'datasets = ["gita"]\nsplits = ["test"]'))
    exp = load_experiment(path)
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    tests = [q for q in ds.queries if q.split == "test"]
    # 25 texts a query string carries as they are (the endpoint keys its faults by the text it is sent)
    broken = {q.text for q in tests if q.text.isascii() and q.text.replace(" ", "").isalnum()}
    broken = set(sorted(broken)[:25])
    endpoint.modes.update({t: "500" for t in broken})
    logs: list[str] = []
    result = run_experiment(exp, home=home, log=logs.append)
    lane = result.lanes[("gita", "prod")]
    assert len(lane.failures) == 25 and lane.failure_classes() == {"http_5xx": 25} and not lane.cached
    per_query = result.configs[0].evaluation.per_query
    assert len(per_query) == len(tests) - result.configs[0].evaluation.unjudged_queries
    assert any(f"25 of {len(tests)} queries failed (http_5xx 25); they score 0" in line for line in logs), logs[-5:]
    # the raw answers reach MLflow for the dashboard's drill-down (failures with their class and message)
    ok_qid = next(q.query_id for q in tests if q.text.strip() and q.text not in broken)
    assert json.loads(lane.raw[ok_qid])["result"]["hits"][0]["ref"] == "BG 2.47"
    import mlflow

    from workbench.experiment.tracking import log_job, tracking_uri
    from workbench.results.store import live_answers

    parent = log_job(result, home)
    uri = mlflow.MlflowClient(tracking_uri(home)).get_run(parent).info.artifact_uri
    logged = live_answers(uri, "gita", "prod")
    failed_qid = next(q.query_id for q in tests if q.text in broken)
    assert logged["failures"][failed_qid][0] == "http_5xx" and json.loads(logged["raw"][ok_qid])["ok"] is True
    from workbench.experiment.report import render

    assert "live lanes: failed queries" in render(result)
    endpoint.modes.clear()
    calls = endpoint.calls
    again = run_experiment(exp, home=home)
    assert not again.lanes[("gita", "prod")].failures and endpoint.calls > calls  # asked again, not cached
    calls = endpoint.calls
    run_experiment(exp, home=home)
    assert endpoint.calls == calls  # now cached (same snapshot)
    path.write_text(path.read_text().replace('snapshot = "2026-12-04"', 'snapshot = "2026-12-05"'))
    run_experiment(load_experiment(path), home=home)
    assert endpoint.calls > calls  # a new snapshot never reads the old candidates


def test_an_endpoint_that_is_down_stops_eval_with_exit_2(home, pg_dsn, tmp_path):
    """Nothing could run: not a measurement of zeros but one line naming the lane, the URL and the fix."""
    path = tmp_path / "f.toml"
    url = f"http://127.0.0.1:{faults.free_port()}/s?q={{query}}"
    path.write_text(_lane_toml(url).replace("retries = 1", "retries = 0"))
    res = subprocess.run([*faults.WORKBENCH, "eval", str(path)], env=_env(home, pg_dsn), cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode == 2, res.stderr[-2000:]
    assert last.startswith("error: lanes.prod: every query of gita failed (connect 1800); first: lanes.prod: "
                           "http://127.0.0.1:") and "check that the endpoint is up" in last, last


def test_an_endpoint_that_answers_nothing_to_every_query_is_not_cached(endpoint, home, pg_dsn, tmp_path):
    """An endpoint answering [] to all 1,800 queries was cached under its snapshot label as R@10 0.000 (found by a
    fresh attack): it is one line, exit 2, and the next eval asks again."""
    endpoint.default = "empty"
    path = tmp_path / "e.toml"
    path.write_text(_lane_toml(endpoint.base + "/s?q={query}", concurrency=8))
    for attempt in (1, 2):
        res = subprocess.run([*faults.WORKBENCH, "eval", str(path), "--no-track"], env=_env(home, pg_dsn), cwd=REPO,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 2, res.stderr[-2000:]
        assert res.stderr.strip().splitlines()[-1].startswith(
            "error: lanes.prod: the endpoint answered every query of gita with no hits (1800 queries)")
        assert endpoint.calls == 1800 * attempt  # nothing cached: the second eval asked again


def test_search_shows_a_live_lanes_failures_and_exits_2_when_nothing_could_run(home, pg_dsn, tmp_path):
    """`workbench search` printed "no hits", exit 0, for every failure of a live lane (found by a fresh attack):
    the failure is shown per query (text and --json), and a lane that failed for every query is exit 2."""
    path = tmp_path / "f.toml"
    url = f"http://127.0.0.1:{faults.free_port()}/s?q={{query}}"
    path.write_text(_lane_toml(url).replace("retries = 1", "retries = 0"))
    res = subprocess.run([*faults.WORKBENCH, "search", "-e", str(path), "-c", "prod", "BG 2.47", "karma"],
                         env=_env(home, pg_dsn), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stdout.count("  lane prod failed (connect): lanes.prod: http://127.0.0.1:") == 2, res.stdout
    assert "no hits (a lane failed: see above)" in res.stdout
    assert res.stderr.strip().splitlines()[-1].startswith("error: lanes.prod: every query failed (connect); first: ")
    res = subprocess.run([*faults.WORKBENCH, "search", "-e", str(path), "-c", "prod", "--json", "BG 2.47"],
                         env=_env(home, pg_dsn), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    rec = json.loads(res.stdout)[0]
    assert rec["hits"] == [] and rec["failures"][0]["lane"] == "prod" and rec["failures"][0]["class"] == "connect"


def test_a_live_lane_is_asked_only_the_experiments_splits(endpoint, home, tmp_path, monkeypatch):
    """A remote lane's every query is a request to someone's system: with ``splits = ["test"]`` only the test
    queries are sent (all 1,800 were), the splits key its cache, and another split set asks again."""
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    asked = {s: sum(1 for q in ds.queries if q.split == s and q.text.strip()) for s in ("dev", "test")}
    path = tmp_path / "s.toml"
    toml = _lane_toml(endpoint.base + "/s?q={query}&k={k}", concurrency=8)
    path.write_text(toml.replace('datasets = ["gita"]', 'datasets = ["gita"]\nsplits = ["test"]'))
    first = run_experiment(load_experiment(path), home=home, log=lambda _m: None)
    assert endpoint.calls == asked["test"] and 0 < asked["test"] < 1800
    assert set(first.configs[0].evaluation.per_query["split"]) == {"test"}  # evaluated on the split it asked
    run_experiment(load_experiment(path), home=home, log=lambda _m: None)
    assert endpoint.calls == asked["test"]  # cached: nothing asked again
    path.write_text(toml.replace('datasets = ["gita"]', 'datasets = ["gita"]\nsplits = ["dev", "test"]'))
    run_experiment(load_experiment(path), home=home, log=lambda _m: None)
    assert endpoint.calls == 2 * asked["test"] + asked["dev"]  # another split set: a different cache entry


NOISY_SERVER = """
import sys
for i in range(3):
    print(f"garbage {i}", flush=True)          # what a server's careless print does to the stdio channel
print("starting the noisy server", file=sys.stderr, flush=True)
from mcp.server.mcpserver import MCPServer
server = MCPServer(name="noisy")

@server.tool(name="search")
async def search(query: str, k: int = 10) -> dict:
    return {"ok": True, "result": {"hits": [{"ref": "BG 2.47", "s": 1.0}]}}

server.run("stdio")
"""


def test_a_stdio_server_writing_garbage_to_stdout_is_one_line_not_a_traceback_per_line(tmp_path, capfd):
    """The SDK logs a traceback for every stdout line that is not JSON-RPC: `yes garbage` as the command wrote
    47 MB to stderr in 15 s (found by a fresh attack). The lines are counted into one note (a working server
    still answers), and a server that never starts says so with its stderr's tail."""
    import re
    import sys
    from types import SimpleNamespace

    from retrievers.mcp import McpLane, McpParams
    from workbench.types import Document

    script = tmp_path / "noisy.py"
    script.write_text(NOISY_SERVER)
    ds = SimpleNamespace(documents=[Document("bg2.47", "BG 2.47", "bg", "verse", ())])
    lane = McpLane("m", McpParams(hits="result.hits", id="ref", score="s", id_map="address", snapshot="t",
                                  command=[sys.executable, str(script)], timeout_s=20, retries=0), ds)
    run = lane.search([_q("q1", "karma")], 5)
    assert not lane.last_failures, lane.last_failures
    assert [(h.doc_id, h.score) for h in run["q1"]] == [("bg2.47", 1.0)]
    assert lane.last_notes == ["lanes.m: 3 line(s) the server wrote to stdout were not MCP messages and were "
                               "skipped (the first: 'garbage 0'); a stdio server must write only JSON-RPC to "
                               "stdout and its logs to stderr"]
    dead = McpLane("d", McpParams(hits="result.hits", snapshot="t", timeout_s=5, retries=0,
                                  command=["bash", "-c", "yes garbage | head -n 5000; echo 'no database' >&2; "
                                                         "exit 3"]), ds)
    dead.search([_q("q1", "karma"), _q("q2", "dharma")], 5)
    cls, msg = dead.last_failures["q2"]
    assert cls == "connect" and "its stderr ended with: no database" in msg, msg
    # how many of the 5,000 lines the SDK reads before it sees the exit depends on the machine's load: counted,
    # one clause, the first line named
    assert re.search(r"; [1-5],?\d* line\(s\) the server wrote to stdout were not MCP messages and were skipped "
                     r"\(the first: 'garbage'\)", msg), msg
    err = capfd.readouterr().err
    assert "Traceback" not in err and len(err) < 2000, err[:500]


@pytest.mark.parametrize("edit, needle", [
    (("?q={query}", "?q={qery}"), "uses {qery}, which is not a placeholder"),
    (("?q={query}", "?q=fixed"), "never uses {query}"),
    (('hits = "result.hits"', 'hits = "result.[hits"'), "is not a JMESPath expression"),
    (('id_map = "reference"', 'id_map = "verse"'), "id_map = 'verse' is not one of"),
    (('snapshot = "2026-12-04"', ''), "snapshot"),
])
def test_bad_live_lane_configs_are_refused_at_load(tmp_path, edit, needle):
    path = tmp_path / "f.toml"
    path.write_text(_lane_toml("http://127.0.0.1:9/s?q={query}").replace(*edit))
    with pytest.raises(ConfigError, match=__import__("re").escape(needle)):
        load_experiment(path)


def test_an_unset_key_variable_fails_before_any_query(home, tmp_path, monkeypatch):
    monkeypatch.delenv("WB_TEST_UNSET", raising=False)
    path = tmp_path / "f.toml"
    path.write_text(_lane_toml("http://127.0.0.1:9/s?q={query}", headers={"X-Key": "${WB_TEST_UNSET}"}))
    exp = load_experiment(path)
    ds = catalog.load("gita", catalog.load_definitions(), home=home)
    with pytest.raises(ConfigError, match=r"lanes.prod header X-Key takes \$\{WB_TEST_UNSET\}, which is not set"):
        Engine(exp, home).lane(ds, exp.lanes["prod"])


def test_serve_refuses_the_network_without_tokens_and_bad_requests(home, pg_dsn, tmp_path):
    env = _env(home, pg_dsn)
    local = tmp_path / "local.toml"
    local.write_text(_local("gita"))
    res = subprocess.run([*faults.WORKBENCH, "serve", "-e", str(local), "-c", "hybrid", "--host", "0.0.0.0",
                          "--port", str(faults.free_port())], env=env, cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "without authentication" in res.stderr and "dashboard token add" in res.stderr
    res = subprocess.run([*faults.WORKBENCH, "serve", "-e", str(local), "-c", "nope"], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "unknown config 'nope'" in res.stderr
    with serving(local, "hybrid", "gita", env, tmp_path / "s.log") as base:
        def post(body: bytes, host: str | None = None):
            req = urllib.request.Request(f"{base}/search", data=body, method="POST",
                                         headers={"Content-Type": "application/json", **({"Host": host} if host else {})})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read()
        assert post(b'{"query": "", "k": 5}') == (400, b'{"ok":false,"error":{"code":"invalid_argument","message":'
                                                        b'"query must be a non-empty string"}}')
        status, body = post(b'{"query": "BG 2.47", "k": "ten"}')
        assert status == 400 and b"k must be a positive integer" in body
        status, body = post(b"not json")
        assert status == 400 and b"must be a JSON object" in body
        # found by a fresh attack: each was a 500 with a traceback in the server's log
        status, body = post(b"[" * 50000)  # RecursionError in the JSON parser
        assert status == 400 and b"must be a JSON object" in body
        status, body = post(b'{"query": "kar\\udcffma yoga", "k": 3}')  # a lone surrogate, echoed in the answer
        assert status == 200 and body["ok"]
        try:  # k=²: str.isdigit is True for it, int() is not
            urllib.request.urlopen(f"{base}/search?q=karma&k=%C2%B2", timeout=30).close()
            raise AssertionError("k=² was answered")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400 and b"k must be a positive integer" in exc.read()

        status, body = post(b'{"query": "x"}', host="evil.example")
        assert status == 403
        status, body = post(json.dumps({"query": "BG 2.47", "k": 3}).encode())
        assert status == 200 and body["ok"] and body["result"]["hits"][0]["doc_id"] == "bg2.47"
        assert [h["rank"] for h in body["result"]["hits"]] == [1, 2, 3]
