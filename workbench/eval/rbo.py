"""Rank-biased overlap: how alike two rankings are, where there are no judgments.

RBO (Webber, Moffat and Zobel, "A similarity measure for indefinite rankings", ACM TOIS 28(4), 2010)
compares two ranked lists by the overlap of their prefixes, weighting depth d by p^(d-1): with
persistence ``p`` = 0.9 the first 10 ranks carry about 86% of the weight. 1 means the same
ranking, 0 no document in common. It needs no qrels, so it tells two configs apart on the queries
nobody has judged, and says how much a change moved the lists a user sees.

:func:`rbo` is the point estimate RBO_ext of the paper's equation 32 (equation 30 when both
lists have the same length), which extrapolates the agreement seen at the end of the lists to the
unseen depths. Pure functions on ``doc_id`` sequences, best first.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

#: The persistence most studies use (the paper's examples use 0.9 and 0.98).
DEFAULT_P = 0.9


def rbo(a: Sequence[Hashable], b: Sequence[Hashable], p: float = DEFAULT_P) -> float:
    """RBO_ext of two rankings (Webber et al. 2010, eq. 32), in [0, 1], higher is more alike.

    Args:
        a, b: ``doc_id`` lists, best first, without repeats; they may differ in length (the shorter
            is taken as seen to its end, eq. 32). Two empty lists are identical (1.0); one empty
            list against a non-empty one shares nothing (0.0).
        p: persistence, 0 < p < 1 (the weight of rank d is proportional to p^(d-1)).

    Returns:
        the extrapolated RBO; 1.0 for identical lists, 0.0 for disjoint ones.

    Raises:
        ValueError: ``p`` outside (0, 1), or a list repeats a document (the message names it).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p (the persistence) must lie strictly between 0 and 1, got {p!r}")
    for name, xs in (("a", a), ("b", b)):
        if len(set(xs)) != len(xs):
            seen, dup = set(), None
            for doc in xs:
                if doc in seen:
                    dup = doc
                    break
                seen.add(doc)
            raise ValueError(f"ranking {name} lists document {dup!r} twice; a ranking holds each document once")
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, L = len(short), len(long_)
    if L == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_s: set = set()
    seen_l: set = set()
    overlap = 0
    x = [0] * (L + 1)  # x[d]: |short[:d] ∩ long[:d]| (short taken whole beyond its length)
    for d in range(1, L + 1):
        item_l = long_[d - 1]
        if d <= s:
            item_s = short[d - 1]
            if item_s == item_l:
                overlap += 1
            else:
                overlap += (item_s in seen_l) + (item_l in seen_s)
            seen_s.add(item_s)
        else:
            overlap += item_l in seen_s
        seen_l.add(item_l)
        x[d] = overlap
    x_s, x_l = x[s], x[L]
    total = sum(x[d] / d * p ** d for d in range(1, L + 1))
    total += sum(x_s * (d - s) / (s * d) * p ** d for d in range(s + 1, L + 1))
    return (1.0 - p) / p * total + ((x_l - x_s) / L + x_s / s) * p ** L


def rbo_by_query(run_a: Mapping[str, Sequence], run_b: Mapping[str, Sequence], depth: int = 10,
                 p: float = DEFAULT_P) -> dict[str, float]:
    """:func:`rbo` of the top ``depth`` of two runs, for every query in either.

    Args:
        run_a, run_b: query_id → ranked hits, best first: :class:`workbench.run.Run` (its
            :class:`~workbench.run.Hit` objects) or plain ``doc_id`` lists.
        depth: how many ranks of each list to compare (the user's page: 10).
        p: persistence (see :func:`rbo`).

    Returns:
        query_id → RBO in [0, 1]; a query one run lacks compares its list with an empty one (0.0).

    Raises:
        ValueError: ``depth`` is not an integer >= 1 (two empty prefixes would read as identical, 1.0),
            and the errors of :func:`rbo`.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1 (the ranks compared, e.g. 10), got {depth!r}")

    def ids(hits) -> list:
        return [getattr(h, "doc_id", h) for h in list(hits)[:depth]]

    return {q: rbo(ids(run_a.get(q, ())), ids(run_b.get(q, ())), p)
            for q in sorted(set(run_a) | set(run_b))}
