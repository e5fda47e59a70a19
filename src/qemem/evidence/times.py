"""Deterministic resolution of relative time expressions against a session date.

``resolve_times`` finds relative expressions ("yesterday", "last Friday", "two weeks ago",
"next month", "last summer", ...) in a text and resolves each against the anchor (the session
date of the text's source) into an inclusive date range, a granularity and a phrase in the
method's form:

* days: an absolute date, "7 May 2023" (``%-d %B %Y``, no leading zero);
* weekday-relative: kept relative, "the Friday before 13 March 2023" / "the Friday after ...";
* weeks (ISO, Monday..Sunday): "the week before 9 June 2023", "the week of ...", "two weeks
  before ..."; weekends (Saturday..Sunday) likewise with "weekend";
* months: "May 2023"; years: "2022"; seasons: "summer 2023", a winter by both its years
  ("winter 2022-23": December 2022 to February 2023).

Conventions (documented choices):

* Weekdays may be abbreviated after "last", "next" and "this past" ("last Tues", "next Sat.",
  see ``qemem.lexicon.WEEKDAY_ABBREVIATIONS``); a bare "on Sun" is left alone.
* "last/next <weekday>": the nearest such weekday strictly before/after the anchor ("last
  Monday" said on a Monday is seven days earlier). A weekday said without "last" or "next"
  ("on Friday", "this Friday") is the last such day before the anchor ("the Friday before
  8 May 2023"), or the next one after it when its clause is in the future tense ("I'm going on
  Friday", "we will meet this Friday"); the anchor date itself when it is that weekday.
* "last/this/next week" and "weekend": the previous/current/next ISO week (its Saturday and
  Sunday for weekends). "on/over the weekend" and "this past weekend" mean the last weekend,
  and so does "this weekend" said on a weekday in a clause in the past tense ("we went hiking
  this weekend", said on a Monday).
* "last month": the calendar month before the anchor's, phrased "the month before <anchor>";
  "this/next month": that month by name ("June 2023"). "last night" is yesterday; "the other
  day" is vague like "a few days ago".
* "N days ago": the day; "N weeks/weekends ago": that ISO week (weekend) N weeks back; "N
  months/years ago": that calendar month/year. "a"/"an" = 1, "a couple (of)" = 2. Forward
  counts resolve the same way ahead: "N units from now" and "in N units' time" ("the week
  after", "two weeks after ..."). A bare "in N units" is left alone: it usually states a
  duration ("I built it in two weeks"), not a date.
* "a few"/"few"/"several" are vague: counted as 3, but the range runs from 4 units ago to 2
  units ago (calendar-aligned) and the granularity is widened one step (day -> week, week and
  weekend -> month, month and year -> year); the phrase reads "a few days before 8 May 2023".
* Seasons are northern meteorological: spring Mar-May, summer Jun-Aug, autumn/fall Sep-Nov,
  winter Dec-Feb labelled with both its years ("winter 2022-23" = Dec 2022-Feb 2023).
  "last <season>": the latest one that ended before the anchor; "next": the first that starts
  after it; "this": the one containing the anchor, else the nearest one.

* A phrase relative to another event ("two weekends later", "a week after", "the next day")
  counts from the last expression resolved before it in the same text ("we went camping last
  weekend, and two weekends later ..."), when that one is no coarser than the phrase's unit;
  otherwise (or with a vague count: "a few days later") it has no date and is left alone.

Matching is case-insensitive on whole words; matches do not overlap (the earliest, then the
longest, wins) and are returned in text order. An expression whose resolution would leave
Python's calendar (years 1 to 9999: "5000 years ago", "999999999 days ago", or any relative
time said on a date at an end of it) is not resolved; qemem takes dates of the years 1900 to
2200 only (``qemem.lexicon.FIRST_YEAR``), where the calendar leaves room for every count up to
several thousand years.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Literal

from qemem.lexicon import (
    MONTHS,
    NUMBER_WORDS,
    SEASONS,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAYS,
    day_phrase,
    month_range,
    parse_anchor,
    season_range,
    shift_month,
    weekday_number,
)

Granularity = Literal["day", "week", "weekend", "month", "season", "year"]

_WIDER: dict[str, Granularity] = {
    "day": "week",
    "week": "month",
    "weekend": "month",
    "month": "year",
    "year": "year",
}


@dataclass(frozen=True)
class TimeResolution:
    """One resolved expression: ``text[position:position + len(expression)] == expression``;
    ``anchor`` is the session date it was resolved against (None when not known)."""

    expression: str
    start: date
    end: date
    granularity: Granularity
    phrase: str
    position: int = 0
    anchor: date | None = None

    def to_dict(self) -> dict[str, str | int | None]:
        """JSON-ready form (dates as ISO strings)."""
        return {
            "expression": self.expression,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "granularity": self.granularity,
            "phrase": self.phrase,
            "position": self.position,
            "anchor": self.anchor.isoformat() if self.anchor else None,
        }


_Resolved = tuple[date, date, Granularity, str]


def _month_phrase(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _count_word(n: int) -> str:
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else str(n)


def _parse_count(text: str) -> tuple[int, bool]:
    """Return (count, vague) for the count of an "N units ago" expression."""
    words = text.lower().split()
    if words[0].isdigit():
        return int(words[0]), False
    if "few" in words or "several" in words:
        return 3, True
    if "couple" in words:
        return 2, False
    if words[0] in ("a", "an"):
        return 1, False
    return NUMBER_WORDS.index(words[0]), False


def _units_ago(anchor: date, n: int, unit: str) -> tuple[date, date]:
    """Calendar range of the unit lying ``n`` units before the anchor's."""
    if unit == "day":
        day = anchor - timedelta(days=n)
        return day, day
    if unit in ("week", "weekend"):
        monday = _monday(anchor) - timedelta(weeks=n)
        first = monday + timedelta(days=5 if unit == "weekend" else 0)
        return first, monday + timedelta(days=6)
    if unit == "month":
        return month_range(*shift_month(anchor, -n))
    return date(anchor.year - n, 1, 1), date(anchor.year - n, 12, 31)


