"""Whether a statement states a plan: said on its date, not something that had happened.

A deterministic rule: a sentence of the text holds a plan or future-tense marker
("will"/"'ll"/"shall", "going to"/"gonna", "plan"/"planning", "want to"/"wanna", "hope to",
"about to", "next <word>") and is not a recommendation to the listener ("you should visit New
York City, you'll love it, it will be fun" plans nothing: its future words are advice).
"""

from __future__ import annotations

import re

#: Plans and future-tense statements: "will"/"'ll"/"shall", "going to"/"gonna", "plan"/
#: "planning", "want to"/"wanna", "hope to", "about to", "next <word>".
_PLANNED = re.compile(
    r"(?:\b(?:will|shall|gonna|going\s+to|plan(?:s|ning)?|want(?:s)?\s+to|wanna|"
    r"hop(?:e|es|ing)\s+to|about\s+to|next\s+\w+)\b|['\u2019]ll\b)",
    re.IGNORECASE,
)


#: A recommendation to the listener ("you should go", "you'll love it", "I'd recommend it"):
#: its future words are advice, not a plan.
_RECOMMENDATION = re.compile(
    r"\b(?:recommend\w*|suggest\w*|you\s+should|you\s+(?:have|need|ought)\s+to|you\s+must|"
    r"you(?:['\u2019](?:d|ll)|\s+will|\s+would)\s+(?:\w+ly\s+)?(?:love|like|enjoy|adore)|"
    r"(?:check|try)\s+(?:it\s+|them\s+)?out)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?;\n]")


def is_planned(text: str) -> bool:
    """Whether ``text`` states a plan or speaks in the future tense (a deterministic rule: see
    ``_PLANNED``) in a sentence that is not a recommendation to the listener
    (``_RECOMMENDATION``); such a statement is timed as said on its date, not as a past
    event."""
    return any(
        _PLANNED.search(part) and not _RECOMMENDATION.search(part)
        for part in _SENTENCE_END.split(text)
    )
