"""The data model of qemem, in one place.

Three memory spaces are kept per conversation: original turns (U), episodic memories (E) and
semantic facts (S). Ids are stable and human readable: a message's own id (LoCoMo's such as
``D3:12``) is kept as it is; a message without one gets ``D<session>:<n>``; episodes are ``E<n>``
and facts ``S<n>``. The numbers come from per-conversation counters that nothing lowers, so an
id never names two records in one life of a conversation (:func:`highest_numbers`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import pydantic

from qemem.errors import InputError
from qemem.lexicon import day_phrase

Space = Literal["turn", "episode", "fact"]
Role = Literal["user", "assistant", "other"]
"""Who a message is from in a conversation with an assistant: the ``user`` the assistant
serves, the ``assistant``, or an ``other`` participant; a conversation between people (LoCoMo)
has none."""
ROLES: tuple[Role, ...] = get_args(Role)
FactKind = Literal["fact", "instruction", "preference"]
"""What a semantic fact is: a durable ``fact``, a standing ``instruction`` the user gave the
assistant ("always format code with syntax highlighting"), or a ``preference`` the user stated
("I prefer lightweight libraries")."""
FACT_KINDS: tuple[FactKind, ...] = get_args(FactKind)
STANDING_KINDS: tuple[FactKind, ...] = ("instruction", "preference")
"""The kinds of fact that stand until replaced: they apply to every later request."""

OMIT_NONE = pydantic.Field(exclude_if=lambda value: value is None)
"""Field metadata: the JSON form leaves the field out while it is None, so a field that only
results across conversations set keeps every single-conversation form byte for byte."""
OMIT_EMPTY = pydantic.Field(exclude_if=lambda value: not value)
"""Field metadata: the JSON form leaves the field out while it is empty."""
OMIT_PLAIN = pydantic.Field(exclude_if=lambda value: value == "fact")
"""Field metadata of a fact's kind: the JSON form leaves out the kind of a plain fact, so the
form of every fact of a conversation between people stays as it was."""
SPACES: tuple[Space, ...] = ("episode", "fact", "turn")

NUMBERED_ID = re.compile(r"(E|S|D(?:0|[1-9][0-9]*):)([1-9][0-9]{0,14})")
"""The ids qemem numbers (full match): a prefix (``E`` episodes, ``S`` facts, ``D<session>:``
messages), then a number without leading zeros of at most 15 digits (qemem never gives a
larger one, so larger ones need no counting)."""

SESSION_COUNTER = "session"
"""The id counter (beside those of the ``NUMBERED_ID`` prefixes, which it cannot be) holding
the highest number of a session that was removed (its last message deleted): new sessions are
numbered above it, so that a session number, and the ids ``D<session>:<n>`` of its messages,
never name two different things."""


def highest_numbers(ids: Iterable[str]) -> dict[str, int]:
    """The highest number of each prefix among the ``ids`` of a ``NUMBERED_ID`` form."""
    highest: dict[str, int] = {}
    for rid in ids:
        match = NUMBERED_ID.fullmatch(rid)
        if match:
            prefix, number = match[1], int(match[2])
            highest[prefix] = max(highest.get(prefix, 0), number)
    return highest


_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def check_text(
    value: str,
    what: str,
    *,
    file: str | None = None,
    record: str | None = None,
    field: str | None = None,
) -> str:
    """``value`` when both stores can keep it exactly, else InputError saying why.

    Refused: lone surrogates (not Unicode text: UTF-8 cannot encode them; they come from a file
    or an argument in another encoding) and control characters other than tab, newline and
    carriage return (PostgreSQL cannot store NUL, so neither store takes any of them). The
    message names the character by code point, never by echoing it.
    """
    found = _SURROGATE.search(value)
    if found:
        raise InputError(
            f"the {what} is not valid Unicode: a lone surrogate (U+{ord(found.group()):04X}) "
            f"at character {found.start() + 1}; check the encoding of the input",
            file=file,
            record=record,
            field=field,
        )
    found = _CONTROL.search(value)
    if found:
        raise InputError(
            f"the {what} holds the control character U+{ord(found.group()):04X} at character "
            f"{found.start() + 1}: remove it (tab, newline and carriage return are allowed)",
            file=file,
            record=record,
            field=field,
        )
    return value


def parse_role(
    value: object,
    *,
    file: str | None = None,
    record: str | None = None,
    field: str | None = "role",
) -> Role | None:
    """A message's ``role`` as given (None when absent), any case and surrounding space
    accepted; InputError naming the roles for anything else."""
    if value is None:
        return None
    text = " ".join(value.split()).lower() if isinstance(value, str) else None
    for role in ROLES:
        if text == role:
            return role
    shown = repr(value) if isinstance(value, str) else f"a {type(value).__name__}"
    raise InputError(
        f"'role' must be one of {', '.join(ROLES)} (or left out), not {shown}",
        file=file,
        record=record,
        field=field,
    )


ID_RULE = "ids may not contain '/'"
"""Why an id with ``/`` is refused: the HTTP API routes on the decoded path, where
``a/messages/b`` is ambiguous, and ids across conversations are written ``conversation/id``."""


def check_id(
    value: str,
    what: str,
    *,
    file: str | None = None,
    record: str | None = None,
    field: str | None = None,
) -> str:
    """``value`` when it can be a new id of a conversation or a record (message, episode,
    fact): text both stores keep exactly (:func:`check_text`) without ``/``, else InputError
    naming the rule. Ids stored before the rule stay addressable by the library and the CLI,
    so that they can be deleted."""
    check_text(value, what, file=file, record=record, field=field)
    if "/" in value:
        raise InputError(
            f"the {what} {value!r} contains '/': {ID_RULE}, as the HTTP API could not address "
            "it; use another character, e.g. '-'",
            file=file,
            record=record,
            field=field,
        )
    return value


NAME_BYTES, PATH_BYTES = 255, 4095
"""The longest file name and path (in bytes) the file system takes."""


def check_path(value: str | Path, what: str = "path") -> Path:
    """``value`` as a Path when the file system can take it as a name, else InputError saying
    why: a NUL character, a character the file system encoding cannot hold (a lone surrogate
    that does not stand for a byte), or a name or path too long."""
    text = str(value)
    if "\x00" in text:
        raise InputError(f"the {what} holds a NUL character (U+0000): no file has that name")
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError as exc:
        raise InputError(
            f"the {what} is not valid Unicode: a lone surrogate (U+{ord(text[exc.start]):04X}) "
            f"at character {exc.start + 1}; check the encoding of the input"
        ) from None
    if len(raw) > PATH_BYTES or any(len(part) > NAME_BYTES for part in raw.split(b"/")):
        raise InputError(
            f"the {what} is too long for a file path ({len(raw)} bytes; a name may have "
            f"{NAME_BYTES}, a path {PATH_BYTES}): check it"
        )
    return Path(text)


def has_offset(value: datetime) -> bool:
    """Whether a date-time carries a UTC offset (aware) rather than local time alone (naive)."""
    return value.utcoffset() is not None


def check_same_kind(
    value: datetime,
    reference: datetime,
    *,
    file: str | None = None,
    record: str | None = None,
    field: str | None = None,
) -> None:
    """Refuse ``value`` when it has a UTC offset and ``reference`` has none, or the reverse.

    Date-times of one conversation are ordered against each other, and a local time of unknown
    offset cannot be ordered against one with an offset, so a conversation's timestamps must
    all have an offset or all lack one.
    """
    if has_offset(value) == has_offset(reference):
        return
    which = "has a UTC offset" if has_offset(value) else "has no UTC offset"
    raise InputError(
        f"{value.isoformat()} {which}, unlike {reference.isoformat()} of the same conversation: "
        "give every timestamp of a conversation an offset (2024-03-14T19:15+05:30) or none",
        file=file,
        record=record,
        field=field,
    )


def format_datetime(value: datetime) -> str:
    """Render a date-time the way prompts and listings show it: ``8 May 2023, 13:56``.

    The local wall-clock time is shown; an aware date-time adds its offset
    (``8 May 2023, 01:00 UTC+05:30``).
    """
    shown = f"{day_phrase(value)}, {value:%H:%M}"
    offset = value.utcoffset()
    if offset is None:
        return shown
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    return f"{shown} UTC{sign}{hours:02d}:{rest:02d}"


@dataclass(frozen=True)
class Session:
    """One sitting of a conversation: its order, start date-time and the source's session key."""

    index: int
    date_time: datetime
    key: str = ""


