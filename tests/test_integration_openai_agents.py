"""The OpenAI Agents SDK adapter (issue 36, item 1) against the real ``openai-agents`` package:
``Runner.run`` of an ``Agent`` with a scripted model (``qemem.testing.agents``) over several
turns, its history kept by ``QememSession`` exactly as the SDK's own ``SQLiteSession`` keeps
it, user and assistant text stored as the conversation's messages, a later run's ``recall`` and
``context`` tool calls finding an earlier session's fact; pop and clear; deleting the
conversation leaves no trace of its items; automatic builds; tracing off (no trace starts).
Both backends for what reaches the store; the local ``Memory``, ``RemoteMemory`` and
``AsyncRemoteMemory``. No network call: the model is scripted and tracing is disabled."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import Session, SessionSettings
from agents.tracing import Span, Trace, TracingProcessor, set_trace_processors

from forget_checks import leaks, postgres_cells, sqlite_cells
from qemem import AsyncRemoteMemory, RemoteMemory
from qemem.embed import HashEmbedder
from qemem.errors import ConfigError
from qemem.integrations.openai_agents import Backend, QememSession, call, memory_tools
from qemem.memory import Memory
from qemem.store import open_store
from qemem.testing.agents import ScriptedModel, Step, ToolCall, tool_outputs
from service_helpers import served

FACT = "My sister Lena lives in Porto and keeps bees."
SAID = [FACT, "What is the weather where she lives?", "What did I ask you?"]


class Recorder(TracingProcessor):
    """Counts the traces and spans the SDK starts (none while tracing is disabled)."""

    def __init__(self) -> None:
        self.started = 0

    def on_trace_start(self, trace: Trace) -> None:
        self.started += 1

    def on_trace_end(self, trace: Trace) -> None: ...

    def on_span_start(self, span: Span[Any]) -> None:
        self.started += 1

    def on_span_end(self, span: Span[Any]) -> None: ...

    def shutdown(self) -> None: ...

    def force_flush(self) -> None: ...


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Tracing disabled (as the docs tell users to in tests) and the SDK's exporter replaced
    by a recorder, which must see nothing."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    recorder = Recorder()
    set_trace_processors([recorder])
    set_tracing_disabled(True)
    yield recorder
    assert recorder.started == 0


@function_tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def script() -> list[Step]:
    """The model's steps over the three runs of ``SAID`` (the second calls a tool)."""
    return [
        "Noted: Lena lives in Porto.",
        ToolCall("weather", {"city": "Porto"}),
        lambda items: f"It is {tool_outputs(items)[-1]}.",
        "You asked about the weather in Porto.",
    ]


async def converse(session: Any, model: ScriptedModel) -> None:
    agent = Agent(name="Assistant", instructions="Be brief.", model=model, tools=[weather])
    for text in SAID:
        await Runner.run(agent, text, session=session)


def local(store_url: str, llm: str | None = None) -> Memory:
    return Memory(open_store(store_url), HashEmbedder(), llm=llm)


# ---------------------------------------------------------------- the history round-trips


def check_history(memory: Backend, run: Callable[[Any], Any]) -> None:
    """Three runs through a QememSession keep what the SDK's SQLiteSession keeps, and the
    turns are the user's and the assistant's texts."""
    ours, reference = ScriptedModel(script()), ScriptedModel(script())
    session = QememSession(memory, "chat-1")
    assert isinstance(session, Session)  # the SDK's protocol, checked at run time
    kept = run(converse(session, ours))
    assert kept is None
    sdk = SQLiteSession("chat-1")
    asyncio.run(converse(sdk, reference))
    items = run(session.get_items())
    assert items == asyncio.run(sdk.get_items())
    assert len(items) == 8  # 3 user, 3 assistant messages, one tool call and its output
    assert run(session.get_items(2)) == items[-2:]
    assert ours.inputs[1][: len(items[:2])] == items[:2]  # run 2 saw run 1's history
    stored = run(call(memory, "items", "chat-1"))
    said = [True, True, True, False, False, True, True, True]  # the tool call and its output
    assert [i.turn is not None for i in stored] == said


def test_a_run_history_round_trips_through_the_session(store_url: str) -> None:
    with local(store_url) as memory:
        check_history(memory, asyncio.run)
        texts = [(t.role, t.speaker, t.text) for t in memory.turns("chat-1")]
        assert texts == [
            ("user", "User", FACT),
            ("assistant", "Assistant", "Noted: Lena lives in Porto."),
            ("user", "User", SAID[1]),
            ("assistant", "Assistant", "It is sunny in Porto."),
            ("user", "User", SAID[2]),
            ("assistant", "Assistant", "You asked about the weather in Porto."),
        ]
        assert all(t.timestamp.utcoffset() is not None for t in memory.turns("chat-1"))


def test_the_session_works_over_both_remote_clients() -> None:
    with served(llm=None) as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client)
        check_history(remote, asyncio.run)
        assert len(remote.items("chat-1")) == 8
        assert remote.delete("chat-1")

        async def through_async() -> None:
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=s.app), base_url="http://testserver"
            )
            async with AsyncRemoteMemory("http://testserver", s.alice, client=client) as memory:
                session = QememSession(memory, "chat-2")
                await converse(session, ScriptedModel(script()))
                assert len(await session.get_items()) == 8
                assert (await session.pop_item()) is not None
                assert len(await memory.items("chat-2")) == 7

        asyncio.run(through_async())


# ---------------------------------------------------------------- tools across sessions


