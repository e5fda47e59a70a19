"""The MCP server (``qemem mcp``): memory tools for an agent host, over ``Memory`` only.

The tools are those of the operation table (:mod:`qemem.operations`), with its names,
descriptions and scopes: ``remember`` (append messages), ``recall`` (evidence with ids and
dates), ``ask`` (an answer with cited, verified evidence), ``check`` (a statement's claims
against the conversation), ``list_conversations``, ``forget`` (a conversation), ``facts``,
``forget_message``, ``forget_fact`` and ``correct_fact``; across several conversations of the
user, ``recall_across``, ``context_across`` and ``ask_across``. A tool whose arguments and
answer are its operation's is made from the ``MemoryAPI`` method (``_generic_tool``); the
others are written here. Each call acts for a ``Caller`` found from its context: on stdio
(``create_mcp_server``) one namespace's ``Memory``; inside ``qemem serve``
(:mod:`qemem.service.mcp_http`) that of the request's API key. ``running_jobs`` runs the
store's build jobs beside the stdio server (``qemem mcp --auto-build``).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, cast, get_type_hints

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, TypeAdapter

from qemem import __version__
from qemem.answer.ask import Mode
from qemem.answer.wire import answer_brief, check_to_json, record_brief
from qemem.errors import NotFoundError, QememError, without_paths
from qemem.memory import Memory, MemoryAPI
from qemem.memory.api import MAX_CONTEXT_BUDGET
from qemem.memory.jobs import check_auto_build
from qemem.memory.worker import DEFAULT_LEASE_S, JobWorker
from qemem.models import (
    Conversation,
    Ref,
    format_datetime,
)
from qemem.operations import Operation, Tool, operation, tools
from qemem.operations.schemas import MAX_K, MAX_MESSAGES, MessageIn
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
START_WITH_LLM = "start qemem mcp with QEMEM_LLM set (or --llm)"
"""How to give the server an LLM, as its tools say it."""


def _check_budget(budget_tokens: int) -> None:
    """Refuse a context budget out of range (the tools' error, before any retrieval)."""
    if not 1 <= budget_tokens <= MAX_CONTEXT_BUDGET:
        raise ToolError(f"budget_tokens must be from 1 to {MAX_CONTEXT_BUDGET}")


def _ask_mode(memory: Memory, name: str, mode: str | None) -> Mode:
    """The mode an ask tool (of operation ``name``) runs (default ``full``); refused when it
    needs an LLM and the server has none."""
    chosen = cast(Mode, mode or "full")
    _need_llm(memory, operation(name), {"mode": chosen})
    return chosen


def _check_k(k: int) -> None:
    """Refuse a number of results out of range."""
    if not 1 <= k <= MAX_K:
        raise ToolError(f"k must be from 1 to {MAX_K} (got {k})")


def _ref(ref: Ref) -> dict[str, Any]:
    return {"conversation": ref.conversation, "space": ref.space, "id": ref.id}


@dataclass(frozen=True)
class Caller:
    """Whom a tool call acts for: the ``Memory`` of its namespace, and whether it may write."""

    memory: Memory
    read_only: bool = False


CallerOf = Callable[[Context], Caller]
"""The caller of a tool call, from the call's context (over HTTP: its request's API key)."""

Body = Callable[..., dict[str, Any]]
"""A tool's body: the caller's ``Memory``, then the tool's arguments; its answer as JSON."""

READ_ONLY = "this API key is read-only: remember, forget and corrections are refused"


def create_mcp_server(memory: Memory, *, read_only: bool = False) -> MCPServer:
    """An MCP server over ``memory`` (its namespace), as ``qemem mcp`` serves it on stdio;
    ``read_only`` refuses the tools that write."""
    caller = Caller(memory, read_only)
    return tenant_mcp_server(lambda ctx: caller, str(getattr(memory.store, "path", "")))


def tenant_mcp_server(caller_of: CallerOf, store_path: str = "") -> MCPServer:
    """An MCP server with a tool for each tool of the operation table, with its description;
    every call acts on the ``Memory`` that ``caller_of`` finds from its context, and a tool
    that writes is refused to a read-only caller. ``store_path`` is never shown in an error."""
    server: MCPServer = MCPServer(name="qemem", instructions=INSTRUCTIONS, version=__version__)
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its DEBUG lines are not for hosts
    run = Guard(store_path)
    tailored = tailored_tools(run)
    for tool in tools().values():
        body = tailored.get(tool.name) or _generic_tool(tool, run)
        server.add_tool(_bound(tool, body, caller_of), description=tool.description)
    return server


def tailored_tools(run: Guard) -> dict[str, Body]:
    """The bodies of the tools whose arguments or answer differ from their operation's, by
    name (every other tool of the table is ``_generic_tool``)."""
    return (
        _message_tools(run)
        | _answer_tools(run)
        | _across_tools(run)
        | _conversation_tools(run)
        | _edit_tools(run)
    )


def _bound(tool: Tool, body: Body, caller_of: CallerOf) -> Callable[..., dict[str, Any]]:
    """The function served as ``tool``: ``body``'s parameters but the ``Memory`` (the
    caller's, found from the call's context), refused to a read-only caller when the tool
    writes."""
    hints = get_type_hints(body)
    params = [
        p.replace(annotation=hints[p.name])
        for p in list(inspect.signature(body).parameters.values())[1:]
    ]
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)

    def call(ctx: Context, **arguments: Any) -> dict[str, Any]:
        caller = caller_of(ctx)
        if caller.read_only and tool.scope == "write":
            raise ToolError(READ_ONLY)
        return body(caller.memory, **arguments)

    return _signed(call, tool.name, [*params, context])


