"""The ``workbench`` command.

Exit codes: 0 success, 1 a check failed, 2 usage, configuration or data error (the
message names the file or setting and the fix; nothing is written on error).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from workbench.errors import WorkbenchError

app = typer.Typer(help="Evaluation and relevance-tuning workbench for hybrid retrieval over scripture corpora.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
data_app = typer.Typer(help="Build and list datasets and query sets.", no_args_is_help=True)
refs_app = typer.Typer(help="Parse canonical references.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(refs_app, name="ref")


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


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
    definitions: Optional[Path] = typer.Option(None, "--definitions", help="Dataset definitions TOML (default datasets/datasets.toml)."),
) -> None:
    """Build the datasets and query sets from WORKBENCH_DATA into WORKBENCH_HOME (skips what is current)."""
    from workbench import catalog
    from workbench.settings import data_dir, home_dir

    try:
        defs = catalog.load_definitions(definitions)
        names = catalog.build_order(defs, only)
        data, home = data_dir(), home_dir()
        steps = _Steps(len(names))
        rows = []
        try:
            for name in names:
                steps.name = name
                t0 = time.perf_counter()
                state = "current" if force is False and catalog.status(name, defs, data, home) == "current" else "built"
                manifest = catalog.build(name, defs, data, home, force=force, step=steps.step)
                rows.append((name, state, manifest["counts"], time.perf_counter() - t0))
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
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    definitions: Optional[Path] = typer.Option(None, "--definitions", help="Dataset definitions TOML."),
) -> None:
    """Show the defined datasets, whether each build is current, and counts per query type and split."""
    from workbench import catalog
    from workbench.settings import data_dir, home_dir

    try:
        defs = catalog.load_definitions(definitions)
        data, home = data_dir(), home_dir()
        out = []
        for name in defs.datasets:
            state = catalog.status(name, defs, data, home)
            entry = {"name": name, "source": defs.datasets[name]["source"], "status": state,
                     "path": str(catalog.dataset_dir(name, home))}
            mpath = catalog.dataset_dir(name, home) / "manifest.json"
            if mpath.is_file():
                m = json.loads(mpath.read_text(encoding="utf-8"))
                entry["counts"] = m["counts"]
                entry["inputs_sha256"] = m.get("inputs_sha256")
            out.append(entry)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps({"data": str(data), "home": str(home), "datasets": out}, ensure_ascii=False, indent=1))
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


@refs_app.command("parse")
def ref_parse(
    reference: list[str] = typer.Argument(..., help="References such as 'BG 2.47', 'ШБ 5.5.3', 'M i 56', 'P1.56'."),
    collection: Optional[str] = typer.Option(None, help="Collection for bare CST notation (M, D, S, Ps)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Parse references; unresolvable ones print the reason (exit 1 if any did not resolve)."""
    from workbench import refs

    results = []
    for r in reference:
        res = refs.parse(r, collection=collection)
        results.append({"input": r, "canonical": res.ref.canonical() if res else None, "reason": res.reason})
    if as_json:
        typer.echo(json.dumps(results, ensure_ascii=False, indent=1))
    else:
        for x in results:
            typer.echo(f"{x['input']!r:24s} -> {x['canonical'] or 'unresolved: ' + x['reason']}")
    if any(x["canonical"] is None for x in results):
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
