"""The LLM judge of a BEAM run: rubric items scored 0 / 0.5 / 1, and event-ordering answers
matched to their reference items (prompts ``beam_judge`` and ``beam_order``, in our own words
after BEAM's published method; the scoring itself is :mod:`qemem.eval.beam_scoring`).

Each rubric item is one call (stage ``judge.rubric``) with the request, the item and the
response, answered with ``{"score": 0 | 0.5 | 1, "reason": ...}``. An event-ordering answer
is split into its non-blank lines and matched in one call (stage ``judge.order``): one
reference-item number per line, 0 for none. Output that does not validate even after the
repair call scores the item 0 (or matches nothing) and counts as a parse failure. Each
request carries its structured inputs (``LLMRequest.inputs``) for the offline judge of
``qemem.testing``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from qemem.errors import StructuredOutputError
from qemem.eval.beam_scoring import ITEM_SCORES
from qemem.llm import Ledger, LLMClient, LLMRequest, Message, stages
from qemem.prompts import load_prompt, render

#: the prompt templates of the BEAM judge, recorded in a run's manifest
JUDGE_PROMPTS: tuple[str, ...] = (
    "beam_judge",
    "beam_judge_input",
    "beam_order",
    "beam_order_input",
)


class ItemVerdict(pydantic.BaseModel):
    """The judge's score of one rubric item."""

    score: float
    reason: str = ""

    @pydantic.field_validator("score", mode="before")
    @classmethod
    def _allowed(cls, value: Any) -> Any:
        number = float(value) if isinstance(value, int | float | str) else value
        if number not in ITEM_SCORES:
            raise ValueError(f"score must be 0, 0.5 or 1, got {value!r}")
        return number


class OrderMatches(pydantic.BaseModel):
    """The reference item (1-based, 0 for none) each answer line describes."""

    matches: list[int]


@dataclass
class RubricJudgement:
    """Every rubric item's score and reason, and how many items failed to parse (scored 0)."""

    scores: list[float] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    parse_failures: int = 0


def judge_prompts() -> dict[str, str]:
    """The judge's prompt templates, by name, as the manifest records them."""
    return {name: load_prompt(name) for name in JUDGE_PROMPTS}


def rubric_request(question: str, item: str, response: str, *, max_tokens: int) -> LLMRequest:
    """The judge request for one rubric item."""
    shown = response or "(no response)"
    user = render("beam_judge_input", question=question, rubric_item=item, response=shown)
    return LLMRequest(
        system=render("beam_judge"),
        messages=[Message("user", user)],
        stage=stages.JUDGE_RUBRIC,
        temperature=0.0,
        max_tokens=max_tokens,
        inputs={"question": question, "rubric_item": item, "response": shown},
    )


def judge_rubric(
    llm: LLMClient,
    question: str,
    rubric: Sequence[str],
    response: str,
    *,
    max_tokens: int,
    ledger: Ledger | None = None,
) -> RubricJudgement:
    """Score each rubric item of a probe against ``response``."""
    result = RubricJudgement()
    for item in rubric:
        request = rubric_request(question, item, response, max_tokens=max_tokens)
        try:
            verdict = llm.structured(request, ItemVerdict, ledger=ledger).value
        except StructuredOutputError:
            result.scores.append(0.0)
            result.reasons.append("(the judge's output did not parse)")
            result.parse_failures += 1
            continue
        result.scores.append(verdict.score)
        result.reasons.append(verdict.reason)
    return result


def answer_lines(response: str) -> list[str]:
    """An event-ordering answer's items: its non-blank lines, stripped."""
    return [line.strip() for line in response.splitlines() if line.strip()]


def match_order(
    llm: LLMClient,
    reference: Sequence[str],
    lines: Sequence[str],
    *,
    max_tokens: int,
    ledger: Ledger | None = None,
) -> tuple[list[int | None], bool]:
    """For each answer line, the 0-based index of the reference item it describes (None for
    none), and whether the judge's output parsed (if not, nothing matches)."""
    if not lines:
        return [], True
    numbered = "\n".join(f"{n}. {item}" for n, item in enumerate(reference, start=1))
    shown = "\n".join(f"{n}. {line}" for n, line in enumerate(lines, start=1))
    request = LLMRequest(
        system=render("beam_order"),
        messages=[
            Message(
                "user",
                render("beam_order_input", reference=numbered, lines=shown, count=len(lines)),
            )
        ],
        stage=stages.JUDGE_ORDER,
        temperature=0.0,
        max_tokens=max_tokens,
        inputs={"reference": list(reference), "lines": list(lines)},
    )
    try:
        found = llm.structured(request, OrderMatches, ledger=ledger).value.matches
    except StructuredOutputError:
        return [None] * len(lines), False
    padded = [*found[: len(lines)], *[0] * (len(lines) - len(found))]
    return [m - 1 if 1 <= m <= len(reference) else None for m in padded], True
