"""Stratified samples with population weights, and population-weighted shares with
stratified-bootstrap confidence intervals: what every audit (the memory audit, and the claim
and answer audits of a run folder) samples and reports with.

A stratum of ``N`` units sampled ``n`` gives each drawn unit the weight ``N / n``, so a
weighted share estimates the share over the whole population, not over the sample.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from qemem.errors import InputError

T = TypeVar("T")

#: resamples of the stratified bootstrap behind every audit interval
N_RESAMPLES = 2_000


@dataclass(frozen=True)
class Drawn:
    """One sampled unit, its stratum and its population weight (stratum size / sample size)."""

    item: Any
    stratum: str
    weight: float


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """Sample sizes per stratum: proportional (largest remainder), at least one per stratum
    when ``n`` allows, never more than a stratum holds."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    floor = 1 if n >= len(sizes) else 0
    quota = {k: n * v / total for k, v in sizes.items()}
    alloc = {k: min(sizes[k], max(floor, int(q))) for k, q in quota.items()}
    while sum(alloc.values()) > n:  # the one-per-stratum floor overshot: trim the largest
        largest = max(sorted(alloc), key=lambda k: alloc[k])
        alloc[largest] -= 1
    order = sorted(sizes, key=lambda k: (-(quota[k] - int(quota[k])), k))
    while sum(alloc.values()) < n:
        for key in order:
            if sum(alloc.values()) < n and alloc[key] < sizes[key]:
                alloc[key] += 1
    return alloc


def stratified_sample(
    items: Sequence[T], stratum: Callable[[T], str], n: int, seed: int
) -> list[Drawn]:
    """A stratified sample of ``n`` of ``items`` (all when fewer), reproducible from ``seed``."""
    if n < 1:
        raise InputError(f"--sample must be at least 1, got {n}")
    groups: dict[str, list[T]] = defaultdict(list)
    for item in items:
        groups[stratum(item)].append(item)
    alloc = allocate({k: len(v) for k, v in groups.items()}, n)
    rng = random.Random(seed)
    drawn: list[Drawn] = []
    for key in sorted(groups):
        size = alloc[key]
        if size:
            chosen = sorted(rng.sample(range(len(groups[key])), size))
            weight = len(groups[key]) / size
            drawn.extend(Drawn(groups[key][i], key, weight) for i in chosen)
    return drawn


def weighted_share(
    values: Sequence[float],
    weights: Sequence[float],
    strata: Sequence[Hashable],
    *,
    seed: int = 0,
    denominators: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Population-weighted ratio ``sum(w*v) / sum(w*d)`` (``d`` 1 by default) with a 95%
    percentile interval of a bootstrap that resamples within each stratum."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    d = np.ones_like(v) if denominators is None else np.asarray(denominators, dtype=np.float64)
    if v.size == 0 or float((w * d).sum()) == 0.0:
        return {"share": None, "ci95": None, "n": int(v.size)}
    share = float((w * v).sum() / (w * d).sum())
    rng = np.random.default_rng(seed)
    labels = np.asarray([str(s) for s in strata], dtype=object)
    groups = [np.flatnonzero(labels == key) for key in sorted(set(labels.tolist()))]
    draws = np.empty(N_RESAMPLES, dtype=np.float64)
    for b in range(N_RESAMPLES):
        idx = np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups])
        den = float((w[idx] * d[idx]).sum())
        draws[b] = float((w[idx] * v[idx]).sum()) / den if den else share
    low, high = np.quantile(draws, [0.025, 0.975])
    return {
        "share": round(share, 4),
        "ci95": [round(float(low), 4), round(float(high), 4)],
        "n": int(v.size),
    }
