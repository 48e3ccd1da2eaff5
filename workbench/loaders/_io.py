"""Small file-reading helpers shared by the loaders: every failure becomes a DataError naming the path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.errors import DataError


def read_json(path: Path) -> Any:
    """Parse a UTF-8 JSON file.

    Raises:
        DataError: the file is missing, not UTF-8, or not valid JSON (e.g. truncated);
            the message names the path and the position.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise DataError(f"{path} is missing; check WORKBENCH_DATA points at a full copy of the corpora") from exc
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 ({exc}); restore the file from its source") from exc
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "the file may be truncated: restore it from its source"
        ) from exc


def read_js_object(path: Path, prefix: str, suffix: str = "") -> Any:
    """Parse an ES module of the form ``export const NAME=<json>`` (ms-dpd's ``.mjs`` files).

    Raises:
        DataError: missing file, unexpected prefix, or invalid JSON body.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(f"{path} is missing; check WORKBENCH_DATA points at a full copy of the corpora") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 ({exc}); restore the file from its source") from exc
    body = text.lstrip("\ufeff").lstrip()
    if not body.startswith(prefix):
        raise DataError(f"{path} does not start with {prefix!r}; it is not the ms-dpd module expected")
    body = body[len(prefix):].strip()
    if suffix and body.endswith(suffix):
        body = body[: -len(suffix)].strip()
    body = body.rstrip(";")
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path} holds invalid JSON after {prefix!r} (line {exc.lineno}: {exc.msg}); "
            "the file may be truncated: restore it from its source"
        ) from exc
