"""Scale (issue #42): a ``source = "files"`` dataset of 10k / 100k / 1M documents, built, indexed and evaluated.

For each size N of ``--sizes`` (default 10000,100000,1000000):

1. **generate** N documents deterministically from the bilara segments of WORKBENCH_DATA: document ``i`` (id
   ``s{N}-{i:07d}``) is 2–4 segments drawn by a seeded RNG, their English texts in field ``en`` and their Pali
   texts in ``pi``, plus the first segment's collection as metadata, written record by record to
   ``corpus.jsonl.gz``; 10,000 queries (a fragment of 4–8 words of one segment of a document drawn in advance,
   its English text, else its Pali), as ``queries.tsv``, and TREC qrels judging that one document relevant
   (the segment recurs in other documents, which stay unjudged: the figures here are times, not quality). The
   generation streams too (only the segment pool and the queries are held) and is reused while its stamp (N,
   queries, seed, generator version) matches;
2. **build** it with ``workbench data build --only scale-N --force`` in a child process: wall seconds and the
   child's peak RSS (its own high-water mark, ``VmHWM`` in /proc, read every 0.1 s until it exits: not
   ``ru_maxrss``, which after subprocess's vfork + exec starts at this process's own peak), with the RSS
   sampled at the same time to name the build step in which the peak fell (the step lines it prints on stderr);
3. unless ``--build-only``, **index and evaluate** through ``workbench eval --no-track`` on an experiment with a
   pgvector lane (``hash`` embedder, dim 32), a full-text lane (``simple``, ``--fts-form``, default ``or``) and,
   unless ``--skip-opensearch``, an OpenSearch BM25 lane (``fuzzy`` mode with ``fuzziness = 0``: a plain
   ``match``), in two evals, each a fresh process: *cold*, the candidate cache (``<home>/cache/candidates``)
   emptied first, builds the indexes and runs every lane over the queries (lane p50/p95 from eval's lane latency
   table; ``eval cold s`` is its wall time less the indexing); *warm*, every lane from the candidate cache (the
   cache's size on disk then). Indexing seconds per engine are timed around the engine's index call inside the
   eval process (the eval is started through a bootstrap that wraps ``Engine.pg_index`` / ``Engine.os_index`` and
   prints ``[bench-scale] index …`` on stderr; the server start, the embedder and the ms-dpd lexicon are made
   ready before the clock starts). Postgres: embedding + COPY + GIN + HNSW + ANALYZE (pg_index's own figures are
   printed too); OpenSearch: lemma rules, embedding (the index holds the first embedder's vectors), bulk,
   refresh, force-merge. An index that an earlier run built for the same corpus is reused and marked so (no
   time): use another ``--seed`` or a fresh home to time it again;
4. print one markdown table and fit, by least squares on log-log, the exponent of build time and of each
   engine's indexing time against N (with a line per fit). Rows of earlier runs kept in
   ``<workdir>/results.json`` join the table and the fits with ``--with-saved`` (marked ``*``), so a
   ``--build-only`` run at 1M adds a point to the build fit.

Warm figures: before the measuring window one untimed build of a 1,000-document set (same generator) compiles
the bytecode and reads the workbench into the OS file cache; its wall time is printed as the cold line. Every
build and eval is a fresh process, so the imports are in every figure, as a user pays them.

Targets (exit 1 when missed): the build's peak RSS <= 2 GB at every size (issue #42: at 1M documents); the warm
eval (from the candidate cache) does not grow with N: fitted exponent <= 0.2 when two sizes or more were
evaluated.

Postgres is the embedded server of the home (as root its data live in /var/lib/workbench-postgres/<hash>);
OpenSearch the local node (started when needed; WORKBENCH_OS_URL for another cluster). The load average
(``os.getloadavg()``, 1 min) is read at the start and the end of every size.

Usage: WORKBENCH_DATA=../shared/data WORKBENCH_HOME=/tmp/scale-home python benchmarks/bench_scale.py
           [--sizes 10000,100000] [--queries 10000] [--build-only] [--skip-opensearch] [--workdir DIR]
           [--with-saved] [--clean]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from _timing import cold_line

ROOT = Path(__file__).resolve().parent.parent
GENERATOR_VERSION = 1
PEAK_TARGET_MB = 2048.0
WARM_EXPONENT_MAX = 0.2
WARM_UP_DOCS = 1_000

#: Run ``workbench eval`` with the engines' index calls timed (printed as ``[bench-scale] index {json}``).
EVAL_BOOT = r"""
import json, sys, time
from workbench.experiment import runner
E = runner.Engine
_pg, _os = E.pg_index, E.os_index
def pg_index(self, ds, emb):
    name = emb or self.first_embedder()
    if (ds.name, name) not in self._indexes and name is not None:
        self.dsn(); self.embedder(name)
        t = time.perf_counter(); info = _pg(self, ds, emb); s = time.perf_counter() - t
        print("[bench-scale] index " + json.dumps({"engine": "pg", "s": s, "reused": info.reused,
              "build_s": info.build_s, "embed_s": info.embed_s, "hnsw_s": info.hnsw_build_s}), file=sys.stderr, flush=True)
        return info
    return _pg(self, ds, emb)