def _generic_tool(tool: Tool, run: Guard) -> Body:
    """The body of one operation's tool: the ``MemoryAPI`` method's parameters, its result as
    the operation's JSON (under the operation's name when that is not an object)."""
    [op] = tool.operations
    method = getattr(MemoryAPI, op.name)
    hints = get_type_hints(method)
    memory = inspect.Parameter("memory", inspect.Parameter.POSITIONAL_ONLY, annotation=Memory)
    params = [
        p.replace(annotation=hints[p.name])
        for p in inspect.signature(method).parameters.values()
        if p.name != "self"
    ]

    def call(memory: Memory, /, **arguments: Any) -> dict[str, Any]:
        _need_llm(memory, op, arguments)
        result = run(lambda: getattr(memory, op.name)(**arguments))
        data = op.encode(result) if op.encode else _json(op.name, result)
        return data if isinstance(data, dict) else {op.name: data}

    return _signed(call, tool.name, [memory, *params])


def _signed(fn: Body, name: str, params: list[inspect.Parameter]) -> Body:
    """``fn`` named ``name`` with the parameters ``params`` (annotated with types, not
    strings) as its signature and annotations, which the MCP SDK reads."""
    fn.__name__ = name
    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=dict[str, Any]
    )
    fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": dict[str, Any]}
    return fn


@cache
def _adapter(name: str) -> TypeAdapter[Any]:
    return TypeAdapter(get_type_hints(getattr(MemoryAPI, name))["return"])


def _json(name: str, result: Any) -> Any:
    """The result of operation ``name`` as JSON data, by its return type."""
    return _adapter(name).dump_python(result, mode="json")


def _need_llm(memory: Memory, op: Operation, arguments: Mapping[str, Any]) -> None:
    """Refuse a call that needs an LLM (for these arguments) of a server without one."""
    if op.llm is not None and memory.llm is None:
        refusal = op.llm.refusal(arguments, START_WITH_LLM)
        if refusal:
            raise ToolError(refusal)


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


class Guard:
    """Runs a tool's call: qemem errors become tool errors in the tools' words, never naming a
    server path (the log keeps it)."""

    def __init__(self, store_path: str = "") -> None:
        self.store_path = store_path

    def __call__(self, fn: Callable[[], T]) -> T:
        try:
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


