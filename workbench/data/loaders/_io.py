"""Small file-reading helpers shared by the loaders: every failure becomes a DataError naming the path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.errors import DataError


def _unreadable(path: Path, exc: OSError) -> DataError:
    """The DataError for a corpus file that cannot be opened (missing, a folder, no permission, I/O error)."""
    if isinstance(exc, FileNotFoundError):
        return DataError(f"{path} is missing; check WORKBENCH_DATA points at a full copy of the corpora")
    if isinstance(exc, IsADirectoryError):
        return DataError(f"{path} is a folder, not a file; restore the file from its source")
    if isinstance(exc, PermissionError):
        return DataError(f"{path} cannot be read (permission denied); make it readable (chmod a+r)")
    return DataError(f"{path} cannot be read ({exc.strerror or exc}); restore the file from its source")


def read_json(path: Path) -> Any:
    """Parse a UTF-8 JSON file.

    Raises:
        DataError: the file is missing, a folder, unreadable, not UTF-8, or not valid
            JSON (e.g. truncated); the message names the path and the position.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _unreadable(path, exc) from exc
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
        DataError: missing, unreadable or non-UTF-8 file, unexpected prefix, or invalid
            JSON body (the message names the path).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _unreadable(path, exc) from exc
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


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ``string``, ``number``, ``boolean``, ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def str_map(obj: Any, path: Path, what: str) -> dict[str, str]:
    """Return ``obj`` if it is a JSON object of string values, else raise.

    Args:
        obj: the parsed file (or module body).
        path: the file it came from (named in the message).
        what: what the object maps, for the message (``"segment id → string"``).

    Raises:
        DataError: ``obj`` is not an object, or a value is not a string; the message
            names the path and the first offending key.
    """
    if not isinstance(obj, dict):
        raise DataError(f"{path} is not a JSON object of {what} (it holds a JSON {json_kind(obj)}); "
                        "restore the file from its source")
    for k, v in obj.items():
        if not isinstance(v, str):
            raise DataError(f"{path}: the value of key {k!r} is a JSON {json_kind(v)}, not a string "
                            f"(expected an object of {what}); restore the file from its source")
    return obj
