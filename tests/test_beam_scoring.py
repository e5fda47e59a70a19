"""BEAM's scoring pinned by hand-computed values (qemem.eval.beam_scoring)."""

from __future__ import annotations

import pytest

from qemem.eval.beam_scoring import (
    ProbeScore,
    aligned_items,
    beam_average,
    chat_bootstrap,
    kendall_tau_b,
    ordering_ranks,
    ordering_score,
    rubric_score,
)


def test_a_probe_scores_the_mean_of_its_rubric_items() -> None:
    assert rubric_score([1, 0.5, 0, 1]) == 0.625
    assert rubric_score([0.5]) == 0.5
    with pytest.raises(ValueError, match=r"0, 0\.5 or 1"):
        rubric_score([0.7])
    with pytest.raises(ValueError, match="at least one"):
        rubric_score([])


def test_kendall_tau_b_by_hand() -> None:
    # one discordant pair of six: (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    # five concordant pairs, one tied in y only: 5 / sqrt(6 * 5)
    assert kendall_tau_b([1, 2, 3, 4], [1, 2, 5, 5]) == pytest.approx(5 / 30**0.5)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau_b([1, 1], [1, 2]) is None  # a constant ranking: undefined


def test_missing_items_tie_last_over_the_union() -> None:
    union, reference, answered = ordering_ranks(["A", "B", "C"], ["B", "A", "X"])
    assert union == ["A", "B", "C", "X"]
    assert reference == [1, 2, 3, 5]  # X is not in the reference: tied last (4 + 1)
    assert answered == [2, 1, 5, 3]  # C was not answered


def test_ordering_with_a_missing_and_an_extra_item() -> None:
    # pairs of (A, B, C, X): AB discordant, AC AX BC BX concordant, CX discordant:
    # tau_b = (4 - 2) / 6 = 1/3, tau_norm = 2/3; 2 of 3 answered match, 2 of 3 found
    score = ordering_score(["A", "B", "C"], ["B", "A", "X"])
    assert score.tau_norm == pytest.approx(2 / 3)
    assert (score.precision, score.recall, score.f1) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    assert score.final == pytest.approx(4 / 9)
    perfect = ordering_score(["A", "B", "C"], ["A", "B", "C"])
    assert (perfect.tau_norm, perfect.f1, perfect.final) == (1.0, 1.0, 1.0)
    assert ordering_score(["A", "B", "C"], ["C", "B", "A"]).tau_norm == 0.0
    # a missing item ties last, after every answered one: the order holds
    missing = ordering_score(["A", "B", "C"], ["A", "B"])
    assert (missing.tau_norm, missing.recall, missing.f1) == pytest.approx((1.0, 2 / 3, 0.8))
    assert ordering_score(["A", "B"], []).final == 0.0
    assert ordering_score(["A"], ["A"]).tau_norm == 1.0


def test_answer_lines_take_the_reference_item_they_match_once() -> None:
    lines = ["First the logging", "then the dashboard", "the dashboard again"]
    items = aligned_items(["Logging", "Dashboard", "Alert"], lines, [0, 1, 1])
    assert items == ["Logging", "Dashboard", "the dashboard again"]
    assert aligned_items(["A"], ["x"], [None]) == ["x"]
    with pytest.raises(ValueError, match="2 matches for 1"):
        aligned_items(["A"], ["x"], [0, 0])


def test_per_chat_then_per_ability_then_overall() -> None:
    scores = [
        ProbeScore("c1", "information_extraction", 1.0),
        ProbeScore("c1", "information_extraction", 0.0),
        ProbeScore("c1", "event_ordering", 0.75),
        ProbeScore("c2", "information_extraction", 1.0),
    ]
    average = beam_average(scores)
    # information extraction: chat means 0.5 and 1.0 -> 0.75 (pooled over probes: 2/3)
    assert average.by_ability == {"event_ordering": 0.75, "information_extraction": 0.75}
    assert average.overall == 0.75 and average.chats == 2


def test_chat_bootstrap_intervals_contain_the_estimate_and_are_seeded() -> None:
    scores = [
        ProbeScore(f"c{c}", ability, (c * 7 + len(ability)) % 5 / 4)
        for c in range(8)
        for ability in ("summarization", "temporal_reasoning")
    ]
    intervals = chat_bootstrap(scores, n_resamples=500, seed=3)
    average = beam_average(scores)
    assert set(intervals) == {"summarization", "temporal_reasoning", "overall"}
    for name, value in [*average.by_ability.items(), ("overall", average.overall)]:
        low, high = intervals[name]
        assert low <= value <= high and low < high
    assert chat_bootstrap(scores, n_resamples=500, seed=3) == intervals
    assert chat_bootstrap(scores[:2]) == {}  # one chat: no interval
