"""A new retriever kind is one file plus one entry-point line; the rerank stage after fusion.

The plug-in (``examples/wb_address_lane.py``: exact canonical-address lookup) is
installed as a distribution would install it, into a folder on the path, and then runs through the
main job, ``workbench eval`` and a tiny ``workbench tune`` without any change to the workbench. Its
recall is computed here from the qrels and the documents' addresses. The rerank stage is checked on a
literal example and on the real dataset against the order its rule gives.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from fixtures.experiments import REF, experiment_toml, only, rrf
from fixtures.paths import REPO
from fixtures.plugins import install_plugin

from workbench import registry
from workbench.reranking.stage import apply_rerank
from workbench.run import Run

ROOT = REPO

EXPERIMENT = experiment_toml(
    "plugin", ["R@10", "RR@10"],
    {"addr": only("addr"), "fused": rrf("ref", "addr", tiebreak_lane="ref"),
     "fused-rr": {**rrf("ref", "addr", tiebreak_lane="ref"), "rerank": {"reranker": "by_addr", "depth": 5}},
     "rr-top1": {**rrf("ref", "addr", tiebreak_lane="ref"), "top_k": 1, "rerank": {"reranker": "by_addr", "depth": 5}}},
    lanes={"ref": REF, "addr": {"kind": "address"}}, depth=20, embedders={},
) + '[rerankers.by_addr]\nkind = "lane"\nlane = "addr"\n'


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def test_apply_rerank_on_a_literal_example():
    fused = Run({"q": [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]}, "f")
    rescored = Run({"q": [("c", 2.0), ("b", 5.0), ("e", 9.0)]}, "r")  # e lies below depth 3: ignored
    out = apply_rerank(fused, rescored, 3)
    # scored by the reranker first (b 5.0, c 2.0), then a (unscored, in the top 3), then the tail d, e
    assert [(h.doc_id, h.score, h.tiebreak) for h in out["q"]] == [
        ("b", 5.0, 5.0), ("c", 4.0, 2.0), ("a", 3.0, 0.0), ("d", 2.0, 0.0), ("e", 1.0, 0.0)]
    assert out.name == "f"
    with pytest.raises(ValueError, match="rerank depth must be an integer >= 1, got 0"):
        apply_rerank(fused, rescored, 0)


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site)
    monkeypatch.syspath_prepend(str(site))
    registry.clear()
    yield site
    sys.modules.pop("wb_address_lane", None)
    registry.clear()


def test_a_plugin_kind_runs_through_the_main_job_with_values_from_the_qrels(plugin_site, built_home, tmp_path):
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import run_experiment

    assert "address" in registry.retriever_kinds()
    path = tmp_path / "plugin.toml"
    path.write_text(EXPERIMENT, encoding="utf-8")
    exp = load_experiment(path)
    res = run_experiment(exp, home=built_home)
    ds = res.datasets["gita"]
    rel: dict[str, set[str]] = {}
    for r in ds.qrels:
        if r.relevance >= 1:
            rel.setdefault(r.query_id, set()).add(r.doc_id)
    by_address: dict[str, list[str]] = {}
    for d in ds.documents:
        by_address.setdefault(_norm(d.address), []).append(d.doc_id)
    addr = next(c for c in res.configs if c.config.name == "addr")
    per_q = addr.evaluation.per_query.set_index("query_id")
    found = 0
    for q in ds.queries:
        hits = sorted(by_address.get(_norm(q.text), []))[:10]
        want = len(set(hits) & rel.get(q.query_id, set())) / len(rel[q.query_id])
        assert per_q.loc[q.query_id, "R@10"] == pytest.approx(want), q.query_id
        found += bool(hits)
    assert found == 140  # gita queries that are exactly a verse's address (BG 1.7, bg 1.11 …)
    assert addr.evaluation.overall["R@10"] == pytest.approx(per_q["R@10"].mean())

    # the rerank stage: the fused run's top 5 reordered by the address lane, the rest as fused
    plain = next(c for c in res.configs if c.config.name == "fused").run
    rr = next(c for c in res.configs if c.config.name == "fused-rr").run
    addr_run = res.lanes[("gita", "addr")].run
    top1 = next(c for c in res.configs if c.config.name == "rr-top1").run  # rerank 5, keep 1: top_k after the stage
    rescored = 0
    for q in ds.queries:
        top, tail = [h.doc_id for h in plain[q.query_id][:5]], [h.doc_id for h in plain[q.query_id][5:]]
        lane = {h.doc_id for h in addr_run.get_hits(q.query_id)}
        want = [d for d in top if d in lane] + [d for d in top if d not in lane] + tail  # all lane scores are 1.0
        hits = rr[q.query_id]
        assert [h.doc_id for h in hits] == want, q.query_id
        assert [h.doc_id for h in top1[q.query_id]] == want[:1], q.query_id
        n = len(hits)  # rank scores n .. 1; the reranker's score (1.0) kept as the tiebreak of what it scored
        assert [(h.score, h.tiebreak) for h in hits] == [(float(n - i), 1.0 if h.doc_id in lane and i < 5 else 0.0)
                                                         for i, h in enumerate(hits)], q.query_id
        rescored += any(h.tiebreak == 1.0 for h in hits)
    assert rescored == 140  # every query the address lane answers went through the reranker


def test_the_plugin_runs_from_the_command_line_in_eval_and_a_tiny_tune(plugin_site, built_home, tmp_path):
    (tmp_path / "plugin.toml").write_text(EXPERIMENT, encoding="utf-8")
    study = tmp_path / "tune-plugin.toml"
    study.write_text('name = "tune-plugin"\nexperiment = "plugin.toml"\ndataset = "gita"\nlanes = ["ref", "addr"]\n'
                     'baseline = "fused"\ntrials = 4\nseed = 7\nsplit = "train"\n[objective]\nmeasure = "R@10"\n'
                     '[space]\nk = { low = 1, high = 100 }\n[space.engine.addr]\ncase_sensitive = [true, false]\n',
                     encoding="utf-8")
    env = {**os.environ, "WORKBENCH_HOME": str(built_home),
           "PYTHONPATH": os.pathsep.join([str(plugin_site), os.environ.get("PYTHONPATH", "")])}
    ev = subprocess.run([sys.executable, "-m", "workbench.cli", "eval", str(tmp_path / "plugin.toml"), "--no-track",
                         "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert ev.returncode == 0, ev.stderr[-2000:]
    records = json.loads(ev.stdout)
    assert {r["config"] for r in records} == {"addr", "fused", "fused-rr", "rr-top1"}
    tune = subprocess.run([sys.executable, "-m", "workbench.cli", "tune", str(study), "--no-track", "--storage",
                           "memory"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert tune.returncode == 0, tune.stderr[-2000:]
    # the plugin's engine parameter was tuned: the chosen trial names its value, and the baseline (which leaves it
    # at its default) needs no note about it
    assert re.search(r"chosen: .*; addr\.case_sensitive=(True|False)", tune.stdout), tune.stdout
    assert "baseline engine.addr.case_sensitive" not in tune.stdout

