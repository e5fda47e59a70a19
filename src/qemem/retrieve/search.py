"""Hybrid search: dense and BM25 rankings of one space, fused with reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from qemem.embed.base import Embedder
from qemem.models import Hit, Space
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.fusion import RRF_K, ranked, rrf
from qemem.store.base import MemoryStore, Ranked, Scope


def fuse(rankings: Mapping[str, Ranked], space: Space, k: int = RRF_K) -> list[Hit]:
    """Fuse named rankings (e.g. ``dense:0``, ``bm25:0``) with RRF into hits, best first;
    each hit records its rank (from 1) in every list that contains it."""
    scores = rrf(([rid for rid, _ in lst] for lst in rankings.values()), k)
    ranks: dict[str, dict[str, int]] = {}
    for name, lst in rankings.items():
        for rank, (rid, _) in enumerate(lst, start=1):
            ranks.setdefault(rid, {})[name] = rank
    return [Hit(space, rid, score, ranks[rid]) for rid, score in ranked(scores)]


def space_rankings(
    store: MemoryStore,
    scope: Scope,
    space: Space,
    queries: Sequence[str],
    embedder: Embedder,
    k: int | None = None,
) -> dict[str, Ranked]:
    """Dense and BM25 rankings of ``space`` for every query: ``dense:i`` and ``bm25:i``.

    All queries are embedded in one batch. ``k`` bounds each list (None: the whole space).
    """
    vectors = embedder.embed(list(queries), query=True)
    dense = store.dense_search(scope, space, vectors, k)
    sparse = store.bm25_search(scope, space, [tokenize(q) for q in queries], k)
    rankings: dict[str, Ranked] = {}
    for i in range(len(queries)):
        rankings[f"dense:{i}"] = dense[i]
        rankings[f"bm25:{i}"] = sparse[i]
    return rankings


def hybrid_search(
    store: MemoryStore,
    scope: Scope,
    space: Space,
    queries: Sequence[str],
    embedder: Embedder,
    *,
    k: int | None = None,
    rrf_k: int = RRF_K,
) -> list[Hit]:
    """Records of ``space`` ranked by RRF over dense and BM25 lists of all ``queries``;
    at most ``k`` hits (None: every record that any list ranks)."""
    hits = fuse(space_rankings(store, scope, space, queries, embedder), space, rrf_k)
    return hits if k is None else hits[:k]
