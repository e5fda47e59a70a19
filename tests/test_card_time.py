"""A card's rule time (issue 20): the expression inside the quote, else one of a cited turn's
that the constructor's time agrees with, else the session date, marked as a fallback; plans and
event-relative phrases marked. The time a reader is shown (issue 35): the rule's when it rests
on an expression, else the constructor's."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from qemem.evidence import CitedText, card_time, resolve_card_time
from qemem.evidence.card_time import TimeBasis, shown_time
from qemem.evidence.cards import ViewCard
from qemem.evidence.quotes import verify_quote
from qemem.evidence.times import TimeResolution

SAID = datetime(2023, 8, 15, 14, 0)


def span_of(quote: str, text: str) -> tuple[int, int] | None:
    return verify_quote(quote, text).span


def test_an_expression_about_something_else_in_the_turn_is_not_the_cards() -> None:
    text = "Work has been stressing me out lately. Next month we're hiking Mount Rainier though!"
    quote = "Work has been stressing me out"
    timed = card_time([CitedText("D3:4", text, SAID)], span_of(quote, text))
    assert timed.basis == "session"
    assert timed.resolution.expression == ""
    assert timed.resolution.phrase == "15 August 2023"
    # the expression inside a quote of the hike is that card's
    hike = card_time([CitedText("D3:4", text, SAID)], span_of("Next month we're hiking", text))
    assert (hike.basis, hike.resolution.phrase) == ("quote", "September 2023")


def test_a_photo_shared_today_is_not_timed_by_when_the_dish_was_cooked() -> None:
    text = "Here's the photo I took of the dish. I made it last night with fresh basil."
    timed = card_time(
        [CitedText("D5:2", text, SAID)],
        span_of("Here's the photo I took of the dish", text),
        model_time="15 August 2023",
    )
    assert timed.basis == "session"
    assert timed.resolution.start == date(2023, 8, 15)


def test_the_constructor_time_finds_the_expression_in_the_other_cited_turn() -> None:
    # D9:4 holds the quote, D9:2 the "last Friday" the card's time is about
    quoted = "It was so much fun, we sang the whole night."
    other = "Last Friday I went to a karaoke night with my coworkers."
    said = datetime(2022, 5, 4, 18, 0)
    cited = [CitedText("D9:4", quoted, said), CitedText("D9:2", other, said)]
    timed = card_time(cited, span_of("we sang the whole night", quoted), model_time="29 April 2022")
    assert (timed.basis, timed.source) == ("cited", "D9:2")
    assert timed.resolution.phrase == "the Friday before 4 May 2022"
    # without the constructor's time nothing says which expression, so it is the fallback
    assert card_time(cited, span_of("we sang the whole night", quoted)).basis == "session"
    # the public function takes the other turns as a keyword
    resolved = resolve_card_time(
        quoted,
        span_of("we sang the whole night", quoted),
        said,
        cited=[CitedText("D9:2", other, said)],
        model_time="the Friday before 4 May 2022",
    )
    assert resolved.expression == "Last Friday"


def test_an_event_relative_phrase_is_kept_where_no_date_follows() -> None:
    text = "We threw a gaming party two weekends later and everyone came."
    said = datetime(2022, 6, 3, 10, 0)
    timed = card_time(
        [CitedText("D12:7", text, said)], span_of("a gaming party two weekends later", text)
    )
    assert timed.basis == "session"
    assert timed.event == "two weekends later"


def test_a_plan_without_a_time_is_marked_planned() -> None:
    text = "We're planning a camping trip with the kids, they are so excited."
    timed = card_time(
        [CitedText("D20:3", text, datetime(2023, 8, 4))],
        span_of("We're planning a camping trip", text),
    )
    assert timed.planned
    assert timed.basis == "session"


def test_a_plan_with_a_time_resolves_forward_and_stays_planned() -> None:
    text = "We're going to the beach next weekend!"
    timed = card_time([CitedText("D2:1", text, SAID)], span_of(text, text))
    assert timed.basis == "quote"
    assert timed.resolution.start > SAID.date()
    assert timed.planned


def test_a_past_event_told_in_a_sentence_with_will_is_not_a_plan() -> None:
    text = "Yesterday I ran my first 10k, and I will never forget it."
    timed = card_time([CitedText("D1:5", text, SAID)], span_of(text, text))
    assert timed.resolution.phrase == "14 August 2023"
    assert not timed.planned


def test_resolve_card_time_keeps_its_three_argument_form() -> None:
    resolved = resolve_card_time("I went there last week.", (0, 22), SAID)
    assert resolved.phrase == "the week before 15 August 2023"


NEXT_MONTH = TimeResolution(
    "next month", date(2023, 9, 1), date(2023, 9, 30), "month", "September 2023"
)
SAID_ON = TimeResolution("", date(2023, 8, 15), date(2023, 8, 15), "day", "15 August 2023")


@pytest.mark.parametrize(
    ("model", "rule", "basis", "shown"),
    [
        ("in the autumn", NEXT_MONTH, "quote", "September 2023"),  # the rule rests on the quote
        ("in the autumn", NEXT_MONTH, "cited", "September 2023"),  # or on a cited turn
        ("in the autumn", SAID_ON, "session", "in the autumn"),  # only the day it was said
        ("", SAID_ON, "session", ""),
        ("last year", None, None, "last year"),  # nothing resolved
        ("", None, None, ""),
    ],
)
def test_a_reader_is_shown_the_rule_time_when_it_rests_on_an_expression(
    model: str, rule: TimeResolution | None, basis: TimeBasis | None, shown: str
) -> None:
    assert shown_time(model, rule, basis) == shown
    card = ViewCard("c", ["D1:1"], "q", model, "", resolved_time=rule, time_basis=basis)
    assert card.shown_time == shown


MONDAY = datetime(2023, 5, 8, 13, 56)  # LoCoMo defects of issue 33: said on a Monday


def test_a_recommendation_is_not_marked_planned() -> None:
    text = "You should totally visit New York City, you'll love it! It will be a blast."
    timed = card_time([CitedText("D3:4", text, MONDAY)], span_of(text, text))
    assert not timed.planned
    going = "I'm going to visit New York City next month."
    assert card_time([CitedText("D3:5", going, MONDAY)], span_of(going, going)).planned


def test_this_weekend_said_in_the_past_tense_on_a_monday_is_the_weekend_before() -> None:
    text = "We went hiking this weekend and saw a bear."
    timed = card_time([CitedText("D4:1", text, MONDAY)], span_of("hiking this weekend", text))
    assert timed.resolution.phrase == "the weekend before 8 May 2023"
    assert (timed.resolution.start, timed.resolution.end) == (date(2023, 5, 6), date(2023, 5, 7))


def test_two_weekends_later_counts_from_the_weekend_the_message_dates() -> None:
    text = "We went camping last weekend, and two weekends later we threw a party."
    timed = card_time(
        [CitedText("D5:2", text, MONDAY)], span_of("two weekends later we threw a party", text)
    )
    assert timed.basis == "quote" and timed.event == ""
    assert timed.resolution.phrase == "the weekend of 20 May 2023"