Span = tuple[int, int]
"""A passage of a turn: the character range ``[start, end)`` of its text
(:mod:`qemem.passages`)."""


@dataclass(frozen=True)
class Turn:
    """One original message (space U). ``position`` orders turns inside their session;
    ``role`` says who it is from in a conversation with an assistant (None: not given)."""

    id: str
    conversation_id: str
    session: int
    position: int
    speaker: str
    text: str
    timestamp: datetime
    role: Annotated[Role | None, OMIT_NONE] = None

    @property
    def ref(self) -> str:
        """The id as shown to models and users."""
        return self.id

    def excerpt(self, span: Span | None) -> str:
        """The text of passage ``span`` (None: the whole text)."""
        return self.text if span is None else self.text[span[0] : span[1]]


@dataclass(frozen=True)
class Episode:
    """A topical segment of consecutive turns of one session (space E)."""

    id: str
    conversation_id: str
    session: int
    title: str
    content: str
    timestamp: datetime
    turn_ids: tuple[str, ...]


@dataclass(frozen=True)
class SemanticFact:
    """A durable, self-contained fact (space S), with the episodes it was learned from and
    the turns it was read from directly (``turn_ids``: a standing instruction or preference
    the ingest's rules found in one message); ``kind`` says what it is (see ``FactKind``)."""

    id: str
    conversation_id: str
    content: str
    session: int
    episode_ids: tuple[str, ...]
    kind: Annotated[FactKind, OMIT_PLAIN] = "fact"
    turn_ids: Annotated[tuple[str, ...], OMIT_EMPTY] = ()

    @property
    def standing(self) -> bool:
        """Whether the fact is a standing instruction or preference."""
        return self.kind in STANDING_KINDS


