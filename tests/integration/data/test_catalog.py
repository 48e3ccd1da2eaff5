"""Builds: manifests, determinism, staleness, definition validation and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.data import catalog
from workbench.errors import ConfigError, StaleError

GITA_ONLY = """
seed = 5
splits = [0.6, 0.2, 0.2]
max_queries_per_type = 50
[dataset.g]
source = "gita"
held_out_translators = ["Shri Purohit Swami"]
query_types = ["paraphrase", "reference"]
"""


@pytest.fixture
def gita_copy(data_dir: Path, tmp_path: Path) -> tuple[Path, catalog.Definitions]:
    """A scratch data dir holding a copy of gita/ (in tmp, never in the repo) and definitions for it."""
    data = tmp_path / "data"
    shutil.copytree(data_dir / "gita", data / "gita")
    defs_path = tmp_path / "defs.toml"
    defs_path.write_text(GITA_ONLY)
    return data, catalog.load_definitions(defs_path)


def test_two_builds_are_byte_identical(built_home, data_dir, tmp_path):
    defs = catalog.load_definitions()
    other = tmp_path / "home2"
    for name in defs.datasets:
        catalog.build(name, defs, data_dir, other)
        for f in ("queries.tsv", "qrels.txt", "documents.jsonl", "manifest.json"):
            a = (catalog.dataset_dir(name, built_home) / f).read_bytes()
            b = (catalog.dataset_dir(name, other) / f).read_bytes()
            assert a == b, (name, f)


def test_manifest_records_counts_and_input_hashes(built_home, data_dir):
    import hashlib

    m = json.loads((catalog.dataset_dir("gita", built_home) / "manifest.json").read_text())
    verse = data_dir / "gita" / "data" / "verse.json"
    assert m["inputs"]["gita/data/verse.json"] == hashlib.sha256(verse.read_bytes()).hexdigest()
    assert m["counts"]["documents"] == 701
    assert sum(m["counts"]["by_type"].values()) == m["counts"]["queries"]
    assert m["binary_threshold"] == 1
    out = catalog.dataset_dir("gita", built_home)
    assert m["outputs"]["qrels.txt"] == hashlib.sha256((out / "qrels.txt").read_bytes()).hexdigest()


def test_changed_input_is_detected_and_refused_then_rebuilt(gita_copy, tmp_path):
    data, defs = gita_copy
    home = tmp_path / "home"
    catalog.build("g", defs, data, home)
    assert catalog.status("g", defs, data, home) == "current"
    verse = data / "gita" / "data" / "verse.json"
    verse.write_bytes(verse.read_bytes() + b" ")
    state = catalog.status("g", defs, data, home)
    assert state.startswith("stale") and "gita/data/verse.json" in state
    with pytest.raises(StaleError, match="workbench data build"):
        catalog.load("g", defs, data, home)
    catalog.build("g", defs, data, home)
    assert catalog.status("g", defs, data, home) == "current"
    assert len(catalog.load("g", defs, data, home).documents) == 701


def test_tampered_output_and_changed_definition_are_stale(gita_copy, tmp_path):
    data, defs = gita_copy
    home = tmp_path / "home"
    catalog.build("g", defs, data, home)
    qrels = catalog.dataset_dir("g", home) / "qrels.txt"
    qrels.write_text(qrels.read_text() + "extra 0 bg1.1 1\n")
    assert "qrels.txt" in catalog.status("g", defs, data, home)
    path = tmp_path / "defs2.toml"
    path.write_text(GITA_ONLY.replace("seed = 5", "seed = 6"))
    assert "definition" in catalog.status("g", catalog.load_definitions(path), data, home)


def test_missing_build_is_refused(gita_copy, tmp_path):
    data, defs = gita_copy
    assert catalog.status("g", defs, data, tmp_path / "empty") == "missing"
    with pytest.raises(StaleError, match="missing"):
        catalog.load("g", defs, data, tmp_path / "empty")


@pytest.mark.parametrize("body,needle", [
    ("[dataset.x]\nsource = 'nope'\n", "source must be one of"),
    ("[dataset.x]\nsource = 'gita'\ncolour = 1\n", "unknown key"),
    ("[dataset.x]\nsource = 'gita'\nquery_types = ['page_ref']\n", "not available"),
    ("splits = [0.5, 0.6, 0.1]\n[dataset.x]\nsource = 'gita'\n", "sum to 1"),
    ("seed = 'a'\n[dataset.x]\nsource = 'gita'\n", "seed must be an integer"),
    ("max_queries_per_type = 0\n[dataset.x]\nsource = 'gita'\n", "positive integer"),
    ("[dataset.p]\nsource = 'bilara-passages'\nsegments_from = 'zzz'\n", "segments_from"),
    ("seed = 1\n", "no [dataset"),
    ("[dataset.x\n", "not valid TOML"),
])
def test_bad_definitions_fail_at_load(tmp_path, body, needle):
    p = tmp_path / "d.toml"
    p.write_text(body)
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[")):
        catalog.load_definitions(p)


def test_unknown_dataset_name_lists_the_known_ones():
    defs = catalog.load_definitions()
    with pytest.raises(ConfigError, match="gita"):
        catalog.build_order(defs, ["nope"])


# ------------------------------------------------------------ CLI

def test_cli_list_json_reports_counts_per_type_and_split(built_home, data_dir, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(built_home))
    res = CliRunner().invoke(app, ["data", "list", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    by_name = {d["name"]: d for d in out["datasets"]}
    assert by_name["gita"]["status"] == "current"
    c = by_name["gita"]["counts"]
    assert c["documents"] == 701
    assert sum(c["by_type_split"]["paraphrase"].values()) == c["by_type"]["paraphrase"]


def test_cli_build_skips_current_builds(built_home, data_dir, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(built_home))
    res = CliRunner().invoke(app, ["data", "build", "--only", "gita"])
    assert res.exit_code == 0, res.output
    assert "current" in res.output


def test_cli_missing_data_dir_exits_2_naming_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "absent"))
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    res = CliRunner().invoke(app, ["data", "build"])
    assert res.exit_code == 2
    assert str(tmp_path / "absent") in res.output


def test_cli_unknown_dataset_exits_2(built_home, data_dir, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(built_home))
    res = CliRunner().invoke(app, ["data", "build", "--only", "nope"])
    assert res.exit_code == 2 and "unknown dataset" in res.output


def test_cli_ref_parse():
    res = CliRunner().invoke(app, ["ref", "parse", "Бг 2.20", "BG 19.1", "--json"])
    assert res.exit_code == 1
    out = json.loads(res.output)
    assert out[0]["canonical"] == "BG 2.20"
    assert out[1]["canonical"] is None and "18" in out[1]["reason"]
