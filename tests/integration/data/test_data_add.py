"""`workbench data add`: a team's own files appended as a ``source = "files"`` section, checked, then built."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.data import catalog

REPO_DEFINITIONS = Path(__file__).resolve().parents[3] / "datasets" / "datasets.toml"

CORPUS = [
    {"_id": "d1", "title": "Right effort", "text": "The four right efforts: to prevent, abandon, develop, maintain."},
    {"_id": "d2", "title": "Mindfulness", "text": "The four establishments of mindfulness: body, feelings, mind."},
    {"_id": "d3", "title": "Noble truths", "text": "Suffering, its origin, its cessation and the path."},
    {"_id": "d4", "title": "Eightfold path", "text": "Right view, intention, speech, action, livelihood, effort."},
]
QUERIES = [{"_id": "q1", "text": "the four efforts"}, {"_id": "q2", "text": "foundations of mindfulness"},
           {"_id": "q3", "text": "origin of suffering"}]


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _beir(folder: Path) -> Path:
    """A BEIR folder of 4 documents and 3 queries, judged in qrels/test.tsv."""
    (folder / "qrels").mkdir(parents=True)
    _jsonl(folder / "corpus.jsonl", CORPUS)
    _jsonl(folder / "queries.jsonl", QUERIES)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td4\t1\nq2\td2\t2\n"
                                               "q3\td3\t2\n")
    return folder


def _trio(folder: Path) -> Path:
    """A CSV of documents (two text columns in two languages), a TSV of queries and a TREC qrels file."""
    folder.mkdir(parents=True)
    (folder / "docs.csv").write_text(
        "doc,body,body_ru,author,track\n"
        'a1,"Right effort, the sixth factor",Правильное усилие,Sujato,t1\n'
        "a2,The noble eightfold path,Благородный восьмеричный путь,Sujato,t1\n"
        "a3,Mindfulness of breathing,Осознанность дыхания,Bodhi,t2\n", encoding="utf-8")
    (folder / "queries.tsv").write_text("query_id\ttext\tlanguage\nk1\tright effort\ten\n"
                                        "k2\tвосьмеричный путь\tru\nk3\tbreathing\ten\n", encoding="utf-8")
    (folder / "qrels.txt").write_text("k1 0 a1 2\nk2 0 a2 2\nk3 0 a3 1\n")
    return folder


@pytest.fixture
def defs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the repository's definitions (comments and all) as WORKBENCH_DATASETS; the home in tmp_path."""
    path = tmp_path / "defs" / "datasets.toml"
    path.parent.mkdir()
    shutil.copyfile(REPO_DEFINITIONS, path)
    monkeypatch.setenv("WORKBENCH_DATASETS", str(path))
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    return path


def _add(*args: str):
    return CliRunner().invoke(app, ["data", "add", *args])


def test_a_beir_folder_is_appended_and_built(defs: Path, tmp_path: Path):
    before = defs.read_bytes()
    beir = _beir(defs.parent / "beir" / "scifact")
    res = _add("scifact", "--from", str(beir), "--language", "en")
    assert res.exit_code == 0, res.output
    after = defs.read_bytes()
    assert after.startswith(before)
    assert after[len(before):].decode() == ('\n[dataset.scifact]\nsource = "files"\ndocuments = "beir/scifact"\n'
                                            'language = "en"\n')
    assert "[dataset.scifact]" in res.stdout
    line = next(x for x in res.stdout.splitlines() if x.startswith("scifact "))
    assert line.split()[:6] == ["scifact", "built", "4", "docs", "3", "queries"]
    m = catalog.read_manifest("scifact", tmp_path / "home")
    assert m["counts"]["documents"] == 4 and m["counts"]["qrels"] == 4
    assert m["counts"]["by_split"] == {"test": 3}  # the BEIR qrels file's name gives the split
    assert catalog.load("scifact", home=tmp_path / "home").documents[0].texts[0].field == "title"


