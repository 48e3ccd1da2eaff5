"""Links planted in the home are never followed (issue #41): a cache's quarantine renamed a link's target outside
the home and replaced it with a SQLite file; a study journal link wrote outside the home, as root."""

from __future__ import annotations

import os

import pytest

from workbench._infra.durable import plain_file_problem
from workbench.embedding.embedders import CachedEmbedder, HashEmbedder
from workbench.errors import StorageError


def test_a_cache_that_is_a_link_is_not_used_and_its_target_is_untouched(tmp_path):
    outside = tmp_path / "outside" / "precious.txt"
    outside.parent.mkdir()
    outside.write_text("not a cache")
    home = tmp_path / "home" / "cache"
    home.mkdir(parents=True)
    (home / "embeddings.sqlite").symlink_to(outside)
    said: list[str] = []
    emb = CachedEmbedder(HashEmbedder(8), home / "embeddings.sqlite", log=said.append)
    assert emb.unavailable is not None and "is a symbolic link (to " in emb.unavailable
    assert emb.embed_passages(["a text"]).shape == (1, 8)  # the work is done, only not kept
    assert outside.read_text() == "not a cache" and sorted(p.name for p in outside.parent.iterdir()) == ["precious.txt"]
    assert (home / "embeddings.sqlite").is_symlink() and len(said) == 1


def test_a_fifo_or_a_hard_link_is_not_a_cache_either(tmp_path):
    os.mkfifo(tmp_path / "fifo.sqlite")
    assert "not a regular file" in CachedEmbedder(HashEmbedder(8), tmp_path / "fifo.sqlite", log=lambda _m: None).unavailable
    (tmp_path / "a.sqlite").write_bytes(b"")
    os.link(tmp_path / "a.sqlite", tmp_path / "b.sqlite")
    assert "hard link (2 names" in plain_file_problem(tmp_path / "b.sqlite")
    assert plain_file_problem(tmp_path / "missing.sqlite") is None


def test_a_study_journal_that_is_a_link_is_refused(tmp_path):
    from workbench.tuning.storage import open_journal

    target = tmp_path / "elsewhere.log"
    target.write_text("")
    (tmp_path / "journal.log").symlink_to(target)
    with pytest.raises(StorageError, match="the study journal is not opened: .* is a symbolic link"):
        open_journal(tmp_path / "journal.log")
    assert target.read_text() == ""
