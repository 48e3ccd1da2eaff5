"""The one rule for names people type: raters, dashboard tokens.

A name is 1-64 characters: ASCII letters, digits, ``_ . @ -``, starting with a letter or a
digit. The whole string must match (:func:`re.fullmatch`): ``re.match`` with ``$`` accepts a
trailing newline, so ``"zed\\n"`` passed as ``zed`` and then printed identically to another name.
"""

from __future__ import annotations

import re

#: What a name may hold (matched against the whole string).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")

#: The rule in words, for error messages.
NAME_RULE = "1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit (no spaces or newlines)"


def is_name(name: object) -> bool:
    """True when ``name`` is a str that matches :data:`NAME_PATTERN` as a whole (a trailing newline fails)."""
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def name_error(what: str, name: object) -> str | None:
    """``None`` for a valid name, else the message naming ``what`` (e.g. ``"rater name"``), the name and the rule."""
    return None if is_name(name) else f"{what} {name!r} is not valid: use {NAME_RULE}"
