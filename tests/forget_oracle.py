"""The in-memory oracle of the forget-and-correct state machine (``forget_machine``): what a
memory must hold after each operation, kept without the library.

Every message carries a marker word of its own (``zm`` and five letters), every correction one
(``zc``...), so "no record holds the text of a forgotten message" is a search for words. A
conversation lives from its creation to its delete; created again under its id it is a new
life, and the oracle keys everything it remembers by (conversation, life).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qemem.errors import ConflictError, InputError, QememError

MARKER = re.compile(r"z[mc][a-z]{5}", re.IGNORECASE)
TOPICS = (
    "hiking trips in the hills",
    "green tea with honey",
    "old jazz records",
    "the red bicycle",
    "pottery classes on Sunday",
    "night shifts at the bakery",
)
SPEAKERS = ("Ana", "Ben")
Record = dict[str, str]


def marker(kind: str, number: int) -> str:
    """The marker word ``z<kind>`` followed by ``number`` in five letters (a..z, little-endian)."""
    letters = []
    for _ in range(5):
        number, digit = divmod(number, 26)
        letters.append(chr(ord("a") + digit))
    return f"z{kind}{''.join(letters)}"


def message_text(word: str, topic: int, change: bool) -> str:
    """A message about one topic, saying it changed (the offline LLM then supersedes the known
    fact it shares words with) or not, led by its marker word."""
    if change:
        return f"{word} I no longer like {TOPICS[topic]} anymore."
    return f"{word} I really like {TOPICS[topic]}."


def session_number(key: str) -> int:
    """Session ``s<n>``'s number: sessions are dated by it, so a new one must not be lower."""
    return int(key[1:])


def timestamp(session: str, second: int) -> str:
    """Session ``s<n>`` happens on day ``n`` of 2024; ``second`` orders its messages."""
    minute, sec = divmod(second % 3600, 60)
    return f"2024-01-{session_number(session):02d}T10:{minute:02d}:{sec:02d}"


@dataclass
class Message:
    id: str
    session: str
    speaker: str
    text: str
    state: str = "live"
    """live, redacted or deleted."""

    @property
    def marker(self) -> str:
        return self.text.split()[0]


@dataclass
class Fix:
    """A correction by hand: the fact written (``fact``), the fact it corrected and that
    fact's statement (which must never be current again while the fix lives)."""

    fact: str
    corrected: str
    statement: str
    content: str
    live: bool = True
    again: set[str] = field(default_factory=set)
    """Later corrections of this correction (it is superseded by them while they live)."""

    @property
    def marker(self) -> str:
        found: list[str] = MARKER.findall(self.content)
        return found[-1]


@dataclass
class Life:
    conv: str
    number: int
    messages: dict[str, Message] = field(default_factory=dict)
    sessions: list[str] = field(default_factory=list)
    fixes: dict[str, Fix] = field(default_factory=dict)
    created_at: str | None = None

    def stored(self) -> list[Message]:
        return [m for m in self.messages.values() if m.state != "deleted"]

    def material(self) -> set[str]:
        """The ids of the messages a build may quote."""
        return {m.id for m in self.messages.values() if m.state == "live"}


@dataclass
class KeyRecord:
    conv: str
    life: int
    records: list[Record]
    ids: list[str]
    turns_added: int
    sessions_added: int


@dataclass
class Expected:
    """What an append must do: refuse (``error``), replay ``replay`` (ids, turns added,
    sessions added), or store ``new`` (indexes of the batch's new messages) and acknowledge
    the others (``retried``: index -> stored id)."""

    error: type[QememError] | None = None
    replay: tuple[list[str], int, int] | None = None
    new: list[int] = field(default_factory=list)
    retried: dict[int, str] = field(default_factory=dict)
    new_session: bool = False


