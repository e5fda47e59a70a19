"""One conversation's records: list its episodes, facts (current, or as of a date) and
supersessions; forget one message (delete or redact) or one fact; correct one fact by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import FastAPI, Query

from qemem.memory import Forgotten
from qemem.models import Episode, SemanticFact, Supersession
from qemem.service.auth import Reader, Writer
from qemem.service.problems import error_responses
from qemem.service.schemas import CorrectIn
from qemem.service.state import State, existing_conversation


def list_episodes(conversation: str, key: Reader, state: State) -> list[Episode]:
    """The conversation's episodes in order, each with the turns it was built from."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    return memory.episodes(conversation)


def list_facts(
    conversation: str,
    key: Reader,
    state: State,
    as_of: Annotated[
        str | None,
        Query(
            max_length=100,
            description="ISO 8601 date or date-time (years 1900 to 2200): the facts known then",
        ),
    ] = None,
    include_superseded: Annotated[
        bool, Query(description="also the facts a later one replaced")
    ] = False,
) -> list[SemanticFact]:
    """The conversation's current facts (none that a supersession replaced), or those known
    as of a date, each with the episodes it was learned from."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    return memory.facts(conversation, as_of=as_of, include_superseded=include_superseded)


def list_supersessions(conversation: str, key: Reader, state: State) -> list[Supersession]:
    """Which facts replace which: the turns that show it, from when, build or manual."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    return memory.supersessions(conversation)


def delete_message(conversation: str, message: str, key: Writer, state: State) -> Forgotten:
    """Delete one message with the episodes citing it and the facts left without source; a
    session left without messages goes too (``sessions``), so a session dated wrongly can be
    replaced (its number is not used again)."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    return memory.delete_message(conversation, message)


def redact_message(conversation: str, message: str, key: Writer, state: State) -> Forgotten:
    """Replace one message's text by ``[message redacted]`` (id and place kept), removing
    what was derived from it, as a delete does."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    return memory.redact_message(conversation, message)


def delete_fact(conversation: str, fact: str, key: Writer, state: State) -> Forgotten:
    """Delete one fact (a fact it replaced is current again)."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    return memory.delete_fact(conversation, fact)


def correct_fact(
    conversation: str, fact: str, body: CorrectIn, key: Writer, state: State
) -> Supersession:
    """Replace a current fact by the given text: a new fact and a manual supersession of
    the old one (which keeps its provenance), citing ``turns`` if given."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    return memory.correct_fact(conversation, fact, body.content, turns=body.turns)


def register(app: FastAPI) -> None:
    """Add these routes to ``app``."""
    base = "/v1/conversations/{conversation}"
    routes: tuple[tuple[str, str, Callable[..., object]], ...] = (
        ("GET", "/episodes", list_episodes),
        ("GET", "/facts", list_facts),
        ("GET", "/supersessions", list_supersessions),
        ("DELETE", "/messages/{message}", delete_message),
        ("POST", "/messages/{message}/redact", redact_message),
        ("DELETE", "/facts/{fact}", delete_fact),
        ("POST", "/facts/{fact}/correct", correct_fact),
    )
    for method, path, endpoint in routes:
        codes = (404,) if method == "GET" else (403, 404)
        app.add_api_route(
            base + path,
            endpoint,
            methods=[method],
            tags=["records"],
            responses=error_responses(*codes),
        )
