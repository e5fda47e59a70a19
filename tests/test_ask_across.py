"""``context_many`` and ``ask_many`` (issue 22, item 6): evidence across several conversations
of a namespace, where record ids repeat (``D1:3`` is in every LoCoMo conversation).

Three conversations of one user: ``demo-1`` (the sample), ``demo-2`` (the sample again, with
its D1:3 saying something no other turn says) and ``c1`` (three messages about a cat)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from qemem.answer.wire import answer_from_json, answer_to_json, context_from_json, context_to_json
from qemem.embed import HashEmbedder
from qemem.errors import InputError, LLMError, NotFoundError
from qemem.evidence.many import ManyIndex
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.memory.searching import MAX_CONVERSATIONS
from qemem.models import Ref, Turn
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM, offline_answer
from service_helpers import MESSAGES
from single_outputs import digests, single_outputs

TORTOISE = "I adopted a tortoise called Sheldon, he eats dandelions from the allotment."
QUESTION = "What is the tortoise called that Priya adopted?"


def _second(sample_path: Path, folder: Path) -> Path:
    """The sample as conversation demo-2, its D1:3 replaced by ``TORTOISE``."""
    [record] = json.loads(sample_path.read_text("utf-8"))
    record = copy.deepcopy(record)
    record["sample_id"] = "demo-2"
    [turn] = [t for t in record["conversation"]["session_1"] if t["dia_id"] == "D1:3"]
    turn["text"] = TORTOISE
    path = folder / "demo-2.json"
    path.write_text(json.dumps([record]), "utf-8")
    return path


def _threads(memory: Memory, sample_path: Path, folder: Path, build: bool = True) -> Memory:
    memory.ingest(sample_path)
    memory.ingest(_second(sample_path, folder))
    memory.add_messages("c1", MESSAGES)
    if build:
        memory.build()
    return memory


@pytest.fixture
def llm() -> OfflineLLM:
    return OfflineLLM()


@pytest.fixture
def threads(sample_path: Path, tmp_path: Path, llm: OfflineLLM) -> Memory:
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(llm), namespace="u")
    return _threads(memory, sample_path, tmp_path)


def _scopes(*ids: str) -> dict[str, Scope]:
    return {cid: Scope(cid, "u") for cid in ids}


@pytest.mark.slow
def test_the_index_keeps_equal_ids_of_different_conversations_apart(threads: Memory) -> None:
    index = ManyIndex(threads.store, _scopes("demo-1", "demo-2", "c1"))
    one, two = index.get("demo-1/D1:3"), index.get("demo-2/D1:3")
    assert one is not None and two is not None
    assert isinstance(two.record, Turn) and two.record.text == TORTOISE != one.record.text
    assert index.get("D1:3") is None  # in two conversations: not guessed
    only = index.get("m1")  # in one of them: that one
    assert only is not None and only.record.id == "c1/m1"
    assert index.ref("turn", "demo-2/D1:3") == Ref("turn", "D1:3", "demo-2")
    assert index.original("demo-2/D1:3") == ("demo-2", threads.turns("demo-2", ["D1:3"])[0])
    assert index.session_title(two.record) == "demo-2, Session 1"
    assert index.real_session(two.record.session) == ("demo-2", 1)
    assert one.record.session != two.record.session  # sessions unique across conversations
    episode = index.episodes[-1]
    assert episode.id.startswith("c1/") and all(t.startswith("c1/") for t in episode.turn_ids)
    # a turn's neighbours stay inside its conversation's session
    last = [t for t in index.turns if t.id.startswith("demo-1/")][-1]
    assert all(n.id.startswith("demo-1/") for n in index.neighbours(last, 5))


@pytest.mark.slow
def test_context_many_ranks_the_conversation_holding_the_evidence_first(threads: Memory) -> None:
    block = threads.context_many(["demo-1", "demo-2"], QUESTION, budget_tokens=600)
    turns = [item for item in block.items if item.ref.space == "turn"]
    assert turns[0].ref == Ref("turn", "D1:3", "demo-2") and turns[0].conversation == "demo-2"
    assert turns[0].session == 1 and turns[0].text == TORTOISE
    assert block.conversation is None and block.conversations == ["demo-1", "demo-2"]
    assert f"[demo-2/D1:3] Priya: {TORTOISE}" in block.text
    cat = threads.context_many(["demo-1", "c1"], "grey cat named Pixel", budget_tokens=600)
    assert next(i.ref for i in cat.items if i.ref.space == "turn") == Ref("turn", "m1", "c1")
    assert all(item.ref.conversation in ("demo-1", "c1") for item in cat.items)


@pytest.mark.slow
def test_the_block_groups_by_conversation_then_session(threads: Memory) -> None:
    block = threads.context_many(["c1", "demo-2", "demo-1"], "pottery class", budget_tokens=4000)
    section = block.text[block.text.index("Turns:") :]
    headers = [line for line in section.splitlines() if line.startswith("--- ")]
    named = [h.removeprefix("--- ").split(",")[0] for h in headers]
    order = {"c1": 0, "demo-2": 1, "demo-1": 2}
    assert [order[n] for n in named] == sorted(order[n] for n in named)
    assert len(set(named)) >= 2
    sessions = [int(h.split("Session ")[1].split()[0]) for h in headers if "demo-1," in h]
    assert sessions == sorted(sessions) and headers[0].endswith(")")


@pytest.mark.slow
def test_over_one_conversation_the_block_is_the_context_block_with_labels(
    threads: Memory,
) -> None:
    question = "When did Tomas sign up for the race?"
    single = threads.context("demo-1", question, budget_tokens=20000)
    many = threads.context_many(["demo-1"], question, budget_tokens=20000)
    assert [(i.ref.space, i.ref.id, i.session, i.text) for i in many.items] == [
        (i.ref.space, i.ref.id, i.session, i.text) for i in single.items
    ]
    assert many.text.replace("demo-1/", "").replace("demo-1, ", "") == single.text
    assert many.left_out == single.left_out == 0


@pytest.mark.slow
def test_ask_many_cites_qualified_ids_and_keeps_each_cards_conversation(
    threads: Memory, llm: OfflineLLM
) -> None:
    llm.calls.clear()
    answer = threads.ask_many(["demo-1", "demo-2"], QUESTION)
    [card] = [c for c in answer.cards if c.sources == ["demo-2/D1:3"]]
    assert card.verified and card.refs == [Ref("turn", "D1:3", "demo-2")]
    assert card.matched_source == "demo-2/D1:3" and card.grounded_in == "turn"
    across = answer.across
    assert across is not None and across.conversations == ["demo-1", "demo-2"]
    assert "demo-2/D1:3" in answer.citations
    assert across.labels["demo-2/D1:3"] == Ref("turn", "D1:3", "demo-2")
    assert all(label in across.labels for label in answer.citations)
    assert all(label in across.labels for label in answer.evidence.shown.turns)
    assert across.sources["demo-2"].turns["D1:3"].text == TORTOISE
    assert answer.sources.turns == {}
    pool = answer.pool
    assert pool.conversations == ["demo-1", "demo-2"]
    assert all(i.record.conversation_id == i.conversation for i in pool.items())
    assert all(e.ref.conversation for r in answer.evidence.rounds for e in r.pool)
    construct = next(r for r in llm.calls if r.stage == "construct")
    assert "[demo-2/D1:3]" in construct.prompt_text
    assert "--- demo-2, Session 1 (" in construct.prompt_text


def _scripted(cards: list[dict[str, Any]]) -> OfflineLLM:
    """The offline LLM with the constructor's cards scripted."""

    def handler(request: LLMRequest) -> Any:
        if request.stage == "construct":
            return {"cards": cards, "sufficient": True, "missing": "", "follow_up_queries": []}
        return offline_answer(request)

    return OfflineLLM(handler)


