"""``workbench search`` start-up: nothing loads what no lane of the config needs (issue #10, item 7).

Times one-off ``workbench search -e experiments/seeds.toml -d gita -c CONFIG QUERY`` in fresh
processes (imports, the dataset, Postgres checks and the lane included) for the reference-only
config, the full-text and trigram configs, and the vector config. Before the timed runs, one
untimed run per config warms the home: datasets built, the Postgres index and the embedding of
the query cached. Each figure is the median of 5 runs, in seconds of wall time.

Target (issue #10): a full-text search costs at most twice a reference-only one (no embedding
model loads for it). Trigram (no model either, but pg_trgm's word_similarity scan costs more
per query) and vector are printed for comparison; the last column is the first run of a new
query text, where the vector config also pays the model load.

Needs ``make main`` to have built the gita index once (or it builds it in the warm-up run).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 5
QUERY = "the soul is never born"


def search(config: str, query: str = QUERY) -> float:
    """Wall seconds of one ``workbench search`` in a fresh process.

    Raises:
        SystemExit: the command failed (its stderr is printed).
    """
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "workbench.cli", "search", "-e", "experiments/seeds.toml", "-d", "gita",
                          "-c", config, "-k", "5", query], cwd=ROOT, capture_output=True, text=True, env=os.environ)
    took = time.perf_counter() - t0
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"workbench search -c {config} failed (exit {out.returncode})")
    return took


def main() -> int:
    configs = ["reference", "fts_simple", "fts_russian", "trigram", "vector"]
    cold = {c: search(c, f"{QUERY} {c}") for c in configs}  # a new query text: nothing of it cached
    for c in configs:
        search(c)  # warm-up, untimed: the query's embedding and every index now cached
    warm = {c: statistics.median(search(c) for _ in range(RUNS)) for c in configs}
    print(f"{'config':<14}{'warm median s':>15}{'× reference':>13}{'first, new query s':>21}")
    for c in configs:
        print(f"{c:<14}{warm[c]:>15.2f}{warm[c] / warm['reference']:>13.2f}{cold[c]:>21.2f}")
    worst = max(warm[c] / warm["reference"] for c in ("fts_simple", "fts_russian"))
    ok = worst <= 2.0
    print(f"target: a full-text search at most 2× a reference-only one: {worst:.2f}× — "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
