"""Whether a statement states a plan: said on its date, not something that had happened.

A deterministic rule: a sentence of the text holds a plan or future-tense marker
("will"/"'ll"/"shall", "going to"/"gonna", "plan"/"planning", "want to"/"wanna", "hope to",
"about to", "next <word>"). When the text recommends something to the listener ("you should
visit New York City", "you'll love it", "I'd recommend it"), its future words are advice, not a
plan: then only a sentence that is no recommendation and speaks of the speaker's own plans
("we'll go next month") counts.
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
_FIRST_PERSON = re.compile(
    r"\b(?:i|we|i['\u2019](?:m|ll|d|ve)|we['\u2019](?:re|ll|d|ve)|my|our)\b", re.I
)


def is_planned(text: str) -> bool:
    """Whether ``text`` states a plan or speaks in the future tense (see the module doc)."""
    advice = _RECOMMENDATION.search(text) is not None
    for sentence in _SENTENCE_END.split(text):
        if not _PLANNED.search(sentence):
            continue
        if not advice or (_FIRST_PERSON.search(sentence) and not _RECOMMENDATION.search(sentence)):
            return True
    return False
