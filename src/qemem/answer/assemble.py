"""Evidence assembly: what the answerer reads.

With cards: the cards (unverified ones marked, and those checked only against model-written
memory; each with its rule time and what it rests on, plans marked), then the cited sources in
context (each cited turn with up to ``neighbours`` turns on each side in its session, each
cited episode with its first ``episode_turns`` turns, cited facts with their provenance turns;
session dates shown, relative times annotated), then the rest of the pool as background,
best-ranked first within a token budget (an episode whose turns are all shown appears by id
and title only). Without cards (direct answering, or a degraded constructor): the pool alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from qemem.answer.background import background
from qemem.evidence.cards import ViewCard
from qemem.evidence.conflicts import conflict_text
from qemem.evidence.context import (
    FoundRecord,
    SourceIndex,
    format_memories,
    pool_passages,
    pool_records,
)
from qemem.evidence.quotes import verify_quote
from qemem.evidence.refine import Shown
from qemem.lexicon import day_phrase
from qemem.models import Episode, Pool, Ref, SemanticFact, Span, Turn, Unit
from qemem.prompts import as_data, as_lines
from qemem.tokens import tokenize

R = TypeVar("R", Episode, SemanticFact, Turn)


@dataclass(frozen=True)
class Assembly:
    """The evidence text of the answer prompt, what it shows (``shown``), and the cited turn
    ids (card sources resolved to turns: episodes and facts expand to their original turns).

    ``inputs`` is the evidence as data for the answer request (``LLMRequest.inputs``): the
    ``cards``, and with none the pool's ``episodes``, ``facts`` and ``turns`` shown instead."""

    text: str
    shown: Shown
    citations: list[str]
    inputs: Mapping[str, Any] = field(default_factory=dict)


CONTEXT_HEADER = (
    "Cited sources in their context (cited turns are marked with *; each relative time is "
    "followed by its resolution against its session date in [brackets]):"
)


CONTEXT_ABOVE = (
    "(a turn the memories above show is named by id, with its relative times and their "
    "resolutions, not repeated)"
)


def _check_text(card: ViewCard) -> str:
    """How the card's quote was checked, as the answerer is told."""
    if not card.verified:
        return "UNVERIFIED: quote not found in the cited sources"
    if card.model_written:
        return (
            f"MODEL-WRITTEN: found only in a memory {card.grounded_in} a model wrote, not in "
            "what was said; check it against the original turns shown"
        )
    return "verified"


def _rule_text(card: ViewCard) -> str:
    """The card's rule time (see ``qemem.evidence.card_time``), saying what it rests on."""
    rule = card.resolved_time
    if rule is None:
        return ""
    said = day_phrase(rule.anchor or rule.start)
    if card.time_basis == "quote":
        return f'by the session-date rule ("{rule.expression}" in the quote): {rule.phrase}'
    if card.time_basis == "cited":
        where = card.time_source or "a cited turn"
        return f'by the session-date rule ("{rule.expression}" in {where}): {rule.phrase}'
    if card.time_event:
        return (
            f'"{card.time_event}" is relative to another event (no date follows from the '
            f"session date); said on {said}"
        )
    return f"no relative expression in the quote; said on {said} (not necessarily when it happened)"


def format_card(number: int, card: ViewCard) -> str:
    """One card as the answerer reads it."""
    lines = [f"[{number}] {as_data(card.claim)}", f"    sources: {', '.join(card.sources) or '-'}"]
    if card.unresolved_sources:
        lines[-1] += f" (unknown ids: {', '.join(card.unresolved_sources)})"
    quote = as_lines(card.quote)
    if quote.startswith("\n"):  # several lines: on lines of their own
        lines.append(f"    quote ({_check_text(card)}):{quote}")
    else:
        lines.append(f'    quote: "{quote[1:]}" ({_check_text(card)})')
    times = [as_data(card.time)] if card.time else []
    if rule := _rule_text(card):
        times.append(rule)
    if card.planned:
        times.append("PLANNED: stated as a plan or intention, not as something that had happened")
    if times:
        lines.append(f"    time: {'; '.join(times)}")
    relation = [as_data(card.relation)] if card.relation else []
    if card.conflict is not None:
        relation.append(conflict_text(card.conflict))
    if relation:
        lines.append(f"    relation: {'; '.join(relation)}")
    return "\n".join(lines)


def _not_above(
    above: Pool | None, episodes: list[Episode], facts: list[SemanticFact], turns: list[Turn]
) -> tuple[list[Episode], list[SemanticFact], list[Turn]]:
    """The records not already shown in the shared prefix's pool ``above`` (all without one)."""
    if above is None:
        return episodes, facts, turns
    seen = {item.ref for item in above.items()}
    return (
        [e for e in episodes if Ref("episode", e.id) not in seen],
        [f for f in facts if Ref("fact", f.id) not in seen],
        [t for t in turns if Ref("turn", t.id) not in seen],
    )


