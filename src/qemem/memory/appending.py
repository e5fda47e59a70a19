"""The two steps of ``add_messages`` that are about ids rather than storage: placing messages
after the stored turns of their sessions, and giving each message its stored id back."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from qemem.errors import ConflictError
from qemem.models import Conversation, ConversationInput, Turn, TurnInput


def after_stored_turns(
    conv: ConversationInput, existing: Conversation | None, stored: Sequence[Turn]
) -> list[tuple[str, int]]:
    """Rewrite each input session of ``conv`` as its stored turns followed by the messages not
    stored yet (a stored session keeps its stored date); returns (session key, new messages)
    per session, in input order.

    A message whose id is stored with the same speaker and text is a retry and is dropped; with
    other content it raises ``ConflictError``.
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
            elif (old.speaker, old.text) != (message.speaker, message.text):
                raise ConflictError(
                    f"message {message.id!r} conflicts with the stored turn "
                    f"({old.speaker}: {old.text[:60]!r}); stored turns never change, "
                    "so send it under a new id"
                )
        session.turns = [TurnInput(t.speaker, t.text, t.timestamp, t.id) for t in prior] + fresh
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
