"""The offline LLM (qemem.testing): generic schema-valid output derived from the prompt for
requests it has no stage answerer for."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from qemem.llm import LLMClient, LLMRequest, LLMResponse, Message
from qemem.testing import ID_PATTERN, OfflineLLM, generic_instance

PROMPT = """Question: When did Caroline go to the LGBTQ support group?
Episodes:
[E12] (8 May 2023) Caroline tells Melanie about the support group she attended.
Facts:
[S7] Caroline is a transgender woman. (from E12)
Turns:
[D1:3] Caroline: I went to a LGBTQ support group yesterday and it was so powerful.
[D2:14] Melanie: Painting helps me relax after work.
"""
PROMPT_IDS = {"E12", "S7", "D1:3", "D2:14"}


class AnswerType(StrEnum):
    date = "date"
    count = "count"
    entity = "entity"


class Plan(BaseModel):
    need: str
    answer_type: AnswerType
    aggregate: bool
    temporal: bool
    queries: list[str] = Field(min_length=4, max_length=6)


class Card(BaseModel):
    claim: str
    sources: list[str] = Field(min_length=1)
    quote: str
    time: str = ""
    relation: Literal["answer", "intermediate", "temporal", "inference"]


class Evidence(BaseModel):
    cards: list[Card]
    sufficient: bool
    missing: str | None = None
    follow_up_queries: list[str] = Field(default_factory=list, max_length=3)


class Segments(BaseModel):
    boundaries: list[list[int]]
    episode_id: str
    turn_ids: list[str]
    confidence: float = Field(ge=0.0, le=1.0)
    rank: int = Field(gt=2, lt=10)


class Nested(BaseModel):
    title: str = Field(min_length=3, max_length=12)
    tags: set[str]
    pair: tuple[int, str]
    note: Literal["x"] | None


@pytest.mark.parametrize("model", [Plan, Evidence, Segments, Nested])
def test_generic_output_validates_against_stage_models(model: type[BaseModel]) -> None:
    client = LLMClient(OfflineLLM())
    req = LLMRequest("You are a careful assistant.", [Message("user", PROMPT)], "construct")
    result = client.structured(req, model)
    assert not result.repaired
    assert isinstance(result.value, model)


def test_id_fields_cite_ids_that_occur_in_the_prompt() -> None:
    evidence = LLMClient(OfflineLLM()).structured(
        LLMRequest("", [Message("user", PROMPT)], "construct"), Evidence
    )
    sources = {s for card in evidence.value.cards for s in card.sources}
    assert sources and sources <= PROMPT_IDS
    seg = generic_instance(Segments.model_json_schema(), PROMPT)
    assert seg["episode_id"] in PROMPT_IDS
    assert set(seg["turn_ids"]) <= PROMPT_IDS
    # a quote is a verbatim span of the prompt's words
    assert evidence.value.cards[0].quote in " ".join(PROMPT.split())


def test_id_pattern_matches_qemem_ids_only() -> None:
    text = "see D3:12, T7, E12 and S7 but not Easter or TE or 2023:05 or xS7"
    assert ID_PATTERN.findall(text) == ["D3:12", "T7", "E12", "S7"]


def test_offline_llm_is_deterministic_and_reports_estimated_tokens() -> None:
    req = LLMRequest("sys", [Message("user", PROMPT)], "answer")
    a, b = OfflineLLM().complete(req), OfflineLLM().complete(req)
    assert a == b
    assert a.text.splitlines()[-1].startswith("FINAL ANSWER: ")
    assert "Caroline" in a.text
    # ceil(len("sys\n" + PROMPT) / 4)
    assert a.input_tokens == -(-(len(PROMPT) + 4) // 4)
    assert a.model == "fake"


def test_handler_scripts_answers_as_text_dict_or_response() -> None:
    def handler(request: LLMRequest) -> str | dict[str, object] | LLMResponse:
        if request.stage == "plan":
            return {
                "need": "n",
                "answer_type": "date",
                "aggregate": False,
                "temporal": True,
                "queries": ["a", "b", "c", "d"],
            }
        if request.stage == "judge":
            return LLMResponse("CORRECT", None, 1, 1, 0.0, "fake", None, "judge")
        return "some text\nFINAL ANSWER: 7 May 2023"

    fake = OfflineLLM(handler)
    client = LLMClient(fake)
    plan = client.structured(LLMRequest("", [Message("user", "q")], "plan"), Plan)
    assert plan.value.answer_type is AnswerType.date and plan.value.queries[-1] == "d"
    assert client.complete(LLMRequest("", [Message("user", "q")], "judge")).text == "CORRECT"
    answer = client.complete(LLMRequest("", [Message("user", "q")], "answer"))
    assert answer.text.endswith("FINAL ANSWER: 7 May 2023")
    assert [r.stage for r in fake.calls] == ["plan", "judge", "answer"]


def test_stages_without_their_inputs_get_the_generic_answer() -> None:
    fake = OfflineLLM()
    for stage in ("demo.sub", "plan", "answer.retry", "build.episode"):
        out = fake.complete(LLMRequest("", [Message("user", "x")], stage))
        assert out.text.startswith("Based on the available memories")
