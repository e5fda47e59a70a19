"""A ready-to-paste evidence block for the caller's own LLM, cut to a token budget.

``context_block`` takes an evidence pool and lists its candidates in the pool's exposure order
(turn hits, episodes and facts interleaved; the context a hit brings in right after it): an
episode, a fact, a turn, or one passage of a long turn (shown under its turn's header, the
rest of the turn left out). It keeps the longest beginning of that list that fits the budget:
the first item that does not fit ends the block, so a larger budget for the pool never shows
less of it (the block fills monotonically; passages keep every item small). The block is rendered
like every prompt of the method (episodes, facts, turns; grouped by session under one date
header each; every record with its citable id; a text of several lines keeps its lines) with
each relative time expression followed by its resolution (``annotate_times``, the answer
context's format). In a conversation with an assistant the block opens with the user's
current standing instructions and preferences (:mod:`qemem.evidence.standing`, at most a
quarter of the budget; those it shows are not repeated among the pool's facts), and the pool
fills the rest. Tokens are estimated as characters / 4. No LLM call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from qemem.evidence.context import SourceIndex, exposure_place, format_memories, session_header
from qemem.evidence.standing import STANDING_SHARE, StandingSection, standing_section
from qemem.evidence.times import annotate_times
from qemem.llm.types import estimate_tokens
from qemem.models import (
    OMIT_EMPTY,
    OMIT_NONE,
    Episode,
    Pool,
    PoolItem,
    Ref,
    SemanticFact,
    Span,
    Turn,
    Unit,
    search_text,
    split_key,
)
from qemem.passages import OMITTED
from qemem.prompts import as_lines

EMPTY = "(no memories found)"


@dataclass(frozen=True)
class ContextItem:
    """One record of the block: its ref (a passage of a long turn names its span), session
    and session date (ISO), the speaker (turns), the text as the block shows it (times
    annotated) and its estimated tokens. In a block across conversations the ref names the
    record's conversation and ``session`` is that conversation's session number."""

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
    fit; ``planner`` is "rule" or "llm"; ``standing`` the refs of the items that are the
    user's standing instructions and preferences (the block's first section). A block across
    conversations has ``conversation`` None and ``conversations`` the ones ranked together
    (``qemem.evidence.many``)."""

    conversation: str | None
    question: str
    text: str
    items: list[ContextItem] = field(default_factory=list)
    tokens: int = 0
    budget_tokens: int = 0
    left_out: int = 0
    planner: str = "rule"
    conversations: Annotated[list[str] | None, OMIT_NONE] = None
    standing: Annotated[list[Ref], OMIT_EMPTY] = field(default_factory=list)


@dataclass(frozen=True)
class _Entry:
    """One item of the block's list: a pool item, and for a passage of a long turn its span."""

    item: PoolItem
    span: Span | None = None

    @property
    def ref(self) -> Ref:
        return Ref(self.item.space, self.item.id, self.item.conversation, self.span)


def _priority(pool: Pool) -> list[_Entry]:
    """The pool's candidates in exposure order, a context turn right after its hit; a turn,
    or each passage of a long one, where the pool's exposure order first shows it (a turn
    that is also a later hit stays with the candidate that exposed it first); without an
    exposure order (a pool read back or merged), by the positions of its items."""
    place = exposure_place(pool)

    def rank(item: PoolItem) -> tuple[float, int]:
        return place(item), 0 if item.position is not None else 1

    exposed: dict[Unit, tuple[float, int]] = {}
    for n, exposure in enumerate(pool.order):
        for unit in exposure.units:
            hit = exposure.space == "turn" and split_key(exposure.id) == unit
            exposed.setdefault(unit, (float(n), 0 if hit else 1))
    ranked: list[tuple[tuple[float, int], _Entry]] = []
    for item in pool.items():
        if item.space != "turn":
            ranked.append((rank(item), _Entry(item)))
            continue
        spans: list[Span | None] = list(item.passages) if item.passages is not None else [None]
        ranked += [(exposed.get((item.id, span), rank(item)), _Entry(item, span)) for span in spans]
    return [entry for _, entry in sorted(ranked, key=lambda pair: pair[0])]


