"""Prompt layouts: the ``cached`` layout shares one byte-identical prefix across every stage of
a question, the ``paper`` layout keeps the published prompts, and the offline LLM's cards and
answers are the same under both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qemem.answer import AskConfig, ask
from qemem.embed import HashEmbedder
from qemem.errors import InputError
from qemem.evidence import SharedPrefix, SourceIndex
from qemem.evidence.layout import padded_role, shared_prefix
from qemem.llm import LLMClient, LLMRequest
from qemem.llm.types import estimate_tokens
from qemem.prompts import render
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM, offline_answer

SCOPE = Scope("demo-1")
EMBEDDER = HashEmbedder()
QUESTION = "When did Priya go to her first pottery class?"


@pytest.fixture
def store(sample_store: SQLiteStore) -> SQLiteStore:
    return sample_store


def _fields(store: SQLiteStore) -> dict[str, str]:
    """The sample conversation's participants as the prompts name them."""
    return SourceIndex(store, SCOPE).participants.prompt_fields()


def _given(title: str, stage: str, fields: dict[str, str]) -> str:
    """A stage's own part when the role does not hold its instructions."""
    return render("task_given", title=title, instructions=render(stage, **fields).rstrip())


def _questions(path: Path) -> list[str]:
    return [q["question"] for q in json.loads(path.read_text(encoding="utf-8"))[0]["qa"]]


class Retrying:
    """The offline LLM, but the first answer abstains and every constructor round asks for
    more (so a question runs construct, two refinement rounds, answer and its retry)."""

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    def __call__(self, request: LLMRequest) -> Any:
        self.requests.append(request)
        found = offline_answer(request)
        if request.stage == "answer":
            return "Nothing says so.\nFINAL ANSWER: The conversation does not mention it."
        if request.stage == "construct" and isinstance(found, dict):
            follow = ["pottery studio Saturday", "clay wheel"]
            return {**found, "sufficient": False, "missing": "more", "follow_up_queries": follow}
        return found


def test_cached_layout_shares_one_prefix_across_every_stage(store: SQLiteStore) -> None:
    script = Retrying()
    config = AskConfig(prompt_layout="cached")
    answer = ask(store, SCOPE, EMBEDDER, LLMClient(OfflineLLM(script)), QUESTION, config=config)
    stages = [r.stage for r in script.requests]
    assert stages[0] == "plan" and "answer.retry" in stages
    assert stages.count("construct") == len(answer.evidence.rounds) >= 2
    shared = script.requests[1:]
    prefixes = {(r.system, r.messages[0].parts[0]) for r in shared}
    assert len(prefixes) == 1  # byte-identical role and prefix, one breakpoint after it
    system, head = prefixes.pop()
    fields = _fields(store)
    assert system == padded_role((), fields) and head.cache
    initial = SharedPrefix.of(SourceIndex(store, SCOPE), answer.pool)  # merged pool: differs
    opening = "The conversation is a long conversation between Priya and Tomas; its sessions span "
    assert head.text.startswith(opening)
    assert head.text != initial.text  # the prefix holds the initial pool only
    owns = [r.messages[0].parts[1].text for r in shared]
    assert owns[0].startswith(_given("evidence cards", "construct", fields))
    assert "New memories:" in owns[1] and "Cards so far:" in owns[1]
    assert owns[-2].startswith(_given("the answer", "answer", fields))
    assert owns[-1].startswith(owns[-2] + "\n\nNote: a first attempt answered")
    for request in shared:  # the request's prefix is the system prompt and the first part
        assert request.cache_prefix == f"{system}\n{head.text}"


def test_paper_layout_keeps_the_published_prompts(store: SQLiteStore) -> None:
    fake = OfflineLLM()
    config = AskConfig(prompt_layout="paper")
    ask(store, SCOPE, EMBEDDER, LLMClient(fake), QUESTION, config=config)
    construct, answer = fake.calls[1], fake.calls[-1]
    fields = _fields(store)
    assert construct.system == render("construct", **fields)
    assert answer.system == render("answer", **fields)
    assert all(not m.parts for r in fake.calls for m in r.messages)
    assert all(r.cache_prefix is None for r in fake.calls)
    assert construct.messages[0].content.startswith(f"Question: {QUESTION}")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full", "no-refine", "direct", "matched"])
def test_offline_cards_and_answers_are_the_same_under_both_layouts(
    store: SQLiteStore, sample_path: Path, mode: Any
) -> None:
    for question in _questions(sample_path):
        got = {}
        for layout in ("paper", "cached"):
            llm = LLMClient(OfflineLLM())
            config = AskConfig(prompt_layout=layout, background_tokens=None)  # type: ignore[arg-type]
            answer = ask(store, SCOPE, EMBEDDER, llm, question, mode=mode, config=config)
            got[layout] = (
                answer.text,
                [(c.claim, c.sources, c.quote, c.verified) for c in answer.cards],
                answer.evidence.termination,
                answer.evidence.shown.turns,
                answer.citations,
            )
        assert got["paper"] == got["cached"], question