def _below(listing: str, header: str, above: Pool | None) -> str:
    """A memory section: ``listing`` under ``header``; in the ``cached`` layout (``above``)
    it names the memories of the shared prefix first and lists only the others."""
    if above is None:
        return f"{header}:\n{listing}" if listing else ""
    if not listing:
        return f"{header}: the memories retrieved above."
    return f"{header}: the memories retrieved above, and these from follow-up rounds:\n{listing}"


def assemble_pool(index: SourceIndex, pool: Pool, *, above: Pool | None = None) -> Assembly:
    """The pool alone (direct answering); with ``above`` (the shared prefix's pool, which
    the prompt already shows) only the pool's other records are listed."""
    episodes, facts, turns = pool_records(pool)
    listed = _not_above(above, episodes, facts, turns)
    body = format_memories(index, *listed, passages=pool_passages(pool))
    if above is None:
        body = body or "(no memories retrieved)"
    text = _below(body, "Retrieved memories", above)
    ordered = index.in_order(turns)
    ids = [t.id for t in ordered]
    refs = [item.ref for item in (*pool.episodes, *pool.facts)]
    inputs = {"cards": [], "episodes": episodes, "facts": facts, "turns": ordered}
    return Assembly(text, Shown(ids, [], ids, refs), [], inputs)


def _cited(
    index: SourceIndex, cards: Sequence[ViewCard]
) -> tuple[dict[str, tuple[Turn, str]], dict[str, Episode], dict[str, SemanticFact], list[Turn]]:
    """The records the cards cite, by space (each cited turn with the quote of the first card
    citing it), and the turns behind them all (citations)."""
    cited_turns: dict[str, tuple[Turn, str]] = {}
    cited_episodes: dict[str, Episode] = {}
    cited_facts: dict[str, SemanticFact] = {}
    citations: list[Turn] = []
    for card in cards:
        for source in card.sources:
            located = index.get(source)
            if located is None:
                continue
            citations.extend(index.turns_of(located))
            record = located.record
            if isinstance(record, Turn):
                cited_turns.setdefault(record.id, (record, card.quote))
            elif isinstance(record, Episode):
                cited_episodes[record.id] = record
            else:
                cited_facts[record.id] = record
    return cited_turns, cited_episodes, cited_facts, citations


def _shown_units(
    index: SourceIndex, turn: Turn, pool: Mapping[str, list[Span]], quote: str
) -> list[Unit]:
    """The units of a cited or context turn the answer prompt shows: the turn (one passage);
    of a long turn, the passages the pool holds of it, else the passage its quote matched
    (``quote``; else its first passage)."""
    units = index.units.of_turn.get(turn.id, [(turn.id, None)])
    if len(units) == 1:
        return units
    if turn.id in pool:
        return [(turn.id, span) for span in pool[turn.id]]
    span = verify_quote(quote, turn.text).span if quote else None
    hit = next(
        (u for u in units if span is not None and u[1] and u[1][0] <= span[0] < u[1][1]), None
    )
    return [hit or units[0]]


def _context_units(
    index: SourceIndex,
    cited: Iterable[tuple[Turn, str]],
    around: Iterable[Turn],
    held: Mapping[str, list[Span]],
    neighbours: int,
    neighbour_tokens: int | None = None,
) -> list[Unit]:
    """The units of the cited context: each cited turn's shown units with ``neighbours`` units
    each side, each side within ``neighbour_tokens`` (``cited``: the turn and the quote citing
    it), and the shown units of the turns ``around`` cited episodes and facts."""
    units: list[Unit] = []
    for turn, quote in cited:
        for unit in _shown_units(index, turn, held, quote):
            units += index.units.window(unit, neighbours, neighbour_tokens)
    for turn in around:
        units += _shown_units(index, turn, held, "")
    return units


def _turns_of_units(
    index: SourceIndex, units: Sequence[Unit], held: Mapping[str, list[Span]]
) -> tuple[list[Turn], dict[str, list[Span]]]:
    """The turns of ``units`` in conversation order, and the passages shown of the long ones:
    their units' and those the pool holds (``held``)."""
    spans: dict[str, set[Span]] = {}
    for tid, span in units:
        if span is not None:
            spans.setdefault(tid, set()).update([span, *held.get(tid, [])])
    found = [index.get(tid) for tid in dict.fromkeys(tid for tid, _ in units)]
    turns = index.in_order(f.record for f in found if f and isinstance(f.record, Turn))
    return turns, {tid: sorted(s) for tid, s in spans.items()}


def _above(above: Pool | None, spans: Mapping[str, list[Span]]) -> list[str]:
    """The turns of the shared prefix's pool ``above`` that the cited context need not repeat:
    shown whole there, or with every passage the context would show (``spans``)."""
    if above is None:
        return []
    return [
        i.id
        for i in above.turns
        if i.passages is None or set(spans.get(i.id, [])) <= set(i.passages)
    ]


