"""The regression gate on the real gita dataset (hash embedder, embedded Postgres).

A planted regression (the reference lane removed) fails and names the strata that fell;
an identical run passes; unjudged documents trip the judged floor; malformed run files
give clear errors with exit code 2.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from fixtures.experiments import experiment_toml, rrf
from typer.testing import CliRunner

from workbench.cli import app

pytestmark = pytest.mark.data

EXPERIMENT = experiment_toml("gate-e2e", ["R@10"], {"full": rrf("vector", "fts", "ref"), "no-ref": rrf("vector", "fts")})


@pytest.fixture(scope="module")
def env(built_home, data_dir, pg_dsn, tmp_path_factory):
    folder = tmp_path_factory.mktemp("gate")
    (folder / "e.toml").write_text(EXPERIMENT)
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_HOME", str(built_home))
    mp.setenv("WORKBENCH_PG_DSN", pg_dsn)
    yield folder, built_home
    mp.undo()


def gate(*args):
    return CliRunner().invoke(app, ["gate", *args])


def strict(text: str):
    """``json.loads`` as strict parsers (JSON.parse, jq) read: NaN, Infinity and -Infinity refused."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_removed_lane_fails_and_names_the_strata(env, tmp_path):
    folder, _home = env
    res = gate("--candidate", f"{folder}/e.toml:no-ref", "--baseline", f"{folder}/e.toml:full", "-d", "gita",
               "--junit", str(tmp_path / "g.xml"), "--markdown", str(tmp_path / "g.md"))
    assert res.exit_code == 1, res.output
    rows = {line.split("|")[2].strip(): line.split("|")[-2].strip() for line in res.stdout.splitlines()
            if line.startswith("| R@10 |")}
    assert rows["reference"] == "fail" and rows["all"] == "fail"
    assert rows["paraphrase"] == "pass" and rows["term"] == "pass"  # the other lanes are untouched
    assert "missing lanes: ref" in res.stdout  # the dropped documents are blamed on the removed lane
    suite = ET.parse(tmp_path / "g.xml").getroot()
    assert suite.get("failures") == "2" and (tmp_path / "g.md").read_text().startswith("### Retrieval gate: ❌")


def test_json_output_is_the_saved_report_with_the_same_decisions(env, tmp_path):
    """``--json`` prints the report object saved in <home>/gates/ (not Markdown), with the same checks and exit code."""
    folder, home = env
    res = gate("--candidate", f"{folder}/e.toml:no-ref", "--baseline", f"{folder}/e.toml:full", "-d", "gita", "--json")
    assert res.exit_code == 1, res.output
    body = strict(res.stdout)
    assert set(body) == {"created", "command", "exit_code", "results"} and body["exit_code"] == 1
    status = {c["stratum"]: c["status"] for c in body["results"][0]["checks"] if c["measure"] == "R@10"}
    assert status["reference"] == "fail" and status["all"] == "fail"
    assert status["paraphrase"] == "pass" and status["term"] == "pass"
    saved = max((home / "gates").glob("gate-*.json"), key=lambda f: f.stat().st_mtime)
    assert strict(saved.read_text()) == body


def test_an_identical_run_passes(env, tmp_path):
    folder, _home = env
    res = gate("--candidate", f"{folder}/e.toml:full", "--baseline", f"{folder}/e.toml:full", "-d", "gita")
    assert res.exit_code == 0, res.output
    assert "✅ pass" in res.stdout and "| fail |" not in res.stdout


def test_a_trec_run_file_against_the_config_it_came_from_passes(env, tmp_path):
    from workbench.data import catalog
    from workbench.gate.sources import load_source
    from workbench.run import write_trec_run

    folder, home = env
    ds = catalog.ensure("gita", catalog.load_definitions(), home=home)
    ranking = load_source(f"{folder}/e.toml:full", ds, home=home)
    write_trec_run(tmp_path / "full.run", ranking.run, tag="full")
    res = gate("--candidate", str(tmp_path / "full.run"), "--baseline", f"{folder}/e.toml:full", "-d", "gita")
    assert res.exit_code == 0, res.output


def test_unjudged_documents_trip_the_judged_floor(env, tmp_path):
    folder, _home = env
    res = gate("--candidate", f"{folder}/e.toml:full", "--baseline", f"{folder}/e.toml:full", "-d", "gita",
               "--judged-floor", "0.99", "--judged-action", "fail")
    assert res.exit_code == 1 and "**fail**" in res.stdout and "Judge next:" in res.stdout
    warn = gate("--candidate", f"{folder}/e.toml:full", "--baseline", f"{folder}/e.toml:full", "-d", "gita",
                "--judged-floor", "0.99")
    assert warn.exit_code == 0 and "**warn**" in warn.stdout


