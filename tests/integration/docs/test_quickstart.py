"""The quickstart (docs/quickstart.md) works as written.

Every command of the page's ```bash blocks runs, in order, in a fresh workbench home on the real
corpora, and must exit 0; the eval's output must show both configs of the quickstart experiment with
their scores. The install line (``make .venv/.installed``) is skipped — the test runs inside the
installed venv — and ``.venv/bin/`` becomes the running interpreter's bin folder. ``export
WORKBENCH_DATA=...`` is skipped too: the ``data_dir`` fixture names the corpora. The page's ```toml
block must be experiments/quickstart.toml, so the page shows the file the command reads.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from fixtures.paths import REPO

ROOT = REPO
PAGE = ROOT / "docs" / "quickstart.md"
BIN = Path(sys.executable).parent
#: Lines of the page's bash blocks the test does not run, and why.
SKIPPED = {r"^make\b": "the install: the test runs inside the installed venv",
           r"^export WORKBENCH_DATA=": "the data_dir fixture names the corpora"}


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}[ \t]*\n(.*?)^```", PAGE.read_text(encoding="utf-8"), flags=re.S | re.M)


def quickstart_commands() -> list[str]:
    """The page's bash commands, in order, as the test runs them (continuation lines joined)."""
    out = []
    for block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if not line or line.startswith("#") or any(re.match(rx, line) for rx in SKIPPED):
                continue
            out.append(line.replace(".venv/bin/", f"{BIN}/"))
    return out


def quickstart_experiment() -> tuple[Path, dict]:
    """The experiment file the page's eval command reads, and the page's TOML block parsed."""
    evals = [c for c in quickstart_commands() if re.search(r"\bworkbench eval\b", c)]
    assert len(evals) == 1, f"docs/quickstart.md should run one `workbench eval`, found {evals}"
    path = ROOT / next(a for a in evals[0].split() if a.endswith(".toml"))
    (block,) = _blocks("toml")
    return path, tomllib.loads(block)


def test_the_quickstart_page_names_its_commands_and_shows_its_experiment():
    """Cheap (unit tier): the page builds the datasets, runs one eval, and its TOML block is the file."""
    commands = quickstart_commands()
    assert any(re.search(r"\bworkbench data build\b", c) for c in commands), commands
    path, shown = quickstart_experiment()
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing: docs/quickstart.md runs it"
    with path.open("rb") as f:
        assert tomllib.load(f) == shown, f"the TOML block of docs/quickstart.md differs from {path.relative_to(ROOT)}"
    assert len(shown.get("configs", {})) == 2, "the quickstart compares two configs"


@pytest.mark.pg  # the eval starts the home's embedded PostgreSQL itself
def test_the_quickstart_runs_as_written(data_dir: Path, tmp_path: Path):
    """Every command of the page exits 0 in a fresh home; the eval prints both configs' scores."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update({"WORKBENCH_HOME": str(tmp_path / "home"), "WORKBENCH_DATA": str(data_dir),
                "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"})
    outputs = {}
    try:
        for command in quickstart_commands():
            proc = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=1200)
            assert proc.returncode == 0, \
                f"`{command}` exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            outputs[command] = proc.stdout
    finally:  # as root the home's server keeps its data outside the home: 72 MB left behind per run before
        from workbench.engines.pg_client import remove_embedded

        remove_embedded(tmp_path / "home")
    _path, experiment = quickstart_experiment()
    (report,) = [out for cmd, out in outputs.items() if re.search(r"\bworkbench eval\b", cmd)]
    for config in experiment["configs"]:
        lines = [ln for ln in report.splitlines() if re.search(rf"(^|\s){re.escape(config)}(\s|$)", ln)]
        assert lines, f"the eval output names no config {config!r}:\n{report[-3000:]}"
        assert any(re.search(r"\b[01]\.\d{3}\b", ln) for ln in lines), \
            f"no score beside config {config!r} in the eval output:\n{report[-3000:]}"
    assert re.search(r"\b\d+ config runs in ", report), report[-2000:]
