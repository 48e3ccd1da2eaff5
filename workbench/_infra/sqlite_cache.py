"""SQLite cache files that never fail a command: the fault handling the embedding cache and the pair-score
cache share (:class:`workbench.embedding.embedders.CachedEmbedder`, :class:`workbench.reranking.scorers.PairScoreCache`).

A subclass declares its table (:attr:`SqliteCache.TABLE`, :attr:`~SqliteCache.COLUMNS`,
:attr:`~SqliteCache.DDL`) and reads and writes through :meth:`SqliteCache._db`. The file is
in WAL mode (readers never wait for a writer; writers take the lock up front with
``BEGIN IMMEDIATE`` and wait up to :attr:`SqliteCache.BUSY_WAIT_S`, 60 s). SQLite answers some lock
conflicts at once, without waiting (switching a new file to WAL while another process holds its write
lock, a lock upgrade that could deadlock): those are retried with a backoff until the same 60 s are up.
Opening checks its structure (``PRAGMA quick_check``). A damaged file (``database disk image is malformed``, ``file is not a
database``, a failed check, a stored value a subclass finds impossible and raises
:class:`Damaged` for) is moved aside to ``<name>.damaged-<time>`` with its ``-wal`` /
``-shm`` / ``-journal`` files (:func:`workbench._infra.durable.quarantine`), said once, and
replaced by an empty one. A file that cannot be written (a full disk, a read-only file
system, no permission) is said once (the path, the free space, the fix) and read where
it can be: through a read-only connection, else as an immutable file. Whatever happens,
the caller's work is returned: the cache is only a cache.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench._infra import durable
from workbench.errors import DataError, StorageError


def _stderr(msg: str) -> None:
    import sys

    print(f"[workbench] {msg}", file=sys.stderr, flush=True)


class Damaged(Exception):
    """The cache file is damaged (a failed integrity check, an impossible stored value)."""


#: SQLite result codes (``sqlite3.Error.sqlite_errorname`` prefixes) → how the cache treats them.
_DAMAGED_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_FULL_CODES = ("SQLITE_FULL",)
_BUSY_CODES = ("SQLITE_BUSY", "SQLITE_LOCKED")
_UNWRITABLE_CODES = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_PERM", "SQLITE_AUTH")


def _sqlite_kind(exc: BaseException) -> str:
    """``damaged``, ``full``, ``busy``, ``unwritable`` or ``other`` for an error of the cache file."""
    if isinstance(exc, Damaged):
        return "damaged"
    name = getattr(exc, "sqlite_errorname", None) or ""
    msg = str(exc).lower()
    if name.startswith(_DAMAGED_CODES) or "malformed" in msg or "not a database" in msg:
        return "damaged"
    if name.startswith(_FULL_CODES) or "disk is full" in msg:
        return "full"
    if name.startswith(_BUSY_CODES) or "is locked" in msg:
        return "busy"
    if name.startswith(_UNWRITABLE_CODES) or "readonly" in msg or "unable to open" in msg or "disk i/o" in msg:
        return "unwritable"
    return "other"


#: Sidecar files of SQLite (moved aside with a damaged cache, never applied to a new one).
_SIDECARS = ("-wal", "-shm", "-journal")



class SqliteCache:
    """The base of a cache file (see the module docstring).

    Args:
        cache_path: the SQLite file (created with its folder when missing).
        label: what the cache is called in messages (``"embedding cache"``).
        without: what happens when the cache is off (``"every text is embedded"``).
        unkept: what happens when it cannot be written (``"vectors it lacks are computed and not kept"``).
        log: where faults are said, once each (default: stderr).

    Attributes:
        unavailable: why the cache is not used at all, or None.
        read_only: the file is read but not written.
    """

    #: The table, its columns in order, and the statement that creates it (subclasses set them).
    TABLE = ""
    COLUMNS: tuple[str, ...] = ()
    DDL = ""
    #: How long a call waits for another process's lock before it goes without the cache, in seconds.
    BUSY_WAIT_S = 60.0

    def __init__(self, cache_path: Path | str, *, label: str, without: str, unkept: str,
                 log: Callable[[str], None] | None = None) -> None:
        self.label, self.without, self.unkept = label, without, unkept
        self.log = log or _stderr
        self.unavailable: str | None = None
        self.read_only = False
        #: how to connect after a fault that forbids writing: None (normally), "mode=ro", or
        #: "immutable=1" (no locks and no -shm file: a read-only file system, or a disk too full for the -shm)
        self._ro_mode: str | None = None
        self._ino: int | None = None
        self._quarantined = 0
        self._said: set[str] = set()
        path = Path(cache_path).expanduser()  # the folder resolved, the file itself never followed (a link)
        self.cache_path = path.parent.resolve() / path.name
        self._open()

    def _connect(self) -> sqlite3.Connection:
        """A connection in autocommit mode (writes open their own transaction); read-only after a fault."""
        try:
            self._ino = os.stat(self.cache_path).st_ino  # the file a fault will be about
        except OSError:
            self._ino = None
        if self._ro_mode:
            return sqlite3.connect(f"{self.cache_path.as_uri()}?{self._ro_mode}", uri=True,
                                   timeout=self.BUSY_WAIT_S, isolation_level=None)
        con = sqlite3.connect(self.cache_path, timeout=self.BUSY_WAIT_S, isolation_level=None)
        try:
            con.execute("PRAGMA synchronous=NORMAL")  # with WAL: consistent after a crash, fewer fsyncs
        except BaseException:
            con.close()
            raise
        return con

    def _setup(self, con: sqlite3.Connection) -> None:
        """WAL mode, the table (when writable), its layout and an integrity check."""
        if not self._ro_mode:
            if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # reading it takes no lock
                con.execute("PRAGMA journal_mode=WAL")
            con.execute(self.DDL)
        columns = [row[1] for row in con.execute(f"PRAGMA table_info({self.TABLE})")]
        if not columns and self._ro_mode:  # an empty cache that cannot be written: nothing to read either
            self.unavailable = f"the {self.label} {self.cache_path} is empty and cannot be written"
            return
        if columns != list(self.COLUMNS):
            raise DataError(f"{self.cache_path} has an `{self.TABLE}` table of another layout ({', '.join(columns)}); "
                            "delete the file (it is only a cache) and run again")
        problems = [row[0] for row in con.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise Damaged("; ".join(str(p) for p in problems)[:200])

    def _open(self) -> None:
        """Create or check the cache file; on a fault, decide how the cache is used (see the class)."""
        try:
            durable.mkdirs(self.cache_path.parent)
        except StorageError as exc:
            self._off(f"the {self.label} cannot be used ({exc}); {self.without}")
            return
        problem = durable.plain_file_problem(self.cache_path)
        if problem is not None:  # never followed or replaced: its target may be anything outside the home
            self._off(f"the {self.label} is not used: {problem}; {self.without}")
            return
        self._db(self._setup, write=False)

    def _db(self, fn: Callable[[sqlite3.Connection], Any], *, write: bool) -> Any:
        """``fn(connection)`` with the cache's faults handled (see the class); None when the cache was skipped."""
        started, pause, attempts = time.monotonic(), 0.01, 0
        while attempts < 4:
            attempts += 1
            if self.unavailable is not None or (write and self.read_only):
                return None
            try:
                con = self._connect()
                try:
                    return fn(con)
                finally:
                    con.close()
            except (sqlite3.Error, Damaged) as exc:
                kind = _sqlite_kind(exc)
                if kind == "damaged":
                    if self._ro_mode == "immutable=1":  # read without locks: the damage may be a torn read
                        self._off(f"the {self.label} {self.cache_path} cannot be read safely ({exc}); "
                                  f"{self.without}")
                        return None
                    if not self._quarantine(exc):
                        return None
                    self._db(self._setup, write=False)  # a new, empty cache
                    continue
                if kind == "other" and "no such table" in str(exc).lower() and not self._ro_mode:
                    self._db(self._setup, write=False)  # another process has just replaced a damaged file
                    continue
                if kind == "busy":
                    waited = time.monotonic() - started
                    if waited < self.BUSY_WAIT_S:  # answered at once, not after the busy timeout: wait and retry
                        attempts -= 1
                        time.sleep(min(pause, self.BUSY_WAIT_S - waited))
                        pause = min(pause * 2, 0.5)
                        continue
                    self._say("busy", f"the {self.label} {self.cache_path} stayed locked by another process "
                                      f"for {waited:.1f} s; this call goes without it (its values are computed)")
                    return None
                if kind in ("full", "unwritable"):
                    if not self.cache_path.exists():
                        self._off(f"the {self.label} cannot be created: {self._storage_text(exc, kind)}; "
                                  f"{self.without}")
                        return None
                    self.read_only = True
                    self._say("unwritable", f"the {self.label} cannot be written: {self._storage_text(exc, kind)}; "
                                            f"{self.unkept}")
                    if write:
                        return None
                    # a read (or the check) failed too: read through a read-only connection, then as an
                    # immutable file (needs no -shm file, which a full disk or a read-only folder cannot hold)
                    if self._ro_mode is None and not durable.read_only_fs(self.cache_path):
                        self._ro_mode = "mode=ro"
                        continue
                    if self._ro_mode != "immutable=1":
                        self._ro_mode = "immutable=1"
                        continue
                self._off(f"the {self.label} {self.cache_path} cannot be read ({exc}); {self.without} "
                          "(delete the file, it is only a cache, if this persists)")
                return None
        return None

    def _insert(self, rows: list[tuple]) -> None:
        """``INSERT OR REPLACE`` ``rows`` into :attr:`TABLE` in one transaction (the write lock taken up front:
        no lock upgrade, no deadlock); faults as in :meth:`_db` (a cache that cannot be written keeps nothing)."""
        marks = ", ".join("?" * len(self.COLUMNS))

        def write(con: sqlite3.Connection) -> None:
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany(f"INSERT OR REPLACE INTO {self.TABLE} VALUES ({marks})", rows)
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise

        if rows:
            self._db(write, write=True)

    def _storage_text(self, exc: BaseException, kind: str) -> str:
        """A one-line :func:`workbench._infra.durable.storage_error` message for an SQLite fault of the cache file."""
        free = durable.free_bytes(self.cache_path)
        if kind == "full" or (free is not None and free < (1 << 20)):  # SQLite says "disk I/O error" for a full -shm
            code = errno.ENOSPC
        elif durable.read_only_fs(self.cache_path):
            code = errno.EROFS
        elif not os.access(self.cache_path if self.cache_path.exists() else self.cache_path.parent, os.W_OK):
            code = errno.EACCES
        else:
            return f"cannot write {self.cache_path}: {exc}"
        return str(durable.storage_error(OSError(code, os.strerror(code)), self.cache_path))

    def _quarantine(self, exc: BaseException) -> bool:
        """Move the damaged file (and its sidecars) aside; False when that cannot be done (the cache is then off)."""
        self._quarantined += 1
        if self._quarantined > 2:  # a new, empty file cannot be damaged twice over: something else is wrong
            self._off(f"the {self.label} {self.cache_path} keeps failing its checks ({exc}); {self.without} "
                      "(delete the file, it is only a cache)")
            return False
        try:
            now = os.stat(self.cache_path).st_ino
        except OSError:
            now = None
        if now is None or (self._ino is not None and now != self._ino):
            return True  # another process moved it aside already; use the new file
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        aside = durable.quarantine(self.cache_path, reason, log=self.log)
        if aside is None:
            self._off(f"the damaged {self.label} {self.cache_path} cannot be moved aside; {self.without}")
            return False
        for suffix in _SIDECARS:
            side = self.cache_path.with_name(self.cache_path.name + suffix)
            try:
                os.replace(side, aside.with_name(aside.name + suffix))
            except FileNotFoundError:
                pass
            except OSError:
                try:  # a stale journal must never be applied to the new file
                    side.unlink()
                except OSError:
                    pass
        return True

    def _say(self, what: str, msg: str) -> None:
        if what not in self._said:
            self._said.add(what)
            self.log(msg)

    def _off(self, msg: str) -> None:
        self.unavailable = msg
        self._say("off", msg)
