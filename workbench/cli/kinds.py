"""`workbench kinds`: the retriever and reranker kinds installed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from workbench.cli._shared import _fail, app, echo_json, json_option
from workbench.errors import WorkbenchError


@app.command("kinds")
def kinds_cmd(
    as_json: bool = json_option("each kind with its parameters", "a JSON list"),
) -> None:
    """List the registered retriever and reranker kinds, and the embedder kinds, with their parameters (type,
    default, range, meaning), read from each kind's declaration (built-in kinds and installed plug-ins alike)."""
    from workbench.embedding.embedders import EmbedderKinds
    from workbench.registry import describe_kind, reranker_kinds, retriever_kinds

    try:
        groups: dict[str, Mapping[str, Any]] = {
            "retriever": retriever_kinds(), "reranker": reranker_kinds(), "embedder": {"[embedders.NAME]": EmbedderKinds()}}
    except WorkbenchError as exc:
        _fail(exc)
    out = [{"group": g, "kind": name, "summary": k.summary, "module": type(k).__module__, "params": describe_kind(k)}
           for g, kinds in groups.items() for name, k in sorted(kinds.items())]
    if as_json:
        echo_json(out)
        return
    for entry in out:
        typer.echo(f"{entry['group']} kind {entry['kind']}  ({entry['module']})  {entry['summary']}")
        for r in entry["params"]:
            rng = f" [{r['constraint']}]" if r["constraint"] else ""
            variant = f"{r['variant']}: " if r["variant"] else ""
            typer.echo(f"    {variant}{r['param']}: {r['type']} = {r['default']}{rng}  {r['description']}")
        if not entry["params"]:
            typer.echo("    (no parameters)")
