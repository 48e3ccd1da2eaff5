"""What every command module shares: the root Typer app, ``--version``, colour that honours
``NO_COLOR``, the one-line error exit and the log line."""

from __future__ import annotations

import os
from typing import Any, Optional

import typer

app = typer.Typer(help="Evaluation and relevance-tuning workbench for hybrid retrieval over scripture corpora.",
                  no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False)


def version() -> str:
    """The installed distribution's version (``scripture-workbench``), or ``"unknown"`` outside an install."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        return _version("scripture-workbench")
    except PackageNotFoundError:
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"workbench {version()}")
        raise typer.Exit(0)


@app.callback()
def _root(show_version: Optional[bool] = typer.Option(
        None, "--version", callback=_show_version, is_eager=True, help="Print the version and exit.")) -> None:
    """Evaluation and relevance-tuning workbench for hybrid retrieval over scripture corpora."""


def choices(*values: str, argument: bool = False) -> dict[str, Any]:
    """The keyword arguments of a ``typer.Option`` (or, with ``argument``, a ``typer.Argument``) whose value is
    one of ``values``: the choices shown in ``--help`` (``[a|b|c]`` for an option; ``a|b|c`` for an argument,
    which the usage line brackets itself) and offered by shell completion. The value itself is checked by
    the library, whose message names the choices."""

    def complete(incomplete: str) -> list[str]:
        return [v for v in values if v.startswith(incomplete)]

    shown = "|".join(values)
    return {"metavar": shown if argument else f"[{shown}]", "autocompletion": complete}


def qrels_option(default: str) -> Any:
    """The ``--qrels`` option every command that scores runs takes (one wording, its choices shown in
    ``--help``); ``default`` says where the layer comes from when it is not given. The value is checked
    by :func:`workbench.judging.layers.check_layer` (its message names the choices)."""
    return typer.Option(None, "--qrels", **choices("built", "human", "merged", "implicit"),
                        help="Qrels layer: built (corpus-derived labels), human (scholars' final grades), merged "
                        "(human over built) or implicit (grades from readers' clicks: workbench logs judge); "
                        f"default: {default}.")


def json_option(what: str, shape: str = "one JSON object") -> Any:
    """The ``--json`` option of a command that reports results; ``what`` names what is printed, ``shape`` its
    JSON form (``"a JSON list"`` for a command that prints one entry per input)."""
    return typer.Option(False, "--json", help=f"Print {what} as {shape} on stdout (logs stay on stderr).")


def echo_json(body: Any) -> None:
    """Print ``body`` as indented strict JSON (non-JSON values as their ``str``, an undefined number as ``null``:
    :func:`workbench._infra.jsonout.dumps`), the ``--json`` output of every command."""
    from workbench._infra.jsonout import dumps

    typer.echo(dumps(body, indent=1, ensure_ascii=False, default=str))


def no_color() -> bool:
    """True when the ``NO_COLOR`` environment variable is set and not empty (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


def secho(message: Any = None, *, fg: Any = None, bold: Optional[bool] = None, err: bool = False, **kw: Any) -> None:
    """:func:`typer.secho` without colour or bold under ``NO_COLOR``; colours are also dropped where
    the stream is not a terminal (Click's own rule)."""
    if no_color():
        typer.echo(message, err=err, **kw)
    else:
        typer.secho(message, fg=fg, bold=bold, err=err, **kw)


def _fail(exc: Exception) -> None:
    """Print ``error: <message>`` on one line to stderr and exit 2 (no traceback)."""
    msg = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    secho(f"error: {msg}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def _log(msg: str) -> None:
    """One ``[workbench] …`` line on stderr (blue on a terminal)."""
    secho(f"[workbench] {msg}", err=True, fg=typer.colors.BLUE)
