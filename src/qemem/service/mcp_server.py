"""The MCP server (``qemem mcp``): memory tools for an agent host, over ``Memory`` only.

Tools: ``remember`` (append messages), ``recall`` (evidence with ids and dates), ``ask`` (an
answer with cited, verified evidence), ``check`` (a statement's claims against the
conversation), ``list_conversations``, ``forget`` (a conversation), ``facts``,
``forget_message``, ``forget_fact`` and ``correct_fact``; across several conversations of the
user, ``recall_across``, ``context_across`` and ``ask_across``. ``running_jobs`` runs the
store's build jobs beside the server (``qemem mcp --auto-build``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from qemem import __version__
from qemem.answer import Answer
from qemem.answer.ask import Mode
from qemem.answer.wire import check_to_json
from qemem.errors import AuthError, NotFoundError, QememError, without_paths
from qemem.memory import Memory
from qemem.memory.api import MAX_CONTEXT_BUDGET
from qemem.memory.jobs import check_auto_build
from qemem.memory.worker import DEFAULT_LEASE_S, JobWorker
from qemem.models import (
    Conversation,
    Episode,
    PoolItem,
    Ref,
    SemanticFact,
    Turn,
    format_datetime,
)
from qemem.service.schemas import MAX_K, MAX_MESSAGES, MessageIn
from qemem.service.state import Tenants

T = TypeVar("T")
log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory of conversations. Store what is said with `remember`, look things up "
    "with `recall` (raw evidence) or `ask` (an answer with cited, verified quotes and resolved "
    "dates), and check a statement against what was said with `check`. Conversations are "
    "addressed by id; `list_conversations` shows them. For a question whose conversation you "
    "do not know, `recall_across`, `context_across` and `ask_across` take several."
)


def _record(record: Turn | Episode | SemanticFact) -> dict[str, Any]:
    if isinstance(record, Turn):
        return {
            "id": record.id,
            "date": format_datetime(record.timestamp),
            "speaker": record.speaker,
            "text": record.text,
        }
    if isinstance(record, Episode):
        return {
            "id": record.id,
            "date": format_datetime(record.timestamp),
            "title": record.title,
            "text": record.content,
            "turns": list(record.turn_ids),
        }
    return {"id": record.id, "text": record.content, "episodes": list(record.episode_ids)}


def _answer(answer: Answer) -> dict[str, Any]:
    """An answer as a tool returns it; across conversations each card lists the
    conversation and id of every source it cites, and each evidence turn its conversation."""
    across = answer.across is not None
    out = {
        "answer": answer.text,
        "mode": answer.mode,
        "cards": [
            {
                "claim": card.claim,
                "quote": card.quote,
                "verified_quote": card.verified,
                "time": card.rule_time.phrase if card.rule_time else card.time,
                "planned": card.planned,
                "grounded_in": card.grounded_in,
                "sources": card.sources,
            }
            | ({"cited": [_ref(ref) for ref in card.refs]} if across else {})
            for card in answer.cards
        ],
        "citations": answer.citations,
        "evidence": [_pooled(item) for item in answer.pool.turns]
        if answer.mode == "retrieval"
        else [],
    }
    return out


def _check_budget(budget_tokens: int) -> None:
    """Refuse a context budget out of range (the tools' error, before any retrieval)."""
    if not 1 <= budget_tokens <= MAX_CONTEXT_BUDGET:
        raise ToolError(f"budget_tokens must be from 1 to {MAX_CONTEXT_BUDGET}")


def _ask_mode(memory: Memory, mode: str | None) -> Mode:
    """The mode an ask tool runs (default ``full``); refused when it needs an LLM and the
    server has none."""
    chosen = cast(Mode, mode or "full")
    if chosen != "retrieval" and memory.llm is None:
        raise ToolError(
            f"mode {chosen!r} needs an LLM and this server has none: start qemem mcp with "
            "QEMEM_LLM set (or --llm), or ask with mode 'retrieval', which needs none"
        )
    return chosen


def _ref(ref: Ref) -> dict[str, Any]:
    return {"conversation": ref.conversation, "space": ref.space, "id": ref.id}


def _pooled(item: PoolItem) -> dict[str, Any]:
    """A pool item's record, naming its conversation in a pool across conversations."""
    named = {"conversation": item.conversation} if item.conversation is not None else {}
    return named | _record(item.record)


def create_mcp_server(memory: Memory, *, read_only: bool = False) -> MCPServer:
    """An MCP server over ``memory`` (its namespace); ``read_only`` refuses remember/forget."""
    server: MCPServer = MCPServer(name="qemem", instructions=INSTRUCTIONS, version=__version__)
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its DEBUG lines are not for hosts
    guard = _Guard(read_only, str(getattr(memory.store, "path", "")))
    _add_message_tools(server, memory, guard)
    _add_answer_tool(server, memory, guard)
    _add_across_tools(server, memory, guard)
    _add_conversation_tools(server, memory, guard)
    _add_edit_tools(server, memory, guard)
    return server


@contextmanager
def running_jobs(
    memory: Memory, auto_build: float | None, *, lease_s: float = DEFAULT_LEASE_S
) -> Iterator[JobWorker | None]:
    """With ``auto_build`` (seconds): ``memory`` schedules a build of each conversation that
    ``remember`` appends to (a ConfigError without an LLM), and a job worker runs the store's
    jobs, of every namespace, as ``qemem serve`` does, until the block ends (its running jobs
    are then queued again). Without it, nothing runs: yields None."""
    if auto_build is None:
        yield None
        return
    memory.auto_build = check_auto_build(auto_build, lambda: memory.llm)
    worker = JobWorker(memory, Tenants(memory, memory.job_attempts).memory, lease_s=lease_s)
    worker.start()
    try:
        yield worker
    finally:
        worker.close()


NOT_FOUND = {
    "conversation": "no conversation {name!r}: remember stores messages in a new one; "
    "list_conversations shows the stored ones",
    "message": "no message {name!r} in conversation {conversation!r}: recall shows the ids "
    "of its messages",
    "episode": "no episode {name!r} in conversation {conversation!r}",
    "fact": "no fact {name!r} in conversation {conversation!r}: the facts tool lists them "
    "with their ids",
    "job": "no job {name!r}",
}
"""What a tool says when a record is missing, in the tools' words (not the command line's)."""


class _Guard:
    """Runs a tool's call: qemem errors become tool errors in the tools' words, never naming a
    server path (the log keeps it); writes are refused when read-only."""

    def __init__(self, read_only: bool, store_path: str = "") -> None:
        self.read_only = read_only
        self.store_path = store_path

    def __call__(self, fn: Callable[[], T], writes: bool = False) -> T:
        try:
            if writes and self.read_only:
                raise AuthError(
                    "this API key is read-only: remember, forget and corrections are refused"
                )
            return fn()
        except NotFoundError as exc:
            if exc.kind not in NOT_FOUND:
                raise ToolError(without_paths(str(exc), [self.store_path])) from exc
            advice = NOT_FOUND[exc.kind].format(name=exc.name, conversation=exc.conversation)
            raise ToolError(advice) from exc
        except QememError as exc:
            message = without_paths(str(exc), [self.store_path])
            if message != str(exc):
                log.warning("tool error: %s", exc)
            raise ToolError(message) from exc


def _add_message_tools(server: MCPServer, memory: Memory, run: _Guard) -> None:
    """``remember`` (append messages) and ``recall`` (the raw evidence for a query)."""

    @server.tool(
        description="Store messages of a conversation in long-term memory so they can be "
        "recalled later. Call it with each new exchange worth keeping. Each message needs "
        "session_id (one sitting of the conversation), timestamp (ISO 8601), speaker and text; "
        "give each an id so that retrying never stores it twice, or pass an idempotency_key "
        "(a fresh UUID per batch) and the same key when retrying the batch. Returns the "
        "stored ids."
    )
    def remember(
        conversation: str,
        messages: Annotated[list[MessageIn], Field(max_length=MAX_MESSAGES)],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        records = [m.model_dump(exclude_none=True) for m in messages]
        done = run(
            lambda: memory.add_messages(conversation, records, idempotency_key=idempotency_key),
            writes=True,
        )
        return {"ids": done.ids, "turns_added": done.turns_added}

    @server.tool(
        description="Look up what was said: returns the most relevant stored memories (original "
        "turns with ids, dates and speakers; with pool=true also episode summaries and facts) "
        "for a query, without composing an answer. Use it to see the raw evidence yourself."
    )
    def recall(conversation: str, query: str, k: int = 8, pool: bool = True) -> dict[str, Any]:
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be from 1 to {MAX_K} (got {k})")
        if pool:
            found = run(lambda: memory.retrieve(conversation, query))
            return {
                "episodes": [_record(i.record) for i in found.episodes[:k]],
                "facts": [_record(i.record) for i in found.facts[:k]],
                "turns": [_record(i.record) for i in found.turns],
            }
        results = run(lambda: memory.search(conversation, query, k=k))
        return {"turns": [_record(r.record) for r in results]}

    @server.tool(
        description="Look up what was said across several conversations of the user (their "
        "threads, at most 50): returns the most relevant original turns of all of them, ranked "
        "together, each naming its conversation, for a query. Use it when you do not know "
        "which conversation holds the answer."
    )
    def recall_across(conversations: list[str], query: str, k: int = 8) -> dict[str, Any]:
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be from 1 to {MAX_K} (got {k})")
        results = run(lambda: memory.search_many(conversations, query, k=k))
        return {"turns": [{"conversation": r.conversation, **_record(r.record)} for r in results]}

    @server.tool(
        description="Get a ready-to-paste evidence block for a question, for you to answer from "
        "yourself: the relevant turns grouped by session with their dates and citable ids, "
        "relative times resolved in [brackets], episode summaries and facts when built, cut to "
        "budget_tokens. Makes no LLM call. Cite the ids in brackets when you answer."
    )
    def context(conversation: str, question: str, budget_tokens: int = 2000) -> dict[str, Any]:
        _check_budget(budget_tokens)
        block = run(lambda: memory.context(conversation, question, budget_tokens=budget_tokens))
        return {"text": block.text, "tokens": block.tokens, "ids": [i.ref.id for i in block.items]}


def _add_answer_tool(server: MCPServer, memory: Memory, run: _Guard) -> None:
    """``ask``: an answer with cited, verified evidence (the evidence only without an LLM);
    ``check``: the claims of a statement, labelled against the conversation."""

    @server.tool(
        description="Answer a question about a stored conversation, with the evidence: claims "
        "with verbatim quotes checked against the original turns, resolved dates and the cited "
        "turn ids. Prefer it over recall for questions about when, how often or what happened. "
        "mode 'retrieval' needs no LLM and returns the evidence only; the other modes need "
        "the server's LLM."
    )
    def ask(
        conversation: str,
        question: str,
        mode: Literal["full", "no-refine", "direct", "retrieval"] | None = None,
    ) -> dict[str, Any]:
        chosen = _ask_mode(memory, mode)
        return _answer(run(lambda: memory.ask(conversation, question, mode=chosen)))

    @server.tool(
        description="Check an answer or statement (for example one you wrote, or a fact you "
        "extracted) against what was actually said: returns its claims, each labelled "
        "supported, unsupported, contradicted or unverifiable, with the turn ids that support "
        "or contradict it and quotes verified against those turns. Needs the server's LLM."
    )
    def check(conversation: str, text: str) -> dict[str, Any]:
        if memory.llm is None:
            raise ToolError(
                "check needs an LLM and this server has none: start qemem mcp with QEMEM_LLM "
                "set (or --llm)"
            )
        return check_to_json(run(lambda: memory.check(conversation, text)))


def _add_across_tools(server: MCPServer, memory: Memory, run: _Guard) -> None:
    """``context_across`` and ``ask_across``: ``context`` and ``ask`` over several
    conversations of the user ranked together (``recall_across`` is their search)."""

    @server.tool(
        description="Get one ready-to-paste evidence block for a question from several "
        "conversations of the user (their threads, at most 50), ranked together: turns grouped "
        "by conversation and session with dates, each id written conversation/id (e.g. "
        "conv-26/D1:3), relative times resolved, cut to budget_tokens. Makes no LLM call. Use "
        "it when you do not know which conversation holds the answer; cite the ids in brackets."
    )
    def context_across(
        conversations: list[str], question: str, budget_tokens: int = 2000
    ) -> dict[str, Any]:
        _check_budget(budget_tokens)
        block = run(
            lambda: memory.context_many(conversations, question, budget_tokens=budget_tokens)
        )
        return {
            "text": block.text,
            "tokens": block.tokens,
            "ids": [_ref(item.ref) for item in block.items],
        }

    @server.tool(
        description="Answer a question from several conversations of the user (their threads, "
        "at most 50) ranked together, with the evidence: claims with verbatim quotes checked "
        "against the original turns of the conversation each cites, resolved dates, and for "
        "each claim the conversation and id of its sources. mode 'retrieval' needs no LLM and "
        "returns the evidence only; the other modes need the server's LLM."
    )
    def ask_across(
        conversations: list[str],
        question: str,
        mode: Literal["full", "no-refine", "direct", "retrieval"] | None = None,
    ) -> dict[str, Any]:
        chosen = _ask_mode(memory, mode)
        return _answer(run(lambda: memory.ask_many(conversations, question, mode=chosen)))


def _add_conversation_tools(server: MCPServer, memory: Memory, run: _Guard) -> None:
    """``list_conversations`` and ``forget`` (delete one conversation)."""

    @server.tool(
        description="List the stored conversations: ids, speakers, number of sessions and the "
        "first and last session dates. Call it first to find the conversation id to use."
    )
    def list_conversations() -> dict[str, Any]:
        return {"conversations": [_conversation(c) for c in run(memory.conversations)]}

    @server.tool(
        description="Permanently delete a conversation and everything derived from it. Only "
        "when the user asks to forget it; this cannot be undone."
    )
    def forget(conversation: str) -> dict[str, Any]:
        return {"deleted": run(lambda: memory.delete(conversation), writes=True)}


def _add_edit_tools(server: MCPServer, memory: Memory, run: _Guard) -> None:
    """``facts`` (what is known, now or on a date), ``forget_message``, ``forget_fact`` and
    ``correct_fact``."""

    @server.tool(
        description="List what is known about the people of a conversation: its current "
        "facts (a fact a later message updated is left out), or with as_of (an ISO date) "
        "those known on that date. Each fact has its id and the episodes it came from."
    )
    def facts(conversation: str, as_of: str | None = None) -> dict[str, Any]:
        found = run(lambda: memory.facts(conversation, as_of=as_of))
        return {"facts": [_record(f) for f in found]}

    @server.tool(
        description="Forget one message of a conversation: with redact=false (default) it is "
        "deleted; with redact=true its text is replaced by a marker and its place kept. The "
        "episodes and facts derived from it go too. Only when the user asks; it cannot be "
        "undone."
    )
    def forget_message(conversation: str, message: str, redact: bool = False) -> dict[str, Any]:
        forget = memory.redact_message if redact else memory.delete_message
        return dataclasses.asdict(run(lambda: forget(conversation, message), writes=True))

    @server.tool(
        description="Forget one fact of a conversation (by its id, from the facts tool). Only "
        "when the user says it is wrong or asks to forget it."
    )
    def forget_fact(conversation: str, fact: str) -> dict[str, Any]:
        return dataclasses.asdict(run(lambda: memory.delete_fact(conversation, fact), writes=True))

    @server.tool(
        description="Correct one fact of a conversation when the user says it is wrong: the "
        "fact (by id) is replaced by the corrected text, written with names, no pronouns; "
        "turns may cite the ids of the messages that show it. Returns the new fact's id."
    )
    def correct_fact(
        conversation: str, fact: str, content: str, turns: list[str] | None = None
    ) -> dict[str, Any]:
        done = run(
            lambda: memory.correct_fact(conversation, fact, content, turns=turns or ()),
            writes=True,
        )
        return {"old": done.old, "new": done.new, "turns": list(done.turn_ids)}


def _conversation(conversation: Conversation) -> dict[str, Any]:
    span = conversation.span
    return {
        "id": conversation.id,
        "speakers": list(conversation.speakers),
        "sessions": len(conversation.sessions),
        "first": format_datetime(span[0]) if span else None,
        "last": format_datetime(span[1]) if span else None,
    }
