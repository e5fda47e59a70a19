"""Shared helpers of the service tests: an app over a store (in-memory SQLite, or the SQLite
file or PostgreSQL database a URL names) with two tenants."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.testclient import TestClient

from qemem.embed import HashEmbedder
from qemem.keys import KeyStore, create_key, open_key_store
from qemem.service import create_app
from qemem.store import MemoryStore, open_store

MCP_TOOLS = {
    "remember",
    "recall",
    "recall_across",
    "context",
    "context_across",
    "ask",
    "ask_across",
    "check",
    "list_conversations",
    "forget",
    "facts",
    "forget_message",
    "forget_fact",
    "correct_fact",
}
"""The MCP server's tools (the stdio and in-memory tests both check the list)."""

MESSAGES = [
    {
        "session_id": "s1",
        "timestamp": "2024-03-14T19:15:00",
        "speaker": "Ana",
        "text": "I adopted a grey cat named Pixel last week.",
        "id": "m1",
    },
    {
        "session_id": "s1",
        "timestamp": "2024-03-14T19:16:00",
        "speaker": "Ben",
        "text": "Lovely! I started pottery classes yesterday.",
        "id": "m2",
    },
    {
        "session_id": "s2",
        "timestamp": "2024-04-02T10:00:00",
        "speaker": "Ana",
        "text": "Pixel knocked my pottery bowl off the shelf.",
        "image_caption": "a broken bowl",
    },
]


@dataclass
class Served:
    app: FastAPI
    client: TestClient
    keys: KeyStore
    store: MemoryStore
    alice: str
    bob: str
    reader: str

    def auth(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}


@contextmanager
def served(
    llm: str | None = "fake",
    max_body: int = 1_000_000,
    store_url: str = ":memory:",
    auto_build: float | None = None,
) -> Iterator[Served]:
    """An app with tenants alice (writer), bob (writer) and a read-only alice key, over the
    store ``store_url`` names (a SQLite path or a PostgreSQL URL; in memory by default)."""
    store, keys = open_store(store_url), open_key_store(store_url)
    app = create_app(
        store,
        keys=keys,
        embedder=HashEmbedder(),
        llm=llm,
        max_body=max_body,
        auto_build=auto_build,
    )
    alice, _ = create_key(keys, "alice")
    bob, _ = create_key(keys, "bob")
    reader, _ = create_key(keys, "alice", read_only=True)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Served(app, client, keys, store, alice, bob, reader)
    store.close()
    keys.close()
