"""The data directory and home resolve one way everywhere, and fail with errors naming the fix."""

from pathlib import Path

import pytest

from workbench.errors import ConfigError, DataError
from workbench.settings import EXPECTED_FILES, data_dir, home_dir


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for var in ("WORKBENCH_DATA", "WORKBENCH_HOME", "WORKBENCH_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_unset_data_dir_names_both_ways_to_set_it(clean_env):
    with pytest.raises(ConfigError) as exc:
        data_dir()
    assert "WORKBENCH_DATA" in str(exc.value) and "workbench.toml" in str(exc.value)


def test_missing_data_dir_names_the_path(clean_env, tmp_path):
    missing = tmp_path / "nowhere"
    clean_env.setenv("WORKBENCH_DATA", str(missing))
    with pytest.raises(DataError) as exc:
        data_dir()
    assert str(missing) in str(exc.value) and "does not exist" in str(exc.value)


def test_incomplete_data_dir_lists_every_missing_file(clean_env, tmp_path):
    d = tmp_path / "data"
    (d / "gita" / "data").mkdir(parents=True)
    (d / "gita" / "data" / "verse.json").write_text("[]")
    clean_env.setenv("WORKBENCH_DATA", str(d))
    with pytest.raises(DataError) as exc:
        data_dir()
    msg = str(exc.value)
    assert "gita/archive/translation_old.json" in msg
    assert "ms-dpd/ms-dpd-2.54.0/dpd/index.mjs" in msg
    assert "gita/data/verse.json" not in msg


def test_config_file_sets_data_relative_to_itself(clean_env, tmp_path):
    d = tmp_path / "corpora"
    for src, files in EXPECTED_FILES.items():
        for f in files:
            (d / src / f).parent.mkdir(parents=True, exist_ok=True)
            (d / src / f).write_text("{}")
    (tmp_path / "workbench.toml").write_text('[paths]\ndata = "corpora"\nhome = "wbhome"\n')
    assert data_dir() == d.resolve()
    assert home_dir() == (tmp_path / "wbhome").resolve()


def test_env_wins_over_config(clean_env, tmp_path):
    (tmp_path / "workbench.toml").write_text('[paths]\ndata = "corpora"\n')
    clean_env.setenv("WORKBENCH_DATA", str(tmp_path / "other"))
    assert data_dir(check=False) == (tmp_path / "other").resolve()


def test_bad_config_toml_is_a_config_error(clean_env, tmp_path):
    (tmp_path / "workbench.toml").write_text("[paths\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        data_dir(check=False)


def test_real_data_dir_is_complete(data_dir: Path):
    assert (data_dir / "gita" / "data" / "verse.json").is_file()
