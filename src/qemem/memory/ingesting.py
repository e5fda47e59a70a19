"""The write-time recheck of an ingest: what another writer stored meanwhile is dropped."""

from __future__ import annotations

import numpy as np

from qemem.errors import NotFoundError, StoreError
from qemem.ingest.additions import Additions, find_additions
from qemem.store import MemoryStore, Scope


def recheck(
    store: MemoryStore, scope: Scope, additions: Additions, vectors: np.ndarray, file: str
) -> tuple[Additions, np.ndarray, int]:
    """Inside the write transaction: drop what another writer stored since ``additions``
    were found (so two ingests of one file never collide); returns the additions, their
    vectors and how many turns were dropped."""
    try:
        existing = store.get_conversation(scope)
    except NotFoundError:
        existing = None
    fresh = find_additions(
        additions.conversation, existing, store.turns(scope) if existing else [], file
    )
    rows = {t.id: n for n, t in enumerate(additions.turns)}
    if any(rows.get(t.id) is None or additions.turns[rows[t.id]] != t for t in fresh.turns):
        raise StoreError(
            f"another writer changed conversation {scope} while this ingest ran: "
            "run the command again (it adds only what is missing)"
        )
    keep = [rows[t.id] for t in fresh.turns]
    return fresh, vectors[keep], len(additions.turns) - len(keep)
