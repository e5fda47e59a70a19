"""The MCP server through the official SDK's client over an in-memory session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from qemem.answer.wire import check_from_json
from qemem.embed import HashEmbedder
from qemem.memory import Memory
from qemem.service.mcp_server import create_mcp_server
from qemem.store import SQLiteStore
from service_helpers import MCP_TOOLS, MESSAGES

STATEMENT = "Ana adopted a grey cat named Pixel. Ben never started pottery classes."


def _payload(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def _session(memory: Memory, read_only: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(create_mcp_server(memory, read_only=read_only)) as client:
        tools = (await client.list_tools()).tools
        out["tools"] = {t.name: t for t in tools}
        call = client.call_tool
        out["remember"] = await call("remember", {"conversation": "c1", "messages": MESSAGES})
        out["again"] = await call("remember", {"conversation": "c1", "messages": MESSAGES[:1]})
        out["list"] = await call("list_conversations", {})
        out["recall"] = await call("recall", {"conversation": "c1", "query": "cat name"})
        out["search"] = await call("recall", {"conversation": "c1", "query": "cat", "pool": False})
        await call("remember", {"conversation": "c2", "messages": MESSAGES[:1]})
        across = {"conversations": ["c1", "c2"], "query": "grey cat Pixel", "k": 4}
        out["across"] = await call("recall_across", across)
        out["across_missing"] = await call("recall_across", {**across, "conversations": ["nope"]})
        out["across_none"] = await call("recall_across", {**across, "conversations": []})
        many = {"conversations": ["c1", "c2"], "question": "What is the cat called?"}
        out["context_across"] = await call("context_across", many)
        out["ask_across"] = await call("ask_across", many)
        out["ask_across_none"] = await call("ask_across", {**many, "conversations": "c1"})
        out["ask"] = await call(
            "ask", {"conversation": "c1", "question": "What is the cat called?"}
        )
        out["missing"] = await call("ask", {"conversation": "nope", "question": "Who?"})
        out["check"] = await call("check", {"conversation": "c1", "text": STATEMENT})
        out["blank"] = await call("check", {"conversation": "c1", "text": " "})
        out["forget"] = await call("forget", {"conversation": "c1"})
    return out


def test_tools_listed_with_agent_descriptions_and_each_call_works() -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm="fake", namespace="a") as memory:
        out = anyio.run(_session, memory)
        assert set(out["tools"]) == MCP_TOOLS
        assert all(len(t.description or "") > 80 for t in out["tools"].values())
        assert _payload(out["remember"]) == {"ids": ["m1", "m2", "D2:1"], "turns_added": 3}
        assert _payload(out["again"]) == {"ids": ["m1"], "turns_added": 0}
        [conv] = _payload(out["list"])["conversations"]
        assert conv["id"] == "c1" and conv["sessions"] == 2
        turns = _payload(out["recall"])["turns"]
        assert "m1" in {t["id"] for t in turns} and all(t["date"] for t in turns)
        assert _payload(out["search"])["turns"][0]["speaker"] in ("Ana", "Ben")
        across = _payload(out["across"])["turns"]
        assert {(t["conversation"], t["id"]) for t in across[:2]} == {("c1", "m1"), ("c2", "m1")}
        assert out["across_missing"].is_error and "nope" in out["across_missing"].content[0].text
        assert (
            out["across_none"].is_error and "no conversations" in out["across_none"].content[0].text
        )
        block = _payload(out["context_across"])
        assert "[c1/m1]" in block["text"] and "[c2/m1]" in block["text"]
        assert {"conversation": "c2", "space": "turn", "id": "m1"} in block["ids"]
        cited = [ref for card in _payload(out["ask_across"])["cards"] for ref in card["cited"]]
        assert {(r["conversation"], r["id"]) for r in cited} >= {("c1", "m1"), ("c2", "m1")}
        assert out["ask_across_none"].is_error
        answer = _payload(out["ask"])
        assert answer["answer"] and answer["cards"] and answer["citations"]
        assert out["missing"].is_error and "no conversation" in out["missing"].content[0].text
        checked = check_from_json(_payload(out["check"]))
        assert [c.label for c in checked.claims] == ["supported", "contradicted"]
        assert checked.claims[0].turns() == ["m1"] and checked.claims[0].citations[0].verified
        assert out["blank"].is_error and "empty" in out["blank"].content[0].text
        assert _payload(out["forget"]) == {"deleted": True}
        assert [c.id for c in memory.conversations()] == ["c2"]


def test_read_only_session_refuses_writes() -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), namespace="a") as memory:
        out = anyio.run(_session, memory, True)
        assert out["remember"].is_error and "read-only" in out["remember"].content[0].text
        assert out["forget"].is_error
        assert out["check"].is_error and "needs an LLM" in out["check"].content[0].text
        assert _payload(out["list"]) == {"conversations": []}


async def _edits(memory: Memory, read_only: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(create_mcp_server(memory, read_only=read_only)) as client:
        call = client.call_tool
        out["facts"] = await call("facts", {"conversation": "demo-1"})
        out["early"] = await call("facts", {"conversation": "demo-1", "as_of": "2024-03-14"})
        out["bad_date"] = await call("facts", {"conversation": "demo-1", "as_of": "soon"})
        fix = {"conversation": "demo-1", "fact": "S2", "content": "Priya makes mugs."}
        out["correct"] = await call("correct_fact", {**fix, "turns": ["D1:4"]})
        out["after"] = await call("facts", {"conversation": "demo-1"})
        out["forget_fact"] = await call("forget_fact", {"conversation": "demo-1", "fact": "S3"})
        redact = {"conversation": "demo-1", "message": "D1:3", "redact": True}
        out["redact"] = await call("forget_message", redact)
        out["delete"] = await call("forget_message", {"conversation": "demo-1", "message": "D2:1"})
        out["missing"] = await call("forget_fact", {"conversation": "demo-1", "fact": "S999"})
    return out


def test_facts_and_the_edit_tools(sample_path: Path) -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm="fake", namespace="a") as memory:
        memory.ingest(sample_path)
        memory.build("demo-1")
        current = [f.id for f in memory.facts("demo-1")]
        out = anyio.run(_edits, memory)
        listed = _payload(out["facts"])["facts"]
        assert [f["id"] for f in listed] == current
        assert {"id", "text", "episodes"} <= set(listed[0])
        assert len(_payload(out["early"])["facts"]) < len(listed)
        assert out["bad_date"].is_error and "ISO 8601" in out["bad_date"].content[0].text
        fixed = _payload(out["correct"])
        assert fixed["old"] == "S2" and fixed["turns"] == ["D1:4"]
        after = [f["id"] for f in _payload(out["after"])["facts"]]
        assert "S2" not in after and fixed["new"] in after
        assert _payload(out["forget_fact"])["facts"] == ["S3"]
        assert _payload(out["redact"])["redacted"] == ["D1:3"]
        assert _payload(out["delete"])["deleted"] == ["D2:1"]
        assert out["missing"].is_error and "S999" in out["missing"].content[0].text
        assert memory.turns("demo-1", ["D1:3"])[0].text == "[message redacted]"


def test_a_read_only_session_refuses_the_edit_tools(sample_path: Path) -> None:
    with Memory(SQLiteStore(":memory:"), HashEmbedder(), llm="fake", namespace="a") as memory:
        memory.ingest(sample_path)
        memory.build("demo-1")
        before = memory.facts("demo-1")
        out = anyio.run(_edits, memory, True)
        assert _payload(out["facts"])["facts"]
        for name in ("correct", "forget_fact", "redact", "delete"):
            assert out[name].is_error and "read-only" in out[name].content[0].text
        assert memory.facts("demo-1") == before and len(memory.turns("demo-1")) == 65
