"""Reading the workbench's TOML files (experiments, studies, gate files) with one set of errors."""

from __future__ import annotations

import tomllib
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