def _shifted(m: re.Match[str], anchor: date, direction: int) -> _Resolved:
    """ "N units ago" (``direction`` -1) or "in N units" / "N units from now" (+1)."""
    n, vague = _parse_count(m.group("n"))
    unit = m.group("unit").lower()
    relation = "before" if direction < 0 else "after"
    if vague:
        ends = (_units_ago(anchor, -direction * 4, unit), _units_ago(anchor, -direction * 2, unit))
        start, end = min(r[0] for r in ends), max(r[1] for r in ends)
        word = "several" if "several" in m.group("n").lower() else "a few"
        base = str(anchor.year) if unit == "year" else day_phrase(anchor)
        return start, end, _WIDER[unit], f"{word} {unit}s {relation} {base}"
    start, end = _units_ago(anchor, -direction * n, unit)
    if unit == "day":
        return start, end, "day", day_phrase(start)
    if unit in ("week", "weekend"):
        lead = f"the {unit}" if n == 1 else f"{_count_word(n)} {unit}s"
        granularity: Granularity = "weekend" if unit == "weekend" else "week"
        return start, end, granularity, f"{lead} {relation} {day_phrase(anchor)}"
    if unit == "month":
        return start, end, "month", _month_phrase(start.year, start.month)
    return start, end, "year", str(start.year)


def _ago(m: re.Match[str], anchor: date) -> _Resolved:
    return _shifted(m, anchor, -1)


def _ahead(m: re.Match[str], anchor: date) -> _Resolved:
    return _shifted(m, anchor, 1)


def _fixed_day(offset: int) -> Callable[[re.Match[str], date], _Resolved]:
    def resolve(_: re.Match[str], anchor: date) -> _Resolved:
        day = anchor + timedelta(days=offset)
        return day, day, "day", day_phrase(day)

    return resolve


def _other_day(_: re.Match[str], anchor: date) -> _Resolved:
    start, end = _units_ago(anchor, 4, "day")[0], _units_ago(anchor, 2, "day")[1]
    return start, end, "week", f"a few days before {day_phrase(anchor)}"


def _relative_unit(m: re.Match[str], anchor: date) -> _Resolved:
    rel, unit = m.group("rel").lower(), m.group("unit").lower()
    step = {"last": -1, "this": 0, "next": 1}[rel]
    if (rel, unit) == ("this", "weekend") and anchor.weekday() < 5 and _past_clause(m):
        return _past_weekend(m, anchor)
    if unit == "month":
        start, end = month_range(*shift_month(anchor, step))
        if step < 0:
            return start, end, "month", f"the month before {day_phrase(anchor)}"
        return start, end, "month", _month_phrase(start.year, start.month)
    if unit == "year":
        year = anchor.year + step
        return date(year, 1, 1), date(year, 12, 31), "year", str(year)
    start, end = _units_ago(anchor, -step, unit)
    at = day_phrase(anchor)
    if unit == "week":
        phrase = {-1: f"the week before {at}", 0: f"the week of {at}", 1: f"the week after {at}"}
        return start, end, "week", phrase[step]
    if step < 0:
        return start, end, "weekend", f"the weekend before {at}"
    if step == 0 and anchor.weekday() < 5:
        return start, end, "weekend", f"the weekend after {at}"
    return start, end, "weekend", f"the weekend of {day_phrase(start)}"


