"""The rule pass of an ingest: the user's standing instructions and preferences as facts.

Each standing statement (:func:`qemem.statements.standing_statements`) of a message whose role
is ``user`` becomes a fact of kind ``instruction`` or ``preference`` whose provenance is that
message alone (``SemanticFact.turn_ids``): forgetting or redacting the message removes it, as it
removes every fact built from it. The fact quotes the statement: ``User asked: "Always ..."``
(an instruction), ``User said: "I prefer ..."`` (a preference), so it is self-contained and its
words are checkable against the message. A statement the conversation already holds as a
current standing fact (the same words, case and spacing aside) is not added again. Messages
without a role (conversations between people) give none. No model is involved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from qemem.models import SemanticFact, Turn
from qemem.statements import Standing, standing_statements

VERBS = {"instruction": "asked", "preference": "said"}


def standing_content(speaker: str, statement: Standing) -> str:
    """The text of the fact a standing statement of ``speaker`` becomes."""
    return f'{" ".join(speaker.split())} {VERBS[statement.kind]}: "{statement.text}"'


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def standing_facts(
    turns: Sequence[Turn], known: Iterable[SemanticFact], first_number: int
) -> list[SemanticFact]:
    """The standing facts the user's ``turns`` state that none of the ``known`` facts (the
    conversation's current ones) already states, numbered ``S<first_number>`` on in order."""
    seen = {_key(f.content) for f in known if f.standing}
    facts: list[SemanticFact] = []
    for turn in turns:
        if turn.role != "user":
            continue
        for statement in standing_statements(turn.text):
            content = standing_content(turn.speaker, statement)
            if _key(content) in seen:
                continue
            seen.add(_key(content))
            fid = f"S{first_number + len(facts)}"
            facts.append(
                SemanticFact(
                    fid,
                    turn.conversation_id,
                    content,
                    turn.session,
                    (),
                    kind=statement.kind,
                    turn_ids=(turn.id,),
                )
            )
    return facts
