"""The LangGraph adapter (issue 36, item 2): a ``create_react_agent`` graph with a scripted
chat model, its pre-model hook and qemem's tools, over a local ``Memory`` and, through
``AsyncRemoteMemory``, a served one. No network: the model is scripted, LangSmith tracing is
off."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10

from qemem import AsyncRemoteMemory, RemoteMemory
from qemem.embed import HashEmbedder
from qemem.errors import ConfigError
from qemem.integrations.langgraph import (
    NOTHING,
    MemoryMiddleware,
    memory_hook,
    memory_tools,
    records_of,
    since_last_reply,
    with_context,
)
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing.chat_model import ScriptedChatModel
from service_helpers import served

FACT = "My sister Maya moved to Porto last spring."
QUESTION = "Where does my sister Maya live now?"


@pytest.fixture(autouse=True)
def _no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("LANGCHAIN_TRACING_V2", "false")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "memory.db"), HashEmbedder(), llm="fake") as mem:
        yield mem


def _script(messages: Sequence[BaseMessage]) -> AIMessage:
    """Reply "Noted." to a statement; to a question, call a tool named in it ("[context]")
    first, then reply with what the tool returned."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"From memory: {last.content}")
    asked = re.search(r"\[(\w+)\]", str(last.text))
    if asked is None:
        return AIMessage("Noted.")
    text = str(last.text).replace(asked.group(0), "").strip()
    arg = "question" if asked.group(1) in ("context", "ask") else "text"
    call = {"name": asked.group(1), "args": {arg: text}, "id": f"call-{len(messages)}"}
    return AIMessage("", tool_calls=[call])


def _agent(model: ScriptedChatModel, memory: Any, saver: bool = True, **hook: Any) -> Any:
    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0, still shipped
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(
            model,
            memory_tools(memory),
            pre_model_hook=memory_hook(memory, **hook),
            checkpointer=InMemorySaver() if saver else None,
        )


def _run(agent: Any, thread: str, text: str, user: str | None = "ana") -> dict[str, Any]:
    configurable = {"thread_id": thread} | ({"user_id": user} if user else {})
    result: dict[str, Any] = agent.invoke(
        {"messages": [HumanMessage(text)]}, {"configurable": configurable}
    )
    return result


def _ana(memory: Memory) -> Memory:
    return Memory(memory.store, memory.embedder, namespace="ana")


def test_a_second_thread_sees_the_first_threads_fact_cited(memory: Memory) -> None:
    model = ScriptedChatModel(script=_script)
    agent = _agent(model, memory)
    said = _run(agent, "t-1", FACT)["messages"][0]
    _run(agent, "t-2", QUESTION)
    block, *rest = model.calls[-1]
    assert isinstance(block, SystemMessage)
    assert FACT[:-1] in str(block.content)
    assert f"[t-1/{said.id}] user: " in str(block.content)  # cited: conversation/message id
    assert [m.text for m in rest] == [QUESTION]  # the thread's own state is unchanged
    assert [t.text for t in _ana(memory).turns("t-1")] == [FACT]
    assert memory.conversations() == []  # ana's threads are in ana's namespace only


def test_a_thread_alone_when_asked_to(memory: Memory) -> None:
    model = ScriptedChatModel(script=_script)
    agent = _agent(model, memory, across_threads=False)
    _run(agent, "t-1", FACT)
    _run(agent, "t-2", QUESTION)
    _run(agent, "t-1", QUESTION)
    assert not isinstance(model.calls[1][0], SystemMessage)  # t-2 sees nothing of t-1
    assert FACT[:-1] in str(model.calls[2][0].content)


def test_tools_without_the_hook_keep_to_their_thread_when_asked_to(memory: Memory) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        agent = create_react_agent(
            ScriptedChatModel(script=_script), memory_tools(memory, across_threads=False)
        )
    _run(agent, "t-1", f"[remember] {FACT}")
    answered = _run(agent, "t-2", f"[ask] {QUESTION}")["messages"]
    assert [t.text for t in _ana(memory).turns("t-1")] == [FACT]
    assert next(m for m in answered if isinstance(m, ToolMessage)).content == NOTHING


def test_messages_are_appended_once_with_roles_and_tool_steps_left_out(memory: Memory) -> None:
    model = ScriptedChatModel(script=_script)
    agent = _agent(model, memory)
    _run(agent, "t-1", FACT)
    asked = _run(agent, "t-1", f"[context] {QUESTION}")["messages"]
    _run(agent, "t-1", "Thanks!")
    tool_result = next(m for m in asked if isinstance(m, ToolMessage))
    assert FACT[:-1] in str(tool_result.content)
    turns = _ana(memory).turns("t-1")
    assert [(t.role, t.speaker, t.text) for t in turns] == [
        ("user", "user", FACT),
        ("assistant", "assistant", "Noted."),
        ("user", "user", f"[context] {QUESTION}"),
        ("assistant", "assistant", f"From memory: {tool_result.content}"),
        ("user", "user", "Thanks!"),
    ]  # the run's last reply is appended at the thread's next model call
    said = [m.id for m in asked if isinstance(m, HumanMessage | AIMessage) and m.text]
    assert [t.id for t in turns] == [*said, turns[-1].id]


