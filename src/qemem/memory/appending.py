"""``add_messages``: one write transaction that places messages after the stored turns of
their sessions, stores the new ones, gives each message its stored id back and, for a batch
sent with an idempotency key, records the response (a retry with the key gets it again)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from qemem.errors import ConfigError, ConflictError, InputError, NotFoundError, QememError
from qemem.ingest.additions import Additions, find_additions
from qemem.ingest.generic import parse_generic
from qemem.memory.api import IDEMPOTENCY_HEADER, Appended, check_idempotency_key
from qemem.memory.standing import embed_standing, store_standing
from qemem.memory.turn_vectors import (
    EmbedTexts,
    TurnVectors,
    embed_turns,
    record_embedder,
    store_turn_vectors,
)
from qemem.models import REDACTED, Conversation, ConversationInput, Turn, TurnInput, search_text
from qemem.store import MemoryStore, Scope

IDEMPOTENCY_HOURS = 24.0
"""How long an idempotency key's response is kept (and replayed) by default."""


def append_messages(
    store: MemoryStore,
    scope: Scope,
    messages: Sequence[Mapping[str, Any]],
    embed: EmbedTexts,
    embedder: str,
    *,
    key: str | None = None,
    retention: timedelta = timedelta(hours=IDEMPOTENCY_HOURS),
) -> Appended:
    """Append generic-format ``messages`` to the scope's conversation in one transaction
    (``embed`` gives the vectors of search documents, made by ``embedder``: those of the new
    turns and of the passages of the long ones), with the standing
    instructions and preferences the user's new messages state (:mod:`qemem.memory.standing`).
    With ``key``, a batch already appended under it less than ``retention`` ago is not
    appended again: its recorded response is returned; the key with another body is an
    InputError."""
    if key is not None:
        check_idempotency_key(key)
    records = [
        {**{k: v for k, v in m.items() if k != "namespace"}, "conversation_id": scope.conversation}
        for m in messages
    ]
    if not records:
        return Appended()
    parse_generic(records, "<messages>")  # refuse a bad batch before anything else
    digest = _fingerprint(scope.conversation, records)
    ahead = _embed_ahead(store, scope, records, embed)
    with store.transaction():
        if key is not None:
            replayed = _replay(store, scope, key, digest, retention)
            if replayed is not None:
                return replayed
        done = _append(store, scope, records, embed, embedder, ahead)
        if key is not None:
            response = json.dumps(asdict(done))
            store.record_response(scope, key, digest, response, retention)
    return done


def _fingerprint(conversation: str, records: Sequence[Mapping[str, Any]]) -> str:
    """The SHA-256 of a request: its conversation and messages as canonical JSON."""
    body = {"conversation": conversation, "messages": list(records)}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _replay(
    store: MemoryStore, scope: Scope, key: str, digest: str, retention: timedelta
) -> Appended | None:
    """The response recorded under ``key`` for this very request; None when there is none
    (a record goes with its conversation). ConflictError when a message it acknowledged was
    deleted since: a replay never acknowledges what is not stored."""
    recorded = store.recorded_response(scope.namespace, key, retention)
    if recorded is None:
        return None
    if recorded[0] != digest:
        hours = retention.total_seconds() / 3600
        raise InputError(
            f"{IDEMPOTENCY_HEADER} {key!r} was already used for a different request (other "
            f"conversation or messages) in the last {hours:g} hours: send a new key with a new "
            "batch, and the same body with the same key only to retry it"
        )
    data = json.loads(recorded[1])
    ids = [str(i) for i in data["ids"]]
    exists = stored_conversation(store, scope) is not None  # a record of an older store
    stored = {t.id for t in store.turns_of(scope, ids=ids)} if exists else set()
    gone = sorted(set(ids) - stored)
    if gone:
        raise ConflictError(
            f"{IDEMPOTENCY_HEADER} {key!r} was used for this batch, but its messages "
            f"{', '.join(gone[:5])} were deleted since: it is not stored any more. Send it "
            "with a new key to store it again"
        )
    return Appended(ids, int(data["turns_added"]), int(data["sessions_added"]))


@dataclass
class _Plan:
    """What appending a batch would store, planned from the turns it concerns."""

    conv: ConversationInput
    stored: list[Turn]
    counts: list[tuple[str, int]]
    additions: Additions


def _plan(store: MemoryStore, scope: Scope, records: Sequence[Mapping[str, Any]]) -> _Plan:
    """Plan the batch against the stored turns it concerns only: its sessions' turns and the
    turns under its message ids (not the whole conversation), so the cost of an append does
    not grow with the conversation. New ids are checked against every stored turn."""
    [conv] = parse_generic(records, "<messages>")
    existing = stored_conversation(store, scope)
    stored: list[Turn] = []
    counters: dict[str, int] = {}
    if existing is not None:
        keys = {s.key for s in conv.sessions}
        sessions = [s.index for s in existing.sessions if s.key in keys]
        ids = [t.id for s in conv.sessions for t in s.turns if t.id is not None]
        stored = store.turns_of(scope, sessions=sessions, ids=ids)
        counters = store.counters(scope)  # numbered ids and new sessions' numbers
    counts = after_stored_turns(conv, existing, stored)
    additions = find_additions(conv, existing, stored, counters, "<messages>")
    if existing is not None and additions.turns:
        taken = store.turns_of(scope, ids=[t.id for t in additions.turns])
        if taken:
            raise InputError(
                f"turn id {taken[0].id!r} is already used in this conversation",
                file="<messages>",
                field="id",
            )
    return _Plan(conv, stored, counts, additions)


