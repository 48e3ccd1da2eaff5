"""`workbench judge` refuses a bad path before it opens (or creates) the judgment store."""

from __future__ import annotations

from typer.testing import CliRunner

from workbench.cli import app
from workbench.services import postgres


def test_restore_of_a_missing_file_is_refused_before_the_store_is_created(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WORKBENCH_PG_DSN", raising=False)
    res = CliRunner().invoke(app, ["judge", "restore", str(tmp_path / "nonexistent.jsonl"), "--json"])
    assert res.exit_code == 2 and res.stdout == ""
    assert f"backup file {tmp_path / 'nonexistent.jsonl'} does not exist" in res.stderr
    assert "PostgreSQL" not in res.stderr
    assert not postgres.layout(tmp_path / "home").pgdata.exists()


def test_export_into_a_missing_folder_is_refused_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    out = tmp_path / "no" / "such" / "qrels.txt"
    res = CliRunner().invoke(app, ["judge", "export", "-d", "gita", "-o", str(out), "--json"])
    assert res.exit_code == 2 and res.stdout == ""
    assert f"the folder {out.parent} does not exist; create it (mkdir -p)" in res.stderr
    assert not (tmp_path / "no").exists() and not postgres.layout(tmp_path / "home").pgdata.exists()


def test_backup_into_a_missing_folder_and_restore_of_a_folder_are_refused_before_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WORKBENCH_PG_DSN", raising=False)
    out = tmp_path / "no" / "b.jsonl"
    res = CliRunner().invoke(app, ["judge", "backup", str(out), "--json"])
    assert res.exit_code == 2 and f"the folder {out.parent} does not exist" in res.stderr
    res = CliRunner().invoke(app, ["judge", "restore", str(tmp_path), "--json"])
    assert res.exit_code == 2 and f"backup file {tmp_path} is a folder" in res.stderr
    assert "PostgreSQL" not in res.stderr and not (tmp_path / "no").exists()
    assert not postgres.layout(tmp_path / "home").pgdata.exists()
