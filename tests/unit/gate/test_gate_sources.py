"""A ranking source is checked before any slow work: a misspelt config costs no dataset build."""

from __future__ import annotations

import pytest
from fixtures.paths import REPO
from typer.testing import CliRunner

from workbench.cli import app
from workbench.errors import ConfigError
from workbench.gate.sources import check_source

QUICKSTART = REPO / "experiments" / "quickstart.toml"


@pytest.mark.parametrize("spec, msg", [
    (f"{QUICKSTART}:nosuch", "has no config 'nosuch'; configs: vector, hybrid"),
    (str(QUICKSTART), "is an experiment; name one of its configs"),
    (str(REPO / "no-such.run"), "is neither a file nor EXPERIMENT.toml:CONFIG"),
    (str(REPO / "experiments"), "is a folder"),
])
def test_check_source_refuses_what_cannot_be_read(spec, msg):
    with pytest.raises(ConfigError) as info:
        check_source(spec)
    assert msg in str(info.value)


def test_check_source_accepts_a_config_of_an_experiment_and_gives_it_loaded():
    exp = check_source(f"{QUICKSTART}:hybrid")
    assert list(exp.configs) == ["vector", "hybrid"] and exp.configs["hybrid"].lanes == ("vector", "fts", "reference")
    assert check_source(str(REPO / "README.md")) is None  # a file (a run) is read later, by load_source


def test_a_misspelt_config_is_refused_before_the_dataset_is_built(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    res = CliRunner().invoke(app, ["gate", "--candidate", f"{QUICKSTART}:nosuch", "--baseline", f"{QUICKSTART}:vector",
                                   "-d", "gita", "--json"])
    assert res.exit_code == 2 and res.stdout == ""
    assert "--candidate: " in res.stderr and "has no config 'nosuch'; configs: vector, hybrid" in res.stderr
    assert "building dataset" not in res.stderr and not (tmp_path / "datasets").exists()
