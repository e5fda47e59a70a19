"""Re-embedding a store in place: new vectors are staged beside the live ones, then swapped in.

The staged vectors of a record live in the ``vectors`` table under the space ``next:<space>``
(so no schema change is needed, and they go with their conversation when it is deleted); the
target embedder is the ``meta`` row ``reembed``. Until the swap, the store serves and accepts
writes with its old embedder. ``swap`` replaces every live vector by its staged one and names
the new embedder in one transaction, refusing when a record has no staged vector (a record
written meanwhile: stage it, then swap again), and gives every conversation a new version so
search indexes reload.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from qemem.errors import StoreError
from qemem.models import Conversation
from qemem.store.base import Scope, VectorSpace, VersionedCache
from qemem.store.dialect import Conflict
from qemem.store.rows import TABLES


class SQLStore(Protocol):
    """What of ``qemem.store.sql.SQLStore`` these functions use."""

    _cache: VersionedCache[Any]

    def transaction(self) -> AbstractContextManager[None]: ...
    def conversations(self, namespace: str | None = None) -> list[Conversation]: ...
    def _query(
        self, sql: str, params: Sequence[object] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]: ...
    def _exec(self, sql: str, params: Sequence[object] = ()) -> int: ...
    def _insert(self, table: str, columns: Sequence[str], conflict: Conflict = "fail") -> str: ...
    def _pk(self, scope: Scope) -> int: ...
    def _bump(self, pk: int) -> None: ...
    def _put_vectors(
        self, pk: int, space: str, ids: Sequence[str], vectors: np.ndarray
    ) -> None: ...


PREFIX = "next:"
SPACES: tuple[VectorSpace, ...] = ("turn", "passage", "episode", "fact")
_TABLES: dict[VectorSpace, str] = {"passage": "passages", **{s: t for s, t in TABLES.items()}}


def target(store: SQLStore) -> tuple[str, int] | None:
    """The embedder a re-embedding in progress moves to (id, dimension), if any."""
    rows = store._query("SELECT value FROM meta WHERE key = 'reembed'")
    if not rows:
        return None
    info = json.loads(rows[0][0])
    return str(info["id"]), int(info["dim"])


def begin(store: SQLStore, embedder: str, dim: int) -> bool:
    """Record the target; True when a re-embedding to it was already under way (resumed).
    A re-embedding to another embedder is abandoned: its staged vectors are dropped."""
    with store.transaction():
        known = target(store)
        if known == (embedder, dim):
            return True
        store._exec("DELETE FROM vectors WHERE space LIKE ?", (PREFIX + "%",))
        store._exec("DELETE FROM meta WHERE key = 'reembed'")
        store._exec(
            store._insert("meta", ("key", "value")),
            ("reembed", json.dumps({"id": embedder, "dim": dim})),
        )
    return False


def missing(store: SQLStore, scope: Scope, space: VectorSpace) -> list[str]:
    """Ids of the scope's records of ``space`` (passages: their keys) without a staged
    vector, in storage order."""
    rows = store._query(
        f"SELECT r.id FROM {_TABLES[space]} r WHERE r.conv = ? AND NOT EXISTS (SELECT 1 FROM "
        "vectors v WHERE v.conv = r.conv AND v.space = ? AND v.id = r.id) ORDER BY r.id",
        (store._pk(scope), PREFIX + space),
    )
    return [str(r[0]) for r in rows]


def stage(
    store: SQLStore, scope: Scope, space: VectorSpace, ids: Sequence[str], vectors: np.ndarray
) -> None:
    """Write staged vectors of records ``ids`` (one transaction)."""
    known = target(store)
    if known is None or vectors.shape != (len(ids), known[1]):
        raise StoreError("no re-embedding under way for these vectors: begin one first")
    with store.transaction():
        pk = store._pk(scope)
        store._put_vectors(pk, PREFIX + space, ids, vectors)


def swap(store: SQLStore) -> None:
    """Swap the staged vectors in (see the module doc)."""
    with store.transaction():
        known = target(store)
        if known is None:
            raise StoreError("no re-embedding under way: nothing to swap")
        for conv in store.conversations():
            scope = Scope(conv.id, conv.namespace)
            if any(missing(store, scope, space) for space in SPACES):
                raise StoreError(
                    f"conversation {scope} has records without new vectors (written during the "
                    "re-embedding): run qemem reembed again"
                )
        store._exec("DELETE FROM vectors WHERE space NOT LIKE ?", (PREFIX + "%",))
        store._exec(
            "UPDATE vectors SET space = substr(space, ?) WHERE space LIKE ?",
            (len(PREFIX) + 1, PREFIX + "%"),
        )
        store._exec("DELETE FROM meta WHERE key IN ('embedder', 'reembed')")
        store._exec(
            store._insert("meta", ("key", "value")),
            ("embedder", json.dumps({"id": known[0], "dim": known[1]})),
        )
        for conv in store.conversations():
            store._bump(store._pk(Scope(conv.id, conv.namespace)))
    store._cache.clear()
