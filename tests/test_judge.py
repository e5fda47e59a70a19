"""The LLM judge: request shape, the offline judge's rule, several runs, parse failures."""

from __future__ import annotations

from pathlib import Path

from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS, judge_answer, judge_request
from qemem.llm import LLMCache, LLMClient, LLMRequest, Message
from qemem.prompts import prompt_hashes, render
from qemem.testing import OfflineLLM, offline_answer


def test_request_carries_question_gold_prediction_and_pass_number() -> None:
    request = judge_request("When did she move?", "May 2023", "in May 2023", run=2)
    assert request.stage == "judge" and request.temperature == 0.0
    assert request.system == render("judge")
    user = request.messages[0].content
    assert "<reference_answer>\nMay 2023\n</reference_answer>" in user
    assert "<generated_answer>\nin May 2023\n</generated_answer>" in user
    assert "Grading pass 2." in user
    assert request.inputs == {
        "question": "When did she move?",
        "gold": "May 2023",
        "prediction": "in May 2023",
    }
    assert judge_request("q", "g", "", run=1).messages[0].content.count("(no answer)") == 1
    assert {"judge", "judge_input"} <= set(prompt_hashes())


def test_offline_judge_rule() -> None:
    def label(gold: str, prediction: str) -> str:
        verdict = offline_answer(judge_request("q?", gold, prediction, 1))
        assert isinstance(verdict, dict)
        return str(verdict["label"])

    # gold contained in the prediction (case-insensitive)
    assert label("Biscuit", "Her cat is called biscuit.") == "CORRECT"
    # f1_common("red car", "blue car") = set F1 of {red, car} vs {blue, car} = 0.5
    assert label("blue car", "red car") == "CORRECT"
    # {a, red, car} vs {blue, car}: P = 1/3, R = 1/2, F1 = 0.4
    assert label("blue car", "a red car") == "WRONG"
    assert label("7 May 2023", "no information") == "WRONG"
    # an empty prediction is judged as the prompt shows it
    assert label("no answer", "") == "CORRECT"


def test_runs_are_distinct_requests_and_cached_apart(tmp_path: Path) -> None:
    fake = OfflineLLM()
    llm = LLMClient(fake, cache=LLMCache(tmp_path / "c.db"))
    result = judge_answer(llm, "Cat's name?", "Biscuit", "It is Biscuit", runs=3)
    assert result.labels == ["CORRECT"] * 3 and result.parse_failures == 0 and result.score == 1.0
    assert len(fake.calls) == 3 and llm.cache is not None and llm.cache.count() == 3
    again = judge_answer(llm, "Cat's name?", "Biscuit", "It is Biscuit", runs=3)
    assert again.labels == result.labels and len(fake.calls) == 3  # all from the cache
    llm.close()


def test_parse_failures_count_wrong() -> None:
    answers = iter(['{"label": "correct"}', "not json", "still not json"])
    fake = OfflineLLM(handler=lambda request: next(answers))
    llm = LLMClient(fake)
    result = judge_answer(llm, "q", "gold", "pred", runs=2)
    # run 1: lower-case label accepted; run 2: invalid, repair invalid -> WRONG, one failure
    assert result.labels == ["CORRECT", "WRONG"] and result.parse_failures == 1
    assert result.score == 0.5
    stages = llm.ledger.by_stage()
    assert {k: v.calls for k, v in stages.items()} == {"judge": 2, "judge.repair": 1}


def test_offline_judge_leaves_requests_without_inputs_generic() -> None:
    request = LLMRequest(
        "other system",
        [Message("user", "hello")],
        "judge",
        schema={"type": "object", "properties": {"label": {"enum": ["CORRECT", "WRONG"]}}},
    )
    verdict = offline_answer(request)
    assert isinstance(verdict, dict) and verdict["label"] in {"CORRECT", "WRONG"}


def test_max_tokens_is_a_setting_with_room_for_reasoning() -> None:
    assert judge_request("q", "g", "p", run=1).max_tokens == DEFAULT_JUDGE_MAX_TOKENS >= 512
    assert judge_request("q", "g", "p", run=1, max_tokens=4096).max_tokens == 4096
    fake = OfflineLLM()
    judge_answer(LLMClient(fake), "q", "Biscuit", "Biscuit", max_tokens=2048)
    assert [r.max_tokens for r in fake.calls] == [2048]
