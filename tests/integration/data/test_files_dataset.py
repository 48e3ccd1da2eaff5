"""A team's own files as a dataset, end to end (issue #42): a BEIR folder made here from the session's gita (its
English translations as the text, the verse address as the title, its work, chapter and verse in ``metadata``, the
queries with their types in ``metadata``
and the judgments in ``qrels/<split>.tsv``) is built by ``source = "files"`` with no code, and evaluated like any
dataset. What proves it:

* the query set comes back whole: every query's id, text, type, language and split (the split from the qrels
  file's name), and every judgment, equal to the gita's;
* the reference lane (which reads the documents' addresses, works and chapter and verse numbers: ``address_field``,
  ``work_field``, ``metadata_fields`` from the corpus records' ``metadata``) ranks every query exactly as it does on
  the built gita;
* a measure the workbench reports (R@10 of a full-text config on dev) equals ir_measures on the run it returned
  and the team's own qrels file (not the copy the build wrote).
"""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pytest

from workbench.data import catalog
from workbench.experiment.config import load_experiment
from workbench.experiment.runner import run_experiment

EXPERIMENT = """
name = "files-gita"
datasets = ["{name}"]
splits = ["dev"]
measures = ["R@10"]
[embedders.h]
kind = "hash"
dim = 32
[lanes.fts]
kind = "fulltext"
config = "wb_fold"
[lanes.ref]
kind = "reference"
[configs.fts]
lanes = ["fts"]
[configs.ref]
lanes = ["ref"]
"""


def _beir_folder(gita, folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in gita.documents:
            text = "\n".join(t.text for t in d.texts if t.language == "en")
            md = {"work": d.work_id, "chapter": d.metadata["chapter"], "verse": d.metadata["verse"]}
            f.write(json.dumps({"_id": d.doc_id, "title": d.address, "text": text, "metadata": md},
                               ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
        for q in gita.queries:
            md = {"query_type": q.query_type, "language": q.language, "group": q.group}
            f.write(json.dumps({"_id": q.query_id, "text": q.text, "metadata": md}, ensure_ascii=False) + "\n")
    split = {q.query_id: q.split for q in gita.queries}
    for s in ("train", "dev", "test"):
        rows = [f"{r.query_id}\t{r.doc_id}\t{r.relevance}" for r in gita.qrels if split[r.query_id] == s]
        (folder / "qrels" / f"{s}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def files_gita(gita, pg_dsn, tmp_path_factory):
    """(definitions path, home, the built files dataset) for a BEIR copy of the gita."""
    base = tmp_path_factory.mktemp("files-gita")
    _beir_folder(gita, base / "beir-gita")
    defs = base / "datasets.toml"
    defs.write_text('seed = 20261129\n[dataset.beir-gita]\nsource = "files"\ndocuments = "beir-gita"\n'
                    'language = "en"\naddress_field = "title"\nwork_field = "work"\n'
                    'metadata_fields = ["chapter", "verse"]\n')
    home = base / "home"
    definitions = catalog.load_definitions(defs)
    catalog.build("beir-gita", definitions, base, home)
    return defs, home, catalog.load("beir-gita", definitions, base, home)


def test_the_query_set_and_judgments_come_back_whole(gita, files_gita):
    _defs, _home, ds = files_gita
    assert len(ds.documents) == len(gita.documents) == 701
    assert [d.address for d in ds.documents] == [d.address for d in gita.documents]
    mine = {q.query_id: (" ".join(q.text.split()), q.query_type, q.language, q.split, q.group) for q in ds.queries}
    theirs = {q.query_id: (" ".join(q.text.split()), q.query_type, q.language, q.split, q.group)
              for q in gita.queries}
    assert mine == theirs
    assert sorted(ds.qrels) == sorted(gita.qrels)
    assert ds.manifest["notes"]["format"] == "beir" and ds.manifest["notes"]["judgments_read"] == len(gita.qrels)
    assert ds.manifest["counts"]["by_split"] == {s: sum(q.split == s for q in gita.queries)
                                                for s in ("dev", "test", "train")}


def test_it_evaluates_like_any_dataset_and_its_measures_follow_the_teams_own_qrels(gita, files_gita, built_home,
                                                                                   pg_dsn, monkeypatch, tmp_path):
    defs, home, ds = files_gita
    monkeypatch.setenv("WORKBENCH_PG_DSN", pg_dsn)
    monkeypatch.setenv("WORKBENCH_DATASETS", str(defs))
    path = tmp_path / "e.toml"
    path.write_text(EXPERIMENT.format(name="beir-gita"))
    res = run_experiment(load_experiment(path), home=home)
    ref = next(c for c in res.configs if c.config.name == "ref")
    # the same experiment on the built gita: the reference lane reads addresses, which the files carried over
    monkeypatch.delenv("WORKBENCH_DATASETS")
    gpath = tmp_path / "g.toml"
    gpath.write_text(EXPERIMENT.format(name="gita"))
    gres = run_experiment(load_experiment(gpath), home=built_home)
    gref = next(c for c in gres.configs if c.config.name == "ref")
    dev = [q.query_id for q in ds.queries if q.split == "dev"]
    assert len(dev) == sum(q.split == "dev" for q in gita.queries) > 300
    assert all(ref.run[q] == gref.run[q] for q in dev)
    # R@10 of the full-text config: ir_measures on its run and the qrels file the team gave
    fts = next(c for c in res.configs if c.config.name == "fts")
    lines = (defs.parent / "beir-gita" / "qrels" / "dev.tsv").read_text().splitlines()[1:]
    qrels = [ir_measures.Qrel(q, d, int(r)) for q, d, r in (line.split("\t") for line in lines)]
    # the ranking as served (equal scores keep the lane's order, as the workbench measures): scores from ranks
    run = [ir_measures.ScoredDoc(q, h.doc_id, float(-i)) for q in dev for i, h in enumerate(fts.run[q])]
    per_query = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.R @ 10], qrels, run)}
    judged = sorted({r.query_id for r in qrels})
    want = sum(per_query.get(q, 0.0) for q in judged) / len(judged)  # a query with no hit counts 0
    assert sorted(fts.evaluation.per_query["query_id"]) == judged
    got = fts.evaluation.per_query["R@10"].mean()
    assert got == pytest.approx(want, abs=1e-12) and 0.05 < got < 1.0
