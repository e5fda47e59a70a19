"""Cards that disagree: the constructor names them ("updates card 2", "contradicts card 2"), the
statements rule (:func:`qemem.statements.relation_between`) says which relation holds.

The rule decides, not the constructor's wording: two cards whose quotes disagree are an
*update* (the later statement, by its source's place in the conversation, replaces the earlier
value: the answer gives the latest and says it changed) unless one of them denies that something
ever happened, which makes them a *contradiction* (both cannot hold and nothing says which
replaced the other: the answer names both and asks which holds). Both cards of a pair carry the
mark (:class:`Conflict`); the answer prompt shows it on the card's relation line.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from qemem.evidence.cards import Conflict, ViewCard
from qemem.evidence.context import SourceIndex
from qemem.statements import relation_between

_NAMED = re.compile(
    r"\b(?:updat\w*|replac\w*|supersed\w*|contradict\w*|conflict\w*|disagree\w*|"
    r"inconsistent|changes?)\b[^.;]*?\bcards?\s*#?(\d+)",
    re.IGNORECASE,
)


def named_card(relation: str) -> int | None:
    """The card a relation says this card disagrees with ("updates card 2" -> 2), if any."""
    found = _NAMED.search(relation)
    return int(found.group(1)) if found else None


def _place(card: ViewCard, index: SourceIndex, order: dict[str, int]) -> tuple[int, int]:
    """Where a card's statement stands in the conversation (``order``: each turn's place):
    its earliest cited turn (an episode or a fact by its turns); cards citing nothing known
    come last."""
    places = [
        order.get(turn.id, len(order))
        for source in card.sources
        if (found := index.get(source)) is not None
        for turn in index.turns_of(found)
    ]
    return (min(places), 0) if places else (len(order), 1)


def mark_conflicts(cards: Sequence[ViewCard], index: SourceIndex) -> list[ViewCard]:
    """``cards`` with a :class:`Conflict` on both cards of every pair the constructor's
    relations name (a card naming itself or an unknown card is left as it is)."""
    marks: dict[int, Conflict] = {}
    order = {t.id: n for n, t in enumerate(index.turns)}
    for number, card in enumerate(cards, start=1):
        other = named_card(card.relation)
        if other is None or other == number or not 1 <= other <= len(cards):
            continue
        first, second = sorted(
            (number, other), key=lambda n: (*_place(cards[n - 1], index, order), n)
        )
        earlier, later = cards[first - 1], cards[second - 1]
        kind = relation_between(earlier.quote or earlier.claim, later.quote or later.claim)
        marks.setdefault(first, Conflict(kind, second, later=False))
        marks.setdefault(second, Conflict(kind, first, later=True))
    return [
        dataclasses.replace(card, conflict=marks[n]) if n in marks else card
        for n, card in enumerate(cards, start=1)
    ]


def conflict_text(conflict: Conflict) -> str:
    """The mark as the answer prompt shows it on the card's relation line."""
    if conflict.kind == "contradiction":
        return (
            f"CONTRADICTION with card {conflict.other}: both cannot hold and nothing says "
            "which replaced the other (name both with their dates and ask which holds)"
        )
    if conflict.later:
        return (
            f"UPDATE of card {conflict.other}: said later, this value replaces it (give this "
            "one and say it changed)"
        )
    return f"UPDATED by card {conflict.other}: an earlier value, replaced since"
