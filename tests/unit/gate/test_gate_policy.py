"""The gate's policy, decisions, gate files and reports on inputs small enough to check by hand
(no corpora, no database): one GatePolicy with one set of defaults on the pair path and in gate
files, bad policy values naming the file and key, JUnit built with ElementTree, and GateReport
round trips, including a report file in the layout written before GateReport existed."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pandas as pd
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from workbench.errors import ConfigError, DataError
from workbench.gate import runner as gate_runner
from workbench.gate.decide import Check, GateResult, expected_checks, judged_check, paired_checks
from workbench.gate.policy import GatePolicy, load_gate_file
from workbench.gate.report import GateReport, junit
from workbench.gate.sources import Ranking
from workbench.run import Hit, Run
from workbench.types import Qrel, Query

# ---------------------------------------------------------------- the policy


def test_the_policy_declares_each_default_once():
    p = GatePolicy()
    assert (p.margin, p.min_queries, p.judged_floor, p.judged_action) == (0.01, 30, 0.1, "warn")
    with pytest.raises(ValidationError):
        p.margin = 0.5  # frozen
    with pytest.raises(ValidationError):
        GatePolicy(judged_flor=0.2)  # extra="forbid"
    assert GatePolicy(margin=0).margin == 0.0  # a TOML integer is a number


def test_a_gate_file_without_policy_keys_gets_the_pair_paths_defaults(tmp_path):
    (tmp_path / "g.toml").write_text('experiment = "e.toml"\n[expected.gita.full]\n"MRR@10" = 0.5\n')
    gf = load_gate_file(tmp_path / "g.toml")
    pair = GatePolicy().override({"margin": None, "min_queries": None, "judged_floor": None, "judged_action": None})
    assert gf.policy == pair == GatePolicy()
    assert gf.policy.judged_floor == pair.judged_floor == 0.1
    assert gf.experiment == tmp_path / "e.toml" and gf.expected == {"gita": {"full": {"RR@10": 0.5}}}
    assert gf.splits == ("train", "dev", "test")


def test_precedence_option_over_file_over_default(tmp_path):
    (tmp_path / "g.toml").write_text('experiment = "e.toml"\njudged_floor = 0.0\nmargin = 0.02\n'
                                     '[expected.gita.full]\n"R@10" = 0.5\n')
    filed = load_gate_file(tmp_path / "g.toml").policy
    assert (filed.margin, filed.min_queries, filed.judged_floor) == (0.02, 30, 0.0)
    over = filed.override({"judged_floor": 0.3, "min_queries": None})
    assert (over.margin, over.min_queries, over.judged_floor) == (0.02, 30, 0.3)


@pytest.mark.parametrize("line, message", [
    ("judged_floor = 1.5", "judged_floor must be a number in [0, 1] (got 1.5)"),
    ('judged_floor = "0.1"', "judged_floor must be a number in [0, 1] (got '0.1')"),
    ("margin = nan", "margin must be a number in [0, 1] (got nan)"),
    ("min_queries = 2.5", "min_queries must be an integer >= 1 (got 2.5)"),
    ("min_queries = true", "min_queries must be an integer >= 1 (got True)"),
    ('judged_action = "maybe"', 'judged_action must be "warn" or "fail" (got \'maybe\')'),
])
def test_a_bad_policy_value_names_the_file_and_the_key(tmp_path, line, message):
    path = tmp_path / "gate-x.toml"
    path.write_text(f'experiment = "e.toml"\n{line}\n[expected.gita.full]\n"R@10" = 0.5\n')
    with pytest.raises(ConfigError) as exc:
        load_gate_file(path)
    assert str(exc.value).startswith(f"{path}: {message}: ")


def test_a_bad_option_names_the_option():
    with pytest.raises(ConfigError, match=r"^--judged-action must be \"warn\" or \"fail\" \(got 'maybe'\)"):
        GatePolicy().override({"judged_action": "maybe"})
    with pytest.raises(ConfigError, match=r"^--margin must be a number in \[0, 1\] \(got 2.0\)"):
        GatePolicy().override({"margin": 2.0})
    with pytest.raises(ConfigError, match="unknown gate policy key 'floor'; the keys are margin, min_queries"):
        GatePolicy.from_mapping({"floor": 0.1}, "g.toml")


def test_the_cli_resolves_one_policy_on_both_paths(tmp_path, monkeypatch):
    """The CLI's pair path and a gate file reach the decisions with the same policy: the defaults when
    nothing is given, the file's value over the default, an option over both."""
    from workbench import settings
    from workbench.cli import app
    from workbench.data import catalog

    seen: list[tuple[str, GatePolicy]] = []

    def fake_pair(cand, base, ds, *, policy, **_kw):
        seen.append(("pair", policy))
        return GateResult("gita", cand.label, base.label, policy.margin, [], {}, [])

    def fake_expected(cand, expected, ds, *, policy, **_kw):
        seen.append(("file", policy))
        return GateResult("gita", cand.label, "expected values", policy.margin, [], {}, [])

    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(settings, "data_dir", lambda: tmp_path)
    monkeypatch.setattr(catalog, "ensure", lambda name, defs, home, log=None: SimpleNamespace(name=name))
    monkeypatch.setattr(gate_runner, "check_source", lambda spec: None)
    monkeypatch.setattr(gate_runner, "load_source", lambda spec, ds, home, log: Ranking(spec, Run({})))
    monkeypatch.setattr(gate_runner._Layers, "__call__", lambda self, ds: None)
    monkeypatch.setattr(gate_runner, "gate_pair", fake_pair)
    monkeypatch.setattr(gate_runner, "gate_expected", fake_expected)
    (tmp_path / "plain.toml").write_text('experiment = "e.toml"\n[expected.gita.full]\n"R@10" = 0.5\n')
    (tmp_path / "floor0.toml").write_text('experiment = "e.toml"\njudged_floor = 0.0\n[expected.gita.full]\n"R@10" = 0.5\n')
    pair = ["gate", "--candidate", "a.run", "--baseline", "b.run", "-d", "gita"]
    runner = CliRunner()
    for args in (pair, ["gate", str(tmp_path / "plain.toml")], ["gate", str(tmp_path / "floor0.toml")],
                 [*pair, "--judged-floor", "0.3"], ["gate", str(tmp_path / "floor0.toml"), "--judged-floor", "0.3"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
    assert [(path, p.judged_floor) for path, p in seen] == [("pair", 0.1), ("file", 0.1), ("file", 0.0),
                                                             ("pair", 0.3), ("file", 0.3)]
    assert seen[0][1] == seen[1][1] == GatePolicy()
    saved = GateReport.load(sorted((tmp_path / "home" / "gates").glob("gate-*.json"))[-1])
    assert saved.command[-2:] == ["--judged-floor", "0.3"]


# ---------------------------------------------------------------- decisions by hand


def _pq(values: dict[str, float], types: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"query_id": list(values), "query_type": [types[q] for q in values], "R@10": list(values.values())})


def test_the_policy_decides_paired_checks():
    """40 term queries each 0.05 worse (a constant difference: its bootstrap CI is the point) and 5
    reference queries: with δ = 0.01 the terms fail; with δ = 0.1 they pass; 5 < 30 queries: too-few."""
    types = {f"t{i}": "term" for i in range(40)} | {f"r{i}": "reference" for i in range(5)}
    base = _pq({q: 0.5 for q in types}, types)
    cand = _pq({q: 0.45 for q in types}, types)
    got = {c.stratum: c for c in paired_checks(cand, base, ["R@10"])}
    assert got["term"].status == "fail" and got["term"].n == 40
    assert got["term"].diff == pytest.approx(-0.05) and got["term"].ci_high == pytest.approx(-0.05)
    assert got["reference"].status == "too-few" and got["all"].status == "fail"
    loose = {c.stratum: c.status for c in paired_checks(cand, base, ["R@10"], policy=GatePolicy(margin=0.1))}
    assert loose == {"all": "pass", "reference": "too-few", "term": "pass"}
    few = {c.stratum: c.status for c in paired_checks(cand, base, ["R@10"], policy=GatePolicy(min_queries=5))}
    assert few["reference"] == "fail"


def test_the_policy_decides_expected_checks():
    """Mean 0.5 against 0.52: below 0.52 − 0.01 fails; within 0.52 − 0.03 passes."""
    types = {f"q{i}": "term" for i in range(30)}
    cand = _pq({q: (1.0 if i % 2 else 0.0) for i, q in enumerate(types)}, types)
    (c,) = [c for c in expected_checks(cand, {"R@10/term": 0.52}) if c.stratum == "term"]
    assert (c.n, c.candidate, c.status) == (30, 0.5, "fail") and c.diff == pytest.approx(-0.02)
    assert math.isnan(c.ci_low) and math.isnan(c.ci_high)
    assert expected_checks(cand, {"R@10/term": 0.52}, policy=GatePolicy(margin=0.03))[0].status == "pass"
    with pytest.raises(ConfigError, match="no 'page_ref' queries"):
        expected_checks(cand, {"R@10/page_ref": 0.5})


def test_judged_coverage_by_hand():
    """q1's top 4 holds 2 judged documents (1/2), q2's top 2 none (0): mean Judged@4 = 0.25."""
    run = Run({"q1": [Hit("d1", 4.0), Hit("d2", 3.0), Hit("d3", 2.0), Hit("d4", 1.0)],
               "q2": [Hit("d5", 2.0), Hit("d6", 1.0)]})
    qrels = [Qrel("q1", "d1", 1), Qrel("q1", "d3", 0), Qrel("q2", "d9", 2)]
    queries = [Query("q1", "a", "term", "en", "test"), Query("q2", "b", "term", "en", "test")]
    j = judged_check(run, qrels, queries, k=4)
    assert (j["k"], j["mean"], j["floor"], j["status"]) == (4, 0.25, 0.1, "pass")
    assert [(t["query_id"], t["doc_id"], t["rank"]) for t in j["to_judge"]] == [
        ("q2", "d5", 1), ("q1", "d2", 2), ("q2", "d6", 2), ("q1", "d4", 4)]  # best-ranked first
    assert judged_check(run, qrels, queries, k=4, policy=GatePolicy(judged_floor=0.3))["status"] == "warn"
    failing = GatePolicy(judged_floor=0.3, judged_action="fail")
    assert judged_check(run, qrels, queries, k=4, policy=failing)["status"] == "fail"


def test_empty_answers_by_hand():
    """Of 2 unanswerable queries n1 is answered with nothing and n2 padded (0.5); of 2 answerable ones a2 is answered
    with nothing (false empty 0.5); u has only a non-relevant judgment and counts as neither."""
    from workbench.gate.decide import answers_check
    from workbench.gate.report import markdown

    run = Run({"n1": [], "n2": [Hit("d9", 0.1)], "a1": [Hit("d1", 0.9)], "a2": [], "u": []})
    queries = [Query("n1", "BG 19.1", "negative", "en", "test"), Query("n2", "MN 200", "negative", "en", "test"),
               Query("a1", "a", "term", "en", "test"), Query("a2", "b", "term", "en", "test"),
               Query("u", "c", "term", "en", "test")]
    qrels = [Qrel("a1", "d1", 1), Qrel("a2", "d2", 2), Qrel("u", "d3", 0)]
    assert answers_check(run, qrels, queries) == {}  # the defaults check nothing
    got = answers_check(run, qrels, queries, policy=GatePolicy(empty_floor=0.5))
    assert got == {"negatives": 2, "empty_on_negatives": 0.5, "floor": 0.5, "answerable": 2, "false_empty": 0.5,
                   "ceiling": 1.0, "status": "pass", "note": ""}
    assert answers_check(run, qrels, queries, policy=GatePolicy(empty_floor=0.6))["status"] == "fail"
    assert answers_check(run, qrels, queries, policy=GatePolicy(false_empty_ceiling=0.4))["status"] == "fail"
    # no negatives: the ceiling is still checked, the floor cannot be and the note says so (a newcomer found both silent)
    none = answers_check(run, qrels, queries[2:], policy=GatePolicy(empty_floor=0.6, false_empty_ceiling=0.4))
    assert (none["negatives"], none["false_empty"], none["status"]) == (0, 0.5, "fail") and "not checked" in none["note"]
    only_floor = answers_check(run, qrels, queries[2:], policy=GatePolicy(empty_floor=0.6))
    assert only_floor["status"] == "pass" and "floor is not checked" in only_floor["note"]
    assert "no unanswerable query in the gated splits (floor 0.6 not checked), 0.500 of 2 answerable ones" in \
        markdown(GateResult("gita", "c", "expected values", 0.01, [], {}, [], answers=only_floor))
    res = GateResult("gita-negatives", "e.toml:seed", "expected values", 0.01, [], {}, [],
                     answers=answers_check(run, qrels, queries, policy=GatePolicy(empty_floor=0.6)))
    assert res.exit_code == 1
    assert GateResult.from_json(res.to_json()).answers == res.answers
    case = ET.fromstring(junit([res])).findall("testcase")[-1]
    assert case.get("name") == "empty answers" and case.find("failure").get("message") == (
        "empty on negatives 0.500 (floor 0.6), false empty 0.500 (ceiling 1)")
    assert ("Empty answers of the candidate: 0.500 of 2 unanswerable queries (floor 0.6), 0.500 of 2 answerable "
            "ones (ceiling 1): **fail**") in markdown(res)
    with pytest.raises(ConfigError, match=r"--empty-floor must be a number in \[0, 1\] \(got 1.5\)"):
        GatePolicy().override({"empty_floor": 1.5})


# ---------------------------------------------------------------- JUnit


def _paired() -> GateResult:
    return GateResult("gita", 'e.toml:no-ref <&"x">', "e.toml:full", 0.01,
                      [Check("R@10", "all", 1800, 0.6, 0.7, -0.1, -0.11, -0.09, "fail"),
                       Check("R@10", "term", 12, 0.5, 0.5, 0.0, 0.0, 0.0, "too-few"),
                       Check("R@10", "reference", 600, 0.9, 0.9, 0.0, -0.02, 0.01, "inconclusive")],
                      {"k": 10, "mean": 0.05, "floor": 0.1, "status": "fail", "to_judge": []}, [])


def test_junit_of_one_result_is_a_testsuite_with_escaped_names():
    root = ET.fromstring(junit([_paired()]))
    assert root.tag == "testsuite" and root.get("name") == 'gate e.toml:no-ref <&"x">'
    assert (root.get("tests"), root.get("failures")) == ("4", "2")  # 3 checks + Judged@10; the fail and the floor
    cases = root.findall("testcase")
    assert [c.get("name") for c in cases] == ["R@10 [all]", "R@10 [term]", "R@10 [reference]", "Judged@10"]
    assert {c.get("classname") for c in cases} == {'gate.gita.e.toml:no-ref <&"x">'}
    failure = cases[0].find("failure")
    assert failure.get("message") == "R@10 fell by 0.1000 beyond the margin 0.01"
    assert json.loads(failure.text)["diff"] == -0.1
    assert [c.find("skipped").get("message") for c in cases[1:3]] == ["too-few", "inconclusive"]
    assert cases[3].find("failure").get("message") == "judged coverage below the floor"


def test_junit_of_several_results_is_one_testsuites_document():
    passing = GateResult("gita", "seeds.toml:a", "expected values", 0.01,
                         [Check("R@10", "all", 1800, 0.42, 0.41, 0.01, math.nan, math.nan, "pass")], {}, [])
    text = junit([_paired(), passing])
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites')
    root = ET.fromstring(text)
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures")) == ("5", "2")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in root.findall("testsuite")] == [
        ('gate e.toml:no-ref <&"x">', "4", "2"), ("gate seeds.toml:a", "1", "0")]


