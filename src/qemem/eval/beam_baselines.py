"""The baselines a BEAM run compares qemem with, on the same store and the same probes.

* ``rag``: the ``k`` turns that plain hybrid search (dense + BM25, RRF, the question alone)
  ranks highest, shown in conversation order, and one answer call (stage ``answer.rag``).
* ``full-context``: every turn of the conversation and one answer call (stage
  ``answer.context``), for chats that fit the model's window.

Both use the prompt ``beam_answer``: the messages with their dates and writers, and the
probe as the user's new message, answered as the assistant would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qemem.errors import InputError
from qemem.llm import Ledger, LLMClient, LLMRequest, Message, stages
from qemem.llm.types import estimate_tokens
from qemem.memory import Memory
from qemem.models import Turn
from qemem.prompts import as_data, render

BASELINES: tuple[str, ...] = ("rag", "full-context")
#: turns the rag baseline shows by default
DEFAULT_RAG_TURNS = 20
#: the answer model's window assumed by default for full-context, in tokens (characters / 4)
DEFAULT_WINDOW_TOKENS = 200_000
#: output-token limit of a baseline's answer call
ANSWER_MAX_TOKENS = 2048


@dataclass(frozen=True)
class BaselineAnswer:
    """A baseline's answer: its text, the turns its prompt showed (in the order shown) and
    the same turns in the order the baseline ranked them."""

    text: str
    shown: list[str]
    ranked: list[str]


def message_lines(turns: Sequence[Turn]) -> str:
    """The turns as the prompt shows them: one line each, its date, writer and text."""
    return "\n".join(
        f"[{t.timestamp:%d %B %Y}] {as_data(t.speaker)}: {as_data(t.text)}" for t in turns
    )


def answer_request(question: str, turns: Sequence[Turn], stage: str, shown: str) -> LLMRequest:
    """The answer request of a baseline over ``turns`` (``shown`` says which they are)."""
    return LLMRequest(
        system=render("beam_answer", shown=shown),
        messages=[
            Message(
                "user",
                render("beam_answer_input", messages=message_lines(turns), question=question),
            )
        ],
        stage=stage,
        temperature=0.0,
        max_tokens=ANSWER_MAX_TOKENS,
        inputs={"question": question, "turns": list(turns)},
    )


def rag_answer(
    memory: Memory,
    llm: LLMClient,
    conversation: str,
    question: str,
    *,
    k: int = DEFAULT_RAG_TURNS,
    ledger: Ledger | None = None,
) -> BaselineAnswer:
    """The rag baseline's answer from the top ``k`` turns of plain hybrid search."""
    hits = memory.search(conversation, question, k=k)
    ranked = [h.record for h in hits if isinstance(h.record, Turn)]
    turns = sorted(ranked, key=lambda t: (t.session, t.position))
    shown = f"the {len(turns)} messages a search for the new message ranked highest"
    response = llm.complete(
        answer_request(question, turns, stages.ANSWER_RAG, shown), ledger=ledger
    )
    return BaselineAnswer(response.text, [t.id for t in turns], [t.id for t in ranked])


def context_tokens(memory: Memory, conversation: str, question: str = "") -> int:
    """The estimated input tokens of the full-context prompt over ``conversation``."""
    turns = memory.turns(conversation)
    request = answer_request(question, turns, stages.ANSWER_CONTEXT, "the whole conversation")
    return estimate_tokens(request.prompt_text)


def full_context_answer(
    memory: Memory,
    llm: LLMClient,
    conversation: str,
    question: str,
    *,
    window_tokens: int = DEFAULT_WINDOW_TOKENS,
    ledger: Ledger | None = None,
) -> BaselineAnswer:
    """The full-context baseline's answer over every turn; InputError when the prompt would
    exceed ``window_tokens``."""
    turns = memory.turns(conversation)
    request = answer_request(question, turns, stages.ANSWER_CONTEXT, "the whole conversation")
    needed = estimate_tokens(request.prompt_text)
    if needed > window_tokens:
        raise InputError(
            f"conversation {conversation} needs about {needed:,} input tokens, more than the "
            f"window of {window_tokens:,}: leave it out (--chats) or raise --window-tokens"
        )
    response = llm.complete(request, ledger=ledger)
    ids = [t.id for t in turns]
    return BaselineAnswer(response.text, ids, ids)
