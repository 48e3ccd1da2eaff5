"""A live lane works everywhere a lane works: fusion with local lanes and the gate, tuning from its cached
candidates, judging pools, and the notebooks' read API (eval and the dashboard's drill-down:
tests/integration/live/test_lanes.py).

One ``workbench serve`` for the module serves a local config of the gita: the hash-embedder vector lane as it is
(``fusion = "none"``, ``top_k`` = the depth), so the ``http`` lane that reads it back is that local lane, document
for document and score for score. Every request to it goes through a counting proxy written here, so each test
also says how many times the server was asked: the live experiment's eval asks each query once, and every later
command (gate, tune, pool, the read API) reads the candidate cache and asks nothing.
"""

from __future__ import annotations

import csv
import json
import os
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import faults
import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.data import catalog
from workbench.experiment.config import load_experiment

pytestmark = pytest.mark.pg

LOCAL = """
name = "everywhere-local"
datasets = ["gita"]
measures = ["R@10", "nDCG@10", "RR@10"]
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
[configs.vec]
lanes = ["vector"]
fusion = "none"
top_k = 40
[configs.fused]
lanes = ["vector", "fts"]
fusion = "rrf"
k = 60
top_k = 20
tiebreak_lane = "vector"
"""

LIVE = """
name = "everywhere-live"
datasets = ["gita"]
measures = ["R@10", "nDCG@10", "RR@10"]
depth = 40
[lanes.via_http]
kind = "http"
url = "{base}/search"
method = "POST"
body = {{query = "{{query}}", k = "{{k}}"}}
hits = "result.hits"
score = "score"
snapshot = "{snapshot}"
concurrency = 8
[lanes.fts]
kind = "fulltext"
config = "simple"
[configs.live]
lanes = ["via_http"]
fusion = "none"
top_k = 40
[configs.fused_live]
lanes = ["via_http", "fts"]
fusion = "rrf"
k = 60
top_k = 20
tiebreak_lane = "via_http"
"""

STUDY = """
name = "tune-live"
experiment = "live-tune.toml"
dataset = "gita"
lanes = ["via_http", "fts"]
baseline = "fused_live"
trials = 12
seed = 3
[objective]
measure = "R@10"
weights = {{ paraphrase = 1.0, term = 1.0, reference = 1.0 }}
[space]
k = {{ low = 1, high = 120, log = true }}
[space.weights]
via_http = {{ low = 0.0, high = 2.0 }}
fts = {{ low = 0.0, high = 2.0 }}
"""


