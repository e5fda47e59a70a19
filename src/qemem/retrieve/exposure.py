"""The exposure order of a pool: candidates of every space interleaved by rank, each exposing
units of turns (:class:`~qemem.passages.Units`: a turn, or a passage of a long one), cut by
per-space token budgets.

A turn that fits in one passage is one unit, so on short messages (LoCoMo) a unit is a turn
and the order counts turns as before passages existed. A long turn is one unit per passage:
a hit shows the passage that matched and its neighbours, not the whole reply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from qemem.models import Exposure, Space, Unit


def interleave(
    rankings: Mapping[Space, Sequence[str]], weights: Mapping[Space, float]
) -> list[tuple[Space, str]]:
    """Merge per-space rankings by within-space rank, not by score (fused scores of different
    spaces are not on one scale): the r-th item (from 1) of a space with weight w takes place
    r / w, ties in the order of ``rankings``. Weight 1 for every space is a round robin;
    weight 0.5 gives a space one place for every two of a weight-1 space; weight 0 (or a
    missing weight) leaves the space out."""
    keyed: list[tuple[float, int, Space, str]] = []
    for order, (space, ids) in enumerate(rankings.items()):
        weight = weights.get(space, 0.0)
        if weight <= 0:
            continue
        keyed += [(rank / weight, order, space, rid) for rank, rid in enumerate(ids, start=1)]
    return [(space, rid) for _, _, space, rid in sorted(keyed, key=lambda k: (k[0], k[1]))]


@dataclass(frozen=True)
class Budgets:
    """Token budgets of an exposure order: per space (None: no limit for that space) and for
    the whole order (``total``, None: no cap)."""

    spaces: Mapping[Space, int | None]
    total: int | None = None


def exposure_order(
    candidates: Sequence[tuple[Space, str]],
    exposes: Mapping[tuple[Space, str], Sequence[Unit]],
    cost: Mapping[Unit, int] | None = None,
    budgets: Budgets | None = None,
    own: Mapping[tuple[Space, str], int] | None = None,
) -> list[Exposure]:
    """Walk ``candidates`` in order; each exposes its units (``exposes``) not exposed before
    and costs their summed ``cost`` (per unit, default 1) plus its own line (``own``, default
    0). With ``budgets``, a candidate that would take its space past the space's budget closes
    that space (no later candidate of it is taken: the strict rule, per space), and one that
    would take the whole order past ``budgets.total`` ends it. A candidate that exposes
    nothing new is kept (its own text is still evidence)."""
    seen: set[Unit] = set()
    spent: dict[Space, int] = {}
    total = 0
    closed: set[Space] = set()
    out: list[Exposure] = []
    for key in candidates:
        space = key[0]
        if space in closed:
            continue
        new = tuple(u for u in dict.fromkeys(exposes.get(key, ())) if u not in seen)
        price = sum(1 if cost is None else cost.get(u, 1) for u in new)
        price += (own or {}).get(key, 0)
        if budgets is not None:
            if budgets.total is not None and total + price > budgets.total:
                break
            limit = budgets.spaces.get(space)
            if limit is not None and spent.get(space, 0) + price > limit:
                closed.add(space)
                continue
        spent[space] = spent.get(space, 0) + price
        total += price
        seen.update(new)
        out.append(Exposure(space, key[1], new))
    return out
