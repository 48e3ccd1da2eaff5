"""Cross-encoder costs (issues #11, #27): pairs/s of the torch fp32 and ONNX int8 paths at 32/128/256/512 tokens
against the CPU's measured matmul rate, reranking the top 50, the pairs each experiment's rerank stages score, and a
reranked eval from warm caches.

1. **pairs/s** (the table): :class:`workbench.reranking.scorers.CrossEncoderScorer` with ``backend="torch"`` (sentence-
   transformers, float32: the reference) and ``backend="int8"`` (ONNX Runtime, int8 weights: exported once by
   :mod:`workbench.reranking.onnx` into ``<home>/cache/onnx/``) at ``max_length`` 32/128/256/512 (``--lengths``), each at
   every thread count of ``--threads`` (default 1 and all cores). Pairs: real (query, passage) pairs of the dataset,
   :func:`workbench.reranking.onnx.probe_pairs` (``--probe-queries`` queries spread over the dataset, each with its judged
   relevant documents and others, ``--probe-texts`` in all), scored query by query as a reranker does; the texts
   are longer than the window, so a pair fills it (``tokens``: the length asked and, in brackets, the mean of
   ``min(max_length, query + passage word pieces + 3 specials)``). ``rate``: pairs/s of wall time, the mean over
   at least ``--seconds`` s and ``--reps`` passes over the pairs, after one untimed pass (the warm-up, whose scores
   are compared). Agreement of int8 with torch: Spearman's rank correlation of the pair scores
   (:func:`workbench.reranking.onnx.spearman`; the workbench uses int8 at 0.99 or more) and the largest absolute
   difference of the sigmoid scores. FLOPs per pair of ``n`` tokens: ``n * (2 * P_dense + 4 * n * d * n_layers)``
   (``_cpu.py``; ``d``, ``d_ff``, ``n_layers`` from the model's ``config.json``; the classifier head, once per pair,
   left out); ``share of limit`` = achieved FLOP/s / the float32 ``torch.mm`` 1024 x 1024 rate measured at the start
   of this run at the row's thread count (int8 can pass 1.0: narrower arithmetic than the limit's). ``load avg``:
   the 1-minute load average (``os.getloadavg()``) after the row.

   The model: ``--model``, else every trained one of the home, ``<home>/models/bilara-passages-ce`` and
   ``<home>/models/gita-ce`` (``make main`` trains them; each on its own dataset's pairs, its rows named by it), else
   an *untrained* one, :func:`workbench.testing.make_cross_encoder` (the shipped
   MiniLM with a random one-label head, exported into a temporary home): its rates are a trained model's (same
   shapes), but its scores mean nothing and sit in a narrow band, so its agreement figures understate a trained
   model's; the output says so.
2. **Top 50 for every query**: each dataset's queries x 50 pairs at the pairs/s measured at ``--window`` (the
   window the experiments run, 128) and the faster thread count; and one real measurement per path at that thread
   count: ``--queries`` dev queries x 50 documents of the (first) model's dataset (taken in turn, not a first
   stage's: the cost depends on the texts' lengths, not on which they are) through an empty pair-score cache
   (model time plus cache writes), then again from that cache.
3. **Warm eval** (``--skip-eval`` skips it; it needs ``make main`` first, and the trained models):
   ``workbench eval experiments/rerank.toml`` restricted to the gita, timed per config with the lane candidates and
   the pair scores cached: ``hybrid-ce`` and ``hybrid-e5`` against ``hybrid``, the same fused run without a rerank
   stage. Target: ``hybrid-ce`` at most 2x ``hybrid``; exit 1 when missed.
4. **Pairs scored per experiment** (no model run): for each experiment of ``experiments/`` with a rerank stage, per
   dataset and reranker, the distinct (query, document) pairs its configs send to the reranker = queries of the
   experiment's splits x the rerank depth, summed over distinct first stages (configs with the same lanes and
   fusion parameters rerank the same candidates: counted once, at the deepest depth). An upper bound: a first
   stage returning fewer than ``depth`` candidates sends fewer, and two first stages' candidates overlap. Then,
   per dataset, the pairs every experiment's cross-encoders score together, a pair counted once per model and
   window (what the shared pair-score cache lets through to the model), with the minutes it takes at the rates of
   part 1.

Models are loaded and warmed before their window; loading and the ONNX export are printed as ``cold`` lines.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_rerank.py [--quick] [--skip-eval] [--model FOLDER]
    [--dataset NAME] [--threads 1,2] [--lengths 32,128,256,512] [--window 128] [--queries 20] [--parts 1,2,3,4]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import tempfile
import time
import tomllib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from _cpu import config_dims, dims_line, flags_line, loadavg, measure_limits, print_table, row, table
from _timing import calls_per_s, cold_line, timed_call

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PATHS = ("CE torch fp32", "CE ONNX int8")
DEPTH = 50


def resolve_models(arg: str | None, home: Path, tmp: Path, max_length: int) -> list[tuple[Path, bool]]:
    """[(a cross-encoder folder, whether it is trained)]: ``--model``; else every trained model of the home
    (``<home>/models/bilara-passages-ce``, ``<home>/models/gita-ce``); else an untrained one written to ``tmp``."""
    if arg:
        return [(Path(arg).expanduser().resolve(), True)]
    found = [(home / "models" / f"{name}-ce", True) for name in ("bilara-passages", "gita")
             if (home / "models" / f"{name}-ce" / "config.json").is_file()]
    if found:
        return found
    import logging

    from workbench.embedding.embedders import quiet_load_bars
    from workbench.testing import make_cross_encoder

    quiet_load_bars()  # no "Loading weights" bars in a log
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)  # "Converting SentenceTransformer model ..."
    return [(make_cross_encoder(tmp / "ce-untrained", max_length=max_length), False)]


def pairs_of(ds: Any, folder: Path, queries: int, texts: int) -> list[tuple[str, list[str]]]:
    """:func:`workbench.reranking.onnx.probe_pairs` of ``ds``, the texts in the order the model was trained on where the
    workbench knows it."""
    from workbench.reranking.onnx import probe_pairs

    kwargs: dict[str, Any] = {"queries": queries, "texts": texts}
    if "order" in inspect.signature(probe_pairs).parameters:
        try:
            from workbench.reranking.scorers import trained_text_order

            kwargs["order"] = trained_text_order(folder)
        except ImportError:
            pass
    return probe_pairs(ds, **kwargs)


def first_stage(cfg: Any, canon: dict[str, str] | None = None) -> tuple:
    """What decides a config's reranked candidates: its fusion spec but ``top_k`` (the fusion keeps ``max(top_k,
    depth)`` hits and the rerank stage reads the top ``depth``); lane names replaced by ``canon[name]`` when given
    (the lane's own parameters, so lanes of two experiments compare)."""
    from workbench.eval.fusion import FusionSpec

    def lane(x: Any) -> Any:
        return canon.get(x, x) if canon and isinstance(x, str) else x

    def freeze(name: str, value: Any) -> Any:
        if isinstance(value, dict) or hasattr(value, "items"):
            return tuple(sorted((lane(k), v) for k, v in value.items()))
        if name == "lanes":
            return tuple(lane(x) for x in value)
        if name in ("tiebreak_lane", "pin_lane"):
            return lane(value)
        return value

    return tuple((f.name, freeze(f.name, getattr(cfg, f.name))) for f in fields(FusionSpec) if f.name != "top_k")


def canonical_lanes(exp: Any) -> dict[str, str]:
    """Lane name → its kind and parameters (defaults filled, an embedder name replaced by the embedder's table)."""
    out = {}
    for name, spec in exp.lanes.items():
        params = spec.canonical()
        if isinstance(params.get("embedder"), str) and params["embedder"] in exp.embedders:
            params["embedder"] = exp.embedders[params["embedder"]]
        out[name] = json.dumps([spec.kind, params], sort_keys=True, default=str)
    return out


def experiment_pairs(datasets: dict[str, Any], rate_at) -> None:
    """Part 4: print the pairs each experiment's rerank stages read (module docstring)."""
    from workbench.data.catalog import load
    from workbench.errors import ConfigError
    from workbench.experiment.config import load_experiment

    rows, shared = [], {}  # shared: dataset → {(stage, model, window): {query_id: depth}}
    for path in sorted((ROOT / "experiments").glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        configs = raw.get("configs")
        if "experiment" in raw or not isinstance(configs, dict):  # a tune or gate file: it points at an experiment
            continue
        if not any(isinstance(c, dict) and "rerank" in c for c in configs.values()):
            continue
        try:
            exp = load_experiment(path)
        except ConfigError as exc:
            print(f"{path.name}: not read ({str(exc)[:200]})")
            continue
        canon = canonical_lanes(exp)
        for dname in exp.datasets:
            if dname not in datasets:
                datasets[dname] = load(dname)
            queries = [q.query_id for q in datasets[dname].queries if q.split in exp.splits]
            by_reranker: dict[str, dict[tuple, int]] = {}
            names: dict[str, list[str]] = {}
            for cfg in exp.configs.values():
                if cfg.rerank is None:
                    continue
                stages = by_reranker.setdefault(cfg.rerank.reranker, {})
                key = first_stage(cfg)
                stages[key] = max(stages.get(key, 0), cfg.rerank.depth)
                names.setdefault(cfg.rerank.reranker, []).append(cfg.name)
            every: dict[tuple, int] = {}
            for rname, stages in by_reranker.items():
                spec = exp.rerankers[rname]
                params = spec.parsed()
                what, est = spec.kind, ("", "")
                if spec.kind == "cross-encoder":
                    model = params.model.replace("{dataset}", dname)
                    what = f"cross-encoder {model}, window {params.max_length}"
                    for cfg in exp.configs.values():
                        if cfg.rerank is not None and cfg.rerank.reranker == rname:
                            seen = shared.setdefault(dname, {}).setdefault(
                                (first_stage(cfg, canon), model, params.max_length), {})
                            for q in queries:
                                seen[q] = max(seen.get(q, 0), cfg.rerank.depth)
                    pairs = len(queries) * sum(stages.values())
                    est = tuple(_minutes(pairs, rate_at(p, params.max_length)) for p in PATHS)
                else:
                    pairs = len(queries) * sum(stages.values())
                for key, depth in stages.items():
                    every[key] = max(every.get(key, 0), depth)
                rows.append((exp.name, dname, f"{rname} ({what})", ", ".join(names[rname]), len(stages),
                             f"{len(queries):,} ({'+'.join(exp.splits)})", f"{pairs:,}", *est))
            if len(by_reranker) > 1:
                rows.append((exp.name, dname, "all its rerankers", "", len(every), f"{len(queries):,}",
                             f"{len(queries) * sum(every.values()):,}", "", ""))
    for dname, seen in shared.items():
        by_window: dict[int, int] = {}
        for (_stage, _model, window), per_query in seen.items():
            by_window[window] = by_window.get(window, 0) + sum(per_query.values())
        pairs = sum(by_window.values())
        est = [sum(_minutes(n, rate_at(p, w), raw=True) for w, n in by_window.items()) for p in PATHS]
        rows.append(("all experiments", dname, "cross-encoders, a pair once per model and window", "",
                     len(seen), "", f"{pairs:,}", *(f"{m:.1f}" if m == m else "?" for m in est)))
    print(table(("experiment", "dataset", "reranker", "configs", "first stages", "queries (splits)",
                 "distinct pairs", "est. min torch", "est. min int8"), rows, right=(4, 5, 6, 7, 8)))


def _minutes(pairs: int, rate: float | None, raw: bool = False) -> Any:
    value = pairs / rate / 60 if rate else float("nan")
    return value if raw else (f"{value:.1f}" if rate else "?")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a check that it runs: 2 queries x 8 texts, 1 pass per "
                                                         "figure, 2 queries' top 50")
    ap.add_argument("--model", help="cross-encoder folder (default: <home>/models/bilara-passages-ce and "
                                    "gita-ce where they exist, else an untrained MiniLM head)")
    ap.add_argument("--dataset", help="dataset of the pairs (default: the model's, from its folder name "
                                      "NAME-ce, else bilara-passages)")
    ap.add_argument("--probe-queries", type=int, default=None, help="queries of the pairs (default 8; --quick 2)")
    ap.add_argument("--probe-texts", type=int, default=None, help="passages per query (default 16; --quick 8)")
    ap.add_argument("--seconds", type=float, default=None, help="least seconds per figure (default 2; --quick 0)")
    ap.add_argument("--reps", type=int, default=None, help="least passes per figure (default 3; --quick 1)")
    ap.add_argument("--threads", default=None, help="thread counts, e.g. 1,2 (default: 1 and all usable cores)")
    ap.add_argument("--lengths", default="32,128,256,512", help="max_length values (default 32,128,256,512)")
    ap.add_argument("--window", type=int, default=128, help="max_length of part 2 (default 128, the experiments')")
    ap.add_argument("--batch", type=int, default=32, help="pairs per forward pass (default 32)")
    ap.add_argument("--queries", type=int, default=None, help="queries whose top 50 is scored for real in part 2 "
                                                              "(default 20; --quick 2)")
    ap.add_argument("--skip-eval", action="store_true", help="skip part 3 (it needs `make main` first)")
    ap.add_argument("--parts", default="1,2,3,4", help="the parts to run, e.g. 1,4 (default: all; 2 needs 1)")
    args = ap.parse_args()
    parts = {int(p) for p in args.parts.split(",")}
    n_q = args.probe_queries or (2 if args.quick else 8)
    n_t = args.probe_texts or (8 if args.quick else 16)
    seconds = args.seconds if args.seconds is not None else (0.0 if args.quick else 2.0)
    reps = args.reps or (1 if args.quick else 3)
    top_queries = args.queries or (2 if args.quick else 20)
    lengths = sorted({int(x) for x in args.lengths.split(",")})

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from workbench._infra.threads import usable_cores
    from workbench.data.catalog import load
    from workbench.settings import home_dir

    home = home_dir()
    cores = usable_cores()
    threads = sorted({int(x) for x in args.threads.split(",")}) if args.threads else sorted({1, cores})
    print(f"# bench_rerank — {cores} usable cores, threads {threads}; home {home}")
    print(flags_line())
    datasets: dict[str, Any] = {}
    colds: list[str] = []
    rates: dict[str, dict[int, float]] = {}  # path → max_length → pairs/s at the faster thread count
    fastest: dict[tuple[str, int], int] = {}  # (path, max_length) → that thread count
    status = 0

    def rate_at(path: str, length: int) -> float | None:
        """Pairs/s of ``path`` at ``length`` (the nearest length measured)."""
        got = rates.get(path)
        if not got:
            return None
        return got[min(got, key=lambda L: (abs(L - length), L))]

    with tempfile.TemporaryDirectory(prefix="bench-rerank-") as tmp_s:
        tmp = Path(tmp_s)
        if parts & {1, 2}:
            import torch
            from transformers import AutoTokenizer
            from transformers.utils import logging as hf_logging

            from workbench.reranking.onnx import spearman
            from workbench.reranking.scorers import CrossEncoderScorer

            hf_logging.set_verbosity_error()
            limits = measure_limits(threads, 0.1 if args.quick else 0.5, 2 if args.quick else 4)
            models = resolve_models(args.model, home, tmp, max(lengths))
            table_rows: list[tuple] = []
            live: dict[str, Any] = {}  # the first model's: dataset, folder, ONNX home, scorers (part 2)

            def measure(folder: Path, trained: bool, suffix: str) -> None:
                """Part 1 for one model: its rows into ``table_rows``, its rates into ``rates``."""
                dname = args.dataset or (folder.name[:-3] if folder.name.endswith("-ce") else "bilara-passages")
                ds = datasets.setdefault(dname, load(dname))
                onnx_home = home if trained else tmp / "home"
                dims = config_dims(folder)
                print(f"model: {folder}" + ("" if trained else
                      " — UNTRAINED head (workbench.testing.make_cross_encoder: no trained model in the home): "
                      "rates as a trained model's, scores meaningless, agreement understated"))
                print(dims_line("cross-encoder", dims, "its config.json"))
                groups = pairs_of(ds, folder, n_q, n_t)
                tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
                full = [len(tok(q, t)["input_ids"]) for q, texts in groups for t in texts]
                n_pairs = len(full)
                print(f"pairs: {n_pairs} real (query, passage) pairs of {dname} ({len(groups)} queries x up to "
                      f"{n_t} passages); whole pair {sum(full) / n_pairs:.0f} word pieces on average, "
                      f"{sum(x >= max(lengths) for x in full)} of {n_pairs} fill {max(lengths)}")

                def run_all(scorer: Any) -> list[float]:
                    return [float(s) for q, texts in groups for s in scorer.score(q, texts)]

                def add(path: str, L: int, t: int, rate: float, agreement: str) -> None:
                    toks = [min(L, x) for x in full]
                    table_rows.append(row(path + suffix, L, toks, t, rate, "pairs/s", agreement, dims, limits,
                                          loadavg()))
                    if rate > rates.get(path, {}).get(L, 0.0):
                        rates.setdefault(path, {})[L] = rate
                        fastest[(path, L)] = t
                    print(f"  {path}{suffix}, max_length {L}, {t} thread{'s' * (t > 1)}: {rate:,.1f} pairs/s",
                          flush=True)

                reference: dict[int, list[float]] = {}
                torch_scorers: dict[int, Any] = {}
                int8_scorers: dict[tuple[int, int], Any] = {}
                if not live:
                    live.update(ds=ds, folder=folder, onnx_home=onnx_home, torch=torch_scorers, int8=int8_scorers)
                for t in threads:
                    for L in lengths:
                        if L not in torch_scorers:
                            torch_scorers[L] = CrossEncoderScorer(folder, max_length=L, backend="torch", threads=t,
                                                                  batch_size=args.batch)
                        sc = torch_scorers[L]
                        torch.set_num_threads(t)
                        secs, scores = timed_call(run_all, sc)  # warm-up (the first: the model load)
                        torch.set_num_threads(t)  # a model's load sets the thread count it was made with
                        if (L, t) == (lengths[0], threads[0]):
                            colds.append(cold_line(f"CE torch{suffix}: model load + first {n_pairs} pairs at {L} "
                                                   "tokens", secs, "the model files read"))
                        reference.setdefault(L, scores)
                        rate = calls_per_s(lambda sc=sc: run_all(sc), seconds, reps) * n_pairs
                        add(PATHS[0], L, t, rate, "reference")
                try:
                    for t in threads:
                        for L in lengths:
                            sc = int8_scorers[(L, t)] = CrossEncoderScorer(folder, max_length=L, backend="int8",
                                                                           threads=t, home=onnx_home,
                                                                           batch_size=args.batch)
                            secs, scores = timed_call(run_all, sc)  # warm-up (the first: the export, if not cached)
                            if (L, t) == (lengths[0], threads[0]):
                                colds.append(cold_line(f"CE int8{suffix}: ONNX session + first {n_pairs} pairs at "
                                                       f"{L} tokens", secs, "the export and quantisation into "
                                                       f"{onnx_home}/cache/onnx unless cached there"))
                            rate = calls_per_s(lambda sc=sc: run_all(sc), seconds, reps) * n_pairs
                            diff = max(abs(a - b) for a, b in zip(scores, reference[L]))
                            add(PATHS[1], L, t, rate, f"ρ {spearman(reference[L], scores):.4f}, max |Δ| {diff:.4f}")
                except Exception as exc:  # noqa: BLE001 - said; the torch figures stand
                    print(f"CE ONNX int8 path{suffix} did not run: {type(exc).__name__}: {str(exc)[:300]}")

            for folder, trained in models:
                measure(folder, trained, f" ({folder.name})" if len(models) > 1 else "")
            at = ", ".join(f"{t}: {g:.1f} GFLOP/s" for t, g in limits.items())
            print(f"\n## 1. cross-encoder pairs/s by path, max_length (asked, mean pair tokens), threads; limit = "
                  f"float32 matmul at that thread count ({at})"
                  + ("" if models[0][1] else "; UNTRAINED head"))
            print_table(table_rows)

            if 2 in parts:
                w = args.window
                print(f"\n## 2. reranking the top {DEPTH} of every query, at max_length {w} (rates: the nearest "
                      "length measured, the faster thread count)")
                est = []
                for name in ("gita", "bilara-passages"):
                    d = datasets.setdefault(name, load(name))
                    pairs = len(d.queries) * DEPTH
                    est.append((name, f"{len(d.queries):,}", f"{pairs:,}",
                                *(_minutes(pairs, rate_at(p, w)) for p in PATHS)))
                print(table(("dataset", "queries", f"pairs (x {DEPTH})", "est. min torch", "est. min int8"), est,
                            right=(1, 2, 3, 4)))
                from workbench.reranking.scorers import CachedScorer, PairScoreCache
                from workbench.text.doctext import index_text

                docs = list(live["ds"].documents)
                queries = [q for q in live["ds"].queries if q.split == "dev"][:top_queries]
                lists = [[index_text(docs[(i * 7 + j) % len(docs)]) for j in range(DEPTH)] for i in range(len(queries))]
                n = len(queries) * DEPTH
                folder, onnx_home = live["folder"], live["onnx_home"]
                t_torch, t_int8 = (fastest.get((p, w), max(threads)) for p in PATHS)
                inners = [(PATHS[0], t_torch, live["torch"].get(w) or CrossEncoderScorer(
                              folder, max_length=w, backend="torch", threads=t_torch, batch_size=args.batch)),
                          (PATHS[1], t_int8, live["int8"].get((w, t_int8))
                           or CrossEncoderScorer(folder, max_length=w, backend="int8", threads=t_int8,
                                                 home=onnx_home, batch_size=args.batch))]
                for label, t, inner in inners:
                    try:
                        inner.score(queries[0].text, lists[0][:2])  # loaded, warm
                        torch.set_num_threads(t)
                        scorer = CachedScorer(inner, PairScoreCache(tmp / f"pairs-{label.split()[1]}.sqlite"))
                        cold_s, _ = timed_call(lambda scorer=scorer: [scorer.score(q.text, ts) for q, ts in zip(queries, lists)])
                        warm_s, _ = timed_call(lambda scorer=scorer: [scorer.score(q.text, ts) for q, ts in zip(queries, lists)])
                    except Exception as exc:  # noqa: BLE001 - said; the other path still runs
                        print(f"{label}: did not run: {type(exc).__name__}: {str(exc)[:200]}")
                        continue
                    print(f"measured, {label} ({folder.name} on {live['ds'].name}), {t} thread{'s' * (t > 1)}: "
                          f"{len(queries)} dev queries x {DEPTH} = {n} pairs through an empty pair-score cache: "
                          f"{cold_s:.1f} s ({n / cold_s:.1f} pairs/s); again from the cache: {warm_s * 1000:.0f} ms "
                          f"({warm_s * 1000 / len(queries):.1f} ms per query)")

    if 3 in parts and not args.skip_eval:
        status = warm_eval(home)
    if 4 in parts:
        print("\n## 4. pairs scored per experiment (counted from the configs and the datasets; no model run)")
        experiment_pairs(datasets, rate_at)
    for line in colds:
        print(line)
    return status


def warm_eval(home: Path) -> int:
    """Part 3: ``experiments/rerank.toml`` on the gita, warm, per config; 1 when ``hybrid-ce`` takes more than 2x
    ``hybrid``."""
    print("\n## 3. eval of experiments/rerank.toml on gita, lanes and pair scores cached")
    if not (home / "models" / "gita-ce" / "config.json").is_file():
        print(f"skipped: no trained cross-encoder at {home / 'models' / 'gita-ce'} (`make main` trains it)")
        return 0
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import run_experiment

    exp = load_experiment(ROOT / "experiments" / "rerank.toml")
    rows = []
    for name in ("hybrid", "hybrid-ce", "hybrid-e5"):
        sub = replace(exp, configs={name: exp.configs[name]}, datasets=("gita",))
        run_experiment(sub)  # warm: imports, lanes and pair scores read once
        t = time.perf_counter()
        res = run_experiment(sub)
        rows.append((name, time.perf_counter() - t, res.cache_misses))
    base = rows[0][1]
    print(table(("config", "wall s", "x hybrid", "lane cache misses"),
                [(name, f"{s:.2f}", f"{s / base:.2f}", misses) for name, s, misses in rows], right=(1, 2, 3)))
    ratio = rows[1][1] / base
    print(f"target: hybrid-ce at most 2x hybrid: {ratio:.2f}x, {'met' if ratio <= 2 else 'NOT met'}")
    return 0 if ratio <= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
