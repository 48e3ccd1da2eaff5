"""Interleaving two rankings for one reader, crediting the clicks, and saying who won: pure functions.

* **Team-draft** (:func:`team_draft`; Radlinski, Kurup & Joachims, "How does clickthrough data reflect retrieval
  quality?", CIKM 2008): the two rankings take turns like captains picking teams, a coin deciding who picks first
  when both have picked as many; each picks its best result not yet shown. A click counts for the team that
  picked the clicked result.
* **Balanced** (:func:`balanced`; Joachims, "Evaluating retrieval performance using clickthrough data", 2003): the
  shown list takes the two rankings' results alternately by their own ranks, a coin deciding which goes first; for
  the credit (:func:`balanced_credit`), let ``k`` be the smaller of the two ranks of the lowest clicked result;
  each ranking is credited with the clicked results among its own top ``k``.

An impression's **winner** (:func:`winner`) is the ranking with more credited clicks ("A", "B"), or ``"tie"``
(equal, or no click). :func:`compare` counts wins over impressions and tests them with the two-sided sign test
(an exact binomial test of the wins against 1/2, ties left out: ``scipy.stats.binomtest``), and says after how many
impressions with a preference the test first fell below ``alpha`` and whether it stayed there.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Interleaved:
    """A shown list (``hits``, best first) and, per position, the ranking it is credited to (``teams``: "A"/"B";
    for balanced interleaving, the ranking it was taken from)."""

    hits: tuple[str, ...]
    teams: tuple[str, ...]
    method: str
    a_first: bool


def team_draft(a: Sequence[str], b: Sequence[str], k: int, rng: random.Random) -> Interleaved:
    """Team-draft interleaving of rankings ``a`` and ``b`` (module docstring), at most ``k`` results. When one
    ranking has nothing left to add, the other fills the list (the paper's algorithm stops there, which shows a
    reader nothing at all when one config answers nothing).

    Raises:
        ValueError: ``k`` below 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    shown: list[str] = []
    teams: list[str] = []
    seen: set[str] = set()
    ia = ib = 0
    na = nb = 0
    first: bool | None = None
    while len(shown) < k:
        while ia < len(a) and a[ia] in seen:
            ia += 1
        while ib < len(b) and b[ib] in seen:
            ib += 1
        if ia >= len(a) and ib >= len(b):
            break
        if ia >= len(a) or ib >= len(b):  # one has nothing left to add: the other fills the list
            pick_a = ib >= len(b)
        else:
            pick_a = na < nb or (na == nb and rng.random() < 0.5)
        if first is None:
            first = pick_a
        doc = a[ia] if pick_a else b[ib]
        shown.append(doc)
        teams.append("A" if pick_a else "B")
        seen.add(doc)
        na, nb = na + pick_a, nb + (not pick_a)
    return Interleaved(tuple(shown), tuple(teams), "team-draft", bool(first))