def os_index(self, ds, emb):
    if (ds.name, emb) not in self._os_indexes:
        self.opensearch(); self.embedder(emb) if emb else None
        if any(t.language == "pi" for d in ds.documents for t in d.texts): self.lexicon()
        t = time.perf_counter(); info = _os(self, ds, emb); s = time.perf_counter() - t
        try:  # the node's heap after the index: its size and the old generation's high-water mark
            mem = next(iter(self.opensearch()[0].nodes.stats(metric="jvm")["nodes"].values()))["jvm"]["mem"]
            heap = {"heap_max_mb": round(mem["heap_max_in_bytes"] / 2**20),
                    "old_peak_mb": round(mem["pools"]["old"]["peak_used_in_bytes"] / 2**20)}
        except Exception as exc:
            heap = {"heap_error": type(exc).__name__}
        print("[bench-scale] index " + json.dumps({"engine": "os", "s": s, "reused": info.reused,
              "embed_s": getattr(info, "embed_s", None), **heap}), file=sys.stderr, flush=True)
        return info
    return _os(self, ds, emb)
E.pg_index, E.os_index = pg_index, os_index
from workbench.cli import main
sys.argv = ["workbench", "eval", *sys.argv[1:]]
sys.exit(main())
"""


# ---------------------------------------------------------------- generation

def segment_pool(data: Path) -> list[tuple[str, str, str]]:
    """``(collection, English, Pali)`` of every bilara segment with some text, in corpus order."""
    from workbench.data.loaders.bilara import load_bilara

    pool = []
    for d in load_bilara(data).documents:
        en = " ".join(t.text for t in d.texts if t.language == "en").split()
        pi = " ".join(t.text for t in d.texts if t.language == "pi").split()
        if en or pi:
            coll = "".join(c for c in d.work_id if c.isalpha()) or d.work_id
            pool.append((coll, " ".join(en), " ".join(pi)))
    return pool


def generate(folder: Path, n: int, n_queries: int, seed: int, pool: list[tuple[str, str, str]]) -> dict:
    """Write ``corpus.jsonl.gz``, ``queries.tsv`` and ``qrels.txt`` of ``n`` documents into ``folder``
    (streamed: one record at a time; the queries, at most ``n_queries``, are held until written). Reuses the
    files while ``stamp.json`` matches. Returns the stamp (with the seconds the generation took)."""
    want = {"n": n, "queries": min(n_queries, n), "seed": seed, "version": GENERATOR_VERSION, "pool": len(pool)}
    stamp_path = folder / "stamp.json"
    if stamp_path.is_file():
        old = json.loads(stamp_path.read_text())
        if {k: old.get(k) for k in want} == want and all((folder / f).is_file() for f in
                                                         ("corpus.jsonl.gz", "queries.tsv", "qrels.txt")):
            return {**old, "reused": True}
    folder.mkdir(parents=True, exist_ok=True)
    stamp_path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    doc_rng = random.Random(f"bench-scale:{seed}:{n}:documents")
    q_rng = random.Random(f"bench-scale:{seed}:{n}:queries")
    targets = sorted(q_rng.sample(range(n), want["queries"]))
    ti = 0
    queries: list[tuple[str, str, str]] = []  # (query id, text, doc id)
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8", compresslevel=3, newline="\n") as fh:
        for i in range(n):
            segs = [pool[doc_rng.randrange(len(pool))] for _ in range(doc_rng.randint(2, 4))]
            doc_id = f"s{n}-{i:07d}"
            rec = {"id": doc_id, "en": " ".join(s[1] for s in segs if s[1]),
                   "pi": " ".join(s[2] for s in segs if s[2]), "collection": segs[0][0]}
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            if ti < len(targets) and targets[ti] == i:
                ti += 1
                words = (lambda s: (s[1] or s[2]).split())(segs[q_rng.randrange(len(segs))])
                length = q_rng.randint(4, 8)
                start = q_rng.randrange(max(1, len(words) - length + 1))
                queries.append((f"q{n}-{len(queries):05d}", " ".join(words[start:start + length]), doc_id))
    with open(folder / "queries.tsv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "text"])
        w.writerows((qid, text) for qid, text, _d in queries)
    with open(folder / "qrels.txt", "w", encoding="utf-8") as fh:
        fh.writelines(f"{qid} 0 {did} 1\n" for qid, _t, did in queries)
    stamp = {**want, "generate_s": round(time.perf_counter() - t0, 2),
             "corpus_mb": round((folder / "corpus.jsonl.gz").stat().st_size / 2**20, 1)}
    stamp_path.write_text(json.dumps(stamp))
    return {**stamp, "reused": False}


def definitions(workdir: Path, name: str, folder: Path, seed: int) -> Path:
    """A datasets TOML holding only ``[dataset.NAME]`` (its paths relative to the TOML)."""
    rel = folder.relative_to(workdir)
    path = workdir / f"{name}.datasets.toml"
    path.write_text(f"""seed = {seed}

