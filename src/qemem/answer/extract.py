"""Reading the short answer out of the answerer's text, and recognising abstentions."""

from __future__ import annotations

import re

_FINAL = re.compile(r"final\s+answer\s*[*_]*\s*[:：]", re.IGNORECASE)
_WRAPPERS = "*_`#> \t"
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’"}

_SUBJECT = (
    r"(?:(?:the|this|that|its|their|his|her|any|such)\s+[\w' -]{1,60}?\s+|it\s+|this\s+|"
    r"that\s+|there\s+|i\s+|we\s+)?"
)
_SOURCE = (
    r"(?:conversation|conversations|memories|memory|context|evidence|sessions?|messages?|chat)"
)
_WHERE = (
    rf"(?:\s+(?:in|from|by|within)\s+(?:the\s+)?(?:given\s+|provided\s+|available\s+)?{_SOURCE})?"
)
_ABOUT = r"(?:\s+(?:about|on|regarding|for|of|as\s+to|when|what|who|where|why|how|whether)\b.*)?"
_NOTED = (
    r"(?:explicitly\s+|directly\s+|clearly\s+|specifically\s+)?(?:mentioned|stated|specified|"
    r"provided|given|discussed|recorded|indicated|known|available|said|shared|clear)"
)
#: Whole answers that say the conversation does not hold the answer (matched, case-insensitive,
#: against the entire short answer without its final punctuation). A negative answer ("No, she
#: did not mention adopting a dog", "She can't tell her parents", "It was not provided by the
#: school") is not an abstention.
ABSTENTION_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE | re.DOTALL)
    for p in (
        rf"{_SUBJECT}(?:is|are|was|were|has\s+been|have\s+been|remains?)?\s*not\s+{_NOTED}"
        rf"{_WHERE}",
        rf"(?:there\s+is\s+|there's\s+|i\s+have\s+|i\s+found\s+)?no\s+(?:relevant\s+|specific\s+|"
        rf"such\s+|clear\s+|further\s+)?(?:information|info|record|mention|evidence|details?|data)"
        rf"(?:\s+(?:is\s+|was\s+)?{_NOTED})?{_ABOUT}{_WHERE}",
        rf"(?:it\s+|this\s+|that\s+|i\s+|we\s+|{_SOURCE}\s+)?(?:cannot|can\s?not|can't|could\s+not|"
        rf"couldn't|am\s+unable\s+to|is\s+unable\s+to|unable\s+to)\s+(?:be\s+)?(?:determined?|"
        rf"tell|say|find|know|answer|identify|confirm)(?:ed)?{_ABOUT}{_WHERE}",
        rf"(?:the\s+)?{_SOURCE}\s+(?:does|do|did)(?:\s+not|n't)\s+(?:say|mention|specify|state|"
        rf"include|contain|indicate|tell|give|provide)\b.*",
        rf"(?:there\s+is\s+|there's\s+)?(?:not\s+enough|insufficient)\s+(?:information|evidence|"
        rf"context|details?){_ABOUT}{_WHERE}",
        rf"i\s+(?:do\s+not|don't)\s+know{_ABOUT}",
        rf"{_SUBJECT}(?:is|are|was|were|remains?)\s+(?:unknown|unclear|not\s+clear){_WHERE}",
        r"(?:unknown|unclear|n/?a|not\s+sure|none\s+given|no\s+answer)",
        rf"(?:it\s+is\s+|it's\s+)?unclear\s+from\s+the\s+{_SOURCE}.*",
    )
)
_ABBREVIATION = re.compile(
    r"(?:\b(?:[A-Za-z]\.){2,}|\b(?:etc|Jr|Sr|Dr|Mr|Mrs|Ms|St|Inc|Ltd|Co|vs)\.)$"
)
_MARKDOWN = (
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),  # [text](url)
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # **bold**, __bold__
    (re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])"), r"\1"),  # *italic*
    (re.compile(r"(?<!\w)_(?=\S)([^_]+?)(?<=\S)_(?!\w)"), r"\1"),  # _italic_
    (re.compile(r"`([^`]+)`"), r"\1"),  # `code`
)


def _clean(line: str) -> str:
    """A line without markdown decoration (leading, trailing and inline), wrapping quotes and
    a trailing period (kept when it ends an abbreviation such as "U.S." or "etc.")."""
    text = line.strip()
    for pattern, replacement in _MARKDOWN:
        text = pattern.sub(replacement, text)
    text = text.strip(_WRAPPERS).strip()
    while len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    while text.endswith(".") and not _ABBREVIATION.search(text):
        text = text[:-1].rstrip()
    return text.strip(_WRAPPERS).strip()


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
    """Whether a short answer, as a whole, says the information is not available (one of
    ``ABSTENTION_PATTERNS`` matches all of it); an empty answer counts as one."""
    text = " ".join(answer.split()).strip(" .!?;:*_\"'")
    if not text:
        return True
    return any(p.fullmatch(text) for p in ABSTENTION_PATTERNS)
