"""A TOML file given to the wrong command is named for what it is, by each of the three loaders."""

from __future__ import annotations

import pytest
from fixtures.paths import REPO

from workbench.errors import ConfigError
from workbench.io.toml import kind_hint

EXPERIMENTS = REPO / "experiments"


def test_kind_hint_names_the_kind_and_its_command():
    assert kind_hint({"datasets", "configs", "lanes"}, "study") == \
        "; it looks like an experiment file: `workbench eval FILE` reads it"
    assert kind_hint({"experiment", "space", "trials"}, "experiment") == \
        "; it looks like a study file: `workbench tune FILE` reads it"
    assert kind_hint({"experiment", "expected"}, "study") == "; it looks like a gate file: `workbench gate FILE` reads it"
    assert kind_hint({"datasets", "configs"}, "experiment") == ""  # its own kind: no hint
    assert kind_hint({"experiment", "typo"}, "gate") == ""  # keys every kind may have say nothing


def _load(kind, path):
    if kind == "experiment":
        from workbench.experiment.config import load_experiment

        return load_experiment(path)
    if kind == "study":
        from workbench.tuning.space import load_study

        return load_study(path)
    from workbench.gate.policy import load_gate_file

    return load_gate_file(path)


@pytest.mark.parametrize("loader, file, command", [
    ("study", "quickstart.toml", "`workbench eval FILE` reads it"),
    ("gate", "quickstart.toml", "`workbench eval FILE` reads it"),
    ("experiment", "tune-kb.toml", "`workbench tune FILE` reads it"),
    ("gate", "tune-kb.toml", "`workbench tune FILE` reads it"),
    ("experiment", "gate-seeds.toml", "`workbench gate FILE` reads it"),
    ("study", "gate-seeds.toml", "`workbench gate FILE` reads it"),
])
def test_each_loader_names_the_command_a_file_of_another_kind_needs(loader, file, command):
    with pytest.raises(ConfigError) as info:
        _load(loader, EXPERIMENTS / file)
    assert "unknown key(s)" in str(info.value) and str(info.value).endswith(command)
