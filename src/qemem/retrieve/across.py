"""Hybrid search across several conversations of a namespace (one user's threads): one global
ranking, not an interleaving of per-conversation rankings.

Record ids are unique only inside a conversation (``D1:3`` is in every LoCoMo conversation),
so an item across conversations is the pair (conversation, record id).

For each query, the per-conversation rankings of a method are merged by score into one list
(:func:`merge_by_score`), then the dense and BM25 lists of every query are fused with RRF
(k=60) as in single-conversation search. Dense cosine scores are comparable across
conversations: one embedder made every vector. BM25 scores are comparable only approximately:
each conversation's index has its own document frequencies and average length, so a rare
word scores higher in a conversation where it is rarer.

A global list merged by score is the conversations' scores side by side, ranked by descending
score with ties by position (conversation order, then row order), so a search for the best
``k`` holds each list as one score array and fuses it with
:func:`~qemem.retrieve.topk.fuse_exact`: lists ranked only as deep as the exact top ``k``
needs, the same hits as fusing the complete lists. Without ``k`` every list is complete and
every item scored.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from itertools import accumulate
from operator import itemgetter

import numpy as np

from qemem.embed.base import Embedder
from qemem.models import SPACES, Hit, Space, split_key
from qemem.retrieve.bm25 import tokenize
from qemem.retrieve.fusion import RRF_K, FusedScore, ListKey, fuse_lists, fuse_top
from qemem.retrieve.index import SearchIndex, search_index
from qemem.retrieve.roles import restricted_rankings
from qemem.retrieve.topk import ScoreList, fuse_exact
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
    fused = fuse_top(lists, k, rrf_k, record_of)
    return [(cid, record_hit(space, rid, entry)) for (cid, rid), entry in fused.items()]


def record_hit(space: Space, rid: str, entry: FusedScore) -> Hit:
    """The hit of index row ``rid`` (a record, or a passage of a turn: its turn, naming the
    passage's span) at its fused score, with its rank in each list as ``method:query``."""
    owner, span = split_key(rid)
    return Hit(space, owner, entry.score, {f"{m}:{q}": r for q, m, r in entry.ranks}, span)


def score_lists(
    indexes: Sequence[SearchIndex], vectors: np.ndarray, tokens: Sequence[Sequence[str]]
) -> dict[ListKey, ScoreList]:
    """The global dense and BM25 lists of every query (``vectors[i]``, ``tokens[i]``) over the
    rows of ``indexes`` side by side, as scores: keyed (i, "dense") and (i, "bm25"); BM25
    ranks only rows scoring above zero. The same rankings as :func:`merge_by_score` of each
    index's complete lists."""
    dense = np.concatenate([index.dense_scores(vectors) for index in indexes], axis=1)
    lists: dict[ListKey, ScoreList] = {}
    for i, query in enumerate(tokens):
        lists[(i, "dense")] = ScoreList(dense[i])
        bm25 = np.concatenate([index.bm25.scores(query) for index in indexes])
        lists[(i, "bm25")] = ScoreList(bm25, positive=True)
    return lists


def top_across(
    indexes: Mapping[str, SearchIndex],
    space: Space,
    vectors: np.ndarray,
    tokens: Sequence[Sequence[str]],
    k: int,
    rrf_k: int = RRF_K,
) -> list[tuple[str, Hit]]:
    """The best ``k`` hits of :func:`fuse_across` over the complete lists of ``indexes``
    (keyed by conversation), the same hits in the same order with the same scores and ranks,
    from lists ranked only as deep as that takes (:func:`~qemem.retrieve.topk.fuse_exact`)."""
    if not indexes:
        return []
    parts = list(indexes.items())
    starts = list(accumulate((len(index.ids) for _, index in parts), initial=0))

    def key(row: int) -> Key:
        part = bisect_right(starts, row) - 1
        cid, index = parts[part]
        return cid, index.ids[row - starts[part]]

    lists = score_lists([index for _, index in parts], vectors, tokens)
    fused = fuse_exact(lists, k, rrf_k, lambda row: record_of(key(row)))
    return [(key(row)[0], record_hit(space, key(row)[1], entry)) for row, entry in fused.items()]


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
    every record that any list ranks). Each scope's cached search index serves its lists;
    with ``k``, lists are ranked only as deep as the exact top ``k`` needs
    (:func:`top_across`)."""
    vectors = embedder.embed(list(queries), query=True)
    tokens = [tokenize(q) for q in queries]
    indexes = {cid: search_index(store, scope, space) for cid, scope in scopes.items()}
    if k is not None:
        return top_across(indexes, space, vectors, tokens, k, rrf_k)
    dense: list[dict[str, Ranked]] = [{} for _ in queries]
    sparse: list[dict[str, Ranked]] = [{} for _ in queries]
    for cid, index in indexes.items():
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
    user_turns: Mapping[str, Collection[str]] | None = None,
) -> dict[Space, dict[Key, FusedScore]]:
    """Per space, the RRF fusion of the global dense and BM25 lists of every query across the
    conversations of ``scopes`` (``vectors[cid]``: the dense query vectors for that
    conversation, one row per query), keyed (conversation, record id), best first. Each
    conversation's lists are cut at ``depth`` before the merge by score and the merged list
    again after it, so a global list is the exact top ``depth`` of all of them. With
    ``user_turns`` (per conversation, the ids of the user's messages), the turn space also
    fuses each list restricted to them, merged the same way (:mod:`qemem.retrieve.roles`)."""
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
        if space == "turn" and user_turns:
            lists.update(_user_lists(store, scopes, vectors, tokens, depth, user_turns))
        out[space] = fuse_lists(lists, rrf_k)
    return out


def _user_lists(
    store: MemoryStore,
    scopes: Mapping[str, Scope],
    vectors: Mapping[str, np.ndarray],
    tokens: Sequence[Sequence[str]],
    depth: int | None,
    user_turns: Mapping[str, Collection[str]],
) -> dict[ListKey, list[Key]]:
    """The turn lists restricted to the user's messages of each conversation, merged by score
    across conversations and cut at ``depth`` (see :func:`fused_spaces_across`)."""
    by_list: dict[ListKey, dict[str, Ranked]] = {}
    for cid, scope in scopes.items():
        owners = user_turns.get(cid)
        if not owners:
            continue
        index = search_index(store, scope, "turn")
        for key, ranked in restricted_rankings(index, owners, vectors[cid], tokens, depth).items():
            by_list.setdefault(key, {})[cid] = ranked
    return {key: merge_by_score(rankings)[:depth] for key, rankings in by_list.items()}
