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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import ConfigError
from workbench.judging.store import JudgeError, PoolPair
from workbench.types import EXACT_QUERY_TYPES

#: How many tiers the priority ranking is cut into (deciles).
TIERS = 10

#: A lane's weight in the priority, relative to a config's 1.
LANE_WEIGHT = 0.5

#: The audit sample's default size: this share of the pool (rounded up).
AUDIT_SHARE = 0.05

#: The cutoff of the Judged@k the pool reports.
JUDGED_K = 10


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


def bounded_int(value: Any, lo: int, hi: int | None, what: str, fix: str) -> int:
    """``value`` when it is an int (not a bool) within ``lo`` .. ``hi`` (``None``: no upper bound).

    Raises:
        ConfigError: naming the option ``what``, the range and ``fix``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"from {lo} to {hi}"
        raise ConfigError(f"{what} must be an integer {rng}, got {value!r}; {fix}")
    return value


def tie_key(seed: int, salt: str, query_id: str, doc_id: str) -> int:
    """A seeded, platform-independent tie-breaker for a pair (sha256 of seed, salt, query and document)."""
    digest = hashlib.sha256(f"{seed}\x00{salt}\x00{query_id}\x00{doc_id}".encode()).digest()
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


def finite_values(values: Mapping[str, float]) -> dict[str, float | None]:
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
