"""What the framework adapters share: the memory of a user (a local ``Memory``, a remote
client, or one memory per user), reached from synchronous or asynchronous framework code
without blocking an event loop, and the messages a framework hands over as qemem records."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from qemem.errors import ConfigError, ConflictError, NotFoundError
from qemem.evidence.block import Context
from qemem.memory import MAX_CONVERSATIONS, Memory, MemoryAPI
from qemem.memory.api import CONTEXT_BUDGET
from qemem.models import Conversation
from qemem.remote import AsyncRemoteMemory

AnyMemory = MemoryAPI | AsyncRemoteMemory
"""A memory an adapter can use: embedded (``Memory``) or served (``RemoteMemory``,
``AsyncRemoteMemory``)."""

MemorySource = AnyMemory | Callable[[str], AnyMemory]
"""What an adapter is given: one memory, or a function from a user id to that user's memory."""

Role = Literal["user", "assistant"]


class Memories:
    """The memory of each user of a framework.

    Without a user id it is ``source`` itself (or ``source("default")`` for a function). With
    one, a function gives ``source(user)``; a local ``Memory`` gives a ``Memory`` of the
    namespace ``user`` over the same store, embedder and LLM (one per user, kept). A remote
    client serves the one namespace of its API key, so naming a user with one is refused:
    pass a function that opens the client of each user's key instead.
    """

    def __init__(self, source: MemorySource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._users: dict[str, Memory] = {}

    def of(self, user: str | None) -> AnyMemory:
        source = self.source
        if not isinstance(source, MemoryAPI | AsyncRemoteMemory):
            return source(user or "default")
        if user is None:
            return source
        if not isinstance(source, Memory):
            raise ConfigError(
                f"a user id ({user!r}) was given, but a remote client stores everything in the "
                "namespace of its API key: pass a function from a user id to that user's "
                "client (each with the key of the user's namespace), or leave the user id out"
            )
        with self._lock:
            if user not in self._users:
                self._users[user] = Memory(
                    source.store,
                    source.embedder,
                    llm=source.llm,
                    namespace=user,
                    idempotency_hours=source.idempotency_hours,
                    auto_build=source.auto_build,
                )
            return self._users[user]


def reach(memory: AnyMemory, call: Callable[[Any], Any]) -> Any:
    """``call(memory)`` from synchronous code; an asynchronous client is refused."""
    if isinstance(memory, AsyncRemoteMemory):
        raise ConfigError(
            "AsyncRemoteMemory is asynchronous: run the framework asynchronously (ainvoke, "
            "astream), or give it a RemoteMemory"
        )
    return call(memory)


async def areach(memory: AnyMemory, call: Callable[[Any], Any]) -> Any:
    """``call(memory)`` from asynchronous code: awaited for ``AsyncRemoteMemory``, in a worker
    thread for the others (whose calls block), so the event loop never waits on them."""
    if isinstance(memory, AsyncRemoteMemory):
        return await call(memory)
    return await asyncio.to_thread(call, memory)


def recent_conversations(known: Sequence[Conversation], current: str | None) -> list[str]:
    """The conversations a context block spans: ``current`` first when it is stored, then the
    others newest first, at most ``MAX_CONVERSATIONS``."""
    others = sorted(
        (c for c in known if c.id != current),
        key=lambda c: c.created_at or datetime.min.replace(tzinfo=UTC),
        reverse=True,
    )
    ids = [c.id for c in known if c.id == current] + [c.id for c in others]
    return ids[:MAX_CONVERSATIONS]


def message_record(
    text: str, role: Role, message_id: str | None, now: datetime | None = None
) -> dict[str, Any]:
    """A message as a generic-format record: the speaker named after its role, sent now (UTC,
    in the session of the day), under ``message_id`` (else an id made from its role and text,
    so that sending it again is a retry, not a second message)."""
    when = (now or datetime.now(UTC)).astimezone(UTC)
    digest = hashlib.sha256(f"{role}\n{text}".encode()).hexdigest()[:32]
    return {
        "id": message_id or f"{role}-{digest}",
        "session_id": when.date().isoformat(),
        "timestamp": when.isoformat(timespec="seconds"),
        "speaker": role,
        "role": role,
        "text": text,
    }


def append_all(memory: MemoryAPI, conversation: str, records: Sequence[dict[str, Any]]) -> int:
    """Append ``records`` (each with an id) to the conversation; when the batch holds a message
    stored earlier under its id with another text (a framework may edit a message in place),
    append the others one by one and keep the stored text. The number of turns added."""
    try:
        return memory.add_messages(conversation, records).turns_added
    except ConflictError:
        added = 0
        for record in records:
            try:
                added += memory.add_messages(conversation, [record]).turns_added
            except ConflictError:
                continue
        return added


async def aappend_all(
    memory: AnyMemory, conversation: str, records: Sequence[dict[str, Any]]
) -> int:
    """``append_all`` from asynchronous code (see ``areach``)."""
    if not isinstance(memory, AsyncRemoteMemory):
        added: int = await asyncio.to_thread(append_all, memory, conversation, records)
        return added
    try:
        return (await memory.add_messages(conversation, records)).turns_added
    except ConflictError:
        count = 0
        for record in records:
            try:
                count += (await memory.add_messages(conversation, [record])).turns_added
            except ConflictError:
                continue
        return count


CONTEXT_HEADER = (
    "Long-term memory: what the user's conversations hold on their latest message (cite a "
    "record by the id in its brackets)."
)
"""The line an adapter puts before the context block in front of a model call."""


class ContextReader:
    """qemem's cited context block for a question asked in a conversation (a framework's
    thread or session): across the user's conversations (the current one first, then the
    newest: at most ``MAX_CONVERSATIONS``) or, without ``across_threads``, the current one's
    alone; None when memory holds nothing for it yet."""

    def __init__(self, budget_tokens: int = CONTEXT_BUDGET, across_threads: bool = True) -> None:
        self.budget_tokens = budget_tokens
        self.across_threads = across_threads

    def text(self, memory: MemoryAPI, conversation: str, question: str) -> str | None:
        """The block's text, from a blocking memory."""
        if not self.across_threads:
            try:
                return _text(
                    memory.context(conversation, question, budget_tokens=self.budget_tokens)
                )
            except NotFoundError:
                return None
        spanned = recent_conversations(memory.conversations(), conversation)
        if not spanned:
            return None
        return _text(memory.context_many(spanned, question, budget_tokens=self.budget_tokens))

    async def atext(self, memory: AnyMemory, conversation: str, question: str) -> str | None:
        """The block's text from asynchronous code, never blocking the event loop."""
        if not isinstance(memory, AsyncRemoteMemory):
            text: str | None = await areach(memory, lambda m: self.text(m, conversation, question))
            return text
        budget = self.budget_tokens
        if not self.across_threads:
            try:
                return _text(await memory.context(conversation, question, budget_tokens=budget))
            except NotFoundError:
                return None
        spanned = recent_conversations(await memory.conversations(), conversation)
        if not spanned:
            return None
        return _text(await memory.context_many(spanned, question, budget_tokens=budget))


def _text(block: Context) -> str | None:
    return block.text if block.items else None
