"""Reading facts as they stand and editing single records through ``Memory``: facts current
(or known as of a date), supersessions, forgetting one message (deleted or redacted) or one
fact, and correcting one fact by hand (a new fact with its own provenance, a
:class:`~qemem.models.Correction`, and a manual supersession).

Every edit holds the conversation's build lock (a build running meanwhile would write
episodes of the turns being forgotten) and is one store transaction; unknown ids raise
NotFoundError before anything is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from qemem.build.pipeline import next_number
from qemem.build.supersede import AsOf, known_facts, parse_as_of
from qemem.embed.base import Embedder
from qemem.errors import InputError, NotFoundError
from qemem.lexicon import check_year
from qemem.locks import writer_lock
from qemem.memory.api import MAX_FACT_CHARS, Forgotten
from qemem.models import (
    REDACTED,
    Correction,
    Episode,
    SemanticFact,
    Supersession,
    Turn,
    check_text,
)
from qemem.store import MemoryStore, Scope


class _Host(Protocol):
    """What of ``Memory`` these methods use."""

    store: MemoryStore
    namespace: str

    def embed_documents(self, records: Sequence[Turn | Episode | SemanticFact]) -> np.ndarray: ...

    def _forget_cached(self, conversation: str) -> None: ...

    @property
    def embedder(self) -> Embedder: ...


def _scope(host: _Host, conversation: str) -> Scope:
    return Scope(conversation, host.namespace)


def _turn(store: MemoryStore, scope: Scope, turn_id: str) -> Turn:
    found = store.turns(scope, [check_text(turn_id, "message id")])
    if not found:
        raise NotFoundError(
            f"no message {turn_id!r} in conversation {scope}: list its turns to find the id",
            kind="message",
            name=turn_id,
            conversation=scope.conversation,
        )
    return found[0]


def _fact(store: MemoryStore, scope: Scope, fact_id: str) -> SemanticFact:
    found = store.facts(scope, [check_text(fact_id, "fact id")])
    if not found:
        raise NotFoundError(
            f"no fact {fact_id!r} in conversation {scope}: list them (qemem facts) to find the id",
            kind="fact",
            name=fact_id,
            conversation=scope.conversation,
        )
    return found[0]


class MemoryEdits:
    """The fact-listing and single-record edit methods of ``Memory``."""

    def episodes(self: _Host, conversation: str, ids: Sequence[str] | None = None) -> list[Episode]:
        """The conversation's episodes in order (only those of ``ids``, in their order)."""
        return self.store.episodes(_scope(self, conversation), ids)

    def facts(
        self: _Host,
        conversation: str,
        ids: Sequence[str] | None = None,
        *,
        as_of: AsOf | str | None = None,
        include_superseded: bool = False,
    ) -> list[SemanticFact]:
        """The conversation's current facts: those no supersession replaces. ``as_of`` (a
        date, a date-time or ISO text) gives those known then (learned in a session up to it,
        not replaced by then); ``include_superseded`` keeps the replaced ones too. With
        ``ids``, exactly those facts (current or not), in their order."""
        scope = _scope(self, conversation)
        facts = self.store.facts(scope, ids)
        if ids is not None:
            return facts
        when = parse_as_of(as_of) if isinstance(as_of, str) else as_of
        if when is not None:
            check_year(when, when, "as-of date", "as_of")
        dates = {s.index: s.date_time for s in self.store.get_conversation(scope).sessions}
        return known_facts(
            facts,
            self.store.supersessions(scope),
            dates,
            as_of=when,
            include_superseded=include_superseded,
        )

    def supersessions(self: _Host, conversation: str) -> list[Supersession]:
        """Which facts replace which (build: an episode's turns showed the change; manual: a
        correction by hand), in the order of the replaced facts."""
        scope = _scope(self, conversation)
        self.store.get_conversation(scope)
        return self.store.supersessions(scope)

    def delete_message(self: _Host, conversation: str, message: str) -> Forgotten:
        """Delete one message (turn) and what was derived from it: every episode citing it
        (their other turns are built again by the next build), the facts left without an
        episode (never a correction: its provenance is its own), the turn from the
        supersessions and corrections citing it (a build supersession citing no turn left
        goes). A fact also learned elsewhere keeps its other episodes. A session left without
        messages is removed (``Forgotten.sessions``): a session appended with a wrong date no
        longer blocks later appends, and its number is not used again. The LLM cache's
        exchanges about the conversation go too (which of them quoted the message is not
        recorded)."""
        return _forget(self, conversation, message, redact=False)

    def redact_message(self: _Host, conversation: str, message: str) -> Forgotten:
        """As ``delete_message``, but the message keeps its id, speaker, time and place; its
        text becomes ``[message redacted]``: it is in no search index and never shown as
        evidence (it still counts among the conversation's turns)."""
        return _forget(self, conversation, message, redact=True)

    def delete_fact(self: _Host, conversation: str, fact: str) -> Forgotten:
        """Delete one fact with its provenance (links, correction) and supersessions: the
        facts it replaced are current again (deleting a correction restores what it
        corrected), a fact that replaced it stays (deleting a corrected fact keeps its
        correction, current)."""
        scope = _scope(self, conversation)
        with writer_lock(self.store, scope, "build"):
            _fact(self.store, scope, fact)
            touched = [s for s in self.store.supersessions(scope) if fact in (s.old, s.new)]
            self.store.delete_facts(scope, [fact])
        return Forgotten(
            conversation,
            facts=[fact],
            supersessions=[s.old for s in touched],
            restored=[s.old for s in touched if s.new == fact],
        )

    def correct_fact(
        self: _Host,
        conversation: str,
        fact: str,
        content: str,
        *,
        turns: Sequence[str] = (),
    ) -> Supersession:
        """Replace a current fact by ``content``, by hand: a new fact (the next ``S<n>`` of the
        conversation's id counter, never a deleted fact's id; of the old one's session) with
        its own provenance (a :class:`Correction` citing ``turns``, optional turn ids of the
        conversation, and recording the turns the old fact was learned from), and a manual
        supersession of the old one from the date it was learned (a correction replaces a
        wrong fact for all of its history). The old fact keeps its provenance and stays listed
        with ``include_superseded``; the correction stays when the old fact goes, and a later
        build that derives a statement near it from those turns sees it superseded by the
        correction (:mod:`qemem.build.corrections`)."""
        scope = _scope(self, conversation)
        text = " ".join(check_text(content, "fact").split())
        if not text or len(text) > MAX_FACT_CHARS:
            raise InputError(f"the corrected fact must have 1 to {MAX_FACT_CHARS} characters")
        with writer_lock(self.store, scope, "build"):
            old = _fact(self.store, scope, fact)
            for turn_id in turns:
                _turn(self.store, scope, turn_id)
            later = [s.new for s in self.store.supersessions(scope) if s.old == fact]
            if later:
                raise InputError(
                    f"fact {fact} is already superseded by {later[0]}: correct {later[0]}"
                )
            conv = self.store.get_conversation(scope)
            learned = {s.index: s.date_time for s in conv.sessions}[old.session]
            number = next_number(self.store, scope, "S")
            new = SemanticFact(f"S{number}", conversation, text, old.session, (), kind=old.kind)
            vector = self.embed_documents([new])
            now = datetime.now(UTC)
            cited = tuple(dict.fromkeys(turns))
            record = Supersession(fact, new.id, cited, learned, "manual", now)
            provenance = Correction(new.id, cited, _learned_from(self.store, scope, old), now)
            with self.store.transaction():
                self.store.put_facts(scope, [new], vector, self.embedder.id)
                self.store.put_corrections(scope, [provenance])
                self.store.put_supersessions(scope, [record])
        return record


