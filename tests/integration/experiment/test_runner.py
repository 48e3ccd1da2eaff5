"""The main job end to end on the real gita dataset and a real embedded Postgres.

The hash embedder keeps it fast; the values asserted are computed independently from the
qrels (the reference lane answers verse references exactly), cross-checked with ranx, and
read back from MLflow.
"""

from __future__ import annotations

import json

import pytest
from fixtures.experiments import FTS, REF, VECTOR, experiment_toml, only, rrf
from typer.testing import CliRunner

from workbench.experiment.config import load_experiment
from workbench.experiment.runner import run_experiment

EXPERIMENT = experiment_toml(
    "e2e", ["R@10", "nDCG@10", "RR@10", "P@5", "Judged@10"],
    {"rrf": rrf("vector", "fts", "tri", "ref"), "ref": only("ref"), "fts": only("fts")},
    lanes={"vector": VECTOR, "fts": {**FTS, "config": "simple"},  # "simple", not the shared lane's wb_fold
           "tri": {"kind": "trigram", "threshold": 0.6, "max_query_words": 4}, "ref": REF})


@pytest.fixture(scope="module")
def job(built_home, data_dir, pg_dsn, tmp_path_factory):
    import os

    base = tmp_path_factory.mktemp("job")
    exp_path = base / "e2e.toml"
    exp_path.write_text(EXPERIMENT)
    exp = load_experiment(exp_path)
    old = os.environ.get("WORKBENCH_PG_DSN")
    os.environ["WORKBENCH_PG_DSN"] = pg_dsn
    try:
        first = run_experiment(exp, home=built_home)
    finally:
        if old is None:
            os.environ.pop("WORKBENCH_PG_DSN", None)
        else:
            os.environ["WORKBENCH_PG_DSN"] = old
    return exp, first, built_home


def _result(res, name):
    return next(c for c in res.configs if c.config.name == name)


def test_reference_config_values_follow_from_the_qrels(job):
    exp, res, _home = job
    ref = _result(res, "ref")
    ds = res.datasets["gita"]
    nrel = {}
    for r in ds.qrels:
        nrel[r.query_id] = nrel.get(r.query_id, 0) + (r.relevance >= 1)
    per_q = ref.evaluation.per_query.set_index("query_id")
    for q in ds.queries:
        if q.query_type != "reference":
            assert per_q.loc[q.query_id, "R@10"] == 0.0  # the reference lane never guesses
            continue
        # the lane returns exactly the addressed verse(s) first, in order
        assert per_q.loc[q.query_id, "R@10"] == pytest.approx(min(10, nrel[q.query_id]) / nrel[q.query_id])
        assert per_q.loc[q.query_id, "RR@10"] == 1.0
    assert ref.evaluation.overall["R@10"] == pytest.approx(per_q["R@10"].mean())


def test_fused_metrics_match_ranx(job):
    from workbench.eval.evaluate import cross_check

    exp, res, _home = job
    ds = res.datasets["gita"]
    for cfg in ("rrf", "fts"):
        cr = _result(res, cfg)
        ranx_vals = cross_check(cr.run, ds.qrels, ("R@10", "nDCG@10", "RR@10", "P@5"))
        for m, v in ranx_vals.items():
            assert cr.evaluation.overall[m] == pytest.approx(v, abs=1e-9), (cfg, m)


def test_rrf_lifts_references_over_text_and_keeps_every_query(job):
    exp, res, _home = job
    rrf, fts = _result(res, "rrf"), _result(res, "fts")
    assert len(rrf.evaluation.per_query) == len(res.datasets["gita"].queries) == 1800
    by_type = rrf.evaluation.aggregate("query_type")
    fts_by_type = fts.evaluation.aggregate("query_type")
    # unweighted RRF dilutes the exact reference answer (1/61 against other lanes' sums),
    # but it still lifts references far above the text lane, which cannot read addresses
    assert by_type.loc["reference", "RR@10"] > 0.4 > fts_by_type.loc["reference", "RR@10"]
    assert rrf.evaluation.overall["R@10"] > fts.evaluation.overall["R@10"]
    assert all(len(h) <= 100 for h in rrf.run.values())


