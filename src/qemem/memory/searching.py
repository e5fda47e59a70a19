"""Search of one conversation or across several of a namespace (one user's threads).

Across conversations is its own method, ``search_many(conversations, query)``, rather than a
list accepted by ``search``: ``search`` already takes a list of queries, and two list-valued
positional arguments are easy to swap without an error; a separate name also keeps each
method's HTTP route, MCP argument and CLI flag one-to-one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qemem.embed.base import Embedder
from qemem.errors import InputError
from qemem.memory.api import SearchResult, check_query
from qemem.models import Episode, SemanticFact, Space, Turn
from qemem.retrieve.across import search_across
from qemem.store import MemoryStore, Scope

MAX_CONVERSATIONS = 50
"""The most conversations one search may span."""
MAX_SEARCH_QUERIES = 8
"""The most queries one search may fuse (each ranks every record of the space it searches)."""

Records = Callable[[str, Space, Sequence[str]], Sequence[Turn | Episode | SemanticFact]]
"""Records of (conversation, space) by id, in the order of the ids."""


def check_queries(query: str | Sequence[str]) -> list[str]:
    """The queries of ``query`` (one, or 1 to ``MAX_SEARCH_QUERIES`` fused together), each checked;
    InputError otherwise."""
    queries = [query] if isinstance(query, str) else list(query)
    if not 1 <= len(queries) <= MAX_SEARCH_QUERIES:
        raise InputError(
            f"{len(queries)} queries: send 1 to {MAX_SEARCH_QUERIES} per search (the more queries, "
            "the more rankings of every record are fused)",
            field="query",
        )
    return [check_query(q, "query") for q in queries]


def check_conversations(conversations: Sequence[str]) -> list[str]:
    """The distinct conversation ids of ``conversations`` in first-seen order, else
    InputError: a bare string, none, or more than ``MAX_CONVERSATIONS``."""
    if isinstance(conversations, str):
        raise InputError(
            "conversations must be a list of conversation ids: search one with search()",
            field="conversations",
        )
    ids = list(dict.fromkeys(conversations))
    if not ids:
        raise InputError("no conversations to search: name at least one", field="conversations")
    if len(ids) > MAX_CONVERSATIONS:
        raise InputError(
            f"{len(ids)} conversations, more than the {MAX_CONVERSATIONS} one search may span: "
            "search them in groups",
            field="conversations",
        )
    return ids


def search_conversations(
    store: MemoryStore,
    scopes: dict[str, Scope],
    records: Records,
    embedder: Embedder,
    query: str | Sequence[str],
    *,
    k: int | None,
    space: Space,
) -> list[SearchResult]:
    """Hybrid search of ``space`` across the conversations of ``scopes`` (keyed by id; each
    must exist: NotFoundError), ranked together, each result naming its conversation. Over one
    scope it ranks as ``hybrid_search`` (merging one list by score keeps its order)."""
    for scope in scopes.values():
        store.get_conversation(scope)
    queries = check_queries(query)
    hits = search_across(store, scopes, space, queries, embedder, k=k)
    wanted: dict[str, list[str]] = {}
    for cid, hit in hits:
        wanted.setdefault(cid, []).append(hit.id)
    found = {(cid, r.id): r for cid, ids in wanted.items() for r in records(cid, space, ids)}
    return [
        SearchResult(hit, found[(cid, hit.id)], cid) for cid, hit in hits if (cid, hit.id) in found
    ]