def test_a_quote_is_verified_against_the_conversation_its_label_names(
    sample_path: Path, tmp_path: Path
) -> None:
    card = {"claim": "Priya adopted Sheldon", "quote": "a tortoise called Sheldon"}
    cards = [
        {**card, "sources": ["demo-1/D1:3"]},  # the right id in the wrong conversation
        {**card, "sources": ["D1:3"]},  # ambiguous across the two
        {**card, "sources": ["[turn: demo-2/D1:3]"]},  # decorated, the right one
    ]
    llm = LLMClient(_scripted(cards))
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=llm, namespace="u")
    _threads(memory, sample_path, tmp_path, build=False)
    wrong, ambiguous, right = memory.ask_many(
        ["demo-1", "demo-2"], QUESTION, mode="no-refine"
    ).cards
    assert not wrong.verified and wrong.refs == [Ref("turn", "D1:3", "demo-1")]
    assert ambiguous.unresolved_sources == ["D1:3"] and ambiguous.refs == []
    assert right.verified and right.refs == [Ref("turn", "D1:3", "demo-2")]
    assert right.sources == ["demo-2/D1:3"]


@pytest.mark.slow
def test_answers_and_blocks_across_conversations_round_trip_their_json(threads: Memory) -> None:
    answer = threads.ask_many(["demo-1", "demo-2", "c1"], QUESTION)
    data = answer_to_json(answer)
    assert answer_to_json(answer_from_json(data)) == data
    assert data["across"]["labels"]["demo-2/D1:3"] == {
        "space": "turn",
        "id": "D1:3",
        "conversation": "demo-2",
    }
    compact = answer_to_json(answer, compact=True)
    assert "sources" not in compact["across"] and "labels" in compact["across"]
    assert all("conversation" in i for i in compact["evidence"]["pool"]["turns"])
    block = threads.context_many(["demo-2", "c1"], QUESTION, budget_tokens=500)
    assert context_from_json(context_to_json(block)) == block
    assert context_to_json(block)["items"][0]["ref"]["conversation"] in ("demo-2", "c1")
    single = context_to_json(threads.context("c1", QUESTION, budget_tokens=500))
    assert "conversations" not in single and all(
        "conversation" not in i["ref"] for i in single["items"]
    )