def test_named_fields_in_two_languages_with_json(defs: Path, tmp_path: Path):
    before = defs.read_bytes()
    kb = _trio(defs.parent / "kb")
    res = _add("kb", "--from", str(kb / "docs.csv"), "--queries", str(kb / "queries.tsv"),
               "--qrels", str(kb / "qrels.txt"), "--id-field", "doc", "--text-field", "body=en",
               "--text-field", "body_ru=ru", "--metadata-field", "author", "--work-field", "track", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    section = ('[dataset.kb]\nsource = "files"\ndocuments = "kb/docs.csv"\nqueries = "kb/queries.tsv"\n'
               'qrels = ["kb/qrels.txt"]\nid_field = "doc"\ntext_fields = { body = "en", body_ru = "ru" }\n'
               'metadata_fields = ["author"]\nwork_field = "track"\n')
    assert out["section"] == section and out["definitions"] == str(defs) and out["built"] is True
    assert defs.read_bytes() == before + b"\n" + section.encode()
    c = out["counts"]
    assert (c["documents"], c["queries"], c["qrels"]) == (3, 3, 3)
    assert c["by_language"] == {"en": 2, "ru": 1}
    assert sum(c["by_split"].values()) == 3  # no split column, no BEIR qrels name: hashed by group
    doc = catalog.load("kb", home=tmp_path / "home").documents[0]
    assert [(t.field, t.language) for t in doc.texts] == [("body", "en"), ("body_ru", "ru")]
    assert (doc.work_id, doc.metadata) == ("t1", {"author": "Sujato"})


def test_paths_outside_the_definitions_folder_are_absolute_and_strings_escaped(defs: Path, tmp_path: Path):
    outside = _beir(tmp_path / 'we"ird\\name' / "scifact.v2")  # a dot: the section must say format = "beir"
    res = _add("sci.v2", "--from", str(outside), "--title-field", "title", "--no-build")
    assert res.exit_code == 0, res.output
    text = defs.read_text(encoding="utf-8")
    assert text.endswith(f'\n[dataset."sci.v2"]\nsource = "files"\ndocuments = {json.dumps(str(outside))}\n'
                         'format = "beir"\ntitle_field = "title"\n')
    section = tomllib.loads(text)["dataset"]["sci.v2"]
    assert section["documents"] == str(outside)
    assert "workbench data build --only sci.v2" in res.stdout
    assert not (tmp_path / "home" / "datasets" / "sci.v2").exists()
    res = CliRunner().invoke(app, ["data", "build", "--only", "sci.v2"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("case", ["taken", "no_path", "unknown_field", "bad_name", "no_qrels", "bad_metadata"])
def test_errors_are_one_line_and_leave_the_file_unchanged(defs: Path, case: str):
    beir = _beir(defs.parent / "scifact")
    kb = _trio(defs.parent / "kb")
    trio = ["--queries", str(kb / "queries.tsv"), "--qrels", str(kb / "qrels.txt")]
    args, expected = {
        "taken": (["gita", "--from", str(beir)],
                  "dataset gita is already defined in " + str(defs) + "; choose another name, or delete its "
                  "[dataset.gita] section there first"),
        "no_path": (["x", "--from", str(defs.parent / "absent")],
                    f"{defs.parent / 'absent'}: no such file or folder; --from names a BEIR folder or a documents "
                    "file"),
        "unknown_field": (["kb", "--from", str(kb / "docs.csv"), *trio, "--id-field", "doc",
                           "--text-field", "text"],
                          f"{kb / 'docs.csv'}:2: no field 'text'; the file's fields are doc, body, body_ru, author, "
                          "track: name one with --text-field"),
        "bad_name": (["my data", "--from", str(beir)],
                     "dataset name 'my data' is not a plain folder name; use letters, digits, '-', '_' and '.', "
                     "starting with a letter or digit"),
        "no_qrels": (["kb", "--from", str(kb / "docs.csv"), "--queries", str(kb / "queries.tsv")],
                     "--qrels is needed: only a BEIR folder brings its own queries and judgments"),
        "bad_metadata": (["kb", "--from", str(kb / "docs.csv"), *trio, "--id-field", "doc", "--text-field", "body",
                          "--metadata-field", "writer"],
                         f"{kb / 'docs.csv'}:2: no field 'writer'; the file's fields are doc, body, body_ru, author, "
                         "track: name one with --metadata-field"),
    }[case]
    before = defs.read_bytes()
    res = _add(*args)
    assert res.exit_code == 2
    assert res.stderr == f"error: {expected}\n"
    assert defs.read_bytes() == before


def test_a_file_that_no_longer_loads_is_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    path = tmp_path / "inline.toml"  # an inline table cannot be extended by a [dataset.NAME] header
    path.write_text('# mine\ndataset = { toy = { source = "files", documents = "scifact" } }\n')
    before = path.read_bytes()
    _beir(tmp_path / "scifact")
    res = _add("other", "--from", str(tmp_path / "scifact"), "--definitions", str(path))
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: {path} is not valid TOML: ") and res.stderr.count("\n") == 1
    assert path.read_bytes() == before


def test_a_failed_build_leaves_the_file_as_it_was(defs: Path, tmp_path: Path):
    beir = _beir(defs.parent / "scifact")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\tnope\t1\nq3\td3\t1\n")
    before = defs.read_bytes()
    res = _add("scifact", "--from", str(beir))
    assert res.exit_code == 2
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]  # progress lines: not errors
    assert len(errors) == 1 and "name unknown ids" in errors[0]
    assert errors[0].endswith("(datasets.toml is left as it was; --no-build adds the section without building it)")
    assert defs.read_bytes() == before
    assert catalog.read_manifest("scifact", tmp_path / "home") is None


def test_a_missing_definitions_file_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    path = tmp_path / "evals" / "datasets.toml"
    path.parent.mkdir()
    _beir(path.parent / "scifact")
    res = _add("scifact", "--from", str(path.parent / "scifact"), "--definitions", str(path), "--json")
    assert res.exit_code == 0, res.output
    assert path.read_text() == '[dataset.scifact]\nsource = "files"\ndocuments = "scifact"\n'
    assert json.loads(res.stdout)["counts"]["documents"] == 4


def test_parallel_adds_to_one_definitions_file_keep_every_section(defs: Path, tmp_path: Path):
    """Four `data add` at once on one definitions file, each building (a lock in the home serialises them): every
    one exits 0 and every section is in the file, which loads. Unlocked, this failed in 2 of 3 runs: sections
    vanished while their commands said "added" (found by an attack on the command)."""
    import os
    import subprocess
    import sys

    folder = _beir(tmp_path / "beir")
    env = {**os.environ, "WORKBENCH_DATASETS": str(defs), "WORKBENCH_HOME": str(tmp_path / "home")}
    procs = [subprocess.Popen([sys.executable, "-m", "workbench.cli", "data", "add", f"p{i}", "--from", str(folder)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e[-500:] for _o, e in outs]
    names = catalog.load_definitions(defs).datasets
    assert {f"p{i}" for i in range(4)} <= set(names)
    assert defs.read_text(encoding="utf-8").count('source = "files"') == 4