def test_the_tools_work_when_the_model_calls_them(memory: Memory) -> None:
    model = ScriptedChatModel(script=_script)
    agent = _agent(model, memory)
    _run(agent, "t-1", FACT)
    answered = _run(agent, "t-2", f"[ask] {QUESTION}")["messages"]
    answer = json.loads(next(m for m in answered if isinstance(m, ToolMessage)).content)
    assert answer["mode"] == "full" and answer["cards"]
    checked = _run(agent, "t-1", "[check] Maya moved to Porto.")["messages"]
    claims = json.loads(next(m for m in checked if isinstance(m, ToolMessage)).content)
    assert claims and {"claim", "label", "supported_by", "contradicted_by"} <= set(claims[0])
    kept = _run(agent, "t-3", "[remember] I am allergic to peanuts.")["messages"]
    call = next(m for m in kept if isinstance(m, AIMessage) and m.tool_calls).tool_calls[0]
    [note] = [t for t in _ana(memory).turns("t-3") if t.id == f"remember-{call['id']}"]
    assert (note.role, note.text) == ("user", "I am allergic to peanuts.")


def test_the_hook_needs_a_thread_and_a_remote_client_needs_a_client_per_user(
    memory: Memory,
) -> None:
    agent = _agent(ScriptedChatModel(script=_script), memory, saver=False)
    with pytest.raises(ConfigError, match="thread_id"):
        agent.invoke({"messages": [HumanMessage(FACT)]}, {"configurable": {"user_id": "ana"}})
    _run(agent, "t-1", FACT, user=None)
    assert [t.text for t in memory.turns("t-1")] == [FACT]  # the memory's own namespace
    remote = RemoteMemory("http://127.0.0.1:9", "key")
    agent = _agent(ScriptedChatModel(script=_script), remote)
    with pytest.raises(ConfigError, match="namespace of its API key"):
        _run(agent, "t-1", FACT)
    remote.close()


def test_create_agent_with_the_middleware(memory: Memory) -> None:
    model = ScriptedChatModel(script=_script)
    agent = create_agent(
        model,
        middleware=[MemoryMiddleware(memory)],
        system_prompt="Be brief.",
        checkpointer=InMemorySaver(),
    )
    said = _run(agent, "t-1", FACT)["messages"][0]
    asked = _run(agent, "t-2", f"[context] {QUESTION}")["messages"]
    system = model.calls[1][0]
    assert isinstance(system, SystemMessage) and str(system.content).startswith("Be brief.\n\n")
    assert f"[t-1/{said.id}] user: {FACT[:-1]}" in str(system.content)
    assert FACT[:-1] in str(next(m for m in asked if isinstance(m, ToolMessage)).content)
    assert [t.text for t in _ana(memory).turns("t-2")] == [f"[context] {QUESTION}"]

    async def again() -> None:
        config = {"configurable": {"thread_id": "t-2", "user_id": "ana"}}
        await agent.ainvoke({"messages": [HumanMessage("Thanks!")]}, config)

    anyio.run(again)
    assert [t.text for t in _ana(memory).turns("t-2")][-1] == "Thanks!"
    assert str(model.calls[-1][0].content).startswith("Be brief.")


def test_the_model_input_keeps_one_system_message() -> None:
    messages: list[BaseMessage] = [SystemMessage("Be brief.", id="s"), HumanMessage("Hi")]
    merged = with_context(messages, "Turns: ...", "Memory:")
    assert [type(m) for m in merged] == [SystemMessage, HumanMessage]
    assert merged[0].content == "Be brief.\n\nMemory:\nTurns: ..." and merged[0].id == "s"
    assert with_context(messages, None) == messages
    replied = [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c", id="3")]
    assert since_last_reply(replied) == replied[1:]
    assert since_last_reply(replied[:1]) == replied[:1]
    assert [r["id"] for r in records_of(replied)] == ["1", "2", "3"]


async def _async_threads(app: Any, alice: str, bob: str) -> list[list[BaseMessage]]:
    clients = {
        user: AsyncRemoteMemory(
            "http://testserver",
            key,
            client=httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://testserver"
            ),
        )
        for user, key in (("alice", alice), ("bob", bob))
    }
    model = ScriptedChatModel(script=_script)
    agent = _agent(model, lambda user: clients[user])
    for thread, user, text in (("t-1", "alice", FACT), ("t-2", "bob", QUESTION)):
        config = {"configurable": {"thread_id": thread, "user_id": user}}
        await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    await agent.ainvoke(
        {"messages": [HumanMessage(QUESTION)]},
        {"configurable": {"thread_id": "t-3", "user_id": "alice"}},
    )
    for client in clients.values():
        await client.close()
    return model.calls


def test_an_async_run_over_a_local_memory(memory: Memory) -> None:
    model = ScriptedChatModel(script=_script)
    agent = _agent(model, memory)

    async def threads() -> None:
        for thread, text in (("t-1", FACT), ("t-2", f"[context] {QUESTION}")):
            config = {"configurable": {"thread_id": thread, "user_id": "ana"}}
            await agent.ainvoke({"messages": [HumanMessage(text)]}, config)

    anyio.run(threads)
    assert FACT[:-1] in str(model.calls[1][0].content)  # the hook's block
    assert FACT[:-1] in str(model.calls[2][-1].content)  # the context tool's result
    assert [t.text for t in _ana(memory).turns("t-2")] == [f"[context] {QUESTION}"]


@pytest.mark.slow
def test_async_runs_with_an_async_remote_client_per_user() -> None:
    with served() as s:
        calls = anyio.run(_async_threads, s.app, s.alice, s.bob)
    assert not isinstance(calls[1][0], SystemMessage)  # bob sees nothing of alice's threads
    assert isinstance(calls[2][0], SystemMessage) and FACT[:-1] in str(calls[2][0].content)
