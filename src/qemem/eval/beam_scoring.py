"""BEAM's scoring, written from its published method (Tavakoli et al., ICLR 2026).

* Rubric ("nugget") judging: each rubric item of a probe is judged 0, 0.5 or 1 against the
  answer; the probe's score is the mean of its item scores (:func:`rubric_score`).
* Event ordering: the answer's items (its non-blank lines, each matched to at most one
  reference item by the judge) against the reference order (the probe's rubric). Over the
  union of reference and answered items (reference first, then unmatched answered items), an
  item's rank in a list is its position there, and an item absent from a list is tied last
  (rank ``len(union) + 1``); Kendall's tau-b between the two rank vectors, normalised to
  ``(tau_b + 1) / 2``, is ``tau_norm`` (:func:`ordering_score`). Precision, recall and F1 of
  the matched items, and ``tau_norm x F1``, are kept beside it. BEAM's published tables use
  ``tau_norm`` as an event-ordering probe's score (its ``report_results.py`` reads
  ``tau_norm`` for that ability and the rubric mean for the nine others), and so do we.
* Averaging: per chat and ability, the mean of the probe scores; per ability, the mean over
  the chats that have it; overall, the unweighted mean of the ability scores
  (:func:`beam_average`). Intervals resample chats (:func:`chat_bootstrap`).

Where the released evaluation code departs from the method it describes, we follow the
method and say so in the docs: it casts item scores to integers for nine abilities (a 0.5
becomes 0), and it counts blank answer lines as answered items (we drop them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the scores a rubric item can get
ITEM_SCORES: tuple[float, ...] = (0.0, 0.5, 1.0)
#: the ability scored by the ordering of its items
ORDERING_ABILITY = "event_ordering"


def rubric_score(items: Sequence[float]) -> float:
    """A probe's score: the mean of its rubric items' scores (each 0, 0.5 or 1)."""
    if not items:
        raise ValueError("a probe needs at least one rubric item score")
    bad = [s for s in items if s not in ITEM_SCORES]
    if bad:
        raise ValueError(f"rubric item scores must be 0, 0.5 or 1, got {bad}")
    return sum(items) / len(items)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two equally long rankings (ties allowed); None when either ranking
    is constant (tau-b is undefined there)."""
    if len(x) != len(y):
        raise ValueError(f"rankings differ in length: {len(x)} and {len(y)}")
    concordant = discordant = tied_x = tied_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                tied_x, tied_y = tied_x + 1, tied_y + 1
            elif dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    pairs = len(x) * (len(x) - 1) // 2
    denominator = math.sqrt((pairs - tied_x) * (pairs - tied_y))
    return (concordant - discordant) / denominator if denominator else None


def ordering_ranks(
    reference: Sequence[str], answered: Sequence[str]
) -> tuple[list[str], list[int], list[int]]:
    """The union of ``reference`` and ``answered`` (reference first, each item once) and each
    list's rank of every union item: its 1-based position (first occurrence), or
    ``len(union) + 1`` when the list lacks it."""
    union = list(dict.fromkeys([*reference, *answered]))
    tie = len(union) + 1

    def ranks(items: Sequence[str]) -> list[int]:
        position: dict[str, int] = {}
        for n, item in enumerate(items, start=1):
            position.setdefault(item, n)
        return [position.get(u, tie) for u in union]

    return union, ranks(reference), ranks(answered)


@dataclass(frozen=True)
class OrderingScore:
    """An answer's order against the reference: matched-item precision, recall and F1, the
    normalised tau-b, and their product (``final``)."""

    precision: float
    recall: float
    f1: float
    tau_norm: float
    final: float