[dataset.{name}]
source = "files"
documents = "{rel}/corpus.jsonl.gz"
queries = "{rel}/queries.tsv"
qrels = "{rel}/qrels.txt"
language = "en"
text_fields = {{ en = "en", pi = "pi" }}
metadata_fields = ["collection"]
""")
    return path


def experiment(workdir: Path, name: str, opensearch: bool, fts_form: str) -> Path:
    """The eval's experiment: pgvector (hash, dim 32) + full text (simple, ``fts_form``) [+ OpenSearch BM25]."""
    lanes = ["vector", "fts"] + (["os_bm25"] if opensearch else [])
    text = f"""name = "bench-scale-{name}"
datasets = ["{name}"]
measures = ["R@10", "nDCG@10", "RR@10"]
depth = 100

[embedders.h]
kind = "hash"
dim = 32

[lanes.vector]
kind = "pgvector"
embedder = "h"

[lanes.fts]
kind = "fulltext"
config = "simple"
form = "{fts_form}"
"""
    if opensearch:
        text += """
[lanes.os_bm25]
kind = "opensearch"
mode = "fuzzy"
fuzziness = 0
"""
    text += "\n[configs]\n" + "\n".join(f'{ln} = {{ lanes = ["{ln}"] }}' for ln in lanes)
    text += f'\nhybrid = {{ lanes = {json.dumps(lanes)}, fusion = "rrf", k = 60 }}\n'
    path = workdir / f"{name}.experiment.toml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- child processes

