"""An OpenAI Agents SDK agent whose history is qemem memory (pip install 'qemem[openai-agents]').

    python examples/openai_agents_session.py     # offline: a scripted model, qemem's offline LLM
    OPENAI_API_KEY=... QEMEM_LLM=openai:gpt-4.1-mini python examples/openai_agents_session.py

Monday's chat runs with a ``QememSession``: the SDK's history items are kept exactly, and the
user's and assistant's messages become qemem memory, built once the session has been quiet for
a moment. Tuesday's chat is a new conversation whose agent has qemem's tools (``recall``,
``context``, ``ask``, ``check``) and finds what was said on Monday.

Without OPENAI_API_KEY the agent's model is a scripted one (it says fixed lines and calls the
``context`` tool), and qemem builds with its offline LLM: no key, no network.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, Runner, set_tracing_disabled

from qemem import Memory
from qemem.integrations.openai_agents import QememSession, memory_tools
from qemem.testing.agents import ScriptedModel, ToolCall, tool_outputs

MONDAY = ["I'm flying to Lisbon on May 14 for my sister's wedding.", "She is marrying Rui."]
TUESDAY = "When is my flight, and what is it for?"


def model(script: list[Any]) -> Any:
    """A real model when OPENAI_API_KEY is set, else a scripted one saying ``script``."""
    return "gpt-4.1-mini" if os.environ.get("OPENAI_API_KEY") else ScriptedModel(script)


async def monday(memory: Memory) -> None:
    session = QememSession(memory, "monday", build_after=0.2)
    agent = Agent(
        name="Assistant",
        instructions="You are a helpful assistant. Be brief.",
        model=model(["How lovely, congratulations!", "Noted: the wedding of Rui."]),
    )
    for text in MONDAY:
        result = await Runner.run(agent, text, session=session)
        print(f"monday  user: {text}\n        assistant: {result.final_output}")
    items = await session.get_items()
    print(f"monday: {len(items)} history items, {len(memory.turns('monday'))} messages")
    await asyncio.sleep(0.4)  # quiet: the session builds Monday's memory in a thread
    for report in (await asyncio.gather(*session.builds))[0]:
        print(f"monday: built {report.episodes} episodes, {report.facts_added} facts")


async def tuesday(memory: Memory) -> None:
    session = QememSession(memory, "tuesday")
    scripted = [
        ToolCall("context", {"question": TUESDAY}),
        lambda items: "From memory:\n" + tool_outputs(items)[-1],
    ]
    agent = Agent(
        name="Assistant",
        instructions="Use the memory tools to answer from earlier chats; cite message ids.",
        model=model(scripted),
        tools=memory_tools(memory, ["monday"]),
    )
    result = await Runner.run(agent, TUESDAY, session=session)
    print(f"tuesday user: {TUESDAY}\n        assistant: {result.final_output}")


def main() -> None:
    if not os.environ.get("OPENAI_API_KEY"):
        set_tracing_disabled(True)  # nothing to send traces to (and no network offline)
    llm = os.environ.get("QEMEM_LLM", "fake")
    with tempfile.TemporaryDirectory() as tmp, Memory.open(Path(tmp) / "m.db", llm=llm) as memory:
        asyncio.run(monday(memory))
        asyncio.run(tuesday(memory))


if __name__ == "__main__":
    main()
