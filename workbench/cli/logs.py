"""`workbench logs`: real users' traffic, as UBI logs (issue #43)."""

from __future__ import annotations

from pathlib import Path

import typer

from workbench.cli._shared import _fail, _log, app, echo_json, json_option, secho
from workbench.errors import WorkbenchError

logs_app = typer.Typer(help="Users' traffic as UBI logs: import what `serve --ubi-log` or OpenSearch's UBI wrote.",
                       no_args_is_help=True)
app.add_typer(logs_app, name="logs")


@logs_app.command("import")
def logs_import(
    name: str = typer.Argument(..., help="The log set to write (replaced whole): <home>/logs/NAME."),
    paths: list[Path] = typer.Argument(..., help="UBI JSON-lines files or folders of them (gzipped or rotated too)."),
    as_json: bool = json_option("the import report"),
) -> None:
    """Read UBI queries and events (the workbench's own logs, or an export of OpenSearch's ubi_queries and
    ubi_events indexes) into a log set, and say what was read and what was skipped and why.

    Example: workbench logs import prod-week49 /var/log/workbench-ubi/ --json
    """
    from workbench.names import name_error
    from workbench.settings import home_dir
    from workbench.traffic.importer import log_dir, read_logs, write_log_set

    try:
        problem = name_error("log set name", name)
        if problem:
            raise WorkbenchError(problem)
        home = home_dir()
        queries, events, report = read_logs(paths, name, log=_log)
        if not queries and not events:
            raise WorkbenchError(f"nothing to import from {', '.join(map(str, paths))}: no line is a UBI query or "
                                 f"event ({report.as_dict()['skipped_total']} skipped: "
                                 f"{', '.join(report.skipped) or 'the files are empty'})")
        folder = write_log_set(log_dir(home, name), queries, events, report)
    except (WorkbenchError, OSError) as exc:
        _fail(exc)
    body = report.as_dict()
    if as_json:
        echo_json({**body, "folder": str(folder)})
        return
    secho(f"log set {name}: {report.queries:,} queries and {report.events:,} events from {len(report.files)} file(s), "
          f"{report.lines:,} lines ({report.first} to {report.last}); {report.clients:,} clients, "
          f"{report.sessions:,} sessions", bold=True)
    if report.actions:
        typer.echo("  actions: " + ", ".join(f"{a} {n:,}" for a, n in sorted(report.actions.items())))
    if report.events_without_query:
        typer.echo(f"  {report.events_without_query:,} events name a query the import does not hold (kept)")
    for reason, entry in body["skipped"].items():
        typer.echo(f"  skipped {entry['count']:,}: {reason} (e.g. {', '.join(entry['examples'])})")
    typer.echo(f"  written to {folder}")
