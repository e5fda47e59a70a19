"""qemem as a LlamaIndex memory block: what a user said in one session is put in front of the
model, cited, in the next.

    pip install 'qemem[llamaindex]'
    python examples/llamaindex_memory.py

No model is called: the example shows the messages LlamaIndex's ``Memory`` would hand to one
(pass ``chat.aget()`` to any LlamaIndex LLM or agent). Builds use the offline LLM unless
``QEMEM_LLM`` names one (e.g. ``anthropic:claude-haiku-4-5``).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory as ChatMemory

from qemem import Memory
from qemem.integrations.llamaindex import QememMemoryBlock


async def session(block: QememMemoryBlock, session_id: str, said: str, reply: str) -> None:
    """One exchange of a chat session: the user's message, what the model would be given,
    the assistant's reply."""
    chat = ChatMemory.from_defaults(session_id=session_id, memory_blocks=[block])
    await chat.aput(ChatMessage(role="user", content=said))
    given = await chat.aget()
    print(f"{session_id}: the model would be given {len(given)} messages; the first:")
    print(f"  [{given[0].role.value}] {given[0].content}")
    await chat.aput(ChatMessage(role="assistant", content=reply))


async def two_sessions(block: QememMemoryBlock) -> None:
    await session(block, "session-1", "My passport expires in June, I renewed it.", "Noted.")
    await session(block, "session-2", "Is my passport still valid for May?", "Yes.")


def main() -> None:
    llm = os.environ.get("QEMEM_LLM", "fake")
    with tempfile.TemporaryDirectory() as tmp:
        with Memory.open(Path(tmp) / "memory.db", llm=llm) as memory:
            asyncio.run(two_sessions(QememMemoryBlock(memory=memory, user_id="ana")))
        # Episodes and facts come from a build (the block never runs one): here, by hand.
        with Memory.open(Path(tmp) / "memory.db", llm=llm, namespace="ana") as ana:
            [report] = ana.build("session-1")
            print(f"built with {llm}: {report.episodes} episodes, {report.facts_added} facts")


if __name__ == "__main__":
    main()