@pytest.mark.slow
def test_single_conversation_output_is_byte_identical_to_before(sample_path: Path) -> None:
    """Context block, pool, answers (full, retrieval, compact) and prompts of the sample: the
    SHA-256 of their JSON as the code before ``*_many`` wrote them (``single_outputs``)."""
    fixture = Path(__file__).parent / "fixtures" / "single_conversation.json"
    assert digests(single_outputs(sample_path)) == json.loads(fixture.read_text("utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["retrieval", "matched", "direct"])
def test_every_mode_names_the_conversation_of_each_pool_record(threads: Memory, mode: str) -> None:
    answer = threads.ask_many(["demo-1", "demo-2"], QUESTION, mode=mode)  # type: ignore[arg-type]
    turns = answer.pool.turns
    assert turns and {i.conversation for i in turns} <= {"demo-1", "demo-2"}
    assert all(i.record.id == i.ref.id and i.ref.conversation == i.conversation for i in turns)
    ranked = min((i for i in turns if i.position is not None), key=lambda i: i.position or 0)
    assert ranked.ref == Ref("turn", "D1:3", "demo-2")
    if mode == "matched":
        assert not answer.pool.episodes and len(turns) == len({i.ref for i in turns})
    assert all(key in answer.across.labels for key in answer.pool_times)  # type: ignore[union-attr]


@pytest.mark.slow
def test_bad_conversation_lists_and_missing_llms_are_refused(
    threads: Memory, sample_path: Path
) -> None:
    with pytest.raises(InputError, match="list of conversation ids"):
        threads.context_many("demo-1", QUESTION)
    with pytest.raises(InputError, match="no conversations"):
        threads.ask_many([], QUESTION)
    with pytest.raises(InputError, match="groups"):
        threads.ask_many([f"c{i}" for i in range(MAX_CONVERSATIONS + 1)], QUESTION)
    with pytest.raises(NotFoundError):
        threads.context_many(["demo-1", "nope"], QUESTION)
    with pytest.raises(InputError):
        threads.ask_many(["demo-1"], " ")
    with pytest.raises(InputError, match="one-conversation recipe"):
        threads.ask_many(["demo-1", "c1"], QUESTION, mode="nemori-baseline")
    with pytest.raises(InputError, match="budget_tokens"):
        threads.context_many(["demo-1"], QUESTION, budget_tokens=0)
    plain = Memory(threads.store, HashEmbedder(), namespace="u")
    with pytest.raises(LLMError):
        plain.ask_many(["demo-1", "c1"], QUESTION)
    with pytest.raises(LLMError):
        plain.context_many(["demo-1", "c1"], QUESTION, mode="llm")
    assert plain.ask_many(["demo-1", "c1"], QUESTION, mode="retrieval").text == ""


@pytest.mark.slow
def test_both_stores_rank_across_conversations_alike(
    store_url: str, sample_path: Path, tmp_path: Path
) -> None:
    with Memory.open(store_url, embedder=HashEmbedder(), namespace="u") as memory:
        _threads(memory, sample_path, tmp_path, build=False)
        block = memory.context_many(["demo-1", "demo-2"], QUESTION, budget_tokens=600)
        answer = memory.ask_many(["demo-1", "demo-2", "c1"], QUESTION, mode="retrieval")
    reference = Memory(SQLiteStore(":memory:"), HashEmbedder(), namespace="u")
    _threads(reference, sample_path, tmp_path, build=False)
    assert block == reference.context_many(["demo-1", "demo-2"], QUESTION, budget_tokens=600)
    assert block.items[0].ref == Ref("turn", "D1:3", "demo-2")
    expected = reference.ask_many(["demo-1", "demo-2", "c1"], QUESTION, mode="retrieval")
    assert answer.pool == expected.pool and answer.across == expected.across


@pytest.mark.slow
def test_the_llm_planner_plans_over_every_conversations_speakers(
    threads: Memory, llm: OfflineLLM
) -> None:
    llm.calls.clear()
    block = threads.context_many(["demo-2", "c1"], QUESTION, budget_tokens=600, mode="llm")
    assert block.planner == "llm" and block.items
    [plan] = [r for r in llm.calls if r.stage == "plan"]
    assert "Priya" in plan.prompt_text and "Ana" in plan.prompt_text
