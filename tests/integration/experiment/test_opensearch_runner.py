"""The main job with OpenSearch lanes on the real cst4-mn dataset (2,585 paragraphs, 904 queries).

Values are checked against the reference lane, which answers the same page references
from the same canonical keys in memory: OpenSearch's page_ref lane must find exactly the
same documents for every page_ref query. The second run reads only the candidate cache
(an unreachable cluster URL proves it).
"""

from __future__ import annotations

import pytest
from fixtures.experiments import REF, experiment_toml, only

from workbench.experiment.config import load_experiment
from workbench.experiment.runner import run_experiment

pytestmark = pytest.mark.data

EXPERIMENT = experiment_toml(
    "os-e2e", ["R@100", "R@10", "nDCG@10"],
    {"page": only("page"), "ref": only("ref"),
     "hybrid": {"lanes": ["fuzzy", "sem"], "fusion": "weighted", "weights": {"fuzzy": 0.7, "sem": 0.3}}},
    datasets=["cst4-mn"], depth=100,
    lanes={"page": {"kind": "opensearch", "mode": "page_ref"}, "fuzzy": {"kind": "opensearch", "mode": "fuzzy"},
           "sem": {"kind": "opensearch", "mode": "semantic", "embedder": "h"}, "ref": REF})


@pytest.fixture(scope="module")
def job(built_home, data_dir, os_cluster, tmp_path_factory):
    _es, url = os_cluster
    path = tmp_path_factory.mktemp("osjob") / "e.toml"
    path.write_text(EXPERIMENT)
    exp = load_experiment(path)
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_OS_URL", url)
    try:
        res = run_experiment(exp, home=built_home)
    finally:
        mp.undo()
    return exp, res, built_home


def _cfg(res, name):
    return next(c for c in res.configs if c.config.name == name)


def test_page_ref_lane_finds_what_the_reference_lane_finds(job):
    _exp, res, _home = job
    page, ref = _cfg(res, "page"), _cfg(res, "ref")
    ds = res.datasets["cst4-mn"]
    page_queries = [q.query_id for q in ds.queries if q.query_type == "page_ref"]
    assert len(page_queries) == 600
    for qid in page_queries:
        assert {h.doc_id for h in page.run[qid]} == {h.doc_id for h in ref.run[qid]}, qid
        # the paragraphs where the page starts (grade 2) come first in both
        top_ref = {h.doc_id for h in ref.run[qid] if h.score == 2.0}
        assert {h.doc_id for h in page.run[qid][: len(top_ref)]} == top_ref, qid
    per_type = page.evaluation.aggregate("query_type")
    assert per_type.loc["page_ref", "R@100"] == pytest.approx(1.0)


def test_weighted_hybrid_is_fused_by_the_workbench(job):
    from workbench.eval.fusion import fuse

    _exp, res, _home = job
    lanes = {n: res.lanes[("cst4-mn", n)].run for n in ("fuzzy", "sem")}
    want = fuse(lanes, "weighted", weights={"fuzzy": 0.7, "sem": 0.3}, top_k=100, norm="minmax", name="hybrid")
    got = _cfg(res, "hybrid").run
    assert got.to_dict() == want.to_dict()


def test_second_run_reads_the_cache_and_touches_no_cluster(job, monkeypatch):
    exp, first, home = job
    monkeypatch.setenv("WORKBENCH_OS_URL", "http://127.0.0.1:9")
    second = run_experiment(exp, home=home)
    assert second.cache_misses == 0 and second.cache_hits == 4
    for a, b in zip(first.configs, second.configs):
        assert a.run.to_dict() == b.run.to_dict()


def test_a_down_cluster_names_its_url(built_home, data_dir, tmp_path, monkeypatch):
    from workbench.engines.os_client import OpenSearchError

    path = tmp_path / "e.toml"
    path.write_text(EXPERIMENT.replace('name = "os-e2e"', 'name = "os-down"').replace("depth = 100", "depth = 7"))
    monkeypatch.setenv("WORKBENCH_OS_URL", "http://127.0.0.1:9")
    with pytest.raises(OpenSearchError, match=r"cannot reach OpenSearch at http://127\.0\.0\.1:9"):
        run_experiment(load_experiment(path), home=built_home)
