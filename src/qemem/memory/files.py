"""Importing a memory file into a store and exporting one (see :mod:`qemem.memory_file`): the
rules a file's records must keep against the stored conversation, and the methods of ``Memory``
that do it (``MemoryFiles``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from qemem.embed.base import Embedder
from qemem.errors import InputError, StoreError
from qemem.memory_file import NOTE_KEY, FileLike, MemoryFile, MemoryImportReport, load, save
from qemem.models import (
    REDACTED,
    Correction,
    Episode,
    SemanticFact,
    Supersession,
    Turn,
    check_id,
    check_same_kind,
    check_text,
)
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


def check_provenance(
    memory: MemoryFile,
    turns: Sequence[Turn],
    stored_episodes: Sequence[Episode],
    sessions: Sequence[int],
) -> None:
    """The provenance rules ``build`` keeps, checked before anything is written: every turn id
    is a stored turn, none of an episode's is redacted (the episode would bring its text
    back); an episode's turns lie in its session, each once, in conversation order, and in
    no other episode (a file written before its turns were built again would give them two);
    its session exists; a fact's episodes are in the file or the store, and its session is
    one of theirs or later (a fact is learned no earlier than its first source episode).
    Raises InputError naming the first offending record."""
    stored = {t.id: (n, t) for n, t in enumerate(turns)}
    known_sessions = set(sessions)
    episode_session = {e.id: e.session for e in stored_episodes}
    covered = {t: e.id for e in stored_episodes for t in e.turn_ids}
    for episode in memory.episodes:
        _check_episode(episode, memory.conversation, stored, known_sessions)
        others = {covered[t] for t in episode.turn_ids if covered.get(t, episode.id) != episode.id}
        if others:
            raise InputError(
                f"its turns are already in the stored episode {', '.join(sorted(others))}: this "
                "file was written before they were built again (export again, or build instead)",
                record=f"episode {episode.id}",
            )
        covered |= dict.fromkeys(episode.turn_ids, episode.id)
        episode_session[episode.id] = episode.session
    _check_facts(memory, set(stored), episode_session)


def _check_facts(memory: MemoryFile, turns: set[str], episode_session: dict[str, int]) -> None:
    """A fact's turns are stored; it cites episodes (of the file or the store, none after its
    session) unless it has turns or is a correction by hand."""
    corrected = {c.fact for c in memory.corrections}
    for fact in memory.facts:
        unknown = [t for t in fact.turn_ids if t not in turns]
        if unknown:
            raise InputError(
                f"turn ids {', '.join(unknown[:5])} are not in the stored conversation "
                f"{memory.conversation!r}: ingest the conversation first (qemem ingest), "
                "then import its memory",
                record=f"fact {fact.id}",
            )
        if not fact.episode_ids:
            if fact.id not in corrected and not fact.turn_ids:
                raise InputError(
                    "cites no episode and no turn and is no correction by hand (a fact of the "
                    "file's corrections)",
                    record=f"fact {fact.id}",
                )
            continue
        missing = [e for e in fact.episode_ids if e not in episode_session]
        if missing:
            raise InputError(
                f"cites episodes {', '.join(missing)} that are neither in the file nor stored",
                record=f"fact {fact.id}",
            )
        if fact.session < min(episode_session[e] for e in fact.episode_ids):
            raise InputError(
                "session is earlier than every episode it was learned from",
                record=f"fact {fact.id}",
            )


def _check_episode(
    episode: Episode, conversation: str, stored: Mapping[str, tuple[int, Turn]], sessions: set[int]
) -> None:
    """An episode of a file cites ``stored`` turns (by id: position and turn), none redacted,
    of its stored session, in conversation order, with their kind of timestamp."""
    where = f"episode {episode.id}"
    unknown = [t for t in episode.turn_ids if t not in stored]
    if unknown:
        raise InputError(
            f"turn ids {', '.join(unknown[:5])} are not in the stored conversation "
            f"{conversation!r}: ingest the conversation first (qemem ingest), then import its "
            "memory",
            record=where,
        )
    order, cited = zip(*(stored[t] for t in episode.turn_ids), strict=True)
    if redacted := [t.id for t in cited if t.text == REDACTED]:
        raise InputError(
            f"turns {', '.join(redacted[:5])} were redacted after this file was written: its "
            "episode would bring their text back (export again, or build instead)",
            record=where,
        )
    if episode.session not in sessions:
        raise InputError(f"session {episode.session} is not stored", record=where)
    check_same_kind(episode.timestamp, cited[0].timestamp, record=where, field="timestamp")
    if any(t.session != episode.session for t in cited):
        raise InputError(
            f"every turn must belong to the episode's session {episode.session}", record=where
        )
    if list(order) != sorted(order):
        raise InputError("turn ids must be in conversation order", record=where)


def check_supersessions(
    memory: MemoryFile, turns: Sequence[Turn], stored_facts: Sequence[SemanticFact]
) -> None:
    """A correction's fact is in the file or the store and it cites stored turns; a
    supersession's facts are in the file or the store, it cites stored turns, and no fact
    replaces itself. Raises InputError naming the first offending record."""
    facts = {f.id for f in stored_facts} | {f.id for f in memory.facts}
    turn_ids = {t.id for t in turns}
    for fix in memory.corrections:
        unknown = [t for t in (*fix.turn_ids, *fix.corrected_turns) if t not in turn_ids]
        if fix.fact not in facts or unknown:
            why = (
                f"turn ids {', '.join(unknown[:5])} are not in the stored conversation"
                if unknown
                else "the fact is not in the file or the store"
            )
            raise InputError(why, record=f"correction of {fix.fact}")
    for item in memory.supersessions:
        where = f"supersession of {item.old}"
        missing = [i for i in (item.old, item.new) if i not in facts]
        if missing or item.old == item.new:
            why = f"facts {', '.join(missing)} are" if missing else "the new fact is"
            raise InputError(f"{why} not another fact of the file or the store", record=where)
        unknown = [t for t in item.turn_ids if t not in turn_ids]
        if unknown:
            raise InputError(
                f"turn ids {', '.join(unknown[:5])} are not in the stored conversation",
                record=where,
            )


def new_supersessions(memory: MemoryFile, stored: Sequence[Supersession]) -> list[Supersession]:
    """The file's supersessions the store lacks; a different one of a fact the store has
    one of raises StoreError before anything is written."""
    known = {s.old: s for s in stored}
    clashes = [s.old for s in memory.supersessions if s.old in known and known[s.old] != s]
    if clashes:
        raise StoreError(
            f"conversation {memory.conversation!r} already records other supersessions of "
            f"facts {', '.join(clashes[:5])}: import into another store, or delete those facts"
        )
    return [s for s in memory.supersessions if s.old not in known]


def new_corrections(memory: MemoryFile, stored: Sequence[Correction]) -> list[Correction]:
    """The file's corrections the store lacks; a different one of a fact the store has one
    of raises StoreError before anything is written."""
    known = {c.fact: c for c in stored}
    clashes = [c.fact for c in memory.corrections if c.fact in known and known[c.fact] != c]
    if clashes:
        raise StoreError(
            f"conversation {memory.conversation!r} already records other corrections of facts "
            f"{', '.join(clashes[:5])}: import into another store, or delete those facts"
        )
    return [c for c in memory.corrections if c.fact not in known]


def split_new(
    memory: MemoryFile, stored_episodes: Sequence[Episode], stored_facts: Sequence[SemanticFact]
) -> tuple[list[Episode], list[SemanticFact]]:
    """The file's episodes and facts the store lacks. A record stored under the same id must
    be identical (then it is skipped: importing twice changes nothing); a different one
    raises StoreError before anything is written."""
    episodes = {e.id: e for e in stored_episodes}
    facts = {f.id: f for f in stored_facts}
    new_episodes = [e for e in memory.episodes if e.id not in episodes]
    new_facts = [f for f in memory.facts if f.id not in facts]
    clashes = [e.id for e in memory.episodes if e.id in episodes and episodes[e.id] != e]
    clashes += [f.id for f in memory.facts if f.id in facts and facts[f.id] != f]
    if clashes:
        raise StoreError(
            f"conversation {memory.conversation!r} already holds different records under "
            f"ids {', '.join(clashes[:5])}: delete the conversation and ingest it again "
            "before importing this memory, or import it into another store"
        )
    return new_episodes, new_facts


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
