"""The answer call: one LLM call over the assembled evidence, and one retry on an abstention."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qemem.answer.extract import extract_final_answer, is_abstention
from qemem.evidence.layout import SharedPrefix
from qemem.llm import Ledger, LLMClient, LLMRequest, Message
from qemem.llm.stages import ANSWER, RETRY
from qemem.prompts import render


@dataclass
class Reply:
    """The short answer, the full text it came from, and what happened on the way."""

    text: str
    reasoning: str
    abstention_retry: bool = False
    degradations: list[str] = field(default_factory=list)


def _call(
    llm: LLMClient,
    user: str,
    stage: str,
    max_tokens: int,
    ledger: Ledger | None,
    inputs: Mapping[str, Any],
    prefix: SharedPrefix | None,
) -> Reply:
    if prefix is None:
        request = LLMRequest(
            system=render("answer"),
            messages=[Message("user", user)],
            stage=stage,
            max_tokens=max_tokens,
            inputs=inputs,
        )
    else:
        request = prefix.request(stage, user, max_tokens=max_tokens, inputs=inputs, task="answer")
    reasoning = llm.complete(request, ledger=ledger).text
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
) -> Reply:
    """Answer ``question`` from the ``evidence`` text. When the answer is an abstention (and
    ``retry_abstention``), ask once more with the retry note; the retry's answer replaces the
    first unless it abstains too. ``inputs`` (the evidence as data, see ``Assembly.inputs``)
    goes on the requests with the question; ``stage`` labels the calls (the retry
    ``{stage}.retry``). With a shared ``prefix`` (the ``cached`` layout) both calls open with
    it, then the answer instructions and ``evidence``."""
    user = render("answer_input", evidence=evidence, question=question)
    given = {"question": question, **(inputs or {})}
    first = _call(llm, user, stage, max_tokens, ledger, given, prefix)
    if not retry_abstention or not is_abstention(first.text):
        return first
    retry = user + render("answer_retry")
    second = _call(llm, retry, stage + RETRY, max_tokens, ledger, given, prefix)
    chosen = first if is_abstention(second.text) else second
    return Reply(
        chosen.text,
        chosen.reasoning,
        abstention_retry=True,
        degradations=[*first.degradations, *second.degradations],
    )