def test_a_later_run_recalls_an_earlier_sessions_fact(tmp_path: Path) -> None:
    with local(str(tmp_path / "m.db"), llm="fake") as memory:

        async def main() -> list[str]:
            await converse(QememSession(memory, "chat-1"), ScriptedModel(script()))
            model = ScriptedModel(
                [
                    ToolCall("recall", {"query": "Lena Porto bees"}),
                    ToolCall("context", {"question": "Where does Lena live?"}),
                    ToolCall("ask", {"question": "Where does Lena live?"}),
                    ToolCall("check", {"statement": "Lena lives in Porto."}),
                    "Lena lives in Porto.",
                ]
            )
            tools = memory_tools(memory)  # every conversation of the namespace
            assert [t.name for t in tools] == ["recall", "context", "ask", "check"]
            agent = Agent(name="Assistant", model=model, tools=tools)
            later = QememSession(memory, "chat-2")
            await Runner.run(agent, "Where does my sister live?", session=later)
            return tool_outputs(model.inputs[-1])

        recalled, block, answer, checked = asyncio.run(main())
        assert "Porto" in recalled and "chat-1/" in recalled
        assert "Porto" in block
        assert answer and "error" not in answer.lower()
        assert checked.startswith("- ")
        assert memory.turns("chat-2")[0].text == "Where does my sister live?"


def test_a_tool_failure_reaches_the_model_as_text(empty_memory: Memory) -> None:
    async def main() -> list[str]:
        await converse(QememSession(empty_memory, "c"), ScriptedModel(script()))
        model = ScriptedModel(
            [ToolCall("ask", {"question": "Who keeps bees?"}), lambda i: tool_outputs(i)[-1]]
        )
        agent = Agent(name="A", model=model, tools=memory_tools(empty_memory, ["c", "absent"]))
        return [str((await Runner.run(agent, "Who keeps bees?")).final_output)]

    [output] = asyncio.run(main())
    assert "needs an LLM" in output


# ---------------------------------------------------------------- pop, clear, delete

TOOL_OUTPUT = "the zanzibarite report"


def items_of(said: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": said},
        {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": TOOL_OUTPUT},
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Found it.", "annotations": []}],
        },
    ]


def test_pop_forgets_the_message_and_clear_keeps_the_memory(store_url: str) -> None:
    with local(store_url) as memory:
        session = QememSession(memory, "c")

        async def main() -> None:
            assert await session.pop_item() is None and await session.get_items() == []
            await session.add_items(items_of("Find the report about Zanzibar."))
            assert await session.pop_item() == items_of("")[3]
            assert [t.role for t in memory.turns("c")] == ["user"]
            assert await session.pop_item() == items_of("")[2]  # a tool output: no turn
            assert [t.role for t in memory.turns("c")] == ["user"]
            await session.clear_session()
            assert await session.get_items() == []
            assert [t.text for t in memory.turns("c")] == ["Find the report about Zanzibar."]
            await session.add_items(items_of("Again."))
            assert [i.id for i in memory.items("c")] == ["I5", "I6", "I7", "I8"]  # not reused
            capped = QememSession(memory, "c", session_settings=SessionSettings(limit=2))
            assert await capped.get_items() == items_of("")[2:]
            as_dict = QememSession(memory, "c", session_settings={"limit": 1})
            assert await as_dict.get_items() == items_of("")[3:]
            assert await capped.get_items(1) == items_of("")[3:]
            [asked, *_] = memory.items("c")
            memory.redact_message("c", str(asked.turn))  # its item goes with its text
            assert await session.get_items() == items_of("")[1:]

        asyncio.run(main())


def test_a_deleted_conversation_leaves_no_item(store_url: str) -> None:
    with local(store_url) as memory:
        session = QememSession(memory, "c", forget_on_clear=True)

        async def main() -> None:
            await session.add_items(items_of("Tell me about zanzibarite."))
            await session.clear_session()  # forget_on_clear: the conversation goes
            assert await session.get_items() == [] and memory.conversations() == []

        asyncio.run(main())
        memory.add_items("d", items_of("zanzibarite again"))
        assert memory.delete("d")
        if store_url.startswith("postgresql"):
            import psycopg

            with psycopg.connect(store_url, autocommit=True) as conn:
                assert leaks(list(postgres_cells(conn)), {"zanzibar"}) == []
        else:
            assert leaks(sqlite_cells(store_url), {"zanzibar"}) == []


# ---------------------------------------------------------------- automatic builds


def test_a_quiet_session_gets_built(tmp_path: Path) -> None:
    with local(str(tmp_path / "m.db"), llm="fake") as memory:

        async def main() -> None:
            session = QememSession(memory, "c", build_after=0.05)
            await session.add_items(items_of("I adopted a grey cat named Pixel."))
            await session.add_items(items_of("Pixel likes the garden."))
            await asyncio.sleep(0.2)
            assert len(session.builds) == 1  # two adds, one build after the quiet
            [reports] = await asyncio.gather(*session.builds)
            assert reports[0].episodes > 0

        asyncio.run(main())
        assert memory.episodes("c")

        async def queued() -> None:
            session = QememSession(memory, "c", build_after=0.01, build_in="job")
            await session.add_items(items_of("Pixel sleeps all day."))
            await asyncio.sleep(0.05)
            [job] = await asyncio.gather(*session.builds)
            assert job.kind == "build" and job.status == "queued"

        asyncio.run(queued())


def test_a_failed_automatic_build_is_logged(
    empty_memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> list[Any]:
        session = QememSession(empty_memory, "c", build_after=0.01)  # no LLM to build with
        await session.add_items(items_of("Pixel sleeps all day."))
        await asyncio.sleep(0.05)
        return list(await asyncio.gather(*session.builds))

    assert asyncio.run(main()) == [None]
    assert "the automatic build of conversation c failed" in caplog.text
    assert "needs an LLM" in caplog.text
    with pytest.raises(ConfigError, match="build_after must be more than 0"):
        QememSession(empty_memory, "c", build_after=0)
