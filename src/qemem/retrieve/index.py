"""Search indexes: BM25 and the dense matrix of one space of one scope, built from what the
store returns and cached by (scope, space, version), so both backends rank identically.

Dense search scores every query of a pool with one matrix product (exact cosine: vectors are
unit length). A store with a database-side nearest-neighbour index (pgvector HNSW) may serve
dense top-k for scopes it finds large enough; by default no store does, so search is exact.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

import numpy as np

from qemem.errors import EmbedderMismatchError
from qemem.models import Space
from qemem.retrieve.bm25 import BM25Index, top_positive
from qemem.store.base import (
    IndexRows,
    MemoryStore,
    NearestNeighbours,
    Ranked,
    Scope,
    VersionedCache,
)


def top_rows(sims: np.ndarray, k: int | None = None) -> list[tuple[int, float]]:
    """Entries of one similarity row, best first (ties by index), as (index, similarity);
    at most ``k``."""
    if k is not None and k < len(sims):
        top = np.argpartition(-sims, k)[:k]
        order = top[np.argsort(-sims[top], kind="stable")]
    else:
        order = np.argsort(-sims, kind="stable")
    return [(int(i), float(sims[i])) for i in order]


class SearchIndex:
    """BM25 and dense search over one space of one scope."""

    def __init__(self, rows: IndexRows) -> None:
        self.ids = rows.ids
        self.matrix = rows.matrix
        self.bm25 = BM25Index(rows.tokens)

    def dense_scores(self, queries: np.ndarray) -> np.ndarray:
        """The cosine of every record (columns, in row order) with each query vector (rows of
        ``queries``): one matrix product scores all queries."""
        if not self.ids:
            return np.zeros((len(queries), 0), dtype=np.float32)
        if queries.shape[1] != self.matrix.shape[1]:
            raise EmbedderMismatchError(
                f"query vectors are {queries.shape[1]}-d but the store's are "
                f"{self.matrix.shape[1]}-d: search with the embedder the store was built with"
            )
        # einsum runs the product on this thread: BLAS's threaded sgemm waits on busy cores
        # (7 x 663 x 384 took 27 ms on 2 loaded cores, einsum 0.8 ms).
        sims: np.ndarray = np.einsum("qd,nd->qn", queries.astype(np.float32), self.matrix)
        return sims

    def dense(self, queries: np.ndarray, k: int | None = None) -> list[Ranked]:
        """For each query vector (a row of ``queries``), (id, cosine) best first; ``k`` bounds
        each list (None: every record)."""
        return [
            [(self.ids[i], s) for i, s in top_rows(row, k)] for row in self.dense_scores(queries)
        ]

    def sparse(self, queries: Sequence[Sequence[str]], k: int | None = None) -> list[Ranked]:
        """For each tokenised query, (id, BM25 score) of records scoring above zero, best
        first; at most ``k``."""
        return [
            [(self.ids[i], s) for i, s in top_positive(self.bm25.scores(q), k)] for q in queries
        ]


_caches: weakref.WeakKeyDictionary[object, VersionedCache[SearchIndex]] = (
    weakref.WeakKeyDictionary()
)
_caches_lock = threading.Lock()


def search_index(store: MemoryStore, scope: Scope, space: Space) -> SearchIndex:
    """The search index of ``space`` in ``scope``, rebuilt only when the scope's version
    changed (a write to another scope never invalidates it)."""
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None:
            cache = _caches[store] = VersionedCache(size=64)
    version = store.version(scope)
    return cache.get((scope, space), version, lambda: SearchIndex(store.index_rows(scope, space)))


def dense_lists(
    store: MemoryStore,
    scope: Scope,
    space: Space,
    queries: np.ndarray,
    k: int | None,
    index: SearchIndex | None = None,
) -> list[list[str]]:
    """Ids best first by cosine for each query vector: from the store's nearest-neighbour
    index when it offers one for this scope and ``k`` is set, else exact (over ``index``, by
    default the scope's cached one)."""
    if k is not None and isinstance(store, NearestNeighbours):
        found = store.nearest(scope, space, queries, k)
        if found is not None:
            return found
    index = index or search_index(store, scope, space)
    return [[rid for rid, _ in ranked] for ranked in index.dense(queries, k)]
