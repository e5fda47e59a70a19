"""qemem for LangGraph (the ``langgraph`` extra): middleware for LangChain's ``create_agent``,
a pre-model hook for ``create_react_agent``-style graphs, and LangChain tools.

qemem is conversation memory, not a key-value store, so it is not a ``BaseStore``: a graph's
thread is a qemem conversation and its user a namespace, both read from the run's
``config["configurable"]`` (``thread_id``, ``user_id``)::

    agent = create_agent(model, middleware=[MemoryMiddleware(memory)], checkpointer=saver)
    # or: create_react_agent(model, memory_tools(memory), pre_model_hook=memory_hook(memory))
    agent.invoke({"messages": [("user", "Hi")]},
                 {"configurable": {"thread_id": "t-1", "user_id": "ana"}})

Before every model call, qemem's cited context block for the latest user message (across
the user's threads) goes in front of the model's input, then the thread's new user and
assistant messages are appended to its conversation (tool calls and tool results are not
evidence and stay out). Episodes and facts come from a build, which never runs on the model's
path (it calls an LLM and takes seconds): the messages are searchable as turns right away;
build with ``Memory.build`` / ``enqueue_build``, or let ``auto_build`` queue it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from langchain.agents import AgentState
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.config import get_config

from qemem.answer.ask import Mode
from qemem.answer.check import CheckResult
from qemem.answer.wire import answer_brief
from qemem.errors import ConfigError
from qemem.integrations.bridge import (
    CONTEXT_HEADER,
    AnyMemory,
    ContextReader,
    Memories,
    MemorySource,
    Role,
    aappend_all,
    append_all,
    areach,
    message_record,
    reach,
    recent_conversations,
)
from qemem.memory import MAX_QUESTION_CHARS
from qemem.memory.api import CONTEXT_BUDGET
from qemem.models import Conversation

THREAD_KEY = "thread_id"
USER_KEY = "user_id"


@dataclass(frozen=True)
class Thread:
    """A graph thread as qemem sees it: the user's memory and the thread's conversation."""

    memory: AnyMemory
    conversation: str


class Threads:
    """Finds a run's thread (``configurable[thread_key]``, required) and user
    (``configurable[user_key]``, optional: without it, the memory's own namespace)."""

    def __init__(
        self, memory: MemorySource, thread_key: str = THREAD_KEY, user_key: str = USER_KEY
    ) -> None:
        self.memories = Memories(memory)
        self.thread_key = thread_key
        self.user_key = user_key

    def of(self, config: RunnableConfig | None) -> Thread:
        configurable = (config or {}).get("configurable") or {}
        thread = configurable.get(self.thread_key)
        if thread is None or not str(thread).strip():
            raise ConfigError(
                f"qemem keeps a graph's messages per thread: run the graph with "
                f"config={{'configurable': {{'{self.thread_key}': ...}}}}"
            )
        user = configurable.get(self.user_key)
        return Thread(self.memories.of(None if user is None else str(user)), str(thread))


def since_last_reply(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages from the model's last reply on: what a thread gained since the previous
    model call (the whole list before the first reply)."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=0)
    return list(messages[last:])


def records_of(
    messages: Sequence[BaseMessage], now: datetime | None = None
) -> list[dict[str, Any]]:
    """The user and assistant messages with text, as qemem records under their message ids;
    tool calls, tool results and system messages are left out."""
    records = []
    for message in messages:
        role: Role = "user" if isinstance(message, HumanMessage) else "assistant"
        text = str(message.text).strip()
        if isinstance(message, HumanMessage | AIMessage) and text:
            records.append(message_record(text, role, message.id, now))
    return records


def latest_question(messages: Sequence[BaseMessage]) -> str | None:
    """The text of the latest user message (at most ``MAX_QUESTION_CHARS``), or None."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and str(message.text).strip():
            return str(message.text).strip()[:MAX_QUESTION_CHARS]
    return None


def with_context(
    messages: Sequence[BaseMessage], block: str | None, header: str = CONTEXT_HEADER
) -> list[BaseMessage]:
    """The model's input: ``messages`` with the context block (after ``header``) in front,
    added to a leading system message when there is one (models may take only one)."""
    if not block:
        return list(messages)
    block = f"{header}\n{block}" if header else block
    first = messages[0] if messages else None
    if isinstance(first, SystemMessage) and isinstance(first.content, str):
        merged = SystemMessage(f"{first.content}\n\n{block}", id=first.id)
        return [merged, *messages[1:]]
    return [SystemMessage(block), *messages]


class MemoryHook:
    """What runs before every model call (see the module's docstring and ``ContextReader``
    for the block): as a ``pre_model_hook`` (``__call__``, ``acall``) or inside
    ``MemoryMiddleware`` (``block``, ``ablock``)."""

    def __init__(self, threads: Threads, context: ContextReader, header: str) -> None:
        self.threads = threads
        self.context = context
        self.header = header

    def block(self, messages: Sequence[BaseMessage], config: RunnableConfig) -> str | None:
        """The context block for the latest user message (None when memory holds nothing for
        it yet); then the messages since the model's last reply are appended."""
        thread = self.threads.of(config)
        question = latest_question(messages)
        block = None
        if question is not None:
            block = reach(
                thread.memory, lambda m: self.context.text(m, thread.conversation, question)
            )
        records = records_of(since_last_reply(messages))
        if records:
            reach(thread.memory, lambda m: append_all(m, thread.conversation, records))
        return block

    async def ablock(self, messages: Sequence[BaseMessage], config: RunnableConfig) -> str | None:
        """``block`` from asynchronous code, never blocking the event loop."""
        thread = self.threads.of(config)
        question = latest_question(messages)
        block = None
        if question is not None:
            block = await self.context.atext(thread.memory, thread.conversation, question)
        records = records_of(since_last_reply(messages))
        if records:
            await aappend_all(thread.memory, thread.conversation, records)
        return block

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _messages(state)
        block = self.block(messages, config)
        return {"llm_input_messages": with_context(messages, block, self.header)}

    async def acall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _messages(state)
        block = await self.ablock(messages, config)
        return {"llm_input_messages": with_context(messages, block, self.header)}


def memory_hook(
    memory: MemorySource,
    *,
    budget_tokens: int = CONTEXT_BUDGET,
    across_threads: bool = True,
    thread_key: str = THREAD_KEY,
    user_key: str = USER_KEY,
    header: str = CONTEXT_HEADER,
) -> RunnableLambda[Any, dict[str, Any]]:
    """A ``pre_model_hook`` for ``create_react_agent`` (or a node before the model in a graph
    of one's own whose model reads ``llm_input_messages``), for ``invoke`` and ``ainvoke``:
    it returns ``{"llm_input_messages": [context block, *messages]}``, so the thread's state
    is unchanged. ``across_threads``: the block spans the user's threads (else the current
    one); ``budget_tokens``: its size; ``header``: the line before it; ``thread_key`` and
    ``user_key``: where in ``configurable`` the thread and user ids are."""
    hook = MemoryHook(
        Threads(memory, thread_key, user_key), ContextReader(budget_tokens, across_threads), header
    )
    return RunnableLambda(hook.__call__, afunc=hook.acall, name="qemem_memory")


class MemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """The hook as middleware of LangChain's ``create_agent`` (which replaces
    ``create_react_agent`` since LangGraph 1.0): before every model call the context block
    joins the request's system message (the thread's state is unchanged) and the thread's new
    messages are appended; ``tools`` registers ``memory_tools`` with the agent. The options
    are those of ``memory_hook`` and ``memory_tools``."""

    def __init__(
        self,
        memory: MemorySource,
        *,
        tools: bool = True,
        budget_tokens: int = CONTEXT_BUDGET,
        across_threads: bool = True,
        ask_mode: Mode = "full",
        thread_key: str = THREAD_KEY,
        user_key: str = USER_KEY,
        header: str = CONTEXT_HEADER,
    ) -> None:
        reader = ContextReader(budget_tokens, across_threads)
        self.hook = MemoryHook(Threads(memory, thread_key, user_key), reader, header)
        self.tools = (
            memory_tools(
                memory,
                budget_tokens=budget_tokens,
                across_threads=across_threads,
                ask_mode=ask_mode,
                thread_key=thread_key,
                user_key=user_key,
            )
            if tools
            else []
        )

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        block = self.hook.block(request.messages, get_config())
        return handler(self._with(request, block))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        block = await self.hook.ablock(request.messages, get_config())
        return await handler(self._with(request, block))

    def _with(self, request: ModelRequest[Any], block: str | None) -> ModelRequest[Any]:
        """The request with the block (after the header) added to its system message."""
        if not block:
            return request
        text = f"{self.hook.header}\n{block}" if self.hook.header else block
        system = request.system_message
        if system is None:
            return request.override(system_message=SystemMessage(text))
        if isinstance(system.content, str):
            return request.override(system_message=SystemMessage(f"{system.content}\n\n{text}"))
        added = {"type": "text", "text": text}
        return request.override(system_message=SystemMessage([*system.content, added]))


def _messages(state: Any) -> list[BaseMessage]:
    messages = state.get("messages") if isinstance(state, dict) else state.messages
    return list(messages or [])


def memory_tools(
    memory: MemorySource,
    *,
    budget_tokens: int = CONTEXT_BUDGET,
    across_threads: bool = True,
    ask_mode: Mode = "full",
    thread_key: str = THREAD_KEY,
    user_key: str = USER_KEY,
) -> list[BaseTool]:
    """LangChain tools over the run's thread (found as ``memory_hook`` finds it), each with a
    blocking and an asynchronous path:

    - ``context(question)``: qemem's cited context block (across the user's threads unless
      ``across_threads`` is False);
    - ``ask(question)``: an answer with cited, verified evidence cards (``ask_mode``; needs
      the memory's LLM), across the user's threads likewise;
    - ``check(text)``: each claim of ``text`` labelled against the thread's messages, with
      the ones that support or contradict it (needs the memory's LLM);
    - ``remember(text)``: store the user's words in the thread (retry-safe by tool call id).
    """
    tools = MemoryTools(
        Threads(memory, thread_key, user_key),
        ContextReader(budget_tokens, across_threads),
        ask_mode,
    )
    return [
        StructuredTool.from_function(
            func=tools.context,
            coroutine=tools.acontext,
            name="context",
            description="What long-term memory holds about a question: the user's earlier "
            "messages, episodes and facts, with their ids and dates, to cite.",
        ),
        StructuredTool.from_function(
            func=tools.ask,
            coroutine=tools.aask,
            name="ask",
            description="Answer a question about the user's past conversations from "
            "long-term memory, with the verified quotes it rests on.",
        ),
        StructuredTool.from_function(
            func=tools.check,
            coroutine=tools.acheck,
            name="check",
            description="Check a statement against what was said in this conversation: each "
            "claim labelled supported, contradicted or not found, with the messages cited.",
        ),
        StructuredTool.from_function(
            func=tools.remember,
            coroutine=tools.aremember,
            name="remember",
            description="Store something the user said, in the user's own words, in "
            "long-term memory.",
        ),
    ]


class MemoryTools:
    """The bodies of ``memory_tools``: each reads the thread from the run's config."""

    def __init__(self, threads: Threads, context: ContextReader, ask_mode: Mode) -> None:
        self.threads = threads
        self.reader = context
        self.ask_mode = ask_mode

    def context(self, question: str, config: RunnableConfig) -> str:
        thread = self.threads.of(config)
        text = reach(thread.memory, lambda m: self.reader.text(m, thread.conversation, question))
        return text or NOTHING

    async def acontext(self, question: str, config: RunnableConfig) -> str:
        thread = self.threads.of(config)
        return await self.reader.atext(thread.memory, thread.conversation, question) or NOTHING

    def ask(self, question: str, config: RunnableConfig) -> str:
        thread = self.threads.of(config)
        spanned = reach(thread.memory, lambda m: self._spanned(m.conversations(), thread))
        if not spanned:
            return NOTHING
        answer = reach(thread.memory, lambda m: self._ask(m, spanned, question))
        return json.dumps(answer_brief(answer), ensure_ascii=False)

    async def aask(self, question: str, config: RunnableConfig) -> str:
        thread = self.threads.of(config)
        known = await areach(thread.memory, lambda m: m.conversations())
        spanned = self._spanned(known, thread)
        if not spanned:
            return NOTHING
        answer = await areach(thread.memory, lambda m: self._ask(m, spanned, question))
        return json.dumps(answer_brief(answer), ensure_ascii=False)

    def check(self, text: str, config: RunnableConfig) -> str:
        thread = self.threads.of(config)
        result = reach(thread.memory, lambda m: m.check(thread.conversation, text))
        return json.dumps(claims_of(result), ensure_ascii=False)

    async def acheck(self, text: str, config: RunnableConfig) -> str:
        thread = self.threads.of(config)
        result = await areach(thread.memory, lambda m: m.check(thread.conversation, text))
        return json.dumps(claims_of(result), ensure_ascii=False)

    def remember(
        self, text: str, config: RunnableConfig, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> str:
        thread = self.threads.of(config)
        record = message_record(text, "user", f"remember-{tool_call_id}")
        reach(thread.memory, lambda m: m.add_messages(thread.conversation, [record]))
        return f"Stored in the memory of conversation {thread.conversation}."

    async def aremember(
        self, text: str, config: RunnableConfig, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> str:
        thread = self.threads.of(config)
        record = message_record(text, "user", f"remember-{tool_call_id}")
        await areach(thread.memory, lambda m: m.add_messages(thread.conversation, [record]))
        return f"Stored in the memory of conversation {thread.conversation}."

    def _spanned(self, known: Sequence[Conversation], thread: Thread) -> list[str]:
        """The stored conversations an answer spans (see ``ContextReader``)."""
        if not self.reader.across_threads:
            return [c.id for c in known if c.id == thread.conversation]
        return recent_conversations(known, thread.conversation)

    def _ask(self, memory: Any, spanned: list[str], question: str) -> Any:
        """``ask`` over one conversation, ``ask_many`` over several (a coroutine for an
        asynchronous client)."""
        if len(spanned) == 1:
            return memory.ask(spanned[0], question, mode=self.ask_mode)
        return memory.ask_many(spanned, question, mode=self.ask_mode)


NOTHING = "Long-term memory holds nothing on this yet."


def claims_of(result: CheckResult) -> list[dict[str, Any]]:
    """What a tool returns of a check: per claim its text, label, the judge's reason and the
    messages (ids) whose quotes verified for and against it."""
    return [
        {
            "claim": claim.text,
            "label": claim.label,
            "reason": claim.reason,
            "supported_by": claim.turns("supports"),
            "contradicted_by": claim.turns("contradicts"),
        }
        for claim in result.claims
    ]
