"""Prompt layouts of the query-time stages: the method's published order, or a shared prefix.

* ``paper``: each stage's prompt as the method publishes it: the stage's instructions as the
  system prompt, then its input (question, cards, and the memories it reads).
* ``cached`` (the default): what the constructor (every round and repair), the answerer and
  its abstention retry share comes first and is byte-identical: a common role as the system
  prompt, then one user message opening with the conversation header and the initial
  candidate pool rendered once, closed by a prompt-cache breakpoint; then the stage's own part
  (its instructions, the question, previous cards, new candidates, cited source context; a
  cited turn the pool already shows is named by id with its relative times resolved, not
  repeated). Providers cache the prefix (``qemem.llm.prompt_cache``): every call after the
  first of a question reads it at a tenth of the input price. A prefix shorter than the
  model's minimum cacheable length (4,096 tokens for Claude Haiku 4.5) would not be cached
  at all, so then the role also holds the fewest stage instructions that reach it (their
  stage's own part names its task instead): cached twice or more, they cost less than sent
  once uncached. A question whose prefix cannot reach the minimum even so gets the ``paper``
  layout (``shared_prefix``): nothing of it would be cached.

The layout changes the text only: every request carries the same structured inputs either
way, so the offline LLM's cards and answers are the same under both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from qemem.evidence.context import SourceIndex, format_pool
from qemem.llm import LLMRequest, Message
from qemem.llm.types import Part, estimate_tokens
from qemem.models import Pool, format_datetime
from qemem.prompts import as_data, render

Layout = Literal["cached", "paper"]
LAYOUTS: tuple[Layout, ...] = get_args(Layout)


def conversation_header(index: SourceIndex) -> tuple[str, str]:
    """The conversation's speakers and session span as the shared prefix names them."""
    conversation = index.conversation
    speakers = " and ".join(as_data(s) for s in conversation.speakers) or "unnamed speakers"
    span = conversation.span
    when = f"{format_datetime(span[0])} to {format_datetime(span[1])}" if span else "unknown dates"
    return speakers, when


PADDINGS: tuple[tuple[str, ...], ...] = ((), ("answer",), ("construct",), ("construct", "answer"))
"""The stages whose instructions may pad the role, shortest first."""


@dataclass(frozen=True)
class SharedPrefix:
    """The part of a question's prompts every stage shares: the role (system prompt) and the
    conversation header with the initial pool (``text``), rendered once; ``instructions``
    names the stages whose instructions the role holds (see the module docstring)."""

    system: str
    text: str
    instructions: tuple[str, ...] = ()

    @classmethod
    def of(cls, index: SourceIndex, pool: Pool, minimum: int = 0) -> SharedPrefix:
        """The shared prefix of the questions answered from ``pool``. When the role and pool
        are shorter than ``minimum`` tokens (the model's minimum cacheable length), the role
        also holds the fewest stage instructions that reach it (none when even both would
        not: then nothing is cached anyway)."""
        speakers, span = conversation_header(index)
        memories = format_pool(index, pool)
        text = render("shared_memories", speakers=speakers, span=span, memories=memories)
        for stages in PADDINGS:
            prefix = cls(padded_role(stages), text, stages)
            if prefix.tokens >= minimum:
                return prefix
        return cls(padded_role(()), text)

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
        """A request of ``stage`` (``construct`` or ``answer``, or a follow-up of one) with the
        shared prefix (closed by a cache breakpoint), then the instructions of ``task``
        (default: the stage's first part; or, when the role holds them, the task's name) and
        ``stage_text``."""
        base = task or stage.split(".", 1)[0]
        held = base in self.instructions
        head = render(f"{base}_task") if held else f"{render(base).rstrip()}\n\n"
        message = Message.of("user", [Part(self.text, cache=True), Part(head + stage_text)])
        return LLMRequest(self.system, [message], stage, max_tokens=max_tokens, inputs=dict(inputs))


def padded_role(stages: tuple[str, ...]) -> str:
    """The ``cached`` layout's system prompt: the common role, with the instructions of
    ``stages`` (their own templates, verbatim) when any."""
    if not stages:
        return render("role")
    tasks = "".join(render(f"role_task_{s}", instructions=render(s)) for s in stages)
    return render("role") + render("role_tasks") + tasks


def shared_prefix(index: SourceIndex, pool: Pool, minimum: int) -> SharedPrefix | None:
    """The ``cached`` layout's prefix for ``pool`` (:meth:`SharedPrefix.of`), or None when
    even with both stages' instructions it stays below ``minimum``: nothing would be cached,
    and the published layout, a little shorter, is used for the question instead."""
    prefix = SharedPrefix.of(index, pool, minimum)
    return prefix if prefix.tokens >= minimum else None
