"""The English lexicon of every stage: calendar names, number words, stopword lists, the date
parsers and calendar ranges.

The lowest layer beside :mod:`qemem.errors` and :mod:`qemem.models`: it imports only the
standard library and ``qemem.errors``. Names are English whatever the process locale (no
``strftime("%B")`` or ``strptime("%b")``).

Stages that need different word lists keep their own *named* list here rather than share one,
since each list is part of what that stage computes: ``BM25_STOPWORDS`` (search tokens),
``FUNCTION_WORDS`` and ``REPLY_WORDS`` (a quote's content-word count), ``TITLE_STOPWORDS``
(fallback episode titles), ``LOCOMO_ARTICLES`` (the official answer scorer),
``OFFLINE_PLAN_STOPWORDS`` and ``OFFLINE_MATCH_STOPWORDS`` (the offline LLM's planner and
constructor), ``PARAPHRASE_LIGHT_WORDS`` (the build's paraphrase check), ``PHATIC_WORDS``,
``GREETING_PHRASES`` and ``CLOSING_PHRASES`` (the build's greeting/closing runs).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from qemem.errors import InputError

# fmt: off
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: Weekday abbreviations by lowercase form: the weekday index (0 = Monday) each names.
WEEKDAY_ABBREVIATIONS = {
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4,
    "sat": 5, "sun": 6,
}
#: Number words by value: ``NUMBER_WORDS[n]`` is the word of ``n`` (0 to 20).
NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
)
#: Every word the quote check reads as a number: cardinals, tens, scales, ordinals, "dozen".
NUMERAL_WORDS = frozenset({
    *NUMBER_WORDS, "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    "hundred", "thousand", "million", "billion", "first", "second", "third", "fourth", "fifth",
    "sixth", "seventh", "eighth", "ninth", "tenth", "dozen",
})
# fmt: on
#: Northern meteorological seasons and the month each starts in ("winter 2022" starts in
#: December 2022 and ends in February 2023).
SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
SEASONS = tuple(SEASON_START)
#: Month numbers by lowercase English name and three-letter abbreviation ("may", "sep").
MONTH_NUMBERS = {name.lower(): i for i, name in enumerate(MONTHS, start=1)} | {
    name[:3].lower(): i for i, name in enumerate(MONTHS, start=1)
}

#: Search stopwords: the English list of bm25s 0.3 (``bm25s.stopwords.STOPWORDS_EN``), dropped
#: from documents and queries before stemming.
BM25_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)
#: Function words of the quote check: they do not count towards a quote's minimum length, and
#: a capitalised one is not a name.
FUNCTION_WORDS = frozenset(
    """
a an the and or but if so as at by for from in into of off on onto out over to up with about
i me my mine we us our you your he him his she her it its they them their this that these
those am is are was were be been being have has had do does did will would shall should can
could may might must not no yes just very really too also then than there here what which
who whom when where why how all any some much many more most such own same oh ok okay yeah
yep wow hey hi hello well im ive id ill""".split()
)
#: Words of reply formulas ("I think so", "thank you so much", "I know, right?"): a short
#: verbatim quote needs a word that is neither one of these nor a function word.
REPLY_WORDS = frozenset("agree guess know mean right sure suppose thank thanks think".split())
#: Words a fallback episode title skips (besides words of one or two letters).
TITLE_STOPWORDS = frozenset(
    "a an and are as at be but by for from had has have hey hi how i i'm im in is it it's "
    "its just me my of oh on or our so that the their them then there they this to too was "
    "we were what when where which who will with wow yeah yes you your really been did do "
    "does going good great thanks thank about also can could would should".split()
)
#: Third-person personal pronouns: one stands for a person named earlier in the same fact, or
#: for someone the fact does not name (the memory audit counts those facts).
THIRD_PERSON_PRONOUNS = frozenset(
    "he him his himself she her hers herself they them their theirs themselves".split()
)
#: Personal pronouns (any case): the build rules ask facts to name people instead (the memory
#: audit counts the facts holding one). "it" is left out: it rarely stands for a person.
PERSONAL_PRONOUNS = THIRD_PERSON_PRONOUNS | frozenset(
    "i me my mine myself we us our ours ourselves you your yours yourself yourselves".split()
)
#: The words LoCoMo's official scorer removes from answers (``normalize_answer``).
LOCOMO_ARTICLES = ("a", "an", "the", "and")
#: Words the offline planner leaves out of a question's content words.
OFFLINE_PLAN_STOPWORDS = frozenset(
    "a an the and or of to in on at for with by from about is are was were be been do does did "
    "has have had what when where who which why how many much often long would could will "
    "likely ever her his their its they them she he it i you we".split()
)
#: Words that do not count when the offline constructor matches turns to a question (besides
#: words of one or two letters), the prompt's own labels included.
OFFLINE_MATCH_STOPWORDS = frozenset(
    "the and for with what when where which who whom whose why how does did do was were has "
    "have had are is his her their them they she him from that this about into any all one "
    "said says information needed question".split()
)


def month_number(name: str, *, prefix: bool = False) -> int | None:
    """The month (1-12) an English month name or its three-letter abbreviation names, in any
    case; with ``prefix``, any word whose first three letters are one ("Sept", "Mays"). None
    when it names no month."""
    return MONTH_NUMBERS.get(name[:3].casefold() if prefix else name.lower())


def weekday_number(name: str) -> int | None:
    """The weekday (0 = Monday) a full English weekday name or its abbreviation ("Tues",
    "Thurs", "Sat.") names, in any case; None when it names none."""
    low = name.lower().rstrip(".")
    full = [w.lower() for w in WEEKDAYS]
    return full.index(low) if low in full else WEEKDAY_ABBREVIATIONS.get(low)


def day_phrase(day: date) -> str:
    """'7 May 2023': day without leading zero, English month name, year."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def shift_month(day: date, months: int) -> tuple[int, int]:
    """(year, month) of the calendar month ``months`` after the month of ``day``."""
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def month_range(year: int, month: int) -> tuple[date, date]:
    """First and last day of a calendar month."""
    nxt_year, nxt_month = shift_month(date(year, month, 1), 1)
    return date(year, month, 1), date(nxt_year, nxt_month, 1) - timedelta(days=1)


