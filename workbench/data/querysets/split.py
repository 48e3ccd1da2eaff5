"""Deterministic train/dev/test assignment by target group.

Every query carries a *group*: the target it is about (a sutta ``mn10``, a gita verse
group ``bg1.4``, a chapter ``bg-ch7``, a lemma ``lemma:dhamma``). The split is a pure
function of ``(seed, group)``: ``sha256("<seed>:<group>")`` read as a number in [0, 1)
and cut at the cumulative ratios. So all queries about one verse or sutta land in one
split, in every dataset and every build, and no target leaks from train into test.
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
    digest = hashlib.sha256(f"{seed}:{group}".encode("utf-8")).digest()
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
