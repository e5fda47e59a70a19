"""The store seam: what any memory store (SQLite, PostgreSQL + pgvector) provides.

Everything is scoped to one conversation inside a namespace (the user or tenant). A store keeps
and returns records, their vectors and their BM25 tokens; it ranks nothing. Ranking lives in
:mod:`qemem.retrieve.index`, which caches its indexes by the scope's version: a number that
every write to the scope changes and that is never reused for other contents.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np

from qemem.models import (
    Conversation,
    Correction,
    Episode,
    Item,
    SemanticFact,
    Session,
    Space,
    Span,
    Supersession,
    Turn,
    check_text,
)

Ranked = list[tuple[str, float]]
VectorSpace = Literal["turn", "passage", "episode", "fact"]
"""What the store keeps vectors of: the records of each space, and the passages of long turns
(searched as the turn space, :mod:`qemem.store.passages`)."""
V = TypeVar("V")
R = TypeVar("R", Turn, Episode, SemanticFact)


@dataclass(frozen=True)
class Pin:
    """One life of a conversation as an operation read it at its start (a build): the
    conversation's store key (never given to another conversation, not even to one
    re-created under the same id) and how many removals by hand (messages deleted or
    redacted, facts deleted) it had seen."""

    key: int
    removals: int


@dataclass(frozen=True)
class Scope:
    """One conversation of one namespace: the unit of storage, search and deletion. Ids that
    no store can keep exactly (see :func:`~qemem.models.check_text`) are refused here, before
    any store sees them.

    A scope with a ``pin`` (:meth:`MemoryStore.pin`) names one life of the conversation:
    every read and write through it first checks, inside its own transaction, that the
    conversation is still that life and has lost no record by hand since; else it raises
    ``ConversationGoneError`` or ``ConversationChangedError`` and writes nothing. Scopes
    compare (and hash) by conversation and namespace only, pinned or not."""

    conversation: str
    namespace: str = "default"
    pin: Pin | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_text(self.conversation, "conversation id", field="conversation")
        check_text(self.namespace, "namespace", field="namespace")

    def __str__(self) -> str:
        return (
            self.conversation
            if self.namespace == "default"
            else f"{self.namespace}/{self.conversation}"
        )


@dataclass(frozen=True)
class IndexRows:
    """What a search index of one space of one scope is built from, row-aligned: record ids,
    their BM25 tokens and their unit vectors (one row each), in the space's record order."""

    ids: list[str]
    tokens: list[list[str]]
    matrix: np.ndarray


@dataclass(frozen=True)
class TurnRemoval:
    """What forgetting a turn removed from the store: the episodes citing it, the facts left
    without provenance, the facts that lost an episode but stay, the supersessions that
    lost their last cited turn (or one of their facts), by the id of the fact they replaced,
    the session it leaves empty (removed; see :data:`~qemem.models.SESSION_COUNTER`) and
    the history items stored as it."""

    episodes: tuple[str, ...]
    facts: tuple[str, ...]
    unlinked: tuple[str, ...]
    supersessions: tuple[str, ...]
    sessions: tuple[int, ...] = ()
    items: tuple[str, ...] = ()


