"""A ready-to-paste evidence block for the caller's own LLM, cut to a token budget.

``context_block`` takes an evidence pool and keeps its candidates in the pool's exposure order
(turn hits, episodes and facts interleaved; a context turn ranks with the hit that brought it
in), first fit: an item that would overflow the budget is skipped and smaller ones after it
may still fit. The block is rendered like every prompt of the method (episodes, facts, turns;
grouped by session under one date header each; every record with its citable id) with each
relative time expression followed by its resolution (``annotate_times``, the answer context's
format). Tokens are estimated as characters / 4. No LLM call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from qemem.evidence.context import SourceIndex, format_memories, session_header
from qemem.evidence.times import annotate_times
from qemem.llm.types import estimate_tokens
from qemem.models import OMIT_NONE, Episode, Pool, PoolItem, Ref, SemanticFact, Turn, search_text
from qemem.prompts import as_data

EMPTY = "(no memories found)"


@dataclass(frozen=True)
class ContextItem:
    """One record of the block: its ref, session and session date (ISO), the speaker (turns),
    the text as the block shows it (times annotated) and its estimated tokens. In a block
    across conversations the ref names the record's conversation and ``session`` is that
    conversation's session number."""

    ref: Ref
    session: int
    date: str
    text: str
    speaker: str | None = None
    tokens: int = 0

    @property
    def conversation(self) -> str | None:
        """The record's conversation in a block across conversations (else None)."""
        return self.ref.conversation


@dataclass(frozen=True)
class Context:
    """The block (``text``), the items it shows in exposure order, its estimated ``tokens``
    and the ``budget_tokens`` it was cut to; ``left_out`` counts pool candidates that did not
    fit; ``planner`` is "rule" or "llm". A block across conversations has ``conversation``
    None and ``conversations`` the ones ranked together (``qemem.evidence.many``)."""

    conversation: str | None
    question: str
    text: str
    items: list[ContextItem] = field(default_factory=list)
    tokens: int = 0
    budget_tokens: int = 0
    left_out: int = 0
    planner: str = "rule"
    conversations: Annotated[list[str] | None, OMIT_NONE] = None


def _priority(pool: Pool) -> list[PoolItem]:
    """The pool's candidates in exposure order; a context turn right after its hit."""
    at = {item.id: item.position for item in pool.items() if item.position is not None}

    def rank(item: PoolItem) -> tuple[float, int]:
        if item.position is not None:
            return float(item.position), 0
        vias = [at[r.via] for r in item.reasons if r.via in at]
        return (float(min(vias)) if vias else float("inf")), 1

    return sorted(pool.items(), key=rank)


def _shown(index: SourceIndex, record: Turn | Episode | SemanticFact) -> str:
    """A record's text as the block shows it."""
    if isinstance(record, Turn):
        return annotate_times(record.text, index.session_date(record))
    return search_text(record)


def _render(index: SourceIndex, chosen: Sequence[PoolItem]) -> str:
    records = [item.record for item in chosen]
    return format_memories(
        index,
        [r for r in records if isinstance(r, Episode)],
        [r for r in records if isinstance(r, SemanticFact)],
        [r for r in records if isinstance(r, Turn)],
        annotate=True,
        narratives=True,
    )


def _cost(index: SourceIndex, item: PoolItem, shown: str, opened: set[object]) -> int:
    """Estimated tokens an item adds to the block: its line (``shown`` its text), and its
    section title and session header when it is the first of them (``opened`` holds those
    already paid for)."""
    record = item.record
    text = f"[{record.id}] {as_data(shown)}"
    if isinstance(record, Turn):
        text += f" {record.speaker}: "
    if (item.space, record.session) not in opened:
        text += f"\n{session_header(index, record)}"
    if item.space not in opened:
        text += "\n\nSemantic facts (each under the session it was learned in):"
    return estimate_tokens(text + "\n")


def context_block(index: SourceIndex, pool: Pool, question: str, budget_tokens: int) -> Context:
    """The block of ``pool`` cut to ``budget_tokens`` (see the module doc)."""
    ranked = _priority(pool)
    shown = {item.ref: _shown(index, item.record) for item in ranked}
    chosen: list[PoolItem] = []
    opened: set[object] = set()
    spent = 0
    for item in ranked:
        cost = _cost(index, item, shown[item.ref], opened)
        if spent + cost <= budget_tokens:
            chosen.append(item)
            spent += cost
            opened.update({item.space, (item.space, item.record.session)})
    text = _render(index, chosen)
    while chosen and estimate_tokens(text) > budget_tokens:  # headers are shared: rarely needed
        chosen.pop()
        text = _render(index, chosen)
    items = [
        ContextItem(
            ref=item.ref,
            session=item.record.session,
            date=index.session_date(item.record).isoformat(),
            text=shown[item.ref],
            speaker=item.record.speaker if isinstance(item.record, Turn) else None,
            tokens=estimate_tokens(shown[item.ref]),
        )
        for item in chosen
    ]
    return Context(
        conversation=pool.conversation,
        question=question,
        text=text or EMPTY,
        items=items,
        tokens=estimate_tokens(text or EMPTY),
        budget_tokens=budget_tokens,
        left_out=len(ranked) - len(chosen),
    )
