"""The pool's plan from an experiment: the configs' and lanes' rankings out of the candidate cache.

The pooling rule itself (priorities, tiers, the audit sample, Judged@k, storing a plan) is
:mod:`workbench.judging.pooling`, below the experiment layer; this module reads an
:class:`~workbench.experiment.config.Experiment`'s cached candidates and fuses them
(:func:`workbench.experiment.runner.fused_run`) to feed it. ``workbench judge pool`` calls
:func:`check_request` then :func:`plan_pool`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from workbench.errors import ConfigError
from workbench.judging.pooling import (
    AUDIT_SHARE,
    EXACT_RULE,
    EXACT_TYPES,
    FILTER_RULE,
    JUDGED_K,
    LANE_WEIGHT,
    LOW_RANK_SHARE,
    PRIORITY_RULE,
    TIERS,
    PoolPlan,
    answering_systems,
    best_ranks,
    bounded_int,
    finite_values,
    judged_at,
    priorities,
    restrict_to_answering,
    tie_key,
)
from workbench.judging.store import PoolPair
from workbench.run import Run
from workbench.types import DEFAULT_SEED


def top_lists(cfg, runs: Mapping[str, Run], k: int) -> dict[str, tuple[str, ...]]:
    """The first ``k`` doc ids of config ``cfg``'s ranking per query, exactly as
    :func:`workbench.experiment.runner.fused_run` ranks them (a prefix of that run), without building the whole run.

    Args:
        cfg: a :class:`~workbench.experiment.config.FusedConfig`.
        runs: its lanes' runs (lane name → :class:`~workbench.run.Run`).
        k: how many doc ids to keep per query.
    """
    from workbench.experiment.runner import fused_run

    keep = min(cfg.top_k, k)
    if cfg.method == "none":
        out = {}
        for qid, hits in runs[cfg.lanes[0]].items():
            if cfg.min_score is not None:
                hits = tuple(h for h in hits if h.score >= cfg.min_score)
            out[qid] = tuple(h.doc_id for h in hits[:keep])
        return out
    fused = fused_run(replace(cfg, top_k=keep), {n: runs[n] for n in cfg.lanes})  # the same order, cut at keep
    return {qid: tuple(h.doc_id for h in hits) for qid, hits in fused.items()}


def check_request(exp, dataset: str, *, configs: Sequence[str] | None = None, depth: int = 10,
                  splits: Sequence[str] | None = None, max_pairs: int | None = None, raters_per_pair: int = 2,
                  audit: int | None = None, seed: int = DEFAULT_SEED) -> tuple[list[str], list[str]]:
    """Check a pooling request before anything is read or written (:func:`plan_pool`'s arguments).

    Returns:
        ``(configs, splits)``: the config names and splits to pool, defaults filled in.

    Raises:
        ConfigError: an unknown config, a dataset the experiment does not evaluate, an unknown split, or a
            depth (1 .. the experiment's depth), max_pairs (>= 1), audit (>= 0), raters per pair (1..10)
            or seed (>= 0) out of range; the message names the option and the fix.
    """
    from workbench.types import SPLITS

    names = list(dict.fromkeys(configs or exp.configs))
    unknown = [c for c in names if c not in exp.configs]
    if unknown:
        raise ConfigError(f"{exp.path} has no config {unknown[0]!r}; its configs: {', '.join(exp.configs)}")
    if dataset not in exp.datasets:
        raise ConfigError(f"dataset {dataset!r} is not one of {exp.path}'s datasets ({', '.join(exp.datasets)}); "
                          "pool a dataset the experiment evaluates (its candidates are in the cache)")
    bounded_int(depth, 1, exp.depth, "--depth", f"pool at most the {exp.depth} candidates {exp.path.name} caches per lane")
    if max_pairs is not None:
        bounded_int(max_pairs, 1, None, "--max-pairs", "leave it out to pool every pair")
    if audit is not None:
        bounded_int(audit, 0, None, "--audit", "give 0 for no audit sample")
    bounded_int(raters_per_pair, 1, 10, "--raters-per-pair", "2 is the usual double judging")
    bounded_int(seed, 0, 2**63 - 1, "--seed", "any non-negative integer")
    chosen_splits = list(dict.fromkeys(splits or exp.splits))
    bad = [s for s in chosen_splits if s not in SPLITS]
    if bad:
        raise ConfigError(f"--split {bad[0]!r} is not a split; use {', '.join(SPLITS)}")
    return names, chosen_splits


def plan_pool(exp, dataset: str, *, configs: Sequence[str] | None = None, depth: int = 10,
              splits: Sequence[str] | None = None, max_pairs: int | None = None, raters_per_pair: int = 2,
              audit: int | None = None, seed: int = DEFAULT_SEED, home: Path | None = None, store=None,
              engine=None, log: Callable[[str], None] = lambda _m: None,
              exact_types: Sequence[str] = EXACT_TYPES) -> PoolPlan:
    """Plan a depth-k pool of one dataset over some configs of an experiment (see the module docstring).

    Reads the candidate cache (running a lane only on a miss, as ``workbench eval`` does), the built
    dataset and the judgment store; writes nothing (:func:`store_pool` stores the plan).

    Args:
        exp: a loaded :class:`~workbench.experiment.config.Experiment`.
        dataset: one of the experiment's datasets.
        configs: config names (default: every config of the experiment).
        depth: how many of each config's and lane's hits are pooled (1 .. the experiment's ``depth``).
        splits: the splits whose queries are pooled (default: the experiment's).
        max_pairs: keep at most this many pairs (audit included), the highest priorities; None: all.
        raters_per_pair: judging slots per pair (1..10).
        audit: how many built labels to sample for the audit; None: :data:`AUDIT_SHARE` of the pool.
        seed: breaks ties and draws the audit sample.
        home: the workbench home (datasets, caches); default :func:`workbench.settings.home_dir`.
        store: a :class:`~workbench.judging.store.JudgmentStore` (default: the home's).
        engine: a :class:`workbench.experiment.runner.Engine` of ``exp`` to reuse (its embedders stay loaded between
            calls); default: a new one.
        log: progress messages.
        exact_types: query types whose pairs are not pooled (default :data:`EXACT_TYPES`; ``()`` pools every
            query, e.g. to audit the reference grammar by hand).

    Raises:
        ConfigError: an unknown config, dataset or split; a depth, max_pairs, audit, raters per pair or
            seed out of range (each names the option and the fix; checked before anything is read); no
            query in the chosen splits.
        DataError, StaleError, PgError: from the dataset, the lanes or the store.
    """
    from workbench.data import catalog
    from workbench.experiment.cache import CandidateCache
    from workbench.experiment.runner import Engine, lane_candidates
    from workbench.judging import layers
    from workbench.settings import home_dir

    t0 = time.perf_counter()
    names, chosen_splits = check_request(exp, dataset, configs=configs, depth=depth, splits=splits,
                                         max_pairs=max_pairs, raters_per_pair=raters_per_pair, audit=audit, seed=seed)
    home = Path(home) if home is not None else home_dir()
    ds = catalog.ensure(dataset, catalog.load_definitions(), home=home, log=log)
    queries = [q for q in ds.queries if q.split in chosen_splits]
    qids = [q.query_id for q in queries]
    if not queries:
        raise ConfigError(f"dataset {dataset} has no {'/'.join(chosen_splits)} queries to pool; choose other --split")
    own = store is None
    if own:
        from workbench.judging.store import JudgmentStore

        store = JudgmentStore.open(home)
    try:
        with store.snapshot():  # judged, pooled and the merged layer as of one moment
            judged = store.judged_pairs(dataset)
            pooled = store.pooled_pairs(dataset)
            human, merged = layers.human_layers(ds, store)
    finally:
        if own:
            store.close()

    sub = replace(exp, configs={c: exp.configs[c] for c in names})
    engine = engine if engine is not None else Engine(sub, home, False, log)
    cache = CandidateCache(home / "cache" / "candidates", log=log)
    lanes = lane_candidates(sub, ds, engine, cache, log)
    wanted = set(qids)
    runs = {ln: lr.run for ln, lr in lanes.items()}
    if len(wanted) < len(ds.queries):
        # only the pooled queries: fusion is per query, so this changes no ranking and saves the rest
        runs = {ln: Run({q: hits for q, hits in run.items() if q in wanted}, run.name) for ln, run in runs.items()}
    keep = max(depth, JUDGED_K)
    fused = {}
    for c in names:
        cfg = sub.configs[c]
        if cfg.rerank is None:
            fused[c] = top_lists(cfg, runs, keep)
        else:  # the ranking a reader sees: fused, then the rerank stage
            from workbench.experiment.runner import config_run

            run = config_run(cfg, runs, ds, engine, queries)
            fused[c] = {qid: tuple(h.doc_id for h in hits[:keep]) for qid, hits in run.items()}
    systems: dict[str, tuple[float, Mapping[str, Sequence[str]]]] = {f"config:{c}": (1.0, fused[c]) for c in names}
    systems.update({f"lane:{ln}": (LANE_WEIGHT, {q: tuple(h.doc_id for h in hits[:depth]) for q, hits in run.items()})
                    for ln, run in runs.items()})
    languages = {q.query_id: q.language for q in queries}
    relevant: dict[str, set] = {}
    for r in ds.qrels:
        if r.relevance >= 1 and r.query_id in wanted:
            relevant.setdefault(r.query_id, set()).add(r.doc_id)
    answering = answering_systems(systems, languages, relevant, depth)
    every = priorities(systems, qids, depth)
    answers = restrict_to_answering(systems, languages, answering)
    prio = priorities(answers, qids, depth)
    low_cut = math.ceil(LOW_RANK_SHARE * depth)
    best = best_ranks(answers, qids, depth)
    # a pair graded only on a text that has changed since (stale) is not judged: it may be pooled again
    fresh = {(r.query_id, r.doc_id) for r in human.qrels}
    restale = judged - fresh
    judged, pooled = fresh, pooled - restale
    built = {(r.query_id, r.doc_id) for r in ds.qrels}
    exact = {q.query_id for q in queries if q.query_type in set(exact_types)}
    excluded = {"judged": 0, "pooled": 0, "built": 0, "exact": 0, "language": 0, "low": 0}
    ranked = []
    skipped_queries = set()
    for key in every:
        p = prio.get(key)
        if key in judged:
            excluded["judged"] += 1
        elif key in pooled:
            excluded["pooled"] += 1
        elif key in built:
            excluded["built"] += 1
        elif p is None:  # only systems that do not answer the query's language ranked it
            excluded["language"] += 1
        elif best[key] > low_cut:  # every system that answers ranks it low
            excluded["low"] += 1
        elif key[0] in exact:
            excluded["exact"] += 1
            skipped_queries.add(key[0])
        else:
            ranked.append((key, p))
    ranked.sort(key=lambda kp: (-kp[1], tie_key(seed, "pool", *kp[0])))

    auditable = sorted((key for key in built if key[0] in wanted and key[0] not in exact and key not in judged
                        and key not in pooled), key=lambda key: tie_key(seed, "audit", *key))
    if max_pairs is not None:
        n_audit = min(audit if audit is not None else math.ceil(AUDIT_SHARE * max_pairs), max_pairs, len(auditable))
        n_pool = min(len(ranked), max_pairs - n_audit)
    else:
        n_pool = len(ranked)
        n_audit = min(audit if audit is not None else math.ceil(AUDIT_SHARE * n_pool), len(auditable))
    capped = len(ranked) - n_pool
    pairs = [PoolPair(q, d, tier=i * TIERS // n_pool, priority=round(p, 6), reason="pool")
             for i, ((q, d), p) in enumerate(ranked[:n_pool])]
    pairs += [PoolPair(q, d, tier=j * TIERS // n_audit, priority=round(prio.get((q, d), 0.0), 6), reason="audit")
              for j, (q, d) in enumerate(auditable[:n_audit])]
    pairs.sort(key=lambda p: (p.tier, -p.priority, tie_key(seed, p.reason, p.query_id, p.doc_id)))
    tiers: dict[int, int] = {}
    for pair in pairs:
        tiers[pair.tier] = tiers.get(pair.tier, 0) + 1

    now: dict[str, set] = {}
    for r in merged.qrels:
        now.setdefault(r.query_id, set()).add(r.doc_id)
    open_elsewhere = {key for key in pooled if key not in judged}
    after = {q: set(docs) for q, docs in now.items()}
    for q, d in [*((p.query_id, p.doc_id) for p in pairs), *open_elsewhere]:
        after.setdefault(q, set()).add(d)
    judged_now = {c: judged_at(fused[c], now, qids) for c in names}
    judged_after = {c: judged_at(fused[c], after, qids) for c in names}

    outputs = ds.manifest.get("outputs", {})
    params = {"experiment": str(exp.path), "experiment_name": exp.name, "configs": names,
              "lanes": sorted(runs), "depth": depth, "splits": chosen_splits, "max_pairs": max_pairs,
              "audit": n_audit, "audit_requested": audit, "seed": seed, "priority": PRIORITY_RULE, "tiers": TIERS,
              "hash.documents": outputs.get("documents.jsonl"), "hash.queries": outputs.get("queries.tsv"),
              "hash.qrels": outputs.get("qrels.txt"), "merged_qrels_sha256": merged.sha256,
              "judged_at_10_now": finite_values(judged_now), "judged_at_10_after": finite_values(judged_after),
              "repooled": sorted([p.query_id, p.doc_id] for p in pairs if (p.query_id, p.doc_id) in restale),
              "skipped": {"query_types": list(exact_types), "rule": EXACT_RULE, "pairs": excluded["exact"],
                          "queries": len(skipped_queries)},
              "filtered": {"rule": FILTER_RULE, "language": excluded["language"], "low": excluded["low"],
                           "low_rank_cut": low_cut, "languages": answering}}
    return PoolPlan(dataset, tuple(pairs), raters_per_pair, params, tuple(names), len(queries), len(every), excluded,
                    capped, len(open_elsewhere), merged.stale, judged_now, judged_after,
                    time.perf_counter() - t0, dict(sorted(tiers.items())))
