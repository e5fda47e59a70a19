"""``AsyncRemoteMemory`` (issue 22, item 4): the same methods, return types and exceptions as
``RemoteMemory``, against the real app (httpx's ASGI transport), as an async context manager."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from qemem import AsyncRemoteMemory, RemoteMemory
from qemem.answer.wire import answer_to_json, check_to_json
from qemem.errors import ConflictError, InputError, LLMError, NotFoundError, QememError
from qemem.models import Ref
from service_helpers import MESSAGES, Served, served

QUESTION = "What pottery pieces has Priya made?"


def test_it_has_every_method_of_remote_memory_as_a_coroutine() -> None:
    for name, member in inspect.getmembers(RemoteMemory, inspect.isfunction):
        if name.startswith("_") or name in ("close",):
            continue
        mirror = getattr(AsyncRemoteMemory, name, None)
        assert mirror is not None, f"AsyncRemoteMemory lacks {name}"
        assert inspect.iscoroutinefunction(mirror), name
        assert inspect.signature(mirror).parameters == inspect.signature(member).parameters, name
        assert (
            inspect.signature(mirror).return_annotation
            == inspect.signature(member).return_annotation
        )
    assert inspect.iscoroutinefunction(AsyncRemoteMemory.close)


def _async(s: Served, key: str) -> AsyncRemoteMemory:
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=s.app), base_url="http://testserver"
    )
    return AsyncRemoteMemory("http://testserver", key, client=client, poll_seconds=0.01)


def _without_timings(data: dict[str, Any]) -> dict[str, Any]:
    calls = [*data["trace"]["calls"]]
    calls += [c for r in data.get("evidence", {}).get("rounds", []) for c in r["calls"]]
    for call in calls:
        call.pop("latency_s", None)
    data["trace"].pop("seconds")
    data["trace"]["totals"].pop("latency_s", None)
    return data


async def _everything(s: Served, sample: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with _async(s, s.alice) as memory:
        out["ingest"] = await memory.ingest(sample)
        out["again"] = await memory.ingest(sample)
        out["append"] = await memory.add_messages("c1", MESSAGES, idempotency_key="k-1")
        out["retried"] = await memory.add_messages("c1", MESSAGES, idempotency_key="k-1")
        out["conversations"] = await memory.conversations()
        out["conversation"] = await memory.conversation("demo-1")
        out["search"] = await memory.search("demo-1", "pottery", k=5)
        out["search_many"] = await memory.search_many(["demo-1", "c1"], "pottery", k=5)
        out["search_one"] = await memory.search_many(["demo-1"], "pottery", k=5)
        out["retrieve"] = await memory.retrieve("demo-1", QUESTION)
        out["build"] = await memory.build("demo-1")
        out["jobs"] = await memory.jobs()
        out["job"] = await memory.job(out["jobs"][0].id)
        out["cancelled"] = await memory.cancel_job(out["jobs"][0].id)
        out["queued"] = await memory.enqueue_build("demo-1")
        with pytest.raises(NotFoundError):
            await memory.job("job-0000")
        out["context"] = await memory.context("demo-1", QUESTION, budget_tokens=300)
        out["ask"] = await memory.ask("demo-1", QUESTION)
        both = ["demo-1", "c1"]
        out["context_many"] = await memory.context_many(both, "grey cat?", budget_tokens=300)
        out["ask_many"] = await memory.ask_many(both, "grey cat?", mode="retrieval")
        out["check"] = await memory.check("demo-1", "Priya made a mug.")
        out["audit"] = await memory.audit_memory("demo-1", sample=4, seed=1)
        with pytest.raises(NotFoundError):
            await memory.conversation("nope")
        with pytest.raises(ConflictError):
            await memory.add_messages("c1", [{**MESSAGES[0], "text": "changed"}])
        with pytest.raises(InputError):
            await memory.search("demo-1", "")
        out["deleted"] = await memory.delete("c1")
        out["absent"] = await memory.delete("c1")
    return out


@pytest.mark.slow
def test_results_match_the_blocking_client(sample_path: Path) -> None:
    with served() as s:
        got = anyio.run(_everything, s, sample_path)
        remote = RemoteMemory("http://testserver", s.alice, client=s.client, poll_seconds=0.01)
        assert got["again"].added == {"demo-1": (0, 0)}
        assert got["retried"] == got["append"] and got["append"].turns_added == 3
        assert sorted(c.id for c in got["conversations"]) == ["c1", "demo-1"]
        assert got["conversation"] == remote.conversation("demo-1")
        assert got["search"] == remote.search("demo-1", "pottery", k=5)
        assert got["search_one"] == got["search"]
        assert {r.conversation for r in got["search_many"]} == {"demo-1", "c1"}
        assert got["context"] == remote.context("demo-1", QUESTION, budget_tokens=300)
        assert _without_timings(answer_to_json(got["ask"])) == _without_timings(
            answer_to_json(remote.ask("demo-1", QUESTION))
        )
        assert _without_timings(check_to_json(got["check"])) == _without_timings(
            check_to_json(remote.check("demo-1", "Priya made a mug."))
        )
        audit = remote.audit_memory("demo-1", sample=4, seed=1)
        assert got["audit"].items == audit.items and got["audit"].census == audit.census
        assert len(audit.items) == 4
        assert got["context_many"].conversations == ["demo-1", "c1"]
        assert got["context_many"].items[0].ref == Ref("turn", "m1", "c1")
        many = got["ask_many"]
        assert many.across is not None and many.across.conversations == ["demo-1", "c1"]
        assert {item.conversation for item in many.pool.turns} == {"demo-1", "c1"}
        assert got["build"] and got["build"][0].conversation == "demo-1"
        assert got["job"] == got["jobs"][0] == remote.job(got["job"].id)
        assert got["job"].status == "done" and got["job"].reports == got["build"]
        assert got["cancelled"] == got["job"]  # a finished job stays as it is
        assert [j.id for j in remote.jobs()][-2:] == [got["queued"].id, got["job"].id]
        assert (got["deleted"], got["absent"]) == (True, False)


async def _without_llm(s: Served, sample: Path) -> None:
    async with _async(s, s.alice) as memory:
        await memory.ingest(sample)
        with pytest.raises(LLMError):
            await memory.ask("demo-1", QUESTION)
        with pytest.raises(LLMError):
            await memory.check("demo-1", "Priya made a mug.")
        with pytest.raises(LLMError):
            await memory.audit_memory("demo-1")
        with pytest.raises(LLMError):
            await memory.enqueue_build("demo-1")
        assert (await memory.ask("demo-1", QUESTION, mode="retrieval")).evidence.pool.turns


@pytest.mark.slow
def test_without_an_llm_the_same_errors(sample_path: Path) -> None:
    with served(llm=None) as s:
        anyio.run(_without_llm, s, sample_path)


async def _unreachable() -> None:
    async with AsyncRemoteMemory("http://127.0.0.1:9", "qm_x", timeout=2) as memory:
        with pytest.raises(QememError, match="cannot reach the qemem server"):
            await memory.conversations()


@pytest.mark.slow
def test_an_unreachable_server_is_a_clear_error() -> None:
    anyio.run(_unreachable)


async def _records(s: Served, sample: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with _async(s, s.alice) as memory:
        await memory.ingest(sample)
        await memory.build("demo-1")
        out["episodes"] = await memory.episodes("demo-1")
        out["fixed"] = await memory.correct_fact("demo-1", "S2", "Priya makes mugs.")
        out["facts"] = await memory.facts("demo-1")
        out["all"] = await memory.facts("demo-1", include_superseded=True)
        out["supersessions"] = await memory.supersessions("demo-1")
        out["redacted"] = await memory.redact_message("demo-1", "D1:3")
        out["deleted"] = await memory.delete_message("demo-1", "D2:1")
        out["gone"] = await memory.delete_fact("demo-1", out["fixed"].new)
        out["after"] = await memory.facts("demo-1")
        with pytest.raises(NotFoundError):
            await memory.delete_fact("demo-1", "S999")
    return out


@pytest.mark.slow
def test_the_record_edits_match_the_blocking_client(sample_path: Path) -> None:
    with served() as s:
        got = anyio.run(_records, s, sample_path)
        remote = RemoteMemory("http://testserver", s.alice, client=s.client, poll_seconds=0.01)
        assert got["episodes"] != [] and remote.episodes("demo-1")[0].id == "E2"  # E1 went
        assert got["supersessions"] == [got["fixed"]] and got["fixed"].old == "S2"
        assert "S2" not in [f.id for f in got["facts"]] and "S2" in [f.id for f in got["all"]]
        assert got["redacted"].redacted == ["D1:3"] and got["deleted"].deleted == ["D2:1"]
        assert got["gone"].facts == [got["fixed"].new] and remote.supersessions("demo-1") == []
        after = remote.facts("demo-1")
        assert after == got["after"]
        removed = set(got["redacted"].facts + got["deleted"].facts + got["gone"].facts)
        assert {f.id for f in after} == {f.id for f in got["all"]} - removed  # S2 current again
