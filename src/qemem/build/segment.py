"""Segmentation of a session into topical episodes: LLM grouping, deterministic repair,
fixed-size windows as the fallback."""

from __future__ import annotations

import math
from collections.abc import Sequence

from qemem.build.config import BuildConfig
from qemem.build.phatic import merge_phatic
from qemem.build.prompting import SegmentOut, degradable, request, session_date, turn_lines
from qemem.errors import LLMError
from qemem.llm.client import LLMClient
from qemem.llm.ledger import Ledger
from qemem.llm.stages import BUILD_SEGMENT
from qemem.llm.types import estimate_tokens
from qemem.models import Turn
from qemem.participants import Participants


def split_evenly(indices: list[int], max_size: int) -> list[list[int]]:
    """``indices`` cut into the fewest near-equal consecutive chunks of at most ``max_size``."""
    if not indices:
        return []
    parts = math.ceil(len(indices) / max(1, max_size))
    base, extra = divmod(len(indices), parts)
    out, start = [], 0
    for p in range(parts):
        size = base + (1 if p < extra else 0)
        out.append(indices[start : start + size])
        start += size
    return out


def within_tokens(indices: list[int], sizes: Sequence[int], budget: int) -> list[list[int]]:
    """``indices`` (in order) cut into consecutive parts whose ``sizes`` (tokens per index)
    add up to at most ``budget``, each as long as it can be; an index larger than the budget
    is a part of its own. Indices that fit stay one part."""
    parts: list[list[int]] = []
    total = 0
    for index in indices:
        if parts and total + sizes[index] <= budget:
            parts[-1].append(index)
            total += sizes[index]
        else:
            parts.append([index])
            total = sizes[index]
    return parts


def repair_groups(groups: Sequence[Sequence[int]], n_turns: int, max_size: int) -> list[list[int]]:
    """Turn a model's grouping of turn indices ``0..n_turns-1`` into a valid segmentation.

    Out-of-range and repeated indices are dropped (the first mention wins); every turn left out
    joins the group of the turn before it (the group after it at the start); groups are cut into
    runs of consecutive turns, in order; a run longer than ``max_size`` is split evenly. The
    result covers every turn exactly once. With no usable index at all, all turns form one
    group (then split by the cap).
    """
    owner: list[int | None] = [None] * n_turns
    for label, group in enumerate(groups):
        for index in group:
            if isinstance(index, int) and 0 <= index < n_turns and owner[index] is None:
                owner[index] = label
    previous = next((o for o in owner if o is not None), 0)
    filled: list[int] = []
    for mark in owner:
        if mark is not None:
            previous = mark
        filled.append(previous)
    runs: list[list[int]] = []
    for i, label in enumerate(filled):
        if runs and filled[runs[-1][-1]] == label:
            runs[-1].append(i)
        else:
            runs.append([i])
    return [chunk for run in runs for chunk in split_evenly(run, max_size)]


def windows(n_turns: int, size: int) -> list[list[int]]:
    """Fixed-size windows over ``n_turns`` turns, evened out so none is tiny."""
    return split_evenly(list(range(n_turns)), size)


def segment_turns(
    llm: LLMClient,
    turns: Sequence[Turn],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger | None = None,
    participants: Participants | None = None,
) -> tuple[list[list[int]], list[str], int]:
    """Group the turns of one session into episodes (indices into ``turns``), one LLM call
    per batch of at most ``config.batch_size`` turns (the prompt names ``participants``);
    with ``config.merge_phatic``, greeting- and closing-only runs then join their neighbour
    (:func:`~qemem.build.phatic.merge_phatic`, across a batch boundary too, so the episode may
    then exceed ``max_episode``).

    Long messages are spread over more calls rather than cut: a batch also ends before its
    messages pass ``config.batch_tokens`` tokens, and an episode before ``config.episode_tokens``
    (a longer message is a batch and an episode of its own).

    Returns the groups, the reasons of the batches that fell back to windows and how many runs
    merged.
    """
    groups: list[list[int]] = []
    fallbacks: list[str] = []
    sizes = [estimate_tokens(t.text) for t in turns]
    batches = [
        part
        for batch in split_evenly(list(range(len(turns))), config.batch_size)
        for part in within_tokens(batch, sizes, config.batch_tokens)
    ]
    for batch in batches:
        chunk = [turns[i] for i in batch]
        try:
            local = _segment_batch(llm, chunk, speakers, config, ledger, participants)
        except LLMError as exc:
            if not degradable(exc):
                raise
            first, last = chunk[0].id, chunk[-1].id
            fallbacks.append(f"turns {first}..{last}: {exc}")
            local = windows(len(chunk), config.window_size)
        for group in local:
            groups.extend(within_tokens([batch[i] for i in group], sizes, config.episode_tokens))
    if not config.merge_phatic:
        return groups, fallbacks, 0
    merged, count = merge_phatic(groups, turns, speakers)
    return merged, fallbacks, count


def _segment_batch(
    llm: LLMClient,
    turns: Sequence[Turn],
    speakers: Sequence[str],
    config: BuildConfig,
    ledger: Ledger | None,
    participants: Participants | None,
) -> list[list[int]]:
    req = request(
        BUILD_SEGMENT,
        speakers,
        config.segment_max_tokens,
        participants=participants,
        session_date=session_date(turns[0].timestamp),
        min_size=config.min_episode,
        max_size=config.max_episode,
        count=len(turns),
        lines=turn_lines(turns),
        inputs={"turns": turns},
    )
    out = llm.structured(req, SegmentOut, ledger=ledger).value
    shown = [[n - 1 for n in group] for group in out.groups]
    if not any(0 <= i < len(turns) for group in shown for i in group):
        raise LLMError("the model returned no valid message number")
    return repair_groups(shown, len(turns), config.max_episode)
