"""Choosing a setting (e.g. retrieval budgets) without overfitting one conversation:
leave-one-conversation-out selection of the cheapest setting within a tolerance of the best,
or, over several datasets at once, of the setting of best value (visibility less a price per
token, averaged over the datasets).

Each conversation's figures per setting are a :class:`Tally`: how many questions saw their
complete evidence (``hits``) out of ``questions``, and the summed cost (tokens). Pooled over
conversations, figures are question-weighted. A fold holds one conversation out, picks on the
others, and scores the pick on the held-out one, so the held-out score estimates how the
*procedure* does on a conversation it was not tuned on.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

S = TypeVar("S", bound=Hashable)

TOLERANCE = 0.01
"""How far below the best visibility a cheaper setting may be (1 point)."""


@dataclass(frozen=True)
class Tally:
    """Questions whose complete evidence was visible (``hits``) of ``questions``, and the
    summed cost of all of them (e.g. prompt tokens)."""

    hits: int
    questions: int
    cost: float

    @property
    def visibility(self) -> float:
        return self.hits / self.questions if self.questions else 0.0

    @property
    def mean_cost(self) -> float:
        return self.cost / self.questions if self.questions else 0.0

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.hits + other.hits, self.questions + other.questions, self.cost + other.cost
        )


def pooled(tallies: Iterable[Mapping[S, Tally]]) -> dict[S, Tally]:
    """Question-weighted totals per setting over several conversations' tallies (the settings
    every one of them has)."""
    items = list(tallies)
    if not items:
        return {}
    common = [s for s in items[0] if all(s in t for t in items[1:])]
    return {s: sum((t[s] for t in items[1:]), items[0][s]) for s in common}


def cheapest_within(tallies: Mapping[S, Tally], tolerance: float = TOLERANCE) -> S:
    """The setting of least mean cost whose visibility is at least the best visibility minus
    ``tolerance``; among equally cheap ones the more visible, then the first given."""
    if not tallies:
        raise ValueError("no settings to choose from")
    best = max(t.visibility for t in tallies.values())
    eligible = [s for s, t in tallies.items() if t.visibility >= best - tolerance - 1e-12]
    return min(eligible, key=lambda s: (tallies[s].mean_cost, -tallies[s].visibility))


@dataclass(frozen=True)
class Fold(Generic[S]):
    """One leave-one-conversation-out fold: the setting picked without ``held_out`` and how it
    and the held-out conversation's own best setting score there."""

    held_out: str
    picked: S
    score: Tally
    """The picked setting on the held-out conversation."""
    best_visibility: float
    """The best visibility any setting reaches on the held-out conversation."""


def leave_one_out(
    by_conversation: Mapping[str, Mapping[S, Tally]], tolerance: float = TOLERANCE
) -> list[Fold[S]]:
    """One fold per conversation: pick with :func:`cheapest_within` on the pooled tallies of
    the other conversations, score the pick on the held-out one."""
    if len(by_conversation) < 2:
        raise ValueError("leave-one-conversation-out needs at least two conversations")
    folds = []
    for held_out, own in by_conversation.items():
        rest = pooled(t for c, t in by_conversation.items() if c != held_out)
        picked = cheapest_within(rest, tolerance)
        best = max(t.visibility for t in own.values())
        folds.append(Fold(held_out, picked, own[picked], best))
    return folds


def held_out_total(folds: Iterable[Fold[S]]) -> Tally:
    """The procedure's held-out figures: every question scored once, in the fold that held
    its conversation out."""
    return sum((f.score for f in folds), Tally(0, 0, 0.0))


PRICE = 0.02
"""What 1,000 tokens of cost are worth in visibility (2 points; see :func:`value`)."""


def value(tallies: Iterable[Tally], price: float = PRICE) -> float:
    """The mean over datasets (one tally each) of visibility less ``price`` per 1,000 tokens
    of mean cost: how much a setting shows for what it costs, each dataset weighted alike."""
    items = list(tallies)
    if not items:
        raise ValueError("no datasets to value")
    return sum(t.visibility - price * t.mean_cost / 1000 for t in items) / len(items)


def best_value(by_dataset: Mapping[str, Mapping[S, Tally]], price: float = PRICE) -> S:
    """The setting (of those every dataset has) of greatest :func:`value`; ties: the
    cheaper, then the first given."""
    common = [
        s for s in next(iter(by_dataset.values()), {}) if all(s in t for t in by_dataset.values())
    ]
    if not common:
        raise ValueError("no settings to choose from")

    def key(setting: S) -> tuple[float, float]:
        tallies = [t[setting] for t in by_dataset.values()]
        return -value(tallies, price), sum(t.mean_cost for t in tallies)

    return min(common, key=key)


def leave_one_out_value(
    by_conversation: Mapping[tuple[str, str], Mapping[S, Tally]], price: float = PRICE
) -> list[Fold[S]]:
    """One fold per conversation (keyed (dataset, conversation)): pick with
    :func:`best_value` on the other conversations, pooled per dataset, and score the pick on
    the held-out one (``Fold.held_out`` is ``dataset/conversation``)."""
    if len(by_conversation) < 2:
        raise ValueError("leave-one-conversation-out needs at least two conversations")
    folds = []
    for held_out, own in by_conversation.items():
        rest: dict[str, list[Mapping[S, Tally]]] = {}
        for (dataset, conversation), tallies in by_conversation.items():
            if (dataset, conversation) != held_out:
                rest.setdefault(dataset, []).append(tallies)
        picked = best_value({d: pooled(t) for d, t in rest.items()}, price)
        best = max(t.visibility for t in own.values())
        folds.append(Fold("/".join(held_out), picked, own[picked], best))
    return folds
