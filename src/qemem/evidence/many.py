"""The records of several conversations of a namespace under one index, for evidence across
them (a user's threads).

Record ids are unique only inside a conversation (``D1:3`` is in every LoCoMo conversation)
and so are session numbers. :class:`ManyIndex` therefore holds *qualified copies* of every
record: the id is the label ``<conversation>/<id>`` (``conv-26/D1:3``; an episode's turn ids
and a fact's episode ids likewise) and the session a number unique across the conversations
(conversations in the order given, then their sessions in order). Everything that works on
one conversation's index (the pool, the context block, the constructor and answer prompts,
quote verification, assembly) then works unchanged, and what the models read names each
record by its label under a header ``--- conv-26, Session 3 (date)``.

Labels are prompt text only. The index maps every label back to explicit data
(:meth:`ManyIndex.ref`, :meth:`ManyIndex.original`): results hand readers the conversation and
the record's own id as separate fields, so nobody parses a label.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from qemem.errors import InputError
from qemem.evidence.block import Context
from qemem.evidence.context import FoundRecord, Record, SourceIndex, clean_id
from qemem.models import (
    Conversation,
    Episode,
    Pool,
    PoolEntry,
    PoolItem,
    Reason,
    Ref,
    SemanticFact,
    Session,
    Space,
    Span,
    Turn,
    user_turns,
)
from qemem.store.base import MemoryStore, Scope


def label(conversation: str, record_id: str) -> str:
    """The id a record of ``conversation`` has in prompts across conversations."""
    return f"{conversation}/{record_id}"


class ManyIndex(SourceIndex):
    """Qualified copies of the records of several conversations (see the module doc), with
    their way back to the stored records."""

    def __init__(self, store: MemoryStore, scopes: Mapping[str, Scope]) -> None:
        self.conversations = list(scopes)
        self._sessions: dict[tuple[str, int], int] = {}
        self._real: dict[int, tuple[str, int]] = {}
        self._stored: dict[str, tuple[str, Record]] = {}
        self._bare: dict[str, list[str]] = {}
        self._speakers: dict[str, tuple[str, ...]] = {}
        self.user_turns: dict[str, frozenset[str]] = {}
        """Per conversation, the ids (its own) of the user's messages."""
        sessions: list[Session] = []
        turns: list[Turn] = []
        episodes: list[Episode] = []
        facts: list[SemanticFact] = []
        speakers: list[str] = []
        passages: dict[str, list[Span]] = {}
        superseded: set[str] = set()
        for cid, scope in scopes.items():
            conversation = store.get_conversation(scope)
            speakers.extend(conversation.speakers)
            self._speakers[cid] = conversation.speakers
            own_turns, own_episodes = store.turns(scope), store.episodes(scope)
            own_facts = store.facts(scope)
            self.user_turns[cid] = user_turns(own_turns)
            dates = {s.index: s for s in conversation.sessions}
            own: list[Record] = [*own_turns, *own_episodes, *own_facts]
            numbers = {r.session for r in own} | set(dates)
            for number in sorted(numbers):
                self._sessions[(cid, number)] = len(self._sessions)
                self._real[len(self._real)] = (cid, number)
                if number in dates:
                    sessions.append(dataclasses.replace(dates[number], index=len(self._real) - 1))
            turns += [self._turn(cid, t) for t in own_turns]
            episodes += [self._episode(cid, e) for e in own_episodes]
            facts += [self._fact(cid, f) for f in own_facts]
            superseded |= {label(cid, s.old) for s in store.supersessions(scope)}
            passages |= {label(cid, t): spans for t, spans in store.passages(scope).items()}
        merged = Conversation("", tuple(dict.fromkeys(speakers)), tuple(sessions))
        self._load(merged, turns, episodes, facts, superseded, passages)

    def _remember(self, cid: str, record: Record) -> tuple[str, int]:
        """The label and index session of ``record`` of conversation ``cid``, remembered."""
        name = label(cid, record.id)
        if name in self._stored:
            other = self._stored[name][0]
            raise InputError(
                f"conversations {other!r} and {cid!r} both give a record the id {name!r} "
                "across conversations: ask them separately"
            )
        self._stored[name] = (cid, record)
        self._bare.setdefault(record.id, []).append(name)
        return name, self._sessions[(cid, record.session)]

    def _turn(self, cid: str, turn: Turn) -> Turn:
        name, session = self._remember(cid, turn)
        return dataclasses.replace(turn, id=name, session=session)

    def _episode(self, cid: str, episode: Episode) -> Episode:
        name, session = self._remember(cid, episode)
        ids = tuple(label(cid, t) for t in episode.turn_ids)
        return dataclasses.replace(episode, id=name, session=session, turn_ids=ids)

    def _fact(self, cid: str, fact: SemanticFact) -> SemanticFact:
        name, session = self._remember(cid, fact)
        ids = tuple(label(cid, e) for e in fact.episode_ids)
        turns = tuple(label(cid, t) for t in fact.turn_ids)
        return dataclasses.replace(fact, id=name, session=session, episode_ids=ids, turn_ids=turns)

    def get(self, raw_id: str) -> FoundRecord | None:
        """The record a label names; a bare id (``D1:3``) only when exactly one of the
        conversations has it (else None: an ambiguous citation is not guessed)."""
        found = super().get(raw_id)
        if found is not None:
            return found
        named = self._bare.get(raw_id.strip()) or self._bare.get(clean_id(raw_id)) or []
        return super().get(named[0]) if len(named) == 1 else None

    def session_title(self, record: Record) -> str:
        cid, number = self._real[record.session]
        return f"{cid}, Session {number}"

    def session_date(self, record: Record) -> datetime:
        """As for one conversation; a fact of a session its conversation does not list gets
        that conversation's earliest session date."""
        if record.session in self._dates or isinstance(record, Turn | Episode):
            return super().session_date(record)
        cid = self._real[record.session][0]
        own = [d for s, d in self._dates.items() if self._real[s][0] == cid]
        return min(own, default=super().session_date(record))

    def original(self, qualified: str) -> tuple[str, Record]:
        """The conversation and the stored record behind a label."""
        return self._stored[qualified]

    def ref(self, space: Space, qualified: str) -> Ref:
        """The explicit ref of the record a label names (internal labels only)."""
        cid, record = self._stored[qualified]
        return Ref(space, record.id, cid)

    def explicit(self, ref: Ref) -> Ref:
        """``ref`` (its id a label) with the conversation and stored id as separate fields
        (and its span, for a passage)."""
        if ref.id not in self._stored:
            return ref
        return dataclasses.replace(self.ref(ref.space, ref.id), span=ref.span)

    def refs_of(self, labels: Iterable[str]) -> dict[str, Ref]:
        """Each known label among ``labels`` with the explicit ref of its record."""
        out: dict[str, Ref] = {}
        for name in labels:
            found = self.get(name)
            if found is not None and found.record.id in self._stored:
                out[name] = self.ref(found.space, found.record.id)
        return out

    def stored_item(self, item: PoolItem) -> PoolItem:
        """A pool item of qualified records as one of stored records that names its
        conversation (its reasons' ``via`` ids bare: they are of the same conversation)."""
        cid, record = self._stored[item.record.id]
        reasons = [self._bare_reason(r) for r in item.reasons]
        return PoolItem(item.space, record, item.score, reasons, item.position, cid, item.passages)

    def stored_entry(self, entry: PoolEntry) -> PoolEntry:
        """A pool entry of labels as one with an explicit ref and bare ids."""
        exposes = [self._stored[t][1].id for t in entry.exposes]
        reasons = [self._bare_reason(r) for r in entry.reasons]
        return PoolEntry(self.explicit(entry.ref), entry.position, entry.score, reasons, exposes)

    def _bare_reason(self, reason: Reason) -> Reason:
        if reason.via is None or reason.via not in self._stored:
            return reason
        return dataclasses.replace(reason, via=self._stored[reason.via][1].id)

    def speakers(self, conversation: str) -> tuple[str, ...]:
        """The speakers of one of the conversations."""
        return self._speakers[conversation]

    def real_session(self, session: int) -> tuple[str, int]:
        """The conversation and session number behind a session number of the index."""
        return self._real[session]

    def stored_pool(self, pool: Pool) -> Pool:
        """A pool of qualified records as one of stored records, each item naming its
        conversation."""

        def items(found: Sequence[PoolItem]) -> list[PoolItem]:
            return [self.stored_item(item) for item in found]

        return Pool(
            "",
            list(pool.queries),
            items(pool.episodes),
            items(pool.facts),
            items(pool.turns),
            list(self.conversations),
        )

    def stored_context(self, context: Context) -> Context:
        """A block of qualified records with its items' refs explicit and their sessions
        their own conversation's (its text keeps the labels and headers the reader sees)."""
        items = [
            dataclasses.replace(
                item,
                ref=self.explicit(item.ref),
                session=self.real_session(item.session)[1],
            )
            for item in context.items
        ]
        return dataclasses.replace(
            context,
            conversation=None,
            items=items,
            conversations=list(self.conversations),
            standing=[self.explicit(ref) for ref in context.standing],
        )