def _shown(index: SourceIndex, entry: _Entry) -> str:
    """An entry's text as the block shows it."""
    record = entry.item.record
    if isinstance(record, Turn):
        return annotate_times(record.excerpt(entry.span), index.session_date(record))
    return search_text(record)


def _render(index: SourceIndex, chosen: Sequence[_Entry]) -> str:
    records = {e.item.id: e.item.record for e in chosen}
    passages: dict[str, list[Span]] = {}
    for entry in chosen:
        if entry.span is not None:
            passages.setdefault(entry.item.id, []).append(entry.span)
    return format_memories(
        index,
        [r for r in records.values() if isinstance(r, Episode)],
        [r for r in records.values() if isinstance(r, SemanticFact)],
        [r for r in records.values() if isinstance(r, Turn)],
        annotate=True,
        narratives=True,
        passages=passages,
    )


def _cost(index: SourceIndex, entry: _Entry, shown: str, opened: set[object]) -> int:
    """Estimated tokens an entry adds to the block: its line (``shown`` its text), and its
    section title and session header when it is the first of them (``opened`` holds those
    already paid for)."""
    record = entry.item.record
    space = entry.item.space
    text = f"[{record.id}]{as_lines(shown)}"
    if isinstance(record, Turn):
        text += f" {record.speaker}: " + ("" if entry.span is None else f"\n{OMITTED}")
    if (space, record.session) not in opened:
        text += f"\n{session_header(index, record)}"
    if space not in opened:
        text += "\n\nSemantic facts (each under the session it was learned in):"
    return estimate_tokens(text + "\n")


def _item(index: SourceIndex, entry: _Entry, shown: str) -> ContextItem:
    record = entry.item.record
    return ContextItem(
        ref=entry.ref,
        session=record.session,
        date=index.session_date(record).isoformat(),
        text=shown,
        speaker=record.speaker if isinstance(record, Turn) else None,
        tokens=estimate_tokens(shown),
    )


def _standing_items(index: SourceIndex, section: StandingSection) -> list[ContextItem]:
    return [_item(index, _Entry(PoolItem("fact", fact)), fact.content) for fact in section.facts]


def context_block(index: SourceIndex, pool: Pool, question: str, budget_tokens: int) -> Context:
    """The block of ``pool`` cut to ``budget_tokens`` (see the module doc)."""
    ranked = [item.id for item in pool.facts]
    section = standing_section(index, question, int(budget_tokens * STANDING_SHARE), ranked)
    standing = {f.id for f in section.facts}
    candidates = [e for e in _priority(pool) if e.item.space != "fact" or e.item.id not in standing]
    budget = budget_tokens - section.tokens
    shown = {entry.ref: _shown(index, entry) for entry in candidates}
    chosen: list[_Entry] = []
    opened: set[object] = set()
    spent = 0
    for entry in candidates:
        cost = _cost(index, entry, shown[entry.ref], opened)
        if spent + cost > budget:
            break
        chosen.append(entry)
        spent += cost
        opened.update({entry.item.space, (entry.item.space, entry.item.record.session)})
    text = _render(index, chosen)
    while chosen and estimate_tokens(text) > budget:  # headers are shared: rarely needed
        chosen.pop()
        text = _render(index, chosen)
    text = section.text + text if text else section.text.rstrip()
    firsts = _standing_items(index, section)
    items = firsts + [_item(index, entry, shown[entry.ref]) for entry in chosen]
    return Context(
        conversation=pool.conversation,
        question=question,
        text=text or EMPTY,
        items=items,
        tokens=estimate_tokens(text or EMPTY),
        budget_tokens=budget_tokens,
        left_out=len(candidates) - len(chosen) + section.left_out,
        standing=[item.ref for item in firsts],
    )