class Oracle:
    """What the memory of one example must hold."""

    def __init__(self) -> None:
        self.lives: dict[str, Life] = {}
        self.ended: list[Life] = []
        self.keys: dict[str, KeyRecord] = {}
        self.seen: dict[tuple[str, int, str, str], object] = {}

    # ------------------------------------------------------------------ lives
    def life(self, conv: str) -> Life | None:
        return self.lives.get(conv)

    def begin(self, conv: str) -> Life:
        number = 1 + sum(1 for life in self.ended if life.conv == conv)
        self.lives[conv] = Life(conv, number)
        return self.lives[conv]

    def end(self, conv: str) -> None:
        """The conversation was deleted: its messages, fixes and key records go with it."""
        life = self.lives.pop(conv)
        for message in life.messages.values():
            message.state = "deleted"
        for fix in life.fixes.values():
            fix.live = False
        self.ended.append(life)
        self.keys = {k: r for k, r in self.keys.items() if r.conv != conv}

    def forgot(self, conv: str, mid: str, *, redact: bool) -> None:
        """Message ``mid`` was redacted or deleted; deleting a session's last message removes
        the session (a batch naming its key later starts a new session, dated after the
        latest)."""
        life = self.lives[conv]
        message = life.messages[mid]
        message.state = "redacted" if redact else "deleted"
        if not any(m.session == message.session for m in life.stored()):
            life.sessions.remove(message.session)

    def all_lives(self) -> list[Life]:
        return [*self.ended, *self.lives.values()]

    # ------------------------------------------------------------------ forgotten text
    def forbidden(self, *, fixes: bool = True) -> set[str]:
        """Marker words no record may hold: those of messages deleted or redacted (and not
        sent again since) and, with ``fixes``, of corrections deleted (the LLM cache keeps
        a deleted fact's exchanges, as documented: ``fixes=False`` for it)."""
        live: set[str] = set()
        gone: set[str] = set()
        for life in self.all_lives():
            for message in life.messages.values():
                (live if message.state == "live" else gone).add(message.marker.lower())
            if fixes:
                for fix in life.fixes.values():
                    (live if fix.live else gone).add(fix.marker.lower())
        return gone - live

    # ------------------------------------------------------------------ ids
    def note(self, conv: str, life: int, kind: str, rid: str, content: object) -> None:
        """Remember what ``rid`` names; AssertionError when it named something else before."""
        key = (conv, life, kind, rid)
        before = self.seen.setdefault(key, content)
        assert before == content, (
            f"{kind} {rid} of {conv} (life {life}) named {before!r}, now {content!r}"
        )

    def is_fresh(self, conv: str, life: int, kind: str, rid: str) -> bool:
        return (conv, life, kind, rid) not in self.seen

    # ------------------------------------------------------------------ appends
    def expect(self, conv: str, records: Sequence[Record], key: str | None) -> Expected:
        """What appending ``records`` (one session) to ``conv`` under ``key`` must do."""
        life = self.lives.get(conv)
        if key is not None and key in self.keys:
            return self._replayed(self.keys[key], conv, records)
        stored = life.messages if life else {}
        session = records[0]["session_id"]
        sessions = life.sessions if life else []
        expected = Expected(new_session=session not in sessions)
        latest = max(map(session_number, sessions), default=0)
        if expected.new_session and session_number(session) < latest:
            return Expected(error=InputError)
        for index, record in enumerate(records):
            old = stored.get(record.get("id", ""))
            if old is None or old.state == "deleted":
                expected.new.append(index)
            elif old.speaker != record["speaker"] or (
                old.state == "live" and old.text != record["text"]
            ):
                return Expected(error=ConflictError)
            else:
                expected.retried[index] = old.id
        return expected

    def _replayed(self, recorded: KeyRecord, conv: str, records: Sequence[Record]) -> Expected:
        if recorded.conv != conv or recorded.records != list(records):
            return Expected(error=InputError)
        life = self.lives[conv]
        if any(life.messages[i].state == "deleted" for i in recorded.ids):
            return Expected(error=ConflictError)
        return Expected(replay=(recorded.ids, recorded.turns_added, recorded.sessions_added))

    def appended(
        self,
        conv: str,
        records: Sequence[Record],
        key: str | None,
        expected: Expected,
        ids: Sequence[str],
        counts: tuple[int, int],
    ) -> None:
        """Record a new request's stored messages (``ids``: the acknowledged ids)."""
        life = self.lives.get(conv) or self.begin(conv)
        session = records[0]["session_id"]
        if expected.new_session:
            life.sessions.append(session)
        for index in expected.new:
            record = records[index]
            message = Message(ids[index], session, record["speaker"], record["text"])
            assert self.is_fresh(conv, life.number, "turn", message.id) or (
                "id" in record and record["id"] == message.id
            ), f"message id {message.id} of {conv} was given before, to another message"
            self.note(conv, life.number, "turn", message.id, (message.speaker, message.text))
            life.messages[message.id] = message
        if key is not None:
            self.keys[key] = KeyRecord(conv, life.number, list(records), list(ids), *counts)

    # ------------------------------------------------------------------ corrections
    def fixes_of(self, conv: str) -> list[Fix]:
        life = self.lives.get(conv)
        return [f for f in life.fixes.values() if f.live] if life else []

    def corrected(self, conv: str, old: str, new: str, statement: str, content: str) -> None:
        """``new`` corrects ``old`` (whose content is ``statement``) by hand."""
        life = self.lives[conv]
        if old in life.fixes:
            life.fixes[old].again.add(new)
        life.fixes[new] = Fix(new, old, statement, content)

    def fact_deleted(self, conv: str, fact: str) -> None:
        life = self.lives[conv]
        if fact in life.fixes:
            life.fixes[fact].live = False
        for fix in life.fixes.values():
            fix.again.discard(fact)

    def restored(self, conv: str, facts: Iterable[str], supersessions: Mapping[str, str]) -> None:
        """An import brought back the corrections ``facts`` (``supersessions``: what each
        corrects)."""
        life = self.lives[conv]
        for fact in facts:
            if fact in life.fixes:
                life.fixes[fact].live = True
            corrected = life.fixes.get(supersessions.get(fact, ""))
            if corrected is not None:
                corrected.again.add(fact)


def batch_records(
    words: Sequence[str],
    session: str,
    topics: Sequence[tuple[int, bool]],
    ids: Sequence[str] | None,
    clock: int,
) -> list[Record]:
    """One session's messages: ``words`` lead them, ``ids`` name them when given."""
    out: list[Record] = []
    for n, (word, (topic, change)) in enumerate(zip(words, topics, strict=True)):
        record = {
            "session_id": session,
            "timestamp": timestamp(session, clock + n),
            "speaker": SPEAKERS[(clock + n) % 2],
            "text": message_text(word, topic, change),
        }
        if ids is not None:
            record["id"] = ids[n]
        out.append(record)
    return out


def plain(records: Sequence[Mapping[str, Any]]) -> list[Record]:
    return [{k: str(v) for k, v in r.items()} for r in records]
