"""The ``workbench`` command.

Exit codes: 0 success, 1 a check failed, 2 usage, configuration or data error (a
one-line message names the file or setting and the fix; a build that fails leaves the
previous build of that dataset in place).
"""

import os
import sys

import typer

from workbench.cli._shared import _fail, app, secho  # noqa: F401  (tests use _fail and app)

# the command groups, in the order of `workbench --help`; each registers itself on `app`
# isort: off
from workbench.cli import (  # noqa: F401
    data, ref, services, judge, notebooks, evaluate, tune, export, gate, dashboard, kinds, serve, search, reranker, logs,
)
# isort: on


def _flowed(text: str) -> str:
    """``text`` with the line breaks inside each paragraph joined (paragraphs stay apart)."""
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in text.split("\n\n"))


def _flow_help(typer_app: typer.Typer) -> None:
    """Docstrings are wrapped at the source's width and Rich keeps their line breaks, so ``--help`` broke
    lines mid-sentence: each paragraph of a command's and a group's help is joined into one line here, and
    wraps at the terminal's width."""
    import inspect

    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = _flowed(inspect.getdoc(info.callback) or "")
    for group in typer_app.registered_groups:
        sub = group.typer_instance
        if sub is not None:
            if isinstance(sub.info.help, str):
                sub.info.help = _flowed(sub.info.help)
            _flow_help(sub)


_flow_help(app)


def _terminate(signum, _frame) -> None:
    """SIGTERM / SIGHUP end a command the way Ctrl-C does: ``finally`` blocks and exit handlers
    run, so the embedded server this process started is stopped and temporary files are removed."""
    import signal

    signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
    raise SystemExit(128 + signum)


def main() -> None:  # pragma: no cover - console entry (tests run it as ``python -m workbench.cli``)
    """The ``workbench`` console entry: signal handling, then the command; a file-system error no
    command translated ends as one line naming the path and the fix (exit 2), never a traceback."""
    import signal

    from workbench._infra.durable import storage_error

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    try:
        app()
    except BrokenPipeError:  # `workbench search ... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except OSError as exc:
        msg = str(storage_error(exc, exc.filename))
        secho(f"error: {msg}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None