ITEM_COUNTER = "item"
"""The id counter of a conversation's history items (beside those of the ``NUMBERED_ID``
prefixes, which it cannot be): item ``I<n>`` gets the next number, never one an item had."""


@dataclass(frozen=True)
class Item:
    """One history item of an agent framework (an Agents SDK session item), kept exactly as
    it was sent: ``data`` (a JSON object), ``turn`` the message it was also stored as (a
    user's or assistant's text; None for a tool call and the like), ``created_at`` when it
    was stored (UTC). Items are ordered by id number (``I1``, ``I2``, ...)."""

    id: str
    data: dict[str, Any]
    turn: str | None
    created_at: datetime


REDACTED = "[message redacted]"
"""The text of a redacted turn: it keeps its id, speaker, time and place, nothing it said."""


def unredacted(turns: Iterable[Turn]) -> list[Turn]:
    """``turns`` without the redacted ones: what evidence may show (a redacted turn still
    counts among a conversation's turns, but it is never shown as evidence)."""
    return [t for t in turns if t.text != REDACTED]


def user_turns(turns: Iterable[Turn]) -> frozenset[str]:
    """The ids of the user's messages (role ``user``) among ``turns``."""
    return frozenset(t.id for t in turns if t.role == "user")


SupersessionKind = Literal["build", "manual"]


@dataclass(frozen=True)
class Supersession:
    """Fact ``new`` replaces fact ``old`` from conversation time ``at`` on: ``kind`` "build"
    when an episode's messages updated or contradicted it (``turn_ids``: the turns that show
    it, never empty), "manual" when corrected by hand (``turn_ids`` optional). ``recorded``
    is when it was stored (UTC). Both facts keep their provenance."""

    old: str
    new: str
    turn_ids: tuple[str, ...]
    at: datetime
    kind: SupersessionKind
    recorded: datetime


@dataclass(frozen=True)
class Correction:
    """Fact ``fact`` was written by hand (``correct_fact``); this is its provenance, kept
    whatever becomes of the fact it corrected. ``turn_ids``: the turns the user cited (none:
    its origin is the hand alone); ``corrected_turns``: the turns the corrected statement was
    learned from (a build deriving a statement near the correction from one of them sees it
    superseded by the correction); ``recorded``: when it was made (UTC). A forgotten turn
    leaves both lists."""

    fact: str
    turn_ids: tuple[str, ...]
    corrected_turns: tuple[str, ...]
    recorded: datetime