# ---------------------------------------------------------------- reports

#: A report file exactly as `workbench gate` wrote it before GateReport existed (workbench/gate/check.py's
#: save_report at 7cb5985): a paired result with a failing check, losses and a judged warning, and an
#: expected-values result whose CIs are NaN.
OLD_REPORT = """{
 "created": "2026-11-30T21:37:57+00:00",
 "command": ["workbench", "gate", "--candidate", "e.toml:no-ref", "--baseline", "e.toml:full", "--dataset", "gita",
  "-m", "R@10"],
 "exit_code": 1,
 "results": [
  {
   "dataset": "gita", "candidate": "e.toml:no-ref", "baseline": "e.toml:full", "margin": 0.01,
   "judged": {"k": 10, "mean": 0.05, "floor": 0.1, "status": "warn",
              "to_judge": [{"query_id": "q1", "doc_id": "bg2.47", "rank": 1}]},
   "losses": [{"query_id": "gita-ref-00001", "candidate": 0.0, "baseline": 1.0, "diff": -1.0,
               "dropped": [{"doc_id": "bg1.2", "baseline_lanes": ["ref"], "lanes_missing_in_candidate": ["ref"]}]}],
   "warnings": ["e.toml:no-ref: 3 queries have no relevant document"],
   "qrels": "built",
   "qrels_sha256": "abababababababababababababababababababababababababababababababab",
   "checks": [
    {"measure": "R@10", "stratum": "all", "n": 1800, "candidate": 0.6, "baseline": 0.7, "diff": -0.1,
     "ci_low": -0.11, "ci_high": -0.09, "status": "fail", "note": ""},
    {"measure": "R@10", "stratum": "term", "n": 12, "candidate": 0.5, "baseline": 0.5, "diff": 0.0,
     "ci_low": 0.0, "ci_high": 0.0, "status": "too-few", "note": ""}
   ],
   "exit_code": 1
  },
  {
   "dataset": "gita", "candidate": "seeds.toml:aicharya-rrf60", "baseline": "expected values", "margin": 0.01,
   "judged": {"k": 10, "mean": 0.08072222222222222, "floor": 0.0, "status": "pass", "to_judge": []},
   "losses": [], "warnings": [], "qrels": "built",
   "qrels_sha256": "37ac98d8ad7a12871121183c5def5f4caf7aeec99f22346c4a8462d6b8152b7e",
   "checks": [
    {"measure": "R@10", "stratum": "all", "n": 1800, "candidate": 0.4153157075038904, "baseline": 0.4153,
     "diff": 1.5707503890405317e-05, "ci_low": NaN, "ci_high": NaN, "status": "pass",
     "note": "against the expected value"}
   ],
   "exit_code": 0
  }
 ]
}
"""