def _past_weekend(_: re.Match[str] | None, anchor: date) -> _Resolved:
    start, end = _units_ago(anchor, 1, "weekend")
    return start, end, "weekend", f"the weekend before {day_phrase(anchor)}"


#: Future-tense markers of a clause: modal "will"/"'ll"/"shall", "going to"/"gonna", plans and
#: wishes, and the present progressive of verbs of going and arranging ("I'm flying on Friday").
_FUTURE = re.compile(
    r"(?:\b(?:will|shall|gonna|going\s+to|plan(?:ning)?\s+to|about\s+to|hop(?:e|ing)\s+to|"
    r"can['\u2019]?t\s+wait|can\s?not\s+wait|looking\s+forward|"
    r"(?:am|are|is|['\u2019](?:m|re|s))\s+(?:going|heading|leaving|flying|travell?ing|driving|"
    r"meeting|hosting|having|starting|visiting|coming))\b|['\u2019]ll\b)",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[.!?;\n]")
#: Past-tense markers of a clause: common irregular past forms, "have/'ve been", and a subject
#: pronoun before a verb in -ed ("we hiked", "I finally finished").
_PAST = re.compile(
    r"\b(?:was|were|had|did|went|got|made|took|came|saw|met|spent|ran|found|bought|felt|"
    r"gave|left|told|thought|ate|drove|flew|won|lost|began|wrote|sang|swam)\b|"
    r"(?:\b(?:have|has)|['\u2019]ve)\s+(?:been|\w+ed)\b|"
    r"\b(?:i|we|he|she|they|you)\s+(?:\w+ly\s+|just\s+|also\s+|all\s+)?\w+ed\b",
    re.IGNORECASE,
)


def _future_clause(text: str, position: int) -> bool:
    """Whether the clause of ``text`` that ends at ``position`` speaks of the future."""
    start = max((m.end() for m in _CLAUSE_END.finditer(text, 0, position)), default=0)
    return bool(_FUTURE.search(text, start, position))


def _past_clause(m: re.Match[str]) -> bool:
    """Whether the clause around match ``m`` speaks of the past and not of the future."""
    text = m.string
    start = max((c.end() for c in _CLAUSE_END.finditer(text, 0, m.start())), default=0)
    end_match = _CLAUSE_END.search(text, m.end())
    end = end_match.start() if end_match else len(text)
    clause = text[start:end]
    return bool(_PAST.search(clause)) and not _FUTURE.search(clause)


def _weekday(m: re.Match[str], anchor: date) -> _Resolved:
    rel = " ".join(m.group("rel").lower().split())
    target = weekday_number(m.group("wd")) or 0  # the pattern matches only weekday names
    name = WEEKDAYS[target]
    if rel in ("on", "this") and anchor.weekday() == target:
        day = anchor
    elif rel == "next" or (rel in ("on", "this") and _future_clause(m.string, m.start())):
        day = anchor + timedelta(days=(target - anchor.weekday()) % 7 or 7)
    else:
        day = anchor - timedelta(days=(anchor.weekday() - target) % 7 or 7)
    if day < anchor:
        phrase = f"the {name} before {day_phrase(anchor)}"
    elif day > anchor:
        phrase = f"the {name} after {day_phrase(anchor)}"
    else:
        phrase = day_phrase(anchor)
    return day, day, "day", phrase


def _season(m: re.Match[str], anchor: date) -> _Resolved:
    rel = " ".join(m.group("rel").lower().split())
    season = m.group("season").lower()
    years = range(anchor.year - 2, anchor.year + 2)
    spans = [(*season_range(season, y), y) for y in years]
    if rel in ("last", "this past"):
        start, end, year = max(s for s in spans if s[1] < anchor)
    elif rel == "next":
        start, end, year = min(s for s in spans if s[0] > anchor)
    else:
        start, end, year = min(
            spans, key=lambda s: max((s[0] - anchor).days, (anchor - s[1]).days, 0)
        )
    label = f"{season} {year}-{(year + 1) % 100:02d}" if season == "winter" else f"{season} {year}"
    return start, end, "season", label


_COUNT = r"\d+|a\s+couple\s+of|a\s+couple|couple\s+of|a\s+few|few|several|an?|" + "|".join(
    NUMBER_WORDS
)
_WD = "|".join(WEEKDAYS)
_WD_SHORT = "|".join(sorted(WEEKDAY_ABBREVIATIONS, key=len, reverse=True))
_SEASON = "|".join(SEASONS)
_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str], date], _Resolved]]] = [
    (re.compile(p, re.IGNORECASE), handler)
    for p, handler in (
        (r"\bthe\s+day\s+before\s+yesterday\b", _fixed_day(-2)),
        (r"\bthe\s+day\s+after\s+tomorrow\b", _fixed_day(2)),
        (r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b", _fixed_day(0)),
        (r"\b(?:yesterday|last\s+night)\b", _fixed_day(-1)),
        (r"\bthe\s+other\s+day\b", _other_day),
        (r"\btomorrow\b", _fixed_day(1)),
        (rf"\b(?P<n>{_COUNT})\s+(?P<unit>day|weekend|week|month|year)s?\s+ago\b", _ago),
        (
            rf"\bin\s+(?P<n>{_COUNT})\s+(?P<unit>day|weekend|week|month|year)s?['\u2019]s?\s+time\b",
            _ahead,
        ),
        (rf"\b(?P<n>{_COUNT})\s+(?P<unit>day|weekend|week|month|year)s?\s+from\s+now\b", _ahead),
        (r"\b(?P<rel>last|this|next)\s+(?P<unit>weekend|week|month|year)\b", _relative_unit),
        (r"\b(?:(?:on|over)\s+the|this\s+past|the\s+past)\s+weekend\b", _past_weekend),
        (rf"\b(?P<rel>last|this\s+past|past|this|next|on)\s+(?P<wd>{_WD})\b", _weekday),
        (rf"\b(?P<rel>last|this\s+past|next)\s+(?P<wd>{_WD_SHORT})\b", _weekday),
        (
            rf"\b(?P<rel>last|this\s+past|this|next)\s+(?P<season>{_SEASON})\b",
            _season,
        ),
    )
]


def resolve_times(text: str, anchor: date | datetime | str) -> list[TimeResolution]:
    """Every relative time expression of ``text`` resolved against ``anchor``, in text order."""
    return list(_resolve(text, parse_anchor(anchor)))


@lru_cache(maxsize=8192)
def _resolve(text: str, day: date) -> tuple[TimeResolution, ...]:
    """``resolve_times`` memoised: a pool's turns are resolved again for every question (about
    0.14 ms per turn for the 14 patterns), and the result depends on nothing else."""
    found: list[tuple[int, int, re.Match[str], Callable[[re.Match[str], date], _Resolved]]] = []
    for pattern, handler in _RULES:
        found.extend((m.start(), -len(m.group()), m, handler) for m in pattern.finditer(text))
    found.sort(key=lambda f: (f[0], f[1]))
    resolutions: list[TimeResolution] = []
    taken_until = 0
    for start, _, match, handler in found:
        if start < taken_until:
            continue
        try:
            first, last, granularity, phrase = handler(match, day)
        except (OverflowError, ValueError):  # a count past the calendar ("5000 years ago")
            continue  # is no date: the expression stays as said
        taken_until = match.end()
        resolutions.append(
            TimeResolution(
                match.group(), first, last, granularity, phrase, position=start, anchor=day
            )
        )
    return tuple(_with_events(text, resolutions, day))


def normalise_time(text: str, anchor: date | datetime | str) -> TimeResolution:
    """The first resolution in ``text``; with none, the anchor day itself (expression "")."""
    found = resolve_times(text, anchor)
    if found:
        return found[0]
    day = parse_anchor(anchor)
    return TimeResolution("", day, day, "day", day_phrase(day), anchor=day)


#: The one annotation format of a resolved expression in prompt text: the expression, then its
#: phrase in brackets ("I made it last night [14 August 2023]").
ANNOTATION = "{expression} [{phrase}]"


def annotate_times(text: str, anchor: date | datetime | str) -> str:
    """``text`` with every relative expression followed by its resolution against ``anchor``
    in ``ANNOTATION`` form, where it stands; event-relative phrases stay as they are."""
    out, at = [], 0
    for r in resolve_times(text, anchor):
        out.append(text[at : r.position])
        out.append(ANNOTATION.format(expression=r.expression, phrase=r.phrase))
        at = r.position + len(r.expression)
    out.append(text[at:])
    return "".join(out)


_EVENT = re.compile(
    rf"\b(?:(?:{_COUNT}|the)\s+(?:day|night|weekend|week|month|year)s?\s+"
    r"(?:later|after(?:wards)?|before|earlier|on)|the\s+(?:next|following)\s+"
    r"(?:day|morning|evening|night|weekend|week|month|year)|later\s+that\s+"
    r"(?:day|night|week|weekend|month|year))\b",
    re.IGNORECASE,
)


_EVENT_PARTS = re.compile(
    rf"^(?:(?P<n>{_COUNT}|the)\s+(?P<unit>day|night|weekend|week|month|year)s?\s+"
    r"(?P<dir>later|after(?:wards)?|before|earlier|on)|the\s+(?:next|following)\s+"
    r"(?P<next>day|morning|evening|night|weekend|week|month|year))$",
    re.IGNORECASE,
)
_ORDER = {"day": 0, "week": 1, "weekend": 1, "month": 2, "season": 3, "year": 4}


def _shift(ref: TimeResolution, n: int, unit: str) -> _Resolved | None:
    """The ``unit`` lying ``n`` units (negative: before) from the start of ``ref``, phrased
    as an absolute period; None when ``ref`` is coarser than ``unit``."""
    if _ORDER[ref.granularity] > _ORDER[unit]:
        return None
    if unit == "day":
        day = ref.start + timedelta(days=n)
        return day, day, "day", day_phrase(day)
    if unit in ("week", "weekend"):
        monday = _monday(ref.start) + timedelta(weeks=n)
        first = monday + timedelta(days=5 if unit == "weekend" else 0)
        granularity: Granularity = "weekend" if unit == "weekend" else "week"
        return first, monday + timedelta(days=6), granularity, f"the {unit} of {day_phrase(first)}"
    if unit == "month":
        year, month = shift_month(ref.start, n)
        start, end = month_range(year, month)
        return start, end, "month", _month_phrase(year, month)
    year = ref.start.year + n
    return date(year, 1, 1), date(year, 12, 31), "year", str(year)


def _event_offset(phrase: str) -> tuple[int, str] | None:
    """(signed count, unit) of an event-relative phrase; None for a vague count."""
    parts = _EVENT_PARTS.match(" ".join(phrase.split()))
    if parts is None:
        return None
    if parts["next"]:
        unit = parts["next"].lower()
        return 1, "day" if unit in ("morning", "evening", "night") else unit
    word = parts["n"].lower()
    n, vague = (1, False) if word == "the" else _parse_count(word)
    if vague:
        return None
    unit = "day" if parts["unit"].lower() == "night" else parts["unit"].lower()
    sign = -1 if parts["dir"].lower() in ("before", "earlier") else 1
    return sign * n, unit


def _with_events(text: str, found: list[TimeResolution], anchor: date) -> list[TimeResolution]:
    """``found`` with the event-relative phrases of ``text`` that count from an expression
    resolved before them (see the module doc), in text order."""
    out = sorted(found, key=lambda r: r.position)
    for match in _EVENT.finditer(text):
        start, end = match.start(), match.end()
        if any(start < r.position + len(r.expression) and r.position < end for r in out):
            continue
        earlier = [r for r in out if r.position + len(r.expression) <= start]
        offset = _event_offset(match.group())
        if not earlier or offset is None:
            continue
        shifted = _shift(earlier[-1], *offset)
        if shifted is not None:
            first, last, granularity, phrase = shifted
            resolution = TimeResolution(
                match.group(), first, last, granularity, phrase, position=start, anchor=anchor
            )
            out = sorted([*out, resolution], key=lambda r: r.position)
    return out


def event_expressions(text: str) -> list[tuple[int, str]]:
    """Event-relative phrases of ``text`` ("two weekends later", "a few days after", "the
    next day"): relative, but to another event, so no date follows from the session date.
    (position, phrase) in text order; phrases overlapping a resolvable expression are left out."""
    taken = [
        (r.position, r.position + len(r.expression)) for r in _resolve(text, date(2000, 6, 15))
    ]
    return [
        (m.start(), m.group())
        for m in _EVENT.finditer(text)
        if not any(m.start() < end and start < m.end() for start, end in taken)
    ]
