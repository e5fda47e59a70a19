"""Query planning: one LLM call turns a question into a :class:`~qemem.models.Plan`; without an
LLM, or when the call fails, simple wording rules produce the plan instead (and say so)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from qemem.errors import LLMError
from qemem.llm.stages import PLAN
from qemem.models import AnswerType, Plan, format_datetime
from qemem.participants import Participants
from qemem.prompts import render
from qemem.retrieve.query_rules import rule_flags

if TYPE_CHECKING:
    from qemem.llm import Ledger, LLMClient

MAX_QUERIES = 6
PLAN_SYSTEM = (
    "You are the query planner of a long-term conversational memory system. Reply with JSON only."
)


class PlanOutput(BaseModel):
    """The planner's structured output (the schema the LLM must follow)."""

    need: str = Field(min_length=1, description="what information the answer requires")
    answer_type: AnswerType
    aggregate: bool
    temporal: bool
    queries: list[str] = Field(min_length=4, max_length=MAX_QUERIES)


def rule_plan(question: str, note: str = "no LLM configured") -> Plan:
    """The fallback plan: the question alone, with flags from :func:`rule_flags`."""
    answer_type, aggregate, temporal = rule_flags(question)
    return Plan(
        question=question,
        need=question,
        answer_type=answer_type,
        aggregate=aggregate,
        temporal=temporal,
        queries=(),
        source="rules",
        note=f"rule plan: {note}",
    )


def _span_text(span: tuple[datetime, datetime] | None) -> str:
    if span is None:
        return "an unknown period"
    return f"{format_datetime(span[0])} to {format_datetime(span[1])}"


def plan_question(
    llm: LLMClient | None,
    question: str,
    speakers: Sequence[str] | Participants,
    span: tuple[datetime, datetime] | None,
    *,
    ledger: Ledger | None = None,
) -> Plan:
    """Plan ``question`` with one LLM call (stage ``plan``), told the conversation's
    participants (``speakers``: their names, or the participants with their roles) and the
    sessions' time span; fall back to :func:`rule_plan` when ``llm`` is None or the call fails (the
    plan's ``note`` carries the error). Planned queries are stripped, de-duplicated and capped
    at six."""
    if llm is None:
        return rule_plan(question)
    from qemem.llm import LLMRequest, Message

    who = speakers if isinstance(speakers, Participants) else Participants.of(speakers)
    prompt = render("plan", **who.prompt_fields(), question=question, span=_span_text(span))
    request = LLMRequest(
        PLAN_SYSTEM, [Message("user", prompt)], stage=PLAN, inputs={"question": question}
    )
    try:
        output = llm.structured(request, PlanOutput, ledger=ledger).value
    except LLMError as exc:
        return rule_plan(question, f"planner call failed ({type(exc).__name__}: {exc})")
    queries: list[str] = []
    for query in output.queries:
        query = " ".join(query.split())
        if query and query.lower() not in {q.lower() for q in queries}:
            queries.append(query)
    return Plan(
        question=question,
        need=output.need.strip(),
        answer_type=output.answer_type,
        aggregate=output.aggregate,
        temporal=output.temporal,
        queries=tuple(queries[:MAX_QUERIES]),
        source="llm",
        note=f"planned by {llm!r}",
    )
