"""Who may see the dashboard: access tokens, and the rule for the address it binds.

* **Bind rule** (:func:`is_loopback`, the rule of every port the workbench serves:
  :mod:`workbench.services.policy`): served on a loopback address (``127.0.0.1``,
  ``::1``, ``localhost``) the dashboard needs no authentication — only this machine
  reaches it (and its ``Host`` / ``Origin`` check keeps other sites' pages out:
  :class:`workbench.dashboard.serving.DashboardGuard`). On any other address (``0.0.0.0``, ``::``, a LAN address) ``workbench
  dashboard`` refuses to start unless tokens exist, and the app itself shows nothing but
  an error when it finds itself served that way without tokens (``streamlit run`` binds
  every interface unless told otherwise).
* **Tokens** (:class:`FileTokens`): ``workbench dashboard token add NAME`` prints a new
  random token once (:func:`secrets.token_urlsafe`, 256 bits) and stores only its sha256,
  with the name and the creation time, in ``<home>/dashboard/tokens.json`` — mode 0600,
  replaced atomically (:mod:`workbench._infra.durable`). A token file that other users can read,
  or that belongs to another user, is refused, never trusted. When any token exists the
  app asks for one on every page and shows nothing else until it matches.
* **The check** (:func:`check_token`) compares the presented token's digest with every
  stored digest in constant time (:func:`hmac.compare_digest`). It reads from a list of
  :class:`TokenSource` objects: :func:`sources` (the token file) for the engineer pages,
  :class:`RaterTokens` (the judgment store) for the judging pages.
* **Rater tokens** (:class:`RaterTokens`): ``workbench judge rater add NAME [--adjudicator]``
  prints one; the judgment store keeps its sha256 (:mod:`workbench.judging.store`). A rater
  token opens the judging pages only — Judge; for an adjudicator also Adjudicate and
  Agreement — and never the engineer pages (runs, configs, ranks and scores would unblind
  the rater): it is checked against :class:`RaterTokens` alone, and an access token never
  is, so an access token cannot judge either. A session signed in as a rater shows only the
  judging pages until the rater signs out.
* **Bind rule with raters** (:func:`token_kinds`): rater tokens count as tokens for the
  bind rule. Served beyond this machine with rater tokens but no access token, the
  dashboard starts and asks every visitor for a token: raters get the judging pages, and
  nobody gets the engineer pages until an access token exists. On loopback without access
  tokens the engineer pages stay open as before, whatever raters exist. The judgment store
  is looked at only where one exists (``WORKBENCH_PG_DSN``, or the embedded server's data
  in the home: :func:`~workbench.judging.store.store_exists`); looking never creates a server or a schema.
* **Judging sessions** (:class:`RaterSessions`): a rater who signs in gets an opaque random
  session id (:func:`secrets.token_urlsafe`, 256 bits) that the browser keeps in the address
  (``?s=``), so a reload keeps them signed in; the server maps it to the sha256 of their token
  with a sliding expiry (:data:`SESSION_TTL`, 12 hours without use). The token itself never
  goes back into the address. Every run checks that digest against the store's active raters
  again, so a revoked rater is signed out at their next click; a restart of the dashboard
  ends every session (they live in its memory only).
* **Blinding across dashboards** (#41): a rater signed in on ``workbench dashboard --judging-only``
  (port 8502) who opened the engineers' dashboard (8501, loopback, no tokens) in the same browser saw
  its pages. Two rules close it: the judging cookie of any port (:func:`other_judging_marks`) marks
  the browser on every dashboard of that host name; and while a judging-only dashboard of the home
  serves (:func:`hold_judging_only`, read by :func:`judging_dashboards`), the engineers' dashboard
  without an access token shows nothing but why and the fix (:func:`judging_dashboard_refusal`), so
  a browser that reaches it under another host name, which carries no cookie, sees nothing either.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from workbench.errors import ConfigError
from workbench.judging.store import RATER_ADD_COMMAND, JudgmentStore, store_exists
from workbench.names import name_error
from workbench.services.policy import is_loopback  # noqa: F401  (the bind rule's test: the served-port policy's)

#: How the command that creates a token is spelled in messages.
ADD_COMMAND = "workbench dashboard token add NAME"
#: How the command that creates a rater token is spelled in messages.


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
        from workbench._infra.durable import atomic_path, mkdirs

        folder = mkdirs(self.path.parent)
        try:
            os.chmod(folder, 0o700)
        except OSError:
            pass  # a folder we cannot chmod still holds a 0600 file
        body = {"version": 1, "hash": "sha256",
                "tokens": [{"name": r.name, "sha256": r.sha256, "created": r.created} for r in records]}
        data = (json.dumps(body, indent=1) + "\n").encode("utf-8")
        with atomic_path(self.path, needed=len(data), mode=0o600) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(data)

    def _locked(self):
        from workbench._infra.locks import FileLock

        return FileLock(self.path.with_name("tokens.lock"), "the dashboard token file", timeout=30)

    def add(self, name: str) -> str:
        """Create a token called ``name``; returns the token (the only time it exists in clear).

        Raises:
            ConfigError: the name is not valid or already used, or the file cannot be trusted.
            StorageError: the file cannot be written (names the path and the fix).
            BusyError: another process kept the token file locked for 30 s.
        """
        if (err := name_error("token name", name)) is not None:
            raise ConfigError(err)
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
    """The access-token sources of a home (its token file): what opens the engineer pages."""
    return [FileTokens(home)]


class RaterTokens:
    """The rater tokens of a judgment store (:meth:`~workbench.judging.store.JudgmentStore.rater_tokens`:
    active raters only, so a revoked rater is refused from their next interaction).

    After :meth:`records`, :attr:`raters` maps each name to its
    :class:`~workbench.judging.store.Rater` (role and shuffle seed), read in the same query.
    """

    def __init__(self, store):
        self.store = store
        self.raters: dict = {}

    def records(self) -> list[TokenRecord]:
        """Every active rater's token record.

        Raises:
            PgError: the store's server cannot be reached (names it and the fix).
        """
        rows = self.store.rater_tokens()
        self.raters = {r.name: r for r, _h, _c in rows}
        return [TokenRecord(r.name, h, created) for r, h, created in rows]


def check_rater(presented: str | None, source: RaterTokens):
    """The :class:`~workbench.judging.store.Rater` whose token ``presented`` is, or None
    (:func:`check_token` against ``source`` alone: constant time, every digest compared).

    Raises:
        PgError: the store's server cannot be reached.
    """
    name = check_token(presented, [source])
    return source.raters.get(name) if name else None


def check_rater_digest(d: str | None, source: RaterTokens):
    """:func:`check_rater` for a token's :func:`digest` (a judging session's): the active
    :class:`~workbench.judging.store.Rater` it belongs to, or None.

    Raises:
        PgError: the store's server cannot be reached.
    """
    name = check_digest(d, [source])
    return source.raters.get(name) if name else None


#: How long a judging session lasts without use, in seconds (each use moves the end on: sliding).
SESSION_TTL = 12 * 3600


class RaterSessions:
    """Judging sessions kept by the server: opaque id → the sha256 of the rater's token, with a
    sliding expiry (see the module docstring). Thread-safe (Streamlit runs each browser
    session in its own thread); in memory only.

    Args:
        ttl: seconds a session lasts without use (:data:`SESSION_TTL`).
        clock: a monotonic clock in seconds (tests pass their own).
    """

    def __init__(self, ttl: float = SESSION_TTL, clock=time.monotonic):
        import threading

        self.ttl = float(ttl)
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, tuple[str, float]] = {}  # id -> (token digest, expires at)

    def start(self, token_digest: str) -> str:
        """A new session for the token whose :func:`digest` this is; returns its id (URL-safe, 256 random bits).
        Sessions that expired are forgotten here."""
        sid = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            for old in [k for k, (_d, end) in self._sessions.items() if end <= now]:
                del self._sessions[old]
            self._sessions[sid] = (token_digest, now + self.ttl)
        return sid

    def lookup(self, sid: str | None) -> tuple[str | None, str]:
        """``(token digest, "")`` for a live session, its expiry moved ``ttl`` seconds on; else
        ``(None, why)`` with ``why`` ``"expired"`` (then forgotten) or ``"unknown"`` (never made here,
        ended, or made before the dashboard restarted)."""
        if not sid or not isinstance(sid, str):
            return None, "unknown"
        now = self._clock()
        with self._lock:
            held = self._sessions.get(sid)
            if held is None:
                return None, "unknown"
            if held[1] <= now:
                del self._sessions[sid]
                return None, "expired"
            self._sessions[sid] = (held[0], now + self.ttl)
            return held[0], ""

    def end(self, sid: str | None) -> None:
        """Forget a session (sign-out, or its rater was revoked); an unknown id is ignored."""
        with self._lock:
            self._sessions.pop(sid or "", None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


def token_kinds(home: Path, *, release: bool = False) -> set[str]:
    """Which kinds of token the home has: ``"access"`` (the token file) and ``"rater"`` (active
    raters in the judgment store, looked at only when :func:`~workbench.judging.store.store_exists`). With
    ``release``, the embedded server is let go after looking (a command that then hands over to
    another program; the dashboard's own process keeps it).

    Raises:
        ConfigError: the token file cannot be trusted.
        PgError: a store exists but its server cannot be reached.
    """
    from workbench.engines.pg_client import DSN_ENV

    kinds = {"access"} if required(sources(home)) else set()
    if store_exists(home):
        store = JudgmentStore.open(home, migrate=False, quiet=True)
        try:
            if store.rater_tokens():
                kinds.add("rater")
        finally:
            store.close()
            if release and not os.environ.get(DSN_ENV, "").strip():
                from workbench.services import postgres

                postgres.release(Path(home), log=lambda _m: None)
    return kinds


# ---------------------------------------------------------------- blinding across dashboards (#41)

#: The judging cookie's name before its port: ``wb_judging_8502`` marks a browser that signed in to judge on the
#: dashboard of port 8502 (a cookie is not bound to a port: the browser sends it to every port of that host name).
JUDGING_COOKIE_PREFIX = "wb_judging_"


def judging_cookie_name(port: int | str) -> str:
    """The judging cookie of the dashboard on ``port``: ``wb_judging_<port>``."""
    return f"{JUDGING_COOKIE_PREFIX}{port}"


def other_judging_marks(cookies, port: int | str) -> list[str]:
    """The ports of the *other* dashboards that marked this browser as a rater's: the ports of the non-empty
    ``wb_judging_<port>`` cookies in ``cookies`` (a name → value mapping, what the browser sent) but this
    dashboard's own, sorted. A browser with any is a rater's on every dashboard of that host name."""
    own = judging_cookie_name(port)
    marks = {str(name)[len(JUDGING_COOKIE_PREFIX):] for name, value in dict(cookies).items()
             if isinstance(name, str) and name.startswith(JUDGING_COOKIE_PREFIX) and name != own
             and isinstance(value, str) and value}
    return sorted(marks, key=lambda p: (len(p), p))


def judging_only_lock_path(home: Path, port: int) -> Path:
    """``<home>/dashboard/judging-only-<port>.lock``: held (``flock``) by a judging-only dashboard of the home while
    it serves."""
    return Path(home) / "dashboard" / f"judging-only-{int(port)}.lock"


def hold_judging_only(home: Path, port: int, host: str) -> int:
    """Record that a judging-only dashboard of ``home`` serves raters on ``host:port``: an exclusive ``flock`` on
    :func:`judging_only_lock_path`, whose file says where (JSON ``{"host", "port", "pid"}``). Returns the file
    descriptor, inheritable, so that the lock stays held by the Streamlit server this process becomes
    (``os.execv``); the kernel lets go of it when that server exits, however it ends.
    :func:`judging_dashboards` reads it.

    Raises:
        StorageError: the file cannot be made (a read-only home) or is a link or another user's.
        BusyError: another judging-only dashboard of the home holds that port's lock.
    """
    import fcntl

    from workbench._infra.durable import mkdirs
    from workbench._infra.locks import open_private
    from workbench.errors import BusyError

    path = judging_only_lock_path(home, port)
    folder = mkdirs(path.parent)
    try:
        os.chmod(folder, 0o700)
    except OSError:
        pass  # as FileTokens: a folder we cannot chmod still holds a 0600 file
    fh = open_private(path)
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise BusyError(f"a judging-only dashboard of this home already serves port {port} ({path}); stop it, or "
                        "pass another --port") from None
    fh.truncate(0)
    fh.write(json.dumps({"host": host, "port": int(port), "pid": os.getpid()}).encode("utf-8"))
    fd = os.dup(fh.fileno())  # the same open file (and lock), without the Python object that would close it
    fh.close()  # closing one descriptor of it keeps the flock: it belongs to the open file, held by ``fd``
    os.set_inheritable(fd, True)
    return fd


def judging_dashboards(home: Path) -> list[dict]:
    """The judging-only dashboards of ``home`` that serve now (:func:`hold_judging_only`: their lock is held),
    as ``{"host", "port", "pid"}`` dicts by port. A lock file left by a dashboard that ended is not one; a
    file that cannot be read counts as serving (with what is known), never as absent."""
    import fcntl

    out = []
    for path in sorted((Path(home) / "dashboard").glob("judging-only-*.lock")):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue  # gone meanwhile, or a link planted there: not a dashboard's lock
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held: a judging-only dashboard serves
                try:
                    info = json.loads(os.pread(fd, 4096, 0) or b"{}")
                except (OSError, ValueError):
                    info = {}
                port = path.stem.removeprefix("judging-only-")
                out.append({"host": str(info.get("host", "?")) if isinstance(info, dict) else "?",
                            "port": int(port) if port.isdigit() else port,
                            "pid": info.get("pid") if isinstance(info, dict) else None})
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return out


def judging_dashboard_refusal(serving: list[dict]) -> str:
    """What the engineers' dashboard (loopback, no access token) says instead of its pages while judging-only
    dashboards of its home serve raters (``serving``: :func:`judging_dashboards`)."""
    ports = ", ".join(str(d["port"]) for d in serving)
    return (f"A judging-only dashboard of this home serves raters (port {ports}), so this dashboard shows its pages "
            "only after sign-in: they show configs, ranks and other raters' grades, which would unblind a rater "
            "who opened this address in the same browser. Raters: judge on that dashboard's port. Engineers: create "
            f"an access token with `{ADD_COMMAND}` and sign in with it here.")


def off_loopback_refusal(host: str) -> str:
    """The one-line refusal of ``workbench dashboard --host HOST`` when the home has no token of either kind."""
    return (f"--host {host} would serve every result to the network without authentication; create an access "
            f"token first with `{ADD_COMMAND}` (raters' tokens from `{RATER_ADD_COMMAND}` count too, and open "
            "the judging pages only), or keep the default 127.0.0.1 behind an authenticating reverse proxy, see README")


def describe_tokens(kinds: set[str]) -> str:
    """What a served dashboard asks for, for the start-up line (``access token required``…)."""
    if "access" in kinds and "rater" in kinds:
        return "access token required; rater tokens open the judging pages"
    if "access" in kinds:
        return "access token required"
    if "rater" in kinds:
        return "rater token required: the judging pages only, no access token exists"
    return "this machine only"


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
    return check_digest(digest(presented.strip()), token_sources)


def check_digest(d: str | None, token_sources: Sequence[TokenSource]) -> str | None:
    """:func:`check_token` for a token already reduced to its :func:`digest` (what a
    :class:`RaterSessions` entry keeps): the name it matches, or None; constant time.

    Raises:
        ConfigError: a source cannot be trusted or read.
    """
    if not d or not isinstance(d, str):
        return None
    match = None
    for src in token_sources:
        for rec in src.records():
            if hmac.compare_digest(d, rec.sha256) and match is None:
                match = rec.name
    return match
