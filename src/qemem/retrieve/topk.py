"""Exact top-k reciprocal rank fusion from lists ranked only to a depth.

Each list is held as scores (:class:`ScoreList`): its entries by descending score, ties by
index. Fusing complete lists (:func:`~qemem.retrieve.fusion.fuse_top`) walks every entry of
every list in Python. :func:`fuse_exact` ranks each list only to a depth ``D``, looks up the
exact rank in every list of each item it saw (so their fused scores, first appearances and
ranks are exact), and keeps the best ``k``. An item it did not see ranks below ``D`` in every
list not yet complete, so it adds at most ``1 / (rrf_k + D + 1)`` per such list; when the
k-th kept item scores above that sum, no unseen item can reach the top ``k``. Otherwise
``D`` doubles, until every list is complete.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np

from qemem.retrieve.fusion import RRF_K, FusedScore, ListKey

MIN_DEPTH = 50
"""The least depth a fusion ranks each list to first (else four times ``k``)."""


class ScoreList:
    """A ranking held as scores: the indices of ``scores`` (only those above zero when
    ``positive``) by descending score, ties by index, as an exact stable sort would give."""

    def __init__(self, scores: np.ndarray, *, positive: bool = False) -> None:
        self.scores = scores
        self.members: np.ndarray | None = np.flatnonzero(scores > 0) if positive else None
        self.size = len(scores) if self.members is None else len(self.members)
        self._ascending: np.ndarray | None = None

    def _values(self) -> np.ndarray:
        return self.scores if self.members is None else self.scores[self.members]

    def head(self, depth: int) -> list[int]:
        """The first ``depth`` indices of the ranking (all when it is shorter)."""
        values = self._values()
        if depth >= self.size:
            order = np.argsort(-values, kind="stable")
        else:
            threshold = np.partition(values, self.size - depth)[self.size - depth]
            near = np.flatnonzero(values >= threshold)
            order = near[np.argsort(-values[near], kind="stable")][:depth]
        found = order if self.members is None else self.members[order]
        return [int(i) for i in found]

    def ranks(self, items: Sequence[int]) -> list[int | None]:
        """The rank (from 1) of each index of ``items`` in the ranking, None where absent."""
        if self._ascending is None:
            self._ascending = np.sort(self._values())
        values = self.scores[np.asarray(items, dtype=np.intp)]
        right = np.searchsorted(self._ascending, values, side="right")
        tied = right - np.searchsorted(self._ascending, values, side="left")
        out: list[int | None] = []
        for n, item in enumerate(items):
            value = values[n]
            if self.members is not None and not value > 0:
                out.append(None)
                continue
            rank = self.size - int(right[n]) + 1
            if tied[n] > 1:  # equal scores rank by index; ``value > 0`` keeps to members
                rank += int(np.count_nonzero(self.scores[:item] == value))
            out.append(rank)
        return out


def start_depth(k: int) -> int:
    """The depth a fusion of the best ``k`` ranks each list to first."""
    return max(4 * k, MIN_DEPTH)


def fuse_exact(
    lists: Mapping[ListKey, ScoreList],
    k: int,
    rrf_k: int = RRF_K,
    owner: Callable[[int], Hashable] | None = None,
    depth: int | None = None,
) -> dict[int, FusedScore]:
    """The best ``k`` items of the RRF fusion of the complete ``lists``, at most one per
    ``owner`` (the first in fused order), exactly as :func:`~qemem.retrieve.fusion.fuse_top`
    gives them (same items, order, scores and ranks; ties by first appearance in the lists'
    order), from lists ranked to ``depth`` (None: :func:`start_depth`), doubled until the
    result is proven exact."""
    if k <= 0:
        return {}
    depth = max(1, depth or start_depth(k))
    while True:
        fused = _fuse_seen(lists, depth, rrf_k)
        kept = _first_of_owners(fused, k, owner)
        open_lists = sum(1 for ranking in lists.values() if ranking.size > depth)
        if not open_lists:
            return kept
        if len(kept) == k and next(reversed(kept.values())).score > unseen_bound(
            open_lists, depth, rrf_k
        ):
            return kept
        depth *= 2


def unseen_bound(open_lists: int, depth: int, rrf_k: int = RRF_K) -> float:
    """The most an item missing from the first ``depth`` entries of ``open_lists`` lists (and
    from the rest, complete) can score: ``1 / (rrf_k + depth + 1)`` per list, summed in floats
    as the fusion sums (rounding is monotone, so no such item's float score exceeds it)."""
    bound = 0.0
    for _ in range(open_lists):
        bound += 1.0 / (rrf_k + depth + 1)
    return bound


def _fuse_seen(lists: Mapping[ListKey, ScoreList], depth: int, rrf_k: int) -> dict[int, FusedScore]:
    """Every item in the first ``depth`` entries of any list, with its exact rank in every
    list and its exact fused score, in fused order (descending score, ties by first
    appearance in the complete lists: the first list holding it, then its rank there)."""
    heads = [ranking.head(depth) for ranking in lists.values()]
    seen = list(dict.fromkeys(item for head in heads for item in head))
    entries = {item: FusedScore(0.0, []) for item in seen}
    first: dict[int, tuple[int, int]] = {}
    for n, ((query, method), ranking) in enumerate(lists.items()):
        at = {item: rank for rank, item in enumerate(heads[n], start=1)}
        if ranking.size > depth:
            missing = [item for item in seen if item not in at]
            if missing:
                looked = ranking.ranks(missing)
                at |= {i: r for i, r in zip(missing, looked, strict=True) if r is not None}
        for item in seen:
            rank = at.get(item)
            if rank is not None:
                entry = entries[item]
                entry.score += 1.0 / (rrf_k + rank)
                entry.ranks.append((query, method, rank))
                first.setdefault(item, (n, rank))
    order = sorted(seen, key=lambda item: (-entries[item].score, first[item]))
    return {item: entries[item] for item in order}


def _first_of_owners(
    fused: Mapping[int, FusedScore], k: int, owner: Callable[[int], Hashable] | None
) -> dict[int, FusedScore]:
    """The first ``k`` items of ``fused`` in its order, the first of each ``owner`` only."""
    kept: dict[int, FusedScore] = {}
    owners: set[Hashable] = set()
    for item, entry in fused.items():
        key = item if owner is None else owner(item)
        if key not in owners:
            owners.add(key)
            kept[item] = entry
            if len(kept) == k:
                break
    return kept
