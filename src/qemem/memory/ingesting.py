"""``Memory.ingest``: add what the store lacks of a file or of parsed conversations.

The whole input is parsed and validated before anything is written; each conversation is then
written in one transaction, after a re-check inside it (so two ingests of one file never
collide). Ingesting the same input twice changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from qemem.errors import StoreError
from qemem.ingest.additions import Additions, IngestReport, find_additions
from qemem.ingest.reader import Format, read_conversations
from qemem.memory.api import Progress
from qemem.memory.appending import stored_conversation
from qemem.memory.standing import embed_standing, store_standing
from qemem.memory.turn_vectors import (
    EmbedTexts,
    TurnVectors,
    embed_turns,
    record_embedder,
    store_turn_vectors,
    text_count,
)
from qemem.models import ConversationInput
from qemem.store import MemoryStore, Scope

Added = Callable[[Scope, int], None]
"""Told of each conversation that got new turns (and how many), once they are stored."""


def ingest_conversations(
    store: MemoryStore,
    source: str | Path | Sequence[ConversationInput],
    fmt: Format,
    namespace: str,
    embed: EmbedTexts,
    embedder_id: str,
    progress: Progress | None = None,
    added: Added | None = None,
) -> IngestReport:
    """Ingest ``source`` into ``store`` (conversations without a namespace of their own go to
    ``namespace``); ``embed`` makes the vectors of search documents, those of the new turns,
    of the passages of the long ones (:mod:`qemem.memory.turn_vectors`) and of the standing
    instructions and preferences the user's new messages state, which are stored with them as
    facts (:mod:`qemem.memory.standing`); ``progress`` is called with (texts embedded, texts
    to embed: a turn is one text, a long one one per passage), ``added`` with each
    conversation that got new turns, after its transaction."""
    started = time.perf_counter()
    file = str(source) if isinstance(source, str | Path) else "<input>"
    conversations = (
        read_conversations(source, fmt) if isinstance(source, str | Path) else list(source)
    )
    pending = []
    for conv in conversations:
        scope = Scope(conv.id, conv.namespace if conv.namespace != "default" else namespace)
        existing = stored_conversation(store, scope)
        turns, counters = (store.turns(scope), store.counters(scope)) if existing else ([], {})
        pending.append((scope, find_additions(conv, existing, turns, counters, file)))
    total = sum(text_count(additions.turns) for _, additions in pending)
    done = 0
    report = IngestReport()
    for scope, additions in pending:
        offset = done

        def step(n: int, _total: int, offset: int = offset) -> None:
            if progress:
                progress(offset + n, total)

        done += text_count(additions.turns)
        vectors = embed_turns(embed, additions.turns, step)
        facts = record_embedder(embed)
        ahead = embed_standing(additions.turns, facts)
        with store.transaction():
            additions, vectors, skipped = _recheck(store, scope, additions, vectors, file)
            report.skipped += skipped
            store.put_conversation(scope, additions.conversation.speakers)
            if additions.sessions:
                store.add_sessions(scope, additions.sessions)
            if additions.turns:
                store_turn_vectors(store, scope, additions.turns, vectors, embedder_id)
                store_standing(store, scope, additions.turns, ahead, facts, embedder_id)
        if added and additions.turns:
            added(scope, len(additions.turns))
        report.added[scope.conversation] = (len(additions.sessions), len(additions.turns))
    report.seconds = time.perf_counter() - started
    return report


def check_ingest(conversations: Sequence[ConversationInput], file: str = "<input>") -> None:
    """Every check an ingest makes of ``conversations`` on their own (as into a store that
    holds none of them), raising the InputError it would: run before a store is created, a
    refused input creates none."""
    for conv in conversations:
        find_additions(conv, None, [], {}, file)


def _recheck(
    store: MemoryStore, scope: Scope, additions: Additions, vectors: list[TurnVectors], file: str
) -> tuple[Additions, list[TurnVectors], int]:
    """Inside the write transaction: drop what another writer stored since ``additions``
    were found; returns the additions, their vectors and how many turns were dropped."""
    existing = stored_conversation(store, scope)
    turns, counters = (store.turns(scope), store.counters(scope)) if existing else ([], {})
    fresh = find_additions(additions.conversation, existing, turns, counters, file)
    rows = {t.id: n for n, t in enumerate(additions.turns)}
    if any(rows.get(t.id) is None or additions.turns[rows[t.id]] != t for t in fresh.turns):
        raise StoreError(
            f"another writer changed conversation {scope} while this ingest ran: "
            "run the command again (it adds only what is missing)"
        )
    keep = [rows[t.id] for t in fresh.turns]
    return fresh, [vectors[n] for n in keep], len(additions.turns) - len(keep)