class Child:
    """A child process: wall seconds, peak RSS (its VmHWM), its stderr lines with their times, and (``sample``)
    RSS samples every 0.1 s (the process and its descendants) attributed to the latest step line."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, sample: bool = False,
                 echo: str = ""):
        import psutil

        self.lines: list[tuple[float, str]] = []
        self.samples: list[tuple[float, float, str]] = []  # (t, rss MB, step)
        t0 = time.perf_counter()
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n$ {' '.join(argv)}\n")
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    cwd=ROOT, bufsize=1)
            out: list[str] = []
            t_out = threading.Thread(target=lambda: out.extend(proc.stdout))
            t_out.start()

            def read_err():
                for line in proc.stderr:
                    t = time.perf_counter() - t0
                    self.lines.append((t, line.rstrip("\n")))
                    log.write(f"{t:9.2f} {line}")
                    log.flush()
                    if echo:
                        print(f"  [{echo} {t:7.1f}s] {line.rstrip()}", file=sys.stderr, flush=True)

            t_err = threading.Thread(target=read_err)
            t_err.start()
            stop = threading.Event()
            self.hwm_mb = 0.0

            def poll():
                try:
                    p = psutil.Process(proc.pid)
                except psutil.NoSuchProcess:
                    return
                while not stop.is_set():
                    hwm, rss = _vm(proc.pid)
                    if hwm is None:
                        break
                    try:
                        kids = [_vm(k.pid) for k in p.children(recursive=True)]
                    except psutil.Error:
                        kids = []
                    self.hwm_mb = max(self.hwm_mb, hwm)
                    if sample:
                        step = self.lines[-1][1] if self.lines else "start"
                        self.samples.append((time.perf_counter() - t0, rss + sum(r or 0 for _h, r in kids), step))
                    stop.wait(0.1)

            t_poll = threading.Thread(target=poll, daemon=True)
            t_poll.start()
            _pid, status, usage = os.wait4(proc.pid, 0)
            self.wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            stop.set()
            t_err.join()
            t_out.join()
            self.stdout = "".join(out)
            log.write(self.stdout)
        self.rc = proc.returncode
        # the peak: the child's own high-water mark (VmHWM), read every 0.1 s until it exits. Not wait4's
        # ru_maxrss: exec records the high-water mark of the mm it replaces, which after subprocess's vfork is
        # this (parent) process's, so ru_maxrss is never below the parent's own peak
        self.peak_mb = self.hwm_mb
        self.ru_maxrss_mb = usage.ru_maxrss / 1024

    def check(self, what: str) -> None:
        if self.rc != 0:
            tail = "\n".join(line for _t, line in self.lines[-25:])
            raise SystemExit(f"{what} failed (exit {self.rc}):\n{tail}\n{self.stdout[-2000:]}")

    def step_peaks(self) -> dict[str, float]:
        """The largest sampled RSS (MB) in each step, in the order the steps came."""
        out: dict[str, float] = {}
        for _t, mb, step in self.samples:
            out[step] = max(out.get(step, 0.0), mb)
        return out

    def peak_step(self) -> tuple[float, str]:
        """The largest sampled RSS (MB) and the step line it fell in."""
        if not self.samples:
            return float("nan"), "?"
        _t, mb, step = max(self.samples, key=lambda s: s[1])
        return mb, step


def _vm(pid: int) -> tuple[float | None, float | None]:
    """``(VmHWM, VmRSS)`` of a process in MB from /proc; ``(None, None)`` once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None, None
    got = {}
    for line in text.splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            key, value = line.split(":", 1)
            got[key] = int(value.split()[0]) / 1024
    if "VmHWM" not in got:  # a zombie
        return None, None
    return got["VmHWM"], got.get("VmRSS", 0.0)


