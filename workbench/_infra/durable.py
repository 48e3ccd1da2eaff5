"""Writing the workbench's files so that a crash, a full disk or a read-only folder never leaves half a file.

Every file the workbench writes under its home (dataset builds, cache entries, manifests,
study reports, gate reports, service state) goes through one of two disciplines:

* **replace atomically** (:func:`atomic_path`, :func:`atomic_write_bytes`,
  :func:`atomic_write_text`, :func:`atomic_write_json`): the content goes to a temporary
  file in the same folder, is flushed with ``fsync``, then renamed over the target
  (``rename(2)`` is atomic on POSIX file systems) and the folder is ``fsync``-ed. A reader
  sees the old file or the new one, never a mix; a crash leaves at most a ``.tmp-*``
  file, which the next write of that folder does not mind and :func:`remove_temporaries`
  clears;
* **append-only with recovery** (:func:`repair_jsonl_tail`): a log of one JSON object per
  line (the Optuna study journal) whose last line was cut by a crash or a full disk is
  truncated back to its last complete line before it is opened again, and the caller
  reports what was dropped.

A damaged file that a cache can rebuild is moved aside (:func:`quarantine`), never
deleted silently and never trusted.

``OSError`` from the file system becomes :class:`~workbench.errors.StorageError` through
:func:`storage_error`, whose one-line message names the path, the free and the needed
space (disk full), or the permission problem, and the fix.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workbench.errors import StorageError

#: Prefix of every temporary file :func:`atomic_path` makes (cleared by :func:`remove_temporaries`).
TMP_PREFIX = ".tmp-"

_HOME_FIX = "or set WORKBENCH_HOME to a writable folder on a disk with room"


def human_size(n: float | None) -> str:
    """A byte count for people: ``"512 B"``, ``"1.5 MB"`` (powers of 1024); ``"?"`` for None."""
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover


def free_bytes(path: Path) -> int | None:
    """Bytes free to an unprivileged writer on the file system holding ``path`` (its nearest existing folder); None if unknown."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def storage_error(exc: OSError, path: Path | str | None, *, needed: int | None = None, action: str = "write") -> StorageError:
    """A :class:`StorageError` for ``exc`` raised while ``action``-ing ``path``; one line naming the fix.

    Args:
        exc: the ``OSError`` the file system raised.
        path: the file or folder being written (or read); None when unknown (the message then
            names neither a path nor the free space).
        needed: bytes the write needed, when known (said in a disk-full message).
        action: a verb for the message (``write``, ``create``, ``read``).

    Returns:
        The error to raise (``raise storage_error(exc, path) from None``).
    """
    code = getattr(exc, "errno", None)
    if path is None:  # the file system did not say which file (e.g. an error deep inside a library)
        whats: dict[int | None, str] = {
            errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EROFS: "read-only file system",
            errno.EACCES: "permission denied", errno.EPERM: "operation not permitted"}
        what = whats.get(code)
        if what:
            return StorageError(f"cannot {action} a file of the workbench ({what}); free space or fix permissions, "
                                f"{_HOME_FIX}, and run the command again")
        return StorageError(f"cannot {action} a file of the workbench: {exc.strerror or exc}")
    path = Path(path)
    if code in (errno.ENOSPC, errno.EDQUOT):
        free = free_bytes(path)
        need = f", about {human_size(needed)} needed" if needed else ""
        return StorageError(f"disk full: cannot {action} {path} ({human_size(free)} free{need}); free space on that disk "
                            f"{_HOME_FIX}; nothing half-written was kept")
    if code == errno.EROFS:
        return StorageError(f"cannot {action} {path}: the file system is read-only; remount it read-write {_HOME_FIX}")
    if code in (errno.EACCES, errno.EPERM):
        return StorageError(f"cannot {action} {path}: permission denied; give this user write access to it "
                            f"(chmod/chown) {_HOME_FIX}")
    if code == errno.ENOTDIR:
        return StorageError(f"cannot {action} {path}: a part of the path is a file, not a folder; move that file "
                            f"away {_HOME_FIX}")
    if code == errno.EISDIR:
        return StorageError(f"cannot {action} {path}: it is a folder; give a file path")
    return StorageError(f"cannot {action} {path}: {exc.strerror or exc}")


def fsync_dir(folder: Path) -> None:
    """``fsync`` a folder so that a rename or a new file in it survives a power loss (best effort)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def swap_folder(tmp: Path, dest: Path, old: Path) -> None:
    """Put the finished folder ``tmp`` in place of ``dest``, the one atomic-folder step of the dataset builder
    and the model writer: the previous ``dest`` (if any) is renamed to ``old``, ``tmp`` renamed to ``dest``, the
    parent ``fsync``-ed, then ``old`` removed. Both renames stay on one file system (``tmp`` and ``old`` sit
    beside ``dest``), so a reader sees the previous folder or the new one, never a mix; a crash between the
    two renames leaves ``old`` and no ``dest``, which the caller's recovery puts back.

    Raises:
        OSError: a rename failed; the previous ``dest`` is back in place (and ``tmp`` is left to the caller).
    """
    if dest.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.rename(dest, old)
        try:
            os.rename(tmp, dest)
        except BaseException:
            try:
                os.rename(old, dest)
            except OSError:
                pass
            raise
        fsync_dir(dest.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, dest)
        fsync_dir(dest.parent)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mkdirs(folder: Path) -> Path:
    """``mkdir -p`` with a :class:`StorageError` naming the folder and the fix; returns the folder."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:  # a file stands where the folder should be
        raise storage_error(OSError(errno.ENOTDIR, "Not a directory"), folder, action="create") from exc
    except OSError as exc:
        raise storage_error(exc, folder, action="create") from None
    return folder


