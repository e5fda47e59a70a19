"""Conversations of the caller's namespace: list, read, delete, append messages."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Header, Response

from qemem.errors import NotFoundError
from qemem.memory import IDEMPOTENCY_HEADER, Memory
from qemem.service.auth import Reader, Writer
from qemem.service.problems import error_responses
from qemem.service.schemas import Appended, BuildState, ConversationOut, MessagesIn
from qemem.service.state import State, existing_conversation


def summary(memory: Memory, conversation: str) -> ConversationOut:
    """A conversation's sessions, counts and build state (404 when it does not exist)."""
    conv = existing_conversation(memory, conversation)
    turns = memory.turns(conversation)
    episodes = memory.episodes(conversation)
    built = sorted({e.session for e in episodes})
    return ConversationOut(
        id=conv.id,
        namespace=conv.namespace,
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


def list_conversations(key: Reader, state: State) -> list[ConversationOut]:
    """The caller's conversations with their sessions, counts and build state."""
    memory = state.memory(key.namespace)
    return [summary(memory, c.id) for c in memory.conversations()]


def get_conversation(conversation: str, key: Reader, state: State) -> ConversationOut:
    """One conversation: sessions, counts of turns/episodes/facts, build state."""
    return summary(state.memory(key.namespace), conversation)


def delete_conversation(conversation: str, key: Writer, state: State) -> Response:
    """Delete a conversation and everything derived from it."""
    if not state.memory(key.namespace).delete(conversation):
        raise NotFoundError(
            f"no conversation {conversation!r}", kind="conversation", name=conversation
        )
    return Response(status_code=204)


def add_messages(
    conversation: str,
    body: MessagesIn,
    key: Writer,
    state: State,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            description="1 to 255 printable ASCII characters (a UUID, say): a retry of the "
            "batch with the same key is answered with the first response and stores nothing",
        ),
    ] = None,
) -> Appended:
    """Append messages (validated like ingest, all or nothing); creates the conversation.
    A message whose id is stored with the same content is acknowledged, not duplicated.
    Messages without ids need an ``Idempotency-Key`` to be retried safely: a batch sent again
    with its key (within the server's ``--idempotency-hours``) gets the same response and
    stores nothing; the key with a different body is refused (422)."""
    memory = state.memory(key.namespace)
    done = memory.add_messages(
        conversation,
        [m.model_dump(exclude_none=True) for m in body.messages],
        idempotency_key=idempotency_key,
    )
    return Appended(ids=done.ids, turns_added=done.turns_added, sessions_added=done.sessions_added)


def register(app: FastAPI) -> None:
    """Add these routes to ``app``."""
    app.add_api_route(
        "/v1/conversations",
        list_conversations,
        methods=["GET"],
        tags=["conversations"],
        responses=error_responses(),
    )
    app.add_api_route(
        "/v1/conversations/{conversation}",
        get_conversation,
        methods=["GET"],
        tags=["conversations"],
        responses=error_responses(404),
    )
    app.add_api_route(
        "/v1/conversations/{conversation}",
        delete_conversation,
        methods=["DELETE"],
        tags=["conversations"],
        status_code=204,
        responses=error_responses(403, 404),
    )
    app.add_api_route(
        "/v1/conversations/{conversation}/messages",
        add_messages,
        methods=["POST"],
        tags=["conversations"],
        responses=error_responses(403, 409),
    )
