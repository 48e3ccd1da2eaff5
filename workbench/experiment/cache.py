"""The candidate cache: each lane's top-N per query for one engine setting, on disk.

An entry is keyed by the sha256 of everything that shapes the ranking: the corpus
(the dataset's ``documents.jsonl`` hash), the index (its key, for database lanes), the
queries (``queries.tsv`` hash), the lane's kind and engine parameters (including the
embedding model) and the depth N. A changed input gives a new key, so a stale entry
is never read. Entries live in ``<home>/cache/candidates/<key[:2]>/<key>.run.gz``
(a gzip TREC run) with ``<key>.json`` (the key's parts and per-query latencies in ms).

Both files are written through :mod:`workbench._infra.durable` (temporary file, ``fsync``,
rename; the JSON last, so an entry without its JSON is ignored): a crash, a full disk
or a read-only folder never leaves half an entry, and a failed write raises
:class:`~workbench.errors.StorageError` with nothing of it left behind. Temporaries of
killed processes (``.tmp-*``, older than an hour) are removed from a folder the first
time this process writes into it. A damaged entry (cut gzip, bad JSON, a malformed
TREC line) is moved aside (``*.damaged-<time>``), said once, and read as a miss.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench._infra import durable
from workbench.errors import DataError, StorageError
from workbench.run import Run, read_trec_run, write_trec_run


def cache_key(parts: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``parts`` (sorted keys, no whitespace)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _stderr(msg: str) -> None:
    print(f"[workbench] {msg}", file=sys.stderr, flush=True)


class CandidateCache:
    """Lane candidates on disk (see the module docstring).

    Args:
        root: the cache folder, e.g. ``<home>/cache/candidates``; created when needed.
        log: where damaged entries and a cache that cannot be written are reported
            (one line each; default: stderr).

    Attributes:
        hits, misses: running counts of :meth:`get`.
        write_error: the first :class:`StorageError` of :meth:`put_best_effort`, after
            which this object writes no more entries; None while writes succeed.
    """

    def __init__(self, root: Path, log: Callable[[str], None] | None = None):
        self.root = Path(root)
        self.log = log or _stderr
        self.hits = 0
        self.misses = 0
        self.write_error: StorageError | None = None
        self._swept: set[Path] = set()

    def _paths(self, key: str) -> tuple[Path, Path]:
        d = self.root / key[:2]
        return d / f"{key}.run.gz", d / f"{key}.json"

    def get(self, parts: dict[str, Any]) -> tuple[Run, dict[str, float]] | None:
        """The cached run and per-query latencies (ms) for these key parts, or None (a miss).

        A damaged entry is moved aside (:func:`workbench._infra.durable.quarantine`) and reported
        through ``log``; it is a miss. An entry that cannot be read (permissions, I/O
        error) is a miss too. Never raises for the cache's own files.
        """
        key = cache_key(parts)
        run_path, meta_path = self._paths(key)
        if not (meta_path.is_file() and run_path.is_file()):
            self.misses += 1
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("the entry's JSON is not an object")
            run = read_trec_run(run_path, name=meta.get("lane", ""), keep_file_order=True, allow_empty=True)
            rows = {q: run.get_hits(q) for q in meta.get("query_ids", [])}
            latencies = {q: float(v) for q, v in meta.get("latencies_ms", {}).items()}
        except OSError as exc:  # permissions, I/O: not the entry's fault, so it stays where it is
            self.log(f"candidate cache entry {run_path} cannot be read ({exc.strerror or exc}); "
                     "the lane runs live instead")
            self.misses += 1
            return None
        except (ValueError, TypeError, AttributeError, EOFError, zlib.error, DataError) as exc:
            # ValueError covers bad JSON and UTF-8; DataError a malformed TREC line
            self._damaged(run_path, meta_path, " ".join(str(exc).split())[:160])
            self.misses += 1
            return None
        if meta.get("parts") != json.loads(json.dumps(parts, default=str)):
            self.misses += 1  # a different entry under this key (never seen in practice): not damage
            return None
        self.hits += 1
        # queries with an empty ranking are not in the TREC file; restored from query_ids
        return Run(rows, run.name), latencies

    def _damaged(self, run_path: Path, meta_path: Path, reason: str) -> None:
        """Move a damaged entry aside: the run file is kept for inspection, its JSON removed."""
        durable.quarantine(run_path, f"a damaged candidate cache entry: {reason}", log=self.log)
        try:
            meta_path.unlink()
        except OSError:
            pass

    def put(self, parts: dict[str, Any], run: Run, latencies_ms: dict[str, float]) -> str:
        """Store a lane's run and latencies under these key parts; returns the key.

        Raises:
            StorageError: the entry cannot be written (a full disk, a read-only or foreign
                folder); the message names the path, the free space and the fix. Nothing
                of the entry is left behind.
        """
        key = cache_key(parts)
        run_path, meta_path = self._paths(key)
        folder = durable.mkdirs(run_path.parent)
        if folder not in self._swept:
            self._swept.add(folder)
            durable.remove_temporaries(folder)
        meta = {"parts": json.loads(json.dumps(parts, default=str)), "lane": run.name, "query_ids": sorted(run),
                "latencies_ms": {q: round(v, 4) for q, v in sorted(latencies_ms.items())}}
        # write_trec_run gzips by the ".gz" suffix
        with durable.atomic_path(run_path, suffix=".run.gz") as tmp:
            write_trec_run(tmp, run, tag=run.name or "lane")
        try:
            durable.atomic_write_text(meta_path, json.dumps(meta, sort_keys=True))
        except StorageError:
            try:  # a run without its JSON is never read; free its space on a full disk
                run_path.unlink()
            except OSError:
                pass
            raise
        return key

    def put_best_effort(self, parts: dict[str, Any], run: Run, latencies_ms: dict[str, float]) -> str | None:
        """:meth:`put`, but a cache that cannot be written costs nothing but the cache.

        The first failure is said once through ``log`` (the path, the free space and the
        fix) and stored in :attr:`write_error`; from then on this object writes nothing.
        The caller keeps ``run`` in memory.

        Returns:
            The key, or None when nothing was stored.
        """
        if self.write_error is not None:
            return None
        try:
            return self.put(parts, run, latencies_ms)
        except StorageError as exc:
            self.write_error = exc
            self.log(f"the candidate cache cannot be written, so this command goes on with its results in memory "
                     f"(they will be computed again next time): {exc}")
            return None