def _forget(host: _Host, conversation: str, message: str, *, redact: bool) -> Forgotten:
    scope = _scope(host, conversation)
    with writer_lock(host.store, scope, "build"):
        turn = _turn(host.store, scope, message)
        redacted = None
        if redact:
            blank = dataclasses.replace(turn, text=REDACTED)
            redacted = (blank, host.embed_documents([blank]), host.embedder.id)
        removed = host.store.forget_turn(scope, message, redacted)
    host._forget_cached(conversation)  # the cache cannot tell which exchanges quoted it
    return Forgotten(
        conversation,
        deleted=[] if redact else [message],
        redacted=[message] if redact else [],
        episodes=list(removed.episodes),
        facts=list(removed.facts),
        unlinked=list(removed.unlinked),
        supersessions=list(removed.supersessions),
        restored=[f for f in removed.supersessions if f not in removed.facts],
        sessions=list(removed.sessions),
        items=list(removed.items),
    )


def _learned_from(store: MemoryStore, scope: Scope, fact: SemanticFact) -> tuple[str, ...]:
    """The turns ``fact`` was learned from, in conversation order: those of its episodes, those
    it was read from directly and, for a fact written by hand, those its correction cites or
    corrected."""
    turns = {t for e in store.episodes(scope, fact.episode_ids) for t in e.turn_ids}
    turns |= set(fact.turn_ids)
    for item in store.corrections(scope):
        if item.fact == fact.id:
            turns |= {*item.turn_ids, *item.corrected_turns}
    return tuple(t.id for t in store.turns(scope) if t.id in turns)
