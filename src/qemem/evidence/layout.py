"""Prompt layouts of the query-time stages: the method's published order, or a shared prefix.

* ``paper``: each stage's prompt as the method publishes it: the stage's instructions as the
  system prompt, then its input (question, cards, and the memories it reads).
* ``cached`` (the default): what the constructor (every round and repair), the answerer and
  its abstention retry share comes first and is byte-identical: a common role as the system
  prompt, then one user message opening with the conversation header and the initial
  candidate pool rendered once, closed by a prompt-cache breakpoint; then the stage's own part
  (its instructions, the question, previous cards, new candidates, cited source context).
  Providers cache the prefix (``qemem.llm.prompt_cache``): every call after the first of a
  question reads it at a tenth of the input price.

The layout changes the text only: every request carries the same structured inputs either
way, so the offline LLM's cards and answers are the same under both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from qemem.evidence.context import SourceIndex, format_pool
from qemem.llm import LLMRequest, Message
from qemem.llm.types import Part
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


@dataclass(frozen=True)
class SharedPrefix:
    """The part of a question's prompts every stage shares: the role (system prompt) and the
    conversation header with the initial pool (``text``), rendered once."""

    system: str
    text: str

    @classmethod
    def of(cls, index: SourceIndex, pool: Pool) -> SharedPrefix:
        """The shared prefix of the questions answered from ``pool``."""
        speakers, span = conversation_header(index)
        memories = format_pool(index, pool)
        text = render("shared_memories", speakers=speakers, span=span, memories=memories)
        return cls(render("role"), text)

    def request(
        self,
        instructions: str,
        stage_text: str,
        *,
        stage: str,
        max_tokens: int,
        inputs: Mapping[str, Any],
    ) -> LLMRequest:
        """A request with the shared prefix (closed by a cache breakpoint), then the stage's
        ``instructions`` and ``stage_text``."""
        own = f"{instructions.rstrip()}\n\n{stage_text}"
        message = Message.of("user", [Part(self.text, cache=True), Part(own)])
        return LLMRequest(self.system, [message], stage, max_tokens=max_tokens, inputs=dict(inputs))
