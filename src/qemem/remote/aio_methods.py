"""The ``MemoryAPI`` operations of ``AsyncRemoteMemory``: each one call of ``calls.steps``.

Generated from the operation table (:mod:`qemem.operations`) and ``MemoryAPI`` by
``python -m qemem.remote.generate``: do not edit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar

from qemem.answer import Answer
from qemem.answer.ask import Mode
from qemem.answer.check import CheckResult
from qemem.answer.memory_audit import MemoryAudit
from qemem.build import BuildReport
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

T = TypeVar("T")


class AsyncRemoteMethods(ABC):
    """What ``AsyncRemoteMemory`` does for each operation: its ``_run`` drives the steps."""

    @abstractmethod
    async def _run(self, steps: calls.Steps[T]) -> T:
        """Drive an operation's steps (:mod:`qemem.remote.calls`) to its result."""

    async def ingest(
        self,
        source: str | Path | Sequence[ConversationInput],
        *,
        fmt: Format = "auto",
        progress: Progress | None = None,
    ) -> IngestReport:
        """Add what the memory lacks of a file or of parsed conversations (idempotent)."""
        result: IngestReport = await self._run(calls.steps("ingest", locals()))
        return result

    async def add_messages(
        self,
        conversation: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Appended:
        """Append generic-format messages to a conversation (retry-safe by id, or by
        ``idempotency_key`` for messages without ids)."""
        result: Appended = await self._run(calls.steps("add_messages", locals()))
        return result

    async def conversations(self) -> list[Conversation]:
        """The conversations of the namespace."""
        result: list[Conversation] = await self._run(calls.steps("conversations", locals()))
        return result

    async def conversation(self, conversation: str) -> Conversation:
        """One conversation (NotFoundError if absent)."""
        result: Conversation = await self._run(calls.steps("conversation", locals()))
        return result

    async def delete(self, conversation: str) -> bool:
        """Delete a conversation and all derived from it; False if it was absent."""
        result: bool = await self._run(calls.steps("delete", locals()))
        return result

    async def episodes(self, conversation: str, ids: Sequence[str] | None = None) -> list[Episode]:
        """The conversation's episodes in order (only those of ``ids``)."""
        result: list[Episode] = await self._run(calls.steps("episodes", locals()))
        return result

    async def facts(
        self,
        conversation: str,
        ids: Sequence[str] | None = None,
        *,
        as_of: date | datetime | str | None = None,
        include_superseded: bool = False,
    ) -> list[SemanticFact]:
        """The current facts (those known ``as_of`` a date; the superseded ones too with
        ``include_superseded``); with ``ids`` exactly those."""
        result: list[SemanticFact] = await self._run(calls.steps("facts", locals()))
        return result

    async def supersessions(self, conversation: str) -> list[Supersession]:
        """Which facts replace which, with the turns that show it."""
        result: list[Supersession] = await self._run(calls.steps("supersessions", locals()))
        return result

    async def delete_message(self, conversation: str, message: str) -> Forgotten:
        """Delete one message and the episodes and facts derived only from it."""
        result: Forgotten = await self._run(calls.steps("delete_message", locals()))
        return result

    async def redact_message(self, conversation: str, message: str) -> Forgotten:
        """Replace one message's text by a marker (id and place kept), removing what was
        derived from it."""
        result: Forgotten = await self._run(calls.steps("redact_message", locals()))
        return result

    async def delete_fact(self, conversation: str, fact: str) -> Forgotten:
        """Delete one fact (a fact it replaced is current again)."""
        result: Forgotten = await self._run(calls.steps("delete_fact", locals()))
        return result

    async def correct_fact(
        self, conversation: str, fact: str, content: str, *, turns: Sequence[str] = ()
    ) -> Supersession:
        """Replace a current fact by ``content`` (a manual supersession citing ``turns``)."""
        result: Supersession = await self._run(calls.steps("correct_fact", locals()))
        return result

    async def search(
        self,
        conversation: str,
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """Hybrid search (dense + BM25, RRF k=60) of one space."""
        result: list[SearchResult] = await self._run(calls.steps("search", locals()))
        return result

    async def search_many(
        self,
        conversations: Sequence[str],
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """Hybrid search of one space across several conversations of the namespace, ranked
        together; each result names its conversation."""
        result: list[SearchResult] = await self._run(calls.steps("search_many", locals()))
        return result

    async def retrieve(
        self, conversation: str, question: str, *, exclude: Collection[Ref] = ()
    ) -> Pool:
        """The multi-granular evidence pool of the question's rule plan, less ``exclude``."""
        result: Pool = await self._run(calls.steps("retrieve", locals()))
        return result

    async def build(
        self, conversation: str | None = None, *, progress: Progress | None = None
    ) -> list[BuildReport]:
        """Build the episodes and facts the memory lacks (needs an LLM)."""
        result: list[BuildReport] = await self._run(calls.steps("build", locals()))
        return result

    async def context(
        self,
        conversation: str,
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """A ready-to-paste evidence block cut to ``budget_tokens`` (no LLM call unless
        ``mode`` is "llm": the LLM planner)."""
        result: Context = await self._run(calls.steps("context", locals()))
        return result

    async def context_many(
        self,
        conversations: Sequence[str],
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """One evidence block across several conversations of the namespace, ranked
        together; each item's ``ref`` names its conversation."""
        result: Context = await self._run(calls.steps("context_many", locals()))
        return result

    async def ask_many(
        self, conversations: Sequence[str], question: str, *, mode: Mode = "full"
    ) -> Answer:
        """An answer across several conversations of the namespace, ranked together; its
        cards and pool name each record's conversation (``Answer.across``)."""
        result: Answer = await self._run(calls.steps("ask_many", locals()))
        return result

    async def ask(self, conversation: str, question: str, *, mode: Mode = "full") -> Answer:
        """Answer a question with its evidence record (``Answer.evidence``)."""
        result: Answer = await self._run(calls.steps("ask", locals()))
        return result

    async def check(self, conversation: str, text: str) -> CheckResult:
        """Label each claim of ``text`` against the conversation's turns, with the turns that
        support or contradict it and verified quotes (needs an LLM)."""
        result: CheckResult = await self._run(calls.steps("check", locals()))
        return result

    async def audit_memory(
        self, conversation: str, *, sample: int = AUDIT_SAMPLE, seed: int = 0
    ) -> MemoryAudit:
        """Judge a stratified sample of the conversation's facts and episode narratives
        against the turns their provenance cites (population-weighted shares with 95% CIs),
        and count pronoun and dated facts, near-duplicates and superseded facts (needs an
        LLM: the memory's, or the server's)."""
        result: MemoryAudit = await self._run(calls.steps("audit_memory", locals()))
        return result

    async def enqueue_build(self, conversation: str) -> Job:
        """Queue a background build of the conversation (or return the queued or running one);
        a worker of the store (``qemem serve``) runs it."""
        result: Job = await self._run(calls.steps("enqueue_build", locals()))
        return result

    async def job(self, job_id: str) -> Job:
        """A background job of the namespace (NotFoundError if there is none)."""
        result: Job = await self._run(calls.steps("job", locals()))
        return result

    async def jobs(
        self, status: str | None = None, *, limit: int = 50, before: str | None = None
    ) -> list[Job]:
        """The namespace's ``limit`` (1 to 500) newest background jobs (of ``status``, when
        given), newest first; ``before``: the last job id of the previous page."""
        result: list[Job] = await self._run(calls.steps("jobs", locals()))
        return result

    async def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job (a finished one is returned as it is)."""
        result: Job = await self._run(calls.steps("cancel_job", locals()))
        return result
