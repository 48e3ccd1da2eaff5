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

**Only what can be relevant** (issue #41: 24 of 30 pooled pairs were obvious zeros, BG 14.24 and BG 8.1 pooled
five times each for unrelated Hindi queries by an English-only model):

* a system pools a query's pairs only when it **answers the query's language**: its mean recall@depth on that
  language's queries with built labels is at least :data:`ANSWER_SHARE` of the best system's
  (:func:`answering_systems`; a language with fewer than :data:`MIN_LANGUAGE_QUERIES` such queries keeps every
  system). Pairs only non-answering systems ranked are counted (``excluded["language"]``);
* a pair every answering system ranks below ``ceil(LOW_RANK_SHARE * depth)`` is left out (``excluded["low"]``).

How well it works is measured, not assumed: :func:`pool_quality` is the share of graded pooled pairs the scholars
graded 0 (on the Judge and Agreement pages and ``workbench judge status``).

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
            query's type has exact answers, :data:`EXACT_TYPES`; pairs the other reasons leave in),
            ``language`` (only systems that do not answer the query's language ranked it,
            :func:`answering_systems`), ``low`` (every system that answers ranks it below
            ``ceil(LOW_RANK_SHARE * depth)``, :func:`best_ranks`); each pair counts under its first reason, in
            the order judged, pooled, built, language, low, exact.
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
    for weight, key, rank in _ranked(systems, query_ids, depth):
        out[key] = out.get(key, 0.0) + weight * disc[rank - 1]
    return out


def _ranked(systems: Mapping[str, tuple[float, Mapping[str, Sequence[str]]]], query_ids: Iterable[str],
            depth: int) -> Iterable[tuple[float, tuple[str, str], int]]:
    """``(system weight, (query_id, doc_id), rank from 1)`` for every hit of every system's top ``depth``."""
    qids = list(query_ids)
    for weight, ranking in systems.values():
        for qid in qids:
            for i, doc in enumerate(ranking.get(qid, ())[:depth]):
                yield weight, (qid, doc), i + 1


#: A system answers a language when its mean recall@depth on that language's queries (built labels) is at least
#: this share of the best system's (see :func:`answering_systems`).
ANSWER_SHARE = 0.2
#: Fewer queries of a language with built labels than this: every system is taken to answer it (no evidence).
MIN_LANGUAGE_QUERIES = 10
#: A pair is pooled only when some system that answers its query ranks it within the first
#: ``ceil(LOW_RANK_SHARE * depth)`` (see :func:`best_ranks`).
LOW_RANK_SHARE = 0.5

#: Why, as recorded in a pool's ``params["filtered"]["rule"]``.
FILTER_RULE = (f"a system pools a query's pairs only when it answers the query's language (its mean recall@depth on "
               f"that language's built labels is at least {ANSWER_SHARE:g} x the best system's; a language with fewer "
               f"than {MIN_LANGUAGE_QUERIES} such queries: every system); a pair every such system ranks below "
               f"{LOW_RANK_SHARE:g} x depth is not pooled")


def answering_systems(systems: Mapping[str, tuple[float, Mapping[str, Sequence[str]]]],
                      languages: Mapping[str, str], relevant: Mapping[str, set], depth: int
                      ) -> dict[str, dict[str, Any]]:
    """Which systems answer which query language, measured on the built labels (issue #41: an English-only model
    pooled BG 14.24 and BG 8.1 for five unrelated Hindi queries each).

    Args:
        systems: name → ``(weight, ranking)`` as for :func:`priorities`.
        languages: query_id → its language, for the queries being pooled.
        relevant: query_id → doc ids the built qrels grade >= 1 (queries without any are not measured).
        depth: the pooling depth: recall is measured on each system's top ``depth``.

    Returns:
        language → ``{"queries": n, "recall": {system: mean recall@depth}, "answering": [systems]}``: a system
        answers when its recall is at least :data:`ANSWER_SHARE` of the best system's; with fewer than
        :data:`MIN_LANGUAGE_QUERIES` measured queries, or a best recall of 0, every system answers (nothing to
        tell them apart by). Recall of one query: |top depth ∩ relevant| / |relevant|.
    """
    by_lang: dict[str, list[str]] = {}
    for qid, lang in languages.items():
        if relevant.get(qid):
            by_lang.setdefault(lang, []).append(qid)
    out: dict[str, dict[str, Any]] = {}
    for lang in sorted(set(languages.values())):
        qids = by_lang.get(lang, [])
        recall = {}
        for name, (_w, ranking) in systems.items():
            vals = [len(set(ranking.get(q, ())[:depth]) & relevant[q]) / len(relevant[q]) for q in qids]
            recall[name] = round(sum(vals) / len(vals), 6) if vals else 0.0
        best = max(recall.values(), default=0.0)
        if len(qids) < MIN_LANGUAGE_QUERIES or best <= 0.0:
            answering = sorted(systems)
        else:
            answering = sorted(n for n, r in recall.items() if r >= ANSWER_SHARE * best)
        out[lang] = {"queries": len(qids), "recall": recall, "answering": answering}
    return out