def _message_tools(run: Guard) -> dict[str, Body]:
    """``remember`` (append messages), ``recall`` (the raw evidence for a query, across
    conversations with ``recall_across``) and ``context`` (a ready-to-paste block)."""

    def remember(
        memory: Memory,
        conversation: str,
        messages: Annotated[list[MessageIn], Field(max_length=MAX_MESSAGES)],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        records = [m.model_dump(exclude_none=True) for m in messages]
        done = run(
            lambda: memory.add_messages(conversation, records, idempotency_key=idempotency_key)
        )
        return {"ids": done.ids, "turns_added": done.turns_added}

    def recall(
        memory: Memory, conversation: str, query: str, k: int = 8, pool: bool = True
    ) -> dict[str, Any]:
        _check_k(k)
        if pool:
            found = run(lambda: memory.retrieve(conversation, query))
            return {
                "episodes": [record_brief(i.record) for i in found.episodes[:k]],
                "facts": [record_brief(i.record) for i in found.facts[:k]],
                "turns": [record_brief(i.record) for i in found.turns],
            }
        results = run(lambda: memory.search(conversation, query, k=k))
        return {"turns": [record_brief(r.record) for r in results]}

    def recall_across(
        memory: Memory, conversations: list[str], query: str, k: int = 8
    ) -> dict[str, Any]:
        _check_k(k)
        results = run(lambda: memory.search_many(conversations, query, k=k))
        return {
            "turns": [{"conversation": r.conversation, **record_brief(r.record)} for r in results]
        }

    def context(
        memory: Memory, conversation: str, question: str, budget_tokens: int = 2000
    ) -> dict[str, Any]:
        _check_budget(budget_tokens)
        block = run(lambda: memory.context(conversation, question, budget_tokens=budget_tokens))
        return {"text": block.text, "tokens": block.tokens, "ids": [i.ref.id for i in block.items]}

    return {f.__name__: f for f in (remember, recall, recall_across, context)}


def _answer_tools(run: Guard) -> dict[str, Body]:
    """``ask``: an answer with cited, verified evidence (the evidence only without an LLM);
    ``check``: the claims of a statement, labelled against the conversation."""

    def ask(
        memory: Memory,
        conversation: str,
        question: str,
        mode: Literal["full", "respond", "no-refine", "direct", "retrieval"] | None = None,
    ) -> dict[str, Any]:
        chosen = _ask_mode(memory, "ask", mode)
        return answer_brief(run(lambda: memory.ask(conversation, question, mode=chosen)))

    def check(memory: Memory, conversation: str, text: str) -> dict[str, Any]:
        _need_llm(memory, operation("check"), {})
        return check_to_json(run(lambda: memory.check(conversation, text)))

    return {"ask": ask, "check": check}


def _across_tools(run: Guard) -> dict[str, Body]:
    """``context_across`` and ``ask_across``: ``context`` and ``ask`` over several
    conversations of the user ranked together (``recall_across`` is their search)."""

    def context_across(
        memory: Memory, conversations: list[str], question: str, budget_tokens: int = 2000
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

    def ask_across(
        memory: Memory,
        conversations: list[str],
        question: str,
        mode: Literal["full", "respond", "no-refine", "direct", "retrieval"] | None = None,
    ) -> dict[str, Any]:
        chosen = _ask_mode(memory, "ask_many", mode)
        return answer_brief(run(lambda: memory.ask_many(conversations, question, mode=chosen)))

    return {"context_across": context_across, "ask_across": ask_across}


def _conversation_tools(run: Guard) -> dict[str, Body]:
    """``list_conversations`` and ``forget`` (delete one conversation)."""

    def list_conversations(memory: Memory) -> dict[str, Any]:
        return {"conversations": [_conversation(c) for c in run(memory.conversations)]}

    def forget(memory: Memory, conversation: str) -> dict[str, Any]:
        return {"deleted": run(lambda: memory.delete(conversation))}

    return {"list_conversations": list_conversations, "forget": forget}


def _edit_tools(run: Guard) -> dict[str, Body]:
    """``facts`` (what is known, now or on a date), ``forget_message`` (delete or redact)
    and ``correct_fact``."""

    def facts(memory: Memory, conversation: str, as_of: str | None = None) -> dict[str, Any]:
        found = run(lambda: memory.facts(conversation, as_of=as_of))
        return {"facts": [record_brief(f) for f in found]}

    def forget_message(
        memory: Memory, conversation: str, message: str, redact: bool = False
    ) -> dict[str, Any]:
        forget = memory.redact_message if redact else memory.delete_message
        return dataclasses.asdict(run(lambda: forget(conversation, message)))

    def correct_fact(
        memory: Memory, conversation: str, fact: str, content: str, turns: list[str] | None = None
    ) -> dict[str, Any]:
        done = run(lambda: memory.correct_fact(conversation, fact, content, turns=turns or ()))
        return {"old": done.old, "new": done.new, "turns": list(done.turn_ids)}

    return {"facts": facts, "forget_message": forget_message, "correct_fact": correct_fact}


def _conversation(conversation: Conversation) -> dict[str, Any]:
    span = conversation.span
    return {
        "id": conversation.id,
        "created_at": created.isoformat() if (created := conversation.created_at) else None,
        "speakers": list(conversation.speakers),
        "sessions": len(conversation.sessions),
        "first": format_datetime(span[0]) if span else None,
        "last": format_datetime(span[1]) if span else None,
    }
