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
    # one ranking spent, the other fills the list (the paper's algorithm would stop: an empty list for a config
    # that answers nothing)
    assert team_draft(["x"], ["x", "y"], 5, Coins(0.1)) == team_draft(["x"], ["x", "y"], 5, Coins(0.1))
    filled = team_draft(["x"], ["x", "y"], 5, Coins(0.1))
    assert (filled.hits, filled.teams) == (("x", "y"), ("A", "B"))
    empty_b = team_draft(["a1", "a2"], [], 5, Coins())
    assert (empty_b.hits, empty_b.teams) == (("a1", "a2"), ("A", "A"))
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
    assert balanced(["x"], ["y", "w", "v"], 10, Coins(0.3)).hits == ("x", "y", "w", "v")  # A spent, B goes on


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


def test_a_log_of_interleaved_searches_is_credited_and_compared(tmp_path, monkeypatch):
    """40 searches interleaved by team-draft between A = (a1 a2 a3) and B = (b1 b2 b3), written as serve writes
    them and imported: every other reader takes the first hit (A's or B's by the coin), the others look for a1;
    each search's winner is the team that placed the hit used, and the sign test is binomtest(wins of A, 40)."""
    import json

    from typer.testing import CliRunner

    from workbench.cli import app
    from workbench.traffic.importer import load_log_set, read_logs, write_log_set
    from workbench.traffic.log import TrafficLog

    log = TrafficLog(tmp_path / "ubi")
    rng = random.Random(3)
    want_a = 0
    for i in range(40):
        shown = team_draft(["a1", "a2", "a3"], ["b1", "b2", "b3"], 4, rng)
        attrs = {"interleave": {"a": "cfgA", "b": "cfgB", "method": shown.method, "teams": list(shown.teams),
                                "a_first": shown.a_first, "a_hits": ["a1", "a2", "a3"], "b_hits": ["b1", "b2", "b3"]}}
        qid = log.searched(f"id:r{i}", "karma", shown.hits, attrs)
        used = shown.hits[0] if i % 2 == 0 else "a1"  # half the readers take the first hit, half look for a1
        want_a += shown.teams[shown.hits.index(used)] == "A"
        log.clicked(qid, used)
    log.searched("id:plain", "not interleaved", ["a1"])  # left out of the comparison
    log.close()
    queries, events, report = read_logs([tmp_path / "ubi"], "t")
    write_log_set(tmp_path / "home" / "logs" / "t", queries, events, report)
    from workbench.traffic.interleave import compare_log

    (pair,) = compare_log(*load_log_set(tmp_path / "home", "t"))
    c = pair.comparison
    from scipy.stats import binomtest

    assert 20 < want_a < 40 and (pair.a, pair.b, pair.method, pair.impressions, pair.with_clicks) == (
        "cfgA", "cfgB", "team-draft", 40, 40)
    assert (c.wins_a, c.wins_b, c.ties, c.verdict) == (want_a, 40 - want_a, 0, "A")
    assert c.p_value == pytest.approx(binomtest(want_a, 40, 0.5).pvalue)
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    got = CliRunner().invoke(app, ["logs", "compare", "t", "--json"])
    assert got.exit_code == 0 and json.loads(got.stdout)[0]["verdict"] == "A"
    got = CliRunner().invoke(app, ["logs", "compare", "t"])
    # every search its own client (its own session) and a click (no tie): sessions needed = searches needed
    assert pair.sessions == 40 and pair.sessions_needed == c.first_significant
    assert (f"cfgA wins at alpha = 0.05; first after {c.first_significant} searches with a preference "
            f"({pair.sessions_needed} of 40 sessions)") in got.stdout
