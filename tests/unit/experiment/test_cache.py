"""Runs (tie-break, TREC files) and the candidate cache (exact round trip, stale keys never read)."""

from __future__ import annotations

import gzip

import pytest

from workbench.errors import DataError
from workbench.experiment.cache import CandidateCache, cache_key
from workbench.run import Hit, Run, read_trec_run, write_trec_run


def test_tie_break_is_score_then_tiebreak_then_doc_id():
    run = Run({"q": [Hit("b", 1.0), Hit("a", 1.0), Hit("c", 1.0, 0.5), Hit("z", 2.0)]})
    assert [h.doc_id for h in run["q"]] == ["z", "c", "a", "b"]


def test_run_rejects_nan_and_duplicates():
    with pytest.raises(ValueError, match="non-finite"):
        Run({"q": [("a", float("nan"))]})
    with pytest.raises(ValueError, match="twice"):
        Run({"q": [("a", 1.0), ("a", 2.0)]})


def test_trec_round_trip_is_exact(tmp_path):
    run = Run({"q1": [("a", 0.1 + 0.2), ("b", 1e-17)], "q2": [("c", -3.5)]}, "lane")
    for name in ("r.trec", "r.trec.gz"):
        write_trec_run(tmp_path / name, run)
        back = read_trec_run(tmp_path / name, keep_file_order=True)  # how the cache reads its own files
        assert back.to_dict() == run.to_dict()
        # read as trec_eval 9 reads a run file, scores are its 32-bit floats (issue #41)
        assert read_trec_run(tmp_path / name).to_dict()["q1"] == {"a": 0.30000001192092896, "b": 9.99999983775159e-18}
    assert (tmp_path / "r.trec").read_text().splitlines()[0] == f"q1 Q0 a 1 {0.1 + 0.2!r} lane"


@pytest.mark.parametrize("content,needle", [
    ("q1 Q0 a 1 0.5\n", "6 columns"),
    ("q1 Q0 a 1 x tag\n", "not a number"),
    ("q1 Q0 a 1 nan tag\n", "not finite"),
    ("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n", "twice"),
    ("", "no results"),
])
def test_bad_trec_runs_name_the_line(tmp_path, content, needle):
    p = tmp_path / "bad.trec"
    p.write_text(content)
    with pytest.raises(DataError, match=needle):
        read_trec_run(p)


def test_missing_run_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_trec_run(tmp_path / "nope.trec")


def test_cache_round_trip_keeps_order_empty_queries_and_latencies(tmp_path):
    cache = CandidateCache(tmp_path)
    parts = {"dataset": "gita", "documents": "abc", "lane": "reference", "params": {}, "depth": 10}
    run = Run({"q1": [Hit("bg1.2", 1.0, -1.0), Hit("bg1.1", 1.0, -2.0)], "q2": []}, "ref")
    assert cache.get(parts) is None
    cache.put(parts, run, {"q1": 0.5, "q2": 0.25})
    got, lat = cache.get(parts)
    assert [h.doc_id for h in got["q1"]] == ["bg1.2", "bg1.1"]  # the lane's order, not doc_id order
    assert got["q2"] == () and set(got) == {"q1", "q2"}
    assert lat == {"q1": 0.5, "q2": 0.25}
    assert (cache.hits, cache.misses) == (1, 1)


def test_changed_key_parts_miss(tmp_path):
    cache = CandidateCache(tmp_path)
    parts = {"documents": "abc", "params": {"ef_search": 100}}
    cache.put(parts, Run({"q": [("a", 1.0)]}), {})
    assert cache.get({"documents": "abd", "params": {"ef_search": 100}}) is None
    assert cache.get({"documents": "abc", "params": {"ef_search": 200}}) is None
    assert cache.get(parts) is not None
    assert cache_key({"a": 1, "b": 2}) == cache_key({"b": 2, "a": 1})


@pytest.mark.parametrize("damage", ["trec line", "cut gzip", "not gzip", "bad json"])
def test_damaged_entry_is_moved_aside_said_once_and_a_miss(tmp_path, damage):
    said: list[str] = []
    cache = CandidateCache(tmp_path, log=said.append)
    parts = {"x": 1}
    run = Run({"q": [("a", 1.0)]}, "lane")
    key = cache.put(parts, run, {})
    run_path, meta_path = tmp_path / key[:2] / f"{key}.run.gz", tmp_path / key[:2] / f"{key}.json"
    if damage == "trec line":
        run_path.write_bytes(gzip.compress(b"garbage line\n"))
    elif damage == "cut gzip":
        run_path.write_bytes(run_path.read_bytes()[:-12])
    elif damage == "not gzip":
        run_path.write_bytes(b"\0" * 64)
    else:
        meta_path.write_text('{"parts": {"x": 1}, "lane": ')
    damaged = run_path.read_bytes()
    assert cache.get(parts) is None and (cache.hits, cache.misses) == (0, 1)
    aside = list(run_path.parent.glob(f"{key}.run.gz.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == damaged
    assert not run_path.exists() and not meta_path.exists()
    assert len(said) == 1 and "damaged" in said[0] and str(run_path) in said[0] and str(aside[0]) in said[0]
    assert cache.get(parts) is None and len(said) == 1  # now simply missing: said once
    cache.put(parts, run, {"q": 2.0})  # rewritten by the next run
    got, lat = cache.get(parts)
    assert got.to_dict() == run.to_dict() and lat == {"q": 2.0}


def test_entries_are_written_whole_and_old_temporaries_cleared(tmp_path):
    import os
    import time

    cache = CandidateCache(tmp_path)
    parts = {"x": 2}
    folder = tmp_path / cache_key(parts)[:2]
    folder.mkdir()
    old, young = folder / ".tmp-killed.run.gz.1.2.run.gz", folder / ".tmp-live.run.gz.3.4.run.gz"
    for p in (old, young):
        p.write_bytes(b"partial")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    cache.put(parts, Run({"q": [("a", 1.0)]}), {})
    assert not old.exists() and young.exists()
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".tmp-live")) == [
        f"{cache_key(parts)}.json", f"{cache_key(parts)}.run.gz"]


def test_a_lane_that_found_nothing_is_cached_too(tmp_path):
    cache = CandidateCache(tmp_path)
    parts = {"lane": "exact", "dataset": "x"}
    cache.put(parts, Run({"q1": [], "q2": []}, "exact"), {"q1": 0.5, "q2": 0.25})
    got = cache.get(parts)
    assert got is not None and cache.hits == 1 and cache.misses == 0
    run, lat = got
    assert set(run) == {"q1", "q2"} and run["q1"] == () and lat == {"q1": 0.5, "q2": 0.25}
    with pytest.raises(DataError, match="holds no results"):  # outside the cache an empty run is still an error
        read_trec_run(next(tmp_path.rglob("*.run.gz")))
