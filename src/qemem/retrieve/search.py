"""Hybrid search: dense and BM25 rankings of one space, fused with reciprocal rank fusion.

The turn space is ranked passage by passage (a long turn has one index row per passage,
:mod:`qemem.store.passages`); its hits are turns, each at the rank of its best passage, which
the hit names (``Hit.span``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from qemem.embed.base import Embedder
from qemem.models import Hit, Space
from qemem.retrieve.across import search_across
from qemem.retrieve.fusion import RRF_K, ListKey, fuse_lists
from qemem.retrieve.index import dense_lists, search_index
from qemem.store.base import MemoryStore, Scope


def fuse(lists: Mapping[ListKey, Sequence[str]], space: Space, k: int = RRF_K) -> list[Hit]:
    """Fuse ranked id lists keyed (query index, method) with RRF into hits, best first; each
    hit records its rank (from 1) in every list that contains it, as ``method:query``."""
    return [
        Hit(space, rid, entry.score, {f"{m}:{q}": r for q, m, r in entry.ranks})
        for rid, entry in fuse_lists(lists, k).items()
    ]


def ranked_lists(
    store: MemoryStore,
    scope: Scope,
    space: Space,
    vectors: np.ndarray,
    tokens: Sequence[Sequence[str]],
    k: int | None = None,
) -> dict[ListKey, list[str]]:
    """Dense and BM25 rankings of ``space`` for every query (``vectors[i]``, ``tokens[i]``):
    ids best first, keyed (i, "dense") and (i, "bm25"); ``k`` bounds each list (None: all)."""
    index = search_index(store, scope, space)
    dense = dense_lists(store, scope, space, vectors, k, index)
    sparse = index.sparse(tokens, k)
    lists: dict[ListKey, list[str]] = {}
    for i in range(len(tokens)):
        lists[(i, "dense")] = dense[i]
        lists[(i, "bm25")] = [rid for rid, _ in sparse[i]]
    return lists


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
    at most ``k`` hits (None: every record that any list ranks). Turns rank by their best
    passage, whose span the hit names. The search of one conversation by
    :func:`~qemem.retrieve.across.search_across` (exact top ``k`` from lists ranked only as
    deep as it needs)."""
    scopes = {scope.conversation: scope}
    found = search_across(store, scopes, space, queries, embedder, k=k, rrf_k=rrf_k)
    return [hit for _, hit in found]
