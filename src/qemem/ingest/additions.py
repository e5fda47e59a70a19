"""What an ingest adds: only sessions and turns the store lacks (idempotent, appending)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from qemem.errors import InputError
from qemem.models import (
    REDACTED,
    SESSION_COUNTER,
    Conversation,
    ConversationInput,
    Session,
    SessionInput,
    Turn,
    TurnInput,
    check_id,
    check_same_kind,
    check_text,
    highest_numbers,
)

MAX_MESSAGE_CHARS = 100_000
"""Longer messages are refused at ingest (split them). The bound is the build's, not search's
(passages make every part of a long message searchable): a message is never split between
episodes, so an episode's narrative and fact prompts show it whole, with up to three messages
before it as context; at 100,000 characters (about 25,000 tokens) the largest such prompt stays
near 100,000 tokens, inside the context window of every supported model. HTTP request bodies
are capped at 1 MB on their own."""


@dataclass
class Additions:
    """New sessions and turns of one conversation, ready to write in one transaction."""

    conversation: ConversationInput
    sessions: list[Session] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)


@dataclass
class IngestReport:
    """What an ingest did, per conversation id: sessions and turns added."""

    added: dict[str, tuple[int, int]] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: int = 0
    """Turns another writer stored while this ingest ran (not written twice)."""

    @property
    def turns_added(self) -> int:
        return sum(turns for _, turns in self.added.values())

    @property
    def sessions_added(self) -> int:
        return sum(sessions for sessions, _ in self.added.values())


def find_additions(
    conv: ConversationInput,
    existing: Conversation | None,
    existing_turns: list[Turn],
    counters: Mapping[str, int],
    file: str = "<input>",
) -> Additions:
    """Decide which sessions and turns of ``conv`` are new.

    A session whose key is stored keeps its index and date; its stored turns must match the
    input's first turns (speaker and text; a stored turn keeps its role), and any further
    turns are appended after the last stored one. Sessions must be in chronological order,
    new ones after every stored one. A new session gets the index it suggests when free and
    above the conversation's ``SESSION_COUNTER`` (the highest number of a removed session),
    else the next index above both. Turns without an id get ``D<session index>:<n>``, ``n``
    counted on from the conversation's id ``counters``
    (:meth:`~qemem.store.base.MemoryStore.counters`, empty for a new conversation) and from
    the ids of that form the input gives, so never an id the conversation had before, deleted
    or not.
    """
    _check_names(conv, file)
    additions = Additions(conv)
    stored = {s.key: s for s in existing.sessions} if existing else {}
    used = {s.index for s in stored.values()}
    by_session: dict[int, list[Turn]] = {}
    for turn in existing_turns:
        by_session.setdefault(turn.session, []).append(turn)
    known_ids = {t.id for t in existing_turns}
    last = _taken_numbers(conv, counters, known_ids)
    retired = counters.get(SESSION_COUNTER, 0)
    latest = max((s.date_time for s in stored.values()), default=None)
    first = existing.sessions[0].date_time if existing and existing.sessions else None
    previous: SessionInput | None = None
    for session in conv.sessions:
        where = f"conversation {conv.id}, session {session.key}"
        first = first or session.date_time
        check_same_kind(session.date_time, first, file=file, record=where, field="date")
        _check_order(session, previous, file, where)
        previous = session
        if session.key in stored:
            index = stored[session.key].index
            _check_stored_date(stored[session.key], session, file, where)
            old = by_session.get(index, [])
        else:
            _check_after_latest(session, latest, file, where)
            free = session.index not in used and session.index > retired
            index = session.index if free else max(*used, retired, 0) + 1
            used.add(index)
            additions.sessions.append(Session(index, session.date_time, session.key))
            old = []
        for position, message in enumerate(session.turns):
            where = f"conversation {conv.id}, session {session.key}, message {position + 1}"
            if position < len(old):
                _check_unchanged(old[position], message, file, where)
                continue
            _check_length(message, file, where)
            check_text(message.speaker, "speaker", file=file, record=where, field="speaker")
            check_text(message.text, "message", file=file, record=where, field="text")
            if message.id is not None:
                check_id(message.id, "message id", file=file, record=where, field="id")
            check_same_kind(message.timestamp, first, file=file, record=where, field="timestamp")
            tid = message.id or _next_id(last, f"D{index}:")
            if tid in known_ids:
                raise InputError(
                    f"turn id {tid!r} is already used in this conversation",
                    file=file,
                    record=where,
                    field="id",
                )
            known_ids.add(tid)
            place = (old[-1].position + 1 if old else 0) + position - len(old)
            additions.turns.append(_turn(message, tid, conv.id, index, place))
    return additions


def _turn(message: TurnInput, tid: str, conversation: str, session: int, position: int) -> Turn:
    """The turn a new message is stored as."""
    text, when = message.text, message.timestamp
    return Turn(tid, conversation, session, position, message.speaker, text, when, message.role)


def _taken_numbers(
    conv: ConversationInput, counters: Mapping[str, int], stored: Collection[str]
) -> dict[str, int]:
    """The highest number taken per id prefix: the conversation's counters (which count the
    ``stored`` ids), raised to the numbers of the other ids the input gives its messages."""
    last = dict(counters)
    given = (t.id for s in conv.sessions for t in s.turns if t.id and t.id not in stored)
    for prefix, number in highest_numbers(given).items():
        last[prefix] = max(last.get(prefix, 0), number)
    return last


def _next_id(last: dict[str, int], prefix: str) -> str:
    """The id ``<prefix><n>`` after the highest number ``last`` holds for ``prefix`` (which
    it then holds)."""
    last[prefix] = last.get(prefix, 0) + 1
    return f"{prefix}{last[prefix]}"


def _check_order(
    session: SessionInput, previous: SessionInput | None, file: str, where: str
) -> None:
    """Refuse a session dated before the session before it in the input."""
    if previous is not None and session.date_time < previous.date_time:
        raise InputError(
            f"session dates run backwards: {session.date_time.isoformat()} is before "
            f"{previous.date_time.isoformat()} of the session before it ({previous.key}); "
            "order the sessions by date",
            file=file,
            record=where,
            field="date",
        )


def _check_stored_date(stored: Session, session: SessionInput, file: str, where: str) -> None:
    """Refuse a stored session whose date the input changes."""
    # isoformat, not ==: equal instants with different offsets are different dates
    if stored.date_time.isoformat() != session.date_time.isoformat():
        raise InputError(
            f"conflicts with the stored session date {stored.date_time.isoformat()} (input: "
            f"{session.date_time.isoformat()}); stored sessions cannot change, so "
            "delete the conversation first to replace it",
            file=file,
            record=where,
            field="date",
        )


def _check_after_latest(
    session: SessionInput, latest: datetime | None, file: str, where: str
) -> None:
    """Refuse a new session dated before the latest stored one."""
    if latest is not None and session.date_time < latest:
        raise InputError(
            f"new session dated {session.date_time.isoformat()} is before the latest stored "
            f"session ({latest.isoformat()}); sessions can only be appended in date order (a "
            "session dated wrongly goes when its last message is deleted)",
            file=file,
            record=where,
            field="date",
        )


def _check_unchanged(old: Turn, message: TurnInput, file: str, where: str) -> None:
    """Refuse an input message that differs from the stored turn at its place (a redacted
    turn stays redacted)."""
    if old.speaker != message.speaker or old.text not in (message.text, REDACTED):
        changed = "speaker" if old.speaker != message.speaker else "text"
        raise InputError(
            f"conflicts with the stored turn {old.id} ({old.speaker}: {old.text[:60]!r}): its "
            f"{changed} differs; stored sessions can only grow, so delete the conversation "
            "first to replace it",
            file=file,
            record=where,
            field=changed,
        )


def _check_names(conv: ConversationInput, file: str) -> None:
    """Refuse a conversation id, speaker or session key no store can keep exactly, and a
    conversation id with ``/`` (:func:`~qemem.models.check_id`)."""
    record = f"conversation {conv.id.encode('utf-8', 'backslashreplace').decode()}"
    check_id(conv.id, "conversation id", file=file, record=record, field="conversation_id")
    for speaker in conv.speakers:
        check_text(speaker, "speaker", file=file, record=record, field="speaker")
    for session in conv.sessions:
        check_text(session.key, "session id", file=file, record=record, field="session_id")


def _check_length(message: TurnInput, file: str, where: str) -> None:
    """Refuse a message longer than ``MAX_MESSAGE_CHARS``."""
    if len(message.text) > MAX_MESSAGE_CHARS:
        raise InputError(
            f"message has {len(message.text)} characters, more than the "
            f"{MAX_MESSAGE_CHARS} allowed: split it into several messages",
            file=file,
            record=where,
            field="text",
        )
