"""``RemoteMemory``: the ``Memory`` API over a qemem server (``qemem serve``), on httpx.

Switching from embedded to served memory is one line::

    memory = Memory.open("memory.db")                       # embedded
    memory = RemoteMemory("http://127.0.0.1:8765", api_key)  # served

The methods return the same types as ``Memory`` and raise the same ``QememError`` subclasses
(from the server's problem details). The namespace is the API key's. What is sent and how the
answers are read is :mod:`qemem.remote.calls`, shared with ``AsyncRemoteMemory``.
"""

from __future__ import annotations

import time
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
    MemoryAPI,
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


class RemoteMemory(MemoryAPI):
    """A qemem server seen through the ``Memory`` API."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 120.0,
        client: httpx.Client | None = None,
        poll_seconds: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.Client(base_url=self.base_url, timeout=timeout)
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self.poll_seconds = poll_seconds

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        try:
            response = self._client.request(
                call.method, call.path, json=call.body, headers={**self._headers, **call.headers}
            )
        except httpx.TransportError as exc:
            raise calls.unreachable(self.base_url, exc) from exc
        return calls.result_of(response)

    def _run(self, steps: Steps[T]) -> T:
        """Drive an operation of :mod:`qemem.remote.calls` to its result."""
        try:
            step = next(steps)
            while True:
                if isinstance(step, calls.Wait):
                    time.sleep(step.seconds)
                    step = steps.send(None)
                    continue
                try:
                    out = self._send(step)
                except QememError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(out)
        except StopIteration as done:
            result: T = done.value
            return result

    # ------------------------------------------------------------------ writing
    def add_messages(
        self,
        conversation: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Appended:
        """As ``Memory.add_messages``: append generic-format messages, retry-safe by id, or
        by ``idempotency_key`` (sent as the ``Idempotency-Key`` header) for id-less ones."""
        return self._run(calls.add_messages(conversation, messages, idempotency_key))

    def ingest(
        self,
        source: str | Path | Sequence[ConversationInput],
        *,
        fmt: Format = "auto",
        progress: Progress | None = None,
    ) -> IngestReport:
        """As ``Memory.ingest``, parsed here and sent as messages with the ids the source gives
        them; the server gives the others theirs (``D<session>:<n>``). Ingesting a source
        twice adds nothing when its messages have ids (LoCoMo's do); messages without one are
        appended again, as ``add_messages`` appends them. The key decides the namespace (a
        file's namespaces are ignored)."""
        return self._run(calls.ingest(source, fmt, progress))

    def delete(self, conversation: str) -> bool:
        """Delete a conversation and everything derived from it; False if it was absent."""
        return self._run(calls.delete(conversation))

    def build(
        self, conversation: str | None = None, *, progress: Progress | None = None
    ) -> list[BuildReport]:
        """As ``Memory.build`` (the server's LLM): starts a job per conversation and waits."""
        return self._run(calls.build(conversation, progress, self.poll_seconds))

    # ------------------------------------------------------------------ records
    def episodes(self, conversation: str, ids: Sequence[str] | None = None) -> list[Episode]:
        """As ``Memory.episodes``: the conversation's episodes in order."""
        return self._run(calls.episodes(conversation, ids))

    def facts(
        self,
        conversation: str,
        ids: Sequence[str] | None = None,
        *,
        as_of: date | datetime | str | None = None,
        include_superseded: bool = False,
    ) -> list[SemanticFact]:
        """As ``Memory.facts``: the current facts, or those known ``as_of`` a date."""
        return self._run(calls.facts(conversation, ids, as_of, include_superseded))

    def supersessions(self, conversation: str) -> list[Supersession]:
        """As ``Memory.supersessions``: which facts replace which."""
        return self._run(calls.supersessions(conversation))

    def delete_message(self, conversation: str, message: str) -> Forgotten:
        """As ``Memory.delete_message``: one message and what only it gave."""
        return self._run(calls.forget_message(conversation, message, redact=False))

    def redact_message(self, conversation: str, message: str) -> Forgotten:
        """As ``Memory.redact_message``: its text replaced by a marker, its place kept."""
        return self._run(calls.forget_message(conversation, message, redact=True))

    def delete_fact(self, conversation: str, fact: str) -> Forgotten:
        """As ``Memory.delete_fact``."""
        return self._run(calls.delete_fact(conversation, fact))

    def correct_fact(
        self, conversation: str, fact: str, content: str, *, turns: Sequence[str] = ()
    ) -> Supersession:
        """As ``Memory.correct_fact``: a manual supersession by a new fact."""
        return self._run(calls.correct_fact(conversation, fact, content, turns))

    # ------------------------------------------------------------------ jobs
    def enqueue_build(self, conversation: str) -> Job:
        """As ``Memory.enqueue_build``: a background build that the server's workers run."""
        return self._run(calls.enqueue_build(conversation))

    def job(self, job_id: str) -> Job:
        """As ``Memory.job``: one job of the key's namespace."""
        return self._run(calls.get_job(job_id))

    def jobs(
        self, status: str | None = None, *, limit: int = 50, before: str | None = None
    ) -> list[Job]:
        """As ``Memory.jobs``: a page of the namespace's jobs, newest first (``before``: the
        last job id of the previous page)."""
        return self._run(calls.jobs(status, limit, before))

    def cancel_job(self, job_id: str) -> Job:
        """As ``Memory.cancel_job``."""
        return self._run(calls.cancel_job(job_id))

    # ------------------------------------------------------------------ reading
    def conversations(self) -> list[Conversation]:
        return self._run(calls.conversations())

    def conversation(self, conversation: str) -> Conversation:
        return self._run(calls.conversation(conversation))

    def search(
        self,
        conversation: str,
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """As ``Memory.search``: hybrid search of one space."""
        return self._run(calls.search(conversation, query, k, space))

    def search_many(
        self,
        conversations: Sequence[str],
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """As ``Memory.search_many``: one space across conversations, ranked together."""
        return self._run(calls.search_many(conversations, query, k, space))

    def retrieve(self, conversation: str, question: str, *, exclude: Collection[Ref] = ()) -> Pool:
        """As ``Memory.retrieve`` with the rule plan: the multi-granular evidence pool."""
        return self._run(calls.retrieve(conversation, question, exclude))

    def context(
        self,
        conversation: str,
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """As ``Memory.context``: a ready-to-paste evidence block cut to ``budget_tokens``."""
        return self._run(calls.context(conversation, question, budget_tokens, mode))

    def context_many(
        self,
        conversations: Sequence[str],
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """As ``Memory.context_many``: one block across conversations, ranked together."""
        return self._run(calls.context_many(conversations, question, budget_tokens, mode))

    def ask_many(
        self, conversations: Sequence[str], question: str, *, mode: Mode = "full"
    ) -> Answer:
        """As ``Memory.ask_many`` (the server's LLM and settings): an answer across
        conversations, ranked together."""
        return self._run(calls.ask_many(conversations, question, mode))

    def ask(self, conversation: str, question: str, *, mode: Mode = "full") -> Answer:
        """As ``Memory.ask`` (the server's LLM and settings)."""
        return self._run(calls.ask(conversation, question, mode))

    def check(self, conversation: str, text: str) -> CheckResult:
        """As ``Memory.check`` (the server's LLM): the claims of ``text``, labelled."""
        return self._run(calls.check(conversation, text))

    def audit_memory(
        self, conversation: str, *, sample: int = AUDIT_SAMPLE, seed: int = 0
    ) -> MemoryAudit:
        """As ``Memory.audit_memory``, judged by the server's LLM."""
        return self._run(calls.audit_memory(conversation, sample, seed))