def aligned_items(
    reference: Sequence[str], lines: Sequence[str], matches: Sequence[int | None]
) -> list[str]:
    """The answered items: each answer line replaced by the reference item it was matched to
    (``matches[i]``: 0-based index into ``reference``, or None), a reference item taken at most
    once (a later line matched to a taken item stays itself)."""
    if len(matches) != len(lines):
        raise ValueError(f"{len(matches)} matches for {len(lines)} answer lines")
    taken: set[int] = set()
    items = []
    for line, match in zip(lines, matches, strict=True):
        if match is not None and 0 <= match < len(reference) and match not in taken:
            taken.add(match)
            items.append(reference[match])
        else:
            items.append(line)
    return items


def ordering_score(reference: Sequence[str], answered: Sequence[str]) -> OrderingScore:
    """Score the answered items (already aligned, :func:`aligned_items`) against the
    reference order. No answered items score 0; a single item answered and referenced scores
    ``tau_norm`` 1 (the only cases where tau-b is undefined)."""
    if not reference:
        raise ValueError("an ordering probe needs reference items")
    ref, ans = set(reference), set(answered)
    tp = len(ref & ans)
    fp = sum(item not in ref for item in answered)
    fn = sum(item not in ans for item in reference)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    if not answered:
        return OrderingScore(precision, recall, f1, 0.0, 0.0)
    _, x, y = ordering_ranks(reference, answered)
    tau = kendall_tau_b(x, y)
    tau_norm = (tau + 1) / 2 if tau is not None else 1.0
    return OrderingScore(precision, recall, f1, tau_norm, tau_norm * f1)


@dataclass(frozen=True)
class ProbeScore:
    """One probe's score, with the chat and ability it counts under."""

    chat: str
    ability: str
    score: float


@dataclass(frozen=True)
class BeamAverage:
    """Per ability (mean over chats of each chat's mean) and overall (mean over abilities)."""

    by_ability: dict[str, float]
    overall: float
    chats: int


def beam_average(scores: Sequence[ProbeScore]) -> BeamAverage:
    """BEAM's averaging: per chat and ability the mean probe score; per ability the mean over
    the chats that have it; overall the unweighted mean of the abilities."""
    if not scores:
        raise ValueError("no probe scores to average")
    cells: dict[str, dict[str, list[float]]] = {}
    for s in scores:
        cells.setdefault(s.ability, {}).setdefault(s.chat, []).append(s.score)
    by_ability = {
        ability: sum(sum(v) / len(v) for v in chats.values()) / len(chats)
        for ability, chats in sorted(cells.items())
    }
    overall = sum(by_ability.values()) / len(by_ability)
    return BeamAverage(by_ability, overall, len({s.chat for s in scores}))


def chat_bootstrap(
    scores: Sequence[ProbeScore],
    *,
    n_resamples: int = 2_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of :func:`beam_average` (each ability and ``overall``) over
    resamples of the chats (drawn with replacement, as many as there are; a chat drawn twice
    counts twice). Empty with fewer than two chats."""
    chats = sorted({s.chat for s in scores})
    if len(chats) < 2:
        return {}
    abilities = sorted({s.ability for s in scores})
    cells: dict[tuple[str, str], list[float]] = {}
    for s in scores:
        cells.setdefault((s.chat, s.ability), []).append(s.score)
    means = np.zeros((len(chats), len(abilities)))
    present = np.zeros((len(chats), len(abilities)))
    for (chat, ability), values in cells.items():
        i, j = chats.index(chat), abilities.index(ability)
        means[i, j], present[i, j] = sum(values) / len(values), 1.0
    drawn = np.random.default_rng(seed).integers(0, len(chats), size=(n_resamples, len(chats)))
    sums, counts = means[drawn].sum(axis=1), present[drawn].sum(axis=1)
    has = counts > 0
    by_ability = np.divide(sums, counts, out=np.zeros_like(sums), where=has)
    overall = (by_ability * has).sum(axis=1) / has.sum(axis=1)
    alpha = (1 - confidence) / 2

    def interval(values: Any) -> tuple[float, float]:
        low, high = np.quantile(values, [alpha, 1 - alpha])
        return float(low), float(high)

    out = {a: interval(by_ability[has[:, j], j]) for j, a in enumerate(abilities)}
    out["overall"] = interval(overall)
    return out