def restrict_to_answering(systems: Mapping[str, tuple[float, Mapping[str, Sequence[str]]]],
                          languages: Mapping[str, str], answering: Mapping[str, Mapping[str, Any]]
                          ) -> dict[str, tuple[float, Mapping[str, Sequence[str]]]]:
    """``systems`` with each ranking kept only for the queries whose language the system answers
    (:func:`answering_systems`)."""
    keep = {lang: set(a["answering"]) for lang, a in answering.items()}
    return {name: (w, {q: docs for q, docs in ranking.items() if name in keep.get(languages.get(q, ""), {name})})
            for name, (w, ranking) in systems.items()}


def best_ranks(systems: Mapping[str, tuple[float, Mapping[str, Sequence[str]]]], query_ids: Iterable[str],
               depth: int) -> dict[tuple[str, str], int]:
    """The best (lowest) rank, from 1, at which any system ranks each pair within its top ``depth``."""
    out: dict[tuple[str, str], int] = {}
    for _w, key, rank in _ranked(systems, query_ids, depth):
        if rank < out.get(key, depth + 1):
            out[key] = rank
    return out


@dataclass(frozen=True)
class PoolQuality:
    """How many of a dataset's pooled pairs (reason ``pool``) the scholars graded 0: the share of the pool that was
    noise. Audit pairs (built labels) and pairs sent from elsewhere are not counted.

    Attributes:
        graded: pooled pairs with a human grade (:func:`workbench.judging.layers.final_grades`).
        zeros: those whose grade is 0.
    """

    graded: int
    zeros: int

    @property
    def share_zero(self) -> float | None:
        """``zeros / graded``; None before any pooled pair is graded."""
        return self.zeros / self.graded if self.graded else None

    def line(self) -> str:
        """``"pool quality: 24 of 30 graded pooled pairs were 0 (80 %)"``, or that none is graded yet."""
        if not self.graded:
            return "pool quality: no pooled pair is graded yet"
        return f"pool quality: {self.zeros} of {self.graded} graded pooled pairs were 0 ({100 * self.zeros / self.graded:.0f} %)"


def pool_quality(reasons: Mapping[tuple[str, str], str], final: Mapping[tuple[str, str], Any]) -> PoolQuality:
    """The :class:`PoolQuality` of a dataset.

    Args:
        reasons: ``(query_id, doc_id)`` → why it was pooled (``pool``, ``audit``, ``sent``, ``import``), as the
            store holds it (:meth:`~workbench.judging.store.JudgmentStore.pair_reasons`).
        final: the human grades (:func:`workbench.judging.layers.final_grades`: objects with ``grade``).
    """
    graded = [final[key].grade for key, why in reasons.items() if why == "pool" and key in final]
    return PoolQuality(len(graded), sum(1 for g in graded if g == 0))


def store_pool_quality(store, dataset: str, doc_hashes: Mapping[str, str] | None = None) -> PoolQuality:
    """:func:`pool_quality` of ``dataset`` as the judgment store holds it now (one snapshot).

    Args:
        store: a :class:`~workbench.judging.store.JudgmentStore`.
        doc_hashes: doc_id → the built document's hash (a grade given on another text is stale and not counted);
            None: nothing is stale.

    Raises:
        PgError: the store cannot be read.
    """
    from workbench.judging.layers import final_grades

    with store.snapshot():
        rows, adjudications, reasons = store.current(dataset), store.adjudications(dataset), store.pair_reasons(dataset)
    return pool_quality(reasons, final_grades(rows, adjudications, doc_hashes))


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
    filtered = plan.params.get("filtered") or {}
    if filtered.get("language") or filtered.get("low"):
        off = {lang: sorted(set(a["recall"]) - set(a["answering"])) for lang, a in filtered["languages"].items()}
        off = {lang: names for lang, names in off.items() if names}
        lines.append(f"  filtered: {filtered['language']} pairs only systems that do not answer the query's language "
                     f"ranked" + (f" ({'; '.join(f'{lang}: ' + ', '.join(n) for lang, n in off.items())})" if off else "")
                     + f", {filtered['low']} that every other system ranks below {filtered['low_rank_cut']}")
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