@dataclass
class _Ahead:
    """Vectors embedded before the write transaction, by search text: of the turns a batch
    would add (with their passages'), and of the standing facts they state."""

    turns: dict[str, TurnVectors] = field(default_factory=dict)
    facts: dict[str, np.ndarray] = field(default_factory=dict)


def _embed_ahead(
    store: MemoryStore, scope: Scope, records: Sequence[Mapping[str, Any]], embed: EmbedTexts
) -> _Ahead:
    """Vectors of the turns the batch would add (and of their passages) and of the standing
    facts they state, by search text, embedded before the write transaction so that no
    writer waits for the embedder. Planned from an unlocked read: what another writer changes
    meanwhile is planned again inside the transaction (a record not embedded here is embedded
    there), and a batch this read would refuse is refused there."""
    try:
        turns = _plan(store, scope, records).additions.turns
    except QememError:
        return _Ahead()
    if not turns:
        return _Ahead()
    vectors = embed_turns(embed, turns)
    return _Ahead(
        dict(zip(map(search_text, turns), vectors, strict=True)),
        embed_standing(turns, record_embedder(embed)),
    )


def _turn_vectors(
    turns: Sequence[Turn], ahead: Mapping[str, TurnVectors], embed: EmbedTexts
) -> list[TurnVectors]:
    """The vectors of ``turns``: those embedded ahead, the other turns' embedded now."""
    missing = [t for t in turns if search_text(t) not in ahead]
    fresh = (
        dict(zip(map(search_text, missing), embed_turns(embed, missing), strict=True))
        if missing
        else {}
    )
    return [ahead[text] if text in ahead else fresh[text] for text in map(search_text, turns)]


def _append(
    store: MemoryStore,
    scope: Scope,
    records: Sequence[Mapping[str, Any]],
    embed: EmbedTexts,
    embedder: str,
    ahead: _Ahead,
) -> Appended:
    """Store what is new of the batch and the standing facts it states (inside the caller's
    transaction; ``ahead`` the vectors embedded before it), planned under the conversation's
    write lock so that concurrent appends take turns on every backend."""
    store.lock_scope(scope)
    plan = _plan(store, scope, records)
    additions = plan.additions
    vectors = _turn_vectors(additions.turns, ahead.turns, embed)
    store.put_conversation(scope, additions.conversation.speakers)
    if additions.sessions:
        store.add_sessions(scope, additions.sessions)
    if additions.turns:
        store_turn_vectors(store, scope, additions.turns, vectors, embedder)
        facts = record_embedder(embed)
        store_standing(store, scope, additions.turns, ahead.facts, facts, embedder)
    ids = message_ids(records, {t.id for t in plan.stored}, additions.turns, plan.counts)
    return Appended(ids, len(additions.turns), len(additions.sessions))


def stored_conversation(store: MemoryStore, scope: Scope) -> Conversation | None:
    """The scope's stored conversation, or None."""
    try:
        return store.get_conversation(scope)
    except NotFoundError:
        return None


def after_stored_turns(
    conv: ConversationInput, existing: Conversation | None, stored: Sequence[Turn]
) -> list[tuple[str, int]]:
    """Rewrite each input session of ``conv`` as its stored turns followed by the messages not
    stored yet (a stored session keeps its stored date); returns (session key, new messages)
    per session, in input order.

    A message whose id is stored with the same speaker and text (or redacted) is a retry and is
    dropped; with other content it raises ``ConflictError``.
    """
    by_id = {t.id: t for t in stored}
    keys = {s.key: s.index for s in existing.sessions} if existing else {}
    dates = {s.key: s.date_time for s in existing.sessions} if existing else {}
    counts: list[tuple[str, int]] = []
    for session in conv.sessions:
        session.date_time = dates.get(session.key, session.date_time)
        prior = [t for t in stored if t.session == keys.get(session.key, -1)]
        fresh: list[TurnInput] = []
        for message in session.turns:
            old = by_id.get(message.id or "")
            if old is None:
                fresh.append(message)
            elif old.speaker != message.speaker or old.text not in (message.text, REDACTED):
                raise ConflictError(
                    f"message {message.id!r} conflicts with the stored turn "
                    f"({old.speaker}: {old.text[:60]!r}); stored turns never change, "
                    "so send it under a new id"
                )
        session.turns = [
            TurnInput(t.speaker, t.text, t.timestamp, t.id, t.role) for t in prior
        ] + fresh
        counts.append((session.key, len(fresh)))
    return counts


def message_ids(
    records: Sequence[Mapping[str, Any]],
    stored_ids: Collection[str],
    added: Sequence[Turn],
    counts: Sequence[tuple[str, int]],
) -> list[str]:
    """The stored id of every input message, in input order: a retried message keeps its id,
    a new one gets the id its turn was stored under (``added`` holds the new turns session by
    session, in the order of ``counts``)."""
    new: dict[str, list[str]] = {}
    start = 0
    for key, count in counts:
        new[key] = [t.id for t in added[start : start + count]][::-1]
        start += count
    return [m["id"] if m.get("id") in stored_ids else new[m["session_id"]].pop() for m in records]


def check_retention(hours: float) -> float:
    """``hours`` when it is a usable idempotency-key retention, else ConfigError saying why."""
    if not hours > 0:
        raise ConfigError(
            f"idempotency_hours must be more than 0 (got {hours}): it is how long a retried "
            "batch's Idempotency-Key is remembered"
        )
    return hours
