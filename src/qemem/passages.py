"""Passages: a long message cut into pieces that search and prompts can take one at a time.

A turn whose text fits in one passage (:data:`PASSAGE_CHARS` characters or fewer) is one
passage, the whole turn. A longer one is cut by :func:`split_passages` at the strongest
boundary that gives pieces of at most the passage size: between blocks (paragraphs separated by
blank lines; a fenced code block is one block, blank lines inside it included), then between
lines, then between sentences, then between words, and only as a last resort inside a word.
Consecutive pieces are packed back together while they fit, so passages are as long as the
size allows and break where the text breaks. A passage is a character span ``(start, end)`` of
its turn's text: it starts at the beginning of a line when it can (so a code line keeps its
indentation) and holds no leading blank lines and no trailing whitespace; every character
that is not whitespace lies in exactly one passage.

Spans, not passage numbers, address passages: text and spans never change once stored, so a
span keeps naming the same words even after the passage size is tuned again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence

from qemem.models import Span, Turn, Unit, search_text

PASSAGE_CHARS = 1200
"""The longest passage, in characters (about 300 tokens at 4 characters a token); chosen on
BEAM-100K and LoCoMo (``docs/passages.md``). Every LoCoMo turn is shorter, so each is one
passage."""

_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?:;])[\"')\]]*\s+(?=\S)")
_SPACE = re.compile(r"\s+")


def split_passages(text: str, size: int = PASSAGE_CHARS) -> list[Span]:
    """The passages of ``text`` (see the module doc), in text order; one span covering the
    trimmed text when it fits in ``size`` characters; none for a blank text."""
    if size < 1:
        raise ValueError(f"passage size must be at least 1 character, got {size}")
    whole = _trim(text, 0, len(text))
    if whole is None:
        return []
    if whole[1] - whole[0] <= size:
        return [whole]
    return _pack(text, _pieces(text, whole[0], whole[1], size, 0), size)


def is_whole(text: str, spans: list[Span]) -> bool:
    """Whether ``spans`` are one passage holding all of ``text`` that is not whitespace."""
    return len(spans) <= 1 and (not spans or spans[0] == _trim(text, 0, len(text)))


def _trim(text: str, start: int, end: int) -> Span | None:
    """``[start, end)`` without leading blank lines and trailing whitespace; a span that does
    not start a line keeps no leading whitespace either. None when nothing is left."""
    while end > start and text[end - 1].isspace():
        end -= 1
    if end <= start:
        return None
    first = start
    while first < end and text[first].isspace():
        if text[first] == "\n":
            start = first + 1
        first += 1
    if start > 0 and text[start - 1] != "\n":
        start = first
    return start, end


def _pieces(text: str, start: int, end: int, size: int, level: int) -> list[Span]:
    """Spans of at most ``size`` characters covering the non-blank text of ``[start, end)``,
    cut at the boundaries of ``level`` and, for a part still too long, the next levels."""
    if end - start <= size:
        trimmed = _trim(text, start, end)
        return [trimmed] if trimmed else []
    if level == len(_SPLITTERS):
        return [s for i in range(start, end, size) if (s := _trim(text, i, min(end, i + size)))]
    out: list[Span] = []
    for part_start, part_end in _SPLITTERS[level](text, start, end):
        out += _pieces(text, part_start, part_end, size, level + 1)
    return out


def _blocks(text: str, start: int, end: int) -> Iterator[Span]:
    """Blocks: runs of lines separated by blank lines; a fenced code block stays one block."""
    block_start, fenced = start, False
    for line_start, line_end in _lines(text, start, end):
        line = text[line_start:line_end]
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and not line.strip():
            if line_start > block_start:
                yield block_start, line_start
            block_start = line_end
    if block_start < end:
        yield block_start, end


def _lines(text: str, start: int, end: int) -> Iterator[Span]:
    """Lines of ``[start, end)``, each with its newline."""
    while start < end:
        stop = text.find("\n", start, end)
        stop = end if stop < 0 else stop + 1
        yield start, stop
        start = stop


def _sentences(text: str, start: int, end: int) -> Iterator[Span]:
    """Sentences: cut after ., !, ?, : or ; (and closing quotes or brackets) and whitespace."""
    for match in _SENTENCE_END.finditer(text, start, end):
        yield start, match.end()
        start = match.end()
    if start < end:
        yield start, end


def _words(text: str, start: int, end: int) -> Iterator[Span]:
    """Words with the whitespace after them."""
    for match in _SPACE.finditer(text, start, end):
        if match.end() > start:
            yield start, match.end()
            start = match.end()
    if start < end:
        yield start, end


_SPLITTERS: tuple[Callable[[str, int, int], Iterator[Span]], ...] = (
    _blocks,
    _lines,
    _sentences,
    _words,
)


def _pack(text: str, pieces: list[Span], size: int) -> list[Span]:
    """Consecutive pieces joined while the joined span stays within ``size`` characters."""
    out: list[Span] = []
    for start, end in pieces:
        if out and end - out[-1][0] <= size:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def unit_tokens(turn: Turn, span: Span | None = None) -> int:
    """A unit's length in tokens, tokenizer-free: ceil(characters of "Speaker: text" / 4)
    (about 4 characters per token for English text with common tokenizers); ``span``: one
    passage of the turn."""
    return math.ceil(len(search_text(turn, span)) / 4)


def turn_tokens(turn: Turn) -> int:
    """A whole turn's length in tokens (:func:`unit_tokens`)."""
    return unit_tokens(turn)


