"""The API every memory offers, embedded (``Memory``) or served (``RemoteMemory``): the
``MemoryAPI`` protocol and the small records its methods return."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from qemem.answer import Answer
from qemem.answer.ask import Mode
from qemem.answer.check import CheckResult
from qemem.answer.memory_audit import MemoryAudit
from qemem.build import BuildReport
from qemem.errors import InputError
from qemem.evidence.block import Context
from qemem.ingest.additions import IngestReport
from qemem.ingest.reader import Format
from qemem.memory.auditing import AUDIT_SAMPLE
from qemem.memory.jobs import Job
from qemem.models import (
    Conversation,
    ConversationInput,
    Episode,
    Hit,
    Item,
    Pool,
    Ref,
    SemanticFact,
    Space,
    Supersession,
    Turn,
    check_text,
)

Progress = Callable[[int, int], None]
"""Called with (done, total) as long operations advance."""

MAX_QUESTION_CHARS = 2000
"""Longer questions and search queries are refused."""


MAX_CHECK_CHARS = 20000
"""Longer statements to check are refused."""


def check_query(text: str, what: str = "question", limit: int = MAX_QUESTION_CHARS) -> str:
    """``text`` when it is a usable question or query (at most ``limit`` characters), else
    InputError saying why."""
    if not text.strip():
        raise InputError(f"the {what} is empty: say what to look for")
    check_text(text, what)
    if len(text) > limit:
        raise InputError(
            f"the {what} has {len(text)} characters, more than the {limit} allowed: shorten it"
        )
    return text


ContextMode = Literal["rule", "llm"]
"""How ``context`` plans its retrieval: the rule plan (no LLM call) or the LLM planner."""

CONTEXT_BUDGET = 2000
"""Tokens of a context block unless the caller says otherwise."""

MAX_CONTEXT_BUDGET = 200_000
"""Larger context budgets are refused."""

IDEMPOTENCY_HEADER = "Idempotency-Key"
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")


def check_idempotency_key(key: str) -> str:
    """``key`` when it is a usable idempotency key (1 to 255 printable ASCII characters),
    else InputError saying why."""
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        odd = any(not " " <= c <= "~" for c in key)
        raise InputError(
            f"the {IDEMPOTENCY_HEADER} must be 1 to 255 printable ASCII characters (got "
            f"{len(key)} characters{', some not printable ASCII' if odd else ''}): send a "
            "fresh random key per batch, such as a UUID"
        )
    return key


@dataclass(frozen=True)
class SearchResult:
    """A hit with the record it points to and the conversation it belongs to (by default the
    record's ``conversation_id``): record ids repeat across conversations, the pair does not."""

    hit: Hit
    record: Turn | Episode | SemanticFact
    conversation: str = ""

    def __post_init__(self) -> None:
        if not self.conversation:
            object.__setattr__(self, "conversation", self.record.conversation_id)


@dataclass(frozen=True)
class Appended:
    """What ``add_messages`` did: the stored id of every message (input order) and what was new."""

    ids: list[str] = field(default_factory=list)
    turns_added: int = 0
    sessions_added: int = 0


MAX_FACT_CHARS = 2000
"""Longer corrected facts are refused."""


@dataclass(frozen=True)
class Forgotten:
    """What forgetting a message or a fact changed: the messages deleted or redacted, the
    episodes citing them, the facts removed (left without provenance, or deleted; a fact
    written by hand, a correction, is only removed by deleting it), the facts that lost an
    episode but stay (``unlinked``), the supersessions that went (by the id of the fact they
    replaced), the facts current again because the fact that replaced them went
    (``restored``: deleting a correction restores the fact it corrected; deleting a corrected
    fact removes its supersession and keeps the correction), and the session a deleted
    message left empty (removed, so that a session dated wrongly can be replaced; its number
    is not used again), and the history items the message was stored as (``add_items``)."""

    conversation: str
    deleted: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    unlinked: list[str] = field(default_factory=list)
    supersessions: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)
    items: list[str] = field(default_factory=list)


