"""The ``MemoryAPI`` operations of ``RemoteMemory``: each one call of ``calls.steps``.

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
    Item,
    Pool,
    Ref,
    SemanticFact,
    Space,
    Supersession,
)
from qemem.remote import calls

T = TypeVar("T")


class RemoteMethods(ABC):
    """What ``RemoteMemory`` does for each operation: its ``_run`` drives the steps."""

    @abstractmethod
    def _run(self, steps: calls.Steps[T]) -> T:
        """Drive an operation's steps (:mod:`qemem.remote.calls`) to its result."""

    def ingest(
        self,
        source: str | Path | Sequence[ConversationInput],
        *,
        fmt: Format = "auto",
        progress: Progress | None = None,
    ) -> IngestReport:
        """As ``MemoryAPI.ingest``."""
        result: IngestReport = self._run(calls.steps("ingest", locals()))
        return result

    def add_messages(
        self,
        conversation: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Appended:
        """As ``MemoryAPI.add_messages``."""
        result: Appended = self._run(calls.steps("add_messages", locals()))
        return result

    def conversations(self) -> list[Conversation]:
        """As ``MemoryAPI.conversations``."""
        result: list[Conversation] = self._run(calls.steps("conversations", locals()))
        return result

    def conversation(self, conversation: str) -> Conversation:
        """As ``MemoryAPI.conversation``."""
        result: Conversation = self._run(calls.steps("conversation", locals()))
        return result

    def delete(self, conversation: str) -> bool:
        """As ``MemoryAPI.delete``."""
        result: bool = self._run(calls.steps("delete", locals()))
        return result

    def episodes(self, conversation: str, ids: Sequence[str] | None = None) -> list[Episode]:
        """As ``MemoryAPI.episodes``."""
        result: list[Episode] = self._run(calls.steps("episodes", locals()))
        return result

    def facts(
        self,
        conversation: str,
        ids: Sequence[str] | None = None,
        *,
        as_of: date | datetime | str | None = None,
        include_superseded: bool = False,
    ) -> list[SemanticFact]:
        """As ``MemoryAPI.facts``."""
        result: list[SemanticFact] = self._run(calls.steps("facts", locals()))
        return result

    def supersessions(self, conversation: str) -> list[Supersession]:
        """As ``MemoryAPI.supersessions``."""
        result: list[Supersession] = self._run(calls.steps("supersessions", locals()))
        return result

    def delete_message(self, conversation: str, message: str) -> Forgotten:
        """As ``MemoryAPI.delete_message``."""
        result: Forgotten = self._run(calls.steps("delete_message", locals()))
        return result

    def redact_message(self, conversation: str, message: str) -> Forgotten:
        """As ``MemoryAPI.redact_message``."""
        result: Forgotten = self._run(calls.steps("redact_message", locals()))
        return result

    def delete_fact(self, conversation: str, fact: str) -> Forgotten:
        """As ``MemoryAPI.delete_fact``."""
        result: Forgotten = self._run(calls.steps("delete_fact", locals()))
        return result

    def correct_fact(
        self, conversation: str, fact: str, content: str, *, turns: Sequence[str] = ()
    ) -> Supersession:
        """As ``MemoryAPI.correct_fact``."""
        result: Supersession = self._run(calls.steps("correct_fact", locals()))
        return result

    def add_items(
        self,
        conversation: str,
        items: Sequence[Mapping[str, Any]],
        *,
        messages: Sequence[Mapping[str, Any] | None] = (),
    ) -> list[Item]:
        """As ``MemoryAPI.add_items``."""
        result: list[Item] = self._run(calls.steps("add_items", locals()))
        return result

    def items(self, conversation: str, limit: int | None = None) -> list[Item]:
        """As ``MemoryAPI.items``."""
        result: list[Item] = self._run(calls.steps("items", locals()))
        return result

    def pop_item(self, conversation: str) -> Item | None:
        """As ``MemoryAPI.pop_item``."""
        result: Item | None = self._run(calls.steps("pop_item", locals()))
        return result

    def clear_items(self, conversation: str) -> int:
        """As ``MemoryAPI.clear_items``."""
        result: int = self._run(calls.steps("clear_items", locals()))
        return result

    def search(
        self,
        conversation: str,
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """As ``MemoryAPI.search``."""
        result: list[SearchResult] = self._run(calls.steps("search", locals()))
        return result

    def search_many(
        self,
        conversations: Sequence[str],
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """As ``MemoryAPI.search_many``."""
        result: list[SearchResult] = self._run(calls.steps("search_many", locals()))
        return result

    def retrieve(self, conversation: str, question: str, *, exclude: Collection[Ref] = ()) -> Pool:
        """As ``MemoryAPI.retrieve``."""
        result: Pool = self._run(calls.steps("retrieve", locals()))
        return result

    def build(
        self, conversation: str | None = None, *, progress: Progress | None = None
    ) -> list[BuildReport]:
        """As ``MemoryAPI.build``."""
        result: list[BuildReport] = self._run(calls.steps("build", locals()))
        return result

    def context(
        self,
        conversation: str,
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """As ``MemoryAPI.context``."""
        result: Context = self._run(calls.steps("context", locals()))
        return result

    def context_many(
        self,
        conversations: Sequence[str],
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """As ``MemoryAPI.context_many``."""
        result: Context = self._run(calls.steps("context_many", locals()))
        return result

    def ask_many(
        self, conversations: Sequence[str], question: str, *, mode: Mode = "full"
    ) -> Answer:
        """As ``MemoryAPI.ask_many``."""
        result: Answer = self._run(calls.steps("ask_many", locals()))
        return result

    def ask(self, conversation: str, question: str, *, mode: Mode = "full") -> Answer:
        """As ``MemoryAPI.ask``."""
        result: Answer = self._run(calls.steps("ask", locals()))
        return result

    def check(self, conversation: str, text: str) -> CheckResult:
        """As ``MemoryAPI.check``."""
        result: CheckResult = self._run(calls.steps("check", locals()))
        return result

    def audit_memory(
        self, conversation: str, *, sample: int = AUDIT_SAMPLE, seed: int = 0
    ) -> MemoryAudit:
        """As ``MemoryAPI.audit_memory``."""
        result: MemoryAudit = self._run(calls.steps("audit_memory", locals()))
        return result

    def enqueue_build(self, conversation: str) -> Job:
        """As ``MemoryAPI.enqueue_build``."""
        result: Job = self._run(calls.steps("enqueue_build", locals()))
        return result

    def job(self, job_id: str) -> Job:
        """As ``MemoryAPI.job``."""
        result: Job = self._run(calls.steps("job", locals()))
        return result

    def jobs(
        self, status: str | None = None, *, limit: int = 50, before: str | None = None
    ) -> list[Job]:
        """As ``MemoryAPI.jobs``."""
        result: list[Job] = self._run(calls.steps("jobs", locals()))
        return result

    def cancel_job(self, job_id: str) -> Job:
        """As ``MemoryAPI.cancel_job``."""
        result: Job = self._run(calls.steps("cancel_job", locals()))
        return result