def test_an_old_report_file_loads_and_writes_back_the_same_json(tmp_path):
    path = tmp_path / "gates" / "gate-20261130T213757812114Z-2281.json"
    path.parent.mkdir()
    path.write_text(OLD_REPORT)
    report = GateReport.load(path)
    assert report.created.isoformat() == "2026-11-30T21:37:57+00:00"
    assert (report.exit_code, report.verdict) == (1, "regression")
    paired, expected = report.results
    assert (paired.exit_code, expected.exit_code) == (1, 0)  # the fail check; none in the second
    assert [c.status for c in paired.checks] == ["fail", "too-few"] and paired.failed[0].diff == -0.1
    assert paired.losses[0]["dropped"][0]["lanes_missing_in_candidate"] == ["ref"]
    assert paired.judged["status"] == "warn" and expected.judged["floor"] == 0.0
    assert math.isnan(expected.checks[0].ci_low) and expected.checks[0].note == "against the expected value"
    # what GateReport writes is what the file holds (NaN as NaN), key for key
    assert json.dumps(report.to_json()) == json.dumps(json.loads(OLD_REPORT))
    from workbench.results import gates

    frame = gates.checks_frame(report)
    assert frame[["candidate", "stratum", "status"]].values.tolist() == [
        ["e.toml:no-ref", "all", "fail"], ["e.toml:no-ref", "term", "too-few"],
        ["seeds.toml:aicharya-rrf60", "all", "pass"]]


