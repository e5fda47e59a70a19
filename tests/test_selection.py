"""Leave-one-conversation-out selection of the cheapest setting within 1 point of the best."""

from __future__ import annotations

import pytest

from qemem.eval.selection import (
    Tally,
    cheapest_within,
    held_out_total,
    leave_one_out,
    pooled,
)


def test_tally_figures_and_sum() -> None:
    a, b = Tally(8, 10, 1000.0), Tally(1, 10, 3000.0)
    assert (a.visibility, a.mean_cost) == (0.8, 100.0)
    assert a + b == Tally(9, 20, 4000.0)
    assert Tally(0, 0, 0.0).visibility == 0.0


def test_cheapest_within_one_point_of_the_best() -> None:
    tallies = {
        "big": Tally(95, 100, 9000.0),  # best: 0.95
        "mid": Tally(94, 100, 6000.0),  # 0.94: within 1 point, cheaper
        "small": Tally(93, 100, 3000.0),  # 0.93: 2 points below, cheapest
    }
    assert cheapest_within(tallies) == "mid"
    assert cheapest_within(tallies, tolerance=0.0) == "big"
    assert cheapest_within(tallies, tolerance=0.02) == "small"
    tie = {"a": Tally(90, 100, 10.0), "b": Tally(91, 100, 1000.0), "c": Tally(91, 100, 1000.0)}
    assert cheapest_within({"b": tie["b"], "a": tie["a"]}) == "a"  # 0.90 is within 0.91 - 0.01
    assert cheapest_within({"b": tie["b"], "c": tie["c"]}) == "b"  # equal: the first given
    with pytest.raises(ValueError):
        cheapest_within({})


def test_pooled_is_question_weighted_over_common_settings() -> None:
    one = {"x": Tally(9, 10, 100.0), "y": Tally(5, 10, 50.0)}
    two = {"x": Tally(10, 90, 900.0)}
    assert pooled([one, two]) == {"x": Tally(19, 100, 1000.0)}
    assert pooled([]) == {}


def test_leave_one_out_picks_on_the_others_and_scores_held_out() -> None:
    # conversation A alone favours the cheap setting; B and C need the big one
    by_conversation = {
        "A": {"cheap": Tally(10, 10, 100.0), "big": Tally(10, 10, 500.0)},
        "B": {"cheap": Tally(7, 10, 100.0), "big": Tally(10, 10, 500.0)},
        "C": {"cheap": Tally(8, 10, 100.0), "big": Tally(10, 10, 500.0)},
    }
    folds = {f.held_out: f for f in leave_one_out(by_conversation)}
    assert folds["A"].picked == "big"  # B + C: cheap 0.75, big 1.0
    assert folds["A"].score == Tally(10, 10, 500.0) and folds["A"].best_visibility == 1.0
    assert folds["B"].picked == "big"  # A + C: cheap 0.9, big 1.0
    assert folds["C"].picked == "big"
    assert held_out_total(folds.values()) == Tally(30, 30, 1500.0)
    with pytest.raises(ValueError):
        leave_one_out({"A": by_conversation["A"]})
