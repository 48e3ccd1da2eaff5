"""MkDocs hook: the CLI reference, rendered from the Typer app at build time.

A page holding the line ``<!-- workbench-cli-reference -->`` gets, in its place, every command of
``workbench.cli:app`` (the Click tree Typer builds): its usage line, its help text, its arguments and
options with their help and defaults, sub-command groups recursively. The reference therefore never
drifts from the code: a new option appears at the next ``mkdocs build``.

Only ``typer`` and ``pydantic`` (what ``workbench.cli`` imports at module level) are needed; the commands' heavy
imports are inside their functions, so the docs build does not install the project's dependencies.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

MARKER = "<!-- workbench-cli-reference -->"
ROOT = Path(__file__).resolve().parents[1]
#: Options every command has, left out of the tables.
SKIPPED_OPTIONS = {"help", "install_completion", "show_completion"}


def _load_command():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import typer.main

    from workbench.cli import app

    return typer.main.get_command(app)


def _text(text: object) -> str:
    """Help text as markdown: HTML-escaped outside its `code spans`, which escape themselves."""
    parts = str(text).split("`")
    return "`".join(html.escape(part, quote=False) if i % 2 == 0 else part for i, part in enumerate(parts))


def _cell(text: object, code: bool = False) -> str:
    """Text safe inside a markdown table cell (one line, no bare ``|``)."""
    out = " ".join(str(text).split())
    return (out if code else _text(out)).replace("|", "\\|")


def _param_rows(cmd, ctx) -> list[str]:
    """One table row per argument and option: what ``--help`` shows (names, metavar, help, default)."""
    rows = []
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False) or p.name in SKIPPED_OPTIONS or "--help" in getattr(p, "opts", ()):
            continue
        record = p.get_help_record(ctx)
        if record is None:  # plain Click arguments have no help record
            record = (p.human_readable_name, "")
        names, help_ = record
        kind = "argument" if p.param_type_name == "argument" else "option"
        if getattr(p, "required", False):
            kind += ", required"
        rows.append(f"| `{_cell(names, code=True)}` | {kind} | {_cell(help_)} |")
    return rows


def _render(cmd, path: list[str], parent_ctx, level: int) -> list[str]:
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent_ctx)
    title = " ".join(path)
    out = [f"{'#' * min(level, 6)} `{title}`", ""]
    help_text = (cmd.help or cmd.short_help or "").strip()
    if help_text:
        out += [_text(help_text.split("\f", 1)[0]), ""]
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    out += ["```text", f"{title} {usage}".rstrip(), "```", ""]
    rows = _param_rows(cmd, ctx)
    if rows:
        out += ["| name | kind | what it does |", "|---|---|---|", *rows, ""]
    if hasattr(cmd, "commands"):  # a group (Typer may vendor its own Click: no isinstance)
        subs = [(n, c) for n, c in sorted(cmd.commands.items()) if not c.hidden]
        if subs:
            out += ["Commands: " + ", ".join(f"`{n}`" for n, _ in subs) + ".", ""]
        for name, sub in subs:
            out += _render(sub, [*path, name], ctx, level + 1)
    return out


def render_cli_reference() -> str:
    """The whole command tree as markdown (top-level commands are level-2 headings)."""
    cmd = _load_command()
    return "\n".join(_render(cmd, ["workbench"], None, 2))


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - mkdocs' hook signature
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_cli_reference())


if __name__ == "__main__":  # python docs/hooks.py: print the reference
    print(render_cli_reference())