def env_for(defs: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["WORKBENCH_DATASETS"] = str(defs)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def build(name: str, defs: Path, workdir: Path, echo: bool) -> Child:
    exe = Path(sys.executable).parent / "workbench"
    c = Child([str(exe), "data", "build", "--only", name, "--force"], env_for(defs), workdir / "bench-scale.log",
              sample=True, echo=f"build {name}" if echo else "")
    c.check(f"workbench data build --only {name}")
    return c


def run_eval(exp: Path, defs: Path, workdir: Path, echo: str) -> tuple[Child, dict, dict]:
    """One ``workbench eval --no-track`` through :data:`EVAL_BOOT`: the child, the index timings by engine
    and the lane latency table (lane → (p50, p95, cached))."""
    c = Child([sys.executable, "-c", EVAL_BOOT, str(exp), "--no-track"], env_for(defs), workdir / "bench-scale.log",
              echo=echo)
    c.check(f"workbench eval {exp}")
    index = {}
    for _t, line in c.lines:
        if line.startswith("[bench-scale] index "):
            rec = json.loads(line.split(" ", 2)[2])
            index[rec["engine"]] = rec
    lanes = {}
    rows = c.stdout.split("-- lane latency (ms per query) --", 1)
    if len(rows) == 2:
        for line in rows[1].strip().splitlines()[1:]:
            parts = line.split()
            if len(parts) < 5 or parts[0].startswith("--"):
                break
            lanes[parts[1]] = (float(parts[2]), float(parts[3]), parts[4] == "True")
    return c, index, lanes


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.is_dir() else 0.0


def exponent(points: list[tuple[int, float | None]]) -> tuple[float | None, list[int]]:
    """Least-squares slope of log(seconds) on log(N) and the sizes it used; None with fewer than two sizes."""
    import numpy as np

    pts = sorted((n, s) for n, s in points if s is not None and s > 0 and not math.isnan(s))
    if len({n for n, _s in pts}) < 2:
        return None, [n for n, _s in pts]
    x, y = np.log([n for n, _ in pts]), np.log([s for _, s in pts])
    return float(np.polyfit(x, y, 1)[0]), [n for n, _s in pts]


# ---------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="documents per dataset, comma-separated")
    ap.add_argument("--queries", type=int, default=10_000, help="queries per dataset (one judged document each)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build-only", action="store_true", help="generate and build only (no index, no eval)")
    ap.add_argument("--skip-opensearch", action="store_true", help="no OpenSearch lane")
    ap.add_argument("--fts-form", choices=("or", "and", "phrase", "websearch"), default="or",
                    help="the full-text lane's form (default or, the lane's own default: every document holding "
                         "any query word is ranked, so its latency grows with N)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="generated corpora, definitions, logs and results.json (default <home>/bench-scale)")
    ap.add_argument("--with-saved", action="store_true",
                    help="add the rows of earlier runs (results.json) for sizes not measured now to the table and fits")
    ap.add_argument("--clean", action="store_true",
                    help="after each size, delete its generated corpus and built dataset (the indexes stay)")
    ap.add_argument("--quiet", action="store_true", help="do not echo the children's stderr")
    args = ap.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]

    from workbench.settings import data_dir, home_dir

    data, home = data_dir(sources=("suttacentral-bilara",)), home_dir()
    workdir = (args.workdir or home / "bench-scale").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    results_path = workdir / "results.json"
    saved = json.loads(results_path.read_text()) if results_path.is_file() else {}
    echo = not args.quiet
    print(f"# bench_scale: sizes {', '.join(f'{n:,}' for n in sizes)}; {args.queries:,} queries; home {home}; "
          f"workdir {workdir}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at start", flush=True)

    t = time.perf_counter()
    pool = segment_pool(data)
    print(f"segment pool: {len(pool):,} bilara segments ({time.perf_counter() - t:.1f} s)", flush=True)

    # warm-up: one untimed build of a small set (bytecode, OS file cache, the builders' imports)
    warm_name = f"scale-{WARM_UP_DOCS}"
    generate(workdir / warm_name, WARM_UP_DOCS, min(args.queries, WARM_UP_DOCS), args.seed, pool)
    warm = build(warm_name, definitions(workdir, warm_name, workdir / warm_name, args.seed), workdir, False)
    cold_s = warm.wall

    rows: dict[int, dict] = {}
    for n in sizes:
        name = f"scale-{n}"
        row: dict = {"n": n, "load_start": os.getloadavg()[0], "build_only": args.build_only, "seed": args.seed,
                     "fts_form": args.fts_form,
                     "opensearch": not args.skip_opensearch and not args.build_only}
        gen = generate(workdir / name, n, args.queries, args.seed, pool)
        print(f"{name}: corpus {gen['corpus_mb']:.0f} MB gzip, {gen['queries']:,} queries "
              + ("(reused)" if gen["reused"] else f"(generated in {gen['generate_s']:.0f} s)"), flush=True)
        defs = definitions(workdir, name, workdir / name, args.seed)
        b = build(name, defs, workdir, echo)
        peak_sampled, peak_step = b.peak_step()
        row.update(build_s=b.wall, build_peak_mb=b.peak_mb, build_peak_sampled_mb=peak_sampled,
                   build_peak_step=peak_step, generate_s=gen.get("generate_s"),
                   dataset_mb=folder_mb(home / "datasets" / name))
        print(f"{name}: build {b.wall:.1f} s, peak RSS {b.peak_mb:,.0f} MB (sampled {peak_sampled:,.0f} MB, "
              f"in step: {peak_step!r})", flush=True)
        print(f"{name}: RSS by build step (MB, sampled max): "
              + "; ".join(f"{k.split(': ', 1)[-1]} {v:,.0f}" for k, v in b.step_peaks().items()), flush=True)
        if not args.build_only:
            exp = experiment(workdir, name, row["opensearch"], args.fts_form)
            cache = home / "cache" / "candidates"
            shutil.rmtree(cache, ignore_errors=True)  # cold: every lane runs live
            c, index, lanes = run_eval(exp, defs, workdir, f"eval cold {name}" if echo else "")
            index_s = sum(rec["s"] for rec in index.values())
            row.update(index=index, lanes={k: [p50, p95] for k, (p50, p95, _c) in lanes.items()},
                       eval_cold_wall_s=c.wall, eval_cold_s=c.wall - index_s, eval_cold_peak_mb=c.peak_mb)
            reused = [e for e, rec in index.items() if rec["reused"]]
            print(f"{name}: eval cold {c.wall:.1f} s wall, {c.wall - index_s:.1f} s without the indexing "
                  f"(peak RSS {c.peak_mb:,.0f} MB); indexing: " + "; ".join(
                      f"{e} {rec['s']:.1f} s" + (" (reused: built earlier)" if rec["reused"] else
                                                 (f", of which embedding {rec['embed_s']:.1f} s" if rec.get("embed_s") else "")
                                                 + (f", HNSW {rec['hnsw_s']:.1f} s" if rec.get("hnsw_s") else ""))
                      for e, rec in index.items()), flush=True)
            if reused:
                print(f"{name}: the {', '.join(reused)} index was built by an earlier run and reused: its time is "
                      "not measured (use another --seed or a fresh home to time it)", flush=True)
            c, _index, lanes = run_eval(exp, defs, workdir, f"eval warm {name}" if echo else "")
            if not all(cached for _a, _b, cached in lanes.values()):
                print(f"{name}: the warm eval ran a lane live: {lanes}", flush=True)
            row.update(eval_warm_s=c.wall, eval_warm_peak_mb=c.peak_mb, cache_mb=folder_mb(cache))
            print(f"{name}: eval warm {c.wall:.1f} s (peak RSS {c.peak_mb:,.0f} MB); candidate cache "
                  f"{row['cache_mb']:.1f} MB", flush=True)
        row["load_end"] = os.getloadavg()[0]
        rows[n] = row
        saved[str(n)] = {**row, "measured": time.strftime("%Y-%m-%d %H:%M:%S")}
        results_path.write_text(json.dumps(saved, indent=1))
        if args.clean:
            shutil.rmtree(workdir / name, ignore_errors=True)
            shutil.rmtree(home / "datasets" / name, ignore_errors=True)

    table = dict(rows)
    if args.with_saved:
        for key, row in saved.items():
            if int(key) not in table:
                table[int(key)] = {**row, "saved": True}
    lane_names = sorted({ln for r in table.values() for ln in r.get("lanes", {})})
    engines = [e for e in ("pg", "os") if any(e in r.get("index", {}) for r in table.values())]

    def f(v, fmt="{:.1f}"):
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)

    head = (["N", "build s", "build peak MB"] + [f"index {e} s" for e in engines]
            + [f"{ln} p50/p95 ms" for ln in lane_names] + ["eval cold s", "eval warm s", "cache MB", "load start→end"])
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n in sorted(table):
        r = table[n]
        cells = [f"{n:,}" + ("*" if r.get("saved") else ""), f(r["build_s"]), f(r["build_peak_mb"], "{:,.0f}")]
        cells += [f(r.get("index", {}).get(e, {}).get("s")) + ("ʳ" if r.get("index", {}).get(e, {}).get("reused") else "")
                  for e in engines]
        cells += [("/".join(f"{v:.1f}" for v in r["lanes"][ln]) if ln in r.get("lanes", {}) else "–")
                  for ln in lane_names]
        cells += [f(r.get("eval_cold_s")), f(r.get("eval_warm_s")), f(r.get("cache_mb")),
                  f"{r['load_start']:.2f}→{r['load_end']:.2f}"]
        print("| " + " | ".join(cells) + " |")
    print("(eval cold: the first eval's wall time less its indexing, every lane live over the queries; eval warm: "
          "a second eval, every lane from the candidate cache; both fresh processes, imports included)")
    if any(r.get("saved") for r in table.values()):
        print("(* a row of an earlier run, from results.json)")
    if any(rec.get("reused") for r in table.values() for rec in r.get("index", {}).values()):
        print("(ʳ an index built by an earlier run and reused: not a build time)")
    print(cold_line(f"warm-up build of {WARM_UP_DOCS:,} documents, untimed", cold_s,
                    "bytecode, the OS file cache, the builders' imports"))

    points = {"build": [(n, r["build_s"]) for n, r in table.items()]}
    for e in engines:
        points[f"index {e}"] = [(n, r.get("index", {}).get(e, {}).get("s")) for n, r in table.items()]
    points["eval cold"] = [(n, r.get("eval_cold_s")) for n, r in table.items()]
    points["eval warm"] = [(n, r.get("eval_warm_s")) for n, r in table.items()]
    for e in engines:  # a reused index is no build time
        points[f"index {e}"] = [(n, None if table[n].get("index", {}).get(e, {}).get("reused") else s)
                                for n, s in points[f"index {e}"]]
    fits = {what: exponent(pts) for what, pts in points.items()}
    print("\nfitted exponents (seconds ∝ N^b, least squares on log-log):")
    for what, (b, used) in fits.items():
        print(f"  {what}: " + (f"b = {b:.2f} (sizes {', '.join(f'{n:,}' for n in used)})" if b is not None
                              else "needs two sizes"))

    ok = True
    for n, r in sorted(table.items()):
        if r["build_peak_mb"] > PEAK_TARGET_MB:
            ok = False
            print(f"MISSED: build peak RSS at {n:,} documents is {r['build_peak_mb']:,.0f} MB > "
                  f"{PEAK_TARGET_MB:,.0f} MB (peak in step {r['build_peak_step']!r})")
    print(f"target: build peak RSS <= {PEAK_TARGET_MB:,.0f} MB at every size: "
          f"{'met' if ok else 'missed'} (max {max(r['build_peak_mb'] for r in table.values()):,.0f} MB)")
    warm_b = fits["eval warm"][0]
    if warm_b is not None:
        met = warm_b <= WARM_EXPONENT_MAX
        ok = ok and met
        print(f"target: eval from the candidate cache independent of N (exponent <= {WARM_EXPONENT_MAX}): "
              f"{'met' if met else 'missed'} (b = {warm_b:.2f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
