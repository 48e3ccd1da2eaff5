"""Deterministic train/dev/test assignment by target group.

Every query carries a *group*: the target it is about (a sutta ``mn10``, a gita verse
group ``bg1.4``, a chapter ``bg-ch7``, a lemma ``lemma:dhamma``). The split is a pure
function of ``(seed, group)``: ``sha256("<seed>:<group>")`` read as a number in [0, 1)
and cut at the cumulative ratios. So all queries about one verse or sutta land in one
split, in every dataset and every build, and no target leaks from train into test.

A query type with few groups can leave a split empty by chance (five suttas can all fall
in train and dev). :func:`assign_splits` therefore assigns the groups of one query type
together: where a type has at least three groups and a split with a non-zero ratio got
none, the group whose number lies nearest to that split's interval moves there, taken
from a split that keeps at least one group. Every split then has at least one group of
every type with three or more, and the rule stays a pure function of (seed, groups).
"""

from __future__ import annotations

import hashlib
import math

from workbench.types import SPLITS

DEFAULT_RATIOS = (0.6, 0.2, 0.2)


def check_ratios(ratios: tuple[float, float, float]) -> None:
    """Raise ValueError unless the ratios are three finite non-negative numbers summing to 1 (within 1e-9)."""
    if (not isinstance(ratios, (tuple, list)) or len(ratios) != 3
            or any(isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0
                   for r in ratios)):
        raise ValueError(f"split ratios must be three finite non-negative numbers (train, dev, test), got {ratios!r}")
    if abs(sum(ratios) - 1.0) > 1e-9:
        raise ValueError(f"split ratios must sum to 1, got {ratios!r} (sum {sum(ratios)})")


def unit_interval(seed: int, group: str) -> float:
    """``sha256(f"{seed}:{group}")``'s first 8 bytes as a float in [0, 1)."""
    digest = hashlib.sha256(f"{seed}:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign_split(group: str, seed: int, ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> str:
    """The split (``train``, ``dev`` or ``test``) of a target group.

    Raises:
        ValueError: an empty group or bad ratios.
    """
    if not group:
        raise ValueError("a query's group (its target) must be non-empty to assign a split")
    check_ratios(ratios)
    u = unit_interval(seed, group)
    if u < ratios[0]:
        return SPLITS[0]
    if u < ratios[0] + ratios[1]:
        return SPLITS[1]
    return SPLITS[2]


def _distance(u: float, lo: float, hi: float) -> float:
    return 0.0 if lo <= u < hi else min(abs(u - lo), abs(u - hi))


def assign_splits(groups_by_type: dict[str, list[str]], seed: int,
                  ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> dict[str, str]:
    """The split of every group: :func:`assign_split`, then, per query type with at least three groups, each
    empty split with a non-zero ratio given one group (see the module docstring).

    A moved group moves for every type that has it (one group, one split: no target leaks
    between splits through another query type), and only a group whose move empties no split
    of any of its types is moved.

    Args:
        groups_by_type: query type → its queries' groups (repeats are fine), in a fixed order.

    Returns:
        group → ``train`` / ``dev`` / ``test``.

    Raises:
        ValueError: an empty group or bad ratios.
    """
    check_ratios(ratios)
    types = {t: list(dict.fromkeys(gs)) for t, gs in groups_by_type.items()}
    out = {g: assign_split(g, seed, ratios) for gs in types.values() for g in gs}
    bounds = [(0.0, ratios[0]), (ratios[0], ratios[0] + ratios[1]), (ratios[0] + ratios[1], 1.0)]

    def count(t: str, split: str) -> int:
        return sum(out[g] == split for g in types[t])

    for t, gs in types.items():
        if len(gs) < 3:
            continue
        for split, (lo, hi), ratio in zip(SPLITS, bounds, ratios):
            if ratio <= 0 or count(t, split) > 0:
                continue
            movable = [g for g in gs if all(count(t2, out[g]) >= 2 for t2, gs2 in types.items() if g in gs2)]
            if movable:
                pick = min(movable, key=lambda g: (_distance(unit_interval(seed, g), lo, hi), g))
                out[pick] = split
    return out