class MemoryStore(Protocol):
    """Persistence and search of the three memory spaces of each conversation."""

    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside are committed together or not at all (nesting joins the outer)."""
        ...

    def close(self) -> None: ...

    def ping(self) -> None:
        """Return when the store can be read now; a StoreError otherwise."""
        ...

    # conversations and sessions
    def conversations(self, namespace: str | None = None) -> list[Conversation]: ...

    def get_conversation(self, scope: Scope) -> Conversation:
        """The conversation with its sessions; raises NotFoundError when absent."""
        ...

    def put_conversation(self, scope: Scope, speakers: Sequence[str]) -> None:
        """Create the conversation, or merge new speakers into an existing one."""
        ...

    def add_sessions(self, scope: Scope, sessions: Sequence[Session]) -> None: ...

    def delete_conversation(self, scope: Scope) -> bool:
        """Remove the conversation and everything derived from it, and cancel its queued and
        running jobs; False if it was absent. Its ids and id counters go with it."""
        ...

    def pin(self, scope: Scope) -> Scope:
        """``scope`` pinned to the conversation's current life (see :class:`Scope`);
        NotFoundError when absent. A pinned scope is checked and returned as it is."""
        ...

    def counters(self, scope: Scope) -> dict[str, int]:
        """The conversation's id counters: for each id prefix (``E``, ``S``, ``D<session>:``)
        the highest number an id ``<prefix><n>`` of a record has had in this life of the
        conversation. Writing a record raises its prefix's counter; nothing lowers one (not
        a delete), so a new id ``<prefix><counter + 1>`` never names an earlier record."""
        ...

    # records (vectors are row-aligned with the records; embedder id/dim are checked)
    def add_turns(
        self, scope: Scope, turns: Sequence[Turn], vectors: np.ndarray, embedder: str
    ) -> None: ...

    def turns(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Turn]:
        """Turns in conversation order (session, then position); only ``ids`` if given."""
        ...

    def lock_scope(self, scope: Scope) -> None:
        """Hold the scope's write lock until the current write transaction ends (writers of
        one conversation take turns; a no-op where a write transaction already excludes every
        other writer): taken before reading what a write will be planned from."""
        ...

    def turns_of(
        self, scope: Scope, *, sessions: Collection[int] = (), ids: Collection[str] = ()
    ) -> list[Turn]:
        """The turns of ``sessions`` and those of ``ids`` (wherever they are), in conversation
        order, reading only those rows (an append's check must not read the whole
        conversation); NotFoundError when the conversation is absent."""
        ...

    def add_episodes(
        self, scope: Scope, episodes: Sequence[Episode], vectors: np.ndarray, embedder: str
    ) -> None: ...

    def episodes(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Episode]: ...

    def put_facts(
        self, scope: Scope, facts: Sequence[SemanticFact], vectors: np.ndarray, embedder: str
    ) -> None:
        """Insert facts, or replace those whose id exists (content and provenance)."""
        ...

    def facts(self, scope: Scope, ids: Sequence[str] | None = None) -> list[SemanticFact]: ...

    def delete_episodes(self, scope: Scope, ids: Sequence[str]) -> None:
        """Remove episodes (links, vectors) and the facts no remaining episode or turn supports."""
        ...

    # single-record edits (see qemem.store.edits)
    def supersessions(self, scope: Scope) -> list[Supersession]:
        """The scope's supersessions of facts, in the order of the facts they replace."""
        ...

    def put_supersessions(self, scope: Scope, items: Sequence[Supersession]) -> None: ...

    def corrections(self, scope: Scope) -> list[Correction]:
        """The provenance of the scope's facts written by hand, in fact order."""
        ...

    def put_corrections(self, scope: Scope, items: Sequence[Correction]) -> None:
        """Record the provenance of facts written by hand (replacing a fact's earlier one)."""
        ...

    def delete_facts(self, scope: Scope, ids: Sequence[str]) -> None:
        """Delete facts with their links, vectors, corrections and supersessions."""
        ...

    def forget_turn(
        self,
        scope: Scope,
        turn_id: str,
        redacted: tuple[Turn, np.ndarray, str] | None = None,
    ) -> TurnRemoval:
        """Delete a turn, or redact it (``redacted``: the new turn, its vector, the embedder),
        with the episodes citing it and the facts left without provenance (never a fact with
        a correction); one transaction."""
        ...

    # history items of agent frameworks (see qemem.store.items)
    def add_items(self, scope: Scope, items: Sequence[tuple[str, str | None]]) -> list[Item]:
        """Append items, each (its JSON text, the turn it was stored as or None), after the
        conversation's items, numbered by its ``item`` counter; the stored items in order."""
        ...

    def items(self, scope: Scope, limit: int | None = None) -> list[Item]:
        """The conversation's items in order (its last ``limit`` ones)."""
        ...

    def delete_items(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        """Delete the items of ``ids`` (every item when None); how many went."""
        ...

    # passages of long turns (see qemem.store.passages)
    def put_passages(
        self,
        scope: Scope,
        turn_ids: Sequence[str],
        passages: Sequence[tuple[Turn, Span]],
        vectors: np.ndarray,
        embedder: str,
    ) -> None:
        """Replace the passages of turns ``turn_ids`` by ``passages`` (a turn among them and a
        span of its text each; ``vectors`` row-aligned); one transaction."""
        ...

    def passages(self, scope: Scope) -> dict[str, list[Span]]:
        """The passages of the scope's turns that have them: turn id -> spans in text order."""
        ...

    # what search indexes are built from
    def embedder(self) -> tuple[str, int] | None:
        """The (embedder id, dimension) every stored vector was made with, if any."""
        ...

    def version(self, scope: Scope) -> int | None:
        """The scope's version: changed by every committed write to it, never reused (not even
        after the conversation is deleted and ingested again). None while this thread is
        inside a transaction (its uncommitted writes must not be cached). Raises
        NotFoundError when the conversation is absent."""
        ...

    def index_rows(self, scope: Scope, space: Space) -> IndexRows:
        """Ids, BM25 tokens and vectors of the records of one space of the scope that search
        finds (facts no supersession replaced, turns not redacted), in record order; the turn
        space's rows are its turns without passages and the others' passages, each passage
        under its :func:`~qemem.models.passage_key`."""
        ...

    def vectors(self, scope: Scope, space: Space) -> tuple[list[str], np.ndarray]:
        """Ids and their unit vectors (rows) of the records of one space of the scope that
        search finds (as ``index_rows``)."""
        ...

    # re-embedding in place (see qemem.store.staged)
    def reembed_target(self) -> tuple[str, int] | None:
        """The embedder a re-embedding under way moves to (id, dimension), if any."""
        ...

    def begin_reembed(self, embedder: str, dim: int) -> bool:
        """Start (or resume: True) re-embedding to ``embedder``; another target's staged
        vectors are dropped."""
        ...

    def unstaged(self, scope: Scope, space: VectorSpace) -> list[str]:
        """Ids of the scope's records of ``space`` (passages: their keys) that have no new
        vector yet."""
        ...

    def stage_vectors(
        self, scope: Scope, space: VectorSpace, ids: Sequence[str], vectors: np.ndarray
    ) -> None:
        """Write new vectors of records beside their live ones."""
        ...

    def swap_staged(self) -> None:
        """Make the new vectors the live ones and the target the store's embedder, in one
        transaction; StoreError when a record has none yet."""
        ...

    # small key-value state per scope (build progress and the like)
    def get_state(self, scope: Scope, key: str) -> str | None: ...

    def set_state(self, scope: Scope, key: str, value: str) -> None: ...

    # responses of requests sent with an idempotency key, per namespace
    def recorded_response(
        self, namespace: str, key: str, retention: timedelta
    ) -> tuple[str, str] | None:
        """(request fingerprint, response) recorded under ``key`` less than ``retention``
        ago, else None; inside a transaction, a concurrent request with the key waits until
        the transaction ends."""
        ...

    def record_response(
        self, scope: Scope, key: str, fingerprint: str, response: str, retention: timedelta
    ) -> None:
        """Record the response of a request that appended to ``scope`` under ``key`` (in the
        caller's transaction; in the scope's namespace, deleted with its conversation),
        purging records older than ``retention``."""
        ...


@runtime_checkable
class NearestNeighbours(Protocol):
    """A store that can also answer dense top-k in the database (an approximate index)."""

    def nearest(
        self, scope: Scope, space: Space, queries: np.ndarray, k: int
    ) -> list[list[str]] | None:
        """For each query vector, the ids of its ``k`` nearest records by cosine, best first;
        None when this scope is served better by an exact scan (too small for the index)."""
        ...


_NUMBER = re.compile(r"\d+")


def record_order(rid: str, session: int = 0) -> tuple[int, int, str]:
    """Sort key of episodes (by session first) and facts: the number after the id's first
    letter (E2 before E10), then the id."""
    match = _NUMBER.match(rid, 1)
    return session, int(match.group()) if match else 0, rid


def ordering(space: Space, rid: str, session: int, position: int) -> tuple[int, int, int, str]:
    """Sort key of a space's records (the order ``turns``/``episodes``/``facts`` return): turns
    by (session, position); episodes by session, then the position of their first turn (an
    episode built again later keeps its place), then id number; facts by id number."""
    if space == "turn":
        return session, position, 0, rid
    number = record_order(rid)[1]
    return (session, position, number, rid) if space == "episode" else (0, 0, number, rid)


class VersionedCache(Generic[V]):
    """A thread-safe LRU of values, each valid for the version it was loaded at."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, tuple[int, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, version: int | None, load: Callable[[], V]) -> V:
        """The value cached under ``key`` for ``version``, else ``load()`` (kept unless
        ``version`` is None). Loads run outside the lock."""
        if version is None:
            return load()
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == version:
                self._items.move_to_end(key)
                return hit[1]
        value = load()
        with self._lock:
            self._items[key] = (version, value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class Stored(list[R]):
    """A scope's records of one kind in stored order, as a store caches them (never changed
    once loaded), finding a record by id without a pass over all of them."""

    _by_id: dict[str, R] | None = None

    def by_id(self) -> dict[str, R]:
        """The records by id (built on first use, then kept with the records)."""
        if self._by_id is None:
            self._by_id = {r.id: r for r in self}
        return self._by_id


def select_records(records: list[R], ids: Sequence[str] | None) -> list[R]:
    """Records in stored order (a copy), or those of ``ids`` in their order (unknown ids
    skipped); ids are looked up in the index of :class:`Stored` records, built once."""
    if ids is None:
        return list(records)
    by_id = records.by_id() if isinstance(records, Stored) else {r.id: r for r in records}
    return [by_id[i] for i in ids if i in by_id]


def space_records(
    store: MemoryStore, scope: Scope, space: Space, ids: Sequence[str]
) -> list[Turn | Episode | SemanticFact]:
    """Records of one space of the scope by id, in the order of ``ids``."""
    if space == "turn":
        return list(store.turns(scope, ids))
    if space == "episode":
        return list(store.episodes(scope, ids))
    return list(store.facts(scope, ids))
