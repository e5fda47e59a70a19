from __future__ import annotations

from datetime import datetime

from qemem.errors import LLMCallError
from qemem.llm import Ledger, LLMClient, LLMRequest
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.retrieve.query_rules import rule_flags, strip_speakers
from qemem.testing import OfflineLLM

SPAN = (datetime(2024, 3, 14, 19, 15), datetime(2024, 7, 20, 10, 0))


def test_rule_flags() -> None:
    assert rule_flags("When did Tomas run the half marathon?") == ("date", False, True)
    assert rule_flags("How many cats does Priya have?") == ("count", True, False)
    assert rule_flags("What books has Priya read?") == ("list", True, False)
    assert rule_flags("What activities does Priya do?")[1] is True
    assert rule_flags("Why did Priya quit her job?") == ("reason", False, False)
    assert rule_flags("Would Priya enjoy a pottery trip?") == ("inference", False, False)
    assert rule_flags("What is Priya's new job?") == ("description", False, False)


def test_strip_speakers() -> None:
    speakers = ["Priya", "Tomas"]
    assert strip_speakers("What did Priya's cat do?", speakers) == "What did cat do?"
    assert strip_speakers("When did Tomas and Priya meet ?", speakers) == "When did and meet?"
    assert strip_speakers("Tomas?", speakers) == "Tomas?"  # nothing left: unchanged


def test_fallback_without_llm() -> None:
    plan = plan_question(None, "How many cats does Priya have?", ["Priya"], SPAN)
    assert plan.source == "rules" and "no LLM configured" in plan.note
    assert plan.queries == () and plan.query_set == ["How many cats does Priya have?"]
    assert (plan.answer_type, plan.aggregate, plan.temporal) == ("count", True, False)
    assert rule_plan("When?").temporal


def test_planner_with_scripted_llm() -> None:
    seen: list[LLMRequest] = []

    def handler(request: LLMRequest) -> dict[str, object]:
        seen.append(request)
        return {
            "need": "The names of Priya's cats over time.",
            "answer_type": "count",
            "aggregate": True,
            "temporal": False,
            "queries": [
                "Priya's cat",
                " Biscuit  the cat",
                "biscuit the cat",
                "new kitten",
                "Miso",
            ],
        }

    ledger = Ledger()
    question = "How many cats does Priya have?"
    plan = plan_question(
        LLMClient(OfflineLLM(handler)), question, ["Priya", "Tomas"], SPAN, ledger=ledger
    )
    assert plan.source == "llm"
    assert plan.need == "The names of Priya's cats over time."
    assert plan.queries == ("Priya's cat", "Biscuit the cat", "new kitten", "Miso")
    assert plan.query_set == [question, *plan.queries]
    assert (plan.answer_type, plan.aggregate, plan.temporal) == ("count", True, False)
    assert len(seen) == 1 and seen[0].stage == "plan"
    prompt = seen[0].messages[0].content
    assert "Priya and Tomas" in prompt and "14 March 2024" in prompt and question in prompt
    assert ledger.total().calls == 1


def test_planner_falls_back_on_llm_errors() -> None:
    def fail(request: LLMRequest) -> dict[str, object]:
        raise LLMCallError("provider said no", retryable=False, status=400)

    plan = plan_question(LLMClient(OfflineLLM(fail)), "When did Tomas race?", ["Tomas"], SPAN)
    assert plan.source == "rules" and "provider said no" in plan.note
    assert plan.temporal and plan.queries == ()

    def too_few(request: LLMRequest) -> dict[str, object]:
        return {
            "need": "x",
            "answer_type": "date",
            "aggregate": False,
            "temporal": True,
            "queries": ["one"],
        }

    client = LLMClient(OfflineLLM(too_few))
    plan = plan_question(client, "When did Tomas race?", ["Tomas"], None)
    assert plan.source == "rules" and "StructuredOutputError" in plan.note
