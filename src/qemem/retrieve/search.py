"""Hybrid search: dense and BM25 rankings of one space, fused with reciprocal rank fusion.

The turn space is ranked passage by passage (a long turn has one index row per passage,
:mod:`qemem.store.passages`); its hits are turns, each at the rank of its best passage, which
the hit names (``Hit.span``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from qemem.embed.base import Embedder
from qemem.models import Hit, Space, split_key
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.fusion import RRF_K, ListKey, fuse_lists, fuse_top
from qemem.retrieve.index import dense_lists, search_index
from qemem.store.base import MemoryStore, Scope


def fuse(lists: Mapping[ListKey, Sequence[str]], space: Space, k: int = RRF_K) -> list[Hit]:
    """Fuse ranked id lists keyed (query index, method) with RRF into hits, best first; each
    hit records its rank (from 1) in every list that contains it, as ``method:query``."""
    return [
        Hit(space, rid, entry.score, {f"{m}:{q}": r for q, m, r in entry.ranks})
        for rid, entry in fuse_lists(lists, k).items()
    ]


def turn_hits(
    lists: Mapping[ListKey, Sequence[str]], space: Space, k: int | None, rrf_k: int = RRF_K
) -> list[Hit]:
    """The best ``k`` hits of the fused ``lists`` (None: all) as hits of records: each turn
    once, at its best passage's place, with that passage's span; hits of whole records
    unchanged. Ranks and hits are made only for the hits kept
    (:func:`~qemem.retrieve.fusion.fuse_top`)."""
    out = []
    for key, entry in fuse_top(lists, k, rrf_k, lambda rid: split_key(rid)[0]).items():
        owner, span = split_key(key)
        ranks = {f"{m}:{q}": r for q, m, r in entry.ranks}
        out.append(Hit(space, owner, entry.score, ranks, span))
    return out


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
    passage (:func:`turn_hits`)."""
    vectors = embedder.embed(list(queries), query=True)
    lists = ranked_lists(store, scope, space, vectors, [tokenize(q) for q in queries])
    return turn_hits(lists, space, k, rrf_k)
