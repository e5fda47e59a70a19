"""Sufficiency-guided refinement: construct, verify, and retrieve again while evidence is missing.

Round 0 runs the constructor on the initial pool. While the constructor says the evidence is
not sufficient and rounds remain, the follow-up queries (else the ``missing`` sentence) are
retrieved excluding every candidate examined so far; the constructor reads only the new
candidates with a summary of the cards so far, and its new cards are merged (the existing set
is kept). The loop stops with one of these reasons:

* ``sufficient``: the constructor judged the evidence sufficient;
* ``no_new_candidates``: retrieval found nothing not examined yet (or had no query to run);
* ``round_budget``: the refinement rounds are spent while evidence is still insufficient;
* ``degraded: construct output invalid`` (``... in round N`` for a refinement round): the
  constructor's output did not validate even after repair; cards built so far are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from qemem.evidence.cards import (
    Feedback,
    ViewCard,
    construct,
    merge_cards,
    verify_card,
)
from qemem.evidence.context import SourceIndex
from qemem.evidence.quotes import DEFAULT_THRESHOLD
from qemem.llm import Ledger, LLMClient
from qemem.models import Plan, Pool, PoolItem, Turn

Retriever = Callable[[Sequence[str], Collection[str]], Pool]
"""``retrieve(queries, exclude)``: a pool for ``queries`` without the ``space:id`` in exclude."""


@dataclass
class RoundTrace:
    """What one round did: its queries (None for the initial pool), candidates, cards, verdict."""

    round: int
    queries: list[str] | None
    pool_ids: list[str]
    cards: list[ViewCard] = field(default_factory=list)
    feedback: Feedback | None = None
    degraded: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "queries": self.queries,
            "pool_ids": list(self.pool_ids),
            "cards": [c.to_dict() for c in self.cards],
            "feedback": self.feedback.to_dict() if self.feedback else None,
            "degraded": self.degraded,
        }


@dataclass
class Evidence:
    """The cards of all rounds, the merged pool, the rounds and why the loop stopped."""

    cards: list[ViewCard]
    pool: Pool
    rounds: list[RoundTrace]
    termination: str
    degradations: list[str] = field(default_factory=list)


def pool_ids(pool: Pool) -> list[str]:
    """The pool's ``space:id`` strings in pool order (episodes, facts, turns)."""
    return [f"{item.space}:{item.id}" for item in pool.items()]


def merge_pools(index: SourceIndex, first: Pool, second: Pool) -> Pool:
    """Both pools' candidates, first-seen kept; turns in conversation order."""

    def union(a: list[PoolItem], b: list[PoolItem]) -> list[PoolItem]:
        seen = {item.id for item in a}
        return [*a, *(item for item in b if item.id not in seen)]

    turns = union(first.turns, second.turns)
    records = [i.record for i in turns if isinstance(i.record, Turn)]
    order = {t.id: n for n, t in enumerate(index.in_order(records))}
    return Pool(
        conversation=first.conversation,
        queries=list(dict.fromkeys([*first.queries, *second.queries])),
        episodes=union(first.episodes, second.episodes),
        facts=union(first.facts, second.facts),
        turns=sorted(turns, key=lambda item: order.get(item.id, len(order))),
    )


def build_evidence(
    llm: LLMClient,
    index: SourceIndex,
    plan: Plan,
    pool: Pool,
    retrieve: Retriever,
    *,
    refine_rounds: int = 2,
    max_tokens: int = 4096,
    threshold: float = DEFAULT_THRESHOLD,
    ledger: Ledger | None = None,
) -> Evidence:
    """Cards for ``plan`` from ``pool``, refined up to ``refine_rounds`` extra rounds."""
    cards: list[ViewCard] = []
    rounds: list[RoundTrace] = []
    examined: set[str] = set()
    merged = pool
    current, queries = pool, None
    for number in range(refine_rounds + 1):
        examined.update(current.ids())
        made = construct(
            llm,
            index,
            current,
            plan,
            existing=cards,
            refining=number > 0,
            max_tokens=max_tokens,
            ledger=ledger,
        )
        trace = RoundTrace(number, queries, pool_ids(current), degraded=made.degraded)
        rounds.append(trace)
        if made.degraded:
            where = f" in round {number}" if number else ""
            reason = f"{made.degraded}{where}"
            return Evidence(cards, merged, rounds, f"degraded: {reason}", [reason])
        trace.feedback = made.feedback
        trace.cards = [verify_card(c, index, round=number, threshold=threshold) for c in made.cards]
        cards = merge_cards(cards, trace.cards)
        if made.feedback.sufficient:
            return Evidence(cards, merged, rounds, "sufficient")
        if number == refine_rounds:
            break
        missing = [made.feedback.missing] if made.feedback.missing else []
        queries = made.feedback.follow_up_queries or missing
        current = retrieve(queries, frozenset(examined)) if queries else Pool(pool.conversation, [])
        if not current.ids() - examined:
            return Evidence(cards, merged, rounds, "no_new_candidates")
        current = _without(current, examined)
        merged = merge_pools(index, merged, current)
    return Evidence(cards, merged, rounds, "round_budget")


def _without(pool: Pool, examined: Collection[str]) -> Pool:
    """``pool`` less the candidates already examined (in case the retriever returned some)."""

    def keep(items: list[PoolItem]) -> list[PoolItem]:
        return [i for i in items if f"{i.space}:{i.id}" not in examined]

    return Pool(
        pool.conversation, pool.queries, keep(pool.episodes), keep(pool.facts), keep(pool.turns)
    )
