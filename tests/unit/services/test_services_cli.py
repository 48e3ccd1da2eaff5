"""`workbench services` commands that start nothing: the dry run of `remove`, the list `up` gives on a typo."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from workbench.cli import app
from workbench.services import postgres


def test_a_dry_run_remove_names_only_what_exists_and_deletes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    runner = CliRunner()
    res = runner.invoke(app, ["services", "remove", "postgres", "--json"])
    pgdata = postgres.layout(tmp_path).pgdata
    assert res.exit_code == 1
    assert json.loads(res.stdout) == {"service": "postgres", "dry_run": True, "would_delete": [], "deleted": []}
    assert "nothing to delete" in res.stderr and str(pgdata) in res.stderr

    pgdata.mkdir(parents=True)
    try:
        res = runner.invoke(app, ["services", "remove", "postgres", "--json"])
        assert res.exit_code == 1
        assert json.loads(res.stdout)["would_delete"] == [str(pgdata)]
        assert f"would stop postgres and delete {pgdata}" in res.stderr
        assert "back it up first (`workbench judge backup FILE`" in res.stderr and "--yes" in res.stderr
        assert pgdata.is_dir()  # a dry run deletes nothing
    finally:
        shutil.rmtree(pgdata, ignore_errors=True)


def test_up_names_the_services_it_starts():
    res = CliRunner().invoke(app, ["services", "up", "bogus"])
    assert res.exit_code == 2
    assert "unknown service 'bogus'; `services up` starts opensearch or reranker" in res.output
    assert "PostgreSQL starts by itself" in res.output