def test_second_run_reads_the_cache_and_touches_no_database(job, monkeypatch):
    exp, first, home = job
    # a DSN that cannot work: any connection attempt would raise PgError
    monkeypatch.setenv("WORKBENCH_PG_DSN", "postgresql://nobody@/nowhere?host=/nonexistent-socket-dir")
    second = run_experiment(exp, home=home)
    assert second.cache_misses == 0 and second.cache_hits == 4
    for a, b in zip(first.configs, second.configs):
        assert a.evaluation.overall == b.evaluation.overall
        assert a.run.to_dict() == b.run.to_dict()


def test_tracking_logs_sanitised_metrics_and_artifacts(job, tmp_path, monkeypatch):
    import mlflow

    from workbench.experiment.tracking import log_job

    exp, res, home = job
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    parent = log_job(res, tmp_path)
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient()
    children = client.search_runs([client.get_run(parent).info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    assert {r.data.tags["config"] for r in children} == {"rrf", "ref", "fts"}
    child = next(r for r in children if r.data.tags["config"] == "rrf")
    assert child.data.metrics["recall_at_10"] == pytest.approx(_result(res, "rrf").evaluation.overall["R@10"])
    assert "mrr_at_10/reference" in child.data.metrics
    assert child.data.params["fusion.k"] == "60.0"
    assert child.data.params["hash.queries"] == res.datasets["gita"].manifest["outputs"]["queries.tsv"]
    arts = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {"run.trec", "per_query.csv", "config.json"} <= arts


def test_search_cli_shows_addresses_and_lane_ranks(job, pg_dsn, monkeypatch, tmp_path):
    from workbench.cli import app

    exp, _res, home = job
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    res = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "rrf", "-k", "3", "--json",
                                   "BG 2.47", "phaleṣu kadācana"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # unweighted RRF may put another verse first; the tool shows why, lane by lane
    target = next(h for h in out[0]["hits"] if h["address"] == "BG 2.47")
    assert target["lanes"]["ref"] == {"rank": 1, "score": 2.0}
    assert all(set(h["lanes"]) <= {"vector", "fts", "tri", "ref"} and h["snippet"] for h in out[0]["hits"])
    assert out[1]["hits"][0]["doc_id"] == "bg2.47" and "fts" in out[1]["hits"][0]["lanes"]
    bad = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "nope", "x"])
    assert bad.exit_code == 2 and "unknown config" in bad.output


def test_eval_cli_rejects_a_bad_experiment_before_any_retrieval(tmp_path, monkeypatch):
    from workbench.cli import app

    p = tmp_path / "bad.toml"
    p.write_text(EXPERIMENT.replace('lanes = ["ref"]', 'lanes = ["ref", "ghost"]'))
    monkeypatch.setenv("WORKBENCH_PG_DSN", "postgresql://nobody@/nowhere?host=/nonexistent")
    res = CliRunner().invoke(app, ["eval", str(p), "--no-track"])
    assert res.exit_code == 2 and "configs.ref.lanes" in res.output and "ghost" in res.output