def test_expected_values_gate_file(env, tmp_path):
    folder, _home = env
    (tmp_path / "g.toml").write_text(f'experiment = "{folder}/e.toml"\nmargin = 0.01\n'
                                     '[expected.gita.full]\n"R@10/reference" = 0.5\n"R@10" = 0.99\n')
    res = gate(str(tmp_path / "g.toml"))
    assert res.exit_code == 1
    rows = {line.split("|")[2].strip(): line.split("|")[-2].strip() for line in res.stdout.splitlines()
            if line.startswith("| R@10 |")}
    assert rows == {"reference": "pass", "all": "fail"}
    # against expected values there is no CI: null in the --json output and the saved report (issue #41: it was
    # NaN, which JSON.parse and jq refuse), and NaN again when the report is read back
    from workbench.gate.report import GateReport

    res = gate(str(tmp_path / "g.toml"), "--json")
    body = strict(res.stdout)
    checks = body["results"][0]["checks"]
    assert {(c["stratum"], c["ci_low"], c["ci_high"]) for c in checks} == {("reference", None, None), ("all", None, None)}
    saved = max((_home / "gates").glob("gate-*.json"), key=lambda f: f.stat().st_mtime)
    assert strict(saved.read_text()) == body
    back = GateReport.from_json(strict(saved.read_text()), saved).results[0].checks
    assert all(c.ci_low != c.ci_low and c.ci_high != c.ci_high for c in back)  # NaN


@pytest.mark.parametrize("content, msg", [
    ("gita-ref-00001 Q0 bg2.47 1 3.0\n", "6 columns"),
    ("nope-query Q0 bg2.47 1 3.0 x\n", "query id(s) that dataset gita does not have"),
    ("gita-ref-00001 Q0 bg2.47 1 3.0 x\ngita-ref-00001 Q0 bg2.47 2 2.0 x\n", "appears twice"),
    ("gita-ref-00001 Q0 bg2.47 1 nan x\n", "NaN"),
    ("", "holds no results"),
])
def test_malformed_run_files_exit_2(env, tmp_path, content, msg):
    folder, _home = env
    p = tmp_path / "bad.run"
    p.write_text(content)
    res = gate("--candidate", str(p), "--baseline", f"{folder}/e.toml:full", "-d", "gita")
    assert res.exit_code == 2 and msg.lower() in res.output.lower(), res.output


@pytest.mark.parametrize("args, msg", [
    (["--candidate", "x.run"], "give a gate file, or --candidate, --baseline and --dataset"),
    (["--candidate", "nope:cfg", "--baseline", "nope:cfg", "-d", "gita"], "is neither a file nor EXPERIMENT.toml:CONFIG"),
    (["--candidate", "a", "--baseline", "b", "-d", "nope"], "--dataset 'nope' is unknown"),
    (["--split", "validation", "--candidate", "a", "--baseline", "b", "-d", "gita"], "is not a split"),
    (["-m", "Bogus@3", "--candidate", "a", "--baseline", "b", "-d", "gita"], "Bogus"),
])
def test_usage_errors_exit_2(env, args, msg):
    res = gate(*args)
    assert res.exit_code == 2 and msg in res.output, res.output


def test_an_unknown_config_names_the_configs(env):
    folder, _home = env
    res = gate("--candidate", f"{folder}/e.toml:nope", "--baseline", f"{folder}/e.toml:full", "-d", "gita")
    assert res.exit_code == 2 and "has no config 'nope'; configs: full, no-ref" in res.output


def test_measure_aliases_are_canonical(env):
    folder, _home = env
    res = gate("--candidate", f"{folder}/e.toml:full", "--baseline", f"{folder}/e.toml:full", "-d", "gita",
               "-m", "MRR@10", "-m", "R@10")
    assert res.exit_code == 0, res.output
    assert "| RR@10 | all |" in res.stdout


@pytest.mark.parametrize("extra, msg", [
    ('margin = "abc"\n', "margin must be a number in [0, 1]"),
    ("margin = -1\n", "margin must be a number in [0, 1]"),
    ('judged_action = "maybe"\n', "judged_action must be"),
    ('splits = "test"\n', "splits must be a non-empty list"),
    ("min_queries = 0\n", "min_queries must be an integer >= 1"),
])
def test_bad_gate_files_exit_2_before_any_fusion(env, tmp_path, extra, msg):
    folder, _home = env
    (tmp_path / "g.toml").write_text(f'experiment = "{folder}/e.toml"\n' + extra + '[expected.gita.full]\n"R@10" = 0.5\n')
    res = gate(str(tmp_path / "g.toml"))
    assert res.exit_code == 2 and msg in res.output, res.output


def test_a_gate_file_refuses_extra_options_and_names_itself(env, tmp_path):
    folder, _home = env
    (tmp_path / "g.toml").write_text(f'experiment = "{folder}/e.toml"\n[expected.gita.nope]\n"MRR@10" = 0.5\n')
    res = gate(str(tmp_path / "g.toml"), "-m", "nDCG@10")
    assert res.exit_code == 2 and "do not add --candidate" in res.output
    res = gate(str(tmp_path / "g.toml"))
    assert res.exit_code == 2 and "[expected.gita.nope]" in res.output and "has no config 'nope'" in res.output


