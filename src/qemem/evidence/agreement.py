"""Does the constructor's ``time`` agree with the deterministic resolution of a card?

Definition (deterministic, documented): both sides are read as periods and compared, not
their phrasings.

* no verdict (``None``) when the model gave no time ("", "n/a", "none", "unknown", "-");
* agreement when the deterministic phrase occurs in the model's time text as whole words (case,
  spacing and punctuation ignored), e.g. both say "the Friday before 13 March 2023"; "1 May
  2023" does not occur in "11 May 2023";
* otherwise the model's text is read into date ranges and it agrees when any of them overlaps
  the deterministic range. Read, in this order, each span consumed once:
  "the <weekday>/week/weekend/month/<season> before/after/of <date>" (resolved like
  "last/next/this ..." at that date), full dates ("9 March 2024", "March 9, 2024",
  "2024-03-09"), months ("March 2024", "late March 2024"), seasons ("summer 2024"), bare years
  ("2024"), when a year is implied by the deterministic range, days without a year ("13
  August", "August 13th"), and, when the resolution knows its session date, relative
  expressions ("ten years ago", "last summer") resolved against that same date.
  So a coarser but consistent time ("March 2024" for 9 March 2024) agrees, and so does the same
  period written another way ("the summer before 17 October 2023" and "summer 2023"); a time
  that names a different day, month or year, or names no date at all, does not.
"""

from __future__ import annotations

import re
from datetime import date

from qemem.evidence.times import TimeResolution, resolve_times
from qemem.lexicon import MONTH_NUMBERS, MONTHS, SEASONS, WEEKDAYS, month_range, season_range

_EMPTY = {"", "n/a", "na", "none", "unknown", "-", "null", "not applicable", "not time-relevant"}
_MONTH = "|".join([*MONTHS, *(m[:3] for m in MONTHS), "Sept"])
_DATE_DMY = rf"(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m>{_MONTH})\.?,?\s+(?P<y>\d{{4}})"
_DATE_MDY = rf"(?P<m2>{_MONTH})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}})"
_DATE_ISO = r"(?P<y3>\d{4})-(?P<m3>\d{2})-(?P<d3>\d{2})"
_SEASONS = "|".join(SEASONS)
_FULL_DATE = re.compile(rf"\b(?:{_DATE_DMY}|{_DATE_MDY}|{_DATE_ISO})\b", re.IGNORECASE)
_RELATIVE = re.compile(
    rf"\b(?:the\s+)?(?P<what>{'|'.join(WEEKDAYS)}|week|weekend|month|{_SEASONS})\s+"
    r"(?P<rel>before|after|of)\s+"
    rf"(?P<date>{_DATE_DMY}|{_DATE_MDY}|{_DATE_ISO})\b",
    re.IGNORECASE,
)
_MONTH_YEAR = re.compile(rf"\b(?P<m>{_MONTH})\.?,?\s+(?P<y>\d{{4}})\b", re.IGNORECASE)
_SEASON_YEAR = re.compile(rf"\b(?P<s>{_SEASONS})\s+(?P<y>\d{{4}})\b", re.I)
_YEAR = re.compile(r"\b(?P<y>19\d\d|20\d\d)\b")
_DAY_MONTH = re.compile(
    rf"\b(?:(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m>{_MONTH})"
    rf"|(?P<m2>{_MONTH})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?)\b",
    re.IGNORECASE,
)
_PUNCT = re.compile(r"[^\w\s]")

Range = tuple[date, date]


def _month_number(name: str) -> int:
    """The month of a name ``_MONTH`` matched (its first three letters)."""
    return MONTH_NUMBERS[name[:3].casefold()]


def _date_of(m: re.Match[str]) -> date | None:
    """The date a ``_FULL_DATE``-style match names (None when impossible, e.g. 31 June)."""
    groups = m.groupdict()
    try:
        if groups.get("d"):
            return date(int(groups["y"]), _month_number(groups["m"]), int(groups["d"]))
        if groups.get("d2"):
            return date(int(groups["y2"]), _month_number(groups["m2"]), int(groups["d2"]))
        return date(int(groups["y3"]), int(groups["m3"]), int(groups["d3"]))
    except (ValueError, TypeError):
        return None


