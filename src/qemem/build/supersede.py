"""Which facts hold: supersessions read on the conversation's timeline.

A fact is known from the date of the session it was learned in; a supersession holds from its
``at`` (the date of the episode that showed it, or for a correction by hand the date the
corrected fact was learned: a correction replaces a wrong fact for all of its history). The
facts current "as of" a moment are those known then and not replaced by then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime

from qemem.errors import InputError
from qemem.lexicon import check_year
from qemem.models import SemanticFact, Supersession

AsOf = date | datetime
"""A moment of the conversation: a day (all of it) or a date-time."""


def parse_as_of(text: str) -> AsOf:
    """An ``--as-of`` value: an ISO 8601 date (2023-05-08) or date-time of the years
    ``FIRST_YEAR`` to ``LAST_YEAR``; InputError else."""
    try:
        when = date.fromisoformat(text) if len(text.strip()) == 10 else datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"as-of {text!r} is not an ISO 8601 date or date-time: write 2023-05-08 or "
            "2023-05-08T13:56",
            field="as_of",
        ) from None
    check_year(when, text, "as-of date", "as_of")
    return when


def on_or_before(moment: datetime, as_of: AsOf) -> bool:
    """Whether ``moment`` is no later than ``as_of``: a day includes all of it; a date-time
    with a UTC offset and one without are compared by their wall-clock times."""
    if not isinstance(as_of, datetime):
        return moment.date() <= as_of
    if (moment.utcoffset() is None) != (as_of.utcoffset() is None):
        return moment.replace(tzinfo=None) <= as_of.replace(tzinfo=None)
    return moment <= as_of


def known_facts(
    facts: Sequence[SemanticFact],
    supersessions: Sequence[Supersession],
    session_dates: Mapping[int, datetime],
    *,
    as_of: AsOf | None = None,
    include_superseded: bool = False,
) -> list[SemanticFact]:
    """The facts known at ``as_of`` (all, when None) that no supersession known by then
    replaces; with ``include_superseded`` the replaced ones too. Order kept."""

    def known(fact: SemanticFact) -> bool:
        when = session_dates.get(fact.session)
        return as_of is None or (when is not None and on_or_before(when, as_of))

    ids = {f.id for f in facts if known(f)}
    replaced = {
        s.old
        for s in supersessions
        if s.new in ids and (as_of is None or on_or_before(s.at, as_of))
    }
    return [f for f in facts if f.id in ids and (include_superseded or f.id not in replaced)]


def cited_turns(numbers: Sequence[object], turn_ids: Sequence[str]) -> tuple[str, ...]:
    """The turn ids that message numbers (1-based, as the calibrate prompt shows the
    episode's turns) or turn ids of the episode cite; what cites nothing of the episode is
    dropped."""
    out: list[str] = []
    for n in numbers:
        if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= len(turn_ids):
            out.append(turn_ids[n - 1])
        elif isinstance(n, str) and n in turn_ids:
            out.append(n)
        elif isinstance(n, str) and n.strip().isdigit() and 1 <= int(n) <= len(turn_ids):
            out.append(turn_ids[int(n) - 1])
    return tuple(dict.fromkeys(out))
