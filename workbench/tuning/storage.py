"""Where a study lives, and what survives a fault.

:func:`storage_for` resolves ``--storage`` (the study folder's journal, ``memory``, ``journal:PATH``
or PostgreSQL with heartbeats); :func:`open_journal` repairs a journal's cut last record under an
``flock`` and appends whole records or nothing; :func:`storage_failure` turns a file-system error
met while a study runs into a :class:`~workbench.errors.StorageError` naming the path and the space
needed; :func:`trial_lock` is the lock under which every process of a study counts its trials and
creates the next (so ``--trials N`` is N trials in all). :func:`study_dir` and :func:`outputs_dir` are
the study's folders.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from workbench._infra.durable import mkdirs, repair_jsonl_tail, storage_error
from workbench.errors import ConfigError, StorageError
from workbench.tuning.space import Study

#: PostgreSQL storage: seconds between the heartbeats a running trial records, and how long a
#: trial may go without one before any process of the study marks it failed (its process is
#: gone, on whatever machine it ran).
PG_HEARTBEAT_S = 60
PG_GRACE_S = 300


#: What a study's outputs take when none were written yet (``plots.html`` carries plotly.js).
OUTPUTS_BYTES = 5 * 2**20
#: The way out of a study folder that cannot be written.
_ELSEWHERE = "or tune with --storage memory (nothing is kept) or --storage journal:PATH on a writable disk"


def study_dir(home: Path, name: str) -> Path:
    """``<home>/studies/<name>``: journal, report, plots, export."""
    return Path(home) / "studies" / name


def outputs_dir(home: Path, name: str, storage: str | None) -> Path:
    """``latest/`` for the default journal; ``latest-memory/`` or ``latest-<hash of the storage>/`` otherwise,
    so a quick in-memory run never overwrites the report of a stored study."""
    import hashlib

    spec = (storage or "journal").strip()
    if spec == "journal":
        return study_dir(home, name) / "latest"
    if spec == "memory":
        return study_dir(home, name) / "latest-memory"
    return study_dir(home, name) / f"latest-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


def masked_storage(spec: str) -> str:
    """A storage spec with any password in a URL replaced by ``***`` (it goes into report.json)."""
    import re

    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", spec)


def storage_for(study: Study, home: Path, storage: str | None, *, create: bool = True,
                log: Callable[[str], None] = lambda _m: None):
    """Optuna storage: ``None``/``journal`` → the journal file of the study folder, ``memory``,
    ``journal:PATH``, or a ``postgresql://`` URL (``postgresql`` alone: the workbench's server).

    A journal is opened with :func:`open_journal` (a cut last record is dropped and reported
    through ``log``); PostgreSQL storage records a heartbeat of every running trial, so a
    trial whose process died on any machine is marked failed after ``PG_GRACE_S`` seconds.

    Args:
        create: with ``False`` a journal that does not exist yet is an error (``export``),
            and a journal that cannot be written is only read.
        log: where the repair of a journal is reported.

    Raises:
        ConfigError: an unknown spec, a journal path that is a folder or whose folder is
            missing, a PostgreSQL server that refuses the connection (names it and the fix).
        StorageError: the study folder cannot be created or written (a read-only home, a full
            disk), or the journal is damaged before its last record (names the path and the fix).
    """
    import warnings

    import optuna

    spec = (storage or "journal").strip()
    if spec == "memory":
        return optuna.storages.InMemoryStorage()
    if spec == "journal" or spec.startswith("journal:"):
        path = cast(Path, journal_path(study, home, spec))  # a journal spec: never None
        if spec == "journal":
            if create:
                try:
                    mkdirs(path.parent)
                except StorageError as exc:
                    raise StorageError(f"{exc}; {_ELSEWHERE}") from None
        else:
            if path.is_dir():
                raise ConfigError(f"--storage {spec}: {path} is a folder; give a file path for the journal")
            if not path.parent.is_dir():
                raise ConfigError(f"--storage {spec}: folder {path.parent} does not exist; create it first")
        if not create and not path.is_file():
            raise ConfigError(f"no study journal at {path}; run `workbench tune {study.path}` first "
                              "(with the same --storage)")
        return open_journal(path, create=create, log=log)
    if spec == "postgresql" or spec.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        url = spec
        if spec == "postgresql":
            from workbench.engines import pg_client as pg

            url = pg.server_dsn(home)
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeat_interval
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True},
                                                  heartbeat_interval=PG_HEARTBEAT_S, grace_period=PG_GRACE_S)
        except Exception as exc:  # sqlalchemy OperationalError and friends
            from workbench.engines.pg_client import redact_dsn

            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot use PostgreSQL study storage {redact_dsn(spec)}: {first}; check the URL "
                              "and that the server runs, or use --storage journal") from None
    raise ConfigError(f"storage {spec!r} must be memory, journal, journal:PATH, postgresql (the workbench's server) "
                      "or a postgresql:// URL")


def journal_path(study: Study, home: Path, storage: str | None) -> Path | None:
    """The journal file of a ``journal`` or ``journal:PATH`` storage spec (``None`` for other storages).

    Raises:
        ConfigError: ``journal:`` without a path.
    """
    spec = (storage or "journal").strip()
    if spec == "journal":
        return study_dir(home, study.name) / "journal.log"
    if spec.startswith("journal:"):
        raw = spec.partition(":")[2].strip()
        if not raw:
            raise ConfigError("--storage journal:PATH needs a file path, e.g. journal:/tmp/study.log")
        return Path(raw).expanduser()
    return None


def open_journal(path: Path, *, create: bool = True, log: Callable[[str], None] = lambda _m: None):
    """Optuna's journal storage on ``path``, with the journal's tail repaired first.

    Under Optuna's own journal lock (the one every append takes), a last record cut by a
    crash or a full disk is dropped (:func:`workbench._infra.durable.repair_jsonl_tail`) and said in
    one line through ``log``; every append afterwards writes whole records or nothing
    (:func:`_append_whole`). A record damaged before the last one cannot be repaired that way
    and is an error. A journal that cannot be written (``create=False`` on a read-only
    folder or a full disk, for ``export``) is read as it is: Optuna skips a cut last record
    when reading.

    Args:
        path: the journal file (created when missing and ``create``).
        create: ``tune`` (the journal will be written) or ``export`` (only read).
        log: where the repair is reported.

    Raises:
        StorageError: the journal is a link or not a regular file (never followed), the folder cannot be written
            (read-only, full: names it and the fix),
            or the journal is damaged before its last record (names the file, the line, and
            the fix: move it aside, or ``--storage`` another journal).
    """
    import optuna

    from workbench._infra.durable import plain_file_problem

    path = Path(path)
    problem = plain_file_problem(path)
    if problem is not None:  # a link planted in the home would have the journal written wherever it points
        raise StorageError(f"the study journal is not opened: {problem}; {_ELSEWHERE}")
    lock = _journal_lock_type()(path)
    locked = False
    if create or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        try:
            locked = lock.acquire()  # also the probe that the folder can be written
        except OSError as exc:
            if create:
                raise StorageError(f"{storage_error(exc, path.parent, action='write in')}; {_ELSEWHERE}") from None
    if locked:
        try:
            dropped, _text = repair_jsonl_tail(path)
        finally:
            _release(lock)
        if dropped:
            log(f"study journal {path}: dropped a cut last record ({dropped} bytes) left by an interrupted write; "
                f"the complete trials are kept, the cut bytes beside it ({path.name}.cut-*)")
    try:
        return optuna.storages.JournalStorage(_journal_backend_type()(path, lock))
    except OSError as exc:
        raise storage_error(exc, path, action="open") from None
    except Exception as exc:  # noqa: BLE001 - Optuna replays bad records with ValueError, KeyError, ...
        raise _damaged(path, exc) from None


@functools.lru_cache(maxsize=1)
def _journal_lock_type():
    """Optuna's journal lock interface on an ``flock`` of ``<journal>.flock`` (0600, never through a link).

    Optuna's own file locks (a symbolic link or a lock file) outlive a process killed while it
    holds them, and the next process waits 30 s before it breaks them; the kernel drops an
    ``flock`` with its holder, so a killed ``tune`` costs the next one nothing. Every workbench
    process on a journal takes this lock; a plain Optuna process using its own lock would not
    be excluded (do not mix them on one journal).
    """
    import fcntl

    class FlockJournalLock:  # Optuna's journal takes any object with acquire() and release()
        def __init__(self, journal: Path) -> None:
            self._path = Path(f"{journal}.flock")
            self._fd: int | None = None

        def acquire(self) -> bool:
            """Raises OSError (the caller names the folder and the fix) when the lock file cannot be made."""
            if self._fd is None:
                flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                self._fd = os.open(self._path, flags, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            return True

        def release(self) -> None:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

        def close(self) -> None:
            """Close the lock file (which lets go of the lock, if held)."""
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    return FlockJournalLock


def trial_lock(study: Study, home: Path, storage: str | None, store: Any) -> Any:
    """The lock every process of a study takes to count its trials and create the next one, so that
    ``--trials N`` is N trials however many processes share the study
    (:func:`workbench.tuning.study.run_trials`). It has ``acquire()``, ``release()`` and ``close()``.

    * journal: an ``flock`` of ``<journal>.trials.flock`` (0600; the kernel drops it with its holder,
      so a killed process never leaves it held), apart from the journal's own lock;
    * PostgreSQL: a session advisory lock keyed by the study's name (the first 8 bytes of the sha256
      of ``workbench study trials <name>``), on a connection of its own: processes on any machine;
    * memory: one process, so a plain thread lock.

    Args:
        store: what :func:`storage_for` returned for ``storage``.

    Raises:
        StorageError: the journal's lock file cannot be created (names the folder and the fix).
    """
    import threading

    journal = journal_path(study, home, storage)
    if journal is not None:
        return _TrialFlock(_journal_lock_type()(Path(f"{journal}.trials")), journal)
    if hasattr(store, "engine"):  # RDBStorage
        return _AdvisoryLock(store.engine, study.name)
    lock = threading.Lock()
    return _TrialFlock(lock, None)


class _TrialFlock:
    """An ``flock`` (or a thread lock) with ``close()``; a lock file that cannot be made is a StorageError."""

    def __init__(self, lock: Any, journal: Path | None) -> None:
        self._lock, self._journal = lock, journal

    def acquire(self) -> bool:
        try:
            return self._lock.acquire()
        except OSError as exc:  # only a journal's lock file can fail to open
            folder = self._journal.parent if self._journal is not None else Path(".")
            raise StorageError(f"{storage_error(exc, folder, action='write in')}; {_ELSEWHERE}") from None

    def release(self) -> None:
        self._lock.release()

    def close(self) -> None:
        close = getattr(self._lock, "close", None)
        if close is not None:
            close()


class _AdvisoryLock:
    """A PostgreSQL session advisory lock on a connection of its own (autocommit)."""

    def __init__(self, engine: Any, name: str) -> None:
        import hashlib

        self._engine = engine
        self._key = int.from_bytes(hashlib.sha256(f"workbench study trials {name}".encode()).digest()[:8], "big",
                                   signed=True)
        self._conn: Any = None

    def acquire(self) -> bool:
        from sqlalchemy import text

        if self._conn is None:
            self._conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        self._conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": self._key})
        return True

    def release(self) -> None:
        from sqlalchemy import text

        self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._key})

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()  # the server drops the session's advisory locks with it
            self._conn = None


def _release(lock) -> None:
    try:
        lock.release()
    except RuntimeError:  # another process broke a lock it took for stale (Optuna's 30 s grace)
        pass


def _damaged(path: Path, exc: Exception) -> StorageError:
    """The error for a journal that Optuna cannot replay, naming the first bad line."""
    bad, total = None, 0
    try:
        with open(path, "rb") as fh:
            for total, line in enumerate(fh, 1):
                if bad is None and (not line.endswith(b"\n") or not _json_record(line)):
                    bad = total
    except OSError:
        pass
    what = (f"at line {bad} of {total} (not a complete JSON record)" if bad else
            f"({type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:120]})")
    return StorageError(f"study journal {path} is damaged {what}, not only at its end, so it cannot be repaired; "
                        f"move it aside (mv {path} {path}.damaged) to start the study afresh, or give --storage "
                        "another journal:PATH or a postgresql:// URL")


def _json_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` and ``fsync`` it; when a write or the ``fsync`` fails (a full
    disk, an I/O error) the file is truncated back to where it was, so it never ends in a cut
    record. The caller holds the journal lock.

    Raises:
        OSError: the write failed (``filename`` is ``path``); the file is as it was (or, if even
            the truncation failed, :func:`open_journal` drops the cut record on the next open).
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def _journal_backend_type():
    """Optuna's ``JournalFileBackend`` whose appends are whole records or nothing (:func:`_append_whole`)."""
    from optuna.storages.journal import JournalFileBackend

    class WholeRecordJournal(JournalFileBackend):
        """A study journal file: Optuna's reader and lock, appends through :func:`_append_whole`."""

        def __init__(self, path: Path, lock) -> None:
            super().__init__(str(path), lock_obj=lock)
            self.wb_path, self.wb_lock = Path(path), lock

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            data = ("\n".join(json.dumps(rec, separators=(",", ":")) for rec in logs) + "\n").encode("utf-8")
            self.wb_lock.acquire()
            try:
                _append_whole(self.wb_path, data)
            finally:
                _release(self.wb_lock)

    return WholeRecordJournal


