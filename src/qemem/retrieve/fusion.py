"""Rank fusion and dense ranking: plain functions over ranked lists."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TypeVar

import numpy as np

from qemem.models import Reason

RRF_K = 60

K = TypeVar("K", bound=Hashable)
"""A ranked item: a record id, or (conversation, record id) across conversations."""


def rrf(rankings: Iterable[Sequence[K]], k: int = RRF_K) -> dict[K, float]:
    """Reciprocal rank fusion: score(m) = sum over lists of 1 / (k + rank of m), ranks from 1.

    A list in which ``m`` is absent adds nothing. Returns ids mapped to fused scores.
    """
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


ListKey = tuple[int, str]
"""A ranked list's name: (query index, method)."""


@dataclass
class FusedScore:
    """An id's fused score and where it was ranked: (query index, method, rank) per list."""

    score: float
    ranks: list[tuple[int, str, int]]
    via: list[str] = field(default_factory=list)

    def reasons(self) -> list[Reason]:
        """The ranked lists, then the facts that raised it (provenance), as reasons."""
        return [Reason("ranked", query=q, method=m, rank=r) for q, m, r in self.ranks] + [
            Reason("provenance", via=fid) for fid in self.via
        ]


def fuse_lists(lists: Mapping[ListKey, Sequence[K]], k: int = RRF_K) -> dict[K, FusedScore]:
    """Reciprocal rank fusion (:func:`~qemem.retrieve.fusion.rrf`) of named lists, ids best
    first (ties keep first appearance), each with its rank in every list that contains it."""
    scores = rrf(lists.values(), k)
    ranks: dict[K, list[tuple[int, str, int]]] = {}
    for (query, method), ranking in lists.items():
        for rank, rid in enumerate(ranking, start=1):
            ranks.setdefault(rid, []).append((query, method, rank))
    return {rid: FusedScore(score, ranks[rid]) for rid, score in ranked(scores)}


def best_items(
    scores: Mapping[K, float], k: int | None, owner: Callable[[K], Hashable] | None = None
) -> list[K]:
    """The items of ``scores`` in the order of :func:`ranked` (descending score, ties in
    insertion order), keeping the first item of each ``owner`` (default: each item is its own)
    and at most ``k`` of them (None: all). Only as many items are ordered as that takes: the
    best ``k`` first, twice as many while owners repeat."""
    identity: Callable[[K], Hashable] = owner or (lambda item: item)
    want = len(scores) if k is None else min(k, len(scores))
    if want <= 0:
        return []
    take = want
    while True:
        top = (
            heapq.nlargest(take, scores.items(), key=itemgetter(1))
            if take < len(scores)
            else sorted(scores.items(), key=itemgetter(1), reverse=True)
        )
        out: list[K] = []
        seen: set[Hashable] = set()
        for item, _ in top:
            key = identity(item)
            if key not in seen:
                seen.add(key)
                out.append(item)
                if len(out) == want:
                    return out
        if take >= len(scores):
            return out
        take *= 2


def fuse_top(
    lists: Mapping[ListKey, Sequence[K]],
    k: int | None,
    rrf_k: int = RRF_K,
    owner: Callable[[K], Hashable] | None = None,
) -> dict[K, FusedScore]:
    """The best ``k`` items of :func:`fuse_lists` (None: all), at most one per ``owner`` (see
    :func:`best_items`), with the same scores, order and ranks (each list holds an item at
    most once); every item is scored, but ranks are looked up only for the items kept."""
    scores = rrf(lists.values(), rrf_k)
    kept = best_items(scores, k, owner)
    ranks: dict[K, list[tuple[int, str, int]]] = {item: [] for item in kept}
    for (query, method), ranking in lists.items():
        if len(kept) * 8 < len(ranking):
            for item in kept:
                with suppress(ValueError):
                    ranks[item].append((query, method, ranking.index(item) + 1))
            continue
        for rank, item in enumerate(ranking, start=1):
            if item in ranks:
                ranks[item].append((query, method, rank))
    return {item: FusedScore(scores[item], ranks[item]) for item in kept}


def ranked(scores: Mapping[K, float]) -> list[tuple[K, float]]:
    """Items by descending score; ties keep insertion order (stable)."""
    return sorted(scores.items(), key=lambda item: -item[1])


def cosine_rank(
    matrix: np.ndarray, query: np.ndarray, k: int | None = None
) -> list[tuple[int, float]]:
    """Rows of ``matrix`` ranked by dot product with ``query`` (cosine for unit vectors),
    best first, as (row index, similarity); at most ``k``."""
    if matrix.shape[0] == 0:
        return []
    sims = matrix @ query
    if k is not None and k < len(sims):
        top = np.argpartition(-sims, k)[:k]
        order = top[np.argsort(-sims[top], kind="stable")]
    else:
        order = np.argsort(-sims, kind="stable")
    return [(int(i), float(sims[i])) for i in order]
