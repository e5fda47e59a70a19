"""Prompt layouts of the query-time stages: the method's published order, or a shared prefix.

* ``paper`` (the default): each stage's prompt as the method publishes it: the stage's
  instructions as the system prompt, then its input (question, cards, and the memories it
  reads).
* ``cached``: what the constructor (every round and repair), the answerer and
  its abstention retry share comes first and is byte-identical: a common role as the system
  prompt, then one user message opening with the conversation header and the initial
  candidate pool rendered once, closed by a prompt-cache breakpoint; then the stage's own part
  (its instructions, the question, previous cards, new candidates, cited source context; a
  cited turn the pool already shows is named by id with its relative times resolved, not
  repeated). Providers cache the prefix (``qemem.llm.prompt_cache``): every call after the
  first of a question reads it at a tenth of the input price. A prefix shorter than the
  model's minimum cacheable length (4,096 tokens for Claude Haiku 4.5) would not be cached
  at all, so then the role also holds the fewest stage instructions that reach it, each under
  its task's name: cached twice or more, they cost less than sent once uncached. Every stage's
  own part opens by naming its task, with the task's instructions when the role does not hold
  them, so a request reads the same whichever instructions pad the role. A question whose
  prefix cannot reach the minimum even so gets the ``paper`` layout (``shared_prefix``):
  nothing of it would be cached.

With an unbounded answer background (``AskConfig.background_tokens`` None) the layout changes
the text only: every request carries the same structured inputs either way, so the offline
LLM's cards and answers are the same under both. With a bounded one, the ``cached`` answer
still opens with the whole initial pool, and only the follow-up rounds' records are bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from qemem.evidence.context import SourceIndex, format_pool
from qemem.llm import LLMRequest, Message
from qemem.llm.types import Part, estimate_tokens
from qemem.models import Pool, format_datetime
from qemem.prompts import render

Layout = Literal["cached", "paper"]
LAYOUTS: tuple[Layout, ...] = get_args(Layout)


def conversation_header(index: SourceIndex) -> tuple[str, str]:
    """The conversation (as prompts introduce it, naming its participants) and its session
    span, as the shared prefix names them."""
    span = index.conversation.span
    when = f"{format_datetime(span[0])} to {format_datetime(span[1])}" if span else "unknown dates"
    return index.participants.conversation, when


AnswerStage = Literal["answer", "respond"]
"""The stage that answers: the short ``answer`` of a question, or the assistant's ``respond``."""
TASK_TITLES = {"construct": "evidence cards", "answer": "the answer", "respond": "the reply"}
"""How a stage's task is named in the prompts (the role holds it in capitals)."""
PURPOSES: dict[AnswerStage, str] = {
    "answer": "answer one question about it",
    "respond": "reply, as the assistant, to the user's new request",
}
"""What the role says the memories are for, by the answering stage."""


def paddings(answer: AnswerStage = "answer") -> tuple[tuple[str, ...], ...]:
    """The stages whose instructions may pad the role, shortest first."""
    return ((), (answer,), ("construct",), ("construct", answer))


def instructions(stage: str, fields: Mapping[str, str]) -> str:
    """The instructions of ``stage`` (its template), naming the participants by ``fields``."""
    return render(stage, **fields)


@dataclass(frozen=True)
class SharedPrefix:
    """The part of a question's prompts every stage shares: the role (system prompt) and the
    conversation header with the initial pool (``text``), rendered once; ``instructions``
    names the stages whose instructions the role holds (see the module docstring) and
    ``fields`` the participants' prompt fields the stages' instructions are rendered with."""

    system: str
    text: str
    instructions: tuple[str, ...] = ()
    fields: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, index: SourceIndex, pool: Pool, minimum: int = 0, answer: AnswerStage = "answer"
    ) -> SharedPrefix:
        """The shared prefix of the questions answered from ``pool`` by the ``answer`` stage.
        When the role and pool are shorter than ``minimum`` tokens (the model's minimum
        cacheable length), the role also holds the fewest stage instructions that reach it
        (none when even both would not: then nothing is cached anyway)."""
        conversation, span = conversation_header(index)
        fields = index.participants.prompt_fields()
        memories = format_pool(index, pool)
        text = render("shared_memories", conversation=conversation, span=span, memories=memories)
        for stages in paddings(answer):
            prefix = cls(padded_role(stages, fields, answer), text, stages, fields)
            if prefix.tokens >= minimum:
                return prefix
        return cls(padded_role((), fields, answer), text, (), fields)

    @property
    def tokens(self) -> int:
        """The prefix's length in tokens (estimated as characters / 4)."""
        return estimate_tokens(f"{self.system}\n{self.text}")

    def request(
        self,
        stage: str,
        stage_text: str,
        *,
        max_tokens: int,
        inputs: Mapping[str, Any],
        task: str | None = None,
    ) -> LLMRequest:
        """A request of ``stage`` (``construct``, ``answer`` or ``respond``, or a follow-up of
        one) with the shared prefix (closed by a cache breakpoint), then the task named with
        its instructions (default: the stage's; when the role holds them, the task's name
        alone) and ``stage_text``."""
        base = task or stage.split(".", 1)[0]
        title = TASK_TITLES[base]
        if base in self.instructions:
            head = render("task_held", title=title)
        else:
            given = instructions(base, self.fields).rstrip()
            head = render("task_given", title=title, instructions=given)
        message = Message.of("user", [Part(self.text, cache=True), Part(head + stage_text)])
        return LLMRequest(self.system, [message], stage, max_tokens=max_tokens, inputs=dict(inputs))


def padded_role(
    stages: tuple[str, ...], fields: Mapping[str, str], answer: AnswerStage = "answer"
) -> str:
    """The ``cached`` layout's system prompt: the common role (naming the participants by
    ``fields``, saying what the ``answer`` stage does), with the instructions of ``stages``
    (their own templates, verbatim, each under its task's name) when any."""
    role = render("role", conversation=fields.get("conversation", ""), purpose=PURPOSES[answer])
    if not stages:
        return role
    tasks = "".join(
        render("role_task", title=TASK_TITLES[s].upper(), instructions=instructions(s, fields))
        for s in stages
    )
    return role + render("role_tasks") + tasks


def shared_prefix(
    index: SourceIndex, pool: Pool, minimum: int, answer: AnswerStage = "answer"
) -> SharedPrefix | None:
    """The ``cached`` layout's prefix for ``pool`` (:meth:`SharedPrefix.of`), or None when
    even with both stages' instructions it stays below ``minimum``: nothing would be cached,
    and the published layout, a little shorter, is used for the question instead."""
    prefix = SharedPrefix.of(index, pool, minimum, answer)
    return prefix if prefix.tokens >= minimum else None
