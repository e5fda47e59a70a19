"""Re-embedding a whole store in place with another embedder, resumably.

Changing the embedder used to strand a store behind the embedder-mismatch error. ``reembed``
embeds every record of every conversation (all namespaces: it is an operator's command, not a
tenant's, so it is no ``Memory`` method and no HTTP route) with the new embedder, staging the
vectors beside the live ones conversation by conversation, space by space, in batches that are
each committed; then swaps them in at once (``MemoryStore.swap_staged``). Killed part way, a
second run resumes where the first stopped; the store answers with the old embedder until the
swap. Records written meanwhile are embedded before the swap (up to ``rounds`` passes).
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field

from qemem.embed.base import Embedder
from qemem.embed.documents import document_text
from qemem.embed.spec import open_embedder
from qemem.errors import ConversationChangedError, NotFoundError, StoreError
from qemem.memory.api import Progress
from qemem.models import Space, search_text
from qemem.store import MemoryStore, Scope, open_store
from qemem.store.base import space_records

SPACES: tuple[Space, ...] = ("turn", "episode", "fact")


@dataclass
class ReembedReport:
    """What a run did: records embedded per space, whether it resumed an earlier run, and
    the embedders before and after."""

    before: str | None
    after: str
    resumed: bool = False
    embedded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPACES, 0))
    unchanged: bool = False


def _pending(store: MemoryStore) -> list[tuple[Scope, Space, list[str]]]:
    """The records without a staged vector, per conversation (pinned to its life: see
    :func:`_stage_all`) and space; a conversation deleted meanwhile is left out."""
    out: list[tuple[Scope, Space, list[str]]] = []
    for conv in store.conversations():
        with suppress(NotFoundError):
            scope = store.pin(Scope(conv.id, conv.namespace))
            out.extend((scope, s, ids) for s in SPACES if (ids := store.unstaged(scope, s)))
    return out


def _stage_all(
    store: MemoryStore,
    embedder: Embedder,
    batch: int,
    report: ReembedReport,
    progress: Progress | None,
) -> None:
    """Stage new vectors of the pending records, batch by batch. Each conversation is pinned:
    once it is deleted, or a message or fact of it deleted or redacted, after its records were
    read, the vectors of that text are not staged (the next round reads what is left)."""
    pending = _pending(store)
    total, done = sum(len(ids) for *_, ids in pending), 0
    for scope, space, ids in pending:
        with suppress(NotFoundError, ConversationChangedError):
            for start in range(0, len(ids), batch):
                records = space_records(store, scope, space, ids[start : start + batch])
                vectors = embedder.embed([document_text(search_text(r)) for r in records])
                store.stage_vectors(scope, space, [r.id for r in records], vectors)
                report.embedded[space] += len(records)
                done += len(records)
                if progress:
                    progress(done, total)


def reembed(
    store: MemoryStore,
    embedder: Embedder,
    *,
    batch: int = 64,
    rounds: int = 3,
    progress: Progress | None = None,
) -> ReembedReport:
    """Re-embed ``store`` with ``embedder`` (see the module doc)."""
    known = store.embedder()
    report = ReembedReport(known[0] if known else None, embedder.id)
    if known == (embedder.id, embedder.dim) and store.reembed_target() is None:
        report.unchanged = True
        return report
    report.resumed = store.begin_reembed(embedder.id, embedder.dim)
    for attempt in range(rounds):
        _stage_all(store, embedder, batch, report, progress)
        try:
            store.swap_staged()
            return report
        except StoreError:
            if attempt == rounds - 1:
                raise
    return report


def reembed_store(
    store: str,
    embedder: Embedder | str | None = None,
    *,
    batch: int = 64,
    progress: Progress | None = None,
) -> ReembedReport:
    """Open the store at ``store`` (a path or URL) and re-embed it with ``embedder`` (an
    instance or a spec; ``QEMEM_EMBEDDER`` or the default when None)."""
    model = embedder if isinstance(embedder, Embedder) else open_embedder(embedder)
    opened = open_store(store)
    try:
        return reembed(opened, model, batch=batch, progress=progress)
    finally:
        opened.close()