@contextmanager
def atomic_path(path: Path | str, *, suffix: str = "", needed: int | None = None, mode: int = 0o666) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; on a clean exit it replaces ``path`` atomically.

    Use it for writers that take a path (``write_trec_run(tmp, ...)``, a zip, pandas)::

        with atomic_path(target, suffix=".gz") as tmp:
            write_trec_run(tmp, run)

    On success the temporary file is ``fsync``-ed, renamed over ``path`` and the folder
    ``fsync``-ed. On any exception the temporary file is removed and the exception
    re-raised (an ``OSError`` as :class:`StorageError`); ``path`` is then unchanged.

    Args:
        path: the file to create or replace (its folder is created when missing).
        suffix: ending of the temporary name (writers that choose a format by suffix).
        needed: bytes the write needs, when known (said in a disk-full message).
        mode: permission bits of the new file (0o600 for secrets: private before any byte is
            written); the temporary file is created here, exclusively and never through a link,
            and the writer opens it by name.

    Raises:
        StorageError: the folder cannot be created or written, the disk is full, or
            the rename fails (names the path and the fix).
    """
    path = Path(path)
    mkdirs(path.parent)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}.{time.monotonic_ns() % 10**9}{suffix}")
    try:  # made here, exclusively and not through a link: a name planted in advance is refused
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode))
        if mode & 0o077 == 0:
            os.chmod(tmp, mode)  # private from the first byte, whatever the umask
    except OSError as exc:
        raise storage_error(exc, path, needed=needed) from None
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise storage_error(exc, path, needed=needed) from None
    except BaseException:
        _unlink_quietly(tmp)
        raise
    fsync_dir(path.parent)


def _unlink_quietly(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_path`); returns ``path``.

    Raises:
        StorageError: as :func:`atomic_path`.
    """
    path = Path(path)
    with atomic_path(path, needed=len(data)) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
    return path


def plain_file_problem(path: Path | str) -> str | None:
    """Why ``path`` may not be opened as a file of the home, or None (it is a regular file, or absent).

    A symbolic link (followed, a cache's quarantine renamed the link's target outside the home and a journal
    wrote there, as root: issue #41), a hard link, a device, a FIFO or a socket are refused; the text names it.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be inspected ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link (to {os.readlink(path)}); it is not followed: remove the link"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file (a folder, a device, a FIFO or a socket); remove it"
    if st.st_nlink != 1:
        return f"{path} is a hard link ({st.st_nlink} names for one file); it is not written through: remove it"
    return None


def atomic_write_text(path: Path | str, text: str, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``text`` atomically (see :func:`atomic_path`); returns ``path``."""
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: Path | str, obj: Any, **dumps: Any) -> Path:
    """Replace ``path`` with strict JSON of ``obj`` (:func:`workbench._infra.jsonout.dumps`: an undefined number
    is ``null``) and a newline, atomically; returns ``path``.

    Defaults: ``ensure_ascii=False``, ``indent=1``, ``default=str``.
    """
    from workbench._infra.jsonout import dumps as strict_dumps

    opts = {"ensure_ascii": False, "indent": 1, "default": str, **dumps}
    return atomic_write_text(path, strict_dumps(obj, **opts) + "\n")


def remove_temporaries(folder: Path, older_than_s: float = 3600.0) -> int:
    """Remove :func:`atomic_path` temporaries in ``folder`` older than ``older_than_s`` seconds
    (left by a killed process); returns how many. A younger one may belong to a live writer."""
    n = 0
    now = time.time()
    try:
        entries = list(Path(folder).glob(f"{TMP_PREFIX}*"))
    except OSError:
        return 0
    for p in entries:
        try:
            if p.is_file() and now - p.stat().st_mtime > older_than_s:
                p.unlink()
                n += 1
        except OSError:
            pass
    return n


def quarantine(path: Path | str, reason: str, log: Callable[[str], None] | None = None) -> Path | None:
    """Move a damaged file aside to ``<name>.damaged-<UTC time>`` and say so; returns the new path.

    The file is kept for inspection (and is never read again by the workbench). When it
    cannot be moved (a read-only folder) it is left in place and None is returned; the
    caller then treats it as missing all the same.

    Args:
        path: the damaged file.
        reason: what is wrong with it (one line, for the message).
        log: where to say it (default: a ``warnings.warn``).
    """
    import warnings

    path = Path(path)
    target = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}")
    aside: Path | None = target
    try:
        os.replace(path, target)
        fsync_dir(path.parent)
        msg = f"{path} is damaged ({reason}); moved aside to {target}, it will be rebuilt"
    except OSError as exc:
        aside = None
        msg = f"{path} is damaged ({reason}) and cannot be moved aside ({exc.strerror or exc}); it is ignored"
    (log or (lambda m: warnings.warn(m, stacklevel=3)))(msg)
    return aside


