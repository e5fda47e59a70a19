"""qemem for LlamaIndex (the ``llamaindex`` extra): a memory block for
``llama_index.core.memory.Memory``.

A LlamaIndex memory session is a qemem conversation (its ``session_id``) and the block's
``user_id`` the namespace::

    block = QememMemoryBlock(memory=memory, user_id="ana")
    chat = Memory.from_defaults(session_id="s-1", memory_blocks=[block])

Each time the memory is read (``aget``, before a model call) the block returns qemem's cited
context block for the latest user message, across the user's sessions, and appends the
session's new user and assistant messages to the conversation (tool calls and results stay
out); the messages LlamaIndex moves out of its short-term queue into the block (``aput``) are
appended too. LlamaIndex messages carry no ids, so a message's id is made from its role and
text: sending it again is a retry. Episodes and facts come from a build, which the block never
runs: build with ``Memory.build`` / ``enqueue_build``, or let ``auto_build`` schedule it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock

from qemem.errors import ConfigError
from qemem.integrations.bridge import (
    CONTEXT_HEADER,
    ContextReader,
    Memories,
    Role,
    aappend_all,
    message_record,
)
from qemem.memory import MAX_QUESTION_CHARS
from qemem.memory.api import CONTEXT_BUDGET

ROLES: dict[str, Role] = {
    MessageRole.USER.value: "user",
    MessageRole.ASSISTANT.value: "assistant",
    MessageRole.CHATBOT.value: "assistant",
    MessageRole.MODEL.value: "assistant",
}
"""The LlamaIndex roles whose messages become turns, with their qemem role."""


def records_of(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The user and assistant messages with text, as qemem records (ids from role and text)."""
    records = []
    for message in messages:
        role = ROLES.get(message.role.value)
        text = (message.content or "").strip()
        if role is not None and text:
            records.append(message_record(text, role, None))
    return records


def since_last_reply(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages from the assistant's last reply on (all of them before the first)."""
    replies = [i for i, m in enumerate(messages) if ROLES.get(m.role.value) == "assistant"]
    return list(messages[max(replies, default=0) :])


def latest_question(messages: Sequence[ChatMessage]) -> str | None:
    """The text of the latest user message (at most ``MAX_QUESTION_CHARS``), or None."""
    for message in reversed(messages):
        text = (message.content or "").strip()
        if message.role == MessageRole.USER and text:
            return text[:MAX_QUESTION_CHARS]
    return None


class QememMemoryBlock(BaseMemoryBlock[str]):
    """A memory block over qemem (see the module's docstring). ``memory``: a ``Memory``, a
    remote client, or a function from a user id to that user's memory; ``user_id``: the
    namespace (the memory's own when None); ``conversation``: the conversation when the block
    is read outside a LlamaIndex ``Memory`` (which names its ``session_id``);
    ``across_sessions``: the context block spans the user's conversations, else the current
    one's; ``budget_tokens``: its size; ``header``: the line before it."""

    name: str = Field(default="qemem", description="The name of the memory block.")
    description: str | None = Field(
        default="Long-term memory of the user's conversations, with cited records."
    )
    memory: Any = Field(exclude=True, description="The qemem memory (see the class).")
    user_id: str | None = None
    conversation: str | None = None
    across_sessions: bool = True
    budget_tokens: int = CONTEXT_BUDGET
    header: str = CONTEXT_HEADER
    _memories: Memories = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._memories = Memories(self.memory)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The context block for the latest user message of ``messages`` ("" when memory
        holds nothing for it yet), then the messages since the last reply appended."""
        messages = messages or []
        conversation = self._conversation(block_kwargs.get("session_id"))
        memory = self._memories.of(self.user_id)
        question = latest_question(messages)
        block = None
        if question is not None:
            reader = ContextReader(self.budget_tokens, self.across_sessions)
            block = await reader.atext(memory, conversation, question)
        records = records_of(since_last_reply(messages))
        if records:
            await aappend_all(memory, conversation, records)
        if not block:
            return ""
        return f"{self.header}\n{block}" if self.header else block

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Append the user and assistant messages LlamaIndex moved into the block."""
        records = records_of(messages)
        if not records:
            return
        session = next(
            (
                m.additional_kwargs["session_id"]
                for m in messages
                if "session_id" in m.additional_kwargs
            ),
            None,
        )
        await aappend_all(self._memories.of(self.user_id), self._conversation(session), records)

    def _conversation(self, session: Any) -> str:
        conversation = self.conversation if session is None else str(session)
        if not conversation:
            raise ConfigError(
                "the qemem memory block needs a conversation: use it in a LlamaIndex Memory "
                "(its session_id names the conversation) or give it conversation=..."
            )
        return conversation
