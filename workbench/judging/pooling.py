"""TREC depth-k pooling from the candidate cache: what scholars should judge next, most useful first.

**The pool** (``workbench judge pool``): for the queries of the chosen splits of one dataset,
the union of every named config's fused top ``depth`` and every one of their lanes' top
``depth`` (TREC depth-k pooling: Spärck Jones and van Rijsbergen 1975; Voorhees and Harman,
*TREC*, MIT Press 2005, ch. 2), minus

* pairs a human already graded or that sit in an earlier pool of the dataset
  (:meth:`~workbench.judging.store.JudgmentStore.judged_pairs`,
  :meth:`~workbench.judging.store.JudgmentStore.pooled_pairs`): a pair is never pooled twice —
  unless every grade it has was given on a text the document no longer has (*stale*): such a
  pair is pooled again (``params["repooled"]``), for the same raters too;
* pairs the built qrels already label — except an **audit sample** of them (reason
  ``audit``): a uniform, seeded sample of the built labels of the pooled queries, so the
  scholars' grades also estimate how often the built labels are wrong. Raters cannot tell
  audit pairs from the others (blind: the store never shows why a pair was pooled);
* every pair of a query whose type has **exact answers** (:data:`EXACT_TYPES`: ``reference``,
  ``page_ref``; :data:`EXACT_RULE`): the reference grammar (:mod:`workbench.text.refs`) resolves
  "BG 2.47" or "M i 56" to the documents it names, so the built qrels of such a query are exact
  and complete, and any other document is not what it asks for. Pooling them only asks scholars to
  confirm zeros (issue #28: 13 of 29 pooled pairs were "Bhagavad-gita N.M" against BG 18.63, which a
  lexical lane matched on the word "Gita"). They are counted (``excluded["exact"]``) and named in
  the pool's ``params["skipped"]``; their built labels are not audited either.

Candidates come from the candidate cache exactly as ``workbench eval`` leaves them
(:func:`workbench.experiment.runner.lane_candidates`; fusion in memory, :func:`workbench.experiment.runner.fused_run`):
with a warm cache nothing is queried. A lane whose candidates are missing runs once and is
cached, as in ``eval``.

**Priority** — how much one judgment can move the comparison of the configs. A judgment of
a document at rank r changes a config's nDCG@k and Judged@k in proportion to the rank
discount 1 / log2(r + 1) (the DCG discount, Järvelin and Kekäläinen 2002), so

    priority(q, d) = Σ_configs 1 / log2(1 + rank_c(q, d)) + ½ · Σ_lanes 1 / log2(1 + rank_l(q, d))

over the systems that rank d within their top ``depth`` for q: a document many configs rank
high scores highest; a lane counts half a config (lanes are what tuning recombines, the configs
what is compared today). This is a static form of prioritised pooling; **move-to-front pooling**
(Cormack, Palmer and Clarke, "Efficient construction of large test collections", SIGIR 1998)
is the known adaptive alternative: it re-orders systems after every judgment by how many
relevant documents each has found, which needs the grades as they arrive rather than a queue
built once.

**Order and tiers.** Pairs are sorted by priority (highest first), ties broken by a hash of
(seed, query, document), so a seed gives one order; the sorted pool is cut into
:data:`TIERS` equal tiers (deciles of the priority ranking, tier 0 first). The store hands
out tier 0 before tier 1 (each rater shuffled within a tier by their own seed), so queues
start with what matters. Audit pairs are spread evenly across the tiers. ``max_pairs`` keeps
the first pairs of that order (the audit sample counts within it).

**Judged@10 now and after.** For each config, the mean Judged@10 (ir_measures' judgment rate:
judged documents in the top min(10, length) over that length; a query without hits 0; a query
without any judgment left out — what ``workbench eval`` computes) on the pooled queries under
the ``merged`` layer now, and once this pool (and the pairs still open in earlier pools) is
judged, assuming every pair gets a grade ("cannot judge" leaves a pair unjudged). It equals
what ``workbench eval --qrels merged`` measures then.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from workbench.errors import ConfigError
from workbench.run import Run
from workbench.types import EXACT_QUERY_TYPES
from workbench.judging.store import JudgeError, PoolPair

#: How many tiers the priority ranking is cut into (deciles).
TIERS = 10

#: A lane's weight in the priority, relative to a config's 1.
LANE_WEIGHT = 0.5

#: The audit sample's default size: this share of the pool (rounded up).
AUDIT_SHARE = 0.05

#: The cutoff of the Judged@k the pool reports.
JUDGED_K = 10

#: The seed used when none is given (the workbench's usual one).
DEFAULT_SEED = 20261129

#: Version of the priority rule, recorded with each pool.
PRIORITY_RULE = "dcg-discount-v1: configs 1, lanes 0.5"

#: Query types whose built qrels are exact and complete (:data:`workbench.types.EXACT_QUERY_TYPES`):
#: their pairs are not pooled for scholars (see the module docstring).
EXACT_TYPES = EXACT_QUERY_TYPES

#: Why, as recorded in a pool's ``params["skipped"]["rule"]``.
EXACT_RULE = ("pairs of reference and page_ref queries are not pooled: the reference grammar (workbench.text.refs) "
              "resolves the address to the documents it names, so their built qrels are exact and complete; any "
              "other document (e.g. a verse a lexical lane matched on the word 'Gita') is not relevant")


@dataclass(frozen=True)
class PoolPlan:
    """A pool ready to store (:func:`store_pool`), with what it will do to Judged@10.

    Attributes:
        dataset: the dataset's name.
        pairs: the pairs in queue order (tier, then priority descending, then the seeded hash);
            ``reason`` ``pool`` or ``audit``.
        raters_per_pair: judging slots per pair.
        params: what built it (recorded with the pool in the store).
        configs: the configs pooled over, in order.
        queries: how many queries were pooled over (the chosen splits).
        candidates: distinct (query, document) pairs in the union of the top ``depth`` lists.
        excluded: candidate pairs left out, by reason: ``judged`` (a human graded it), ``pooled``
            (in an earlier pool, not yet graded), ``built`` (the built qrels label it), ``exact`` (its
            query's type has exact answers, :data:`EXACT_TYPES`; pairs the other reasons leave in).
        capped: pairs ``max_pairs`` left out (the lowest priorities).
        open_elsewhere: pairs of earlier pools of the dataset still without a grade.
        stale: judgments of the dataset left out of ``merged`` because their document changed.
        judged_now: config → mean Judged@10 on the pooled queries under ``merged`` now.
        judged_after: config → the same once this pool and the open pairs are judged.
        elapsed_s: seconds the plan took.
    """

    dataset: str
    pairs: tuple[PoolPair, ...]
    raters_per_pair: int
    params: dict[str, Any]
    configs: tuple[str, ...]
    queries: int
    candidates: int
    excluded: dict[str, int]
    capped: int
    open_elsewhere: int
    stale: int
    judged_now: dict[str, float]
    judged_after: dict[str, float]
    elapsed_s: float = 0.0
    tiers: dict[int, int] = field(default_factory=dict)

    @property
    def pool_pairs(self) -> int:
        """Pairs pooled by depth-k pooling (reason ``pool``)."""
        return sum(p.reason == "pool" for p in self.pairs)

    @property
    def audit_pairs(self) -> int:
        """Built labels sampled for the audit (reason ``audit``)."""
        return sum(p.reason == "audit" for p in self.pairs)

    @property
    def slots(self) -> int:
        """Judging slots: pairs × raters per pair."""
        return len(self.pairs) * self.raters_per_pair


def _int(value: Any, lo: int, hi: int | None, what: str, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"from {lo} to {hi}"
        raise ConfigError(f"{what} must be an integer {rng}, got {value!r}; {fix}")
    return value


def _tie(seed: int, salt: str, query_id: str, doc_id: str) -> int:
    """A seeded, platform-independent tie-breaker for a pair (sha256 of seed, salt, query and document)."""
    digest = hashlib.sha256(f"{seed}\x00{salt}\x00{query_id}\x00{doc_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def discount(rank: int) -> float:
    """The DCG rank discount 1 / log2(rank + 1) (rank from 1; Järvelin and Kekäläinen 2002)."""
    return 1.0 / math.log2(rank + 1)


def priorities(systems: Mapping[str, tuple[float, Mapping[str, Sequence[str]]]], query_ids: Iterable[str],
               depth: int) -> dict[tuple[str, str], float]:
    """Priority of every pair in the union of the systems' top ``depth`` (see the module docstring).

    Args:
        systems: name → ``(weight, ranking)``; a ranking maps query_id → doc ids, best first.
        query_ids: the queries to pool.
        depth: how many hits of each system count.

    Returns:
        ``{(query_id, doc_id): Σ weight / log2(1 + rank)}`` over the systems ranking the pair in their top ``depth``.
    """
    disc = [discount(r) for r in range(1, depth + 1)]
    out: dict[tuple[str, str], float] = {}
    qids = list(query_ids)
    for weight, ranking in systems.values():
        for qid in qids:
            for i, doc in enumerate(ranking.get(qid, ())[:depth]):
                key = (qid, doc)
                out[key] = out.get(key, 0.0) + weight * disc[i]
    return out


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
                hits = [h for h in hits if h.score >= cfg.min_score]
            out[qid] = tuple(h.doc_id for h in hits[:keep])
        return out
    fused = fused_run(replace(cfg, top_k=keep), {n: runs[n] for n in cfg.lanes})  # the same order, cut at keep
    return {qid: tuple(h.doc_id for h in hits) for qid, hits in fused.items()}


def judged_at(ranking: Mapping[str, Sequence[str]], judged: Mapping[str, set], query_ids: Iterable[str],
              k: int = JUDGED_K) -> float:
    """Mean Judged@k of a ranking as ir_measures computes it (what ``workbench eval`` reports).

    Args:
        ranking: query_id → doc ids, best first (at least the first ``k``).
        judged: query_id → the doc ids with a judgment (any grade, 0 included).
        query_ids: the evaluation set; a query with no judgment at all is left out, as in
            :func:`workbench.eval.evaluate.evaluate`.
        k: the cutoff.

    Returns:
        the mean over the judged queries of |top min(k, n) ∩ judged| / min(k, n) (n: the ranking's
        length; a query without hits scores 0); NaN when no query is judged.
    """
    vals = []
    for qid in query_ids:
        docs = judged.get(qid)
        if not docs:
            continue
        top = ranking.get(qid, ())[:k]
        vals.append(sum(d in docs for d in top) / len(top) if top else 0.0)
    return sum(vals) / len(vals) if vals else math.nan


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
    _int(depth, 1, exp.depth, "--depth", f"pool at most the {exp.depth} candidates {exp.path.name} caches per lane")
    if max_pairs is not None:
        _int(max_pairs, 1, None, "--max-pairs", "leave it out to pool every pair")
    if audit is not None:
        _int(audit, 0, None, "--audit", "give 0 for no audit sample")
    _int(raters_per_pair, 1, 10, "--raters-per-pair", "2 is the usual double judging")
    _int(seed, 0, 2**63 - 1, "--seed", "any non-negative integer")
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
    prio = priorities(systems, qids, depth)
    # a pair graded only on a text that has changed since (stale) is not judged: it may be pooled again
    fresh = {(r.query_id, r.doc_id) for r in human.qrels}
    restale = judged - fresh
    judged, pooled = fresh, pooled - restale
    built = {(r.query_id, r.doc_id) for r in ds.qrels}
    exact = {q.query_id for q in queries if q.query_type in set(exact_types)}
    excluded = {"judged": 0, "pooled": 0, "built": 0, "exact": 0}
    ranked = []
    skipped_queries = set()
    for key, p in prio.items():
        if key in judged:
            excluded["judged"] += 1
        elif key in pooled:
            excluded["pooled"] += 1
        elif key in built:
            excluded["built"] += 1
        elif key[0] in exact:
            excluded["exact"] += 1
            skipped_queries.add(key[0])
        else:
            ranked.append((key, p))
    ranked.sort(key=lambda kp: (-kp[1], _tie(seed, "pool", *kp[0])))

    auditable = sorted((key for key in built if key[0] in wanted and key[0] not in exact and key not in judged
                        and key not in pooled), key=lambda key: _tie(seed, "audit", *key))
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
    pairs.sort(key=lambda p: (p.tier, -p.priority, _tie(seed, p.reason, p.query_id, p.doc_id)))
    tiers: dict[int, int] = {}
    for p in pairs:
        tiers[p.tier] = tiers.get(p.tier, 0) + 1

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
              "judged_at_10_now": _finite(judged_now), "judged_at_10_after": _finite(judged_after),
              "repooled": sorted([p.query_id, p.doc_id] for p in pairs if (p.query_id, p.doc_id) in restale),
              "skipped": {"query_types": list(exact_types), "rule": EXACT_RULE, "pairs": excluded["exact"],
                          "queries": len(skipped_queries)}}
    return PoolPlan(dataset, tuple(pairs), raters_per_pair, params, tuple(names), len(queries), len(prio), excluded,
                    capped, len(open_elsewhere), merged.stale, judged_now, judged_after,
                    time.perf_counter() - t0, dict(sorted(tiers.items())))


def _finite(values: Mapping[str, float]) -> dict[str, float | None]:
    """NaN (no judged query) as None: PostgreSQL's JSON has no NaN."""
    return {k: (None if math.isnan(v) else round(v, 6)) for k, v in values.items()}


def store_pool(plan: PoolPlan, store) -> tuple[int, int]:
    """Store a planned pool (:meth:`~workbench.judging.store.JudgmentStore.create_pool`, its parameters
    recorded); returns ``(pool id, pairs stored)`` — fewer than planned only when another pool took some
    of its pairs in the meantime (a pair is never pooled twice).

    Raises:
        JudgeError: the plan has no pair (nothing to store).
    """
    if not plan.pairs:
        raise JudgeError(f"the pool of {plan.dataset} is empty: nothing to store")
    pool_id = store.create_pool(plan.dataset, list(plan.pairs), raters_per_pair=plan.raters_per_pair,
                                params=plan.params, repool=[tuple(p) for p in plan.params.get("repooled", ())])
    n = store.conn().execute("SELECT count(*) FROM wb_judge.pairs WHERE pool_id = %s", (pool_id,)).fetchone()[0]
    return pool_id, int(n)


def summary(plan: PoolPlan) -> str:
    """The plan as text: size, exclusions, tiers, and Judged@10 now and after per config."""
    lines = [f"pool of {plan.dataset}: {len(plan.pairs)} pairs ({plan.pool_pairs} by depth-{plan.params['depth']} "
             f"pooling, {plan.audit_pairs} audit of built labels), {plan.slots} judging slots "
             f"({plan.raters_per_pair} raters per pair), over {plan.queries} queries "
             f"({', '.join(plan.params['splits'])}) and {len(plan.configs)} configs",
             f"  candidates in the top {plan.params['depth']}: {plan.candidates}; left out: "
             f"{plan.excluded['judged']} judged, {plan.excluded['pooled']} already pooled, "
             f"{plan.excluded['built']} labelled by the built qrels"
             + (f", {plan.capped} beyond --max-pairs" if plan.capped else "")]
    skipped = plan.params.get("skipped") or {}
    if skipped.get("pairs"):
        lines.append(f"  skipped: {skipped['pairs']} pairs of {skipped['queries']} {'/'.join(skipped['query_types'])} "
                     "queries (their built qrels are exact: the reference grammar names the answer)")
    if plan.tiers:
        lines.append("  tiers (0 first): " + ", ".join(f"{t}: {n}" for t, n in plan.tiers.items()))
    if plan.open_elsewhere:
        lines.append(f"  {plan.open_elsewhere} pairs of earlier pools are still open (counted in 'after')")
    if plan.stale:
        lines.append(f"  {plan.stale} judgment(s) are stale (their document changed) and stay out of the qrels "
                     "until re-judged")
    width = max([len(c) for c in plan.configs] + [6])
    lines.append(f"  {'config':{width}s}  Judged@{JUDGED_K} now  after this pool is judged (merged layer)")
    for c in plan.configs:
        lines.append(f"  {c:{width}s}  {plan.judged_now[c]:14.3f}  {plan.judged_after[c]:.3f}")
    return "\n".join(lines)