def _blank(text: str, m: re.Match[str]) -> str:
    return text[: m.start()] + " " * (m.end() - m.start()) + text[m.end() :]


def time_ranges(text: str, years: tuple[int, ...] = (), anchor: date | None = None) -> list[Range]:
    """The date ranges a free-text time names (see the module docstring for what is read);
    a day named without a year is read in each of ``years``, a relative expression against
    ``anchor`` (none when it is None)."""
    ranges: list[Range] = []
    for m in list(_RELATIVE.finditer(text)):
        at = _date_of(m)
        if at is None:
            continue
        word = {"before": "last", "after": "next", "of": "this"}[m.group("rel").lower()]
        found = resolve_times(f"{word} {m.group('what')}", at)
        ranges.extend((r.start, r.end) for r in found)
        text = _blank(text, m)
    for m in list(_FULL_DATE.finditer(text)):
        day = _date_of(m)
        if day is not None:
            ranges.append((day, day))
        text = _blank(text, m)
    for m in list(_MONTH_YEAR.finditer(text)):
        ranges.append(month_range(int(m.group("y")), _month_number(m.group("m"))))
        text = _blank(text, m)
    for m in list(_SEASON_YEAR.finditer(text)):
        ranges.append(season_range(m.group("s"), int(m.group("y"))))
        text = _blank(text, m)
    for m in list(_YEAR.finditer(text)):
        year = int(m.group("y"))
        ranges.append((date(year, 1, 1), date(year, 12, 31)))
        text = _blank(text, m)
    for m in _DAY_MONTH.finditer(text):
        day_text, month_name = m.group("d") or m.group("d2"), m.group("m") or m.group("m2")
        for year in years:
            try:
                named = date(year, _month_number(month_name), int(day_text))
            except ValueError:
                continue
            ranges.append((named, named))
        text = _blank(text, m)
    if anchor is not None:
        ranges.extend((r.start, r.end) for r in resolve_times(text, anchor))
    return ranges


def _norm(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def time_agrees(llm_time: str, resolved: TimeResolution) -> bool | None:
    """Whether the model's ``time`` text agrees with ``resolved`` (None: the model gave none)."""
    if _norm(llm_time) in _EMPTY or llm_time.strip().lower() in _EMPTY:
        return None
    if re.search(rf"(?<!\w){re.escape(_norm(resolved.phrase))}(?!\w)", _norm(llm_time)):
        return True
    years = tuple(sorted({resolved.start.year, resolved.end.year}))
    return any(
        start <= resolved.end and resolved.start <= end
        for start, end in time_ranges(llm_time, years, resolved.anchor)
    )


#: Expression kinds of the grounding audit (method §3, Table 7), in report order.
TIME_KINDS = (
    "yesterday/last night",
    "last week/weekend",
    "weekday",
    "last month/year",
    "other",
    "none (session date)",
)
_KIND_RULES = (
    ("yesterday/last night", re.compile(r"yesterday|last\s+night", re.IGNORECASE)),
    ("last week/weekend", re.compile(r"\b(?:week|weekend)s?\b", re.IGNORECASE)),
    ("weekday", re.compile(rf"\b(?:{'|'.join(WEEKDAYS)})\b", re.IGNORECASE)),
    ("last month/year", re.compile(r"\b(?:month|year)s?\b", re.IGNORECASE)),
)


def time_kind(expression: str) -> str:
    """The audit's kind of a resolved expression (one of ``TIME_KINDS``): "" (no relative
    expression: the session date) is "none (session date)"."""
    if not expression.strip():
        return TIME_KINDS[-1]
    return next((kind for kind, rule in _KIND_RULES if rule.search(expression)), "other")
