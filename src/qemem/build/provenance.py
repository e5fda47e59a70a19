"""Provenance S -> E -> U: the episodes a fact was learned from, the turns of an episode."""

from __future__ import annotations

from qemem.errors import NotFoundError
from qemem.models import Episode, SemanticFact, Turn
from qemem.store.base import MemoryStore, Scope


def fact_episodes(store: MemoryStore, scope: Scope, fact: SemanticFact | str) -> list[Episode]:
    """The episodes ``fact`` (a record or an id) cites, in its provenance order."""
    if isinstance(fact, str):
        found = store.facts(scope, [fact])
        if not found:
            raise NotFoundError(
                f"no fact {fact!r} in conversation {scope}: list them first",
                kind="fact",
                name=fact,
                conversation=scope.conversation,
            )
        fact = found[0]
    return store.episodes(scope, fact.episode_ids)


def episode_turns(store: MemoryStore, scope: Scope, episode: Episode | str) -> list[Turn]:
    """The original turns of ``episode`` (a record or an id), in conversation order."""
    if isinstance(episode, str):
        found = store.episodes(scope, [episode])
        if not found:
            raise NotFoundError(
                f"no episode {episode!r} in conversation {scope}: list them first",
                kind="episode",
                name=episode,
                conversation=scope.conversation,
            )
        episode = found[0]
    return store.turns(scope, episode.turn_ids)
