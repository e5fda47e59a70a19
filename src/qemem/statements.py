"""Rules about what a message states, without a model: standing instructions and preferences,
and how a later statement relates to an earlier one it disagrees with.

**Standing statements** (:func:`standing_statements`). A sentence of a user's message is a
standing *instruction* when it tells the assistant how to answer from now on: it opens with
"always" or "never" (after an optional "please"; also "make sure to always", "don't ever",
"remember to always"), names the future ("from now on", "going forward", "in future
responses"), or asks for something "when(ever) I ask ..." without being a question or a
statement about the user. It is a *preference* when it says what the user prefers or has
chosen: "I prefer", "I'd rather", "my preference", "I've chosen / chose / decided to", "I want
to keep / avoid / stick with", "I'm trying to keep". An instruction is the whole sentence; a
preference is the clause holding it (a long message that goes on to ask something keeps only
the stated preference). Code blocks state nothing. Sentences are cut at 400 characters.

**Updates and contradictions** (:func:`relation_between`). Two statements that disagree about
one thing are an *update* when the later one may replace the earlier: a value that changes (a
count, a deadline, a setting, a preference, a status) said again later holds from then on, and
the answer gives the latest and says it changed. They are a *contradiction* when both cannot
hold and nothing marks one as replacing the other: one of them denies that something ever
happened ("I've never written a Flask route", "I have not used it before") while the other
says it did. What happened cannot be changed by a later statement, so neither replaces the
other: the answer names both and asks which holds, and a build records no supersession.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

StandingKind = Literal["instruction", "preference"]
Relation = Literal["update", "contradiction"]
MAX_STATEMENT_CHARS = 400

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CODE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_INSTRUCTION_START = re.compile(
    r"^(?:please\s+)?(?:always|never|make\s+sure\s+(?:to|you)\s+(?:always|never)|"
    r"remember\s+to\s+always|do\s+not\s+ever|don['’]t\s+ever)\b",
    re.IGNORECASE,
)
_FROM_NOW_ON = re.compile(
    r"\b(?:from\s+now\s+on|going\s+forward|from\s+here\s+on|"
    r"in\s+(?:all\s+)?future\s+(?:responses|answers|replies))\b",
    re.IGNORECASE,
)
_WHEN_I_ASK = re.compile(r"\bwhen(?:ever)?\s+i\s+ask\b", re.IGNORECASE)
_ABOUT_ME = re.compile(
    r"^(?:i|i['’]m|i['’]ve|i['’]d|my|can|could|would|how|what|why|do|does|is|are)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:i(?:['’]d|\s+would|\s+\w+ly)?\s+prefer|my\s+preference|"
    r"i(?:['’]d|\s+would)\s+rather|i(?:['’]ve|\s+have)?\s+(?:chosen|chose|decided)\s+to|"
    r"i\s+(?:want|need|['’]d\s+like|would\s+like)\s+to\s+(?:keep|avoid|stick\s+with)|"
    r"i(?:['’]m|\s+am)\s+(?:trying|aiming)\s+to\s+keep)\b",
    re.IGNORECASE,
)
_CLAUSE_START = re.compile(r",\s+(?:so|and|but|because|since)\s+|;\s+|\bso\s+", re.IGNORECASE)
_CLAUSE_END = re.compile(
    r",\s+(?:(?:so\s+)?(?:how|what|can|could|would|should|do|does|is|are|which|where|when|"
    r"why|any)\b|but\b|and\s+i(?:['’](?:m|ve|d)|\s+(?:am|have|also))\b|and\s+(?:can|could)\b)"
    r"|[?;]",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Standing:
    """A standing statement of a message: its kind and its words as said."""

    kind: StandingKind
    text: str


def _is_instruction(sentence: str) -> bool:
    if _INSTRUCTION_START.match(sentence) or _FROM_NOW_ON.search(sentence):
        return True
    return bool(
        _WHEN_I_ASK.search(sentence)
        and not sentence.rstrip().endswith("?")
        and not _ABOUT_ME.match(sentence)
    )


def _clause(sentence: str, start: int, end: int) -> str:
    """The clause of ``sentence`` around ``start``-``end`` (a match): from the last clause
    opening before it to the next clause ending after it."""
    opening = max((m.end() for m in _CLAUSE_START.finditer(sentence, 0, start)), default=0)
    closing = _CLAUSE_END.search(sentence, end)
    return sentence[opening : closing.start() if closing else len(sentence)].strip(" ,;")


def standing_statements(text: str) -> list[Standing]:
    """The standing instructions and preferences a user's message states, in text order (see
    the module doc)."""
    found: list[Standing] = []
    for sentence in _SENTENCE.split(_CODE.sub("\n", text)):
        sentence = " ".join(sentence.split())
        if not sentence:
            continue
        if _is_instruction(sentence):
            found.append(Standing("instruction", sentence[:MAX_STATEMENT_CHARS]))
        elif (match := _PREFERENCE.search(sentence)) is not None:
            clause = _clause(sentence, match.start(), match.end())
            found.append(Standing("preference", clause[:MAX_STATEMENT_CHARS]))
    return found


_DENIAL = re.compile(
    r"\b(?:never|not\s+ever|(?:have|has|had)\s+not\s+(?:\w+\s+){1,7}?before|"
    r"(?:haven|hasn|hadn)['’]t\s+(?:\w+\s+){0,6}?before)\b|n['’]t\s+ever\b",
    re.IGNORECASE,
)
_NOT_A_DENIAL = re.compile(r"\bnever\s+mind\b", re.IGNORECASE)


def denies_the_past(text: str) -> bool:
    """Whether ``text`` says that something never happened ("I've never written a route",
    "I haven't used it before"; not "never mind")."""
    return bool(_DENIAL.search(_NOT_A_DENIAL.sub(" ", text)))


def relation_between(earlier: str, later: str) -> Relation:
    """How a later statement that disagrees with an earlier one relates to it: a
    ``contradiction`` when either denies that something ever happened, else an ``update``
    (see the module doc)."""
    if denies_the_past(earlier) or denies_the_past(later):
        return "contradiction"
    return "update"
