"""The source records an answer's evidence points at, kept with the answer.

``ask`` snapshots them while the conversation is loaded, so whoever reads the answer later (the
evidence viewer, the evaluation harness) gets the records themselves instead of ids to look up:
every pool turn; every cited turn with its neighbours in its session; every turn of the answer
context; pool and cited episodes with their first turns; pool and cited facts with the episodes
they were learned from; and the date of each session these records belong to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from qemem.evidence.cards import ViewCard
from qemem.evidence.context import SourceIndex, pool_records
from qemem.models import Episode, Pool, Ref, SemanticFact, Turn


@dataclass
class Sources:
    """Records by id (turns in conversation order) and session dates by session number."""

    speakers: list[str] = field(default_factory=list)
    sessions: dict[int, str] = field(default_factory=dict)
    turns: dict[str, Turn] = field(default_factory=dict)
    episodes: dict[str, Episode] = field(default_factory=dict)
    facts: dict[str, SemanticFact] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: turns as ``{speaker, text, session, position}``, sessions as ISO
        date-times, episodes and facts with their provenance ids."""
        return {
            "speakers": list(self.speakers),
            "sessions": {str(k): v for k, v in sorted(self.sessions.items())},
            "turns": {
                t.id: {
                    "speaker": t.speaker,
                    "text": t.text,
                    "session": t.session,
                    "position": t.position,
                }
                for t in self.turns.values()
            },
            "episodes": {
                e.id: {
                    "title": e.title,
                    "content": e.content,
                    "session": e.session,
                    "turn_ids": list(e.turn_ids),
                }
                for e in self.episodes.values()
            },
            "facts": {
                f.id: {
                    "content": f.content,
                    "session": f.session,
                    "episode_ids": list(f.episode_ids),
                }
                for f in self.facts.values()
            },
        }


def collect_sources(
    index: SourceIndex,
    pool: Pool,
    cards: Sequence[ViewCard],
    shown: Iterable[str],
    *,
    episode_turns: int = 12,
    standing: Iterable[Ref] = (),
) -> Sources:
    """The records the answer's pool, cards and answer context show (see the module doc):
    ``shown`` are the turn ids the answer context showed (``Evidence.shown.turns``, which
    holds the cited turns' neighbours), the cards name their records by ``refs``, and
    ``standing`` the facts of the standing instructions and preferences section (with the
    turns they were read from)."""
    pooled_episodes, pooled_facts, turns = pool_records(pool)
    episodes = {e.id: e for e in pooled_episodes}
    facts = {f.id: f for f in pooled_facts}
    for ref in (*(ref for card in cards for ref in card.refs), *standing):
        located = index.get(ref.id)
        record = located.record if located is not None else None
        if isinstance(record, Turn):
            turns.append(record)
        elif isinstance(record, Episode):
            episodes[record.id] = record
        elif isinstance(record, SemanticFact):
            facts[record.id] = record
    for fact in list(facts.values()):
        for tid in fact.turn_ids:  # the messages it was read from directly
            found = index.get(tid)
            if found is not None and isinstance(found.record, Turn):
                turns.append(found.record)
        for eid in fact.episode_ids:
            found = index.get(eid)
            if found is not None and isinstance(found.record, Episode):
                episodes.setdefault(eid, found.record)
    for episode in episodes.values():
        turns.extend(index.episode_turns(episode, episode_turns))
    for tid in shown:
        found = index.get(tid)
        if found is not None and isinstance(found.record, Turn):
            turns.append(found.record)
    ordered = index.in_order(turns)
    records: list[Turn | Episode | SemanticFact] = [*ordered, *episodes.values(), *facts.values()]
    dates = {r.session: index.session_date(r).isoformat() for r in records}
    return Sources(
        speakers=list(index.conversation.speakers),
        sessions=dict(sorted(dates.items())),
        turns={t.id: t for t in ordered},
        episodes=episodes,
        facts=facts,
    )
