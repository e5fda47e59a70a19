"""BEAM's judge calls: rubric items scored 0 / 0.5 / 1 (a string score too), answer lines
matched to reference items, and output that does not parse scored 0 and counted."""

from __future__ import annotations

from typing import Any

from qemem.eval.beam_judge import answer_lines, judge_rubric, match_order
from qemem.llm import Ledger, LLMClient, LLMRequest
from qemem.testing import OfflineLLM


def _client(answers: dict[str, Any]) -> LLMClient:
    def handler(request: LLMRequest) -> Any:
        return answers[request.stage.removesuffix(".repair")]

    return LLMClient(OfflineLLM(handler))


def test_items_take_their_scores_and_bad_output_scores_zero() -> None:
    judge = _client({"judge.rubric": {"score": "0.5", "reason": "half"}})
    result = judge_rubric(judge, "Q?", ["a", "b"], "resp", max_tokens=64, ledger=Ledger())
    assert (result.scores, result.reasons, result.parse_failures) == ([0.5, 0.5], ["half"] * 2, 0)
    broken = _client({"judge.rubric": {"score": 0.7}})
    result = judge_rubric(broken, "Q?", ["a"], "resp", max_tokens=64)
    assert (result.scores, result.parse_failures) == ([0.0], 1)


def test_lines_match_reference_items_by_number() -> None:
    assert answer_lines("Order:\n\n 1) Setup \n2) Deploy\n") == ["Order:", "1) Setup", "2) Deploy"]
    judge = _client({"judge.order": {"matches": [0, 1, 2, 9]}})
    matches, parsed = match_order(judge, ["Setup", "Deploy"], ["x", "a", "b", "c"], max_tokens=64)
    assert (matches, parsed) == ([None, 0, 1, None], True)
    short = _client({"judge.order": {"matches": [2]}})
    assert match_order(short, ["A", "B"], ["x", "y"], max_tokens=64)[0] == [1, None]
    broken = _client({"judge.order": {"matches": "none"}})
    assert match_order(broken, ["A"], ["x"], max_tokens=64) == ([None], False)
    assert match_order(broken, ["A"], [], max_tokens=64) == ([], True)
