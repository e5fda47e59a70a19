"""The context API (issue 22, item 3): a ready-to-paste evidence block for the caller's own
LLM, cut to a token budget, times annotated like the answer context, no LLM call by default;
from the library, HTTP, RemoteMemory, MCP and the CLI."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from qemem import RemoteMemory
from qemem.answer.wire import context_from_json, context_to_json
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import InputError, LLMError, NotFoundError
from qemem.evidence import annotate_times
from qemem.llm import LLMClient, LLMRequest, LLMResponse
from qemem.llm.types import estimate_tokens
from qemem.memory import Memory
from qemem.service.mcp_server import create_mcp_server
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM
from service_helpers import served

QUESTION = "When did Priya adopt a kitten?"


class NoCalls:
    """A provider that fails the test if it is ever asked."""

    name, model = "none", "none"

    def complete(self, request: LLMRequest) -> LLMResponse:
        raise AssertionError(f"context made an LLM call ({request.stage})")


@pytest.fixture
def memory(sample_path: Path) -> Memory:
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(NoCalls()))
    mem.ingest(sample_path)
    return mem


def test_the_block_fits_its_budget_and_names_citable_ids(memory: Memory) -> None:
    for budget in (120, 300, 1500):
        block = memory.context("demo-1", QUESTION, budget_tokens=budget)
        assert block.tokens == estimate_tokens(block.text) <= budget
        assert block.items
        for item in block.items:
            assert f"[{item.ref.id}]" in block.text
            assert memory.turns("demo-1", [item.ref.id])
    small = memory.context("demo-1", QUESTION, budget_tokens=300)
    large = memory.context("demo-1", QUESTION, budget_tokens=1500)
    assert len(small.items) < len(large.items)
    assert small.left_out > large.left_out
    # items keep the pool's exposure order: the small block is the large one's beginning
    assert [i.ref for i in large.items[: len(small.items)]] == [i.ref for i in small.items]


def test_a_larger_budget_never_shows_less(memory: Memory) -> None:
    blocks = [memory.context("demo-1", QUESTION, budget_tokens=b) for b in range(40, 2000, 37)]
    for small, large in itertools.pairwise(blocks):
        refs = [i.ref for i in small.items]
        assert [i.ref for i in large.items[: len(refs)]] == refs  # the small one's beginning
    assert not blocks[0].items and blocks[-1].items  # a first item too long ends the block


def test_times_are_annotated_like_the_answer_context(memory: Memory) -> None:
    block = memory.context("demo-1", QUESTION, budget_tokens=1500)
    kitten = next(i for i in block.items if i.ref.id == "D4:4")
    turn = memory.turns("demo-1", ["D4:4"])[0]
    assert kitten.text == annotate_times(turn.text, "2024-07-22")
    assert "last Friday [the Friday before 22 July 2024]" in block.text
    assert "--- Session 4 (Monday, 22 July 2024, 20:20)" in block.text
    assert kitten.date.startswith("2024-07-22") and kitten.speaker == "Priya"


def test_episodes_and_facts_join_when_the_store_has_them(sample_path: Path) -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(OfflineLLM())) as mem:
        mem.ingest(sample_path)
        mem.build("demo-1")
        block = mem.context("demo-1", QUESTION, budget_tokens=4000)
    spaces = {i.ref.space for i in block.items}
    assert spaces == {"turn", "episode", "fact"}
    assert "Episodes:" in block.text and "Semantic facts" in block.text


def test_bad_requests_are_clear_errors(memory: Memory) -> None:
    with pytest.raises(InputError, match="budget_tokens"):
        memory.context("demo-1", QUESTION, budget_tokens=0)
    with pytest.raises(InputError, match="empty"):
        memory.context("demo-1", "  ")
    with pytest.raises(NotFoundError):
        memory.context("nope", QUESTION)
    with pytest.raises(InputError, match="mode"):
        memory.context("demo-1", QUESTION, mode="smart")  # type: ignore[arg-type]
    bare = Memory(memory.store, memory.embedder, llm=None)
    with pytest.raises(LLMError):
        bare.context("demo-1", QUESTION, mode="llm")
    assert bare.context("demo-1", QUESTION).items  # the rule plan needs none


def test_the_llm_planner_is_used_when_asked(sample_path: Path) -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=LLMClient(OfflineLLM())) as mem:
        mem.ingest(sample_path)
        block = mem.context("demo-1", QUESTION, mode="llm")
    assert block.planner == "llm" and block.items


def test_json_round_trip(memory: Memory) -> None:
    block = memory.context("demo-1", QUESTION, budget_tokens=500)
    data = context_to_json(block)
    assert {"text", "items", "tokens"} <= set(data)
    assert data["items"][0]["ref"] == {"space": "turn", "id": block.items[0].ref.id}
    assert context_from_json(json.loads(json.dumps(data))) == block


def test_http_and_remote_memory_give_the_same_block(sample_path: Path) -> None:
    with served(llm=None) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        remote.ingest(sample_path)
        block = remote.context("demo-1", QUESTION, budget_tokens=400)
        response = s.client.post(
            "/v1/conversations/demo-1/context",
            json={"question": QUESTION, "budget_tokens": 400},
            headers=s.auth(s.alice),
        )
        assert response.status_code == 200
        assert context_from_json(response.json()) == block
        assert block.tokens <= 400 and block.items
        post = s.client.post
        headers = s.auth(s.alice)
        url = "/v1/conversations/demo-1/context"
        assert (
            post(url, json={"question": QUESTION, "budget_tokens": 0}, headers=headers).status_code
            == 422
        )
        assert (
            post(
                "/v1/conversations/nope/context", json={"question": QUESTION}, headers=headers
            ).status_code
            == 404
        )
        assert (
            post(url, json={"question": QUESTION, "mode": "llm"}, headers=headers).status_code
            == 503
        )
        with pytest.raises(LLMError):
            remote.context("demo-1", QUESTION, mode="llm")
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), namespace="alice") as local:
        local.ingest(sample_path)
        assert local.context("demo-1", QUESTION, budget_tokens=400) == block


async def _mcp(memory: Memory) -> dict[str, Any]:
    async with Client(create_mcp_server(memory)) as client:
        ok = await client.call_tool(
            "context", {"conversation": "demo-1", "question": QUESTION, "budget_tokens": 300}
        )
        bad = await client.call_tool(
            "context", {"conversation": "demo-1", "question": QUESTION, "budget_tokens": 0}
        )
    return {"ok": ok, "bad": bad}


def test_mcp_context_tool(memory: Memory) -> None:
    out = anyio.run(_mcp, memory)
    assert not out["ok"].is_error
    payload = json.loads(out["ok"].content[0].text)
    assert payload["tokens"] <= 300 and payload["ids"]
    assert payload["text"] == memory.context("demo-1", QUESTION, budget_tokens=300).text
    assert out["bad"].is_error and "budget_tokens" in out["bad"].content[0].text


def test_cli_prints_the_block_and_json(sample_path: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    runner = CliRunner()
    common = ["--store", store, "--embedder", "hash"]
    assert runner.invoke(app, ["ingest", str(sample_path), *common]).exit_code == 0
    shown = runner.invoke(app, ["context", QUESTION, "-c", "demo-1", "--budget", "300", *common])
    assert shown.exit_code == 0, shown.output
    assert re.search(r"\[D\d+:\d+\] (Priya|Tomas): ", shown.stdout)
    as_json = runner.invoke(app, ["context", QUESTION, "-c", "demo-1", "--json", *common])
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["tokens"] <= 2000
    refused = runner.invoke(app, ["context", QUESTION, "-c", "demo-1", "--budget", "0", *common])
    assert refused.exit_code == 2