def provenance_turns(index: SourceIndex, fact: SemanticFact, limit: int) -> list[Turn]:
    """The ``limit`` turns of the episodes a fact was learned from that share the most words
    with it (ties: conversation order), in conversation order."""
    words = set(tokenize(fact.content))
    turns = index.in_order(index.turns_of(FoundRecord("fact", fact)))
    ranked = sorted(turns, key=lambda t: -len(words & set(tokenize(t.text))))
    return index.in_order(ranked[:limit])


@dataclass(frozen=True)
class _Rest:
    """The background section's listing and every record the prompt shows as background
    (with ``above``, the shared prefix's records as well as the listed ones)."""

    text: str
    episodes: list[Episode]
    facts: list[SemanticFact]
    turns: list[Turn]


def _background(
    index: SourceIndex,
    pool: Pool,
    episodes: list[Episode],
    facts: list[SemanticFact],
    turns: list[Turn],
    budget: int | None,
    *,
    above: Pool | None,
    shown: Sequence[str],
    passages: Mapping[str, Sequence[Span]],
) -> _Rest:
    """The uncited records as background: those the shared prefix ``above`` shows stay shown
    there; of the others, what ``budget`` allows is listed (:func:`background`)."""
    listed = _not_above(above, episodes, facts, turns)
    kept = background(index, pool, *listed, budget, shown=shown, passages=passages)
    return _Rest(
        kept.text,
        _without(episodes, listed[0], kept.episodes),
        _without(facts, listed[1], kept.facts),
        _without(turns, listed[2], kept.turns),
    )


def _without(records: list[R], listed: Sequence[R], kept: Sequence[R]) -> list[R]:
    """``records`` less those ``listed`` but not ``kept``."""
    dropped = {r.id for r in listed} - {r.id for r in kept}
    return [r for r in records if r.id not in dropped]


def assemble(
    index: SourceIndex,
    cards: Sequence[ViewCard],
    pool: Pool,
    *,
    neighbours: int = 2,
    episode_turns: int = 12,
    fact_turns: int = 3,
    above: Pool | None = None,
    neighbour_tokens: int | None = None,
    background_tokens: int | None = None,
) -> Assembly:
    """Cards, cited sources in context, and the rest of ``pool`` as background (within
    ``background_tokens``, best-ranked first: :mod:`qemem.answer.background`; None: all of
    it). The context holds each cited turn with ``neighbours`` on each side (each side within
    ``neighbour_tokens``, None: no limit), each cited episode's first
    ``episode_turns`` turns and each cited fact's ``fact_turns`` provenance turns (so a card
    grounded in model-written text comes with the original words), relative times annotated.
    With ``above`` (the ``cached`` layout: the shared prefix's pool, already shown), the
    prefix's records stay shown there and the background lists, within the budget, only the
    others (the follow-up rounds')."""
    if not cards:
        return assemble_pool(index, pool, above=above)
    cited_turns, cited_episodes, cited_facts, citations = _cited(index, cards)
    held = pool_passages(pool)
    around: list[Turn] = []
    for episode in cited_episodes.values():
        around.extend(index.episode_turns(episode, episode_turns))
    for fact in cited_facts.values():
        around.extend(provenance_turns(index, fact, fact_turns))
    units = _context_units(index, cited_turns.values(), around, held, neighbours, neighbour_tokens)
    context, spans = _turns_of_units(index, units, held)
    shown = {t.id for t in context}
    episodes, facts, turns = pool_records(pool)
    rest = _background(
        index,
        pool,
        [e for e in episodes if e.id not in cited_episodes],
        [f for f in facts if f.id not in cited_facts],
        [t for t in turns if t.id not in shown],
        background_tokens,
        above=above,
        shown=[t.id for t in context],
        passages=held,
    )
    cards_text = "\n".join(format_card(n, c) for n, c in enumerate(cards, start=1))
    sections = [f"Evidence cards built for this question:\n{cards_text}"]
    cited = format_memories(
        index,
        list(cited_episodes.values()),
        list(cited_facts.values()),
        context,
        marked=list(cited_turns),
        narratives=True,
        annotate=True,
        above=_above(above, spans),
        passages=spans,
    )
    if cited:
        header = CONTEXT_HEADER if above is None else f"{CONTEXT_HEADER}\n{CONTEXT_ABOVE}"
        sections.append(f"{header}\n{cited}")
    if section := _below(rest.text, "Other retrieved memories (background)", above):
        sections.append(section)
    visible = index.in_order([*context, *rest.turns])
    shown_refs = [Ref("episode", e.id) for e in rest.episodes]
    shown_refs += [Ref("fact", f.id) for f in rest.facts]
    background_ids = [t.id for t in index.in_order(rest.turns)]
    return Assembly(
        "\n\n".join(sections),
        Shown([t.id for t in visible], [t.id for t in context], background_ids, shown_refs),
        [t.id for t in index.in_order(citations)],
        {"cards": list(cards)},
    )