@dataclass(frozen=True)
class Conversation:
    """A conversation: its id, namespace (user/tenant), speakers and sessions. A stored one
    has ``created_at`` (UTC): when this life of it began. A conversation deleted and created
    again under its id is a new one, with a new ``created_at`` and ids counted from 1 again,
    so a reference kept with the time it was read can be told stale."""

    id: str
    speakers: tuple[str, ...]
    sessions: tuple[Session, ...] = ()
    namespace: str = "default"
    created_at: datetime | None = None

    @property
    def span(self) -> tuple[datetime, datetime] | None:
        """The first and last session date-times (None without sessions); with offsets,
        compared as instants (ingest keeps a conversation all aware or all naive)."""
        dates = [s.date_time for s in self.sessions]
        return (min(dates), max(dates)) if dates else None


@dataclass(frozen=True)
class TurnInput:
    """A parsed message before ingestion; ``id`` is None when the source has none, ``role``
    when it names none."""

    speaker: str
    text: str
    timestamp: datetime
    id: str | None = None
    role: Role | None = None


@dataclass
class SessionInput:
    """A parsed session: its source key, date-time, suggested index and turns in order."""

    key: str
    date_time: datetime
    index: int
    turns: list[TurnInput] = field(default_factory=list)


@dataclass
class ConversationInput:
    """A parsed conversation ready to ingest."""

    id: str
    speakers: list[str]
    sessions: list[SessionInput] = field(default_factory=list)
    namespace: str = "default"


@dataclass(frozen=True, order=True)
class Ref:
    """The identity of a record in the memory: its space and its id (``turn``, ``D3:12``),
    and its conversation when it comes from a result across conversations (record ids are
    unique only inside a conversation; None otherwise, and then left out of the JSON).

    A passage of a turn adds its ``span``: the character range of the turn's text it holds
    (None, and left out of the JSON, for a whole record).

    JSON writes it as an object (``{"space": "turn", "id": "D3:12"}``), never as a string."""

    space: Space
    id: str
    conversation: Annotated[str | None, OMIT_NONE] = None
    span: Annotated[Span | None, OMIT_NONE] = None


@dataclass(frozen=True)
class Hit:
    """One search result: a record id in a space, its fused score and per-method ranks."""

    space: Space
    id: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    span: Annotated[Span | None, OMIT_NONE] = None
    """The passage of a long turn that matched (None: the whole record)."""


PASSAGE_MARK = "\x1f"
"""Joins a turn id and a span into the key of one passage in a search index. No stored id
holds it (ids refuse control characters), so a key never equals a turn id."""


def passage_key(turn_id: str, span: Span | None) -> str:
    """The search-index key of passage ``span`` of a turn (the turn id itself for None)."""
    return turn_id if span is None else f"{turn_id}{PASSAGE_MARK}{span[0]}:{span[1]}"


def split_key(key: str) -> tuple[str, Span | None]:
    """The turn id and span of a search-index key of :func:`passage_key` (span None for a
    whole record)."""
    owner, mark, rest = key.rpartition(PASSAGE_MARK)
    if not mark:
        return key, None
    start, _, end = rest.partition(":")
    return owner, (int(start), int(end))


def fold_caption(text: str, caption: str | None) -> str:
    """Fold an image caption into a turn's text as ``[shares a photo: …]``."""
    text = text.strip()
    if not caption:
        return text
    folded = f"[shares a photo: {caption.strip()}]"
    return f"{text} {folded}" if text else folded


def search_text(record: Turn | Episode | SemanticFact, span: Span | None = None) -> str:
    """The text a record is searched by (embedded and BM25-indexed): a turn with its speaker
    (one passage of it with ``span``), an episode's title and narrative, a fact's content."""
    if isinstance(record, Turn):
        return f"{record.speaker}: {record.excerpt(span)}"
    if isinstance(record, Episode):
        return f"{record.title}. {record.content}"
    return record.content


AnswerType = Literal[
    "date", "duration", "count", "list", "yes_no", "entity", "description", "reason", "inference"
]


@dataclass(frozen=True)
class Plan:
    """The information requirement of a question (the planner's output, or its rule fallback).

    ``queries`` are the planned retrieval queries (without the question); ``source`` says
    whether an LLM produced the plan ("llm") or rules did ("rules"), and ``note`` why.
    """

    question: str
    need: str
    answer_type: AnswerType
    aggregate: bool
    temporal: bool
    queries: tuple[str, ...] = ()
    source: Literal["llm", "rules"] = "rules"
    note: str = ""

    @property
    def query_set(self) -> list[str]:
        """The question followed by the planned queries, de-duplicated (case-insensitive)."""
        seen: set[str] = set()
        out: list[str] = []
        for query in (self.question, *self.queries):
            key = " ".join(query.lower().split())
            if key and key not in seen:
                seen.add(key)
                out.append(query)
        return out


