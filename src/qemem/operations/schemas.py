"""The bodies of the operations' HTTP requests and responses (records travel as qemem's own
dataclasses); the operation table names them, the service and the remote clients share them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from qemem.answer.ask import Mode
from qemem.answer.memory_audit import MAX_SAMPLE
from qemem.memory import AUDIT_SAMPLE, SearchResult
from qemem.memory.api import CONTEXT_BUDGET, MAX_CONTEXT_BUDGET, ContextMode
from qemem.memory.jobs import MAX_JOBS_PAGE
from qemem.models import Pool, Ref, Session, Space
from qemem.store.jobs import JobStatus

MAX_K = 1000
"""The most search results one request may ask for (HTTP and MCP alike)."""


class MessageIn(BaseModel):
    """One message to append; ``id`` makes retries safe (a stored id is acknowledged again)."""

    session_id: str = Field(description="the sitting; sessions are ordered by first appearance")
    timestamp: str = Field(
        description="ISO 8601 local time, with its UTC offset when known, e.g. "
        "2024-03-14T19:15:00+05:30; a conversation's timestamps all have an offset or none"
    )
    speaker: str
    text: str
    id: str | None = Field(default=None, description="stable message id (recommended)")
    image_caption: str | None = None


class MessagesIn(BaseModel):
    messages: list[MessageIn]


class Appended(BaseModel):
    """The stored id of every message, in request order, and what was new."""

    ids: list[str]
    turns_added: int
    sessions_added: int


class BuildState(BaseModel):
    """Which sessions have episodes and facts built, and the running build job if any."""

    built_sessions: list[int]
    unbuilt_sessions: list[int]
    job: str | None = None


class ConversationOut(BaseModel):
    id: str
    namespace: str
    created_at: datetime | None = Field(
        description="when this conversation was created (UTC; set for every stored one): one "
        "deleted and created again under the same id is a new conversation, with a new "
        "created_at and ids counted anew, so a client can tell a stale reference"
    )
    speakers: list[str]
    sessions: list[Session]
    turns: int
    episodes: int
    facts: int
    build: BuildState


class SearchIn(BaseModel):
    query: str | list[str] = Field(description="one query, or several fused together")
    k: int | None = Field(default=10, ge=1, le=MAX_K, description="results; null ranks all")
    pool: bool = Field(default=False, description="return the evidence pool of all spaces")
    space: Space = Field(default="turn", description="space searched when pool is false")
    exclude: list[Ref] = Field(
        default_factory=list, description="with pool: records never to return"
    )


class SearchOut(BaseModel):
    """Search hits (``pool`` false) or the multi-granular evidence pool (``pool`` true)."""

    results: list[SearchResult] | None = None
    pool: Pool | None = None


class SearchManyIn(BaseModel):
    conversations: list[str] = Field(
        description="conversations of the namespace to search together (duplicates ignored)"
    )
    query: str | list[str] = Field(description="one query, or several fused together")
    k: int | None = Field(default=10, ge=1, le=MAX_K, description="results; null ranks all")
    space: Space = Field(default="turn", description="space searched")


class SearchManyOut(BaseModel):
    """Hits across the conversations, ranked together; each names its conversation."""

    results: list[SearchResult]


class AskIn(BaseModel):
    question: str
    mode: Mode = Field(default="full", description="retrieval needs no LLM; the others do")


class ContextIn(BaseModel):
    question: str
    budget_tokens: int = Field(
        default=CONTEXT_BUDGET, ge=1, le=MAX_CONTEXT_BUDGET, description="tokens of the block"
    )
    mode: ContextMode = Field(default="rule", description="llm: the LLM planner (needs an LLM)")


class AskManyIn(AskIn):
    conversations: list[str] = Field(
        description="conversations of the namespace to answer over together (duplicates ignored)"
    )


class ContextManyIn(ContextIn):
    conversations: list[str] = Field(
        description="conversations of the namespace to draw the block from (duplicates ignored)"
    )


class CheckIn(BaseModel):
    text: str = Field(description="the answer or statement whose claims to check")


class CorrectIn(BaseModel):
    content: str = Field(description="the fact as it should read (names, no pronouns)")
    turns: list[str] = Field(default_factory=list, description="turn ids that show it")


class AuditIn(BaseModel):
    sample: int = Field(
        default=AUDIT_SAMPLE, ge=1, le=MAX_SAMPLE, description="facts and episodes to judge"
    )
    seed: int = Field(default=0, description="the same seed draws the same sample")


class FactsQuery(BaseModel):
    """The parameters of listing facts."""

    as_of: str | None = Field(
        default=None, description="ISO 8601 date or date-time: the facts known then"
    )
    include_superseded: bool = Field(
        default=False, description="also the facts a later one replaced"
    )


class JobsQuery(BaseModel):
    """The parameters of listing jobs."""

    status: JobStatus | None = None
    limit: int = Field(default=50, ge=1, le=MAX_JOBS_PAGE, description="jobs per page")
    cursor: str | None = Field(
        default=None, description="the page after this one: a response's X-Next-Cursor"
    )
