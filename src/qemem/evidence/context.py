"""Looking up cited memories and formatting memories for prompts.

``SourceIndex`` loads one conversation's records once and answers: which record does an id
name, what is its session date, which turns surround a turn. ``format_memories`` renders
episodes, then semantic facts, then turns, each grouped by session in time order under one
session date header, every record with its id (the layout every prompt of the query-time
method uses).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from qemem.evidence.times import ANNOTATION, annotate_times, resolve_times
from qemem.lexicon import WEEKDAYS
from qemem.models import (
    Conversation,
    Episode,
    Pool,
    PoolItem,
    SemanticFact,
    Space,
    Span,
    Turn,
    format_datetime,
    unredacted,
)
from qemem.participants import Participants
from qemem.passages import Units, excerpt
from qemem.prompts import as_data, as_lines
from qemem.store.base import MemoryStore, Scope

Record = Turn | Episode | SemanticFact

_ID_DECORATION = re.compile(r"^(?:turn|episode|fact)\s*:\s*", re.IGNORECASE)


def clean_id(raw: str) -> str:
    """A cited id without the decoration models add: brackets, quotes, ``turn:`` prefixes."""
    text = raw.strip().strip("[]()<>\"'`*. ")
    return _ID_DECORATION.sub("", text).strip()


def show_date(value: datetime) -> str:
    """A session date as prompts show it: ``Thursday, 14 March 2024, 19:15``."""
    return f"{WEEKDAYS[value.weekday()]}, {format_datetime(value)}"


@dataclass(frozen=True)
class FoundRecord:
    """A record found by id, with its space."""

    space: Space
    record: Record


class SourceIndex:
    """Every record of one conversation, by id, with session dates (loaded once)."""

    def __init__(self, store: MemoryStore, scope: Scope) -> None:
        self._load(
            store.get_conversation(scope),
            store.turns(scope),
            store.episodes(scope),
            store.facts(scope),
            {s.old for s in store.supersessions(scope)},
            store.passages(scope),
        )

    def _load(
        self,
        conversation: Conversation,
        turns: list[Turn],
        episodes: list[Episode],
        facts: list[SemanticFact],
        superseded: set[str],
        passages: Mapping[str, Sequence[Span]],
    ) -> None:
        """Index the records (``turns`` in conversation order; ids unique; ``superseded``
        the ids of the facts a supersession replaces) and the passages of the long turns
        (turn id -> spans). Redacted turns are left out: they are never evidence, nor shown
        around it."""
        self.conversation = conversation
        self.turns = unredacted(turns)
        self.episodes = episodes
        self.facts = facts
        self.superseded = superseded
        self.participants = Participants.of(conversation.speakers, turns)
        self.passages = {t: list(spans) for t, spans in passages.items()}
        self.units = Units(self.turns, self.passages)
        self._by_id: dict[str, FoundRecord] = {f.id: FoundRecord("fact", f) for f in self.facts}
        self._by_id.update((e.id, FoundRecord("episode", e)) for e in self.episodes)
        self._by_id.update((t.id, FoundRecord("turn", t)) for t in self.turns)
        self._dates = {s.index: s.date_time for s in self.conversation.sessions}
        self._order = {t.id: n for n, t in enumerate(self.turns)}
        self._by_session: dict[int, list[Turn]] = {}
        for turn in self.turns:
            self._by_session.setdefault(turn.session, []).append(turn)

    def get(self, raw_id: str) -> FoundRecord | None:
        """The record an id (possibly decorated, see ``clean_id``) names; None if none does."""
        return self._by_id.get(raw_id.strip()) or self._by_id.get(clean_id(raw_id))

    def session_title(self, record: Record) -> str:
        """How a session header names the record's session: ``Session 3``."""
        return f"Session {record.session}"

    def session_date(self, record: Record) -> datetime:
        """The date-time of the session the record belongs to."""
        fallback = record.timestamp if isinstance(record, Turn | Episode) else None
        date = self._dates.get(record.session, fallback)
        if date is None:  # a fact of a session the conversation does not list
            return min(self._dates.values(), default=datetime(1970, 1, 1))
        return date

    def neighbours(self, turn: Turn, width: int) -> list[Turn]:
        """The turn with up to ``width`` turns on each side in its session."""
        session = self._by_session.get(turn.session, [turn])
        at = next((n for n, t in enumerate(session) if t.id == turn.id), 0)
        return session[max(0, at - width) : at + width + 1]

    def episode_turns(self, episode: Episode, limit: int) -> list[Turn]:
        """The first ``limit`` known turns an episode covers."""
        found = [self._by_id.get(tid) for tid in episode.turn_ids[:limit]]
        return [f.record for f in found if f is not None and isinstance(f.record, Turn)]

    def turns_of(self, located: FoundRecord) -> list[Turn]:
        """The original turns behind a record: itself, an episode's turns, a fact's own turns
        (``turn_ids``) and its episodes'."""
        record = located.record
        if isinstance(record, Turn):
            return [record]
        if isinstance(record, Episode):
            return self.episode_turns(record, len(record.turn_ids))
        out: list[Turn] = []
        for tid in record.turn_ids:
            found = self._by_id.get(tid)
            if found is not None and isinstance(found.record, Turn):
                out.append(found.record)
        for eid in record.episode_ids:
            found = self._by_id.get(eid)
            if found is not None and isinstance(found.record, Episode):
                out.extend(self.episode_turns(found.record, len(found.record.turn_ids)))
        return out

    def in_order(self, turns: Iterable[Turn]) -> list[Turn]:
        """Distinct turns in conversation order."""
        unique = {t.id: t for t in turns}
        return sorted(unique.values(), key=lambda t: self._order.get(t.id, len(self._order)))