def repair_jsonl_tail(path: Path | str) -> tuple[int, str]:
    """Repair the end of an append-only JSON-lines file that a write was cut short in.

    A process killed (or a disk filling up) in the middle of an append leaves a last line
    without its newline; every later append would glue onto it and make the file
    unreadable. Only that can be repaired, and only it is touched:

    * a last line without newline that is a whole JSON object (only the newline was lost)
      gets its newline back — nothing is dropped;
    * any other last line without newline is cut off, and the cut bytes are kept beside
      the file (``<name>.cut-<UTC time>``) for inspection.

    A line that ends with its newline is never dropped, even if it is not JSON: that is
    damage, not a cut write, and the reader of the file must refuse it with its line number.

    Args:
        path: the log (nothing happens when it does not exist or ends with a newline).

    Returns:
        ``(bytes dropped, the dropped text's first 80 characters)``; ``(0, "")`` when nothing was dropped.

    Raises:
        StorageError: the file cannot be read, written or truncated (names the fix).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0, ""
    except OSError as exc:
        raise storage_error(exc, path, action="read") from None
    if size == 0:
        return 0, ""
    try:
        with open(path, "rb+") as fh:
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return 0, ""
            start = _last_line_start(fh, size)
            fh.seek(start)
            tail = fh.read(size - start)
            try:
                whole = isinstance(json.loads(tail), dict)
            except ValueError:
                whole = False
            if whole:  # only the newline was lost
                fh.seek(size)
                fh.write(b"\n")
                fh.flush()
                os.fsync(fh.fileno())
                return 0, ""
            aside = path.with_name(f"{path.name}.cut-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}")
            with open(aside, "wb") as out:
                out.write(tail)
                out.flush()
                os.fsync(out.fileno())
            fh.truncate(start)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise storage_error(exc, path) from None
    fsync_dir(path.parent)
    return size - start, tail[:80].decode("utf-8", "replace")


def _last_line_start(fh, end: int) -> int:
    """Offset where the line ending at ``end`` (exclusive; it may end in a newline) starts."""
    pos = end - 1  # skip the line's own newline
    chunk = 4096
    while pos > 0:
        lo = max(0, pos - chunk)
        fh.seek(lo)
        buf = fh.read(pos - lo)
        i = buf.rfind(b"\n")
        if i >= 0:
            return lo + i + 1
        pos = lo
    return 0


def copy_atomic(src: Path, dst: Path) -> Path:
    """Copy ``src`` to ``dst`` atomically (see :func:`atomic_path`); returns ``dst``."""
    size = None
    try:
        size = Path(src).stat().st_size
    except OSError:
        pass
    with atomic_path(dst, needed=size) as tmp:
        shutil.copyfile(src, tmp)
    return Path(dst)


_STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR)

#: Texts by which libraries that wrap the file system's errors (SQLite, SQLAlchemy, MLflow) say ENOSPC / EROFS.
_WRAPPED_ERRNO = (("database or disk is full", errno.ENOSPC), ("no space left on device", errno.ENOSPC),
                  ("disk is full", errno.ENOSPC), ("read-only file system", errno.EROFS),
                  ("readonly database", errno.EROFS))


def storage_error_in(exc: BaseException, path: Path | str, action: str = "write") -> StorageError | None:
    """The :func:`storage_error` hidden in an exception a library raised, or None when it is not about storage.

    Libraries over the file system (SQLite, SQLAlchemy, MLflow) wrap ``ENOSPC`` / ``EROFS``
    in their own exceptions; this walks ``exc`` and its causes for an ``OSError`` with an
    ``errno``, then for the texts they use ("database or disk is full", "attempt to write
    a readonly database", ...), so the caller can say "disk full" with the path and the fix.

    Args:
        exc: the exception caught.
        path: the file or folder being written, named in the message (an ``OSError``'s own
            ``filename`` wins when it has one).
        action: a verb for the message.
    """
    seen: set[int] = set()
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in chain:
        if isinstance(e, OSError) and e.errno in _STORAGE_ERRNOS:
            # a failed copy names its source as filename and its destination as filename2
            return storage_error(e, getattr(e, "filename2", None) or e.filename or path, action=action)
    for e in chain:
        text = str(e).lower()
        for needle, code in _WRAPPED_ERRNO:
            if needle in text:
                if code == errno.EROFS and not read_only_fs(Path(path)):
                    code = errno.EACCES  # "readonly database" on a writable disk: the file's permissions
                return storage_error(OSError(code, os.strerror(code)), path, action=action)
    return None


def read_only_fs(path: Path | str) -> bool:
    """Whether the file system holding ``path`` (its nearest existing folder) is mounted read-only."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except OSError:
        return False
