"""``AsyncRemoteMemory``: ``RemoteMemory`` for asyncio, on ``httpx.AsyncClient``.

The same methods as ``RemoteMemory`` (coroutines here), the same return types and the same
``QememError`` subclasses, from the same protocol code (:mod:`qemem.remote.calls`)::

    async with AsyncRemoteMemory("http://127.0.0.1:8765", api_key) as memory:
        answer = await memory.ask("conv-26", "When did Caroline go to the support group?")
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import httpx

from qemem.answer import Answer
from qemem.answer.ask import Mode
from qemem.answer.check import CheckResult
from qemem.answer.memory_audit import MemoryAudit
from qemem.build import BuildReport
from qemem.errors import QememError
from qemem.evidence.block import Context
from qemem.ingest.additions import IngestReport
from qemem.ingest.reader import Format
from qemem.memory.api import (
    CONTEXT_BUDGET,
    Appended,
    ContextMode,
    Forgotten,
    Progress,
    SearchResult,
)
from qemem.memory.auditing import AUDIT_SAMPLE
from qemem.memory.jobs import Job
from qemem.models import (
    Conversation,
    ConversationInput,
    Episode,
    Pool,
    Ref,
    SemanticFact,
    Space,
    Supersession,
)
from qemem.remote import calls
from qemem.remote.calls import Call, Steps, T


class AsyncRemoteMemory:
    """A qemem server seen through the ``Memory`` API, for asyncio callers."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 120.0,
        client: httpx.AsyncClient | None = None,
        poll_seconds: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout)
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self.poll_seconds = poll_seconds

    async def close(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AsyncRemoteMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(self, call: Call) -> Any:
        try:
            response = await self._client.request(
                call.method, call.path, json=call.body, headers={**self._headers, **call.headers}
            )
        except httpx.TransportError as exc:
            raise calls.unreachable(self.base_url, exc) from exc
        return calls.result_of(response)

    async def _run(self, steps: Steps[T]) -> T:
        """Drive an operation of :mod:`qemem.remote.calls` to its result."""
        try:
            step = next(steps)
            while True:
                if isinstance(step, calls.Wait):
                    await asyncio.sleep(step.seconds)
                    step = steps.send(None)
                    continue
                try:
                    out = await self._send(step)
                except QememError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(out)
        except StopIteration as done:
            result: T = done.value
            return result

    # ------------------------------------------------------------------ writing
    async def add_messages(
        self,
        conversation: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Appended:
        """As ``RemoteMemory.add_messages``: append generic-format messages, retry-safe by id, or
        by ``idempotency_key`` (sent as the ``Idempotency-Key`` header) for id-less ones."""
        return await self._run(calls.add_messages(conversation, messages, idempotency_key))

    async def ingest(
        self,
        source: str | Path | Sequence[ConversationInput],
        *,
        fmt: Format = "auto",
        progress: Progress | None = None,
    ) -> IngestReport:
        """As ``RemoteMemory.ingest``: parsed here, sent as messages (ingesting twice adds
        nothing when the messages have ids)."""
        return await self._run(calls.ingest(source, fmt, progress))

    async def delete(self, conversation: str) -> bool:
        """As ``RemoteMemory.delete``."""
        return await self._run(calls.delete(conversation))

    async def build(
        self, conversation: str | None = None, *, progress: Progress | None = None
    ) -> list[BuildReport]:
        """As ``RemoteMemory.build`` (the server's LLM): starts a job per conversation and waits."""
        return await self._run(calls.build(conversation, progress, self.poll_seconds))

    # ------------------------------------------------------------------ records
    async def episodes(self, conversation: str, ids: Sequence[str] | None = None) -> list[Episode]:
        """As ``Memory.episodes``: the conversation's episodes in order."""
        return await self._run(calls.episodes(conversation, ids))

    async def facts(
        self,
        conversation: str,
        ids: Sequence[str] | None = None,
        *,
        as_of: date | datetime | str | None = None,
        include_superseded: bool = False,
    ) -> list[SemanticFact]:
        """As ``Memory.facts``: the current facts, or those known ``as_of`` a date."""
        return await self._run(calls.facts(conversation, ids, as_of, include_superseded))

    async def supersessions(self, conversation: str) -> list[Supersession]:
        """As ``Memory.supersessions``: which facts replace which."""
        return await self._run(calls.supersessions(conversation))

    async def delete_message(self, conversation: str, message: str) -> Forgotten:
        """As ``Memory.delete_message``: one message and what only it gave."""
        return await self._run(calls.forget_message(conversation, message, redact=False))

    async def redact_message(self, conversation: str, message: str) -> Forgotten:
        """As ``Memory.redact_message``: its text replaced by a marker, its place kept."""
        return await self._run(calls.forget_message(conversation, message, redact=True))

    async def delete_fact(self, conversation: str, fact: str) -> Forgotten:
        """As ``Memory.delete_fact``."""
        return await self._run(calls.delete_fact(conversation, fact))

    async def correct_fact(
        self, conversation: str, fact: str, content: str, *, turns: Sequence[str] = ()
    ) -> Supersession:
        """As ``Memory.correct_fact``: a manual supersession by a new fact."""
        return await self._run(calls.correct_fact(conversation, fact, content, turns))

    # ------------------------------------------------------------------ jobs
    async def enqueue_build(self, conversation: str) -> Job:
        """As ``Memory.enqueue_build``: a background build that the server's workers run."""
        return await self._run(calls.enqueue_build(conversation))

    async def job(self, job_id: str) -> Job:
        """As ``Memory.job``: one job of the key's namespace."""
        return await self._run(calls.get_job(job_id))

    async def jobs(
        self, status: str | None = None, *, limit: int = 50, before: str | None = None
    ) -> list[Job]:
        """As ``Memory.jobs``: a page of the namespace's jobs, newest first (``before``: the
        last job id of the previous page)."""
        return await self._run(calls.jobs(status, limit, before))

    async def cancel_job(self, job_id: str) -> Job:
        """As ``Memory.cancel_job``."""
        return await self._run(calls.cancel_job(job_id))

    # ------------------------------------------------------------------ reading
    async def conversations(self) -> list[Conversation]:
        return await self._run(calls.conversations())

    async def conversation(self, conversation: str) -> Conversation:
        return await self._run(calls.conversation(conversation))

    async def search(
        self,
        conversation: str,
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """As ``RemoteMemory.search``: hybrid search of one space."""
        return await self._run(calls.search(conversation, query, k, space))

    async def search_many(
        self,
        conversations: Sequence[str],
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """As ``RemoteMemory.search_many``: one space across conversations, ranked together."""
        return await self._run(calls.search_many(conversations, query, k, space))

    async def retrieve(
        self, conversation: str, question: str, *, exclude: Collection[Ref] = ()
    ) -> Pool:
        """As ``RemoteMemory.retrieve`` with the rule plan: the multi-granular evidence pool."""
        return await self._run(calls.retrieve(conversation, question, exclude))

    async def context(
        self,
        conversation: str,
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """As ``RemoteMemory.context``: a ready-to-paste evidence block cut to ``budget_tokens``."""
        return await self._run(calls.context(conversation, question, budget_tokens, mode))

    async def context_many(
        self,
        conversations: Sequence[str],
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """As ``RemoteMemory.context_many``: one block across conversations, ranked together."""
        return await self._run(calls.context_many(conversations, question, budget_tokens, mode))

    async def ask_many(
        self, conversations: Sequence[str], question: str, *, mode: Mode = "full"
    ) -> Answer:
        """As ``RemoteMemory.ask_many`` (the server's LLM and settings): an answer across
        conversations, ranked together."""
        return await self._run(calls.ask_many(conversations, question, mode))

    async def ask(self, conversation: str, question: str, *, mode: Mode = "full") -> Answer:
        """As ``RemoteMemory.ask`` (the server's LLM and settings)."""
        return await self._run(calls.ask(conversation, question, mode))

    async def check(self, conversation: str, text: str) -> CheckResult:
        """As ``RemoteMemory.check`` (the server's LLM): the claims of ``text``, labelled."""
        return await self._run(calls.check(conversation, text))

    async def audit_memory(
        self, conversation: str, *, sample: int = AUDIT_SAMPLE, seed: int = 0
    ) -> MemoryAudit:
        """As ``RemoteMemory.audit_memory`` (the server's LLM judges)."""
        return await self._run(calls.audit_memory(conversation, sample, seed))
