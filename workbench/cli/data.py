"""`workbench data`: build and list datasets and query sets."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app, echo_json, json_option
from workbench.errors import WorkbenchError

data_app = typer.Typer(help="Build and list datasets and query sets.", no_args_is_help=True)
app.add_typer(data_app, name="data")


class _Steps:
    """Progress for a multi-step build: a tqdm bar on a terminal, one line per step otherwise."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.tty = sys.stderr.isatty()
        self.bar = tqdm(total=total, unit="dataset", file=sys.stderr, disable=not self.tty, dynamic_ncols=True)
        self.name = ""

    def step(self, msg: str) -> None:
        if self.tty:
            self.bar.set_postfix_str(f"{self.name}: {msg}")
        else:
            print(f"[data build] {self.name}: {msg}", file=sys.stderr, flush=True)

    def done(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


@data_app.command("build")
def data_build(
    only: Optional[list[str]] = typer.Option(None, "--only", help="Build only this dataset (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the build is current."),
    definitions: Optional[Path] = typer.Option(None, "--definitions",
                                               help="Dataset definitions TOML (default datasets/datasets.toml)."),
) -> None:
    """Build the datasets and query sets from WORKBENCH_DATA into WORKBENCH_HOME (skips what is current).

    Only the corpora the selected datasets read must be present. A dataset whose build
    fails keeps its previous build.
    """
    from workbench.data import catalog
    from workbench.settings import data_dir, home_dir

    try:
        defs = catalog.load_definitions(definitions, option="--definitions")
        names = catalog.build_order(defs, only)
        sources = tuple(dict.fromkeys(s for n in names for s in catalog.required_sources(defs.definition(n), defs)))
        data, home = data_dir(sources=sources), home_dir()
        steps = _Steps(len(names))
        rows = []
        try:
            for name in names:
                steps.name = name
                t0 = time.perf_counter()
                manifest, built = catalog.build_or_reuse(name, defs, data, home, force=force, step=steps.step, log=_log)
                rows.append((name, "built" if built else "current", manifest["counts"], time.perf_counter() - t0))
                steps.done()
        finally:
            steps.close()
    except WorkbenchError as exc:
        _fail(exc)
    for name, state, c, secs in rows:
        types = ", ".join(f"{t} {n}" for t, n in c["by_type"].items())
        typer.echo(f"{name:18s} {state:8s} {c['documents']:>7,d} docs  {c['queries']:>5,d} queries ({types})  {secs:5.1f} s")
    typer.echo(f"built into {home / 'datasets'}")


@data_app.command("list")
def data_list(
    as_json: bool = json_option("the data folder, the home and each dataset's state"),
    definitions: Optional[Path] = typer.Option(None, "--definitions", help="Dataset definitions TOML."),
) -> None:
    """Show the defined datasets, whether each build is current, and counts per query type and split."""
    from workbench.data import catalog
    from workbench.settings import data_dir, home_dir

    try:
        defs = catalog.load_definitions(definitions, option="--definitions")
        sources = tuple(dict.fromkeys(s for n in defs.datasets for s in catalog.required_sources(defs.definition(n), defs)))
        data, home = data_dir(sources=sources), home_dir()
        out = []
        for name in defs.datasets:
            state = catalog.status(name, defs, data, home)
            entry = {"name": name, "source": defs.datasets[name]["source"], "status": state,
                     "path": str(catalog.dataset_dir(name, home))}
            m = catalog.read_manifest(name, home)  # None when missing or unreadable: no counts shown
            if m is not None and catalog.valid_counts(m.get("counts")):
                entry["counts"] = m["counts"]
                entry["inputs_sha256"] = m.get("inputs_sha256")
            out.append(entry)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"data": str(data), "home": str(home), "datasets": out})
        return
    typer.echo(f"data: {data}\nhome: {home}\n")
    for e in out:
        typer.echo(f"{e['name']} ({e['source']}): {e['status']}")
        c = e.get("counts")
        if not c:
            continue
        typer.echo(f"  {c['documents']:,d} documents, {c['queries']:,d} queries, {c['qrels']:,d} judgments")
        typer.echo(f"  {'query_type':12s} {'train':>6s} {'dev':>6s} {'test':>6s} {'total':>6s}")
        for t, by in c["by_type_split"].items():
            typer.echo(f"  {t:12s} {by.get('train', 0):6d} {by.get('dev', 0):6d} {by.get('test', 0):6d} {sum(by.values()):6d}")
        langs = ", ".join(f"{k} {v}" for k, v in c["by_language"].items())
        typer.echo(f"  languages: {langs}")
    if any(e["status"] != "current" for e in out):
        typer.echo("\nrun `workbench data build` to build what is missing or stale")