class _CountingProxy:
    """Forwards ``POST /search`` to ``workbench serve`` and counts the requests (thread-safe)."""

    def __init__(self, upstream: str) -> None:
        self.calls = 0
        self.down = False
        lock = threading.Lock()
        proxy = self

        class Handler(faults.JsonHandler, BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    proxy.calls += 1
                if proxy.down:
                    return self.send(503, b'{"detail": "down"}')
                req = urllib.request.Request(upstream + self.path, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=120) as r:
                        self.send(r.status, r.read())
                except urllib.error.HTTPError as exc:
                    self.send(exc.code, exc.read())

        self.handler = Handler


def _env(home: Path, pg_dsn: str) -> dict:
    env = {**os.environ, "WORKBENCH_HOME": str(home), "WORKBENCH_PG_DSN": pg_dsn}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


@pytest.fixture(scope="module")
def live(data_dir, pg_dsn, tmp_path_factory):
    """The gita built in a fresh home; ``workbench serve`` of local.toml's ``vec`` behind a counting proxy;
    local.toml and live.toml evaluated once through the CLI (tracked in MLflow in the home)."""
    home = tmp_path_factory.mktemp("everywhere-home")
    catalog.build("gita", catalog.load_definitions(), data_dir, home)
    folder = tmp_path_factory.mktemp("everywhere")
    local = folder / "local.toml"
    local.write_text(LOCAL)
    env = _env(home, pg_dsn)
    mp = pytest.MonkeyPatch()
    for k in ("WORKBENCH_HOME", "WORKBENCH_PG_DSN"):
        mp.setenv(k, env[k])
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    port = faults.free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        with faults.workbench_server(["serve", "-e", str(local), "-c", "vec", "-d", "gita", "--port", str(port)],
                                     env, folder / "serve.log", f"{base}/health",
                                     lambda body: json.loads(body)["status"] == "ok", 240, "workbench serve"):
            proxy = _CountingProxy(base)
            with faults.http_server(proxy.handler) as front:
                live_toml = folder / "live.toml"
                live_toml.write_text(LIVE.format(base=front, snapshot="t1"))
                (folder / "live-tune.toml").write_text(LIVE.format(base=front, snapshot="t-tune"))
                (folder / "study.toml").write_text(STUDY.format())
                ds = catalog.load("gita", catalog.load_definitions(), home=home)
                asked = sum(1 for q in ds.queries if q.text.strip())
                runner = CliRunner()
                t0 = time.monotonic()
                res = runner.invoke(app, ["eval", str(local)])
                assert res.exit_code == 0, res.output[-3000:]
                assert proxy.calls == 0
                t1 = time.monotonic()
                res = runner.invoke(app, ["eval", str(live_toml)])
                assert res.exit_code == 0, res.output[-3000:]
                # the live eval asked the server once per query that has text
                assert proxy.calls == asked == 1800, (proxy.calls, asked)
                timing = {"eval local": t1 - t0, "eval live": time.monotonic() - t1}
                yield {"home": home, "folder": folder, "local": local, "live": live_toml, "proxy": proxy,
                       "ds": ds, "asked": asked, "env": env, "timing": timing, "runner": runner}
    finally:
        mp.undo()


def test_live_lane_fused_with_a_local_lane_gates_equal_to_the_same_fusion_of_local_lanes(live):
    """gate --candidate live.toml:fused_live (http lane + full text, RRF) --baseline local.toml:fused (vector +
    full text, RRF): the live lane is the served vector lane, so both fused runs are one run: Δ = 0 exactly."""
    home, proxy = live["home"], live["proxy"]
    calls = proxy.calls
    before = set((home / "gates").glob("gate-*.json")) if (home / "gates").is_dir() else set()
    md = live["folder"] / "gate.md"
    res = live["runner"].invoke(app, ["gate", "--candidate", f"{live['live']}:fused_live",
                                      "--baseline", f"{live['local']}:fused", "-d", "gita", "-m", "R@10",
                                      "--markdown", str(md)])
    assert res.exit_code == 0, res.output[-3000:]
    assert proxy.calls == calls  # fused from the candidate cache: the server was not asked
    (report,) = set((home / "gates").glob("gate-*.json")) - before
    body = json.loads(report.read_text())
    (result,) = body["results"]
    assert result["exit_code"] == 0 and result["candidate"] == "live.toml:fused_live"
    assert result["baseline"] == "local.toml:fused"
    checks = {c["stratum"]: c for c in result["checks"] if c["measure"] == "R@10"}
    assert {"all", "paraphrase", "term", "reference"} <= set(checks), sorted(checks)
    for stratum, c in checks.items():
        assert c["candidate"] == c["baseline"] and c["diff"] == 0.0, (stratum, c)
        assert c["ci_low"] == 0.0 == c["ci_high"], (stratum, c)
        assert c["status"] == "pass", (stratum, c)
    assert checks["all"]["n"] >= 1000 and 0.0 < checks["all"]["candidate"] < 1.0
    assert "live.toml:fused_live" in md.read_text()

    # and the runs themselves are one run, query by query (ids, scores and the order of ties)
    from workbench.gate.sources import load_source

    ds = live["ds"]
    cand = load_source(f"{live['live']}:fused_live", ds, home=home)
    base = load_source(f"{live['local']}:fused", ds, home=home)
    assert proxy.calls == calls
    ranked = lambda run, q: [(h.doc_id, h.score) for h in run.get_hits(q)]  # noqa: E731
    qids = [q.query_id for q in ds.queries]
    assert all(ranked(cand.run, q) == ranked(base.run, q) for q in qids)
    assert set(cand.lanes) == {"via_http", "fts"} and set(base.lanes) == {"vector", "fts"}
    assert all(ranked(cand.lanes["via_http"], q) == ranked(base.lanes["vector"], q) for q in qids)
    ties = sum(1 for q in qids for a, b in zip(cand.run.get_hits(q), cand.run.get_hits(q)[1:]) if a.score == b.score)
    assert ties > 100, ties  # RRF makes equal scores: the order of ties is compared for real


def test_tune_fills_the_live_lanes_cache_once_then_runs_trials_without_asking_the_server(live):
    """A study over the live lane and full text: the first ``tune`` asks each query once (a new snapshot label),
    runs its trials; a second ``tune`` runs as many from the cache with no request to the server."""
    home, proxy, runner = live["home"], live["proxy"], live["runner"]
    study = live["folder"] / "study.toml"
    latest = home / "studies" / "tune-live" / "latest-memory"
    for n, want_calls in ((12, live["asked"]), (9, 0)):
        calls = proxy.calls
        t0 = time.monotonic()
        res = runner.invoke(app, ["tune", str(study), "--trials", str(n), "--storage", "memory", "--no-track"])
        live["timing"][f"tune --trials {n}"] = time.monotonic() - t0
        assert res.exit_code == 0, res.output[-3000:]
        assert proxy.calls - calls == want_calls, (n, proxy.calls - calls)
        assert f"{n} trials run by this command" in res.stdout, res.stdout[-2000:]
        with open(latest / "trials.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) == n, len(rows)

    # and with the server answering nothing (every request would fail): the cache alone serves a study
    from workbench.tuning.space import load_study
    from workbench.tuning.study import run_study

    calls = proxy.calls
    proxy.down = True
    try:
        res = run_study(load_study(study), home=home, storage="memory", trials=5)
    finally:
        proxy.down = False
    assert proxy.calls == calls
    trials = res.optuna_study.trials
    assert sum(t.state.name == "COMPLETE" for t in trials) == 5 and trials[0].user_attrs.get("baseline") is True
    assert set(trials[1].params) == {"k", "weights.via_http", "weights.fts"}, trials[1].params
    assert 0.0 < res.baseline_value < 1.0 and res.chosen.values[0] >= res.baseline_value


def test_a_judging_pool_over_the_live_config_pools_the_live_lanes_top_documents(live, judge_store):
    """A pool over live.toml's fused_live (and a local config): the pool names the live lane, holds the live
    lane's top documents of a paraphrase query (minus what the built qrels label), prioritises them by hand's
    formula with the live lane at half a config's weight, and equals the pool of the same fusion of local lanes."""
    import math

    from workbench.experiment import pooling as pool_plan

    home, proxy, ds = live["home"], live["proxy"], live["ds"]
    calls = proxy.calls
    lexp = load_experiment(live["live"])
    plan = pool_plan.plan_pool(lexp, "gita", configs=["fused_live"], depth=10, audit=0, seed=5, home=home,
                             store=judge_store)
    assert proxy.calls == calls  # from the candidate cache
    assert plan.params["lanes"] == ["fts", "via_http"] and plan.configs == ("fused_live",)
    local = pool_plan.plan_pool(load_experiment(live["local"]), "gita", configs=["fused"], depth=10, audit=0, seed=5,
                              home=home, store=judge_store)
    assert local.params["lanes"] == ["fts", "vector"]
    assert plan.pairs == local.pairs and len(plan.pairs) > 1000  # the same pool, priorities and order

    # the live lane's top 10 of a paraphrase query whose language it answers (issue #41's rule, by hand): every
    # document the built qrels do not label is pooled when an answering system ranks it within the first 5
    from workbench.gate.sources import load_source

    ranking = load_source(f"{live['live']}:fused_live", ds, home=home)
    lane = ranking.lanes["via_http"]
    built = {(r.query_id, r.doc_id) for r in ds.qrels}
    pooled = {(p.query_id, p.doc_id): p for p in plan.pairs}
    answers = {lang: set(a["answering"]) for lang, a in plan.params["filtered"]["languages"].items()}
    cut = plan.params["filtered"]["low_rank_cut"]
    assert cut == 5
    q = next(q for q in ds.queries if q.query_type == "paraphrase" and q.split in lexp.splits
             and "lane:via_http" in answers[q.language]
             and len([h for h in lane.get_hits(q.query_id)[:10] if (q.query_id, h.doc_id) not in built]) >= 8)
    top = [h.doc_id for h in lane.get_hits(q.query_id)[:10]]
    fused_top = [h.doc_id for h in ranking.run.get_hits(q.query_id)[:10]]
    fts_top = [h.doc_id for h in ranking.lanes["fts"].get_hits(q.query_id)[:10]]
    tops = {"lane:via_http": (0.5, top), "config:fused_live": (1.0, fused_top), "lane:fts": (0.5, fts_top)}
    tops = {s: wt for s, wt in tops.items() if s in answers[q.language]}
    for d in top:
        if (q.query_id, d) in built:
            continue
        ranks = {s: t.index(d) + 1 for s, (_w, t) in tops.items() if d in t}
        if min(ranks.values()) > cut:  # every answering system ranks it low: left out
            assert (q.query_id, d) not in pooled, d
            continue
        want = sum(tops[s][0] / math.log2(r + 1) for s, r in ranks.items())
        assert pooled[(q.query_id, d)].priority == pytest.approx(want, abs=1e-6), d

    # with a local config besides (one experiment holding both): the same documents; the two configs and the
    # live and vector lanes rank them alike, so each counts twice, full text once
    from dataclasses import replace

    lexp_local = load_experiment(live["local"])
    mixed = replace(lexp, lanes={**lexp.lanes, "vector": lexp_local.lanes["vector"]},
                    embedders=lexp_local.embedders, configs={**lexp.configs, "fused": lexp_local.configs["fused"]})
    both = pool_plan.plan_pool(mixed, "gita", configs=["fused_live", "fused"], depth=10, audit=0, seed=5, home=home,
                             store=judge_store)
    assert both.params["lanes"] == ["fts", "vector", "via_http"] and proxy.calls == calls
    assert {(p.query_id, p.doc_id) for p in both.pairs} == set(pooled)
    prio = {(p.query_id, p.doc_id): p.priority for p in both.pairs}
    for d in top:
        if (q.query_id, d) not in pooled:
            continue
        ranks = {s: t.index(d) + 1 for s, (_w, t) in tops.items() if d in t}
        want = sum((1 if s == "lane:fts" else 2) * tops[s][0] / math.log2(r + 1) for s, r in ranks.items())
        assert prio[(q.query_id, d)] == pytest.approx(want, abs=1e-6), d


def test_the_read_api_reads_the_live_configs_results_equal_to_the_local_configs(live, monkeypatch):
    """workbench.results on the home the fixture's evals tracked: live.toml's ``live`` (the http lane alone) has
    the per-query measures, the fused ranking and the lane candidates of local.toml's ``vec``; fused_live's equal
    fused's."""
    from workbench.results import Results, run_frame

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    calls = live["proxy"].calls
    res = Results(live["home"])
    runs = res.runs()
    assert {("everywhere-live", "live"), ("everywhere-live", "fused_live"), ("everywhere-local", "vec"),
            ("everywhere-local", "fused")} <= set(zip(runs["experiment"], runs["config"]))
    measures = ["R@10", "nDCG@10", "RR@10"]
    for mine, theirs in (("live", "vec"), ("fused_live", "fused")):
        got = res.per_query(mine, experiment="everywhere-live").set_index("query_id").sort_index()
        want = res.per_query(theirs, experiment="everywhere-local").set_index("query_id").sort_index()
        assert len(got) >= 1000 and list(got.index) == list(want.index)
        assert got[measures].equals(want[measures]), mine
        assert 0.0 < got["R@10"].mean() < 1.0
        a = run_frame(res.run(mine, experiment="everywhere-live"))
        b = run_frame(res.run(theirs, experiment="everywhere-local"))
        assert a.equals(b), mine
    logged = runs.set_index(["experiment", "config"]).loc[("everywhere-live", "live"), "metric.recall_at_10"]
    assert logged == pytest.approx(res.per_query("live", experiment="everywhere-live")["R@10"].mean())
    lanes = res.lanes("live", experiment="everywhere-live")
    local = res.lanes("vec", experiment="everywhere-local")
    assert set(lanes["lane"]) == {"via_http", "fts"} and set(local["lane"]) == {"vector", "fts"}
    cols = ["query_id", "doc_id", "rank", "score"]
    mine = lanes[lanes["lane"] == "via_http"][cols].sort_values(["query_id", "rank"]).reset_index(drop=True)
    theirs = local[local["lane"] == "vector"][cols].sort_values(["query_id", "rank"]).reset_index(drop=True)
    assert len(mine) > 40 * 1000 and mine.equals(theirs)
    assert live["proxy"].calls == calls  # reading results asks no server
