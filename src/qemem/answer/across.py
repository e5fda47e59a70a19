"""``ask`` across several conversations of a namespace (one user's threads).

The method runs unchanged over the qualified index of :mod:`qemem.evidence.many`: one pool
ranked across the conversations (:class:`~qemem.answer.corpus.ManyConversations`), prompts
that name every record by its label (``conv-26/D1:3``) under ``conv-26, Session 3`` headers,
the constructor's cited labels resolved against that index (so a quote is verified against
the turns of the conversation its label names; a bare id counts only when exactly one of
the conversations has it).

The answer then speaks in explicit data (:func:`stored_answer`): the pool's items hold the
stored records and name their conversation; each round's entries and every card's ``refs``
and the shown episodes and facts are ``Ref(space, id, conversation)``; the strings that
repeat what the models read (card ``sources``, ``citations``, ``evidence.shown`` turn lists,
``pool_times`` keys) keep the labels, and ``Answer.across.labels`` maps each to its ref, so a
reader looks a label up and never parses one. ``Answer.across.sources`` holds each
conversation's source records by their own ids.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping

from qemem.answer.ask import Across, Answer, AskConfig, Mode, ask_over, check_ask
from qemem.answer.corpus import ManyConversations
from qemem.answer.sources import Sources
from qemem.embed.base import Embedder
from qemem.errors import InputError
from qemem.evidence.cards import ViewCard
from qemem.evidence.many import ManyIndex
from qemem.llm import LLMClient
from qemem.models import Episode, SemanticFact, Turn
from qemem.store.base import MemoryStore, Scope


def ask_many(
    store: MemoryStore,
    scopes: Mapping[str, Scope],
    embedder: Embedder,
    llm: LLMClient | None,
    question: str,
    *,
    mode: Mode = "full",
    config: AskConfig | None = None,
) -> Answer:
    """Answer ``question`` over the conversations of ``scopes`` (keyed by id) ranked
    together, at operating point ``mode`` (see the module doc; errors as ``ask``)."""
    started = time.perf_counter()
    question = check_ask(question, mode, llm)
    if mode == "nemori-baseline":
        raise InputError(
            "mode 'nemori-baseline' reproduces a one-conversation recipe: ask each "
            "conversation with ask(), or use another mode across conversations"
        )
    corpus = ManyConversations(store, scopes, embedder)
    answer = ask_over(corpus, llm, question, mode, config, started)
    return stored_answer(answer, corpus.index)


def _stored_card(index: ManyIndex, card: ViewCard) -> ViewCard:
    return dataclasses.replace(card, refs=[index.explicit(ref) for ref in card.refs])


def _labels(answer: Answer) -> Iterable[str]:
    """Every label the answer's strings hold."""
    shown = answer.evidence.shown
    yield from answer.citations
    yield from (*shown.turns, *shown.cited_context, *shown.background)
    yield from answer.pool_times
    for card in answer.evidence.cards:
        yield from card.sources
        yield from (s for s in (card.matched_source, card.time_source) if s is not None)


def split_sources(index: ManyIndex, sources: Sources) -> dict[str, Sources]:
    """The source records of qualified ``sources`` by conversation, each conversation's by
    their stored ids with its own session numbers and speakers (conversations in order)."""
    out = {cid: Sources(speakers=list(index.speakers(cid))) for cid in index.conversations}
    records: list[Turn | Episode | SemanticFact] = [
        *sources.turns.values(),
        *sources.episodes.values(),
        *sources.facts.values(),
    ]
    for record in records:
        cid, stored = index.original(record.id)
        part = out[cid]
        part.sessions[stored.session] = index.session_date(record).isoformat()
        if isinstance(stored, Turn):
            part.turns[stored.id] = stored
        elif isinstance(stored, Episode):
            part.episodes[stored.id] = stored
        else:
            part.facts[stored.id] = stored
    for part in out.values():
        part.sessions = dict(sorted(part.sessions.items()))
    return out


def stored_answer(answer: Answer, index: ManyIndex) -> Answer:
    """An answer over qualified records in explicit data (see the module doc)."""
    evidence = answer.evidence
    cards = {id(card): _stored_card(index, card) for card in evidence.cards}
    for round_ in evidence.rounds:
        round_.pool = [index.stored_entry(entry) for entry in round_.pool]
        round_.cards = [cards.get(id(c)) or _stored_card(index, c) for c in round_.cards]
    labels = index.refs_of(_labels(answer))
    evidence.cards = [cards[id(card)] for card in evidence.cards]
    evidence.pool = index.stored_pool(evidence.pool)
    shown = evidence.shown
    shown.background_refs = [index.explicit(ref) for ref in shown.background_refs]
    shown.standing = [index.explicit(ref) for ref in shown.standing]
    answer.across = Across(list(index.conversations), labels, split_sources(index, answer.sources))
    answer.sources = Sources()
    return answer
