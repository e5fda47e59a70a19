"""Table-driven tests of deterministic time resolution (qemem.evidence.times)."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from qemem.errors import InputError
from qemem.evidence.agreement import time_ranges
from qemem.evidence.plans import is_planned
from qemem.evidence.times import (
    TimeResolution,
    annotate_times,
    event_expressions,
    normalise_time,
    resolve_times,
)
from qemem.lexicon import parse_anchor

D = date
MON_8_MAY = D(2023, 5, 8)  # a Monday (LoCoMo conv-26 session 1: "1:56 pm on 8 May, 2023")
SAT_15_JUL = D(2023, 7, 15)  # a Saturday
SUN_9_JUL = D(2023, 7, 9)  # a Sunday
THU_20_JUL = D(2023, 7, 20)  # a Thursday

# (id, text, anchor, [(expression, start, end, granularity, phrase), ...])
Row = tuple[str, date, date, str, str]
CASES: list[tuple[str, str, date, list[Row]]] = [
    # --- days ---
    (
        "yesterday",
        "I went to a LGBTQ support group yesterday.",
        MON_8_MAY,
        [("yesterday", D(2023, 5, 7), D(2023, 5, 7), "day", "7 May 2023")],
    ),
    (
        "today",
        "Today was a good day",
        MON_8_MAY,
        [("Today", MON_8_MAY, MON_8_MAY, "day", "8 May 2023")],
    ),
    (
        "tonight",
        "We are going out tonight!",
        MON_8_MAY,
        [("tonight", MON_8_MAY, MON_8_MAY, "day", "8 May 2023")],
    ),
    (
        "this-morning",
        "I ran 5k this morning.",
        MON_8_MAY,
        [("this morning", MON_8_MAY, MON_8_MAY, "day", "8 May 2023")],
    ),
    (
        "this-afternoon",
        "I painted this afternoon.",
        MON_8_MAY,
        [("this afternoon", MON_8_MAY, MON_8_MAY, "day", "8 May 2023")],
    ),
    (
        "this-evening",
        "Let's talk this evening.",
        MON_8_MAY,
        [("this evening", MON_8_MAY, MON_8_MAY, "day", "8 May 2023")],
    ),
    (
        "last-night",
        "Last night we watched the stars.",
        MON_8_MAY,
        [("Last night", D(2023, 5, 7), D(2023, 5, 7), "day", "7 May 2023")],
    ),
    (
        "tomorrow",
        "My interview is tomorrow.",
        MON_8_MAY,
        [("tomorrow", D(2023, 5, 9), D(2023, 5, 9), "day", "9 May 2023")],
    ),
    (
        "day-before-yesterday",
        "It happened the day before yesterday.",
        MON_8_MAY,
        [("the day before yesterday", D(2023, 5, 6), D(2023, 5, 6), "day", "6 May 2023")],
    ),
    (
        "day-after-tomorrow",
        "We leave the day after tomorrow.",
        MON_8_MAY,
        [("the day after tomorrow", D(2023, 5, 10), D(2023, 5, 10), "day", "10 May 2023")],
    ),
    # --- leap years, month ends, year boundaries for days ---
    (
        "leap-yesterday",
        "Yesterday was fun.",
        D(2024, 3, 1),
        [("Yesterday", D(2024, 2, 29), D(2024, 2, 29), "day", "29 February 2024")],
    ),
    (
        "non-leap-yesterday",
        "Yesterday was fun.",
        D(2023, 3, 1),
        [("Yesterday", D(2023, 2, 28), D(2023, 2, 28), "day", "28 February 2023")],
    ),
    (
        "leap-tomorrow",
        "See you tomorrow",
        D(2024, 2, 28),
        [("tomorrow", D(2024, 2, 29), D(2024, 2, 29), "day", "29 February 2024")],
    ),
    (
        "non-leap-tomorrow",
        "See you tomorrow",
        D(2023, 2, 28),
        [("tomorrow", D(2023, 3, 1), D(2023, 3, 1), "day", "1 March 2023")],
    ),
    (
        "leap-days-ago",
        "I got it 3 days ago.",
        D(2024, 3, 2),
        [("3 days ago", D(2024, 2, 28), D(2024, 2, 28), "day", "28 February 2024")],
    ),
    (
        "new-year-yesterday",
        "We partied yesterday",
        D(2024, 1, 1),
        [("yesterday", D(2023, 12, 31), D(2023, 12, 31), "day", "31 December 2023")],
    ),
    (
        "new-year-tomorrow",
        "Party tomorrow",
        D(2023, 12, 31),
        [("tomorrow", D(2024, 1, 1), D(2024, 1, 1), "day", "1 January 2024")],
    ),
    # --- forward counts: "from now" and "in N units' time"; a bare "in N units" is a duration ---
    (
        "days-from-now-month-end",
        "The results come 3 days from now",
        D(2023, 5, 30),
        [("3 days from now", D(2023, 6, 2), D(2023, 6, 2), "day", "2 June 2023")],
    ),
    (
        "weeks-time",
        "The move is in two weeks' time",
        MON_8_MAY,
        [
            (
                "in two weeks' time",
                D(2023, 5, 22),
                D(2023, 5, 28),
                "week",
                "two weeks after 8 May 2023",
            )
        ],
    ),
    (
        "a-month-from-now-december",
        "We fly a month from now",
        D(2023, 12, 15),
        [("a month from now", D(2024, 1, 1), D(2024, 1, 31), "month", "January 2024")],
    ),
    (
        "in-a-years-time",
        "I'll graduate in a year’s time",
        MON_8_MAY,
        [("in a year’s time", D(2024, 1, 1), D(2024, 12, 31), "year", "2024")],
    ),
    ("duration-not-a-date", "I built the shed in two weeks", MON_8_MAY, []),
    # --- N units ago: digits and words ---
    (
        "days-ago-digits",
        "I adopted her 2 days ago",
        MON_8_MAY,
        [("2 days ago", D(2023, 5, 6), D(2023, 5, 6), "day", "6 May 2023")],
    ),
    (
        "days-ago-word",
        "I adopted her two days ago",
        MON_8_MAY,
        [("two days ago", D(2023, 5, 6), D(2023, 5, 6), "day", "6 May 2023")],
    ),
    (
        "days-ago-ten",
        "ten days ago I started",
        MON_8_MAY,
        [("ten days ago", D(2023, 4, 28), D(2023, 4, 28), "day", "28 April 2023")],
    ),
    (
        "couple-of-days",
        "a couple of days ago",
        MON_8_MAY,
        [("a couple of days ago", D(2023, 5, 6), D(2023, 5, 6), "day", "6 May 2023")],
    ),
    (
        "a-week-ago",
        "A week ago I joined.",
        MON_8_MAY,
        [("A week ago", D(2023, 5, 1), D(2023, 5, 7), "week", "the week before 8 May 2023")],
    ),
    (
        "two-weeks-ago",
        "two weeks ago we hiked",
        D(2023, 8, 11),
        [
            (
                "two weeks ago",
                D(2023, 7, 24),
                D(2023, 7, 30),
                "week",
                "two weeks before 11 August 2023",
            )
        ],
    ),
    (
        "two-weekends-ago",
        "I went camping two weekends ago",
        D(2023, 7, 17),  # a Monday
        [
            (
                "two weekends ago",
                D(2023, 7, 8),
                D(2023, 7, 9),
                "weekend",
                "two weekends before 17 July 2023",
            )
        ],
    ),
    (
        "a-few-days-ago",
        "a few days ago",
        MON_8_MAY,
        [("a few days ago", D(2023, 5, 4), D(2023, 5, 6), "week", "a few days before 8 May 2023")],
    ),
    (
        "a-few-weeks-ago",
        "A few weeks ago I moved",
        MON_8_MAY,
        [
            (
                "A few weeks ago",
                D(2023, 4, 10),
                D(2023, 4, 30),
                "month",
                "a few weeks before 8 May 2023",
            )
        ],
    ),
    (
        "a-few-years-ago",
        "I started painting a few years ago",
        MON_8_MAY,
        [("a few years ago", D(2019, 1, 1), D(2021, 12, 31), "year", "a few years before 2023")],
    ),
    (
        "month-ago-month-end",
        "a month ago",
        D(2023, 3, 31),
        [("a month ago", D(2023, 2, 1), D(2023, 2, 28), "month", "February 2023")],
    ),
    (
        "months-ago-year-boundary",
        "two months ago",
        D(2023, 1, 15),
        [("two months ago", D(2022, 11, 1), D(2022, 11, 30), "month", "November 2022")],
    ),
    (
        "years-ago",
        "I got my degree 10 years ago",
        MON_8_MAY,
        [("10 years ago", D(2013, 1, 1), D(2013, 12, 31), "year", "2013")],
    ),
    # --- last/this/next week, weekend, month, year ---
    (
        "last-week-year-boundary",
        "last week",
        D(2023, 1, 2),
        [("last week", D(2022, 12, 26), D(2023, 1, 1), "week", "the week before 2 January 2023")],
    ),
    (
        "last-week-on-sunday",
        "Last week I painted.",
        SUN_9_JUL,
        [("Last week", D(2023, 6, 26), D(2023, 7, 2), "week", "the week before 9 July 2023")],
    ),
    (
        "this-week",
        "this week",
        MON_8_MAY,
        [("this week", D(2023, 5, 8), D(2023, 5, 14), "week", "the week of 8 May 2023")],
    ),
    (
        "next-week",
        "next week",
        D(2023, 12, 28),
        [("next week", D(2024, 1, 1), D(2024, 1, 7), "week", "the week after 28 December 2023")],
    ),
    (
        "last-weekend-on-sunday",
        "last weekend",
        SUN_9_JUL,
        [
            (
                "last weekend",
                D(2023, 7, 1),
                D(2023, 7, 2),
                "weekend",
                "the weekend before 9 July 2023",
            )
        ],
    ),
    (
        "over-the-weekend",
        "I went to the beach over the weekend.",
        MON_8_MAY,
        [
            (
                "over the weekend",
                D(2023, 5, 6),
                D(2023, 5, 7),
                "weekend",
                "the weekend before 8 May 2023",
            )
        ],
    ),
    (
        "this-weekend-weekday",
        "this weekend",
        MON_8_MAY,
        [
            (
                "this weekend",
                D(2023, 5, 13),
                D(2023, 5, 14),
                "weekend",
                "the weekend after 8 May 2023",
            )
        ],
    ),
    (
        "this-weekend-on-saturday",
        "this weekend",
        SAT_15_JUL,
        [
            (
                "this weekend",
                D(2023, 7, 15),
                D(2023, 7, 16),
                "weekend",
                "the weekend of 15 July 2023",
            )
        ],
    ),
    (
        "next-weekend",
        "next weekend",
        MON_8_MAY,
        [("next weekend", D(2023, 5, 20), D(2023, 5, 21), "weekend", "the weekend of 20 May 2023")],
    ),
    (
        "last-month-march-31",
        "last month",
        D(2023, 3, 31),
        [("last month", D(2023, 2, 1), D(2023, 2, 28), "month", "the month before 31 March 2023")],
    ),
    (
        "last-month-leap",
        "last month",
        D(2024, 3, 31),
        [("last month", D(2024, 2, 1), D(2024, 2, 29), "month", "the month before 31 March 2024")],
    ),
    (
        "last-month-january",
        "Last month we moved.",
        D(2023, 1, 15),
        [
            (
                "Last month",
                D(2022, 12, 1),
                D(2022, 12, 31),
                "month",
                "the month before 15 January 2023",
            )
        ],
    ),
    (
        "next-month-december",
        "next month",
        D(2023, 12, 20),
        [("next month", D(2024, 1, 1), D(2024, 1, 31), "month", "January 2024")],
    ),
    (
        "this-month",
        "this month",
        MON_8_MAY,
        [("this month", D(2023, 5, 1), D(2023, 5, 31), "month", "May 2023")],
    ),
    (
        "last-year",
        "I went there last year",
        MON_8_MAY,
        [("last year", D(2022, 1, 1), D(2022, 12, 31), "year", "2022")],
    ),
    (
        "next-year-new-years-eve",
        "next year",
        D(2023, 12, 31),
        [("next year", D(2024, 1, 1), D(2024, 12, 31), "year", "2024")],
    ),
    # --- weekdays, including the weekday of the anchor ---
    (
        "last-friday",
        "I ran a charity race last Friday.",
        SAT_15_JUL,
        [("last Friday", D(2023, 7, 14), D(2023, 7, 14), "day", "the Friday before 15 July 2023")],
    ),
    (
        "last-monday-on-monday",
        "last Monday",
        MON_8_MAY,
        [("last Monday", D(2023, 5, 1), D(2023, 5, 1), "day", "the Monday before 8 May 2023")],
    ),
    (
        "last-saturday-on-saturday",
        "last saturday",
        SAT_15_JUL,
        [
            (
                "last saturday",
                D(2023, 7, 8),
                D(2023, 7, 8),
                "day",
                "the Saturday before 15 July 2023",
            )
        ],
    ),
    (
        "on-monday-on-monday",
        "I saw her on Monday",
        MON_8_MAY,
        [("on Monday", MON_8_MAY, MON_8_MAY, "day", "8 May 2023")],
    ),
    (
        "on-sunday-from-monday",
        "on Sunday",
        MON_8_MAY,
        [("on Sunday", D(2023, 5, 7), D(2023, 5, 7), "day", "the Sunday before 8 May 2023")],
    ),
    # a weekday without "last"/"next" is the last one before the session date ...
    (
        "on-friday-past-from-monday",
        "I went there on Friday",
        MON_8_MAY,
        [("on Friday", D(2023, 5, 5), D(2023, 5, 5), "day", "the Friday before 8 May 2023")],
    ),
    (
        "this-friday-past-tense",
        "This Friday I ran my first 10k",
        MON_8_MAY,
        [("This Friday", D(2023, 5, 5), D(2023, 5, 5), "day", "the Friday before 8 May 2023")],
    ),
    (
        "on-saturday-not-future-progressive",
        "I'm doing great - just got back from a pottery workshop on Saturday.",
        MON_8_MAY,
        [("on Saturday", D(2023, 5, 6), D(2023, 5, 6), "day", "the Saturday before 8 May 2023")],
    ),
    # ... and the next one after it when its clause speaks of the future
    (
        "on-friday-future-going",
        "I'm going on Friday",
        MON_8_MAY,
        [("on Friday", D(2023, 5, 12), D(2023, 5, 12), "day", "the Friday after 8 May 2023")],
    ),
    (
        "this-friday-future-will",
        "We will meet this Friday",
        MON_8_MAY,
        [("this Friday", D(2023, 5, 12), D(2023, 5, 12), "day", "the Friday after 8 May 2023")],
    ),
    (
        "future-is-per-clause",
        "I'll call you on Sunday. On Saturday I ran.",
        MON_8_MAY,
        [
            ("on Sunday", D(2023, 5, 14), D(2023, 5, 14), "day", "the Sunday after 8 May 2023"),
            ("On Saturday", D(2023, 5, 6), D(2023, 5, 6), "day", "the Saturday before 8 May 2023"),
        ],
    ),
    (
        "on-tuesday-from-saturday",
        "On Tuesday we talked",
        SAT_15_JUL,
        [("On Tuesday", D(2023, 7, 11), D(2023, 7, 11), "day", "the Tuesday before 15 July 2023")],
    ),
    # --- method.md checks: last night, last weekend, last month, the other day, a few days ago
    (
        "method-last-night",
        "We watched a movie last night",
        MON_8_MAY,
        [("last night", D(2023, 5, 7), D(2023, 5, 7), "day", "7 May 2023")],
    ),
    (
        "method-last-weekend",
        "We went hiking last weekend",
        MON_8_MAY,
        [
            (
                "last weekend",
                D(2023, 5, 6),
                D(2023, 5, 7),
                "weekend",
                "the weekend before 8 May 2023",
            )
        ],
    ),
    (
        "method-last-month",
        "I started boot camp last month",
        MON_8_MAY,
        [("last month", D(2023, 4, 1), D(2023, 4, 30), "month", "the month before 8 May 2023")],
    ),
    (
        "method-the-other-day",
        "I saw her the other day",
        MON_8_MAY,
        [
            (
                "the other day",
                D(2023, 5, 4),
                D(2023, 5, 6),
                "week",
                "a few days before 8 May 2023",
            )
        ],
    ),
    (
        "method-a-few-days-ago",
        "I saw her a few days ago",
        MON_8_MAY,
        [
            (
                "a few days ago",
                D(2023, 5, 4),
                D(2023, 5, 6),
                "week",
                "a few days before 8 May 2023",
            )
        ],
    ),
    (
        "this-past-friday",
        "this past Friday",
        SAT_15_JUL,
        [
            (
                "this past Friday",
                D(2023, 7, 14),
                D(2023, 7, 14),
                "day",
                "the Friday before 15 July 2023",
            )
        ],
    ),
    (
        "next-monday-on-monday",
        "next Monday",
        MON_8_MAY,
        [("next Monday", D(2023, 5, 15), D(2023, 5, 15), "day", "the Monday after 8 May 2023")],
    ),
    (
        "next-sunday-year-boundary",
        "next sunday",
        D(2023, 12, 31),
        [("next sunday", D(2024, 1, 7), D(2024, 1, 7), "day", "the Sunday after 31 December 2023")],
    ),
    # --- seasons ---
    (
        "last-summer",
        "Last summer we went camping.",
        MON_8_MAY,
        [("Last summer", D(2022, 6, 1), D(2022, 8, 31), "season", "summer 2022")],
    ),
    (
        "this-summer-before",
        "this summer",
        MON_8_MAY,
        [("this summer", D(2023, 6, 1), D(2023, 8, 31), "season", "summer 2023")],
    ),
    (
        "last-summer-in-autumn",
        "last summer",
        D(2023, 10, 20),
        [("last summer", D(2023, 6, 1), D(2023, 8, 31), "season", "summer 2023")],
    ),
    (
        "last-spring-in-spring",
        "last spring",
        MON_8_MAY,
        [("last spring", D(2022, 3, 1), D(2022, 5, 31), "season", "spring 2022")],
    ),
    (
        "this-winter-in-january",
        "this winter",
        D(2023, 1, 15),
        [("this winter", D(2022, 12, 1), D(2023, 2, 28), "season", "winter 2022-23")],
    ),
    (
        "last-winter-in-january",
        "last winter",
        D(2023, 1, 15),
        [("last winter", D(2021, 12, 1), D(2022, 2, 28), "season", "winter 2021-22")],
    ),
    (
        "next-winter-leap",
        "next winter",
        MON_8_MAY,
        [("next winter", D(2023, 12, 1), D(2024, 2, 29), "season", "winter 2023-24")],
    ),
    (
        "this-fall",
        "this fall",
        MON_8_MAY,
        [("this fall", D(2023, 9, 1), D(2023, 11, 30), "season", "fall 2023")],
    ),
    # --- several expressions, none, exact substrings, whole words ---
    (
        "two-expressions",
        "I ran a race last Sunday and I'm flying to Paris next month.",
        MON_8_MAY,
        [
            ("last Sunday", D(2023, 5, 7), D(2023, 5, 7), "day", "the Sunday before 8 May 2023"),
            ("next month", D(2023, 6, 1), D(2023, 6, 30), "month", "June 2023"),
        ],
    ),
    (
        "three-expressions",
        "Yesterday I rested, today I paint and tomorrow I hike.",
        MON_8_MAY,
        [
            ("Yesterday", D(2023, 5, 7), D(2023, 5, 7), "day", "7 May 2023"),
            ("today", MON_8_MAY, MON_8_MAY, "day", "8 May 2023"),
            ("tomorrow", D(2023, 5, 9), D(2023, 5, 9), "day", "9 May 2023"),
        ],
    ),
    ("no-expression", "I love painting sunsets with my kids.", MON_8_MAY, []),
    ("whole-words-only", "On Sundays I go to yesterdays-themed parties monthly.", MON_8_MAY, []),
    (
        "exact-substring-spacing",
        "It was LAST   week.",
        MON_8_MAY,
        [("LAST   week", D(2023, 5, 1), D(2023, 5, 7), "week", "the week before 8 May 2023")],
    ),
    (
        "weekend-not-week",
        "last weekend",
        MON_8_MAY,
        [
            (
                "last weekend",
                D(2023, 5, 6),
                D(2023, 5, 7),
                "weekend",
                "the weekend before 8 May 2023",
            )
        ],
    ),
    # --- abbreviated weekdays resolve like full names; a bare abbreviation is no weekday ---
    (
        "abbreviated-tues",
        "I went last Tues.",
        THU_20_JUL,
        [("last Tues", D(2023, 7, 18), D(2023, 7, 18), "day", "the Tuesday before 20 July 2023")],
    ),
    (
        "abbreviated-sat",
        "last Sat was fun",
        THU_20_JUL,
        [("last Sat", D(2023, 7, 15), D(2023, 7, 15), "day", "the Saturday before 20 July 2023")],
    ),
    (
        "abbreviated-thurs",
        "we met last Thurs",
        THU_20_JUL,
        [("last Thurs", D(2023, 7, 13), D(2023, 7, 13), "day", "the Thursday before 20 July 2023")],
    ),
    (
        "abbreviated-fri",
        "last Fri I rested",
        THU_20_JUL,
        [("last Fri", D(2023, 7, 14), D(2023, 7, 14), "day", "the Friday before 20 July 2023")],
    ),
    (
        "abbreviated-next-mon",
        "see you next Mon",
        THU_20_JUL,
        [("next Mon", D(2023, 7, 24), D(2023, 7, 24), "day", "the Monday after 20 July 2023")],
    ),
    (
        "abbreviated-this-past-sun",
        "this past Sun",
        THU_20_JUL,
        [
            (
                "this past Sun",
                D(2023, 7, 16),
                D(2023, 7, 16),
                "day",
                "the Sunday before 20 July 2023",
            )
        ],
    ),
    ("bare-abbreviation", "I sat on sun loungers", THU_20_JUL, []),
    # --- a winter is labelled with both its years ---
    (
        "last-winter-in-october",
        "last winter",
        D(2023, 10, 13),
        [("last winter", D(2022, 12, 1), D(2023, 2, 28), "season", "winter 2022-23")],
    ),
]


def _rows(found: list[TimeResolution]) -> list[Row]:
    return [(r.expression, r.start, r.end, r.granularity, r.phrase) for r in found]


@pytest.mark.parametrize(
    ("text", "anchor", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_resolve_times_table(text: str, anchor: date, expected: list[Row]) -> None:
    found = resolve_times(text, anchor)
    assert _rows(found) == expected
    for r in found:
        assert text[r.position : r.position + len(r.expression)] == r.expression


def test_datetime_and_string_anchors_use_the_date() -> None:
    by_date = resolve_times("yesterday", MON_8_MAY)
    assert resolve_times("yesterday", datetime(2023, 5, 8, 13, 56)) == by_date
    assert resolve_times("yesterday", "1:56 pm on 8 May, 2023") == by_date


def test_repeated_resolutions_are_equal_and_independent() -> None:
    first = resolve_times("two weeks ago and yesterday", MON_8_MAY)
    first.clear()  # the memoised result is not shared with callers
    again = resolve_times("two weeks ago and yesterday", MON_8_MAY)
    assert [r.expression for r in again] == ["two weeks ago", "yesterday"]


def test_normalise_time_first_or_anchor() -> None:
    first = normalise_time("We met last week and again yesterday", MON_8_MAY)
    assert (first.expression, first.phrase) == ("last week", "the week before 8 May 2023")
    none = normalise_time("I love painting.", datetime(2023, 5, 8, 13, 56))
    assert none == TimeResolution(
        "", MON_8_MAY, MON_8_MAY, "day", "8 May 2023", position=0, anchor=MON_8_MAY
    )


def test_to_dict_is_json_ready() -> None:
    (r,) = resolve_times("last Friday", SAT_15_JUL)
    assert r.to_dict() == {
        "expression": "last Friday",
        "start": "2023-07-14",
        "end": "2023-07-14",
        "granularity": "day",
        "phrase": "the Friday before 15 July 2023",
        "position": 0,
        "anchor": "2023-07-15",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1:56 pm on 8 May, 2023", D(2023, 5, 8)),
        ("10:37 am on 27 June, 2023", D(2023, 6, 27)),
        ("  7:55 pm  on 9 June, 2023 ", D(2023, 6, 9)),
        ("2023-05-08", D(2023, 5, 8)),
        ("2023-05-08T13:56:00", D(2023, 5, 8)),
        ("8 May 2023", D(2023, 5, 8)),
        ("May 8, 2023", D(2023, 5, 8)),
        ("29 Feb, 2024", D(2024, 2, 29)),
        (datetime(2023, 5, 8, 13, 56), D(2023, 5, 8)),
        (D(2023, 5, 8), D(2023, 5, 8)),
    ],
)
def test_parse_anchor(value: str | date, expected: date) -> None:
    assert parse_anchor(value) == expected


@pytest.mark.parametrize(
    "value", ["", "next Tuesday", "29 February, 2023", "1:56 pm on 8 Mai, 2023"]
)
def test_parse_anchor_rejects_garbage(value: str) -> None:
    with pytest.raises(InputError, match="cannot read the anchor date"):
        parse_anchor(value)


def test_a_month_name_the_pattern_matches_case_insensitively_always_names_a_month() -> None:
    # re.IGNORECASE matches the long s (ſ) for "s"; the month lookup folds it the same way
    assert time_ranges("ſeptember 2023") == time_ranges("September 2023")


# --- annotations, plans, event-relative phrases ---


def test_annotations_stand_after_their_expressions() -> None:
    text = annotate_times("I made it last night, and next Sat we go.", D(2023, 8, 15))
    assert text == (
        "I made it last night [14 August 2023], and next Sat "
        "[the Saturday after 15 August 2023] we go."
    )


def test_event_relative_phrases_are_recognised() -> None:
    text = "a gaming party two weekends later, a few days after the show, the day before yesterday"
    assert [e for _, e in event_expressions(text)] == ["two weekends later", "a few days after"]


@pytest.mark.parametrize(
    ("text", "planned"),
    [
        ("we're planning a camping trip", True),
        ("I want to go hiking", True),
        ("we'll see", True),
        ("I went hiking with my dog", False),
    ],
)
def test_plans_are_recognised(text: str, planned: bool) -> None:
    assert is_planned(text) is planned


def test_this_weekend_in_the_past_tense_on_a_weekday_is_the_last_weekend() -> None:
    (past,) = resolve_times("we went hiking this weekend", MON_8_MAY)
    assert past.phrase == "the weekend before 8 May 2023"
    (ahead,) = resolve_times("this weekend we're hiking", MON_8_MAY)
    assert ahead.phrase == "the weekend after 8 May 2023"
    (plain,) = resolve_times("this weekend", MON_8_MAY)  # no tense: the coming one
    assert plain.phrase == "the weekend after 8 May 2023"
    (weekend,) = resolve_times("we went hiking this weekend", SUN_9_JUL)  # said on it
    assert weekend.phrase == "the weekend of 8 July 2023"


def test_an_event_relative_phrase_counts_from_the_expression_before_it() -> None:
    text = "I started yesterday, the next day I quit, and two weeks later I was back."
    found = resolve_times(text, MON_8_MAY)
    assert [(r.expression, r.phrase) for r in found] == [
        ("yesterday", "7 May 2023"),
        ("the next day", "8 May 2023"),
        ("two weeks later", "the week of 22 May 2023"),
    ]
    assert event_expressions(text) == []
    # coarser than its unit, vague, or with nothing before it: no date follows
    for unresolved in (
        "last month we met, and two days later we married",
        "yesterday I left, and a few days later I came back",
        "two weekends later we threw a party",
    ):
        assert event_expressions(unresolved), unresolved
