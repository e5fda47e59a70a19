"""Evidence assembly: what the answerer reads.

With cards: the cards (unverified ones marked), then the cited sources in context (each cited
turn with up to ``neighbours`` turns on each side in its session, each cited episode with its
first ``episode_turns`` turns, cited facts; session dates shown), then the rest of the pool as
background (an episode whose turns are all shown appears by id and title only). Without
cards (direct answering, or a degraded constructor): the pool alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qemem.evidence.cards import ViewCard, pool_records
from qemem.evidence.context import SourceIndex, format_memories
from qemem.evidence.refine import Shown
from qemem.models import Episode, Pool, Ref, SemanticFact, Turn
from qemem.prompts import as_data


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


def format_card(number: int, card: ViewCard) -> str:
    """One card as the answerer reads it."""
    check = "verified" if card.verified else "UNVERIFIED: quote not found in the cited sources"
    lines = [f"[{number}] {as_data(card.claim)}", f"    sources: {', '.join(card.sources) or '-'}"]
    if card.unresolved_sources:
        lines[-1] += f" (unknown ids: {', '.join(card.unresolved_sources)})"
    lines.append(f'    quote: "{as_data(card.quote)}" ({check})')
    times = []
    if card.time:
        times.append(card.time)
    if card.resolved_time is not None:
        rule = card.resolved_time
        said = f' "{rule.expression}"' if rule.expression else " no relative expression"
        times.append(f"by the session-date rule ({said.strip()}): {rule.phrase}")
    if times:
        lines.append(f"    time: {'; '.join(times)}")
    if card.relation:
        lines.append(f"    relation: {card.relation}")
    return "\n".join(lines)


def assemble_pool(index: SourceIndex, pool: Pool) -> Assembly:
    """The pool alone (direct answering)."""
    episodes, facts, turns = pool_records(pool)
    body = format_memories(index, episodes, facts, turns) or "(no memories retrieved)"
    text = f"Retrieved memories:\n{body}"
    ordered = index.in_order(turns)
    ids = [t.id for t in ordered]
    refs = [item.ref for item in (*pool.episodes, *pool.facts)]
    inputs = {"cards": [], "episodes": episodes, "facts": facts, "turns": ordered}
    return Assembly(text, Shown(ids, [], ids, refs), [], inputs)


def _cited(
    index: SourceIndex, cards: Sequence[ViewCard]
) -> tuple[list[Turn], dict[str, Episode], dict[str, SemanticFact], list[Turn]]:
    """The records the cards cite, by space, and the turns behind them all (citations)."""
    cited_turns: list[Turn] = []
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
                cited_turns.append(record)
            elif isinstance(record, Episode):
                cited_episodes[record.id] = record
            else:
                cited_facts[record.id] = record
    return cited_turns, cited_episodes, cited_facts, citations


def assemble(
    index: SourceIndex,
    cards: Sequence[ViewCard],
    pool: Pool,
    *,
    neighbours: int = 2,
    episode_turns: int = 12,
) -> Assembly:
    """Cards, cited sources in context, and the rest of ``pool`` as background."""
    if not cards:
        return assemble_pool(index, pool)
    cited_turns, cited_episodes, cited_facts, citations = _cited(index, cards)
    context: list[Turn] = [n for t in cited_turns for n in index.neighbours(t, neighbours)]
    for episode in cited_episodes.values():
        context.extend(index.episode_turns(episode, episode_turns))
    context = index.in_order(context)
    shown = {t.id for t in context}
    episodes, facts, turns = pool_records(pool)
    rest_episodes = [e for e in episodes if e.id not in cited_episodes]
    rest_facts = [f for f in facts if f.id not in cited_facts]
    rest_turns = [t for t in turns if t.id not in shown]
    cards_text = "\n".join(format_card(n, c) for n, c in enumerate(cards, start=1))
    sections = [f"Evidence cards built for this question:\n{cards_text}"]
    cited = format_memories(
        index,
        list(cited_episodes.values()),
        list(cited_facts.values()),
        context,
        marked=[t.id for t in cited_turns],
        narratives=True,
    )
    if cited:
        sections.append("Cited sources in their context (cited turns are marked with *):\n" + cited)
    background = format_memories(
        index, rest_episodes, rest_facts, rest_turns, shown=[t.id for t in context]
    )
    if background:
        sections.append(f"Other retrieved memories (background):\n{background}")
    visible = index.in_order([*context, *rest_turns])
    shown_refs = [Ref("episode", e.id) for e in rest_episodes]
    shown_refs += [Ref("fact", f.id) for f in rest_facts]
    rest = [t.id for t in index.in_order(rest_turns)]
    return Assembly(
        "\n\n".join(sections),
        Shown([t.id for t in visible], [t.id for t in context], rest, shown_refs),
        [t.id for t in index.in_order(citations)],
        {"cards": list(cards)},
    )