def test_an_experiment_without_a_config_and_a_bad_export_exit_2(env, tmp_path):
    import json

    folder, _home = env
    res = gate("--candidate", f"{folder}/e.toml", "--baseline", f"{folder}/e.toml:full", "-d", "gita")
    assert res.exit_code == 2 and "--candidate" in res.output and "e.toml:CONFIG" in res.output
    bad = {"lanes": {"ref": {"kind": "reference"}}, "fusion": "none", "top_k": 0,
           "provenance": {"experiment": f"{folder}/e.toml"}}
    (tmp_path / "x.json").write_text(json.dumps(bad))
    res = gate("--candidate", str(tmp_path / "x.json"), "--baseline", f"{folder}/e.toml:full", "-d", "gita")
    assert res.exit_code == 2 and "top_k must be an integer from 1 to 10,000" in res.output, res.output


def test_junit_names_the_config_of_each_case(env, tmp_path):
    folder, _home = env
    (tmp_path / "g.toml").write_text(f'experiment = "{folder}/e.toml"\n[expected.gita.full]\n"R@10" = 0.0\n'
                                     '[expected.gita.no-ref]\n"R@10" = 0.0\n')
    res = gate(str(tmp_path / "g.toml"), "--junit", str(tmp_path / "out" / "g.xml"))
    assert res.exit_code == 0, res.output
    root = ET.parse(tmp_path / "out" / "g.xml").getroot()
    classes = {tc.get("classname") for tc in root.iter("testcase")}
    assert any(c.endswith("e.toml:full") for c in classes) and any(c.endswith("e.toml:no-ref") for c in classes)


def test_one_judged_floor_default_on_the_pair_path_and_in_a_gate_file(env, tmp_path):
    """Neither the options nor the gate file set judged_floor: both paths take GatePolicy's 0.1, and the
    same candidate (config full) gets the same Judged@10 and the same status by it."""
    from workbench.gate.report import GateReport
    from workbench.results.gates import find

    folder, home = env
    (tmp_path / "g.toml").write_text(f'experiment = "{folder}/e.toml"\n[expected.gita.full]\n"R@10" = 0.0\n')
    pair = gate("--candidate", f"{folder}/e.toml:full", "--baseline", f"{folder}/e.toml:full", "-d", "gita")
    assert pair.exit_code == 0, pair.output
    pair_judged = GateReport.load(find(home)[0]).results[0].judged
    filed = gate(str(tmp_path / "g.toml"))
    assert filed.exit_code == 0, filed.output
    file_judged = GateReport.load(find(home)[0]).results[0].judged
    assert pair_judged["floor"] == file_judged["floor"] == 0.1
    assert pair_judged["mean"] == file_judged["mean"]  # one candidate, one qrels layer, all splits
    status = "pass" if pair_judged["mean"] >= 0.1 else "warn"
    assert pair_judged["status"] == file_judged["status"] == status
    assert "(floor 0.1)" in pair.stdout and "(floor 0.1)" in filed.stdout


def test_a_gate_holds_a_floor_on_empty_answers_to_unanswerable_queries(env, tmp_path):
    """On gita-negatives (references past the end of the text, Pali lemmas the gita lacks): the reference lane
    alone answers none of them (it answers only references the grammar resolves), so its empty rate is 1 and it
    passes a floor of 0.6; the vector lane pads every one (0) and fails it."""
    from workbench.data import catalog

    folder, home = env
    exp = folder / "neg.toml"
    exp.write_text(experiment_toml("gate-neg", ["R@10"], {"ref": {"lanes": ["ref"]}, "vec": {"lanes": ["vector"]}},
                                   datasets=("gita-negatives",)))
    (tmp_path / "g.toml").write_text(f'experiment = "{exp}"\nempty_floor = 0.6\njudged_floor = 0.0\n'
                                     'splits = ["test"]\n[expected.gita-negatives.ref]\n"R@10" = 0.0\n'
                                     '[expected.gita-negatives.vec]\n"R@10" = 0.0\n')
    res = gate(str(tmp_path / "g.toml"), "--junit", str(tmp_path / "g.xml"))
    assert res.exit_code == 1, res.output
    n = sum(1 for q in catalog.load("gita-negatives", home=home).queries
            if q.query_type == "negative" and q.split == "test")
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("Empty answers of the candidate")]
    assert len(lines) == 2 and n >= 20
    assert lines[0].startswith(f"Empty answers of the candidate: 1.000 of {n} unanswerable queries (floor 0.6)")
    assert lines[0].endswith("(ceiling 1): **pass**")
    assert lines[1].startswith(f"Empty answers of the candidate: 0.000 of {n} unanswerable queries (floor 0.6)")
    assert lines[1].endswith("**fail**")
    cases = [c for c in ET.parse(tmp_path / "g.xml").getroot().iter("testcase") if c.get("name") == "empty answers"]
    assert [c.find("failure") is None for c in cases] == [True, False]
