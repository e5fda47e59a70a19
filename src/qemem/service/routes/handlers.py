"""The operations whose HTTP answer is more than their ``Memory`` method's result: search
(hits, or the evidence pool), the conversations with their counts and build state, a delete
answered 204, questions refused when blank, a build that wakes the worker, and the pages of
jobs with their next cursor."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from qemem.errors import InputError, NotFoundError
from qemem.memory import Memory
from qemem.operations.jobs import NEXT_CURSOR
from qemem.operations.schemas import MAX_K, BuildState, ConversationOut, SearchOut
from qemem.service.routes.operations import Handler, Invocation, require, run
from qemem.service.state import existing_conversation


def summary(memory: Memory, conversation: str) -> ConversationOut:
    """A conversation's sessions, counts and build state (404 when it does not exist)."""
    conv = existing_conversation(memory, conversation)
    turns = memory.turns(conversation)
    episodes = memory.episodes(conversation)
    built = sorted({e.session for e in episodes})
    return ConversationOut(
        id=conv.id,
        namespace=conv.namespace,
        created_at=conv.created_at,
        speakers=list(conv.speakers),
        sessions=list(conv.sessions),
        turns=len(turns),
        episodes=len(episodes),
        facts=len(memory.facts(conversation)),
        build=BuildState(
            built_sessions=built,
            unbuilt_sessions=sorted({t.session for t in turns} - set(built)),
            job=job.id if (job := memory.build_job(conversation)) else None,
        ),
    )


def conversations(call: Invocation) -> list[ConversationOut]:
    return [summary(call.memory, c.id) for c in call.memory.conversations()]


def conversation(call: Invocation) -> ConversationOut:
    return summary(call.memory, call.args["conversation"])


def delete(call: Invocation) -> Response:
    conversation = call.args["conversation"]
    if not call.memory.delete(conversation):
        raise NotFoundError(
            f"no conversation {conversation!r}", kind="conversation", name=conversation
        )
    return Response(status_code=204)


def search(call: Invocation) -> SearchOut:
    """Hits of one space, or with ``pool`` the evidence pool (for ``retrieve``)."""
    memory, args = call.memory, call.args
    require(call)
    queries = [args["query"]] if isinstance(args["query"], str) else args["query"]
    if not queries or not all(q.strip() for q in queries):
        raise InputError("the query is empty: send the words to look for", field="query")
    conversation = args["conversation"]
    if args["pool"]:
        if len(queries) != 1:
            raise InputError("the pool takes one query (the question)", field="query")
        return SearchOut(pool=memory.retrieve(conversation, queries[0], exclude=args["exclude"]))
    found = memory.search(conversation, queries, k=_k(args["k"]), space=args["space"])
    return SearchOut(results=found)


def _k(k: int | None) -> int:
    """A request's ``k``: null (every ranked record) is at most ``MAX_K`` too."""
    return MAX_K if k is None else k


def search_many(call: Invocation) -> Any:
    """Hits across conversations, ``k`` null cut to ``MAX_K``."""
    call.args["k"] = _k(call.args["k"])
    return run(call)


def _not_blank(field: str, message: str) -> Handler:
    """The default handler, after a 422 when the text ``field`` is blank."""

    def handle(call: Invocation) -> Any:
        if not call.args[field].strip():
            raise InputError(message, field=field)
        return run(call)

    return handle


def enqueue_build(call: Invocation) -> Any:
    """The queued (or already queued or running) build, the worker woken to run it."""
    job = run(call)
    call.state.worker.wake()
    return job


def jobs(call: Invocation) -> Any:
    """A page of jobs; when more follow, the next page's cursor and URL in the headers."""
    memory, args = call.memory, call.args
    page = memory.jobs(args["status"], limit=args["limit"], before=args["before"])
    if len(page) == args["limit"] and memory.jobs(args["status"], limit=1, before=page[-1].id):
        call.response.headers[NEXT_CURSOR] = page[-1].id
        following = call.request.url.include_query_params(cursor=page[-1].id)
        # relative (RFC 8288): right behind a proxy that rewrites the host
        call.response.headers["Link"] = f'<{following.path}?{following.query}>; rel="next"'
    return page


HANDLERS: dict[str, Handler] = {
    "conversations": conversations,
    "conversation": conversation,
    "delete": delete,
    "search": search,
    "search_many": search_many,
    "ask": _not_blank("question", "the question is empty"),
    "ask_many": _not_blank("question", "the question is empty"),
    "check": _not_blank("text", "the text to check is empty: send the statement"),
    "enqueue_build": enqueue_build,
    "jobs": jobs,
}
"""The tailored handlers, by operation name; every other route runs ``run``."""