class Units:
    """The units of a conversation in conversation order: each turn, or each passage of a
    long turn (a :data:`~qemem.models.Unit`), with its session and its cost in tokens.
    ``passages``: turn id -> spans of the turns that have passages (the others are one unit
    each)."""

    def __init__(self, turns: Sequence[Turn], passages: Mapping[str, Sequence[Span]]) -> None:
        self.order: list[Unit] = []
        self.session: list[int] = []
        self.cost: dict[Unit, int] = {}
        self.of_turn: dict[str, list[Unit]] = {}
        for turn in turns:
            spans: Sequence[Span | None] = passages.get(turn.id) or [None]
            units = [(turn.id, span) for span in spans]
            self.of_turn[turn.id] = units
            for unit in units:
                self.order.append(unit)
                self.session.append(turn.session)
                self.cost[unit] = unit_tokens(turn, unit[1])
        self.index = {unit: n for n, unit in enumerate(self.order)}

    def window(self, unit: Unit, width: int, tokens: int | None = None) -> list[Unit]:
        """``unit`` with up to ``width`` units each side in its session, in order; with
        ``tokens``, each side stops before the unit that would take it over that many tokens
        (nearest first), so a short message brings its short neighbours and not the long
        replies beside it."""
        at = self.index[unit]
        out = [at]
        for step in (-1, 1):
            spent, n = 0, at
            for _ in range(width):
                n += step
                if not 0 <= n < len(self.order) or self.session[n] != self.session[at]:
                    break
                spent += self.cost[self.order[n]]
                if tokens is not None and spent > tokens:
                    break
                out.append(n)
        return [self.order[n] for n in sorted(out)]

    def representative(self, turn_id: str, ranked: Mapping[Unit, int]) -> Unit:
        """The unit that stands for a turn an episode or fact exposes: the turn itself, or of
        a long turn its best-ranked passage (``ranked``: unit -> rank), else its first."""
        units = self.of_turn[turn_id]
        if len(units) == 1:
            return units[0]
        return min(units, key=lambda u: (ranked.get(u, math.inf), self.index[u]))


OMITTED = "[…]"
"""Stands, in a prompt, for text of a message its passages leave out."""


def excerpt(text: str, spans: Sequence[Span] | None) -> str:
    """The passages ``spans`` of ``text`` in text order (None: the whole text): adjacent
    passages joined by the text between them, others by a line :data:`OMITTED`, which also
    opens and closes the excerpt when text comes before the first or after the last."""
    if spans is None:
        return text
    parts: list[str] = []
    end = 0
    for start, stop in sorted(spans):
        gap = text[end:start]
        parts.append(f"\n{OMITTED}\n" if gap.strip() else gap if parts else "")
        parts.append(text[start:stop])
        end = max(end, stop)
    if text[end:].strip():
        parts.append(f"\n{OMITTED}")
    return "".join(parts).strip("\n")
