"""The cache file's lock handling: SQLite's immediate SQLITE_BUSY answers are waited out, a held lock is not."""

from __future__ import annotations

import re
import sqlite3
import threading
import time

import numpy as np

from workbench._infra.sqlite_cache import SqliteCache
from workbench.embedding.embedders import CachedEmbedder, HashEmbedder


def _hold_write_lock(path, seconds: float) -> threading.Thread:
    """Another connection takes the file's write lock (``BEGIN IMMEDIATE``) and keeps it ``seconds``."""
    ready = threading.Event()

    def hold() -> None:
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        ready.set()
        time.sleep(seconds)
        con.execute("COMMIT")
        con.close()

    thread = threading.Thread(target=hold)
    thread.start()
    ready.wait()
    return thread


def test_opening_a_new_file_another_process_is_writing_waits_for_it_and_says_nothing(tmp_path):
    # Switching a file to WAL while another connection holds its write lock is answered SQLITE_BUSY at once,
    # without the busy timeout (what two processes opening a new cache together hit in CI): it is retried.
    path = tmp_path / "embeddings.sqlite"
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    holder = _hold_write_lock(path, 0.4)
    said: list[str] = []
    started = time.monotonic()
    cached = CachedEmbedder(HashEmbedder(16), path, log=said.append)
    waited = time.monotonic() - started
    holder.join()
    assert said == [] and cached.unavailable is None and not cached.read_only
    assert 0.3 < waited < 5
    texts = ["dharma", "karma"]
    np.testing.assert_array_equal(cached.embed_passages(texts), HashEmbedder(16).embed_passages(texts))
    again = CachedEmbedder(HashEmbedder(16), path, log=said.append)
    again.embed_passages(texts)
    assert (again.hits, again.misses) == (2, 0) and said == []
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_lock_held_past_the_wait_is_said_with_the_time_waited_and_the_values_still_come(tmp_path, monkeypatch):
    monkeypatch.setattr(SqliteCache, "BUSY_WAIT_S", 0.5)
    path = tmp_path / "embeddings.sqlite"
    CachedEmbedder(HashEmbedder(16), path).embed_passages(["old"])
    holder = _hold_write_lock(path, 2.0)
    said: list[str] = []
    cached = CachedEmbedder(HashEmbedder(16), path, log=said.append)
    out = cached.embed_passages(["old", "new"])
    holder.join()
    np.testing.assert_array_equal(out, HashEmbedder(16).embed_passages(["old", "new"]))
    assert (cached.hits, cached.misses) == (1, 1)
    assert len(said) == 1 and str(path) in said[0]
    assert re.search(r"stayed locked by another process for (0\.[5-9]|1\.[0-9]) s; this call goes without it", said[0])
    with sqlite3.connect(path) as con:  # the write was skipped, nothing else lost
        assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 1