def format_memories(
    index: SourceIndex,
    episodes: Sequence[Episode],
    facts: Sequence[SemanticFact],
    turns: Sequence[Turn],
    *,
    marked: Iterable[str] = (),
    shown: Iterable[str] = (),
    narratives: bool = False,
    annotate: bool = False,
    above: Iterable[str] = (),
    passages: Mapping[str, Sequence[Span]] | None = None,
) -> str:
    """Episodes, then facts, then turns; each section grouped by session in time order under
    one date header per session. ``marked`` turn ids get a ``*`` before their id; with
    ``annotate`` every relative time expression of a turn is followed by its resolution against
    the session date (``annotate_times``: "last night [14 August 2023]"). An episode
    whose turns are all in the text (in ``turns`` or in ``shown``, the turn ids shown elsewhere
    in the same prompt) keeps its id and title but not its narrative, which would repeat them,
    unless ``narratives`` (every narrative shown). A turn in ``above`` (shown verbatim earlier
    in the same prompt) is named by id and speaker, with its relative times resolved when
    ``annotate``, instead of repeated. A turn in ``passages`` shows only those passages
    (:func:`~qemem.passages.excerpt`). A text of several lines keeps its lines, each behind
    the continuation mark (:func:`~qemem.prompts.as_lines`). Empty sections are left out."""
    marks, earlier = set(marked), set(above)
    visible = {t.id for t in turns} | set(shown)
    blocks: list[str] = []
    if episodes:
        lines = ["Episodes:"]
        for ep in _by_session(index, episodes, lines):
            if not narratives and ep.turn_ids and visible.issuperset(ep.turn_ids):
                lines.append(f"[{ep.id}] {as_data(ep.title)} (its turns are shown)")
            else:
                lines.append(f"[{ep.id}] {as_data(ep.title)}: {as_data(ep.content)}")
        blocks.append("\n".join(lines))
    if facts:
        lines = ["Semantic facts (each under the session it was learned in):"]
        for fact in _by_session(index, facts, lines):
            lines.append(f"[{fact.id}] {as_data(fact.content)}")
        blocks.append("\n".join(lines))
    if turns:
        lines = ["Turns:"]
        for turn in _by_session(index, index.in_order(turns), lines):
            star = "*" if turn.id in marks else ""
            text = excerpt(turn.text, (passages or {}).get(turn.id))
            if turn.id in earlier:
                times = _times_of(text, index.session_date(turn)) if annotate else ""
                lines.append(f"{star}[{turn.id}] {as_data(turn.speaker)} (shown above){times}")
                continue
            text = annotate_times(text, index.session_date(turn)) if annotate else text
            lines.append(f"{star}[{turn.id}] {as_data(turn.speaker)}:{as_lines(text)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


R = TypeVar("R", Turn, Episode, SemanticFact)


def _by_session(index: SourceIndex, records: Sequence[R], lines: list[str]) -> Iterator[R]:
    """``records`` grouped by session (sessions in order, records in their given order within
    one), appending a date header line to ``lines`` before each session's first."""
    session: int | None = None
    for record in sorted(records, key=lambda r: r.session):
        if record.session != session:
            session = record.session
            lines.append(session_header(index, record))
        yield record


def _times_of(text: str, anchor: datetime) -> str:
    """``: <expression> [<resolution>]; ...`` for the relative times of a turn's ``text``
    (empty without any)."""
    found = resolve_times(text, anchor)
    notes = "; ".join(ANNOTATION.format(expression=r.expression, phrase=r.phrase) for r in found)
    return f": {as_data(notes)}" if notes else ""


def pool_records(pool: Pool) -> tuple[list[Episode], list[SemanticFact], list[Turn]]:
    """The pool's records by space (episodes and facts in pool order)."""
    episodes = [i.record for i in pool.episodes if isinstance(i.record, Episode)]
    facts = [i.record for i in pool.facts if isinstance(i.record, SemanticFact)]
    turns = [i.record for i in pool.turns if isinstance(i.record, Turn)]
    return episodes, facts, turns


def exposure_place(pool: Pool) -> Callable[[PoolItem], float]:
    """Where a pool item stands in the pool's exposure order: a candidate at its position, a
    turn that is only context of a candidate (or that an episode or fact exposes) at the best
    position among those (``reasons[].via``), an item nothing places last (infinity)."""
    at = {item.id: item.position for item in pool.items() if item.position is not None}

    def place(item: PoolItem) -> float:
        if item.position is not None:
            return float(item.position)
        vias = [at[r.via] for r in item.reasons if r.via is not None and r.via in at]
        return float(min(vias)) if vias else math.inf

    return place


def pool_passages(pool: Pool) -> dict[str, list[Span]]:
    """The passages the pool holds of its long turns (turn id -> spans)."""
    return {item.id: item.passages for item in pool.turns if item.passages is not None}


def format_pool(index: SourceIndex, pool: Pool) -> str:
    """The pool as the constructor (and the direct answerer) reads it."""
    text = format_memories(index, *pool_records(pool), passages=pool_passages(pool))
    return text or "(no memories retrieved)"


def session_header(index: SourceIndex, record: Record) -> str:
    """The header line of the record's session: ``--- Session 3 (Thursday, 14 March ...)``."""
    return f"--- {index.session_title(record)} ({show_date(index.session_date(record))})"
