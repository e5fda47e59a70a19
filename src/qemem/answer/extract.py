"""Reading the short answer out of the answerer's text, and recognising abstentions."""

from __future__ import annotations

import re

_FINAL = re.compile(r"final\s+answer\s*[*_]*\s*[:：]", re.IGNORECASE)
_WRAPPERS = "*_`#> \t"
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’"}

#: Answers that say the conversation does not hold the answer (matched case-insensitively).
ABSTENTION_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bno (?:relevant |specific |such )?"
        r"(?:information|info|record|mention|evidence|details?)\b",
        r"\bnot (?:explicitly |directly |clearly )?(?:mentioned|stated|specified|provided|"
        r"given|discussed|recorded|indicated|known|available)\b",
        r"\b(?:cannot|can ?not|can't|could not|couldn't|unable to) (?:be )?(?:determined?|tell|"
        r"say|find|know|answer)\b",
        r"\b(?:does|do|did)(?: not|n't) (?:say|mention|specify|state|include|contain|indicate)\b",
        r"\b(?:not enough|insufficient) (?:information|evidence|context|details?)\b",
        r"\bI (?:do not|don't) know\b",
        r"\b(?:is|are|remains?) unknown\b",
        r"^\W*(?:unknown|unclear|n/?a|not sure)\W*$",
        r"\bunclear from the (?:conversation|memories|context)\b",
    )
)


def _clean(line: str) -> str:
    """A line without markdown decoration, wrapping quotes and trailing periods."""
    text = line.strip().strip(_WRAPPERS).strip()
    while len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    text = text.rstrip(".").rstrip().strip(_WRAPPERS).strip()
    return text


def extract_final_answer(text: str) -> tuple[str, bool]:
    """The short answer of an answerer's text and whether a ``FINAL ANSWER:`` line was found.

    Takes the last ``FINAL ANSWER:`` (any case, markdown bold around it allowed); the answer is
    the rest of that line, or the next non-empty line when the rest is empty. Without one, the
    last non-empty line is the answer (and ``False`` is returned). Markdown decoration, wrapping
    quotes and trailing periods are removed.
    """
    matches = list(_FINAL.finditer(text))
    if matches:
        for line in text[matches[-1].end() :].splitlines():
            answer = _clean(line)
            if answer:
                return answer, True
    lines = [_clean(line) for line in text.splitlines()]
    lines = [line for line in lines if line and not _FINAL.match(line)]
    return (lines[-1] if lines else ""), False


def is_abstention(answer: str) -> bool:
    """Whether a short answer says the information is not available (``ABSTENTION_PATTERNS``);
    an empty answer counts as one."""
    if not answer.strip():
        return True
    return any(p.search(answer) for p in ABSTENTION_PATTERNS)
