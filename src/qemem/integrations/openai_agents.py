"""qemem for the OpenAI Agents SDK (``pip install 'qemem[openai-agents]'``).

``QememSession`` is a session of the SDK (its ``Session`` protocol): the run's history items
are kept exactly, in order, as the history items of one qemem conversation, and the items that
are a user's or an assistant's text are also stored as that conversation's messages (with
their role, a speaker name and the time they were added), so the agent's history is qemem
memory: search, context, ask, check and the build see it. Tool calls, tool outputs and
reasoning stay items, never evidence. ``memory_tools`` gives the agent function tools
(``recall``, ``context``, ``ask``, ``check``) over one or several conversations.

Both work with a local ``Memory`` (each call runs in a worker thread, never on the event
loop), a ``RemoteMemory`` (likewise) or an ``AsyncRemoteMemory`` (awaited).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from agents import FunctionTool, RunContextWrapper, function_tool
from agents.memory.session_settings import SessionSettings, resolve_session_limit
from agents.tool import default_tool_error_function

from qemem.answer.check import CheckedClaim
from qemem.errors import QememError
from qemem.memory import MAX_CONVERSATIONS, MAX_MESSAGE_CHARS, Memory, MemoryAPI, SearchResult
from qemem.models import Episode, Item, Turn
from qemem.remote import AsyncRemoteMemory

Backend = MemoryAPI | AsyncRemoteMemory
"""A memory the adapter works with: ``Memory``, ``RemoteMemory`` or ``AsyncRemoteMemory``."""
BuildIn = Literal["thread", "job"]


async def call(memory: Backend, name: str, *args: Any, **kwargs: Any) -> Any:
    """``memory.<name>(*args, **kwargs)`` without blocking the event loop: awaited on an
    ``AsyncRemoteMemory``, run in a worker thread otherwise."""
    method = getattr(memory, name)
    if isinstance(memory, AsyncRemoteMemory):
        return await method(*args, **kwargs)
    return await asyncio.to_thread(method, *args, **kwargs)


def message_text(content: Any) -> str:
    """The text of a message item's ``content``: the string, or its text parts joined by
    line breaks (images, files and refusals left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [p.get("text") for p in content if isinstance(p, Mapping)]
    return "\n".join(p for p in parts if isinstance(p, str) and p)


def hit_lines(hits: Sequence[SearchResult], many: bool) -> list[str]:
    """Search results as lines for a model: the record's id (``conversation/id`` when
    ``many``), then a message's speaker and time, an episode's title, or a fact."""
    lines = []
    for hit in hits:
        record = hit.record
        ref = f"{hit.conversation}/{record.id}" if many else record.id
        if isinstance(record, Turn):
            when = record.timestamp.strftime("%Y-%m-%d %H:%M")
            lines.append(f"[{ref}] {record.speaker}, {when}: {record.text}")
        elif isinstance(record, Episode):
            lines.append(f"[{ref}] {record.title}: {record.content}")
        else:
            lines.append(f"[{ref}] {record.content}")
    return lines


def check_lines(claims: Sequence[CheckedClaim]) -> list[str]:
    """Checked claims as lines for a model: label, claim, the messages for and against."""
    lines = []
    for claim in claims:
        cited = [
            f"{stance} {', '.join(turns)}"
            for stance in ("supports", "contradicts")
            if (turns := claim.turns(stance))
        ]
        lines.append(f"- {claim.label}: {claim.text}" + (f" ({'; '.join(cited)})" if cited else ""))
    return lines


def tool_error(context: RunContextWrapper[Any], error: Exception) -> str:
    """What the model reads when a tool fails: a qemem error's message (written for the
    caller: it says what to do, and names no server path), else the SDK's generic line."""
    if isinstance(error, QememError):
        return f"qemem could not do it: {error}"
    return default_tool_error_function(context, error)


def daily(now: datetime) -> str:
    """The default sitting of a message: one per local calendar day (``2026-12-03``)."""
    return now.strftime("%Y-%m-%d")


class QememSession:
    """An Agents SDK session kept in qemem conversation ``conversation`` (its
    ``session_id``).

    ``user`` and ``assistant`` are the speaker names the messages get; ``sitting`` gives the
    qemem session (sitting) of a message from the time it is added (default: one per day);
    ``clock`` the current local time (default: now, with the local UTC offset).
    ``build_after``: once no item has been added for that many seconds, build the
    conversation's memory (episodes and facts; needs an LLM): in a worker thread
    (``build_in="thread"``, the default for a local ``Memory``) or as a background job that a
    ``qemem serve`` worker runs (``"job"``, the default for a remote memory). ``pop_item``
    forgets the message the popped item was stored as; ``clear_session`` removes the items
    and keeps their messages (the conversation's memory), unless ``forget_on_clear``, which
    deletes the whole conversation. ``session_settings.limit`` caps ``get_items`` as in the SDK.
    """

    def __init__(
        self,
        memory: Backend,
        conversation: str,
        *,
        user: str = "User",
        assistant: str = "Assistant",
        sitting: Callable[[datetime], str] = daily,
        clock: Callable[[], datetime] | None = None,
        build_after: float | None = None,
        build_in: BuildIn | None = None,
        forget_on_clear: bool = False,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if build_after is not None and not build_after > 0:
            raise ValueError(f"build_after must be more than 0 seconds (got {build_after!r})")
        self.memory = memory
        self.session_id = conversation
        self.session_settings = session_settings
        self.speakers = {"user": user, "assistant": assistant}
        self.sitting = sitting
        self.clock = clock or (lambda: datetime.now().astimezone())
        self.build_after = build_after
        self.build_in: BuildIn = build_in or ("thread" if isinstance(memory, Memory) else "job")
        self.forget_on_clear = forget_on_clear
        self._idle: asyncio.TimerHandle | None = None
        self.builds: list[asyncio.Task[Any]] = []
        """The automatic builds started so far (await them to wait for one to end)."""

    # ---------------------------------------------------------------- the Session protocol
    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history items in order (the last ``limit`` of them, else those of
        ``session_settings.limit``); none while the conversation does not exist."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None and wanted <= 0:
            return []
        if not await self._exists():
            return []
        items: list[Item] = await call(self.memory, "items", self.session_id, wanted)
        return [item.data for item in items]

    async def add_items(self, items: list[Any]) -> None:
        """Append items, each kept exactly; a user's or assistant's text item is also stored
        as a message of the conversation (creating it)."""
        if not items:
            return
        now = self.clock()
        messages = [self._message(item, now) for item in items]
        await call(self.memory, "add_items", self.session_id, list(items), messages=messages)
        if any(messages):
            self._quiet_then_build()

    async def pop_item(self) -> Any | None:
        """Remove and return the last item (None when there is none), forgetting the message
        it was stored as."""
        if not await self._exists():
            return None
        item: Item | None = await call(self.memory, "pop_item", self.session_id)
        return None if item is None else item.data

    async def clear_session(self) -> None:
        """Remove every item (the messages stay), or with ``forget_on_clear`` delete the
        conversation with everything derived from it."""
        if self.forget_on_clear:
            await call(self.memory, "delete", self.session_id)
        elif await self._exists():
            await call(self.memory, "clear_items", self.session_id)

    # ---------------------------------------------------------------- helpers
    async def _exists(self) -> bool:
        conversations = await call(self.memory, "conversations")
        return any(c.id == self.session_id for c in conversations)

    def _message(self, item: Any, now: datetime) -> dict[str, Any] | None:
        """The message a user's or assistant's text item is stored as (None for others);
        text beyond a message's limit stays in the item only."""
        if not isinstance(item, Mapping):
            return None
        role = item.get("role")
        if role not in self.speakers or item.get("type", "message") != "message":
            return None
        text = message_text(item.get("content"))
        if not text.strip():
            return None
        return {
            "session_id": self.sitting(now),
            "timestamp": now.isoformat(timespec="seconds"),
            "speaker": self.speakers[role],
            "text": text[:MAX_MESSAGE_CHARS],
            "role": role,
        }

    def _quiet_then_build(self) -> None:
        """(Re)start the idle timer: ``build_after`` seconds after the last message added,
        start a build (it runs beside the loop; a failed build is logged by its task)."""
        if self.build_after is None:
            return
        if self._idle is not None:
            self._idle.cancel()
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(self.build_after, self._start_build)

    def _start_build(self) -> None:
        self._idle = None
        name = "build" if self.build_in == "thread" else "enqueue_build"
        self.builds.append(asyncio.ensure_future(call(self.memory, name, self.session_id)))

    def close(self) -> None:
        """Stop waiting for the session to go quiet (a build already started goes on)."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


def memory_tools(
    memory: Backend,
    conversations: str | Sequence[str] | None = None,
    *,
    k: int = 8,
    budget_tokens: int = 2000,
) -> list[FunctionTool]:
    """Function tools ``recall`` (search of the messages), ``context`` (qemem's cited
    evidence block), ``ask`` (a cited answer; needs an LLM) and ``check`` (claims checked
    against the messages; needs an LLM) over ``conversations``: one conversation id, several
    (ranked together; ``check`` uses the first), or None for the memory's newest
    conversations (up to 50). Conversations that do not exist yet are left out."""

    async def targets() -> list[str]:
        stored = await call(memory, "conversations")
        if conversations is None:
            newest = sorted(stored, key=lambda c: str(c.created_at), reverse=True)
            return [c.id for c in newest[:MAX_CONVERSATIONS]]
        wanted = [conversations] if isinstance(conversations, str) else list(conversations)
        known = {c.id for c in stored}
        return [c for c in wanted if c in known]

    async def recall(query: str) -> str:
        """Search long-term memory for past messages about something.

        Args:
            query: the words to look for (names, topics, what was said).
        """
        found = await targets()
        if not found:
            return "Nothing is remembered yet."
        many = len(found) > 1
        hits = await (
            call(memory, "search_many", found, query, k=k)
            if many
            else call(memory, "search", found[0], query, k=k)
        )
        return "\n".join(hit_lines(hits, many)) or "Nothing in memory matches."

    async def context(question: str) -> str:
        """Get the remembered evidence for a question, with cited message ids and dates.

        Args:
            question: what you need to know from earlier conversations.
        """
        found = await targets()
        if not found:
            return "Nothing is remembered yet."
        block = await (
            call(memory, "context_many", found, question, budget_tokens=budget_tokens)
            if len(found) > 1
            else call(memory, "context", found[0], question, budget_tokens=budget_tokens)
        )
        return str(block.text) or "Nothing in memory bears on this."

    async def ask(question: str) -> str:
        """Answer a question from long-term memory, citing the messages it rests on.

        Args:
            question: the question about earlier conversations.
        """
        found = await targets()
        if not found:
            return "Nothing is remembered yet."
        answer = await (
            call(memory, "ask_many", found, question)
            if len(found) > 1
            else call(memory, "ask", found[0], question)
        )
        cited = f" (messages {', '.join(answer.citations)})" if answer.citations else ""
        return f"{answer.text}{cited}"

    async def check(statement: str) -> str:
        """Check a statement's claims against what was said in earlier conversations.

        Args:
            statement: the answer or statement to check.
        """
        found = await targets()
        if not found:
            return "Nothing is remembered yet."
        result = await call(memory, "check", found[0], statement)
        return "\n".join(check_lines(result.claims)) or "No factual claim to check."

    functions = (recall, context, ask, check)
    return [
        function_tool(fn, name_override=fn.__name__, failure_error_function=tool_error)
        for fn in functions
    ]


__all__ = ["Backend", "QememSession", "call", "daily", "memory_tools", "message_text"]
