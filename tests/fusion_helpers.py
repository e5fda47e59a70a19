"""The reference a top-k fusion is checked against: fusing the complete lists, then cutting."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from qemem.retrieve.fusion import ListKey, fuse_lists

K = TypeVar("K", bound=Hashable)


def complete_then_cut(
    lists: Mapping[ListKey, Sequence[K]], k: int | None, owner: Callable[[K], Hashable]
) -> list[tuple[K, float, list[tuple[int, str, int]]]]:
    """Every item of the complete ``lists`` fused with its ranks, the first of each owner
    only, then cut to ``k`` (None: all)."""
    out: list[tuple[K, float, list[tuple[int, str, int]]]] = []
    seen: set[Hashable] = set()
    for item, entry in fuse_lists(lists).items():
        if owner(item) not in seen:
            seen.add(owner(item))
            out.append((item, entry.score, entry.ranks))
    return out if k is None else out[:k]
