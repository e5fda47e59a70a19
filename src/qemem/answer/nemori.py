"""The ``nemori-baseline`` mode: NEMORI's published LoCoMo query-time recipe over qemem's memory.

The recipe (NEMORI's ``evaluation/locomo/search.py``): embed the question, take the top
:data:`EPISODES` episodes and top :data:`FACTS` semantic facts by vector similarity (no turn
search, no BM25, no planning), list each as ``- [timestamp] content`` in rank order, the
original messages of the first :data:`SOURCE_EPISODES` episodes under theirs, and make one
answer call whose reply is the answer (no retry, no answer-line extraction). The prompt
(``answer_nemori.txt``) is written anew with the structure of that system's answer prompt.
docs/method.md says what is and is not the same as the original system.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from qemem.errors import InputError
from qemem.evidence.context import SourceIndex
from qemem.evidence.refine import Shown
from qemem.llm import Ledger, LLMClient, LLMRequest, Message
from qemem.llm.stages import ANSWER_NEMORI
from qemem.models import Episode, Pool, SemanticFact, Turn
from qemem.prompts import as_data, render

EPISODES = 10
"""Episodes retrieved (NEMORI's ``--top-k-episodes`` default)."""
FACTS = 20
"""Semantic facts retrieved (NEMORI's ``--top-k-semantic`` default)."""
SOURCE_EPISODES = 2
"""Leading episodes shown with their original messages (NEMORI's
``--include-original-messages-top-k`` default)."""

NO_MEMORY = (
    "mode 'nemori-baseline' answers from episodes and semantic facts only, and conversation "
    "{conversation!r} has none: build them first (qemem build, or Memory.build; needs an LLM) "
    "or add them (qemem import-memory, qemem import-nemori); modes full, no-refine and direct "
    "also answer from the turns"
)


@dataclass(frozen=True)
class Prompted:
    """What the baseline's answer prompt shows: the two memory listings, the original turns
    of the leading episodes, and the same as data for the request (``LLMRequest.inputs``)."""

    episodic: str
    semantic: str
    shown: Shown
    inputs: dict[str, Any] = field(default_factory=dict)


def stamp(value: datetime) -> str:
    """A timestamp as the listings show it: ISO 8601 (``2023-05-08T13:56:00``), as NEMORI's
    stored ``created_at`` renders."""
    return value.isoformat()


def memory_line(when: datetime, content: str) -> str:
    """One memory of a listing: ``- [timestamp] content`` (content on one line)."""
    return f"- [{stamp(when)}] {as_data(content)}"


def source_lines(turns: Sequence[Turn]) -> list[str]:
    """An episode's original messages, indented under it: ``speaker: text``."""
    if not turns:
        return []
    return ["    Source Messages:"] + [
        f"    - {as_data(t.speaker)}: {as_data(t.text)}" for t in turns
    ]


def prompted(index: SourceIndex, pool: Pool, source_episodes: int = SOURCE_EPISODES) -> Prompted:
    """The listings of ``pool`` (episodes and facts in rank order): an episode stamped with
    its timestamp, a fact with the date of the session it was learned in, and the first
    ``source_episodes`` episodes followed by their original turns. Raises InputError when the
    pool holds no episode and no fact (the conversation has no such memory)."""
    if not pool.episodes and not pool.facts:
        raise InputError(NO_MEMORY.format(conversation=pool.conversation))
    episodes = [i.record for i in pool.episodes if isinstance(i.record, Episode)]
    facts = [i.record for i in pool.facts if isinstance(i.record, SemanticFact)]
    lines: list[str] = []
    shown_turns: list[Turn] = []
    for n, episode in enumerate(episodes):
        lines.append(memory_line(episode.timestamp, episode.content))
        if n < source_episodes:
            turns = index.episode_turns(episode, len(episode.turn_ids))
            lines.extend(source_lines(turns))
            shown_turns.extend(turns)
    semantic = [memory_line(index.session_date(f), f.content) for f in facts]
    ordered = index.in_order(shown_turns)
    ids = [t.id for t in ordered]
    refs = [item.ref for item in (*pool.episodes, *pool.facts)]
    inputs = {"episodes": episodes, "facts": facts, "turns": ordered}
    return Prompted("\n".join(lines), "\n".join(semantic), Shown(ids, [], ids, refs), inputs)


def nemori_answer(
    llm: LLMClient,
    question: str,
    shown: Prompted,
    *,
    max_tokens: int = 1024,
    ledger: Ledger | None = None,
) -> str:
    """The one answer call: the whole prompt as a single user message (no system prompt, as
    the original sends it), temperature 0; the reply, stripped, is the answer."""
    user = render(
        "answer_nemori", episodic=shown.episodic, semantic=shown.semantic, question=question
    )
    request = LLMRequest(
        system="",
        messages=[Message("user", user)],
        stage=ANSWER_NEMORI,
        temperature=0.0,
        max_tokens=max_tokens,
        inputs={"question": question, **shown.inputs},
    )
    return llm.complete(request, ledger=ledger).text.strip()
