"""The answer call: one LLM call over the assembled evidence (the short ``answer`` of a
question, or the assistant's ``respond`` reply to a request), and at most one retry when the
answer abstains although verified cards offered an answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qemem.answer.extract import extract_final_answer, is_abstention
from qemem.evidence.cards import ViewCard
from qemem.evidence.layout import AnswerStage, SharedPrefix
from qemem.evidence.standing import StandingSection
from qemem.llm import Ledger, LLMClient, LLMRequest, Message
from qemem.llm.stages import ANSWER, RETRY
from qemem.participants import Participants
from qemem.prompts import render


@dataclass
class Reply:
    """The short answer (the whole reply for ``respond``), the full text it came from, and
    what happened on the way."""

    text: str
    reasoning: str
    abstention_retry: bool = False
    degradations: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Asking:
    """How the answer call is made: the answering ``task`` (its templates), the
    participants' prompt ``fields`` its instructions name them by (default: unnamed), the
    standing instructions and preferences section (``standing``) and the numbers of the
    verified cards given as answer candidates (``candidates``: only with some may an
    abstention be retried)."""

    task: AnswerStage = "answer"
    fields: Mapping[str, str] = field(default_factory=lambda: Participants(()).prompt_fields())
    standing: StandingSection = field(default_factory=StandingSection)
    candidates: Sequence[int] = ()


def answer_candidates(cards: Sequence[ViewCard]) -> list[int]:
    """The numbers (from 1, as the answer prompt shows the cards) of the verified cards the
    constructor gave as an answer (their relation names one, e.g. "answer candidate")."""
    return [
        n for n, c in enumerate(cards, start=1) if c.verified and "answer" in c.relation.lower()
    ]


def _call(
    llm: LLMClient,
    user: str,
    stage: str,
    max_tokens: int,
    ledger: Ledger | None,
    inputs: Mapping[str, Any],
    prefix: SharedPrefix | None,
    asking: Asking,
) -> Reply:
    if prefix is None:
        request = LLMRequest(
            system=render(asking.task, **asking.fields),
            messages=[Message("user", user)],
            stage=stage,
            max_tokens=max_tokens,
            inputs=inputs,
        )
    else:
        request = prefix.request(
            stage, user, max_tokens=max_tokens, inputs=inputs, task=asking.task
        )
    reasoning = llm.complete(request, ledger=ledger).text
    if asking.task == "respond":
        return Reply(reasoning.strip(), reasoning)
    text, found = extract_final_answer(reasoning)
    flags = [] if found else [f"{stage}: no FINAL ANSWER line; used the last line"]
    return Reply(text, reasoning, degradations=flags)


def answer_question(
    llm: LLMClient,
    question: str,
    evidence: str,
    *,
    max_tokens: int = 1024,
    retry_abstention: bool = True,
    ledger: Ledger | None = None,
    inputs: Mapping[str, Any] | None = None,
    stage: str = ANSWER,
    prefix: SharedPrefix | None = None,
    asking: Asking | None = None,
) -> Reply:
    """Answer ``question`` from the ``evidence`` text, made as ``asking`` says (default: the
    short answer, no standing instructions, no candidate cards). When the answer is an
    abstention, ``retry_abstention`` is set and verified cards were given as answer
    candidates, ask once more, naming them; the retry's answer replaces the first unless it
    abstains too. Without such cards an abstention stands: the evidence holds nothing to
    answer from. ``inputs`` (the evidence as data, see ``Assembly.inputs``) goes on the
    requests with the question and the standing facts; ``stage`` labels the calls (the retry
    ``{stage}.retry``). With a shared ``prefix`` (the ``cached`` layout) both calls open with
    it, then the task's instructions and ``evidence``."""
    asking = asking or Asking()
    user = render(
        f"{asking.task}_input", evidence=evidence, standing=asking.standing.text, question=question
    )
    given = {"question": question, "standing": asking.standing.facts, **(inputs or {})}
    first = _call(llm, user, stage, max_tokens, ledger, given, prefix, asking)
    if not (retry_abstention and asking.candidates and is_abstention(first.text)):
        return first
    cards = ", ".join(f"card {n}" for n in asking.candidates)
    retry = user + render("answer_retry", cards=cards)
    second = _call(llm, retry, stage + RETRY, max_tokens, ledger, given, prefix, asking)
    chosen = first if is_abstention(second.text) else second
    return Reply(
        chosen.text,
        chosen.reasoning,
        abstention_retry=True,
        degradations=[*first.degradations, *second.degradations],
    )
