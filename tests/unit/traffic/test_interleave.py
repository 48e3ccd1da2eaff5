"""Interleaving (:mod:`workbench.traffic.interleave`): team-draft and balanced lists, their credit and the sign
test, each worked out by hand."""

from __future__ import annotations

import random

import pytest

from workbench.traffic.interleave import balanced, compare, credit, sign_test, team_draft, winner


class Coins(random.Random):
    """A random source whose ``random()`` returns the given values in turn (a coin: < 0.5 is A)."""

    def __init__(self, *values: float) -> None:
        super().__init__(0)
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_team_draft_by_hand():
    a, b = ["a1", "a2", "a3"], ["b1", "a1", "b3", "b4"]
    # A wins the first coin (a1); B has fewer, picks b1; a tie, B wins the coin: its next unseen is b3 (a1 is
    # shown); A has fewer, picks a2
    shown = team_draft(a, b, 4, Coins(0.3, 0.7))
    assert (shown.hits, shown.teams, shown.a_first) == (("a1", "b1", "b3", "a2"), ("A", "B", "B", "A"), True)
    assert credit(shown, [2, 4]) == (1, 1) and winner(credit(shown, [2, 4])) == "tie"
    assert winner(credit(shown, [1, 2, 3])) == "B" and winner(credit(shown, [])) == "tie"
    # it stops when either ranking has nothing left to add
    assert team_draft(["x"], ["x", "y"], 5, Coins(0.1)).hits == ("x",)
    with pytest.raises(ValueError, match=r"clicked rank\(s\) \[5\] outside the 4 results shown"):
        credit(shown, [5])


def test_balanced_by_hand():
    a, b = ["x", "y", "z"], ["y", "w", "x"]
    # A first: x (A1), y (B1), A2 = y is shown so skipped, w (B2), z (A3)
    shown = balanced(a, b, 10, Coins(0.3))
    assert (shown.hits, shown.teams) == (("x", "y", "w", "z"), ("A", "B", "B", "A"))
    # a click on w (rank 3): w is B's 2nd and not in A, so k = 2; A's top 2 (x, y) holds no click, B's (y, w) one
    assert credit(shown, [3], a, b) == (0, 1)
    assert credit(shown, [1, 3], a, b) == (1, 1)  # x and w: k = 2, x in A's top 2, w in B's
    assert credit(shown, [2], a, b) == (0, 1)  # y: A's 2nd, B's 1st, k = 1: only B's top 1 holds it
    assert balanced(a, b, 2, Coins(0.9)).hits == ("y", "x")  # B first


def test_the_sign_test_and_when_it_first_said_so():
    assert sign_test(10, 0) == pytest.approx(2 * 0.5**10)
    assert sign_test(0, 0) == 1.0
    got = compare(["A"] * 10 + ["tie"])
    # 6 of 6: p = 2/64 = 0.031 (5 of 5: 0.0625, not yet)
    assert (got.wins_a, got.wins_b, got.ties, got.first_significant, got.stayed, got.verdict) == (10, 0, 1, 6, True, "A")
    back = compare(["A"] * 6 + ["B"] * 6)  # significant after 6, lost at 7 (6 of 7: p = 16/128)
    assert (back.first_significant, back.stayed, back.p_value, back.verdict) == (6, False, 1.0, "no difference shown")
    with pytest.raises(ValueError, match="'A', 'B' or 'tie'"):
        compare(["C"])