def test_a_report_from_before_the_qrels_layers_loads_as_built(tmp_path):
    body = json.loads(OLD_REPORT)
    for r in body["results"]:
        del r["qrels"], r["qrels_sha256"]
    path = tmp_path / "gate-old.json"
    path.write_text(json.dumps(body))
    assert [(r.qrels, r.qrels_sha256) for r in GateReport.load(path).results] == [("built", ""), ("built", "")]


def test_a_report_round_trips_through_save_and_load(tmp_path):
    result = GateResult("gita", "cand", "base", 0.02,
                             [Check("nDCG@10", "all", 50, 0.3, 0.35, -0.05, -0.07, -0.03, "fail", "x")],
                             {"k": 10, "mean": 0.5, "floor": 0.1, "status": "pass", "to_judge": []},
                             [], ["w"], "merged", "f" * 64)
    report = GateReport.of([result], ["workbench", "gate", "x"])
    path = report.save(tmp_path)
    assert path.parent == tmp_path / "gates" and path.name.startswith(f"gate-{report.created:%Y%m%dT%H%M%S}")
    back = GateReport.load(path)
    assert back.to_json() == report.to_json()
    assert back.results[0] == result and back.command == ["workbench", "gate", "x"] and back.exit_code == 1
    assert back.created == report.created.replace(microsecond=0)  # the file keeps it to the second
    body = json.loads(path.read_text())
    body["results"][0]["checks"][0]["status"] = "maybe"
    path.write_text(json.dumps(body))
    with pytest.raises(DataError, match="is not a complete gate report .*status 'maybe' is not one of"):
        GateReport.load(path)
