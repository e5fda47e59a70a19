"""Memory stores: the ``MemoryStore`` seam and its SQLite implementation."""

from qemem.store.base import MemoryStore, Ranked, Scope
from qemem.store.sqlite import SQLiteStore

__all__ = ["MemoryStore", "Ranked", "SQLiteStore", "Scope", "open_store"]


def open_store(path: str | None = None) -> MemoryStore:
    """Open the store at ``path`` (a SQLite file), or an in-memory store when ``path`` is None."""
    return SQLiteStore(path or ":memory:")
