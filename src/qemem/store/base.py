"""The store seam: what any memory store (SQLite today, PostgreSQL + pgvector later) provides.

Everything is scoped to one conversation inside a namespace (the user or tenant). Search
statistics (BM25 document frequencies) are those of the scope searched.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from qemem.models import Conversation, Episode, SemanticFact, Session, Space, Turn

Ranked = list[tuple[str, float]]


@dataclass(frozen=True)
class Scope:
    """One conversation of one namespace: the unit of storage, search and deletion."""

    conversation: str
    namespace: str = "default"

    def __str__(self) -> str:
        return (
            self.conversation
            if self.namespace == "default"
            else f"{self.namespace}/{self.conversation}"
        )


class MemoryStore(Protocol):
    """Persistence and search of the three memory spaces of each conversation."""

    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside are committed together or not at all (nesting joins the outer)."""
        ...

    def close(self) -> None: ...

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
        """Remove the conversation and everything derived from it; False if it was absent."""
        ...

    # records (vectors are row-aligned with the records; embedder id/dim are checked)
    def add_turns(
        self, scope: Scope, turns: Sequence[Turn], vectors: np.ndarray, embedder: str
    ) -> None: ...

    def turns(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Turn]:
        """Turns in conversation order (session, then position); only ``ids`` if given."""
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
        """Remove episodes (links, vectors) and the facts no remaining episode supports."""
        ...

    # search
    def embedder(self) -> tuple[str, int] | None:
        """The (embedder id, dimension) every stored vector was made with, if any."""
        ...

    def vectors(self, scope: Scope, space: Space) -> tuple[list[str], np.ndarray]:
        """Ids and their unit vectors (rows) for one space of the scope."""
        ...

    def dense_search(
        self, scope: Scope, space: Space, queries: np.ndarray, k: int | None = None
    ) -> list[Ranked]:
        """For each query vector, (id, cosine) best first; all records when ``k`` is None."""
        ...

    def bm25_search(
        self, scope: Scope, space: Space, queries: Sequence[Sequence[str]], k: int | None = None
    ) -> list[Ranked]:
        """For each tokenised query, (id, BM25 score) for records with a positive score."""
        ...

    # small key-value state per scope (build progress and the like)
    def get_state(self, scope: Scope, key: str) -> str | None: ...

    def set_state(self, scope: Scope, key: str, value: str) -> None: ...
