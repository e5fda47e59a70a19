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

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from qemem.evidence.cards import (
    Feedback,
    ViewCard,
    construct_cards,
    merge_cards,
    verify_card,
)
from qemem.evidence.conflicts import mark_conflicts
from qemem.evidence.context import SourceIndex
from qemem.evidence.layout import SharedPrefix
from qemem.evidence.quotes import DEFAULT_THRESHOLD
from qemem.llm import Ledger, LLMClient, LLMResponse
from qemem.models import OMIT_EMPTY, Plan, Pool, PoolEntry, PoolItem, Ref, Turn

Retriever = Callable[[Sequence[str], Collection[Ref]], Pool]
"""``retrieve(queries, exclude)``: a pool for ``queries`` without the records in exclude."""


def call_records(responses: Iterable[LLMResponse]) -> list[dict[str, Any]]:
    """LLM calls as the record keeps them: stage, model, tokens (prompt-cache writes and reads
    among the input), latency, cost, cached."""
    return [
        {
            "stage": r.stage,
            "model": r.model,
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "cache_write_tokens": r.cache_write_tokens,
            "cache_read_tokens": r.cache_read_tokens,
            "latency_s": r.latency_s,
            "cost_usd": r.cost_usd,
            "cached": r.cached,
        }
        for r in responses
    ]


@dataclass
class RoundTrace:
    """What one round did: its queries (None for the initial pool), its pool candidates in
    exposure order, its cards, the constructor's verdict and the constructor's LLM calls
    (repairs included)."""

    round: int
    queries: list[str] | None
    pool: list[PoolEntry]
    cards: list[ViewCard] = field(default_factory=list)
    feedback: Feedback | None = None
    degraded: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)

    def refs(self) -> list[Ref]:
        """The refs of the round's candidates, in exposure order."""
        return [entry.ref for entry in self.pool]

    def turn_ids(self) -> list[str]:
        """The turn ids the round's candidates expose, first-seen order."""
        return list(dict.fromkeys(t for entry in self.pool for t in entry.exposes))


@dataclass
class Shown:
    """Exactly what the answer prompt shows, as the assembler wrote it: every turn id in
    conversation order (``turns``), the turns of the cited-sources section
    (``cited_context``), the turns of the background section (``background``), the
    episodes and facts shown there (``background_refs``) and the facts of the standing
    instructions and preferences section (``standing``)."""

    turns: list[str] = field(default_factory=list)
    cited_context: list[str] = field(default_factory=list)
    background: list[str] = field(default_factory=list)
    background_refs: list[Ref] = field(default_factory=list)
    standing: Annotated[list[Ref], OMIT_EMPTY] = field(default_factory=list)


@dataclass
class Evidence:
    """The record of how an answer's evidence came about: the plan, every round, the cards
    of all rounds, the merged pool, why the loop stopped, the degradations, and what the
    answer prompt showed (``shown``, filled in by assembly)."""

    plan: Plan
    rounds: list[RoundTrace]
    cards: list[ViewCard]
    pool: Pool
    termination: str | None
    degradations: list[str] = field(default_factory=list)
    shown: Shown = field(default_factory=Shown)

    def turn_ids(self, rounds: Iterable[int]) -> list[str]:
        """The turn ids the candidates of the given rounds expose, first-seen order."""
        wanted = set(rounds)
        chosen = (r for r in self.rounds if r.round in wanted)
        return list(dict.fromkeys(t for r in chosen for t in r.turn_ids()))


def merge_pools(index: SourceIndex, first: Pool, second: Pool) -> Pool:
    """Both pools' candidates, first-seen kept (a long turn in both with the passages of
    both); turns in conversation order."""

    def union(a: list[PoolItem], b: list[PoolItem]) -> list[PoolItem]:
        seen = {item.id for item in a}
        return [*a, *(item for item in b if item.id not in seen)]

    later = {item.id: item.passages or [] for item in second.turns}
    turns = [
        item
        if item.passages is None or item.id not in later
        else dataclasses.replace(item, passages=sorted({*item.passages, *later[item.id]}))
        for item in union(first.turns, second.turns)
    ]
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
    prefix: SharedPrefix | None = None,
) -> Evidence:
    """Cards for ``plan`` from ``pool``, refined up to ``refine_rounds`` extra rounds; every
    constructor call opens with ``prefix`` when given (the ``cached`` layout). The cards of
    the record carry the conflicts their relations name (:mod:`qemem.evidence.conflicts`)."""
    cards: list[ViewCard] = []
    rounds: list[RoundTrace] = []
    examined: set[Ref] = set()
    merged = pool

    def done(termination: str, degradations: Sequence[str] = ()) -> Evidence:
        marked = mark_conflicts(cards, index)
        return Evidence(plan, rounds, marked, merged, termination, list(degradations))

    current, queries = pool, None
    for number in range(refine_rounds + 1):
        examined.update(current.refs())
        made = construct_cards(
            llm,
            index,
            current,
            plan,
            existing=cards,
            refining=number > 0,
            max_tokens=max_tokens,
            ledger=ledger,
            prefix=prefix,
        )
        trace = RoundTrace(number, queries, current.entries(), degraded=made.degraded)
        trace.calls = call_records(made.responses)
        rounds.append(trace)
        if made.degraded:
            where = f" in round {number}" if number else ""
            reason = f"{made.degraded}{where}"
            return done(f"degraded: {reason}", [reason])
        trace.feedback = made.feedback
        trace.cards = [verify_card(c, index, round=number, threshold=threshold) for c in made.cards]
        cards = merge_cards(cards, trace.cards)
        if made.feedback.sufficient:
            return done("sufficient")
        if number == refine_rounds:
            break
        missing = [made.feedback.missing] if made.feedback.missing else []
        queries = made.feedback.follow_up_queries or missing
        current = retrieve(queries, frozenset(examined)) if queries else Pool(pool.conversation, [])
        if not set(current.refs()) - examined:
            return done("no_new_candidates")
        current = _without(current, examined)
        merged = merge_pools(index, merged, current)
    return done("round_budget")


def _without(pool: Pool, examined: Collection[Ref]) -> Pool:
    """``pool`` less the candidates already examined (in case the retriever returned some)."""

    def keep(items: list[PoolItem]) -> list[PoolItem]:
        return [i for i in items if i.ref not in examined]

    return Pool(
        pool.conversation, pool.queries, keep(pool.episodes), keep(pool.facts), keep(pool.turns)
    )
