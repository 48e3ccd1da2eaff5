"""``workbench logs judge`` (:mod:`workbench.traffic.implicit`): a dataset's ``implicit`` layer from clicks, worked
out by hand with the cascade model, and its agreement with the scholars per stratum against scikit-learn."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.traffic.implicit import agreement_by_stratum


def test_a_log_becomes_the_implicit_layer_of_a_dataset(data_dir, tmp_path, monkeypatch):
    from workbench.data import catalog
    from workbench.judging.layers import load_layer
    from workbench.traffic.importer import read_logs, write_log_set
    from workbench.traffic.log import TrafficLog

    folder = data_dir / "suttacentral-bilara" / "translation" / "en" / "sujato" / "sutta" / "sn" / "sn56"
    segments = json.loads((folder / "sn56.11_translation-en-sujato.json").read_text(encoding="utf-8"))
    ids = [seg for seg, text in segments.items() if text.strip()][:8]
    with (tmp_path / "docs.jsonl").open("w", encoding="utf-8") as f:
        for seg in ids:
            f.write(json.dumps({"id": seg, "text": segments[seg]}) + "\n")
    (tmp_path / "queries.tsv").write_text("query_id\ttext\nq1\tThe middle way\n")
    (tmp_path / "qrels.txt").write_text(f"q1 0 {ids[1]} 1\n")
    (tmp_path / "datasets.toml").write_text('[dataset.talk]\nsource = "files"\ndocuments = "docs.jsonl"\n'
                                            'queries = "queries.tsv"\nqrels = "qrels.txt"\n')
    monkeypatch.setenv("WORKBENCH_DATASETS", str(tmp_path / "datasets.toml"))
    home = tmp_path / "home"
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    # 30 searches show d0, d1, d2 (and one shows a document the dataset lacks); 20 click d1, 10 click nothing
    log = TrafficLog(tmp_path / "ubi")
    for i in range(30):
        qid = log.searched(f"id:{i}", "the  middle WAY", [ids[0], ids[1], ids[2]])
        if i < 20:
            log.clicked(qid, ids[1])
    for i in range(10):
        log.searched(f"id:{i}", "something nobody asked the dataset", ["sn99.99:1.1"])
    log.close()
    write_log_set(home / "logs" / "wk", *read_logs([tmp_path / "ubi"], "wk"))
    got = CliRunner().invoke(app, ["logs", "judge", "wk", "-d", "talk", "--model", "cascade", "--no-agreement",
                                   "--json"])
    assert got.exit_code == 0, got.output
    body = json.loads(got.stdout)
    # cascade: d0 examined 30 times, never clicked first: 0; d1 examined 30, first click 20: 2/3 >= 0.5: grade 2;
    # d2 examined only when nothing was clicked (10): 0 of 10: grade 0
    assert (body["pairs"], body["queries"], body["searches"], body["keys_without_query"]) == (3, 1, 40, 1)
    ds = catalog.load("talk", catalog.load_definitions(), home=home)
    layer = load_layer("implicit", ds, home=home)
    assert [(r.query_id, r.doc_id, r.relevance) for r in layer.qrels] == [
        ("q1", ids[0], 0), ("q1", ids[1], 2), ("q1", ids[2], 0)]
    assert layer.evaluated(ds.queries) == list(ds.queries) and "3 grades from clicks on 1 queries" in layer.describe()
    scores = json.loads((home / "qrels" / "talk" / "implicit.json").read_text())
    assert scores["provenance"]["model"] == "cascade" and [ids[1], 2 / 3, 30, 20] == scores["scores"][1][1:]
    bad = CliRunner().invoke(app, ["logs", "judge", "wk", "-d", "talk", "--thresholds", "0.5,0.2"])
    assert bad.exit_code == 2 and "LO must be below HI" in bad.output
    from workbench.errors import ConfigError

    with pytest.raises(ConfigError, match="no implicit qrels .* workbench logs judge LOG_SET -d other"):
        load_layer("implicit", type("D", (), {"name": "other", "queries": [], "documents": []})(), home=home)


def test_agreement_per_stratum_is_scikit_learns_kappa():
    from sklearn.metrics import cohen_kappa_score

    implicit = {("q1", "a"): 2, ("q1", "b"): 0, ("q2", "c"): 1, ("q2", "d"): 1, ("q3", "e"): 2, ("q9", "z"): 2}
    human = {("q1", "a"): 2, ("q1", "b"): 1, ("q2", "c"): 1, ("q2", "d"): 0, ("q3", "e"): 2}
    got = agreement_by_stratum(implicit, human, {"q1": "term/ASCII", "q2": "paraphrase/ASCII", "q3": "term/ASCII"},
                               resamples=200)
    keys = sorted(set(implicit) & set(human))
    want = cohen_kappa_score([implicit[k] for k in keys], [human[k] for k in keys], weights="linear", labels=[0, 1, 2])
    assert got["all"]["pairs"] == 5 and got["all"]["kappa"]["value"] == pytest.approx(want)
    term = [("q1", "a"), ("q1", "b"), ("q3", "e")]
    assert got["term/ASCII"]["kappa"]["value"] == pytest.approx(cohen_kappa_score(
        [implicit[k] for k in term], [human[k] for k in term], weights="linear", labels=[0, 1, 2]))
    assert list(got) == ["all", "paraphrase/ASCII", "term/ASCII"] and np.isfinite(got["all"]["alpha"]["value"])
