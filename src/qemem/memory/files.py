"""Importing a memory file into a store and exporting one (see :mod:`qemem.memory_file`), and
the methods of ``Memory`` that do it (``MemoryFiles``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from qemem.embed.base import Embedder
from qemem.memory_file import (
    NOTE_KEY,
    FileLike,
    MemoryFile,
    MemoryImportReport,
    check_provenance,
    check_supersessions,
    load,
    new_corrections,
    new_supersessions,
    save,
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
    tagged ``embedder_id``), supersessions, corrections and the file's note in one
    transaction; records already stored identically are skipped."""
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
    corrections = new_corrections(memory, store.corrections(scope))
    report = MemoryImportReport(
        memory.conversation,
        episodes_added=len(episodes),
        facts_added=len(facts),
        episodes_unchanged=len(memory.episodes) - len(episodes),
        facts_unchanged=len(memory.facts) - len(facts),
        supersessions_added=len(supersessions),
        corrections_added=len(corrections),
        added_ids=[e.id for e in episodes] + [f.id for f in facts],
    )
    episode_vectors, fact_vectors = embed(episodes), embed(facts)
    with store.transaction():
        if episodes:
            store.add_episodes(scope, episodes, episode_vectors, embedder_id)
        if facts:
            store.put_facts(scope, facts, fact_vectors, embedder_id)
        if corrections:
            store.put_corrections(scope, corrections)
        if supersessions:
            store.put_supersessions(scope, supersessions)
        if memory.note and store.get_state(scope, NOTE_KEY) is None:
            store.set_state(scope, NOTE_KEY, memory.note)
    report.seconds = time.perf_counter() - started
    return report


def export_memory_file(store: MemoryStore, scope: Scope, conversation: str) -> MemoryFile:
    """The episodes, facts, supersessions and corrections of the scope's conversation as a
    ``qemem-memory/2`` file (store order; the note of the file it was imported from, if
    any); NotFoundError if absent."""
    store.get_conversation(scope)
    return MemoryFile(
        conversation,
        store.get_state(scope, NOTE_KEY) or "",
        tuple(store.episodes(scope)),
        tuple(store.facts(scope)),
        tuple(store.supersessions(scope)),
        tuple(store.corrections(scope)),
    )


class _Host(Protocol):
    """What of ``Memory`` these methods use."""

    store: MemoryStore
    namespace: str

    def embed_documents(self, records: Sequence[Turn | Episode | SemanticFact]) -> np.ndarray: ...

    def _check_embedder(self) -> None: ...

    @property
    def embedder(self) -> Embedder: ...


class MemoryFiles:
    """The memory-file methods of ``Memory``."""

    def import_memory(self: _Host, memory: MemoryFile | FileLike) -> MemoryImportReport:
        """Add the episodes, facts and supersessions of a memory file (see :mod:`qemem.memory_file`)
        to its conversation, embedded with this store's embedder. ``memory``: the file's
        path (str or PathLike), a file object open for reading, or a parsed ``MemoryFile``.

        The conversation's turns must be stored already; every record is checked (turn ids,
        sessions, provenance) before anything is written, and all is written in one
        transaction. Records already stored identically are skipped, so importing twice
        changes nothing; a different record under a stored id is refused (StoreError).
        """
        if not isinstance(memory, MemoryFile):
            memory = load(memory)
        self._check_embedder()
        return import_memory_file(
            self.store,
            Scope(memory.conversation, self.namespace),
            memory,
            self.embed_documents,
            self.embedder.id,
        )

    def export_memory(self: _Host, conversation: str, to: FileLike | None = None) -> MemoryFile:
        """A conversation's episodes, facts and supersessions as a ``qemem-memory/2`` file
        (store order; the note of the file it was imported from, if any), also written to
        ``to`` when given: a path (str or PathLike; replaced if it exists) or a file object
        open for writing (text or binary)."""
        scope = Scope(conversation, self.namespace)
        memory = export_memory_file(self.store, scope, conversation)
        if to is not None:
            save(memory, to)
        return memory
