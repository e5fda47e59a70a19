"""Importing a memory file into a store and exporting one (see :mod:`qemem.memory_file`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from qemem.memory_file import (
    NOTE_KEY,
    MemoryFile,
    MemoryImportReport,
    check_provenance,
    check_supersessions,
    new_supersessions,
    split_new,
)
from qemem.models import Episode, SemanticFact, Turn, check_id, check_text
from qemem.store import MemoryStore, Scope

Embed = Callable[[Sequence[Turn | Episode | SemanticFact]], np.ndarray]
"""Passage vectors of records' search documents (``Memory.embed_documents``)."""


def import_memory_file(
    store: MemoryStore, scope: Scope, memory: MemoryFile, embed: Embed, embedder_id: str
) -> MemoryImportReport:
    """Check every record of ``memory`` against the stored conversation (turn ids, sessions,
    provenance), then write the new episodes and facts (embedded with ``embed``, vectors
    tagged ``embedder_id``) and the file's note in one transaction; records already stored
    identically are skipped."""
    started = time.perf_counter()
    check_text(memory.note, "note")
    for kind, records in (("episode", memory.episodes), ("fact", memory.facts)):
        for record in records:
            check_id(record.id, f"{kind} id")
    conversation = store.get_conversation(scope)
    stored_episodes, stored_facts = store.episodes(scope), store.facts(scope)
    check_provenance(
        memory, store.turns(scope), stored_episodes, [s.index for s in conversation.sessions]
    )
    check_supersessions(memory, store.turns(scope), stored_facts)
    episodes, facts = split_new(memory, stored_episodes, stored_facts)
    supersessions = new_supersessions(memory, store.supersessions(scope))
    report = MemoryImportReport(
        memory.conversation,
        episodes_added=len(episodes),
        facts_added=len(facts),
        episodes_unchanged=len(memory.episodes) - len(episodes),
        facts_unchanged=len(memory.facts) - len(facts),
        supersessions_added=len(supersessions),
        added_ids=[e.id for e in episodes] + [f.id for f in facts],
    )
    episode_vectors, fact_vectors = embed(episodes), embed(facts)
    with store.transaction():
        if episodes:
            store.add_episodes(scope, episodes, episode_vectors, embedder_id)
        if facts:
            store.put_facts(scope, facts, fact_vectors, embedder_id)
        if supersessions:
            store.put_supersessions(scope, supersessions)
        if memory.note and store.get_state(scope, NOTE_KEY) is None:
            store.set_state(scope, NOTE_KEY, memory.note)
    report.seconds = time.perf_counter() - started
    return report


def export_memory_file(store: MemoryStore, scope: Scope, conversation: str) -> MemoryFile:
    """The episodes, facts and supersessions of the scope's conversation as a
    ``qemem-memory/2`` file (store order; the note of the file it was imported from, if
    any); NotFoundError if absent."""
    store.get_conversation(scope)
    return MemoryFile(
        conversation,
        store.get_state(scope, NOTE_KEY) or "",
        tuple(store.episodes(scope)),
        tuple(store.facts(scope)),
        tuple(store.supersessions(scope)),
    )
