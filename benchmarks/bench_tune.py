"""Tuning speed (issue #5): in-memory fusion + evaluation, a 1,000-trial study, tracking overhead.

Synthetic but shaped like the real job: 1,000 queries × 4 lanes × 100 candidates drawn
from 2,000 documents (so lanes overlap), 5 graded relevant documents per query.

* fusion-only evaluation (RRF over the 4 lanes, R@10 + nDCG@10 + RR@10): evaluations/s of
  :class:`workbench.fasteval.CandidateMatrix` — target >= 250/s — and the ratio to ranx's
  ``fuse`` + ``evaluate`` on the same data in the same run — target >= 50×;
* a 1,000-trial fusion study (TPE, 7 dimensions, in-memory storage) — target <= 30 s wall;
* MLflow tracking of that study (batched metrics, the report and plots; the MLflow store
  already exists, as in a home after `make main`) — target <= 5% of the study's time.

Usage: python benchmarks/bench_tune.py [--trials 1000]. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path


def synthetic(n_queries=1000, n_lanes=4, depth=100, pool=2000, seed=0):
    from workbench.run import Hit, Run
    from workbench.types import Qrel

    rnd = random.Random(seed)
    docs = [f"d{i:05d}" for i in range(pool)]
    qids = [f"q{i:04d}" for i in range(n_queries)]
    runs = {}
    for lane in "abcdefgh"[:n_lanes]:
        runs[lane] = Run({q: [Hit(d, rnd.random()) for d in rnd.sample(docs, depth)] for q in qids}, lane)
    qrels = [Qrel(q, d, rnd.choice([1, 2])) for q in qids for d in rnd.sample(docs, 5)]
    return runs, qrels, qids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=5.0, help="time spent measuring evaluations/s")
    args = ap.parse_args()

    import numpy as np

    from workbench.fasteval import CandidateMatrix, FusionSetting

    runs, qrels, qids = synthetic()
    t = time.perf_counter()
    m = CandidateMatrix(runs, qrels, qids)
    build = time.perf_counter() - t
    setting = FusionSetting(tuple(runs), "rrf", 60.0, {"a": 1.0, "b": 0.5, "c": 2.0, "d": 1.0})
    measures = ["R@10", "nDCG@10", "RR@10"]
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < args.seconds:
        m.mean(setting, measures)
        n += 1
    fast = n / (time.perf_counter() - t)

    import ranx

    qd: dict = {}
    for r in qrels:
        qd.setdefault(r.query_id, {})[r.doc_id] = r.relevance
    qrels_r = ranx.Qrels(qd)
    rruns = [ranx.Run({q: {h.doc_id: h.score for h in run[q]} for q in qids}, name=ln) for ln, run in runs.items()]
    ranx.evaluate(qrels_r, ranx.fuse(rruns, method="rrf", params={"k": 60}), ["recall@10", "ndcg@10", "mrr@10"])  # warm
    n2, t = 0, time.perf_counter()
    while time.perf_counter() - t < args.seconds or n2 < 3:
        fused = ranx.fuse(rruns, norm=None, method="rrf", params={"k": 60})
        ranx.evaluate(qrels_r, fused, ["recall@10", "ndcg@10", "mrr@10"])
        n2 += 1
    slow = n2 / (time.perf_counter() - t)
    print(f"# fusion-only evaluation, 1,000 queries × 4 lanes × 100 candidates (matrix built in {build:.2f} s)")
    print(f"workbench in memory : {fast:8.1f} evaluations/s   (target >= 250)")
    print(f"ranx fuse + evaluate: {slow:8.2f} evaluations/s")
    print(f"ratio               : {fast / slow:8.1f}x            (target >= 50x)")

    import optuna

    from workbench.space import Range, Study
    from workbench.tune import objective_value

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    import warnings

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    space = {"k": Range(1, 200, True, True), "weights": {ln: Range(0.0, 2.0) for ln in runs},
             "depth": {"a": (10, 20, 50, 100)}, "top_k": (10, 100)}

    def objective(trial):
        from workbench.space import suggest

        p = suggest(trial, st)
        s = FusionSetting(tuple(runs), "rrf", float(p["k"]), {ln: p[f"weights.{ln}"] for ln in runs},
                          {"a": p["depth.a"]}, top_k=p["top_k"])
        return float(m.evaluate(s, ["R@10"])["R@10"].mean())

    st = Study(Path("bench"), "bench", None, "synthetic", tuple(runs), "x", args.trials, 1, "train", "R@10", None,
               False, space)
    sampler = optuna.samplers.TPESampler(seed=1, multivariate=True, group=True)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    t = time.perf_counter()
    study.optimize(objective, n_trials=args.trials)
    wall = time.perf_counter() - t
    print(f"\n# {args.trials}-trial fusion study (TPE multivariate, 7 dimensions, in-memory storage)")
    print(f"wall {wall:.1f} s ({wall / args.trials * 1000:.1f} ms per trial; target <= 30 s for 1,000); "
          f"best R@10 {study.best_value:.4f}")

    import mlflow
    from mlflow.entities import Metric

    with tempfile.TemporaryDirectory() as tmp:
        mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
        # the store and the experiment exist in a real home: create them before timing; artifacts stay in tmp
        exp_id = mlflow.create_experiment("bench", artifact_location=Path(tmp, "artifacts").as_uri())
        import optuna.visualization as vis

        t = time.perf_counter()
        html = vis.plot_optimization_history(study).to_html(include_plotlyjs=True)
        (Path(tmp) / "plots.html").write_text(html)
        plots = time.perf_counter() - t
        t = time.perf_counter()
        with mlflow.start_run(experiment_id=exp_id, run_name="bench study") as run:
            client = mlflow.MlflowClient()
            now = int(time.time() * 1000)
            metrics = [Metric("trial_objective", float(tr.value), now, tr.number) for tr in study.trials]
            for i in range(0, len(metrics), 1000):
                client.log_batch(run.info.run_id, metrics=metrics[i:i + 1000])
            mlflow.log_artifact(str(Path(tmp) / "plots.html"))
        track = time.perf_counter() - t
    print(f"\n# MLflow tracking of the study (one run, {len(study.trials)} metrics batched, the plots file): "
          f"{track:.2f} s = {100 * track / wall:.1f}% of the study (target <= 5%)")
    print(f"# building the Optuna plots (plotly, first import included): {plots:.2f} s = {100 * plots / wall:.1f}%")
    ok = fast >= 250 and fast / slow >= 50 and (wall <= 30 or args.trials != 1000) and track <= 0.05 * wall
    print(f"\ntargets: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
