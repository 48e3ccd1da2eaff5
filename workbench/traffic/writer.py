"""JSON lines appended whole, rotated at a size, bounded on disk: the files of a UBI log.

Each record is one line written with one ``write`` to a file opened ``O_APPEND`` under a lock, so lines from the
threads of one server never interleave and a reader sees whole lines (a crash can tear only the last one, which
:mod:`workbench.traffic.importer` skips and counts). When a line would take a file past ``max_bytes`` the file is
rotated first: ``name.jsonl`` → ``name.jsonl.1`` → … → ``name.jsonl.{keep}``, the oldest dropped, so a stream
never holds more than ``(keep + 1) × max_bytes`` on disk. Files and the folder are private to the user (0600 and
0700): query texts are what readers typed.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from workbench._infra.jsonout import dumps

#: Default size at which a log file is rotated (bytes).
DEFAULT_MAX_BYTES = 64 * 2**20
#: Default number of rotated files kept per stream.
DEFAULT_KEEP = 4


class JsonlWriter:
    """Append JSON records to ``folder/name`` (module docstring).

    Args:
        path: the live file (``…/ubi_queries.jsonl``); its folder is created (0700).
        max_bytes: rotate before a line would take the file past this (>= 1024).
        keep: rotated files kept (>= 0; 0 keeps only the live file).

    Raises:
        ValueError: ``max_bytes`` or ``keep`` out of range.
        OSError: the folder or the file cannot be created.
    """

    def __init__(self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, keep: int = DEFAULT_KEEP) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1024:
            raise ValueError(f"max_bytes must be an integer >= 1024, got {max_bytes!r}")
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValueError(f"keep must be an integer >= 0, got {keep!r}")
        self.path, self.max_bytes, self.keep = Path(path), max_bytes, keep
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()
        self._fd = self._open()

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._size = os.fstat(fd).st_size
        return fd

    def write(self, record: dict[str, Any]) -> int:
        """Append ``record`` as one line (UTF-8, non-ASCII kept, a lone surrogate as ``?``, a non-finite number as
        null); returns the bytes written.

        Raises:
            OSError: the write failed (a full disk): nothing of the line is kept beyond what the OS wrote.
        """
        data = (dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")
        with self._lock:
            if self._size and self._size + len(data) > self.max_bytes:
                self._rotate()
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self._size += len(data)
        return len(data)

    def _rotate(self) -> None:
        os.close(self._fd)
        if self.keep == 0:
            self.path.unlink(missing_ok=True)
        else:
            Path(f"{self.path}.{self.keep}").unlink(missing_ok=True)
            for i in range(self.keep - 1, 0, -1):
                older = Path(f"{self.path}.{i}")
                if older.exists():
                    older.replace(f"{self.path}.{i + 1}")
            self.path.replace(f"{self.path}.1")
        self._fd = self._open()

    def files(self) -> list[Path]:
        """The stream's files on disk, oldest first (rotated ones, then the live file)."""
        rotated = [Path(f"{self.path}.{i}") for i in range(self.keep, 0, -1)]
        return [p for p in (*rotated, self.path) if p.exists()]

    def close(self) -> None:
        """Close the live file (idempotent)."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
