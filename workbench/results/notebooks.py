"""The analysis notebooks of ``notebooks/``: find them, run them headless, start JupyterLab on them.

Each notebook is a jupytext pair (Mouse et al., jupytext): the ``.py`` percent file is the one
committed and reviewed; JupyterLab opens it as a notebook and writes the ``.ipynb`` with outputs
beside it (git-ignored). They read results only through :mod:`workbench.results`, from the home
``WORKBENCH_HOME`` names, and take their parameters from ``NB_*`` environment variables
(``NB_EXPERIMENT``, ``NB_CONFIGS``…; each notebook's first code cell lists its own).

JupyterLab and the notebook tools are the optional extra ``notebooks`` (``make main`` installs it):
``pip install -e '.[notebooks]'``.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import ConfigError
from workbench.settings import PROJECT_ROOT

#: Where the notebooks live (a source checkout's ``notebooks/``).
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
#: The command that installs what the notebooks need.
INSTALL_HINT = "pip install -e '.[notebooks]' (make main installs it)"


@dataclass
class Executed:
    """One headless run: the notebook, where its executed ``.ipynb`` went, seconds taken, and the error
    (``""`` when every cell ran)."""

    name: str
    output: Path | None
    seconds: float
    error: str = ""


def _require(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{module} is not installed in {sys.prefix}; {INSTALL_HINT}")


def find(names: Sequence[str] = (), folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The notebooks' ``.py`` files, sorted; ``names`` picks some (``quickstart`` or ``quickstart.py``).

    Raises:
        ConfigError: the folder is missing (not a source checkout), or a name matches no notebook
            (the message lists them).
    """
    if not folder.is_dir():
        raise ConfigError(f"no notebooks folder at {folder}; run from a source checkout (git clone) of the workbench")
    every = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not names:
        return every
    by_name = {p.stem: p for p in every}
    out = []
    for n in names:
        stem = Path(n).stem
        if stem not in by_name:
            raise ConfigError(f"no notebook {n!r} in {folder}; there are: {', '.join(by_name) or 'none'}")
        out.append(by_name[stem])
    return out


def execute(path: Path, out_dir: Path | None = None, *, timeout: int = 1200,
            env: Mapping[str, str] | None = None) -> Executed:
    """Run one notebook top to bottom in a fresh kernel of this environment and keep its outputs.

    Args:
        path: the notebook's ``.py`` percent file.
        out_dir: where the executed ``<name>.ipynb`` is written (None: not written).
        timeout: seconds one cell may take.
        env: environment variables set for the kernel (``WORKBENCH_HOME``, ``NB_*``), on top of this
            process's.

    Returns:
        an :class:`Executed`; a failing cell does not raise: its error is in ``error`` (the cell's number
        and the exception's last line) and the notebook is written up to it.

    Raises:
        ConfigError: jupytext, nbclient or ipykernel is not installed (names the extra to install).
        StorageError: ``out_dir`` cannot take the notebook (read-only, not a folder: said before any cell
            runs; a full disk: said after the run, naming the file, the free space and the fix); no half
            ``.ipynb`` is left, an earlier one stays as it was.
    """
    for module in ("jupytext", "nbclient", "ipykernel"):
        _require(module)
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from workbench._infra.durable import atomic_path

    nb = jupytext.read(path)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    t0 = time.perf_counter()
    error = ""
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    out = None if out_dir is None else Path(out_dir) / f"{path.stem}.ipynb"
    with ExitStack() as stack:
        # the output's temporary file is made first: a folder that cannot take it is refused before any cell runs
        tmp = stack.enter_context(atomic_path(out)) if out is not None else None
        try:
            client.execute(env={**os.environ, **(env or {})})  # the kernel's environment; ours is left alone
        except CellExecutionError as exc:
            cell = next((i for i, c in enumerate(nb.cells, 1) if c.get("cell_type") == "code"
                         and any(o.get("output_type") == "error" for o in c.get("outputs", []))), "?")
            plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # the kernel colours its traceback
            last = [ln for ln in plain.splitlines() if ln.strip()]
            error = f"cell {cell}: {last[-1] if last else type(exc).__name__}"
        if tmp is not None:  # a full disk now: a StorageError naming ``out``, and no half file
            nbformat.write(nb, str(tmp))
    return Executed(path.stem, out, time.perf_counter() - t0, error)


def lab_command(port: int = 8888, host: str = "127.0.0.1", open_browser: bool = True,
                folder: Path = NOTEBOOKS_DIR) -> list[str]:
    """The command that starts JupyterLab on ``folder`` with this environment's Python.

    As root (a container, CI: euid 0) it adds ``--allow-root``, without which JupyterLab refuses to start;
    nothing else changes: it binds ``host`` (loopback by default) and keeps Jupyter's token.

    Raises:
        ConfigError: jupyterlab or jupytext is not installed (names the extra to install).
    """
    for module in ("jupyterlab", "jupytext"):
        _require(module)
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    return [sys.executable, "-m", "jupyterlab", f"--notebook-dir={folder}", f"--ServerApp.port={port}",
            f"--ServerApp.ip={host}", *([] if open_browser else ["--no-browser"]), *(["--allow-root"] if root else [])]
