"""A card's deterministic time: which relative expression of its cited turns the card is about.

A cited turn often holds several relative expressions about different things ("work has been
stressing me out ... next month we're hiking"), so the expression nearest the quote is not
reliably the card's. The rule, in order:

1. ``"quote"``: an expression inside the quoted span of the matched source;
2. ``"cited"``: else the first expression of a cited text (the matched source first, then the
   other cited turns in order of how well the quote matched them) whose resolution agrees with
   the constructor's own time (``time_agrees``), so a "last Friday" in the card's other turn
   is found;
3. ``"session"``: else no expression applies and the time is only the session date, the day
   it was *said*; an event-relative phrase ("two weekends later") in the quote or the
   constructor's time is kept as ``event``: relative, but to another event, so no date follows.

A card whose quote states a plan or speaks of the future (``is_planned``) and whose rule time is
not a resolved past expression is ``planned``: said on that date, not yet done.

``shown_time`` is the one rule for which time a reader is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from qemem.evidence.agreement import time_agrees
from qemem.evidence.plans import is_planned
from qemem.evidence.times import (
    TimeResolution,
    event_expressions,
    normalise_time,
    resolve_times,
)

TimeBasis = Literal["quote", "cited", "session"]


def rests_on_expression(rule: TimeResolution | None, basis: TimeBasis | None) -> bool:
    """Whether a rule time rests on an expression of the quote or a cited turn (not only on
    the session date, the day it was said)."""
    return rule is not None and basis != "session" and bool(rule.expression)


def shown_time(model_time: str, rule: TimeResolution | None, basis: TimeBasis | None) -> str:
    """The one time a reader is shown for a card (the CLI, the MCP tools, the answer and run
    pages): the rule's phrase when it rests on an expression (resolved against its session
    date, so checkable), else the constructor's own time ``model_time`` ("" when it gave
    none). The answer prompt shows the answerer both, with what the rule rests on."""
    return rule.phrase if rule is not None and rests_on_expression(rule, basis) else model_time


@dataclass(frozen=True)
class CitedText:
    """One cited source as the time rule reads it: its id, text and session date."""

    id: str
    text: str
    anchor: datetime | date


@dataclass(frozen=True)
class CardTime:
    """A card's rule time: the ``resolution``, its ``basis`` (see the module doc), the id of
    the text its expression stands in (None for the session fallback), an event-relative
    phrase found when it fell back, and whether the card states a plan."""

    resolution: TimeResolution
    basis: TimeBasis
    source: str | None = None
    event: str = ""
    planned: bool = False


def _in_span(
    found: Sequence[TimeResolution], span: tuple[int, int] | None
) -> TimeResolution | None:
    """The first expression overlapping ``span`` (a zero-width span overlaps none)."""
    if span is None:
        return None
    start, end = span
    inside = [r for r in found if r.position < end and start < r.position + len(r.expression)]
    return inside[0] if inside else None


def _nearest_first(
    found: Sequence[TimeResolution], span: tuple[int, int] | None
) -> list[TimeResolution]:
    """Expressions ordered by distance to ``span`` (ties: the earlier one)."""
    start, end = span or (0, 0)

    def distance(r: TimeResolution) -> int:
        return max(start - (r.position + len(r.expression)), r.position - end, 0)

    return sorted(found, key=lambda r: (distance(r), r.position))


def _matching(
    cited: Sequence[CitedText], span: tuple[int, int] | None, model_time: str
) -> tuple[TimeResolution, str] | None:
    """The first expression of the cited texts (in their order; the first text's nearest
    the quote first) whose resolution agrees with the constructor's ``model_time``."""
    if not model_time.strip():
        return None
    for n, text in enumerate(cited):
        found = resolve_times(text.text, text.anchor)
        for r in _nearest_first(found, span) if n == 0 else found:
            if time_agrees(model_time, r):
                return r, text.id
    return None


def card_time(
    cited: Sequence[CitedText],
    span: tuple[int, int] | None,
    *,
    model_time: str = "",
) -> CardTime:
    """The rule time of a card whose quote matched ``cited[0]`` at ``span`` (see the module
    doc); ``cited`` must not be empty."""
    matched = cited[0]
    quoted = matched.text[span[0] : span[1]] if span else ""
    session = normalise_time("", matched.anchor)
    inside = _in_span(resolve_times(matched.text, matched.anchor), span)
    if inside is not None:
        result = CardTime(inside, "quote", matched.id)
    elif (found := _matching(cited, span, model_time)) is not None:
        result = CardTime(found[0], "cited", found[1])
    else:
        events = event_expressions(quoted) or event_expressions(model_time)
        result = CardTime(session, "session", event=events[0][1] if events else "")
    ahead = result.basis == "session" or result.resolution.end >= session.start
    planned = ahead and is_planned(quoted)
    return CardTime(result.resolution, result.basis, result.source, result.event, planned)


def resolve_card_time(
    source_text: str,
    span: tuple[int, int] | None,
    anchor: datetime,
    *,
    cited: Sequence[CitedText] = (),
    model_time: str = "",
) -> TimeResolution:
    """The rule time of a card quoting ``source_text`` at ``span`` (said on ``anchor``): the
    expression inside the quote, else one of the other ``cited`` texts' (or this one's) that
    agrees with the constructor's ``model_time``, else the session date (``card_time`` tells
    which of these it was)."""
    matched = CitedText("", source_text, anchor)
    return card_time([matched, *cited], span, model_time=model_time).resolution