def balanced(a: Sequence[str], b: Sequence[str], k: int, rng: random.Random) -> Interleaved:
    """Balanced interleaving of ``a`` and ``b`` (module docstring), at most ``k`` results; when one ranking is
    spent, the other's remaining results follow.

    Raises:
        ValueError: ``k`` below 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    a_first = rng.random() < 0.5
    shown: list[str] = []
    teams: list[str] = []
    seen: set[str] = set()
    ka = kb = 0
    while len(shown) < k and (ka < len(a) or kb < len(b)):
        if kb >= len(b) or (ka < len(a) and (ka < kb or (ka == kb and a_first))):  # a spent ranking: the other
            doc, team, ka = a[ka], "A", ka + 1
        else:
            doc, team, kb = b[kb], "B", kb + 1
        if doc not in seen:
            shown.append(doc)
            teams.append(team)
            seen.add(doc)
    return Interleaved(tuple(shown), tuple(teams), "balanced", a_first)


def credit(shown: Interleaved, clicked: Iterable[int], a: Sequence[str] = (), b: Sequence[str] = ()) -> tuple[int, int]:
    """Clicks credited to A and to B for the clicked positions (ranks from 1 in ``shown.hits``): by team for
    team-draft, by :func:`balanced_credit` (which needs the two rankings ``a`` and ``b``) for balanced.

    Raises:
        ValueError: a clicked rank outside the list shown.
    """
    ranks = sorted(set(clicked))
    bad = [r for r in ranks if not 1 <= r <= len(shown.hits)]
    if bad:
        raise ValueError(f"clicked rank(s) {bad} outside the {len(shown.hits)} results shown")
    if shown.method == "balanced":
        return balanced_credit(shown.hits, ranks, a, b)
    got = [shown.teams[r - 1] for r in ranks]
    return got.count("A"), got.count("B")


def balanced_credit(hits: Sequence[str], clicked: Sequence[int], a: Sequence[str], b: Sequence[str]) -> tuple[int, int]:
    """Balanced interleaving's credit (module docstring): with ``k`` the smaller rank, in ``a`` or ``b``, of the
    lowest clicked result, the clicked results in ``a[:k]`` and in ``b[:k]``."""
    if not clicked:
        return 0, 0
    docs = [hits[r - 1] for r in clicked]
    lowest = hits[max(clicked) - 1]
    inf = len(a) + len(b) + 1  # a result one ranking lacks does not bound k there
    ra = list(a).index(lowest) + 1 if lowest in a else inf
    rb = list(b).index(lowest) + 1 if lowest in b else inf
    k = min(ra, rb)
    return sum(1 for d in docs if d in a[:k]), sum(1 for d in docs if d in b[:k])


def winner(credited: tuple[int, int]) -> str:
    """``"A"``, ``"B"`` or ``"tie"`` for an impression's credited clicks."""
    ca, cb = credited
    return "A" if ca > cb else "B" if cb > ca else "tie"


@dataclass(frozen=True)
class Comparison:
    """Wins over impressions and the sign test: ``p_value`` (two-sided, ties left out; 1.0 with no preference),
    ``first_significant`` (impressions with a preference after which p first fell below ``alpha``, or None) and
    ``stayed`` (p stayed below ``alpha`` from then to the end)."""

    wins_a: int
    wins_b: int
    ties: int
    p_value: float
    alpha: float
    first_significant: int | None
    stayed: bool

    @property
    def verdict(self) -> str:
        """``"A"`` or ``"B"`` when the sign test says so at ``alpha``, else ``"no difference shown"``."""
        if self.p_value < self.alpha:
            return "A" if self.wins_a > self.wins_b else "B"
        return "no difference shown"


def sign_test(wins_a: int, wins_b: int) -> float:
    """Two-sided exact binomial test of ``wins_a`` of ``wins_a + wins_b`` against 1/2 (1.0 when there are none)."""
    n = wins_a + wins_b
    if n == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(wins_a, n, 0.5, alternative="two-sided").pvalue)


def compare(winners: Iterable[str], alpha: float = 0.05) -> Comparison:
    """Count ``winners`` (``"A"``, ``"B"``, ``"tie"``, in time order) and test them (module docstring).

    Raises:
        ValueError: a winner that is none of the three, or ``alpha`` not in (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    wa = wb = ties = 0
    first: int | None = None
    stayed = False
    for w in winners:
        if w == "tie":
            ties += 1
            continue
        if w not in ("A", "B"):
            raise ValueError(f"a winner is 'A', 'B' or 'tie', got {w!r}")
        wa, wb = wa + (w == "A"), wb + (w == "B")
        below = sign_test(wa, wb) < alpha
        if first is None:
            if below:
                first, stayed = wa + wb, True
        elif not below:
            stayed = False
    return Comparison(wa, wb, ties, sign_test(wa, wb), alpha, first, stayed)


#: Actions that count as using a hit when crediting an interleaved list (an impression or a view does not).
USES = frozenset({"click", "click_through", "fetch", "add_to_cart", "watch", "purchase"})


@dataclass(frozen=True)
class PairResult:
    """One interleaved pair of configs in a log: ``a``, ``b``, ``method``, the searches shown (``impressions``),
    those with a used hit (``with_clicks``), the :class:`Comparison`, the readers' ``sessions`` and the sessions
    it took until the sign test first said so (``sessions_needed``, None when it never did)."""

    a: str
    b: str
    method: str
    impressions: int
    with_clicks: int
    comparison: Comparison
    sessions: int = 0
    sessions_needed: int | None = None

    def as_dict(self) -> dict:
        """JSON-ready, the comparison's fields and verdict inline."""
        c = self.comparison
        return {"a": self.a, "b": self.b, "method": self.method, "impressions": self.impressions,
                "with_clicks": self.with_clicks, "wins_a": c.wins_a, "wins_b": c.wins_b, "ties": c.ties,
                "p_value": c.p_value, "alpha": c.alpha, "verdict": c.verdict,
                "first_significant": c.first_significant, "stayed_significant": c.stayed,
                "sessions": self.sessions, "sessions_needed": self.sessions_needed}


