"""Cleaning BEAM's message text: generator markers and runaway output.

BEAM's generator left a marker such as ``->-> 1,14`` (batch number, bullet numbers, sometimes
``N/A`` or a note in parentheses) at the end of many messages; a few markers sit inside a
message where the generator ran two messages together. A few messages are runaway output: an
ASCII drawing whose lines grow by one space for hundreds of lines, or one line repeated
thousands of times (one 100K message is 348,853 characters, mostly spaces). The rules here are
pure and count what they change, so the converter's manifest can say what it did.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

#: a marker ending the message: ``->->``, a batch number, a comma and the rest of its line
TAIL_MARKER = re.compile(r"\s*->->\s*\d+\s*,[^\n]*\Z")
#: a marker inside the message: ``->->``, a batch number, a comma and bullet numbers or N/A
INNER_MARKER = re.compile(r"[ \t]*->->\s*\d+\s*,\s*(?:N/A|\d+(?:\s*,\s*\d+)*\)?)?[ \t]*")
#: longest run of spaces and tabs kept (longer runs are cut to this length)
MAX_BLANK_RUN = 128
#: most consecutive copies of one non-blank line kept
MAX_REPEATED_LINES = 8

_BLANK_RUN = re.compile(rf"[ \t]{{{MAX_BLANK_RUN + 1},}}")


@dataclass(frozen=True)
class CleanText:
    """A cleaned message: its text, the markers removed from its end and from inside it,
    and its length before the runaway rules when they changed it (None: unchanged)."""

    text: str
    tail_markers: int
    inner_markers: int
    runaway_chars: int | None


def strip_markers(text: str) -> tuple[str, int, int]:
    """``text`` without its generator markers: (text, markers at the end, markers inside).
    The end marker goes with the rest of its line; an inner marker is replaced by a space."""
    stripped = text.rstrip()
    tail = 0
    match = TAIL_MARKER.search(stripped)
    if match:
        stripped, tail = stripped[: match.start()].rstrip(), 1
    stripped, inner = INNER_MARKER.subn(" ", stripped)
    return stripped.rstrip(), tail, inner


def tame_runaway(text: str) -> str:
    """``text`` with runs of more than ``MAX_BLANK_RUN`` spaces or tabs cut to that length
    and runs of more than ``MAX_REPEATED_LINES`` identical non-blank lines cut to that many
    copies; text without either is returned unchanged."""
    cut = _BLANK_RUN.sub(lambda m: m.group(0)[:MAX_BLANK_RUN], text)
    lines: list[str] = []
    for line, group in itertools.groupby(cut.split("\n")):
        copies = len(list(group))
        keep = copies if not line.strip() else min(copies, MAX_REPEATED_LINES)
        lines.extend([line] * keep)
    return "\n".join(lines)


def clean_message(text: str) -> CleanText:
    """The message ``text`` without generator markers and runaway output."""
    stripped, tail, inner = strip_markers(text)
    tamed = tame_runaway(stripped).rstrip()
    return CleanText(tamed, tail, inner, len(stripped) if tamed != stripped else None)