@runtime_checkable
class MemoryAPI(Protocol):
    """What an agent can do with a memory, whether it is embedded or behind ``qemem serve``.

    ``Memory`` and ``RemoteMemory`` both implement it with the same return types and the same
    ``QememError`` subclasses, and one contract test suite runs against both. A method added
    to ``Memory`` for agents joins this protocol, the HTTP API and the remote client.
    """

    def close(self) -> None:
        """Release the store (or the HTTP connection)."""
        ...

    def ingest(
        self,
        source: str | Path | Sequence[ConversationInput],
        *,
        fmt: Format = "auto",
        progress: Progress | None = None,
    ) -> IngestReport:
        """Add what the memory lacks of a file or of parsed conversations (idempotent)."""
        ...

    def add_messages(
        self,
        conversation: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Appended:
        """Append generic-format messages to a conversation (retry-safe by id, or by
        ``idempotency_key`` for messages without ids)."""
        ...

    def conversations(self) -> list[Conversation]:
        """The conversations of the namespace."""
        ...

    def conversation(self, conversation: str) -> Conversation:
        """One conversation (NotFoundError if absent)."""
        ...

    def delete(self, conversation: str) -> bool:
        """Delete a conversation and all derived from it; False if it was absent."""
        ...

    def episodes(self, conversation: str, ids: Sequence[str] | None = None) -> list[Episode]:
        """The conversation's episodes in order (only those of ``ids``)."""
        ...

    def facts(
        self,
        conversation: str,
        ids: Sequence[str] | None = None,
        *,
        as_of: date | datetime | str | None = None,
        include_superseded: bool = False,
    ) -> list[SemanticFact]:
        """The current facts (those known ``as_of`` a date; the superseded ones too with
        ``include_superseded``); with ``ids`` exactly those."""
        ...

    def supersessions(self, conversation: str) -> list[Supersession]:
        """Which facts replace which, with the turns that show it."""
        ...

    def delete_message(self, conversation: str, message: str) -> Forgotten:
        """Delete one message and the episodes and facts derived only from it."""
        ...

    def redact_message(self, conversation: str, message: str) -> Forgotten:
        """Replace one message's text by a marker (id and place kept), removing what was
        derived from it."""
        ...

    def delete_fact(self, conversation: str, fact: str) -> Forgotten:
        """Delete one fact: a fact it replaced (a correction's corrected fact) is current
        again; a correction of it stays current."""
        ...

    def correct_fact(
        self, conversation: str, fact: str, content: str, *, turns: Sequence[str] = ()
    ) -> Supersession:
        """Replace a current fact by ``content`` (a manual supersession citing ``turns``)."""
        ...

    def add_items(
        self,
        conversation: str,
        items: Sequence[Mapping[str, Any]],
        *,
        messages: Sequence[Mapping[str, Any] | None] = (),
    ) -> list[Item]:
        """Append an agent framework's history items, kept exactly (JSON objects), each also
        stored as the message ``messages`` gives for it (row-aligned; None: no message)."""
        ...

    def items(self, conversation: str, limit: int | None = None) -> list[Item]:
        """The conversation's history items in order (its last ``limit`` ones)."""
        ...

    def pop_item(self, conversation: str) -> Item | None:
        """Remove and return the last history item, forgetting the message it was stored as."""
        ...

    def clear_items(self, conversation: str) -> int:
        """Remove every history item (the messages stay); how many went."""
        ...

    def search(
        self,
        conversation: str,
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """Hybrid search (dense + BM25, RRF k=60) of one space."""
        ...

    def search_many(
        self,
        conversations: Sequence[str],
        query: str | Sequence[str],
        *,
        k: int | None = 10,
        space: Space = "turn",
    ) -> list[SearchResult]:
        """Hybrid search of one space across several conversations of the namespace, ranked
        together; each result names its conversation."""
        ...

    def retrieve(self, conversation: str, question: str, *, exclude: Collection[Ref] = ()) -> Pool:
        """The multi-granular evidence pool of the question's rule plan, less ``exclude``."""
        ...

    def build(
        self, conversation: str | None = None, *, progress: Progress | None = None
    ) -> list[BuildReport]:
        """Build the episodes and facts the memory lacks (needs an LLM)."""
        ...

    def context(
        self,
        conversation: str,
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """A ready-to-paste evidence block cut to ``budget_tokens`` (no LLM call unless
        ``mode`` is "llm": the LLM planner)."""
        ...

    def context_many(
        self,
        conversations: Sequence[str],
        question: str,
        *,
        budget_tokens: int = CONTEXT_BUDGET,
        mode: ContextMode = "rule",
    ) -> Context:
        """One evidence block across several conversations of the namespace, ranked
        together; each item's ``ref`` names its conversation."""
        ...

    def ask_many(
        self, conversations: Sequence[str], question: str, *, mode: Mode = "full"
    ) -> Answer:
        """An answer across several conversations of the namespace, ranked together; its
        cards and pool name each record's conversation (``Answer.across``)."""
        ...

    def ask(self, conversation: str, question: str, *, mode: Mode = "full") -> Answer:
        """Answer a question with its evidence record (``Answer.evidence``)."""
        ...

    def check(self, conversation: str, text: str) -> CheckResult:
        """Label each claim of ``text`` against the conversation's turns, with the turns that
        support or contradict it and verified quotes (needs an LLM)."""
        ...

    def audit_memory(
        self, conversation: str, *, sample: int = AUDIT_SAMPLE, seed: int = 0
    ) -> MemoryAudit:
        """Judge a stratified sample of the conversation's facts and episode narratives
        against the turns their provenance cites (population-weighted shares with 95% CIs),
        and count pronoun and dated facts, near-duplicates and superseded facts (needs an
        LLM: the memory's, or the server's)."""
        ...

    def enqueue_build(self, conversation: str) -> Job:
        """Queue a background build of the conversation (or return the queued or running one);
        a worker of the store (``qemem serve``) runs it."""
        ...

    def job(self, job_id: str) -> Job:
        """A background job of the namespace (NotFoundError if there is none)."""
        ...

    def jobs(
        self, status: str | None = None, *, limit: int = 50, before: str | None = None
    ) -> list[Job]:
        """The namespace's ``limit`` (1 to 500) newest background jobs (of ``status``, when
        given), newest first; ``before``: the last job id of the previous page."""
        ...

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job (a finished one is returned as it is)."""
        ...
