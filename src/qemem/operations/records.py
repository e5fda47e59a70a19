"""The operations on conversations and their records: append, ingest, list, read and delete
conversations; list episodes, facts and supersessions; forget a message or a fact; correct
a fact; append, list, pop and clear an agent framework's history items."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter

from qemem.memory import IDEMPOTENCY_HEADER, Forgotten
from qemem.memory.api import check_idempotency_key
from qemem.models import Conversation, Episode, Item, SemanticFact, Session, Supersession
from qemem.operations.schemas import (
    Appended,
    ConversationOut,
    CorrectIn,
    FactsQuery,
    ItemsCleared,
    ItemsIn,
    ItemsQuery,
    MessagesIn,
)
from qemem.operations.spec import HeaderParam, Operation, Route

_SESSIONS = TypeAdapter(list[Session])
_CONVERSATION = "/v1/conversations/{conversation}"


def conversation_of(data: Mapping[str, Any]) -> Conversation:
    """A conversation from its JSON (``ConversationOut``)."""
    return Conversation(
        data["id"],
        tuple(data["speakers"]),
        tuple(_SESSIONS.validate_python(data["sessions"])),
        data["namespace"],
        datetime.fromisoformat(created) if (created := data.get("created_at")) else None,
    )


IDEMPOTENCY = HeaderParam(
    "idempotency_key",
    IDEMPOTENCY_HEADER,
    "1 to 255 printable ASCII characters (a UUID, say): a retry of the batch with the same "
    "key is answered with the first response and stores nothing",
    check_idempotency_key,
)

CONVERSATIONS = (
    Operation(
        "add_messages",
        "write",
        Route(
            "POST",
            f"{_CONVERSATION}/messages",
            "add_messages",
            """
    Append messages (validated like ingest, all or nothing); creates the conversation.
    A message whose id is stored with the same content is acknowledged, not duplicated.
    Messages without ids need an ``Idempotency-Key`` to be retried safely: a batch sent again
    with its key (within the server's ``--idempotency-hours``) gets the same response and
    stores nothing; the key with a different body is refused (422).""",
            "conversations",
            (403, 409),
            body=MessagesIn,
            headers=(IDEMPOTENCY,),
            response=Appended,
        ),
        tool="remember",
        tool_doc="Store messages of a conversation in long-term memory so they can be "
        "recalled later. Call it with each new exchange worth keeping. Each message needs "
        "session_id (one sitting of the conversation), timestamp (ISO 8601), speaker and text, "
        "and role (user or assistant) in a conversation with an assistant; "
        "give each an id so that retrying never stores it twice, or pass an idempotency_key "
        "(a fresh UUID per batch) and the same key when retrying the batch. Returns the "
        "stored ids.",
        creates=True,
    ),
    Operation("ingest", "write", cli="ingest"),
    Operation(
        "conversations",
        "read",
        Route(
            "GET",
            "/v1/conversations",
            "list_conversations",
            "The caller's conversations with their sessions, counts and build state.",
            "conversations",
            response=list[ConversationOut],
        ),
        tool="list_conversations",
        tool_doc="List the stored conversations: ids, when each was created, speakers, "
        "number of sessions and the "
        "first and last session dates. Call it first to find the conversation id to use.",
        cli="conversations",
        decode=lambda out: [conversation_of(c) for c in out],
    ),
    Operation(
        "conversation",
        "read",
        Route(
            "GET",
            _CONVERSATION,
            "get_conversation",
            "One conversation: sessions, counts of turns/episodes/facts, build state.",
            "conversations",
            (404,),
            response=ConversationOut,
        ),
        decode=conversation_of,
    ),
    Operation(
        "delete",
        "write",
        Route(
            "DELETE",
            _CONVERSATION,
            "delete_conversation",
            "Delete a conversation and everything derived from it.",
            "conversations",
            (403, 404),
            status=204,
        ),
        tool="forget",
        tool_doc="Permanently delete a conversation and everything derived from it. Only "
        "when the user asks to forget it; this cannot be undone.",
        cli="delete",
    ),
)

RECORDS = (
    Operation(
        "episodes",
        "read",
        Route(
            "GET",
            f"{_CONVERSATION}/episodes",
            "list_episodes",
            "The conversation's episodes in order, each with the turns it was built from.",
            "records",
            (404,),
            response=list[Episode],
        ),
    ),
    Operation(
        "facts",
        "read",
        Route(
            "GET",
            f"{_CONVERSATION}/facts",
            "list_facts",
            """
    The conversation's current facts (none that a supersession replaced), or those known
    as of a date, each with the episodes it was learned from.""",
            "records",
            (404,),
            query=FactsQuery,
            response=list[SemanticFact],
        ),
        tool="facts",
        tool_doc="List what is known about the people of a conversation: its current "
        "facts (a fact a later message updated is left out), or with as_of (an ISO date) "
        "those known on that date. Each fact has its id and the episodes it came from.",
        cli="facts",
    ),
    Operation(
        "supersessions",
        "read",
        Route(
            "GET",
            f"{_CONVERSATION}/supersessions",
            "list_supersessions",
            "Which facts replace which: the turns that show it, from when, build or manual.",
            "records",
            (404,),
            response=list[Supersession],
        ),
    ),
    Operation(
        "delete_message",
        "write",
        Route(
            "DELETE",
            f"{_CONVERSATION}/messages/{{message}}",
            "delete_message",
            """
    Delete one message with the episodes citing it and the facts left without source; a
    session left without messages goes too (``sessions``), so a session dated wrongly can be
    replaced (its number is not used again).""",
            "records",
            (403, 404),
            response=Forgotten,
        ),
        tool="forget_message",
        tool_doc="Forget one message of a conversation: with redact=false (default) it is "
        "deleted; with redact=true its text is replaced by a marker and its place kept. The "
        "episodes and facts derived from it go too. Only when the user asks; it cannot be "
        "undone.",
        cli="delete-message",
    ),
    Operation(
        "redact_message",
        "write",
        Route(
            "POST",
            f"{_CONVERSATION}/messages/{{message}}/redact",
            "redact_message",
            """
    Replace one message's text by ``[message redacted]`` (id and place kept), removing
    what was derived from it, as a delete does.""",
            "records",
            (403, 404),
            response=Forgotten,
        ),
        tool="forget_message",
        cli="redact-message",
    ),
    Operation(
        "delete_fact",
        "write",
        Route(
            "DELETE",
            f"{_CONVERSATION}/facts/{{fact}}",
            "delete_fact",
            "Delete one fact: the facts it replaced are current again (`restored`: deleting a "
            "correction restores the fact it corrected); a correction of it stays current.",
            "records",
            (403, 404),
            response=Forgotten,
        ),
        tool="forget_fact",
        tool_doc="Forget one fact of a conversation (by its id, from the facts tool). Only "
        "when the user says it is wrong or asks to forget it. Forgetting a correction makes "
        "the fact it corrected current again (listed in restored); a correction of the "
        "forgotten fact stays.",
        cli="delete-fact",
    ),
    Operation(
        "correct_fact",
        "write",
        Route(
            "POST",
            f"{_CONVERSATION}/facts/{{fact}}/correct",
            "correct_fact",
            """
    Replace a current fact by the given text: a new fact and a manual supersession of
    the old one (which keeps its provenance), citing ``turns`` if given.""",
            "records",
            (403, 404),
            body=CorrectIn,
            response=Supersession,
        ),
        tool="correct_fact",
        tool_doc="Correct one fact of a conversation when the user says it is wrong: the "
        "fact (by id) is replaced by the corrected text, written with names, no pronouns; "
        "turns may cite the ids of the messages that show it. Returns the new fact's id.",
        cli="correct-fact",
    ),
)

# An agent framework's history items (qemem.integrations): no MCP tool and no CLI command. An
# agent reads its history through its framework's session; the MCP tools remember, recall and
# context already cover the messages, and raw items (tool outputs, reasoning) are no material
# for an agent to search or edit.
ITEMS = (
    Operation(
        "add_items",
        "write",
        Route(
            "POST",
            f"{_CONVERSATION}/items",
            "add_items",
            """
    Append an agent framework's history items (an Agents SDK session's), each kept exactly
    as sent, and the messages ``messages`` gives for them (row-aligned; null for a tool call
    and the like), in one transaction; creates the conversation. Not retry-safe: items sent
    again are appended again.""",
            "items",
            (403, 409),
            body=ItemsIn,
            response=list[Item],
        ),
        creates=True,
    ),
    Operation(
        "items",
        "read",
        Route(
            "GET",
            f"{_CONVERSATION}/items",
            "list_items",
            "The conversation's history items in order (only the last ``limit``).",
            "items",
            (404,),
            query=ItemsQuery,
            response=list[Item],
        ),
    ),
    Operation(
        "pop_item",
        "write",
        Route(
            "POST",
            f"{_CONVERSATION}/items/pop",
            "pop_item",
            """
    Remove and return the last history item (null when there is none); the message it was
    stored as is deleted with what was derived from it, as a message delete does.""",
            "items",
            (403, 404, 409),
            response=Item | None,
        ),
    ),
    Operation(
        "clear_items",
        "write",
        Route(
            "DELETE",
            f"{_CONVERSATION}/items",
            "clear_items",
            "Remove every history item; the messages they were stored as stay.",
            "items",
            (403, 404),
            response=ItemsCleared,
        ),
        encode=lambda cleared: {"items": cleared},
        decode=lambda out: int(out["items"]),
    ),
)