@dataclass(frozen=True)
class Reason:
    """Why a pool item is there: ranked by a (query, method) list, raised by provenance (an
    episode by a fact citing it; a turn exposed by the episode or fact ``via``), or brought in
    as context of another hit (``via``)."""

    kind: Literal["ranked", "provenance", "context"]
    query: int | None = None
    method: str | None = None
    rank: int | None = None
    via: str | None = None


@dataclass
class PoolItem:
    """A candidate in the evidence pool: the record, its fused score and why it is there."""

    space: Space
    record: Turn | Episode | SemanticFact
    score: float = 0.0
    reasons: list[Reason] = field(default_factory=list)
    position: int | None = None
    """The candidate's place in the pool's exposure order (turn hits, episodes and facts
    interleaved); None for turns that are only context of candidates."""
    conversation: Annotated[str | None, OMIT_NONE] = None
    """The record's conversation in a pool across conversations (None in one conversation's);
    ids the item holds (``reasons[].via``, the record's turn and episode ids) are its own
    conversation's."""
    passages: Annotated[list[Span] | None, OMIT_NONE] = None
    """The passages of a long turn the pool holds, in text order (None: the whole turn)."""

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def ref(self) -> Ref:
        return Ref(self.space, self.record.id, self.conversation)

    def entry(self) -> PoolEntry:
        """The item as the evidence record keeps it: no record, the turn ids it exposes (a
        turn itself, an episode its turns, a fact none)."""
        record = self.record
        exposes = [record.id] if isinstance(record, Turn) else []
        if isinstance(record, Episode):
            exposes = list(record.turn_ids)
        return PoolEntry(self.ref, self.position, self.score, list(self.reasons), exposes)


Unit = tuple[str, Span | None]
"""What a pool shows of a turn at once: the turn (its id), whole (None) or one passage."""


@dataclass(frozen=True)
class Exposure:
    """One candidate of a pool's exposure order (its space and id; a turn hit's id is its
    passage's key, :func:`passage_key`) and the units it newly exposes."""

    space: Space
    id: str
    units: tuple[Unit, ...]


@dataclass(frozen=True)
class PoolEntry:
    """One pool candidate in the evidence record: its ref, exposure position (None for a turn
    that is only context), fused score, why it was pooled, and the turn ids it exposes (of
    the ref's conversation, like ``reasons[].via``)."""

    ref: Ref
    position: int | None
    score: float
    reasons: list[Reason]
    exposes: list[str]


@dataclass
class Pool:
    """The candidate pool of one retrieval round: episodes and facts by score, turns in
    conversation order (hits with their context). A pool across conversations has
    ``conversation`` "" and ``conversations`` the ones it ranked together, in the order
    given (each item names its own)."""

    conversation: str
    queries: list[str]
    episodes: list[PoolItem] = field(default_factory=list)
    facts: list[PoolItem] = field(default_factory=list)
    turns: list[PoolItem] = field(default_factory=list)
    conversations: Annotated[list[str] | None, OMIT_NONE] = None
    order: Annotated[list[Exposure], pydantic.Field(exclude=True)] = field(
        default_factory=list, compare=False
    )
    """The exposure order the pool was cut from (candidate by candidate, the units each
    newly exposes); for analysis, not part of the JSON form (empty in a pool read back or
    merged) nor of a pool's equality."""

    def items(self) -> list[PoolItem]:
        return [*self.episodes, *self.facts, *self.turns]

    def refs(self) -> list[Ref]:
        """Every candidate's ref in pool order (episodes, facts, turns; of a long turn, the
        ref of each passage the pool holds)."""
        out: list[Ref] = []
        for item in self.items():
            if item.passages is None:
                out.append(item.ref)
            else:
                out += [Ref(item.space, item.id, item.conversation, span) for span in item.passages]
        return out

    def entries(self) -> list[PoolEntry]:
        """The candidates as record entries in pool order (episodes, facts, turns in
        conversation order); each entry's ``position`` gives the exposure order."""
        return [item.entry() for item in self.items()]

    def is_empty(self) -> bool:
        return not (self.episodes or self.facts or self.turns)
