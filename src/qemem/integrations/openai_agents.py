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
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from agents import FunctionTool, RunContextWrapper, function_tool
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)
from agents.tool import default_tool_error_function

from qemem.answer.check import CheckedClaim
from qemem.errors import ConfigError, NotFoundError, QememError
from qemem.memory import MAX_CONVERSATIONS, MAX_MESSAGE_CHARS, Memory, MemoryAPI, SearchResult
from qemem.models import Episode, Item, Turn
from qemem.remote import AsyncRemoteMemory

log = logging.getLogger(__name__)
NOTHING = "Nothing is remembered yet."
"""What a tool answers while none of its conversations exists."""

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
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        if build_after is not None and not build_after > 0:
            raise ConfigError(
                f"build_after must be more than 0 seconds (got {build_after!r}): how long the "
                "session stays quiet before it is built; leave it out for no automatic build"
            )
        self.memory = memory
        self.session_id = conversation
        self.session_settings = (
            None if session_settings is None else coerce_session_settings(session_settings)
        )
        self.speakers = {"user": user, "assistant": assistant}
        self.sitting = sitting
        self.clock = clock or (lambda: datetime.now().astimezone())
        self.build_after = build_after
        self.build_in: BuildIn = build_in or ("thread" if isinstance(memory, Memory) else "job")
        self.forget_on_clear = forget_on_clear
        self._idle: asyncio.TimerHandle | None = None
        self._unbuilt = False
        self.builds: list[asyncio.Task[Any]] = []
        """The automatic builds started so far (await them to wait for one to end)."""

    # ---------------------------------------------------------------- the Session protocol
    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history items in order (the last ``limit`` of them, else those of
        ``session_settings.limit``); none while the conversation does not exist."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None and wanted <= 0:
            return []
        try:
            items: list[Item] = await call(self.memory, "items", self.session_id, wanted)
        except NotFoundError:  # no item was added yet
            return []
        return [item.data for item in items]

    async def add_items(self, items: list[Any]) -> None:
        """Append items, each kept exactly; a user's or assistant's text item is also stored
        as a message of the conversation (creating it)."""
        if not items:
            return
        now = self.clock()
        messages = [self._message(item, now) for item in items]
        await call(self.memory, "add_items", self.session_id, list(items), messages=messages)
        self._unbuilt = self._unbuilt or any(messages)
        self._quiet_then_build()

    async def pop_item(self) -> Any | None:
        """Remove and return the last item (None when there is none), forgetting the message
        it was stored as (after this session's automatic build, if one runs: a message is
        not forgotten while its conversation is built)."""
        if self.builds and not self.builds[-1].done():
            await asyncio.wait([self.builds[-1]])
        try:
            item: Item | None = await call(self.memory, "pop_item", self.session_id)
        except NotFoundError:
            return None
        return None if item is None else item.data

    async def clear_session(self) -> None:
        """Remove every item (the messages stay), or with ``forget_on_clear`` delete the
        conversation with everything derived from it."""
        if self.forget_on_clear:
            await call(self.memory, "delete", self.session_id)
            return
        with contextlib.suppress(NotFoundError):
            await call(self.memory, "clear_items", self.session_id)

    # ---------------------------------------------------------------- helpers

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
        """While messages wait to be built, (re)start the idle timer: ``build_after``
        seconds after the last item added (on this event loop), start a build."""
        if self.build_after is None or not self._unbuilt:
            return
        if self._idle is not None:
            self._idle.cancel()
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(self.build_after, self._start_build)

    def _start_build(self) -> None:
        """Start a build beside the loop; while the previous one still runs, wait another
        ``build_after`` seconds (one build of a conversation at a time)."""
        self._idle = None
        if self.builds and not self.builds[-1].done():
            self._quiet_then_build()
            return
        self._unbuilt = False
        self.builds.append(asyncio.ensure_future(self._build()))

    async def _build(self) -> Any:
        """The build (a thread) or its job (queued); a qemem error is logged, not raised: no
        caller waits for an automatic build."""
        name = "build" if self.build_in == "thread" else "enqueue_build"
        try:
            return await call(self.memory, name, self.session_id)
        except QememError as exc:
            log.warning("the automatic build of conversation %s failed: %s", self.session_id, exc)
            return None

    def close(self) -> None:
        """Stop waiting for the session to go quiet (a build already started goes on)."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


class MemoryTools:
    """What the function tools of ``memory_tools`` do, over one memory and its conversations
    (``conversations``: an id, several ids, or None for the namespace's newest)."""

    def __init__(
        self,
        memory: Backend,
        conversations: str | Sequence[str] | None,
        k: int,
        budget_tokens: int,
    ) -> None:
        self.memory = memory
        self.named = [conversations] if isinstance(conversations, str) else conversations
        self.k = k
        self.budget_tokens = budget_tokens

    async def recall(self, query: str) -> str:
        """Search long-term memory for past messages about something.

        Args:
            query: the words to look for (names, topics, what was said).
        """
        hits = await self._over("search", "search_many", query, k=self.k)
        if hits is None:
            return NOTHING
        many = self.named is None or len(self.named) > 1  # ids name their conversation
        return "\n".join(hit_lines(hits, many)) or "Nothing in memory matches."

    async def context(self, question: str) -> str:
        """Get the remembered evidence for a question, with cited message ids and dates.

        Args:
            question: what you need to know from earlier conversations.
        """
        budget = self.budget_tokens
        block = await self._over("context", "context_many", question, budget_tokens=budget)
        return NOTHING if block is None else str(block.text) or "Nothing in memory bears on it."

    async def ask(self, question: str) -> str:
        """Answer a question from long-term memory, citing the messages it rests on.

        Args:
            question: the question about earlier conversations.
        """
        answer = await self._over("ask", "ask_many", question)
        if answer is None:
            return NOTHING
        cited = f" (messages {', '.join(answer.citations)})" if answer.citations else ""
        return f"{answer.text}{cited}"

    async def check(self, statement: str) -> str:
        """Check a statement's claims against what was said in earlier conversations.

        Args:
            statement: the answer or statement to check.
        """
        result = await self._over("check", None, statement)
        if result is None:
            return NOTHING
        return "\n".join(check_lines(result.claims)) or "No factual claim to check."

    async def _stored(self) -> list[str]:
        """The named conversations that exist, else the namespace's newest."""
        listed = await call(self.memory, "conversations")
        if self.named is None:
            newest = sorted(listed, key=lambda c: str(c.created_at), reverse=True)
            return [c.id for c in newest[:MAX_CONVERSATIONS]]
        known = {c.id for c in listed}
        return [c for c in self.named if c in known]

    async def _on(self, names: list[str], one: str, many: str | None, *args: Any, **kw: Any) -> Any:
        """``one`` on the first conversation when there is one only (or no ``many``), else
        ``many`` on all; None when there is none."""
        if not names:
            return None
        if len(names) == 1 or many is None:
            return await call(self.memory, one, names[0], *args, **kw)
        return await call(self.memory, many, names, *args, **kw)

    async def _over(self, one: str, many: str | None, *args: Any, **kw: Any) -> Any:
        """``_on`` the conversations: named ones are tried as named, then again without the
        absent ones (the namespace is listed only then)."""
        names = list(self.named) if self.named is not None else await self._stored()
        try:
            return await self._on(names, one, many, *args, **kw)
        except NotFoundError:
            if self.named is None:
                raise
            return await self._on(await self._stored(), one, many, *args, **kw)


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
    conversations (up to 50). Conversations that do not exist yet are left out. A tool that
    fails answers the model with qemem's error message (``tool_error``)."""
    tools = MemoryTools(memory, conversations, k, budget_tokens)
    return [
        function_tool(method, name_override=method.__name__, failure_error_function=tool_error)
        for method in (tools.recall, tools.context, tools.ask, tools.check)
    ]


__all__ = [
    "Backend",
    "MemoryTools",
    "QememSession",
    "call",
    "daily",
    "memory_tools",
    "message_text",
]
