"""LLM-free query rules: plan flags from the question's wording, and speaker-aware query forms."""

from __future__ import annotations

import re
from collections.abc import Sequence

from qemem.models import AnswerType

_TEMPORAL = re.compile(
    r"^\s*when\b|\b(what|which) (year|month|day|date|time)\b|\bhow long\b|\bhow many "
    r"(years|months|weeks|days|hours)\b|\b(before|after|first|last|since|until)\b",
    re.IGNORECASE,
)
_AGGREGATE = re.compile(
    r"^\s*how (many|often)\b|\b(what|which) (are|were|kinds?|types?|sorts?)\b"
    r"|\b(both|all|every)\b"
    r"|\b(activities|books|places|events|hobbies|pets|things|items|ways|countries|cities|"
    r"instruments|games|sports|artists|bands|songs|movies|shows|foods|names|gifts|causes)\b",
    re.IGNORECASE,
)
_ANSWER_TYPES: tuple[tuple[re.Pattern[str], AnswerType], ...] = (
    (re.compile(r"^\s*when\b|\bwhat (year|month|day|date)\b", re.I), "date"),
    (re.compile(r"^\s*how long\b", re.I), "duration"),
    (re.compile(r"^\s*how (many|often)\b", re.I), "count"),
    (re.compile(r"^\s*why\b", re.I), "reason"),
    (re.compile(r"^\s*(would|could|might|is it likely)\b|\blikely\b", re.I), "inference"),
    (re.compile(r"^\s*(is|are|was|were|do|does|did|has|have|had|can|will)\b", re.I), "yes_no"),
    (re.compile(r"^\s*(who|where|which)\b", re.I), "entity"),
)


def rule_flags(question: str) -> tuple[AnswerType, bool, bool]:
    """(answer_type, aggregate, temporal) from the question's wording: "when" and date words
    make it temporal; "how many", "what are", plural nouns such as activities/books/places
    make it an aggregate; the leading word picks the answer type (default "description")."""
    answer_type: AnswerType = "description"
    for pattern, kind in _ANSWER_TYPES:
        if pattern.search(question):
            answer_type = kind
            break
    aggregate = bool(_AGGREGATE.search(question))
    if aggregate and answer_type == "description":
        answer_type = "list"
    return answer_type, aggregate, bool(_TEMPORAL.search(question))


def strip_speakers(text: str, speakers: Sequence[str]) -> str:
    """``text`` without the speakers' names (and their possessive ``'s``).

    Every turn's search document starts with its speaker's name, so in a dense query a name
    mostly pulls towards turns that *address* that person (greetings); without it the query
    matches what was said. Returns ``text`` unchanged when nothing would be left.
    """
    out = text
    for name in sorted((s for s in speakers if s.strip()), key=len, reverse=True):
        out = re.sub(rf"\b{re.escape(name)}(?:['\u2019]s)?\b", " ", out, flags=re.IGNORECASE)
    out = re.sub(r"\s+([?.!,])", r"\1", " ".join(out.split()))
    return out if re.search(r"\w", out) else text