def season_range(season: str, year: int) -> tuple[date, date]:
    """First and last day of a season (any case) of ``year`` (see ``SEASON_START``)."""
    first = SEASON_START[season.lower()]
    last_year, last_month = shift_month(date(year, first, 1), 2)
    return date(year, first, 1), month_range(last_year, last_month)[1]


FIRST_YEAR, LAST_YEAR = 1900, 2200
"""The years a date of a conversation may have (message times, session dates, an ``as_of``,
an anchor): others are refused where they come in. Inside them every date computation of
qemem (relative times, weeks, seasons) stays inside Python's calendar."""


def check_year(moment: date, value: object, what: str = "date", field: str | None = None) -> None:
    """InputError (naming ``field``) unless ``moment`` (read from ``value``) falls in
    ``FIRST_YEAR`` to ``LAST_YEAR``."""
    if not FIRST_YEAR <= moment.year <= LAST_YEAR:
        raise InputError(
            f"the {what} {value!s:.40} is in the year {moment.year}: qemem takes dates of the "
            f"years {FIRST_YEAR} to {LAST_YEAR}; check it",
            field=field,
        )


_LOCOMO_DATE = re.compile(
    r"^\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>am|pm)\s+on\s+"
    r"(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]+),?\s+(?P<year>\d{4})\s*$",
    re.IGNORECASE,
)


def parse_datetime(value: str) -> datetime:
    """Parse a LoCoMo session date (``1:56 pm on 8 May, 2023``) or an ISO 8601 date-time.

    A date-time with a UTC offset (``10:00+05:30``, ``10:00Z``) stays timezone-aware: its
    local wall-clock time and its offset are both kept, so the speaker's calendar date (what
    "yesterday" is resolved against) stays right and two equal wall times with different
    offsets stay apart. One without an offset is naive: local time, offset unknown. A date
    outside the years ``FIRST_YEAR`` to ``LAST_YEAR`` is refused (InputError).
    """
    moment = _read_datetime(value)
    check_year(moment, value)
    return moment


def _read_datetime(value: str) -> datetime:
    match = _LOCOMO_DATE.match(value)
    if match:
        hour = int(match["hour"]) % 12 + (12 if match["ampm"].lower() == "pm" else 0)
        month = month_number(match["month"], prefix=True)
        if month is None:
            raise InputError(f"invalid date {value!r}: {match['month']!r} names no month")
        try:
            return datetime(
                int(match["year"]), month, int(match["day"]), hour, int(match["minute"])
            )
        except ValueError as exc:
            raise InputError(f"invalid date {value!r}: {exc}") from exc
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise InputError(
            f"unrecognised date {value!r}: use ISO 8601 (2023-05-08T13:56, "
            "2023-05-08T13:56+05:30) or LoCoMo's form ('1:56 pm on 8 May, 2023')"
        ) from None


