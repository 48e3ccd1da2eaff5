"""Who may see the dashboard: access tokens, and the rule for the address it binds.

* **Bind rule** (:func:`is_loopback`): served on a loopback address (``127.0.0.1``,
  ``::1``, ``localhost``) the dashboard needs no authentication — only this machine
  reaches it. On any other address (``0.0.0.0``, ``::``, a LAN address) ``workbench
  dashboard`` refuses to start unless tokens exist, and the app itself shows nothing but
  an error when it finds itself served that way without tokens (``streamlit run`` binds
  every interface unless told otherwise).
* **Tokens** (:class:`FileTokens`): ``workbench dashboard token add NAME`` prints a new
  random token once (:func:`secrets.token_urlsafe`, 256 bits) and stores only its sha256,
  with the name and the creation time, in ``<home>/dashboard/tokens.json`` — mode 0600,
  replaced atomically (:mod:`workbench.durable`). A token file that other users can read,
  or that belongs to another user, is refused, never trusted. When any token exists the
  app asks for one on every page and shows nothing else until it matches.
* **The check** (:func:`check_token`) compares the presented token's digest with every
  stored digest in constant time (:func:`hmac.compare_digest`). It reads from a list of
  :class:`TokenSource` objects (:func:`sources`: today the token file), so another source
  — rater tokens kept in PostgreSQL — can be added without touching the pages.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from workbench.errors import ConfigError

#: Token names: a letter or digit, then letters, digits, ``_ . -`` (at most 64).
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: How the command that creates a token is spelled in messages.
ADD_COMMAND = "workbench dashboard token add NAME"


@dataclass(frozen=True)
class TokenRecord:
    """One stored token: its name, the sha256 of the token (hex) and when it was created (UTC, ISO 8601)."""

    name: str
    sha256: str
    created: str


class TokenSource(Protocol):
    """Where valid tokens come from (the token file today; a database table later)."""

    def records(self) -> list[TokenRecord]:
        """Every valid token's record.

        Raises:
            ConfigError: the source cannot be trusted or read (names it and the fix).
        """
        ...


def digest(token: str) -> str:
    """The sha256 (hex) a token is stored and compared as."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def tokens_path(home: Path) -> Path:
    """``<home>/dashboard/tokens.json``."""
    return Path(home) / "dashboard" / "tokens.json"


class FileTokens:
    """The tokens of one workbench home, in :func:`tokens_path` (see the module docstring)."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self.path = tokens_path(self.home)

    def records(self) -> list[TokenRecord]:
        """The stored tokens (none when the file does not exist).

        Raises:
            ConfigError: the file is readable by other users, belongs to another user, or
                is damaged (names the file and the fix).
        """
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ConfigError(f"cannot read the dashboard token file {self.path} ({exc.strerror or exc}); "
                              "make it readable by this user") from None
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise ConfigError(f"the dashboard token file {self.path} belongs to another user (uid {st.st_uid}); "
                              f"remove it and add tokens again as this user with `{ADD_COMMAND}`")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ConfigError(f"the dashboard token file {self.path} can be read by other users "
                              f"(mode {stat.S_IMODE(st.st_mode):04o}); run `chmod 600 {self.path}`")
        try:
            body = json.loads(self.path.read_text(encoding="utf-8"))
            records = [TokenRecord(str(t["name"]), str(t["sha256"]), str(t.get("created", "")))
                       for t in body["tokens"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"the dashboard token file {self.path} is damaged ({type(exc).__name__}: {exc}); "
                              f"remove it and add tokens again with `{ADD_COMMAND}`") from None
        if any(not re.fullmatch(r"[0-9a-f]{64}", r.sha256) for r in records):
            raise ConfigError(f"the dashboard token file {self.path} holds a digest that is not a sha256; "
                              f"remove it and add tokens again with `{ADD_COMMAND}`")
        return records

    def _write(self, records: list[TokenRecord]) -> None:
        from workbench.durable import atomic_path, mkdirs, storage_error

        folder = mkdirs(self.path.parent)
        try:
            os.chmod(folder, 0o700)
        except OSError:
            pass  # a folder we cannot chmod still holds a 0600 file
        body = {"version": 1, "hash": "sha256",
                "tokens": [{"name": r.name, "sha256": r.sha256, "created": r.created} for r in records]}
        data = (json.dumps(body, indent=1) + "\n").encode("utf-8")
        with atomic_path(self.path, needed=len(data)) as tmp:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as exc:
                raise storage_error(exc, self.path) from None
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o600)

    def _locked(self):
        from workbench.locks import FileLock

        return FileLock(self.path.with_name("tokens.lock"), "the dashboard token file", timeout=30)

    def add(self, name: str) -> str:
        """Create a token called ``name``; returns the token (the only time it exists in clear).

        Raises:
            ConfigError: the name is not valid or already used, or the file cannot be trusted.
            StorageError: the file cannot be written (names the path and the fix).
            BusyError: another process kept the token file locked for 30 s.
        """
        if not NAME_RE.match(name or ""):
            raise ConfigError(f"token name {name!r} is not valid; use letters, digits, '_', '.', '-' "
                              "(starting with a letter or digit, at most 64)")
        with self._locked():
            records = self.records()
            if any(r.name == name for r in records):
                raise ConfigError(f"a dashboard token named {name!r} exists; revoke it first "
                                  f"(`workbench dashboard token revoke {name}`) or choose another name")
            token = secrets.token_urlsafe(32)
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self._write([*records, TokenRecord(name, digest(token), created)])
        return token

    def revoke(self, name: str) -> None:
        """Delete the token called ``name``; sessions that used it are refused from their next interaction.

        Raises:
            ConfigError: no token has that name (lists the names), or the file cannot be trusted.
            StorageError: the file cannot be written.
            BusyError: another process kept the token file locked for 30 s.
        """
        with self._locked():
            records = self.records()
            if not any(r.name == name for r in records):
                known = ", ".join(r.name for r in records) or "none"
                raise ConfigError(f"no dashboard token is named {name!r} (tokens: {known}); "
                                  "`workbench dashboard token list` shows them")
            self._write([r for r in records if r.name != name])


def sources(home: Path) -> list[TokenSource]:
    """The token sources of a home (today: its token file)."""
    return [FileTokens(home)]


def required(token_sources: Sequence[TokenSource]) -> bool:
    """Whether authentication is on: some source holds a token.

    Raises:
        ConfigError: a source cannot be trusted or read (the dashboard then shows nothing).
    """
    return any(src.records() for src in token_sources)


def check_token(presented: str | None, token_sources: Sequence[TokenSource]) -> str | None:
    """The name of the token ``presented`` matches, or None.

    Every stored digest is compared in constant time (:func:`hmac.compare_digest`), all of
    them whatever matched, so the time taken says nothing about the stored tokens.

    Raises:
        ConfigError: a source cannot be trusted or read.
    """
    if not presented or not isinstance(presented, str):
        return None
    d = digest(presented.strip())
    match = None
    for src in token_sources:
        for rec in src.records():
            if hmac.compare_digest(d, rec.sha256) and match is None:
                match = rec.name
    return match


def is_loopback(host: str | None) -> bool:
    """Whether serving on ``host`` is reachable from this machine only.

    ``None`` or ``""`` (Streamlit's default: every interface), ``0.0.0.0`` and ``::`` are
    not; a name is loopback when every address it resolves to is.
    """
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addrs = {info[4][0] for info in infos}
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)
