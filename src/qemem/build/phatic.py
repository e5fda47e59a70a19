"""Greeting-only and closing-only runs of a segmentation, merged into their neighbour.

A segmentation model often cuts a session's goodbyes ("Thanks, Mel! Enjoy your day!" /
"Bye!") into an episode of their own, one with no facts whose narrative only says that two
people said goodbye; an opening "Hey! Long time no talk!" can end up alone the same way. A run
whose every line is small talk (:func:`small_talk`) and that has a greeting or a goodbye
(:func:`line_kind`) joins the episode it closes or opens (:func:`merge_phatic`). Word lists:
:data:`qemem.lexicon.PHATIC_WORDS`, ``GREETING_PHRASES``, ``CLOSING_PHRASES``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from qemem.lexicon import (
    CLOSING_PHRASES,
    FUNCTION_WORDS,
    GREETING_PHRASES,
    PHATIC_WORDS,
    REPLY_WORDS,
)
from qemem.models import Turn

RunKind = Literal["greeting", "closing"]
MAX_CONTENT_WORDS = 2
"""Content words a small-talk line may have. Measured on the episodes a capable model built
for LoCoMo conv-26, -30 and -41 (``benchmarks/episode_context.py``): at 2 the rule finds the
two goodbye episodes (no facts each); at 4 it would also take conv-26's opening "Hey
Caroline! ... I'm swamped with the kids & work" (three facts)."""

_GREETING = re.compile(r"\b(?:" + "|".join(GREETING_PHRASES) + r")\b", re.IGNORECASE)
_CLOSING = re.compile(r"\b(?:" + "|".join(CLOSING_PHRASES) + r")\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z']*")
_PHOTO = re.compile(r"\[shares [^\]]*\]", re.IGNORECASE)


def content_words(text: str, names: Sequence[str]) -> list[str]:
    """The words of a line that carry content: not function, reply or small-talk words, not
    of one or two letters, not a speaker's name or its short form ("Mel" of "Melanie");
    contractions cut ("store's" -> "store"), shared-photo captions ignored."""
    lowered = [n.lower() for name in names for n in name.split()]
    out = []
    for word in _WORD.findall(_PHOTO.sub(" ", text).lower().replace("’", "'")):
        base = re.sub(r"'(?:s|re|ve|ll|d|m|t)$", "", word)
        if len(base) <= 2 or {word, base} & (FUNCTION_WORDS | REPLY_WORDS | PHATIC_WORDS):
            continue
        if any(n.startswith(base) for n in lowered if len(base) >= 3):
            continue
        out.append(base)
    return out


def small_talk(text: str, names: Sequence[str]) -> bool:
    """Whether a line is small talk: at most ``MAX_CONTENT_WORDS`` content words."""
    return len(content_words(text, names)) <= MAX_CONTENT_WORDS


def line_kind(text: str) -> RunKind | None:
    """ "closing" when a line says goodbye ("Bye!", "Talk to you soon", "Take care"), else
    "greeting" when it greets ("Hey!", "Long time no see"), else None."""
    if _CLOSING.search(text):
        return "closing"
    if _GREETING.search(text):
        return "greeting"
    return None


def run_kind(turns: Sequence[Turn], names: Sequence[str]) -> RunKind | None:
    """ "closing" when every turn of a run is small talk and one says goodbye, "greeting" when
    every turn is small talk and one greets (and none says goodbye), else None."""
    if not turns or not all(small_talk(t.text, names) for t in turns):
        return None
    kinds = {line_kind(t.text) for t in turns}
    if "closing" in kinds:
        return "closing"
    return "greeting" if "greeting" in kinds else None


def merge_phatic(
    groups: Sequence[Sequence[int]], turns: Sequence[Turn], names: Sequence[str]
) -> tuple[list[list[int]], int]:
    """(groups, how many runs merged) with each closing-only run (:func:`run_kind`) joined to
    the group before it and each greeting-only run to the group after it; ``groups`` are
    consecutive runs of indices into ``turns`` (one session), in order.

    A closing-only run with nothing before it joins the group after it, a greeting-only run
    with nothing after it the group before it (a greeting-only run waiting for its group goes
    along with a closing-only run that follows it); a session made only of such runs becomes one
    group. Groups stay consecutive and cover the same turns.
    """
    out: list[list[int]] = []
    waiting: list[int] = []
    for group in groups:
        kind = run_kind([turns[i] for i in group], names)
        if kind == "closing" and out:
            out[-1].extend([*waiting, *group])
            waiting = []
        elif kind is not None:
            waiting.extend(group)
        else:
            out.append([*waiting, *group])
            waiting = []
    if waiting:
        if out:
            out[-1].extend(waiting)
        else:
            out.append(waiting)
    return out, len(groups) - len(out)
