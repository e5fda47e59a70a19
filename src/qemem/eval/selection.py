"""Choosing a setting (e.g. retrieval budgets) without overfitting one conversation:
leave-one-conversation-out selection of the cheapest setting within a tolerance of the best.

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