_DAY_FIRST = re.compile(
    r"^(?:\d{1,2}:\d{2}\s*[ap]\.?m\.?\s+on\s+)?(?P<d>\d{1,2})\s+(?P<m>[a-z]+)\.?,?\s+(?P<y>\d{4})$",
    re.IGNORECASE,
)
_MONTH_FIRST = re.compile(
    r"^(?:\d{1,2}:\d{2}\s*[ap]\.?m\.?\s+on\s+)?(?P<m>[a-z]+)\.?\s+(?P<d>\d{1,2}),?\s+(?P<y>\d{4})$",
    re.IGNORECASE,
)


def parse_anchor(value: str | date | datetime) -> date:
    """A session date from a date, a datetime, an ISO string or a LoCoMo session time.

    LoCoMo strings look like "1:56 pm on 8 May, 2023"; "8 May 2023" and "May 8, 2023" (with or
    without the time) are accepted too. Raises ``InputError`` for anything else, and for text
    naming a date outside the years ``FIRST_YEAR`` to ``LAST_YEAR``.
    """
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    day = _read_anchor(" ".join(str(value).split()))
    if day is not None:
        check_year(day, value, "anchor date", "anchor")
        return day
    raise InputError(
        f"cannot read the anchor date {value!r}: give an ISO date such as 2023-05-08 or a "
        "session time such as '1:56 pm on 8 May, 2023'",
        field="anchor",
    )


def _read_anchor(text: str) -> date | None:
    """The date ``text`` names (ISO, or a LoCoMo-like day), None when it names none."""
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        pass
    for pattern in (_DAY_FIRST, _MONTH_FIRST):
        m = pattern.match(text)
        month = month_number(m.group("m")) if m else None
        if m and month:
            try:
                return date(int(m.group("y")), month, int(m.group("d")))
            except ValueError:
                return None
    return None


#: Light verbs and intensifiers the build's paraphrase check ignores when it compares two facts'
#: content words ("Jon finds joy in dancing" / "Jon has joy in dancing").
PARAPHRASE_LIGHT_WORDS = frozenset(
    "has have had having find finds found bring brings brought get gets got feel feels felt "
    "make makes made take takes took do does doing enjoy enjoys love loves like likes really "
    "very lot lots".split()
)
#: Words of small talk the build's greeting/closing check does not count as content: thanks,
#: praise, encouragement, greetings and goodbyes ("Thanks, Mel! Appreciate your friendship.").
PHATIC_WORDS = frozenset(
    """
thanks thank appreciate appreciated appreciation glad great awesome amazing cool nice good fun
lovely wonderful best luck care soon later talk talking talked see seeing day night weekend
enjoy friend friends friendship means lot happy fantastic sounds sound hope hoping doing going
chat chatted catch time missed miss long new anything everything bye goodbye hey hi hello wow
yeah yep yup sure definitely totally absolutely worries worry problem welcome support supporter
supportive encouragement encouraging words kind keep got believe yourself wishing wish proud
excited exciting future cheers spirit rock gonna let lets take together again hear heard since
last spoke love loved cheering cheer rooting root back corner always anytime bet inspiring
incredible stuff things thing ya doin go get getting lately""".split()
)
#: Phrases that make a line a greeting ("Hey Mel! Good to see you!"), as regular expressions
#: matched on word boundaries, case ignored.
GREETING_PHRASES = (
    r"hi",
    r"hey",
    r"hello",
    r"(?:good|great|nice) to (?:see|hear from) you",
    r"long time no (?:see|talk|chat)",
    r"how (?:are|have) (?:you|ya)",
    r"how'?s it going",
    r"how'?re (?:you|ya)",
    r"what'?s up",
    r"what'?s new",
    r"anything new",
    r"missed you",
)
#: Phrases that make a line a goodbye ("Bye! Take care."), as :data:`GREETING_PHRASES`.
CLOSING_PHRASES = (
    r"bye",
    r"goodbye",
    r"talk (?:to you )?(?:again )?(?:soon|later)",
    r"see (?:you|ya) (?:soon|later|then|around)",
    r"take care",
    r"good ?night",
    r"catch (?:you|ya) later",
    r"have a (?:good|great|nice|lovely|wonderful) (?:day|night|evening|weekend|one|time)",
    r"enjoy your (?:day|night|evening|weekend)",
    r"until next time",
    r"speak soon",
    r"gotta go",
)
