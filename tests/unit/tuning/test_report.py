"""The study report (report.json) as a typed StudyReport: files written before it existed load and
write back key for key, round trips through save and load, and the dashboard's readers on it."""

from __future__ import annotations

import copy
import json

import pytest

from workbench.errors import DataError
from workbench.tuning.report import (
    MeasureComparison,
    QrelsSummary,
    SplitReport,
    StudyEvaluation,
    StudyReport,
    TrainSummary,
    TypeComparison,
)

#: report.json as `workbench tune` wrote it before StudyReport existed (workbench/tuning/tune.py's write_outputs
#: at 7cb5985), values from a real study of experiments/tune-kb.toml trimmed to one measure and two
#: query types; its dev split is written as a split without queries is.
OLD_REPORT = {
    "study": "tune-kb", "storage": "journal", "chosen_trial": 47,
    "chosen_params": {"fusion": "rrf", "k": 68, "lanes.fts_simple": False, "weights.reference": 5.8860049338907725,
                      "engine.vector.ef_search": 40},
    "notes": ["chose trial 47 (0.5549) over the best (0.5551): its ±10% neighbourhood is flatter"],
    "sensitivity": [{"param": "k", "value": 68, "objective": 0.5548960207238897, "minus10": 0.5548960207238897,
                     "plus10": 0.5548960207238897, "drop": 0.0}],
    "dev": {"queries": 0, "note": "no dev queries with a human grade in tune-kb"},
    "test": {"queries": 357,
             "measures": {"R@10": {"chosen": 0.8152353870841266, "chosen_ci": [0.7759800662689317, 0.8517176870748299],
                                   "baseline": 0.6681632248859138, "baseline_ci": [0.624467941216891, 0.710484441251248],
                                   "mean_diff": 0.14707216219821262, "ci_low": 0.11778532246231826,
                                   "ci_high": 0.17801512271575293, "p_value": 9.999000099990002e-05}},
             "R@10 by query_type": {
                 "page_ref": {"n": 104, "chosen": 1.0, "baseline": 0.7355769230769231, "mean_diff": 0.2644230769230769,
                              "ci_low": 0.19871794871794873, "ci_high": 0.3317307692307692,
                              "p_value": 9.999000099990002e-05},
                 "reference": {"n": 152, "chosen": 0.9978070175438598, "baseline": 0.8652960526315789,
                               "mean_diff": 0.1325109649122807, "ci_low": 0.08642641760651629,
                               "ci_high": 0.18188498590225566, "p_value": 9.999000099990002e-05}}},
    "train": {"objective": "R@10", "chosen": 0.5548960207238897, "baseline": 0.42104061270876364, "trial": 47},
    "qrels": {"layer": "built", "sha256": "37ac98d8ad7a12871121183c5def5f4caf7aeec99f22346c4a8462d6b8152b7e",
              "human_pairs": 0, "stale": 0, "queries_left_out": 0},
}


def _write(folder, body) -> object:
    path = folder / "report.json"
    path.write_text(json.dumps(body, indent=1))
    return path


def test_an_old_report_loads_typed_and_writes_back_key_for_key(tmp_path):
    rep = StudyReport.load(_write(tmp_path, OLD_REPORT))
    assert (rep.study, rep.storage, rep.chosen_trial) == ("tune-kb", "journal", 47)
    assert rep.chosen_params["weights.reference"] == 5.8860049338907725 and rep.notes[0].startswith("chose trial 47")
    ev = rep.evaluation
    assert ev.train == TrainSummary("R@10", 0.5548960207238897, 0.42104061270876364, 47)
    assert ev.qrels.layer == "built" and ev.qrels.sha256.startswith("37ac98d8ad7a")
    test = ev.test
    assert test.queries == 357 and test.by_type_measure == "R@10"  # the objective's table, found by its key
    assert set(test.by_query_type) == {"page_ref", "reference"}
    ref = test.by_query_type["reference"]
    assert (ref.n, ref.chosen, ref.baseline) == (152, 0.9978070175438598, 0.8652960526315789)
    r10 = test.measures["R@10"]
    assert r10.chosen_ci == (0.7759800662689317, 0.8517176870748299) and r10.p_value == 9.999000099990002e-05
    assert ev.dev == SplitReport(0, note="no dev queries with a human grade in tune-kb")
    assert json.dumps(rep.to_json()) == json.dumps(OLD_REPORT)  # the same JSON, in the same key order


