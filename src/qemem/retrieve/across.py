"""Hybrid search across several conversations of a namespace (one user's threads): one global
ranking, not an interleaving of per-conversation rankings.

Record ids are unique only inside a conversation (``D1:3`` is in every LoCoMo conversation),
so an item across conversations is the pair (conversation, record id).

For each query, the per-conversation rankings of a method are merged by score into one list
(:func:`merge_by_score`), then the dense and BM25 lists of every query are fused with RRF
(k=60) as in single-conversation search. Dense cosine scores are comparable across
conversations: one embedder made every vector. BM25 scores are comparable only approximately:
each conversation's index has its own document frequencies and average length, so a rare
word scores higher in a conversation where it is rarer. Every list is complete (not cut to
``k``), so the global lists are exact merges of the per-conversation ones; every item of them
is scored, and only the ``k`` best become hits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter

import numpy as np

from qemem.embed.base import Embedder
from qemem.models import SPACES, Hit, Space, split_key
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.fusion import RRF_K, FusedScore, ListKey, fuse_lists, fuse_top
from qemem.retrieve.index import search_index
from qemem.store.base import MemoryStore, Ranked, Scope

Key = tuple[str, str]
"""An item across conversations: (conversation id, record id)."""


def merge_by_score(rankings: Mapping[str, Ranked]) -> list[Key]:
    """One ranking of (conversation, record id), best first, from each conversation's
    (record id, score) ranking: by descending score, so a conversation whose hits are all
    weak places none above another's strong hits (interleaving would). Ties keep the order
    of ``rankings``, then each ranking's own order."""
    entries = [(cid, rid, score) for cid, ranked in rankings.items() for rid, score in ranked]
    entries.sort(key=itemgetter(2), reverse=True)  # stable: ties keep their order
    return [(cid, rid) for cid, rid, _ in entries]


def record_of(key: Key) -> Key:
    """The (conversation, record id) an item of a global list belongs to: a passage's turn."""
    return key[0], split_key(key[1])[0]


def fuse_across(
    dense: Sequence[Mapping[str, Ranked]],
    sparse: Sequence[Mapping[str, Ranked]],
    space: Space,
    rrf_k: int = RRF_K,
    k: int | None = None,
) -> list[tuple[str, Hit]]:
    """RRF over the global dense and BM25 lists of every query (``dense[i]`` and
    ``sparse[i]``: query i's rankings by conversation), as (conversation, hit) best first, at
    most ``k`` (None: all); each hit records its rank in every global list that contains it,
    as ``method:query``. A turn ranks by its best passage, whose span its hit names. Every
    item is scored, but ranks and hits are made only for the ``k`` kept
    (:func:`~qemem.retrieve.fusion.fuse_top`)."""
    lists: dict[ListKey, list[Key]] = {}
    for i, (by_dense, by_bm25) in enumerate(zip(dense, sparse, strict=True)):
        lists[(i, "dense")] = merge_by_score(by_dense)
        lists[(i, "bm25")] = merge_by_score(by_bm25)
    out: list[tuple[str, Hit]] = []
    for (cid, rid), entry in fuse_top(lists, k, rrf_k, record_of).items():
        owner, span = split_key(rid)
        ranks = {f"{m}:{q}": r for q, m, r in entry.ranks}
        out.append((cid, Hit(space, owner, entry.score, ranks, span)))
    return out


def search_across(
    store: MemoryStore,
    scopes: Mapping[str, Scope],
    space: Space,
    queries: Sequence[str],
    embedder: Embedder,
    *,
    k: int | None = None,
    rrf_k: int = RRF_K,
) -> list[tuple[str, Hit]]:
    """Records of ``space`` in the conversations of ``scopes`` (keyed by conversation id)
    ranked together by :func:`fuse_across`, as (conversation, hit); at most ``k`` (None:
    every record that any list ranks). Each scope's cached search index serves its lists."""
    vectors = embedder.embed(list(queries), query=True)
    tokens = [tokenize(q) for q in queries]
    dense: list[dict[str, Ranked]] = [{} for _ in queries]
    sparse: list[dict[str, Ranked]] = [{} for _ in queries]
    for cid, scope in scopes.items():
        index = search_index(store, scope, space)
        for i, (ranked_dense, ranked_bm25) in enumerate(
            zip(index.dense(vectors), index.sparse(tokens), strict=True)
        ):
            dense[i][cid] = ranked_dense
            sparse[i][cid] = ranked_bm25
    return fuse_across(dense, sparse, space, rrf_k, k)


def fused_spaces_across(
    store: MemoryStore,
    scopes: Mapping[str, Scope],
    vectors: Mapping[str, np.ndarray],
    queries: Sequence[str],
    *,
    depth: int | None,
    rrf_k: int = RRF_K,
) -> dict[Space, dict[Key, FusedScore]]:
    """Per space, the RRF fusion of the global dense and BM25 lists of every query across the
    conversations of ``scopes`` (``vectors[cid]``: the dense query vectors for that
    conversation, one row per query), keyed (conversation, record id), best first. Each
    conversation's lists are cut at ``depth`` before the merge by score and the merged list
    again after it, so a global list is the exact top ``depth`` of all of them."""
    tokens = [tokenize(q) for q in queries]
    out: dict[Space, dict[Key, FusedScore]] = {}
    for space in SPACES:
        dense: list[dict[str, Ranked]] = [{} for _ in queries]
        sparse: list[dict[str, Ranked]] = [{} for _ in queries]
        for cid, scope in scopes.items():
            index = search_index(store, scope, space)
            by_dense, by_bm25 = index.dense(vectors[cid], depth), index.sparse(tokens, depth)
            for i in range(len(queries)):
                dense[i][cid], sparse[i][cid] = by_dense[i], by_bm25[i]
        lists: dict[ListKey, list[Key]] = {}
        for i in range(len(queries)):
            lists[(i, "dense")] = merge_by_score(dense[i])[:depth]
            lists[(i, "bm25")] = merge_by_score(sparse[i])[:depth]
        out[space] = fuse_lists(lists, rrf_k)
    return out
