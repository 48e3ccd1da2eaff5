"""Shared fixtures.

Tests that need the real corpora take the ``data_dir`` fixture. Without
``WORKBENCH_DATA`` they are skipped, unless ``WORKBENCH_REQUIRE_DATA=1`` (as in
``.ci/run``), where a missing corpus is an error rather than a silent skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir() -> Path:
    from workbench.settings import data_dir as resolve

    if not os.environ.get("WORKBENCH_DATA"):
        if os.environ.get("WORKBENCH_REQUIRE_DATA") == "1":
            pytest.fail("WORKBENCH_DATA is not set but WORKBENCH_REQUIRE_DATA=1: point it at shared/data")
        pytest.skip("set WORKBENCH_DATA to the corpora folder (shared/data) to run the data tests")
    return resolve()


@pytest.fixture(scope="session")
def built_home(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workbench home with every dataset of datasets/datasets.toml built once for the session."""
    from workbench import catalog

    home = tmp_path_factory.mktemp("home")
    defs = catalog.load_definitions()
    for name in defs.datasets:
        catalog.build(name, defs, data_dir, home)
    return home