def test_a_report_from_before_qrels_and_storage_were_recorded_loads(tmp_path):
    body = copy.deepcopy(OLD_REPORT)
    del body["qrels"], body["storage"]
    rep = StudyReport.load(_write(tmp_path, body))
    assert rep.evaluation.qrels is None and rep.storage == ""
    assert "qrels" not in rep.to_json() and rep.evaluation.test.by_query_type["page_ref"].n == 104
    assert StudyReport.storage_of(tmp_path / "report.json") == ""


def test_a_split_without_queries_round_trips():
    empty = SplitReport(0, note="no dev queries with a human grade in gita")
    assert empty.to_json() == {"queries": 0, "note": "no dev queries with a human grade in gita"}
    assert SplitReport.from_json(empty.to_json(), "R@10") == empty


def test_a_report_round_trips_through_save_and_load(tmp_path):
    split = SplitReport(10, {"R@1": MeasureComparison(1.0, (1.0, 1.0), 0.0, (0.0, 0.0), 1.0, 1.0, 1.0, 2 / 1024)},
                        "R@1", {"term": TypeComparison(10, 1.0, 0.0, 1.0, 1.0, 1.0, 2 / 1024)})
    rep = StudyReport("s", "postgresql://u:***@h/db", 3, {"k": 60, "weights.good": 1.5}, ["n"],
                      [{"param": "k", "value": 60, "objective": 1.0, "minus10": 1.0, "plus10": 1.0, "drop": 0.0}],
                      StudyEvaluation(split, SplitReport(0, note="no test queries"), TrainSummary("R@1", 1.0, 0.0, 3),
                                      QrelsSummary("human", "a" * 64, 12, 1, 4)))
    path = rep.save(tmp_path / "report.json")
    body = json.loads(path.read_text())
    assert body["dev"]["R@1 by query_type"]["term"]["p_value"] == 2 / 1024  # the layout readers have always seen
    assert list(body) == ["study", "storage", "chosen_trial", "chosen_params", "notes", "sensitivity", "dev", "test",
                          "train", "qrels"]
    assert StudyReport.load(path) == rep
    assert StudyReport.storage_of(path) == "postgresql://u:***@h/db"


@pytest.mark.parametrize("change, message", [
    (lambda b: b.pop("chosen_params"), "is not a study report"),
    (lambda b: b["test"]["measures"]["R@10"].pop("p_value"), r"is not a complete study report \(KeyError: 'p_value'\)"),
    (lambda b: b["test"]["R@10 by query_type"]["page_ref"].update(n="many"), "is not a complete study report"),
    (lambda b: b.update(sensitivity="flat"), "is not a complete study report"),
])
def test_a_damaged_report_names_the_file(tmp_path, change, message):
    body = copy.deepcopy(OLD_REPORT)
    change(body)
    path = _write(tmp_path, body)
    with pytest.raises(DataError, match=message) as exc:
        StudyReport.load(path)
    assert str(path) in str(exc.value)
    with pytest.raises(DataError, match="does not exist"):
        StudyReport.load(tmp_path / "none" / "report.json")


def test_the_dashboard_reads_the_study_through_the_report(tmp_path):
    from workbench.results import studies

    folder = tmp_path / "studies" / "tune-kb" / "latest"
    folder.mkdir(parents=True)
    _write(folder, OLD_REPORT)
    (found,) = studies.find(tmp_path)
    assert found.storage == "journal"
    rep = studies.report(found)
    table = studies.measures_table(rep)
    assert table[["split", "measure"]].values.tolist() == [["test", "R@10"]]  # dev has no queries
    row = table.iloc[0]
    assert (row["chosen"], row["delta"]) == (0.8152353870841266, 0.14707216219821262)
    assert (row["chosen_ci"], row["delta_ci"]) == ("[0.776, 0.852]", "[+0.118, +0.178]")
