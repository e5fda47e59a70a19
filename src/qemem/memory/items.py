"""The history items of agent frameworks through ``Memory``: an Agents SDK session's items
(messages, tool calls, tool outputs, reasoning) kept exactly as the framework sent them, in
order, per conversation, while the items that are a user's or an assistant's text are also
stored as the conversation's messages, so the agent's history is memory (search, context,
ask and build see those messages; tool calls stay items, never evidence).

Appending items and their messages is one transaction. Popping the last item also forgets the
message it was stored as (as ``delete_message`` does); clearing the items leaves the messages.
Deleting or redacting a message removes the items stored as it; deleting the conversation
removes them all. Item ids (``I<n>``) are never given twice in a life of the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

import numpy as np

from qemem.embed.base import Embedder
from qemem.errors import InputError
from qemem.ingest.additions import MAX_MESSAGE_CHARS
from qemem.locks import writer_lock
from qemem.memory.appending import append_messages
from qemem.models import Item
from qemem.store import MemoryStore, Scope

__all__ = [
    "MAX_ITEMS",
    "MAX_ITEM_CHARS",
    "MAX_ITEM_LIMIT",
    "MAX_MESSAGE_CHARS",
    "MemoryItems",
    "item_json",
]

MAX_ITEMS = 1000
"""The most items one call may append."""
MAX_ITEM_CHARS = 1_000_000
"""The longest item (its JSON text) that is kept."""


class _Host(Protocol):
    """What of ``Memory`` these methods use."""

    store: MemoryStore
    namespace: str
    idempotency_hours: float

    def scope(self, conversation: str) -> Scope: ...

    def _embed_texts(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray: ...

    def _appended(
        self, conversation: str, turns_added: int, namespace: str | None = None
    ) -> None: ...

    def _forget_cached(self, conversation: str) -> None: ...

    @property
    def embedder(self) -> Embedder: ...


def item_json(item: Any, index: int) -> str:
    """The JSON text an item is kept as (its keys in their order, control characters escaped,
    so it reads back equal), else InputError saying why: an item is a JSON object of at most
    MAX_ITEM_CHARS characters, of Unicode text (no lone surrogate)."""
    if not isinstance(item, Mapping):
        raise InputError(f"item {index} is a {type(item).__name__}: an item is a JSON object")
    try:
        text = json.dumps(dict(item), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            f"item {index} holds text that is not Unicode (a lone surrogate): send it as UTF-8"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InputError(f"item {index} is not plain JSON ({exc}): send it as JSON") from None
    if len(text) > MAX_ITEM_CHARS:
        raise InputError(
            f"item {index} has {len(text)} characters of JSON, more than the {MAX_ITEM_CHARS} "
            "kept: shorten its text or its tool output"
        )
    return text


MAX_ITEM_LIMIT = 2**62
"""Larger limits read as this one (more items than any conversation holds)."""


def check_item_limit(limit: int | None) -> int | None:
    """``limit`` when it is None or a whole number from 0 (at most ``MAX_ITEM_LIMIT``), else
    InputError."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InputError(f"limit must be a whole number from 0 (got {limit!r}) or left out")
    return limit if limit is None else min(limit, MAX_ITEM_LIMIT)


class MemoryItems:
    """The history-item methods of ``Memory``."""

    def add_items(
        self: _Host,
        conversation: str,
        items: Sequence[Mapping[str, Any]],
        *,
        messages: Sequence[Mapping[str, Any] | None] = (),
    ) -> list[Item]:
        """Append history items to a conversation (creating it), each kept exactly as given
        (a JSON object); ``messages``, row-aligned with ``items`` when given, holds for each
        item the generic-format message it is also stored as (as ``add_messages`` takes it:
        session_id, timestamp, speaker, text, role) or None (a tool call, say). The items and
        their messages are appended in one transaction, all or nothing; returns the stored
        items in order, each naming its message's turn id. Not retry-safe: a call sent again
        appends its items again."""
        if len(items) > MAX_ITEMS:
            raise InputError(f"{len(items)} items in one call, more than {MAX_ITEMS}: split it")
        if messages and len(messages) != len(items):
            raise InputError(
                f"{len(messages)} messages for {len(items)} items: give one per item (null for "
                "an item that is no message), or none"
            )
        texts = [item_json(item, n) for n, item in enumerate(items)]
        if not texts:
            return []
        said = [(n, m) for n, m in enumerate(messages) if m is not None]
        scope = self.scope(conversation)
        with self.store.transaction():
            done = append_messages(
                self.store,
                scope,
                [m for _, m in said],
                self._embed_texts,
                self.embedder.id,
                retention=timedelta(hours=self.idempotency_hours),
            )
            turns: dict[int, str] = {n: tid for (n, _), tid in zip(said, done.ids, strict=True)}
            if not said:
                self.store.put_conversation(scope, [])
            stored = self.store.add_items(scope, [(t, turns.get(n)) for n, t in enumerate(texts)])
        self._appended(conversation, done.turns_added)
        return stored

    def items(self: _Host, conversation: str, limit: int | None = None) -> list[Item]:
        """The conversation's items in order; with ``limit``, its last ``limit`` items
        (NotFoundError when the conversation is absent)."""
        return self.store.items(self.scope(conversation), check_item_limit(limit))

    def pop_item(self: _Host, conversation: str) -> Item | None:
        """Remove and return the conversation's last item (None when it has none); the
        message it was stored as is deleted with it, with what was derived from it (as
        ``delete_message``)."""
        scope = self.scope(conversation)
        last = self.store.items(scope, 1)
        if not last:
            return None
        if last[0].turn is None:
            with self.store.transaction():
                self.store.lock_scope(scope)
                last = self.store.items(scope, 1)
                if last and last[0].turn is None:
                    self.store.delete_items(scope, [last[0].id])
                    return last[0]
        with writer_lock(self.store, scope, "build"), self.store.transaction():
            self.store.lock_scope(scope)
            last = self.store.items(scope, 1)
            if not last:
                return None
            turn = last[0].turn
            if turn is not None and self.store.turns_of(scope, ids=[turn]):
                self.store.forget_turn(scope, turn)
            self.store.delete_items(scope, [last[0].id])
        if turn is not None:
            self._forget_cached(conversation)
        return last[0]

    def clear_items(self: _Host, conversation: str) -> int:
        """Remove every item of the conversation; how many went. The messages they were
        stored as stay (delete them one by one, or delete the conversation, to forget them);
        item ids stay counted."""
        return self.store.delete_items(self.scope(conversation))
