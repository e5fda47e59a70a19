"""Quote fidelity: does a card's quote really come from the cited source text?

Deterministic, no LLM. The quote is checked against the message text of a turn (the speaker's
name is accepted only as a leading "Name:" prefix of the quote, never inside it) or the text of
an episode or fact. Both texts are normalised the same way (Unicode NFKC, case-folded,
punctuation and typographic quotes/dashes dropped, apostrophes removed, contractions expanded
whether or not their apostrophe was kept: "It's", "Its" and "it is" all read "it is", "cant"
and "can't" read "can not") into word tokens. A quote part is then scored three ways against
the source:

* ``char_score``: fuzzy partial matching of the normalised quote against the normalised source
  (``rapidfuzz.fuzz.partial_ratio_alignment``), which also locates the matched span;
* ``order_score``: order sensitivity inside that span: the mean of (a) the share of quote tokens
  found in order (token LCS) and (b) the share of adjacent quote-token pairs that are also close
  (at most two dropped words apart) and in the same order in the span; a word-shuffled quote keeps
  its characters but loses both;
* names and numbers: every capitalised token and every number (digits or number word) of the
  quote must occur in the matched span (two words of slack on each side; a possessive ``-s`` is
  tolerated); this is a hard condition, since one changed name or number barely moves a fuzzy
  score, and a number found elsewhere in the source does not count.

A quote must hold at least ``MIN_CONTENT_WORDS`` content words (words that are not function
words), or all of the source's when the source has fewer: a single common word ("went") is
never evidence. A verbatim quote (``verbatim_evidence``: every part a contiguous run of the
source's tokens) needs only ``MIN_VERBATIM_WORDS`` tokens, one of them a content word that is
not a reply formula's (``REPLY_WORDS``): "Do you recycle at all?" and "It's really special to
me" are evidence when the turn says them, while "and it was", "I think so" or "so powerful"
are not, and a fuzzy match (a dropped or changed word) keeps the two-content-word floor, since
a short quote matches too much by chance. A quote may join parts of the same source with an
ellipsis (``...`` / ``…``): each part is checked and the weakest part decides.
``score = min(char_score, order_score)`` over the parts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from rapidfuzz import fuzz
from rapidfuzz.distance import LCSseq

from qemem.lexicon import FUNCTION_WORDS, NUMERAL_WORDS, REPLY_WORDS

#: Chosen from the case table in ``tests/test_quotes.py``: every accepted case there (verbatim,
#: case, punctuation, curly quotes, dashes, contractions, one or two dropped filler words,
#: ellipsis joins) scores >= 0.92, while shuffled, name-swapped, paraphrased, negated, extended
#: or foreign spans score <= 0.80 (changed names/numbers are rejected by the token check whatever
#: their score). 0.85 sits in the middle of that gap.
DEFAULT_THRESHOLD = 0.85

_ELLIPSIS = re.compile(r"\[\s*(?:\.{3,}|…)\s*\]|\.{3,}|…")
_WORD = re.compile(r"[^\W_]+(?:['’‘ʼ`´][^\W_]+)*")
_APOSTROPHES = re.compile(r"['’‘ʼ`´]")
_CONTRACTIONS = {"m": "am", "re": "are", "ve": "have", "ll": "will", "d": "would"}
_IRREGULAR = {
    "can't": ("can", "not"),
    "won't": ("will", "not"),
    "shan't": ("shall", "not"),
    "ain't": ("is", "not"),
    "let's": ("let", "us"),
}
_IS_AFTER = frozenset({"it", "that", "what", "there", "here", "he", "she", "who", "where", "how"})
# Contractions written without their apostrophe ("im", "dont"); words that are also ordinary
# words ("ill", "were", "well", "id", "hell", "shell") are left alone.
# fmt: off
_BARE = {
    "im": ("i", "am"), "ive": ("i", "have"), "youre": ("you", "are"), "youve": ("you", "have"),
    "youll": ("you", "will"), "youd": ("you", "would"), "theyre": ("they", "are"),
    "theyve": ("they", "have"), "theyll": ("they", "will"), "theyd": ("they", "would"),
    "weve": ("we", "have"), "itll": ("it", "will"), "itd": ("it", "would"),
    "its": ("it", "is"), "thats": ("that", "is"), "whats": ("what", "is"),
    "theres": ("there", "is"), "heres": ("here", "is"), "hes": ("he", "is"),
    "shes": ("she", "is"), "whos": ("who", "is"), "lets": ("let", "us"),
    "cannot": ("can", "not"), "cant": ("can", "not"), "wont": ("will", "not"),
    "dont": ("do", "not"), "doesnt": ("does", "not"), "didnt": ("did", "not"),
    "isnt": ("is", "not"), "arent": ("are", "not"), "wasnt": ("was", "not"),
    "werent": ("were", "not"), "hasnt": ("has", "not"), "havent": ("have", "not"),
    "hadnt": ("had", "not"), "wouldnt": ("would", "not"), "couldnt": ("could", "not"),
    "shouldnt": ("should", "not"), "mustnt": ("must", "not"), "aint": ("is", "not"),
}
# fmt: on
#: A quote must hold at least this many content words (or all of a shorter source's).
MIN_CONTENT_WORDS = 2
#: A verbatim quote needs only this many tokens, one a content word (``verbatim_evidence``).
MIN_VERBATIM_WORDS = 3
_MAX_GAP = 3  # adjacent quote tokens may be up to this many positions apart in the source


@dataclass(frozen=True)
class QuoteCheck:
    """Outcome of checking one quote against one source text.

    ``span`` is the matched ``(start, end)`` character range in the source text (of the best
    part when the quote has several), ``None`` when nothing matched; ``missing`` lists the
    names/numbers of the quote that the source does not contain.
    """

    verified: bool
    score: float
    char_score: float = 0.0
    order_score: float = 0.0
    span: tuple[int, int] | None = None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Tokens:
    words: list[str]  # normalised tokens
    spans: list[tuple[int, int]]  # character span of each token in the original text
    offsets: list[int]  # start of each token in the joined string


def _split_word(word: str) -> list[str]:
    """Normalise one raw word into one or more tokens (contractions expanded, with or without
    their apostrophe)."""
    low = unicodedata.normalize("NFKC", word).casefold()
    low = _APOSTROPHES.sub("'", low)
    if low in _IRREGULAR:
        return list(_IRREGULAR[low])
    if low.endswith("n't"):
        return [low[:-3], "not"]
    if "'" in low:
        head, _, tail = low.rpartition("'")
        if tail in _CONTRACTIONS:
            return [head.replace("'", ""), _CONTRACTIONS[tail]]
        if tail == "s" and head in _IS_AFTER:
            return [head, "is"]
    bare = low.replace("'", "")
    return list(_BARE.get(bare, (bare,)))


def _tokenise(text: str) -> _Tokens:
    words: list[str] = []
    spans: list[tuple[int, int]] = []
    offsets: list[int] = []
    pos = 0
    for match in _WORD.finditer(text):
        for token in _split_word(match.group()):
            if not token:
                continue
            words.append(token)
            spans.append(match.span())
            offsets.append(pos)
            pos += len(token) + 1
    return _Tokens(words, spans, offsets)


def _key_tokens(part: str) -> list[str]:
    """Names (capitalised words other than function words) and numbers of a quote part,
    normalised."""
    keys: list[str] = []
    for match in _WORD.finditer(part):
        word = match.group()
        base = _split_word(word)[0]
        number = any(c.isdigit() for c in word) or base.removesuffix("s") in NUMERAL_WORDS
        if number or (word[0].isupper() and base not in FUNCTION_WORDS):
            keys.append(base)
    return keys


def _adjacency(quote: list[str], window: list[str]) -> float:
    """Share of adjacent quote-token pairs found close together and in order in ``window``."""
    if len(quote) < 2:
        return 1.0
    places: dict[str, list[int]] = {}
    for i, word in enumerate(window):
        places.setdefault(word, []).append(i)
    hits = 0
    for first, second in pairwise(quote):
        after = places.get(second, [])
        if any(0 < j - i <= _MAX_GAP for i in places.get(first, []) for j in after):
            hits += 1
    return hits / (len(quote) - 1)


@dataclass(frozen=True)
class _PartCheck:
    char_score: float
    order_score: float
    span: tuple[int, int] | None
    window: frozenset[str]  # normalised tokens of the matched span, two words of slack


def _span_start(words: Sequence[str], source: Sequence[str]) -> int | None:
    """Where ``words`` first occur as a contiguous run of ``source`` (both token lists), or
    None."""
    if not words or f" {' '.join(words)} " not in f" {' '.join(source)} ":
        return None
    n = len(words)
    return next(i for i in range(len(source) - n + 1) if list(source[i : i + n]) == list(words))


def verbatim_evidence(
    parts: Sequence[Sequence[str]], source: Sequence[str], *, min_words: int = MIN_VERBATIM_WORDS
) -> bool:
    """Whether the quote ``parts`` (normalised tokens) are each a contiguous run of the
    ``source`` tokens and together hold at least ``min_words`` tokens, one of them in neither
    ``FUNCTION_WORDS`` nor ``REPLY_WORDS``."""
    words = [w for part in parts for w in part]
    return (
        len(words) >= min_words
        and any(w not in FUNCTION_WORDS and w not in REPLY_WORDS for w in words)
        and all(_span_start(part, source) is not None for part in parts)
    )


def _check_part(part: _Tokens, source: _Tokens) -> _PartCheck:
    """Scores, matched span and its tokens for one quote part."""
    if not source.words:
        return _PartCheck(0.0, 0.0, None, frozenset())
    at = _span_start(part.words, source.words)
    if at is not None:  # verbatim: exact, whatever repeats around
        n = len(part.words)
        window = source.words[max(0, at - 2) : at + n + 2]
        span = (source.spans[at][0], source.spans[at + n - 1][1])
        return _PartCheck(1.0, 1.0, span, frozenset(window))
    found = fuzz.partial_ratio_alignment(" ".join(part.words), " ".join(source.words))
    if found is None or found.score == 0:
        return _PartCheck(0.0, 0.0, None, frozenset())
    inside = [
        i
        for i, start in enumerate(source.offsets)
        if start < found.dest_end and start + len(source.words[i]) > found.dest_start
    ]
    if not inside:
        return _PartCheck(found.score / 100, 0.0, None, frozenset())
    first, last = inside[0], inside[-1]
    window = source.words[max(0, first - 2) : last + 3]
    coverage = LCSseq.similarity(part.words, window) / len(part.words)
    order = (coverage + _adjacency(part.words, window)) / 2
    span = (source.spans[first][0], source.spans[last][1])
    return _PartCheck(found.score / 100, order, span, frozenset(window))


def content_words(words: list[str]) -> int:
    """How many of the normalised ``words`` are content words (not in ``FUNCTION_WORDS``)."""
    return sum(1 for w in words if w not in FUNCTION_WORDS)


def strip_speaker(quote: str, speaker: str) -> str:
    """``quote`` without a leading "<speaker>:" prefix (case and spacing ignored)."""
    prefix = re.match(rf"\s*[\"“']?\s*{re.escape(speaker.strip())}\s*:\s*", quote, re.IGNORECASE)
    return quote[prefix.end() :] if speaker.strip() and prefix else quote


def verify_quote(
    quote: str,
    source_text: str,
    *,
    speaker: str = "",
    threshold: float = DEFAULT_THRESHOLD,
    min_verbatim_words: int | None = MIN_VERBATIM_WORDS,
) -> QuoteCheck:
    """Check that ``quote`` is a (lightly normalised) span of ``source_text``.

    ``source_text`` is a message's text; its ``speaker`` may only lead the quote ("Name: ...").
    Verified when ``score >= threshold``, every name and number of the quote occurs in the
    matched span and the quote is long enough: ``MIN_CONTENT_WORDS`` content words, or
    ``verbatim_evidence`` with ``min_verbatim_words`` (None: the content-word floor alone). An
    empty quote (or one without words) is never verified and scores 0.
    """
    raw_parts = _ELLIPSIS.split(strip_speaker(quote, speaker) if speaker else quote)
    parts = [(raw, tokens) for raw in raw_parts if (tokens := _tokenise(raw)).words]
    if not parts:
        return QuoteCheck(verified=False, score=0.0)
    source = _tokenise(source_text)
    results = [_check_part(tokens, source) for _, tokens in parts]
    char_score = min(r.char_score for r in results)
    order_score = min(r.order_score for r in results)
    score = round(min(char_score, order_score), 4)
    best_span = max(results, key=lambda r: min(r.char_score, r.order_score)).span
    missing = tuple(
        dict.fromkeys(
            key
            for (raw, _), result in zip(parts, results, strict=True)
            for key in _key_tokens(raw)
            if key not in result.window and f"{key}s" not in result.window
        )
    )
    needed = min(MIN_CONTENT_WORDS, content_words(source.words))
    words = [tokens.words for _, tokens in parts]
    long_enough = content_words([w for part in words for w in part]) >= max(needed, 1) or (
        min_verbatim_words is not None
        and verbatim_evidence(words, source.words, min_words=min_verbatim_words)
    )
    return QuoteCheck(
        verified=score >= threshold and not missing and long_enough,
        score=score,
        char_score=round(char_score, 4),
        order_score=round(order_score, 4),
        span=best_span,
        missing=missing,
    )


def quote_checks(
    quote: str,
    sources: Mapping[str, str],
    *,
    speakers: Mapping[str, str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, QuoteCheck]:
    """``quote`` checked against every source (id -> text; ``speakers``: id -> the speaker of
    a turn), in source order."""
    return {
        source_id: verify_quote(
            quote, text, speaker=(speakers or {}).get(source_id, ""), threshold=threshold
        )
        for source_id, text in sources.items()
    }


def best_check(checks: Mapping[str, QuoteCheck]) -> tuple[str | None, QuoteCheck]:
    """The best of ``quote_checks``: verified matches beat unverified ones, then the higher
    score wins (ties: first in order). With no sources the id is ``None`` and the check is
    unverified with score 0."""
    best_id: str | None = None
    best = QuoteCheck(verified=False, score=0.0)
    for source_id, check in checks.items():
        if best_id is None or (check.verified, check.score) > (best.verified, best.score):
            best_id, best = source_id, check
    return best_id, best


def best_quote_match(
    quote: str,
    sources: Mapping[str, str],
    *,
    speakers: Mapping[str, str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> tuple[str | None, QuoteCheck]:
    """Check ``quote`` against every source and return the best one (see ``best_check``)."""
    return best_check(quote_checks(quote, sources, speakers=speakers, threshold=threshold))