def test_search_cli_reads_pasted_query_files(job, pg_dsn, monkeypatch, tmp_path):
    """The issue's reproduction: a byte-order mark on the first line hid that query from the reference lane;
    a NUL in one query aborted the batch on every Postgres lane; invisible characters split words."""
    from workbench.cli import app

    exp, _res, home = job
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    q = tmp_path / "q.txt"
    q.write_bytes("\ufeffBG 2.47\nBG 2.47\nphale\x00ṣu kad\u00adācana\n\u200eBG २.४७\u200f\n\u200b\n".encode("utf-8"))
    res = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-k", "1", "--json", "-f", str(q)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [r["query"] for r in out] == ["BG 2.47", "BG 2.47", "phaleṣu kadācana", "BG 2.47"]  # the empty line is dropped
    assert [r["hits"][0]["doc_id"] if r["hits"] else None for r in out] == ["bg2.47", "bg2.47", None, "bg2.47"]
    fts = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "fts", "-k", "1", "--json", "-f", str(q)])
    assert fts.exit_code == 0, fts.output
    assert json.loads(fts.stdout)[2]["hits"][0]["doc_id"] == "bg2.47"
    # stdin is decoded like a file; UTF-16 (with or without a byte-order mark) is named, not read as garbage
    # one line that is not UTF-8 is left out and named by its number; the others are answered
    bad = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-k", "1", "--json", "-f", "-"],
                             input=b"BG 2.47\nkar\xffma\n\xe0\xa4\x97\xe0\xa5\x80\xe0\xa4\xa4\xe0\xa4\xbe 2.47\n")
    assert bad.exit_code == 0, bad.output
    assert [r["query"] for r in json.loads(bad.stdout)] == ["BG 2.47", "गीता 2.47"]
    assert "standard input: 1 line(s) are not UTF-8 and are left out: line 2 (byte 0xff at column 4)" in bad.stderr
    # a whole file in another encoding (Russian in CP1251) is refused with the conversion for its script
    q.write_bytes("Гита 2.47\nкарма\n".encode("cp1251"))
    res = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-f", str(q)])
    assert res.exit_code == 2 and f"query file {q} is not UTF-8: line 1 (byte 0xc3 at column 1), line 2" in res.output
    assert "iconv -f CP1251 -t UTF-8" in res.output
    for raw in ("BG 2.47\n".encode("utf-16"), "BG 2.47\n".encode("utf-16-le")):
        q.write_bytes(raw)
        res = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-f", str(q)])
        assert res.exit_code == 2 and "UTF-16" in res.output and "iconv -f UTF-16" in res.output
    q.write_bytes("BG 2.47\n".encode("utf-32"))  # its byte-order mark starts like UTF-16's
    res = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-f", str(q)])
    assert res.exit_code == 2 and "is UTF-32; convert it: iconv -f UTF-32" in res.output
    q.write_text("BG 2.47\u2028BG 2.48\n", encoding="utf-8")  # a pasted line separator does not split a query
    one = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-k", "1", "--json", "-f", str(q)])
    assert one.exit_code == 0, one.output
    assert len(json.loads(one.stdout)) == 1
    q.write_text("\n \n\u200b\n", encoding="utf-8")  # a file of blank and invisible lines is named as such
    empty = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-f", str(q)])
    assert empty.exit_code == 2 and f"no query in {q}: it is empty or holds only blank lines" in empty.output


def test_search_says_why_a_reference_resolves_nowhere(job, pg_dsn, monkeypatch):
    """``BG 19.99`` names a known book with numbers it does not have: the reference lane answers nothing and
    search says why; ordinary text gets no note; the full title in Devanagari resolves."""
    from workbench.cli import app

    exp, _res, home = job
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    res = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-k", "1", "--json",
                                   "BG 19.99", "the soul is eternal", "श्रीमद्भगवद्गीता २.४७"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out[0]["hits"] == [] and out[0]["reference_note"] == "'BG 19.99' cannot be resolved: BG has 18 chapters, not 19"
    assert "reference_note" not in out[1]
    assert [h["doc_id"] for h in out[2]["hits"]] == ["bg2.47"]
    text = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "BG 2.99"])
    assert "reference lane: 'BG 2.99' cannot be resolved: BG chapter 2 has 72 verses, not 99" in text.output
    # -k beyond the config's list says so (the config keeps its top_k, 100 by default)
    big = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "-k", "150", "BG 2"])
    assert big.exit_code == 0 and "-k 150: config ref keeps its top 100 (top_k in" in big.stderr
    # a Devanagari name is read (गीता → gītā): the note says what is wrong after it
    deva = CliRunner().invoke(app, ["search", "-e", str(exp.path), "-c", "ref", "गीता 19.1"])
    assert "'गीता 19.1' cannot be resolved: read as 'gītā 19.1': BG has 18 chapters, not 19" in deva.output
