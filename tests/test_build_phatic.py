"""Greeting-only and closing-only runs of a segmentation (issue 23, item 4). The lines are from
LoCoMo dev conversations (conv-26 E38, conv-30 E73: goodbye episodes a capable model's
segmentation made, no facts each; conv-26 E1: an opening with content), copied as literals."""

from __future__ import annotations

from datetime import datetime

import pytest

from qemem.build.phatic import content_words, line_kind, merge_phatic, run_kind, small_talk
from qemem.models import Turn

NAMES = ("Caroline", "Melanie")
GOODBYES = [
    ("Caroline", "Thanks, Melanie! Really glad to have you as a friend to share my journey."),
    ("Melanie", "Thanks, Caroline! Appreciate your friendship. It's great to have a supporter!"),
    ("Caroline", "No worries, Mel! Your friendship means so much to me. Enjoy your day!"),
]
GREETINGS = [
    ("Caroline", "Hey Melanie, great to hear from you. What's been up since we talked?"),
    ("Melanie", "Hey Caroline! Missed you. Anything new?"),
]
CONTENT = [
    ("Melanie", "I signed up for a pottery class at the studio near the canal."),
    ("Caroline", "Pottery! I went to an LGBTQ support group yesterday, it was powerful."),
]


def turns(lines: list[tuple[str, str]]) -> list[Turn]:
    return [
        Turn(f"D1:{n}", "c", 1, n, who, text, datetime(2023, 5, 8))
        for n, (who, text) in enumerate(lines)
    ]


def test_content_words_skip_small_talk_names_and_nicknames() -> None:
    assert content_words("No worries, Mel! Your friendship means so much to me.", NAMES) == []
    assert content_words("I'm swamped with the kids & work.", NAMES) == ["swamped", "kids", "work"]
    assert content_words("[shares a photo of a mug] Nice!", NAMES) == []


def test_small_talk_allows_two_content_words() -> None:
    assert small_talk(GOODBYES[0][1], NAMES)  # "share", "journey"
    assert not small_talk(
        "Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?",
        NAMES,
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("That's the spirit! Bye!", "closing"),
        ("Wow, sounds fun! I can't wait to hear more about it. Talk to you soon!", "closing"),
        ("Bye Caroline. I'm here for you. Take care of yourself.", "closing"),
        ("Hey Mel! Good to see you! How have you been?", "greeting"),
        ("Hey Jon, how's it going?", "greeting"),
        ("Long time no talk! Lots has been going on.", "greeting"),
        ("Pottery is so relaxing.", None),
        ("This is my highlight of the week.", None),  # "hi" only as a word
    ],
)
def test_line_kind(text: str, kind: str | None) -> None:
    assert line_kind(text) == kind


def test_run_kind_of_real_runs() -> None:
    assert run_kind(turns(GOODBYES), NAMES) == "closing"
    e73 = [
        ("Gina", "Remember Jon, Just do it!"),
        ("Jon", "Ah ha ha, yeah, JUST DOING IT!"),
        ("Gina", "That's the spirit! Bye!"),
    ]
    assert run_kind(turns(e73), ("Jon", "Gina")) == "closing"
    assert run_kind(turns(GREETINGS), NAMES) == "greeting"
    assert run_kind(turns([*GOODBYES, *CONTENT]), NAMES) is None
    assert run_kind(turns([("Caroline", "Thanks! Appreciate it.")]), NAMES) is None  # no marker
    assert run_kind([], NAMES) is None


def session(*parts: list[tuple[str, str]]) -> tuple[list[list[int]], list[Turn]]:
    groups, start = [], 0
    for part in parts:
        groups.append(list(range(start, start + len(part))))
        start += len(part)
    return groups, turns([line for part in parts for line in part])


def test_a_closing_only_run_joins_the_episode_before_it() -> None:
    groups, ts = session(CONTENT, CONTENT, GOODBYES)
    assert merge_phatic(groups, ts, NAMES) == ([[0, 1], [2, 3, 4, 5, 6]], 1)


def test_a_greeting_only_run_joins_the_episode_after_it() -> None:
    groups, ts = session(GREETINGS, CONTENT, CONTENT)
    assert merge_phatic(groups, ts, NAMES) == ([[0, 1, 2, 3], [4, 5]], 1)


def test_runs_at_the_session_s_edges_join_the_only_neighbour_they_have() -> None:
    groups, ts = session(GOODBYES, CONTENT)
    assert merge_phatic(groups, ts, NAMES) == ([[0, 1, 2, 3, 4]], 1)
    groups, ts = session(CONTENT, GREETINGS)
    assert merge_phatic(groups, ts, NAMES) == ([[0, 1, 2, 3]], 1)


def test_a_greeting_then_a_goodbye_stay_consecutive() -> None:
    groups, ts = session(CONTENT, GREETINGS, GOODBYES, CONTENT)
    merged, count = merge_phatic(groups, ts, NAMES)
    assert merged == [[0, 1, 2, 3, 4, 5, 6], [7, 8]] and count == 2


def test_a_session_of_small_talk_becomes_one_episode_and_content_is_untouched() -> None:
    groups, ts = session(GREETINGS, GOODBYES)
    assert merge_phatic(groups, ts, NAMES) == ([[0, 1, 2, 3, 4]], 1)
    groups, ts = session(CONTENT, CONTENT)
    assert merge_phatic(groups, ts, NAMES) == ([[0, 1], [2, 3]], 0)
    assert merge_phatic([], [], NAMES) == ([], 0)