def storage_failure(exc: BaseException, study: Study, home: Path, storage: str | None, ost,
                    n_target: int) -> StorageError | None:
    """A :class:`StorageError` for the file-system error ``exc`` is, or that an ``AssertionError``
    hides (Optuna's ``_run_trial`` asserts on the trial's state in a ``finally`` when the write
    that ends a trial fails, so the ``OSError`` is only its context); ``None`` for anything else."""
    import errno

    journal = journal_path(study, home, storage)
    seen: set[int] = set()
    e: BaseException | None = exc
    while isinstance(e, (OSError, AssertionError)) and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError):
            path = e.filename or journal or home
            needed = None
            if e.errno in (errno.ENOSPC, errno.EDQUOT) and journal is not None and Path(path) == journal:
                needed = _space_needed(journal, ost, n_target, outputs_dir(home, study.name, storage))
            msg = str(storage_error(e, path, needed=needed))
            if journal is not None:
                msg += "; the complete trials are kept: run the same command to resume"
            return StorageError(msg)
        e = e.__cause__ or e.__context__
    return None


def _space_needed(journal: Path, ost, n_target: int, outputs: Path) -> int | None:
    """Bytes the rest of the study needs: its journal's bytes per trial times the trials still
    wanted, and its outputs (as large as the last ones, or ``OUTPUTS_BYTES``)."""
    from optuna.trial import TrialState

    try:
        size = journal.stat().st_size
        trials = ost.get_trials(deepcopy=False) if ost is not None else []
        out = sum(p.stat().st_size for p in outputs.iterdir() if p.is_file()) if outputs.is_dir() else 0
    except Exception:  # noqa: BLE001 - an estimate for a message; never the reason it fails
        return None
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    per_trial = size / max(len(trials), 1)
    return int(per_trial * max(n_target - complete, 1)) + (out or OUTPUTS_BYTES)
