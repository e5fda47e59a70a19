"""``ask`` end to end on the bundled sample: every mode, refinement, degradation, offline fake."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from qemem.answer import AskConfig, ask
from qemem.answer.wire import answer_from_json, answer_to_json
from qemem.embed import HashEmbedder
from qemem.errors import InputError, LLMError
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.retrieve.budgets import RetrievalConfig
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

SCOPE = Scope("demo-1")
QUESTION = "When did Priya go to her first pottery class?"
EMBEDDER = HashEmbedder()
PLAN = {
    "need": "The date of Priya's first pottery class.",
    "answer_type": "date",
    "aggregate": False,
    "temporal": True,
    "queries": ["first pottery class", "pottery studio", "Priya clay wheel", "pottery course"],
}
POTTERY = {
    "claim": "Priya went to her first pottery class.",
    "sources": ["D1:3"],
    "quote": "I went to my first pottery class last Saturday",
    "time": "9 March 2024",
    "relation": "answer candidate",
}
SMALL = AskConfig(retrieval=RetrievalConfig(budget_turns=3, context_window=0, budget_episodes=0))


@pytest.fixture(scope="module")
def store() -> SQLiteStore:
    store = SQLiteStore(":memory:")
    sample = resources.files("qemem.data").joinpath("sample.json")
    with resources.as_file(sample) as path:
        Memory(store, EMBEDDER).ingest(path)
    return store


class Script:
    """A scripted LLM: per stage, a list of outputs used in turn (the last one repeats)."""

    def __init__(self, **outputs: list[Any]) -> None:
        self.outputs = {"plan": [PLAN], **outputs}
        self.requests: list[LLMRequest] = []

    @property
    def stages(self) -> list[str]:
        return [r.stage for r in self.requests]

    def __call__(self, request: LLMRequest) -> Any:
        self.requests.append(request)
        queue = self.outputs[request.stage.split(".")[0]]
        return queue.pop(0) if len(queue) > 1 else queue[0]


def run(store: SQLiteStore, script: Script | None, mode: Any, **kw: Any) -> Any:
    llm = LLMClient(OfflineLLM(script)) if script is not None else None
    return ask(store, SCOPE, EMBEDDER, llm, QUESTION, mode=mode, **kw)


def test_retrieval_mode_makes_no_call(store: SQLiteStore) -> None:
    fake = OfflineLLM()
    answer = ask(store, SCOPE, EMBEDDER, LLMClient(fake), QUESTION, mode="retrieval")
    assert fake.calls == []
    assert answer.text == "" and answer.cards == [] and answer.trace.calls == []
    assert answer.evidence.termination == "no_llm"
    assert answer.evidence.plan.source == "rules"
    assert "D1:3" in answer.evidence.shown.turns
    assert answer.evidence.rounds[0].refs() == answer.pool.refs()
    assert [t.phrase for t in answer.pool_times["D1:3"]] == ["the Saturday before 14 March 2024"]
    data = answer_to_json(answer)
    json.dumps(data)
    assert data["evidence"]["rounds"][0]["pool"][0]["ref"] == {"space": "turn", "id": "D1:1"}
    assert answer_from_json(json.loads(json.dumps(data))) == answer


def test_retrieval_mode_without_llm(store: SQLiteStore) -> None:
    answer = run(store, None, "retrieval")
    assert answer.text == "" and not answer.pool.is_empty()


@pytest.mark.parametrize("mode", ["direct", "no-refine", "full"])
def test_modes_needing_an_llm_refuse_without_one(store: SQLiteStore, mode: str) -> None:
    with pytest.raises(LLMError, match="QEMEM_LLM"):
        run(store, None, mode)


def test_bad_input(store: SQLiteStore) -> None:
    with pytest.raises(InputError, match="unknown mode"):
        run(store, None, "fast")
    with pytest.raises(InputError, match="empty"):
        ask(store, SCOPE, EMBEDDER, None, "  ", mode="retrieval")


def test_direct_mode(store: SQLiteStore) -> None:
    script = Script(answer=["On the Saturday before 14 March.\nFINAL ANSWER: 9 March 2024."])
    answer = run(store, script, "direct")
    assert script.stages == ["plan", "answer"]
    assert answer.text == "9 March 2024" and answer.cards == []
    assert answer.evidence.plan.source == "llm" and answer.evidence.termination is None
    assert answer.evidence.shown.turns == [i.id for i in answer.pool.turns]
    assert "[D1:3] Priya:" in script.requests[1].messages[0].content


def test_no_refine_mode(store: SQLiteStore) -> None:
    script = Script(
        construct=[{"cards": [POTTERY], "sufficient": False, "follow_up_queries": ["studio"]}],
        answer=["FINAL ANSWER: the Saturday before 14 March 2024"],
    )
    answer = run(store, script, "no-refine")
    assert script.stages == ["plan", "construct", "answer"]
    assert answer.evidence.termination == "round_budget"
    assert answer.text == "the Saturday before 14 March 2024"
    [card] = answer.cards
    assert card.verified and card.resolved_time is not None
    assert card.resolved_time.phrase == "the Saturday before 14 March 2024"
    assert card.time_agrees is True
    assert answer.citations == ["D1:3"]
    assert {"D1:1", "D1:2", "D1:3", "D1:4", "D1:5"} <= set(answer.evidence.shown.turns)
    assert "Evidence cards built for this question" in script.requests[2].messages[0].content


def test_full_mode_refines_until_sufficient(store: SQLiteStore) -> None:
    script = Script(
        construct=[
            {"cards": [POTTERY], "sufficient": False, "follow_up_queries": ["Miso kitten"]},
            {
                "cards": [{"claim": "Priya adopted Miso.", "sources": ["D4:4"], "quote": "x"}],
                "sufficient": True,
            },
        ],
        answer=["FINAL ANSWER: 9 March 2024"],
    )
    answer = run(store, script, "full", config=SMALL)
    assert script.stages == ["plan", "construct", "construct", "answer"]
    assert answer.evidence.termination == "sufficient"
    first, second = answer.evidence.rounds
    assert first.queries is None and second.queries == ["Miso kitten"]
    assert not set(first.refs()) & set(second.refs())
    assert set(answer.pool.refs()) == set(first.refs()) | set(second.refs())
    assert [(c.round, c.verified) for c in answer.cards] == [(0, True), (1, False)]
    assert answer.citations == ["D1:3", "D4:4"]
    data = answer_to_json(answer)
    assert answer_from_json(json.loads(json.dumps(data))) == answer
    assert [r["feedback"]["sufficient"] for r in data["evidence"]["rounds"]] == [False, True]
    assert [len(r["calls"]) for r in data["evidence"]["rounds"]] == [1, 1]
    assert data["trace"]["totals"]["by_group"]["construct"]["calls"] == 2
    assert [c["stage"] for c in data["trace"]["calls"]] == script.stages


def test_full_mode_round_budget(store: SQLiteStore) -> None:
    script = Script(
        construct=[{"cards": [], "sufficient": False, "follow_up_queries": ["pottery"]}],
        answer=["FINAL ANSWER: 9 March 2024"],
    )
    answer = run(store, script, "full", config=SMALL)
    assert answer.evidence.termination == "round_budget"
    assert script.stages.count("construct") == 3  # the first round and two refinements


def test_full_mode_no_new_candidates(store: SQLiteStore) -> None:
    script = Script(
        construct=[{"cards": [], "sufficient": False, "follow_up_queries": ["pottery"]}],
        answer=["FINAL ANSWER: 9 March 2024"],
    )
    # every turn is in the initial pool, so retrieving again finds nothing new
    everything = AskConfig(retrieval=RetrievalConfig(budget_turns=100, depth=None))
    answer = run(store, script, "full", config=everything)
    assert answer.evidence.termination == "no_new_candidates"
    assert script.stages == ["plan", "construct", "answer"]


@pytest.mark.parametrize("layout", ["paper", "cached"])
def test_malformed_constructor_output_degrades(store: SQLiteStore, layout: Any) -> None:
    script = Script(construct=["not json at all"], answer=["FINAL ANSWER: 9 March 2024"])
    answer = run(store, script, "full", config=AskConfig(prompt_layout=layout))
    assert script.stages == ["plan", "construct", "construct.repair", "answer"]
    assert answer.evidence.termination == "degraded: construct output invalid"
    assert answer.evidence.degradations == ["construct output invalid"]
    assert answer.cards == [] and answer.text == "9 March 2024"
    # answered from the pool: listed in the answer's own text, or shown in the shared prefix
    message = script.requests[-1].messages[0]
    if layout == "paper":
        assert message.content.startswith("Retrieved memories:")
    else:
        prefix, own = message.parts
        assert prefix.cache and "[D1:3]" in prefix.text and "[D1:3]" not in own.text
        assert "Retrieved memories: the memories retrieved above." in own.text
    assert answer.evidence.shown.turns == [i.id for i in answer.pool.turns]


def test_abstention_retry_through_ask(store: SQLiteStore) -> None:
    script = Script(
        construct=[{"cards": [POTTERY], "sufficient": True}],
        answer=["FINAL ANSWER: Not mentioned.", "FINAL ANSWER: 9 March 2024"],
    )
    answer = run(store, script, "full")
    assert script.stages == ["plan", "construct", "answer", "answer.retry"]
    assert answer.text == "9 March 2024" and answer.trace.abstention_retry is True


def test_planner_failure_is_flagged(store: SQLiteStore) -> None:
    script = Script(
        plan=["no plan"], construct=[{"cards": [], "sufficient": True}], answer=["FINAL ANSWER: x"]
    )
    answer = run(store, script, "no-refine")
    assert answer.evidence.plan.source == "rules"
    assert answer.evidence.degradations[0].startswith("plan fell back to rules")


def test_offline_fake_llm_answers_meaningfully(store: SQLiteStore) -> None:
    # no handler: the offline LLM answers construct and answer from their structured inputs
    answer = ask(store, SCOPE, EMBEDDER, LLMClient(OfflineLLM()), QUESTION)
    assert answer.evidence.termination == "sufficient"
    pottery = [c for c in answer.cards if c.matched_source == "D1:3"]
    assert pottery and pottery[0].verified
    assert pottery[0].resolved_time is not None
    assert pottery[0].resolved_time.phrase == "the Saturday before 14 March 2024"
    assert "my first pottery class last Saturday" in answer.text


def test_matched_mode_answers_from_as_many_plain_search_turns(store: SQLiteStore) -> None:
    script = Script(answer=["FINAL ANSWER: 9 March 2024."])
    config = AskConfig(retrieval=RetrievalConfig(budget_turns=2))
    answer = run(store, script, "matched", config=config)
    assert script.stages == ["plan", "answer"]  # the plan only sizes the guided pool
    assert answer.text == "9 March 2024" and answer.cards == []
    assert answer.pool.episodes == [] and answer.pool.facts == []
    guided = run(store, Script(answer=["FINAL ANSWER: x"]), "direct", config=config)
    assert len(answer.pool.turns) == len(guided.pool.turns)
    plain = Memory(store, EMBEDDER).search("demo-1", QUESTION, k=len(answer.pool.turns))
    assert {i.id for i in answer.pool.turns} == {r.record.id for r in plain}
    ranked = sorted(answer.pool.turns, key=lambda i: i.position or 0)
    assert [i.id for i in ranked] == [r.record.id for r in plain]  # exposure order = rank
    assert answer.evidence.shown.turns == [i.id for i in answer.pool.turns]
    assert answer.evidence.rounds[0].refs() == answer.pool.refs()
    assert answer.pool.queries == [QUESTION]


ROUND0 = AskConfig(retrieval=SMALL.retrieval, answer_round0=True)


def refining_script() -> Script:
    return Script(
        construct=[
            {"cards": [POTTERY], "sufficient": False, "follow_up_queries": ["Miso kitten"]},
            {
                "cards": [{"claim": "Priya adopted Miso.", "sources": ["D4:4"], "quote": "x"}],
                "sufficient": True,
            },
        ],
        answer_round0=["FINAL ANSWER: Saturday"],
        answer=["FINAL ANSWER: 9 March 2024"],
    )


def test_round0_answer_when_refinement_is_triggered(store: SQLiteStore) -> None:
    script = refining_script()
    answer = run(store, script, "full", config=ROUND0)
    assert script.stages == ["plan", "construct", "construct", "answer_round0", "answer"]
    assert answer.text == "9 March 2024"
    assert answer.round0 is not None and answer.round0.text == "Saturday"
    # the round-0 answer read the round-0 cards only: D1:3 cited, the round-1 card's D4:4 not
    round0_prompt = script.requests[3]
    assert [list(c.sources) for c in round0_prompt.inputs["cards"]] == [["D1:3"]]
    assert "D1:3" in answer.round0.shown.cited_context
    assert "D4:4" not in answer.round0.shown.turns
    assert answer.trace.totals["by_group"]["answer_round0"]["calls"] == 1
    data = answer_to_json(answer)
    assert data["round0"]["text"] == "Saturday"
    assert answer_from_json(json.loads(json.dumps(data))) == answer


def test_no_round0_answer_unless_triggered_asked_for_and_full(store: SQLiteStore) -> None:
    assert run(store, refining_script(), "full", config=SMALL).round0 is None  # not asked for
    sufficient = Script(
        construct=[{"cards": [POTTERY], "sufficient": True}], answer=["FINAL ANSWER: x"]
    )
    assert run(store, sufficient, "full", config=ROUND0).round0 is None
    assert "answer_round0" not in sufficient.stages
    script = refining_script()
    assert run(store, script, "no-refine", config=ROUND0).round0 is None
    assert script.stages == ["plan", "construct", "answer"]


def test_no_plan_uses_the_question_alone_and_rule_flags(store: SQLiteStore) -> None:
    script = Script(
        construct=[{"cards": [POTTERY], "sufficient": True}], answer=["FINAL ANSWER: x"]
    )
    config = AskConfig(retrieval=SMALL.retrieval, plan=False)
    answer = run(store, script, "full", config=config)
    assert "plan" not in script.stages
    plan = answer.evidence.plan
    assert plan.source == "rules" and plan.queries == () and plan.temporal  # "When ..."
    assert "no-plan" in (plan.note or "")
    assert answer.evidence.degradations == []  # an ablation, not a degradation
    assert answer.pool.queries == [QUESTION]
    planned = run(
        store,
        Script(construct=[{"cards": [], "sufficient": True}], answer=["x"]),
        "full",
        config=SMALL,
    )
    assert planned.evidence.plan.source == "llm" and planned.pool.queries != [QUESTION]
