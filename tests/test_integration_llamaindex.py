"""The LlamaIndex adapter (issue 36, item 3): ``QememMemoryBlock`` in llama-index-core's
``Memory`` (its in-memory SQLite chat store), with no LLM, no embedding model and no network
(LlamaIndex's ``Settings`` are never resolved: they would default to OpenAI)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from llama_index.core import Settings
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import Memory as ChatMemory
from sqlalchemy.ext.asyncio import create_async_engine

from qemem import AsyncRemoteMemory
from qemem.embed import HashEmbedder
from qemem.errors import ConfigError
from qemem.integrations.llamaindex import QememMemoryBlock, records_of, since_last_reply
from qemem.memory import Memory
from qemem.store import SQLiteStore
from service_helpers import served

FACT = "My sister Maya moved to Porto last spring."
QUESTION = "Where does my sister Maya live now?"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(SQLiteStore(tmp_path / "memory.db"), HashEmbedder()) as mem:
        yield mem


def _ana(memory: Memory) -> Memory:
    return Memory(memory.store, memory.embedder, namespace="ana")


@asynccontextmanager
async def _chat(**options: Any) -> AsyncIterator[ChatMemory]:
    """A LlamaIndex chat memory over an in-memory SQLite chat store, closed afterwards."""
    engine = create_async_engine("sqlite+aiosqlite:///:memory:")
    try:
        yield ChatMemory.from_defaults(async_engine=engine, **options)
    finally:
        await engine.dispose()


async def _turn(chat: ChatMemory, text: str, reply: str | None = None) -> list[ChatMessage]:
    """The user says ``text``; what the model would be given; the assistant's ``reply``."""
    await chat.aput(ChatMessage(role=MessageRole.USER, content=text))
    given = await chat.aget()
    if reply is not None:
        await chat.aput(ChatMessage(role=MessageRole.ASSISTANT, content=reply))
    return given


async def _two_sessions(source: object) -> list[ChatMessage]:
    block = QememMemoryBlock(memory=source, user_id="ana")
    async with _chat(session_id="s-1", memory_blocks=[block]) as first:
        await _turn(first, FACT, "Noted.")
    async with _chat(session_id="s-2", memory_blocks=[block]) as second:
        return await _turn(second, QUESTION)


def test_a_second_session_is_given_the_first_sessions_fact_cited(memory: Memory) -> None:
    given = anyio.run(_two_sessions, memory)
    assert [m.role for m in given] == [MessageRole.SYSTEM, MessageRole.USER]
    [stored] = _ana(memory).turns("s-1")
    assert (stored.role, stored.text) == ("user", FACT)
    block = str(given[0].content)
    assert "<qemem>" in block and f"[s-1/{stored.id}] user: {FACT[:-1]}" in block
    assert [(t.role, t.text) for t in _ana(memory).turns("s-2")] == [("user", QUESTION)]
    assert Settings._llm is None and Settings._embed_model is None  # no model was resolved


def test_messages_are_appended_once_and_tool_steps_left_out(memory: Memory) -> None:
    async def session() -> None:
        async with _chat(session_id="s-1", memory_blocks=[QememMemoryBlock(memory=memory)]) as chat:
            await _turn(chat, FACT, "Noted.")
            await chat.aput(ChatMessage(role=MessageRole.TOOL, content="tool output"))
            await _turn(chat, QUESTION, "Porto.")
            await _turn(chat, "Thanks!")

    anyio.run(session)
    assert [(t.role, t.text) for t in memory.turns("s-1")] == [
        ("user", FACT),
        ("assistant", "Noted."),
        ("user", QUESTION),
        ("assistant", "Porto."),
        ("user", "Thanks!"),
    ]


def test_messages_moved_out_of_short_term_memory_are_appended(memory: Memory) -> None:
    said = [f"Message number {n} says something about the weather today." for n in range(6)]

    async def session() -> None:
        block = QememMemoryBlock(memory=memory)
        async with _chat(session_id="s-1", memory_blocks=[block], token_limit=40) as chat:
            await chat.aput_messages([ChatMessage(role="user", content=text) for text in said])

    anyio.run(session)
    stored = [t.text for t in memory.turns("s-1")]
    assert stored and stored == said[: len(stored)]  # never read, moved out in order


def test_read_outside_a_chat_memory(memory: Memory) -> None:
    block = QememMemoryBlock(memory=memory, conversation="notes", header="")
    messages = [ChatMessage(role=MessageRole.USER, content=FACT)]
    assert anyio.run(block.aget, messages) == ""  # nothing stored before
    assert "Maya" in anyio.run(block.aget, [ChatMessage(role="user", content=QUESTION)])
    with pytest.raises(ConfigError, match="session_id"):
        anyio.run(QememMemoryBlock(memory=memory).aget, messages)


def test_roles_and_the_messages_since_the_last_reply() -> None:
    messages = [
        ChatMessage(role="user", content="a"),
        ChatMessage(role="assistant", content="b"),
        ChatMessage(role="tool", content="c"),
        ChatMessage(role="model", content="d"),
        ChatMessage(role="user", content="e"),
    ]
    assert since_last_reply(messages) == messages[3:]
    assert since_last_reply(messages[:1]) == messages[:1]
    assert [(r["role"], r["text"]) for r in records_of(messages)] == [
        ("user", "a"),
        ("assistant", "b"),
        ("assistant", "d"),
        ("user", "e"),
    ]
    again = [ChatMessage(role="user", content="a"), ChatMessage(role="user", content="b")]
    assert records_of(again)[0]["id"] == records_of(messages)[0]["id"]  # a retry, not a new one
    assert records_of(again)[1]["id"] != records_of(again)[0]["id"]


@pytest.mark.slow
def test_a_served_memory_through_the_async_client() -> None:
    with served() as s:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=s.app), base_url="http://testserver"
        )
        remote = AsyncRemoteMemory("http://testserver", s.alice, client=client)
        given = anyio.run(_two_sessions, lambda user: remote)
        anyio.run(remote.close)
    assert FACT[:-1] in str(given[0].content)
