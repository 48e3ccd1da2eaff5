"""Inter-process locks on the workbench home: two commands on one home queue, they never collide.

A :class:`FileLock` is an exclusive ``flock(2)`` on a lock file. The kernel releases it
when its holder exits for any reason (SIGKILL included), so a lock is never left behind
by a dead process. While it holds the lock, the holder writes who it is (pid, command
line, start time) into the lock file, so a second process that has to wait says for whom
and since when, and waits its turn (the queue is the kernel's: waiters get the lock one
after another).

The locks the workbench takes (one rule each, declared here and read everywhere):

* :func:`dataset_lock` — ``<home>/datasets/.<name>.lock``, held while a dataset is
  built: a second ``workbench data build`` of that dataset waits, then finds it current
  (or, with ``--force``, builds it again after the first has finished);
* :func:`server_lock` — ``<home>/services/<name>.lock``, held while the embedded
  PostgreSQL or the local OpenSearch node of that home is started, checked or stopped.

Database objects (index tables, the read-only role) are serialised inside PostgreSQL by
an advisory lock (:mod:`workbench.engines.pg_index`); study journals by Optuna's own file lock.

A lock is reentrant within a process (the same path taken twice nests).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from workbench._infra.durable import mkdirs, storage_error
from workbench.errors import BusyError

_held: dict[Path, list] = {}  # path -> [file object, depth]
_guard = threading.Lock()


def _holder_text(fh) -> str:
    info: object = {}
    for _ in range(10):  # the holder writes who it is just after it takes the lock
        try:
            fh.seek(0)
            info = json.loads(fh.read() or b"{}")
        except (ValueError, OSError):
            info = {}
        if isinstance(info, dict) and "pid" in info:
            break
        time.sleep(0.05)
    if not isinstance(info, dict) or "pid" not in info:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    return f"pid {info['pid']} ({info.get('command', '?')}, since {since})"


class FileLock:
    """An exclusive inter-process lock on ``path`` (see the module docstring).

    Args:
        path: the lock file (created with its folder when missing).
        what: what the lock protects, for messages (``dataset gita``).
        log: where to say that this process waits, and for whom (default: stderr).
        timeout: seconds to wait at most (None: as long as it takes).

    Raises (on entering):
        BusyError: ``timeout`` passed while another process held the lock.
        StorageError: the lock file cannot be created (a read-only home).
    """

    def __init__(self, path: Path, what: str, *, log: Callable[[str], None] | None = None,
                 timeout: float | None = None):
        self.path = Path(path).absolute()
        self.what = what
        self.log = log or (lambda m: print(f"[workbench] {m}", file=sys.stderr, flush=True))
        self.timeout = timeout

    def __enter__(self) -> FileLock:
        with _guard:
            held = _held.get(self.path)
            if held is not None:
                held[1] += 1
                return self
        mkdirs(self.path.parent)
        fh = open_private(self.path)
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.log(f"waiting for {_holder_text(fh)} to finish with {self.what} ({self.path}); this job goes on "
                     "by itself when it does (Ctrl-C gives up)")
            t0 = time.monotonic()
            self._wait(fh)
            self.log(f"{self.what} is free after {time.monotonic() - t0:.0f} s of waiting; going on")
        except BaseException:
            fh.close()
            raise
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({"pid": os.getpid(), "command": " ".join(_short_argv()),
                                 "since": time.time()}).encode("utf-8"))
        except OSError:
            pass  # who holds it is a courtesy; the lock itself is held
        with _guard:
            _held[self.path] = [fh, 1]
        return self

    def _wait(self, fh) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    if deadline is not None and time.monotonic() > deadline:
                        raise BusyError(f"{self.what} is still held by {_holder_text(fh)} after {self.timeout:.0f} s "
                                        f"({self.path}); wait for it to finish, or stop it") from None
                    time.sleep(0.2)
        except BaseException:
            fh.close()
            raise

    def __exit__(self, *exc) -> None:
        with _guard:
            held = _held.get(self.path)
            if held is None:
                return
            held[1] -= 1
            if held[1] > 0:
                return
            del _held[self.path]
        fh = held[0]
        try:
            fh.seek(0)
            fh.truncate()
        except OSError:
            pass
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except OSError:
            pass
        finally:
            try:
                fh.close()
            except OSError:
                pass

    @property
    def held(self) -> bool:
        """Whether this process holds the lock now."""
        return self.path in _held


def open_private(path: Path):
    """Open (creating it, mode 0600) a lock file of the home as an unbuffered binary file.

    Never through a symbolic link (``O_NOFOLLOW``), only a regular file this user owns, and
    made 0600 if it was not: another user can neither redirect the write onto a file of this
    one, nor open the lock to hold it.

    Raises:
        StorageError: the file cannot be created or opened (names it and the fix), or it is a
            link, not a regular file, or another user's.
    """
    import errno
    import stat

    from workbench.errors import StorageError

    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the name is a symbolic link
            raise StorageError(f"{path} is a symbolic link; the workbench does not write through links in its home: "
                               "remove it") from None
        raise storage_error(exc, path, action="create the lock file") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        raise StorageError(f"{path} is not a plain file of yours (another user's, a device or a hard link); "
                           "remove it and run the command again")
    if stat.S_IMODE(st.st_mode) != 0o600:
        os.fchmod(fd, 0o600)
    return os.fdopen(fd, "r+b", buffering=0)  # unbuffered: a failed write leaves nothing to flush later


def _short_argv() -> list[str]:
    argv = [Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]]
    return [a if len(a) <= 60 else a[:59] + "…" for a in argv][:8]


def dataset_lock(home: Path, name: str, log: Callable[[str], None] | None = None) -> FileLock:
    """The lock held while dataset ``name`` of ``home`` is built (see the module docstring)."""
    return FileLock(Path(home) / "datasets" / f".{name}.lock", f"dataset {name}", log=log)


def server_lock(home: Path, name: str, log: Callable[[str], None] | None = None,
                timeout: float | None = None) -> FileLock:
    """The lock held while the ``name`` service of ``home`` is started, checked or stopped."""
    return FileLock(Path(home) / "services" / f"{name}.lock", f"the {name} service of {home}", log=log,
                    timeout=timeout)
