"""The candidate cache: each lane's top-N per query for one engine setting, on disk.

An entry is keyed by the sha256 of everything that shapes the ranking: the corpus
(the dataset's ``documents.jsonl`` hash), the index (its key, for database lanes), the
queries (``queries.tsv`` hash), the lane's kind and engine parameters (including the
embedding model) and the depth N. A changed input gives a new key, so a stale entry
is never read. Entries live in ``<home>/cache/candidates/<key[:2]>/<key>.run.gz``
(a gzip TREC run) with ``<key>.json`` (the key's parts and per-query latencies in ms),
written atomically (temporary file, then rename; the JSON last, so an entry without
its JSON is ignored).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from workbench.run import Run, read_trec_run, write_trec_run


def cache_key(parts: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``parts`` (sorted keys, no whitespace)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CandidateCache:
    """Lane candidates on disk (see the module docstring).

    Args:
        root: the cache folder, e.g. ``<home>/cache/candidates``; created when needed.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def _paths(self, key: str) -> tuple[Path, Path]:
        d = self.root / key[:2]
        return d / f"{key}.run.gz", d / f"{key}.json"

    def get(self, parts: dict[str, Any]) -> tuple[Run, dict[str, float]] | None:
        """The cached run and per-query latencies (ms) for these key parts, or None."""
        key = cache_key(parts)
        run_path, meta_path = self._paths(key)
        if not (meta_path.is_file() and run_path.is_file()):
            self.misses += 1
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            run = read_trec_run(run_path, name=meta.get("lane", ""), keep_file_order=True, allow_empty=True)
        except Exception:  # a damaged entry is a miss, never an error: it will be rewritten
            self.misses += 1
            return None
        if meta.get("parts") != json.loads(json.dumps(parts, default=str)):
            self.misses += 1
            return None
        # queries with an empty ranking are not in the TREC file; restore them
        rows = {q: run.get_hits(q) for q in meta.get("query_ids", [])}
        self.hits += 1
        return Run(rows, run.name), {q: float(v) for q, v in meta.get("latencies_ms", {}).items()}

    def put(self, parts: dict[str, Any], run: Run, latencies_ms: dict[str, float]) -> str:
        """Store a lane's run and latencies under these key parts; returns the key."""
        key = cache_key(parts)
        run_path, meta_path = self._paths(key)
        run_path.parent.mkdir(parents=True, exist_ok=True)
        # write_trec_run gzips by the ".gz" suffix: a unique temporary name ending in .gz, then rename
        fd, tmp = tempfile.mkstemp(dir=run_path.parent, prefix=".tmp-", suffix=".run.gz")
        os.close(fd)
        write_trec_run(Path(tmp), run, tag=run.name or "lane")
        os.replace(tmp, run_path)
        meta = {"parts": json.loads(json.dumps(parts, default=str)), "lane": run.name, "query_ids": sorted(run),
                "latencies_ms": {q: round(v, 4) for q, v in sorted(latencies_ms.items())}}
        fd, tmp_meta = tempfile.mkstemp(dir=meta_path.parent, suffix=".json.tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(meta, fh, sort_keys=True)
        os.replace(tmp_meta, meta_path)
        return key
