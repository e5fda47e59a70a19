"""Memory stores: the ``MemoryStore`` seam and its SQLite implementation."""

from qemem.store.base import MemoryStore, Ranked, Scope
from qemem.store.sqlite import SQLiteStore

__all__ = ["MemoryStore", "Ranked", "SQLiteStore", "Scope", "open_store"]


def open_store(path: str | None = None, *, read_only: bool = False) -> MemoryStore:
    """Open the store at ``path`` (a SQLite file), or an in-memory store when ``path`` is None.

    ``read_only`` opens an existing qemem store for reading only (it is never created)."""
    return SQLiteStore(path or ":memory:", read_only=read_only and path is not None)
