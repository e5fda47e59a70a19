"""The LLM judge of the LoCoMo evaluation: CORRECT or WRONG against the gold answer.

The judge reads the question, the gold answer and the generated answer (prompts ``judge`` and
``judge_input``, in our own words after the protocol of this literature: generous on topic, and
on dates in other formats or relative forms that refer to the same period) and returns JSON
``{"label": "CORRECT" | "WRONG"}`` through structured output at temperature 0.

With ``runs > 1`` the judge is asked that many times. Each request carries its pass number
("Grading pass 2"), so the record/replay cache keeps the runs apart (identical requests would
collapse into one cached exchange) and a real provider sees distinct requests. An output that
does not validate even after the repair call counts as WRONG and is counted as a parse failure.

Each request carries the question, the gold answer and the prediction as shown in
``LLMRequest.inputs``, for the offline judge of ``qemem.testing``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic

from qemem.errors import StructuredOutputError
from qemem.llm import Ledger, LLMClient, LLMRequest, Message
from qemem.llm.stages import JUDGE
from qemem.prompts import render

Label = Literal["CORRECT", "WRONG"]
#: Output-token limit of a judge call. Reasoning models count their reasoning against it, so
#: a small limit (64) turns their verdicts into parse failures scored WRONG; 1024 leaves room.
DEFAULT_JUDGE_MAX_TOKENS = 1024


class Verdict(pydantic.BaseModel):
    """The judge's output."""

    label: Label

    @pydantic.field_validator("label", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value


@dataclass
class Judgement:
    """Labels of every judge run (a failed parse is WRONG) and how many runs failed to parse."""

    labels: list[Label] = field(default_factory=list)
    parse_failures: int = 0

    @property
    def score(self) -> float:
        """Share of runs that said CORRECT."""
        return sum(label == "CORRECT" for label in self.labels) / len(self.labels)


def judge_request(
    question: str,
    gold: str,
    prediction: str,
    run: int,
    *,
    max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS,
) -> LLMRequest:
    """The judge request of pass ``run`` (1-based)."""
    shown = prediction or "(no answer)"
    user = render("judge_input", question=question, gold=gold, prediction=shown, run=run)
    return LLMRequest(
        system=render("judge"),
        messages=[Message("user", user)],
        stage=JUDGE,
        temperature=0.0,
        max_tokens=max_tokens,
        inputs={"question": question, "gold": gold, "prediction": shown},
    )


def judge_answer(
    llm: LLMClient,
    question: str,
    gold: str,
    prediction: str,
    *,
    runs: int = 1,
    max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS,
    ledger: Ledger | None = None,
) -> Judgement:
    """Judge ``prediction`` against ``gold`` ``runs`` times."""
    result = Judgement()
    for run in range(1, runs + 1):
        request = judge_request(question, gold, prediction, run, max_tokens=max_tokens)
        try:
            verdict = llm.structured(request, Verdict, ledger=ledger).value
        except StructuredOutputError:
            result.labels.append("WRONG")
            result.parse_failures += 1
            continue
        result.labels.append(verdict.label)
    return result