def test_an_unknown_layout_is_refused(store: SQLiteStore) -> None:
    config = AskConfig(prompt_layout="fancy")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown prompt layout 'fancy'"):
        ask(store, SCOPE, EMBEDDER, LLMClient(OfflineLLM()), QUESTION, config=config)


def test_the_role_holds_the_fewest_instructions_that_reach_the_minimum(
    store: SQLiteStore,
) -> None:
    index = SourceIndex(store, SCOPE)
    pool = ask(store, SCOPE, EMBEDDER, None, QUESTION, mode="retrieval").pool
    fields = index.participants.prompt_fields()
    plain = SharedPrefix.of(index, pool)
    assert plain.instructions == () and plain.system == padded_role((), fields)
    length = estimate_tokens(f"{plain.system}\n{plain.text}")
    answer_only = SharedPrefix.of(index, pool, minimum=length + 10)
    assert answer_only.instructions == ("answer",) and answer_only.text == plain.text
    construct = render("construct", **fields)
    assert render("answer", **fields) in answer_only.system
    assert construct not in answer_only.system
    construct_only = SharedPrefix(padded_role(("construct",), fields), plain.text).tokens
    both = SharedPrefix.of(index, pool, minimum=construct_only + 1)
    assert both.instructions == ("construct", "answer")
    assert SharedPrefix.of(index, pool, minimum=10**6).instructions == ()  # cannot reach it
    inputs: dict[str, Any] = {}
    held = answer_only.request("answer.retry", "Q?", max_tokens=9, inputs=inputs)
    assert held.messages[0].parts[1].text == render("task_held", title="the answer") + "Q?"
    own = answer_only.request("construct", "Q?", max_tokens=9, inputs=inputs)
    assert own.messages[0].parts[1].text == _given("evidence cards", "construct", fields) + "Q?"


def test_the_cached_answer_names_cited_prefix_turns_with_their_resolved_times(
    store: SQLiteStore,
) -> None:
    fake = OfflineLLM()
    cached = AskConfig(prompt_layout="cached")
    answer = ask(store, SCOPE, EMBEDDER, LLMClient(fake), QUESTION, config=cached)
    assert "D1:3" in answer.citations
    request = fake.calls[-1]
    prefix, own = request.messages[0].parts
    assert "[D1:3] Priya: " in prefix.text
    context = own.text.split("Cited sources in their context")[1]
    line = next(x for x in context.splitlines() if x.startswith("*[D1:3]"))
    assert line == "*[D1:3] Priya (shown above): last Saturday [the Saturday before 14 March 2024]"
    paper = OfflineLLM()
    ask(store, SCOPE, EMBEDDER, LLMClient(paper), QUESTION, config=AskConfig(prompt_layout="paper"))
    shown = paper.calls[-1].messages[0].content  # the paper layout repeats the turn itself
    assert "pottery class last Saturday [the Saturday before 14 March 2024] at the studio" in shown


def test_a_question_whose_prefix_cannot_reach_the_minimum_gets_the_paper_layout(
    store: SQLiteStore,
) -> None:
    index = SourceIndex(store, SCOPE)
    pool = ask(store, SCOPE, EMBEDDER, None, QUESTION, mode="retrieval").pool
    assert shared_prefix(index, pool, 0) == SharedPrefix.of(index, pool)
    assert shared_prefix(index, pool, 10**6) is None
    standing_for_haiku = OfflineLLM(model="claude-haiku-4-5")  # 4,096 tokens: the sample is short
    ask(store, SCOPE, EMBEDDER, LLMClient(standing_for_haiku), QUESTION)
    assert all(r.cache_prefix is None for r in standing_for_haiku.calls)
    assert standing_for_haiku.calls[-1].system == render("answer", **_fields(store))


@pytest.mark.parametrize("answer", ["answer", "respond"])
def test_every_stage_names_its_task_whichever_instructions_pad_the_role(
    store: SQLiteStore, answer: Any
) -> None:
    """Issue 33: a construct request whose role held only the answer's instructions read
    "TASK B: THE ANSWER ... after the memories you are named one task" before the card
    instructions; now each request names its own task, and the role names only what it holds."""
    fields = SourceIndex(store, SCOPE).participants.prompt_fields()
    titles = {"construct": "evidence cards", "answer": "the answer", "respond": "the reply"}
    for padding in ((), (answer,), ("construct",), ("construct", answer)):
        prefix = SharedPrefix(padded_role(padding, fields, answer), "memories", padding, fields)
        assert "TASK A" not in prefix.system and "TASK B" not in prefix.system
        for stage in padding:
            assert f"TASK: {titles[stage].upper()}\n\n{render(stage, **fields)}" in prefix.system
        for stage in ("construct", answer):
            request = prefix.request(stage, "Q?", max_tokens=9, inputs={})
            own = request.messages[0].parts[1].text
            assert own.startswith(f"Your task: {titles[stage]}"), (padding, stage)
            assert (render(stage, **fields).rstrip() in own) == (stage not in padding)
    role = padded_role((), fields, answer)
    purpose = "reply, as the assistant, to the user's new request" if answer == "respond" else ""
    assert purpose in role
