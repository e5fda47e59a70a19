"""The bodies of the operations' HTTP requests and responses (records travel as qemem's own
dataclasses); the operation table names them, the service and the remote clients share them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field

from qemem.answer.ask import Mode
from qemem.answer.memory_audit import MAX_SAMPLE
from qemem.ingest.additions import MAX_MESSAGE_CHARS
from qemem.memory import AUDIT_SAMPLE, SearchResult
from qemem.memory.api import (
    CONTEXT_BUDGET,
    MAX_CHECK_CHARS,
    MAX_CONTEXT_BUDGET,
    MAX_FACT_CHARS,
    MAX_QUESTION_CHARS,
    ContextMode,
)
from qemem.memory.items import MAX_ITEM_LIMIT, MAX_ITEMS
from qemem.memory.jobs import MAX_JOBS_PAGE
from qemem.memory.searching import MAX_CONVERSATIONS, MAX_SEARCH_QUERIES
from qemem.models import Pool, Ref, Role, Session, Space
from qemem.store.jobs import JobStatus

MAX_K = 1000
"""The most search results one request may ask for (HTTP and MCP alike); ``k: null`` (every
ranked record) is cut to it too."""
MAX_ID_CHARS = 1000
"""The longest id (message, session, conversation, turn cited) and speaker a request may send."""
MAX_MESSAGES = 1000
"""The most messages one append may carry (the body limit, 1 MB by default, applies too)."""
MAX_REFS = 1000
"""The most records one request may name (records to exclude, turns a correction cites)."""

Id = Annotated[str, Field(max_length=MAX_ID_CHARS)]
Query = Annotated[str, Field(max_length=MAX_QUESTION_CHARS)]
Queries = (
    Annotated[str, Field(max_length=MAX_QUESTION_CHARS)]
    | Annotated[list[Query], Field(max_length=MAX_SEARCH_QUERIES)]
)
Conversations = Annotated[list[Id], Field(max_length=MAX_CONVERSATIONS)]
K = Annotated[
    int | None,
    Field(
        ge=1,
        le=MAX_K,
        description=f"results (1 to {MAX_K}); null: every ranked record, at most {MAX_K}",
    ),
]


class MessageIn(BaseModel):
    """One message to append; ``id`` makes retries safe (a stored id is acknowledged again)."""

    session_id: Id = Field(description="the sitting; sessions are ordered by first appearance")
    timestamp: str = Field(
        max_length=100,
        description="ISO 8601 local time, with its UTC offset when known, e.g. "
        "2024-03-14T19:15:00+05:30, years 1900 to 2200; a conversation's timestamps all have "
        "an offset or none",
    )
    speaker: Id
    text: str = Field(max_length=MAX_MESSAGE_CHARS)
    id: Id | None = Field(default=None, description="stable message id (recommended)")
    image_caption: str | None = Field(default=None, max_length=MAX_MESSAGE_CHARS)
    role: Role | None = Field(
        default=None,
        description="who the message is from in a conversation with an assistant: user, "
        "assistant or other (leave it out for a conversation between people)",
    )


class MessagesIn(BaseModel):
    messages: list[MessageIn] = Field(max_length=MAX_MESSAGES)


class ItemsIn(BaseModel):
    """History items to append, each kept exactly, and the message each is stored as."""

    items: list[dict[str, Any]] = Field(
        max_length=MAX_ITEMS,
        description="an agent framework's history items (JSON objects), kept exactly as sent",
    )
    messages: list[MessageIn | None] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="for each item (row-aligned), the message it is also stored as (a user's "
        "or assistant's text), or null (a tool call, say); leave it out when none is",
    )


class ItemsQuery(BaseModel):
    """The parameters of listing history items."""

    limit: int | None = Field(
        default=None,
        ge=0,
        le=MAX_ITEM_LIMIT,
        description="only the last items, this many (all when left out)",
    )


class ItemsCleared(BaseModel):
    """How many history items a clear removed."""

    items: int


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
    query: Queries = Field(description=f"one query, or up to {MAX_SEARCH_QUERIES} fused together")
    k: K = 10
    pool: bool = Field(default=False, description="return the evidence pool of all spaces")
    space: Space = Field(default="turn", description="space searched when pool is false")
    exclude: list[Ref] = Field(
        default_factory=list,
        max_length=MAX_REFS,
        description="with pool: records never to return",
    )


class SearchOut(BaseModel):
    """Search hits (``pool`` false) or the multi-granular evidence pool (``pool`` true)."""

    results: list[SearchResult] | None = None
    pool: Pool | None = None


class SearchManyIn(BaseModel):
    conversations: Conversations = Field(
        description="conversations of the namespace to search together (duplicates ignored)"
    )
    query: Queries = Field(description=f"one query, or up to {MAX_SEARCH_QUERIES} fused together")
    k: K = 10
    space: Space = Field(default="turn", description="space searched")


class SearchManyOut(BaseModel):
    """Hits across the conversations, ranked together; each names its conversation."""

    results: list[SearchResult]


class AskIn(BaseModel):
    question: Query
    mode: Mode = Field(default="full", description="retrieval needs no LLM; the others do")


class ContextIn(BaseModel):
    question: Query
    budget_tokens: int = Field(
        default=CONTEXT_BUDGET, ge=1, le=MAX_CONTEXT_BUDGET, description="tokens of the block"
    )
    mode: ContextMode = Field(default="rule", description="llm: the LLM planner (needs an LLM)")


class AskManyIn(AskIn):
    conversations: Conversations = Field(
        description="conversations of the namespace to answer over together (duplicates ignored)"
    )


class ContextManyIn(ContextIn):
    conversations: Conversations = Field(
        description="conversations of the namespace to draw the block from (duplicates ignored)"
    )


class CheckIn(BaseModel):
    text: str = Field(
        max_length=MAX_CHECK_CHARS, description="the answer or statement whose claims to check"
    )


class CorrectIn(BaseModel):
    content: str = Field(
        max_length=MAX_FACT_CHARS, description="the fact as it should read (names, no pronouns)"
    )
    turns: list[Id] = Field(
        default_factory=list, max_length=MAX_REFS, description="turn ids that show it"
    )


class AuditIn(BaseModel):
    sample: int = Field(
        default=AUDIT_SAMPLE, ge=1, le=MAX_SAMPLE, description="facts and episodes to judge"
    )
    seed: int = Field(
        default=0, ge=0, le=2**63 - 1, description="the same seed draws the same sample"
    )


class FactsQuery(BaseModel):
    """The parameters of listing facts."""

    as_of: str | None = Field(
        default=None,
        max_length=100,
        description="ISO 8601 date or date-time (years 1900 to 2200): the facts known then",
    )
    include_superseded: bool = Field(
        default=False, description="also the facts a later one replaced"
    )


class JobsQuery(BaseModel):
    """The parameters of listing jobs."""

    status: JobStatus | None = None
    limit: int = Field(default=50, ge=1, le=MAX_JOBS_PAGE, description="jobs per page")
    cursor: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        description="the page after this one: a response's X-Next-Cursor",
    )
