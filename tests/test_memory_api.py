"""The ``MemoryAPI`` contract: one suite, run against the embedded ``Memory`` and against
``RemoteMemory`` through the real app (Starlette's test client: httpx over ASGI). Both sides
use an in-memory SQLite store, the hash embedder and the offline LLM, so they must agree to
the byte on everything but timings."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qemem import RemoteMemory
from qemem.answer import Answer
from qemem.answer.check import CheckResult, Citation
from qemem.answer.memory_audit import MemoryAudit
from qemem.answer.wire import answer_to_json
from qemem.embed import HashEmbedder
from qemem.errors import ConflictError, InputError, LLMError, NotFoundError
from qemem.memory import Memory, MemoryAPI, SearchResult
from qemem.models import Ref, Turn
from qemem.store import SQLiteStore
from service_helpers import MESSAGES, served

QUESTION = "What pottery pieces has Priya made?"
STATEMENT = (
    "Priya went to her first pottery class. Tomas never signed up for the Riverside Half "
    "Marathon. The submarine was painted yellow."
)
Factory = Callable[..., MemoryAPI]


@pytest.fixture(params=["embedded", "remote"])
def make(request: pytest.FixtureRequest) -> Iterator[Factory]:
    """Builds a fresh memory of one kind (namespace ``alice``; ``llm=None`` for none)."""
    opened: list[Any] = []

    def factory(llm: str | None = "fake") -> MemoryAPI:
        if request.param == "embedded":
            memory: MemoryAPI = Memory(
                SQLiteStore(":memory:"), HashEmbedder(), llm=llm, namespace="alice"
            )
        else:
            context = served(llm=llm)
            s = context.__enter__()
            opened.append(context)
            memory = RemoteMemory("http://testserver", s.alice, client=s.client, poll_seconds=0.02)
        opened.append(memory)
        return memory

    yield factory
    for thing in reversed(opened):
        if isinstance(thing, MemoryAPI):
            thing.close()
        else:
            thing.__exit__(None, None, None)


@pytest.fixture
def reference(sample_path: Path) -> Iterator[Memory]:
    """The embedded memory every result is compared with."""
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm="fake", namespace="alice") as mem:
        mem.ingest(sample_path)
        yield mem


def _without_timings(answer: Answer) -> dict[str, Any]:
    data = answer_to_json(answer)
    for call in [
        *data["trace"]["calls"],
        *(c for r in data["evidence"]["rounds"] for c in r["calls"]),
    ]:
        call.pop("latency_s")
    data["trace"].pop("seconds")
    data["trace"]["totals"].pop("latency_s", None)
    return data


def test_both_implement_the_protocol_with_its_signatures() -> None:
    for name, member in inspect.getmembers(MemoryAPI, inspect.isfunction):
        if name.startswith("_"):
            continue
        wanted = inspect.signature(member).parameters
        for cls in (Memory, RemoteMemory):
            given = inspect.signature(getattr(cls, name)).parameters
            for param in wanted.values():
                assert param.name in given, f"{cls.__name__}.{name} lacks {param.name}"
                assert given[param.name].kind == param.kind, f"{cls.__name__}.{name}({param.name})"
                assert given[param.name].default == param.default, f"{cls.__name__}.{name}"


def test_ingest_is_idempotent_and_lists_the_conversation(make: Factory, sample_path: Path) -> None:
    memory = make()
    assert memory.ingest(sample_path).added == {"demo-1": (5, 65)}
    assert memory.ingest(sample_path).turns_added == 0
    [conv] = memory.conversations()
    assert (conv.id, conv.namespace, len(conv.sessions)) == ("demo-1", "alice", 5)
    assert memory.conversation("demo-1") == conv
    with pytest.raises(NotFoundError):
        memory.conversation("nope")


def test_add_messages_is_retry_safe_by_id_and_refuses_conflicts(make: Factory) -> None:
    memory = make(llm=None)
    first = memory.add_messages("c1", MESSAGES[:2])
    assert (first.ids, first.turns_added, first.sessions_added) == (["m1", "m2"], 2, 1)
    again = memory.add_messages("c1", MESSAGES[:2])
    assert (again.ids, again.turns_added) == (["m1", "m2"], 0)
    assert memory.add_messages("c1", MESSAGES[2:]).ids == ["D2:1"]
    with pytest.raises(ConflictError):
        memory.add_messages("c1", [{**MESSAGES[0], "text": "changed"}])
    with pytest.raises(InputError):
        memory.add_messages("c1", [{**MESSAGES[0], "id": "m9", "timestamp": "soon"}])
    assert memory.conversation("c1").speakers == ("Ana", "Ben")


def test_add_messages_with_an_idempotency_key_is_retry_safe_without_ids(make: Factory) -> None:
    memory = make(llm=None)
    batch = [{k: v for k, v in m.items() if k != "id"} for m in MESSAGES[:2]]
    first = memory.add_messages("c1", batch, idempotency_key="batch-1")
    assert (first.ids, first.turns_added, first.sessions_added) == (["D1:1", "D1:2"], 2, 1)
    assert memory.add_messages("c1", batch, idempotency_key="batch-1") == first
    with pytest.raises(InputError, match="different request"):
        memory.add_messages("c1", batch[:1], idempotency_key="batch-1")
    with pytest.raises(InputError, match="printable ASCII"):
        memory.add_messages("c1", batch, idempotency_key="")
    assert memory.add_messages("c1", batch).ids == ["D1:3", "D1:4"]  # no key: appended again


@pytest.mark.slow
def test_search_ranks_like_the_embedded_memory(
    make: Factory, sample_path: Path, reference: Memory
) -> None:
    memory = make()
    memory.ingest(sample_path)
    results = memory.search("demo-1", ["pottery class", "wheel"], k=5)
    assert all(isinstance(r, SearchResult) and isinstance(r.record, Turn) for r in results)
    assert results == reference.search("demo-1", ["pottery class", "wheel"], k=5)
    with pytest.raises(InputError):
        memory.search("demo-1", " ")
    with pytest.raises(NotFoundError):
        memory.search("nope", "pottery")


@pytest.mark.slow
def test_search_many_ranks_conversations_together_like_the_embedded_memory(
    make: Factory, sample_path: Path, reference: Memory
) -> None:
    memory = make()
    memory.ingest(sample_path)
    memory.add_messages("c1", MESSAGES)
    reference.add_messages("c1", MESSAGES)
    results = memory.search_many(["demo-1", "c1", "demo-1"], ["pottery", "cat"], k=8)
    assert results == reference.search_many(["demo-1", "c1"], ["pottery", "cat"], k=8)
    assert {r.conversation for r in results} == {"demo-1", "c1"}
    assert memory.search("c1", "Pixel")[0].conversation == "c1"
    with pytest.raises(NotFoundError):
        memory.search_many(["demo-1", "nope"], "pottery")
    with pytest.raises(InputError):
        memory.search_many([], "pottery")
    with pytest.raises(InputError):
        memory.search_many(["c1"], " ")


@pytest.mark.slow
def test_retrieve_leaves_out_the_excluded_refs(
    make: Factory, sample_path: Path, reference: Memory
) -> None:
    memory = make()
    memory.ingest(sample_path)
    pool = memory.retrieve("demo-1", QUESTION)
    assert pool == reference.retrieve("demo-1", QUESTION)
    excluded = pool.refs()[:3]
    assert all(isinstance(r, Ref) for r in excluded)
    rest = memory.retrieve("demo-1", QUESTION, exclude=excluded)
    assert not set(excluded) & set(rest.refs()) and rest.turns


def test_ask_returns_the_same_evidence_record(
    make: Factory, sample_path: Path, reference: Memory
) -> None:
    memory = make()
    memory.ingest(sample_path)
    answer = memory.ask("demo-1", QUESTION)
    assert isinstance(answer, Answer) and answer.text and answer.evidence.cards
    assert answer.evidence.shown.turns and answer.citations
    assert all(isinstance(ref, Ref) for card in answer.evidence.cards for ref in card.refs)
    assert _without_timings(answer) == _without_timings(reference.ask("demo-1", QUESTION))
    retrieval = memory.ask("demo-1", QUESTION, mode="retrieval")
    assert retrieval.text == "" and retrieval.evidence.shown.turns


@pytest.mark.slow
def test_context_gives_the_same_block(make: Factory, reference: Memory, sample_path: Path) -> None:
    memory = make(llm=None)
    memory.ingest(sample_path)
    block = memory.context("demo-1", QUESTION, budget_tokens=400)
    assert block == reference.context("demo-1", QUESTION, budget_tokens=400)
    assert block.items and block.tokens <= 400
    with pytest.raises(LLMError):
        memory.context("demo-1", QUESTION, mode="llm")


@pytest.mark.slow
def test_ask_and_context_across_conversations_give_what_the_embedded_memory_gives(
    make: Factory, reference: Memory, sample_path: Path
) -> None:
    memory = make()
    memory.ingest(sample_path)
    memory.add_messages("c1", MESSAGES)
    reference.add_messages("c1", MESSAGES)
    question, both = "What is the name of the grey cat?", ["demo-1", "c1", "demo-1"]
    answer = memory.ask_many(both, question)
    assert answer.across is not None and answer.across.conversations == ["demo-1", "c1"]
    assert _without_timings(answer) == _without_timings(reference.ask_many(both, question))
    assert Ref("turn", "m1", "c1") in [ref for card in answer.cards for ref in card.refs]
    block = memory.context_many(both, question, budget_tokens=400)
    assert block == reference.context_many(both, question, budget_tokens=400)
    assert block.items[0].conversation == "c1" and "[c1/m1]" in block.text
    with pytest.raises(NotFoundError):
        memory.ask_many(["demo-1", "nope"], question)
    with pytest.raises(NotFoundError):
        memory.context_many(["nope", "c1"], question)
    with pytest.raises(InputError):
        memory.context_many("c1", question)
    with pytest.raises(InputError):
        memory.ask_many([], question, mode="retrieval")


@pytest.mark.slow
def test_check_labels_the_claims_like_the_embedded_memory(
    make: Factory, sample_path: Path, reference: Memory
) -> None:
    memory = make()
    memory.ingest(sample_path)
    result = memory.check("demo-1", STATEMENT)
    assert isinstance(result, CheckResult) and result.conversation == "demo-1"
    assert [c.label for c in result.claims] == ["supported", "contradicted", "unverifiable"]
    assert all(isinstance(c, Citation) and c.verified for c in result.claims[0].citations)
    expected = reference.check("demo-1", STATEMENT)
    assert result.claims == expected.claims and result.degradations == expected.degradations
    with pytest.raises(InputError):
        memory.check("demo-1", " ")
    with pytest.raises(NotFoundError):
        memory.check("nope", STATEMENT)


@pytest.mark.slow
def test_the_memory_audit_agrees_with_the_embedded_memory(
    make: Factory, sample_path: Path, reference: Memory
) -> None:
    memory = make()
    memory.ingest(sample_path)
    memory.build("demo-1")
    reference.build("demo-1")
    audit = memory.audit_memory("demo-1", sample=6, seed=2)
    assert isinstance(audit, MemoryAudit) and len(audit.items) == 6
    expected = reference.audit_memory("demo-1", sample=6, seed=2)
    assert (audit.items, audit.facts, audit.episodes) == (
        expected.items,
        expected.facts,
        expected.episodes,
    )
    assert audit.census == expected.census and audit.population == expected.population
    with pytest.raises(InputError):
        memory.audit_memory("demo-1", sample=0)
    with pytest.raises(NotFoundError):
        memory.audit_memory("nope")


def test_without_an_llm_ask_and_build_refuse(make: Factory, sample_path: Path) -> None:
    memory = make(llm=None)
    memory.ingest(sample_path)
    with pytest.raises(LLMError):
        memory.ask("demo-1", QUESTION)
    with pytest.raises(LLMError):
        memory.check("demo-1", STATEMENT)
    with pytest.raises(LLMError):
        memory.build("demo-1")
    with pytest.raises(LLMError):
        memory.audit_memory("demo-1")
    assert memory.ask("demo-1", QUESTION, mode="retrieval").evidence.pool.turns


@pytest.mark.slow
def test_build_then_delete(make: Factory, sample_path: Path) -> None:
    memory = make()
    memory.ingest(sample_path)
    [report] = memory.build("demo-1")
    assert report.conversation == "demo-1" and report.episodes > 0
    assert memory.search("demo-1", "pottery", space="episode", k=3)
    assert memory.delete("demo-1") and not memory.delete("demo-1")
    assert memory.conversations() == []


@pytest.mark.slow
def test_background_jobs_enqueue_list_read_and_cancel(make: Factory, sample_path: Path) -> None:
    memory = make()
    memory.ingest(sample_path)
    job = memory.enqueue_build("demo-1")
    assert job.conversation == "demo-1" and job.kind == "build" and job.max_attempts == 3
    assert job.status in ("queued", "running", "done")
    assert memory.job(job.id).id == job.id and [j.id for j in memory.jobs()] == [job.id]
    ended = memory.cancel_job(job.id)  # embedded: no worker runs it, so it is still queued
    assert ended.status in ("cancelled", "done") and memory.job(job.id).status == ended.status
    assert [j.id for j in memory.jobs(ended.status)] == [job.id] and memory.jobs("queued") == []
    with pytest.raises(NotFoundError):
        memory.job("job-0000")
    with pytest.raises(NotFoundError):
        memory.cancel_job("job-0000")
    with pytest.raises(NotFoundError):
        memory.enqueue_build("nope")
    with pytest.raises(InputError):
        memory.jobs("finished")


def test_without_an_llm_no_build_is_queued(make: Factory, sample_path: Path) -> None:
    memory = make(llm=None)
    memory.ingest(sample_path)
    with pytest.raises(LLMError):
        memory.enqueue_build("demo-1")
    assert memory.jobs() == []


@pytest.mark.slow
def test_facts_and_one_record_edits_agree_with_the_embedded_memory(
    make: Factory, sample_path: Path, reference: Memory
) -> None:
    memory = make()
    memory.ingest(sample_path)
    memory.build("demo-1")
    reference.build("demo-1")
    assert memory.episodes("demo-1") == reference.episodes("demo-1")
    assert memory.episodes("demo-1", ["E2", "E1"]) == reference.episodes("demo-1", ["E2", "E1"])
    assert memory.facts("demo-1") == reference.facts("demo-1") != []
    fixed = memory.correct_fact("demo-1", "S2", "Priya makes mugs.", turns=["D1:4"])
    same = reference.correct_fact("demo-1", "S2", "Priya makes mugs.", turns=["D1:4"])
    assert dataclasses.replace(fixed, recorded=same.recorded) == same
    assert [s.new for s in memory.supersessions("demo-1")] == [fixed.new]
    for args in ({}, {"include_superseded": True}, {"as_of": "2024-03-14"}):
        assert memory.facts("demo-1", **args) == reference.facts("demo-1", **args)
    assert memory.facts("demo-1", ["S2"]) == reference.facts("demo-1", ["S2"])  # superseded
    assert memory.redact_message("demo-1", "D1:3") == reference.redact_message("demo-1", "D1:3")
    assert memory.delete_message("demo-1", "D2:1") == reference.delete_message("demo-1", "D2:1")
    assert memory.delete_fact("demo-1", fixed.new) == reference.delete_fact("demo-1", fixed.new)
    assert memory.facts("demo-1") == reference.facts("demo-1")
    for bad in (
        lambda: memory.delete_message("demo-1", "D9:9"),
        lambda: memory.redact_message("nope", "D1:1"),
        lambda: memory.delete_fact("demo-1", "S999"),
        lambda: memory.correct_fact("demo-1", "S999", "Priya paints."),
        lambda: memory.facts("nope"),
        lambda: memory.episodes("nope"),
        lambda: memory.supersessions("nope"),
    ):
        with pytest.raises(NotFoundError):
            bad()
    with pytest.raises(InputError):
        memory.correct_fact("demo-1", "S3", " ")
    with pytest.raises(InputError):
        memory.facts("demo-1", as_of="someday")
