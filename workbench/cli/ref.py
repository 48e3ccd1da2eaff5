"""`workbench ref`: parse canonical references."""

from __future__ import annotations

from typing import Any, Optional

import typer

from workbench.cli._shared import _fail, app, echo_json, json_option
from workbench.errors import WorkbenchError
from workbench.text.refs import COLLECTIONS  # the --collection help names them (16 ms at start-up)

refs_app = typer.Typer(help="Parse canonical references.", no_args_is_help=True)
app.add_typer(refs_app, name="ref")


@refs_app.command("parse")
def ref_parse(
    reference: list[str] = typer.Argument(..., help="References such as 'BG 2.47', 'ШБ 5.5.3', 'M i 56', 'P1.56'."),
    collection: Optional[str] = typer.Option(None, help="Collection for bare CST notation: "
                                             f"{', '.join(COLLECTIONS)}."),
    as_json: bool = json_option("each reference's input, canonical form (null when unresolved) and reason",
                                                 "a JSON list"),
) -> None:
    """Parse references; unresolvable ones print the reason (exit 1 if any did not resolve, 2 on a bad --collection)."""
    from workbench.text import refs

    def shown(text: str, limit: int = 60) -> str:
        return text if len(text) <= limit else text[: limit - 1] + "…"

    if collection is not None:
        try:
            refs.parse("", collection=collection)
        except ValueError:
            _fail(WorkbenchError(f"unknown --collection {shown(collection)!r}; use one of {', '.join(COLLECTIONS)}"))
    results: list[dict[str, Any]] = []
    for r in reference:
        res = refs.parse(r, collection=collection)
        results.append({"input": shown(r), "canonical": res.ref.canonical() if res.ref is not None else None,
                        "reason": res.reason})
    if as_json:
        echo_json(results)
    else:
        for x in results:
            typer.echo(f"{x['input']!r:24s} -> {x['canonical'] or 'unresolved: ' + x['reason']}")
    if any(x["canonical"] is None for x in results):
        raise typer.Exit(1)
