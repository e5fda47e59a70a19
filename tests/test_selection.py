"""Leave-one-conversation-out selection: the cheapest setting within 1 point of the best, or
the setting of best value (visibility less a price per token) over several datasets."""

from __future__ import annotations

import pytest

from qemem.eval.selection import (
    Tally,
    best_value,
    cheapest_within,
    held_out_total,
    leave_one_out,
    leave_one_out_value,
    pooled,
    value,
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


def test_value_prices_tokens_and_weighs_datasets_alike() -> None:
    locomo, beam = Tally(90, 100, 500_000.0), Tally(6, 10, 80_000.0)  # 5,000 and 8,000 tokens
    assert value([locomo], price=0.02) == pytest.approx(0.9 - 0.1)
    assert value([locomo, beam], price=0.02) == pytest.approx(((0.9 - 0.1) + (0.6 - 0.16)) / 2)
    with pytest.raises(ValueError):
        value([])


def test_best_value_trades_visibility_for_cost_on_every_dataset() -> None:
    by_dataset = {
        "locomo": {"small": Tally(90, 100, 300_000.0), "big": Tally(95, 100, 900_000.0)},
        "beam": {"small": Tally(5, 10, 40_000.0), "big": Tally(6, 10, 90_000.0)},
    }
    # big: +5 and +10 points for +6,000 and +5,000 tokens (-12 and -10 points at 2 per 1,000)
    assert best_value(by_dataset, price=0.02) == "small"
    assert best_value(by_dataset, price=0.001) == "big"
    tie = {"d": {"a": Tally(5, 10, 100.0), "b": Tally(5, 10, 100.0)}}
    assert best_value(tie) == "a"


def test_leave_one_out_over_two_datasets_scores_each_held_out_conversation() -> None:
    cheap, dear = Tally(8, 10, 10_000.0), Tally(9, 10, 100_000.0)
    by_conversation = {
        ("locomo", "c1"): {"s": cheap, "l": dear},
        ("locomo", "c2"): {"s": cheap, "l": dear},
        ("beam", "b1"): {"s": Tally(1, 10, 10_000.0), "l": Tally(9, 10, 20_000.0)},
    }
    folds = leave_one_out_value(by_conversation, price=0.02)
    assert [f.held_out for f in folds] == ["locomo/c1", "locomo/c2", "beam/b1"]
    # without b1 only locomo decides (cheap wins); with it, l's +80 points on BEAM win
    assert [f.picked for f in folds] == ["l", "l", "s"]
    assert folds[2].score == Tally(1, 10, 10_000.0) and folds[2].best_visibility == 0.9
    with pytest.raises(ValueError):
        leave_one_out_value({("a", "b"): {"s": cheap}})
