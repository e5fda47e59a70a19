"""What both audits share: reading a run folder, stratified samples with population weights,
weighted shares with stratified-bootstrap confidence intervals, and writing the audit record."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from qemem.errors import InputError
from qemem.eval.results import load_records
from qemem.eval.sources import load_run_sources

T = TypeVar("T")
Record = dict[str, Any]

#: resamples of the stratified bootstrap behind every audit interval
N_RESAMPLES = 2_000


@dataclass(frozen=True)
class Run:
    """A run folder's records and source records (by conversation)."""

    path: Path
    records: list[Record]
    sources: dict[str, Any]


def load_run(path: Path) -> Run:
    """The run folder ``path`` (its results.jsonl and sources.json)."""
    results = path / "results.jsonl"
    if not results.exists():
        raise InputError(f"{path} holds no results.jsonl: give the folder of a LoCoMo run")
    return Run(path, load_records(results), load_run_sources(path) or {})


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


def write_audit(out: Path, name: str, data: Mapping[str, Any]) -> Path:
    """Write the audit record ``name`` (``audit-claims.json`` ...) into the run folder."""
    path = out / name
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", "utf-8")
    return path


def session_date(sources: Mapping[str, Any], session: object) -> str:
    """The ISO date of ``session`` in one conversation's source records ('' when unknown)."""
    return str(sources.get("sessions", {}).get(str(session), ""))[:10]


def record_cards(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A record's cards: from its answer's evidence (format 2), else its own list."""
    answer = record.get("answer")
    if isinstance(answer, Mapping):
        cards = answer.get("evidence", {}).get("cards")
        if cards is not None:
            return list(cards)
    return list(record.get("cards") or [])
