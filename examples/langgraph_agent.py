"""A LangGraph agent (LangChain's ``create_agent``) with qemem memory: what a user said in one
thread reaches the model in another, cited, through ``MemoryMiddleware``, which also gives
the agent qemem's tools.

    pip install 'qemem[langgraph]'
    python examples/langgraph_agent.py

The chat model here is scripted (it needs no key and no network): swap in any LangChain chat
model that calls tools (e.g. ``ChatAnthropic`` of langchain-anthropic). qemem's own calls (the
``ask`` tool, the build) use its offline LLM unless ``QEMEM_LLM`` names one (e.g.
``anthropic:claude-haiku-4-5``): offline, answers are placeholders echoing the evidence.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from qemem import Memory
from qemem.integrations.langgraph import MemoryMiddleware
from qemem.testing.chat_model import ScriptedChatModel


def script(messages: Sequence[BaseMessage]) -> AIMessage:
    """The scripted model: asks qemem (the ``ask`` tool) when the user asks a question, then
    replies with the tool's answer; acknowledges anything else."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"From memory: {last.content[:300]}")
    if str(last.text).rstrip().endswith("?"):
        call = {"name": "ask", "args": {"question": str(last.text)}, "id": f"c{len(messages)}"}
        return AIMessage("", tool_calls=[call])
    return AIMessage("Noted.")


def main() -> None:
    llm = os.environ.get("QEMEM_LLM", "fake")
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory.open(Path(tmp) / "memory.db", llm=llm) as memory,
    ):
        model = ScriptedChatModel(script=script)
        agent = create_agent(
            model,
            middleware=[MemoryMiddleware(memory)],
            system_prompt="You are a travel assistant.",
            checkpointer=InMemorySaver(),
        )

        def say(thread: str, text: str) -> str:
            config = {"configurable": {"thread_id": thread, "user_id": "ana"}}
            result = agent.invoke({"messages": [HumanMessage(text)]}, config)
            return str(result["messages"][-1].text)

        print("thread-1:", say("thread-1", "I booked the flights to Lisbon for May 14."))
        print("thread-2:", say("thread-2", "When am I flying to Lisbon?"))
        print("the model's system message in thread-2:")
        print(model.calls[1][0].content)

        # Episodes and facts come from a build (the hook never runs one): here, by hand.
        with Memory.open(Path(tmp) / "memory.db", llm=llm, namespace="ana") as ana:
            [report] = ana.build("thread-1")
            print(f"built with {llm}: {report.episodes} episodes, {report.facts_added} facts")


if __name__ == "__main__":
    main()
