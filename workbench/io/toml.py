"""Reading the workbench's TOML files (experiments, studies, gate files) with one set of errors."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError


def read_toml(path: Path, what: str, hint: str = "") -> dict[str, Any]:
    """The parsed TOML table of ``path``.

    Args:
        path: the file.
        what: what the file is, for messages (``experiment``, ``study``, ``gate``).
        hint: appended to the not-found message (where to find examples).

    Raises:
        ConfigError: missing, a folder, unreadable, not UTF-8 or not valid TOML; the message names the path.
    """
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} file {path} not found" + (f"; {hint}" if hint else "")) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a folder; give the {what} TOML file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


#: Keys that only one kind of the workbench's TOML files has, and the command that reads that kind.
_KIND_MARKS = {
    "experiment": (("configs", "embedders", "rerankers", "ann_check"), "workbench eval FILE"),
    "study": (("space", "objective", "trials"), "workbench tune FILE"),
    "gate": (("expected",), "workbench gate FILE"),
}


def kind_hint(keys: Iterable[str], expected: str) -> str:
    """The tail of an "unknown key" message when a file of another kind was given (an experiment to
    ``workbench tune``): ``"; it looks like an experiment file: `workbench eval FILE` reads it"``, else ``""``.

    Args:
        keys: the file's top-level keys.
        expected: the kind the command reads: ``"experiment"``, ``"study"`` or ``"gate"``.
    """
    keys = set(keys)
    for kind, (marks, command) in _KIND_MARKS.items():
        if kind != expected and keys.intersection(marks):
            return f"; it looks like {'an' if kind[0] in 'aeiou' else 'a'} {kind} file: `{command}` reads it"
    return ""