def used_ranks(queries, events) -> dict[str, set[int]]:
    """query_id → the ranks (from 1) its events of :data:`USES` used: the event's position, else the hit's place in
    the query's list; events of another action, of an unknown query or outside its list are left out."""
    used: dict[str, set[int]] = {}
    hits_of = {str(q): list(h) for q, h in zip(queries["query_id"], queries["hit_ids"], strict=True)}
    for qid, action, oid, pos in zip(events["query_id"], events["action"], events["object_id"], events["position"],
                                     strict=True):
        hits = hits_of.get(str(qid))
        if action not in USES or hits is None:
            continue
        rank = int(pos) if pos == pos and pos is not None else (hits.index(oid) + 1 if oid in hits else None)
        if rank is not None and 1 <= rank <= len(hits):
            used.setdefault(str(qid), set()).add(rank)
    return used


def interleaved_searches(queries, events) -> list[tuple[tuple[str, str, str], str, int, str]]:
    """The interleaved searches of a log set (``serve --interleave``: a query's attributes hold ``interleave``) in
    time order, each as ``((A, B, method), winner, clicks, session_id)``: its events (:data:`USES`; the rank is the
    event's position, else the hit's place in the list) credited to the teams.

    Args:
        queries, events: the log set's tables (:func:`workbench.traffic.importer.load_log_set`).
    """
    import json

    used = used_ranks(queries, events)
    out = []
    order = queries.sort_values("time", kind="stable")
    for qid, attrs, hits in zip(order["query_id"], order["attributes"], order["hit_ids"], strict=True):
        try:
            mix = json.loads(attrs).get("interleave") if attrs else None
        except ValueError:
            mix = None
        if not isinstance(mix, dict) or len(mix.get("teams") or []) != len(hits):
            continue
        shown = Interleaved(tuple(hits), tuple(mix["teams"]), str(mix.get("method", "team-draft")),
                            bool(mix.get("a_first")))
        clicks = used.get(str(qid), set())
        got = credit(shown, clicks, mix.get("a_hits") or [], mix.get("b_hits") or [])
        session = json.loads(attrs).get("session_id", "") if attrs else ""
        out.append(((str(mix.get("a", "")), str(mix.get("b", "")), shown.method), winner(got), len(clicks),
                    str(session or qid)))
    return out


def compare_log(queries, events, alpha: float = 0.05) -> list[PairResult]:
    """The interleaved searches of a log set (:func:`interleaved_searches`) compared per pair of configs.

    Args:
        queries, events: the log set's tables (:func:`workbench.traffic.importer.load_log_set`).
        alpha: the sign test's level.

    Returns:
        One :class:`PairResult` per (A, B, method), sorted by A, B, method; empty when no search was interleaved.
    """
    groups: dict[tuple[str, str, str], list[tuple[str, int, str]]] = {}
    for key, w, n, session in interleaved_searches(queries, events):
        groups.setdefault(key, []).append((w, n, session))
    out = []
    for (a, b, method), rows in sorted(groups.items()):
        c = compare([w for w, _n, _s in rows], alpha)
        needed = None
        if c.first_significant is not None:  # the sessions of the searches up to the one that made it significant
            seen, preferred = set(), 0
            for w, _n, session in rows:
                seen.add(session)
                preferred += w != "tie"
                if preferred == c.first_significant:
                    break
            needed = len(seen)
        out.append(PairResult(a, b, method, len(rows), sum(1 for _w, n, _s in rows if n), c,
                              len({s for _w, _n, s in rows}), needed))
    return out
