"""Building the passages of a store's long turns (``qemem reindex``), resumably.

Stores written before passages existed keep searching each turn whole, unchanged, until this
runs; nothing is rebuilt when a store is opened. ``reindex`` splits every turn of every
conversation (all namespaces: an operator's command, like ``reembed``) with the current
passage size and stores the passages of each turn whose stored passages differ: a long turn
without passages gets them, a turn split at another size is split again, a turn that now fits
in one passage loses them. Each conversation's turns are written in batches, each one
transaction, so an interrupted run resumes where it stopped: a second run finds nothing to do.
Like a build, it pins each conversation to its life (:meth:`~qemem.store.MemoryStore.pin`):
no passage of a message deleted or redacted meanwhile is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field

import numpy as np

from qemem.embed.base import Embedder
from qemem.embed.documents import document_text
from qemem.embed.spec import open_embedder
from qemem.errors import ConversationChangedError, EmbedderMismatchError, NotFoundError
from qemem.memory.api import Progress
from qemem.memory.turn_vectors import passage_spans
from qemem.models import Span, Turn, search_text
from qemem.passages import PASSAGE_CHARS
from qemem.store import MemoryStore, Scope, open_store


@dataclass
class ReindexReport:
    """What a run did: per conversation (``namespace/id`` outside the default namespace),
    the turns whose passages were written and the passages embedded."""

    turns: dict[str, int] = field(default_factory=dict)
    passages: dict[str, int] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        return not any(self.turns.values())


def stale_turns(
    store: MemoryStore, scope: Scope, size: int = PASSAGE_CHARS
) -> list[tuple[Turn, list[Span]]]:
    """The scope's turns whose stored passages are not those of ``size`` (in conversation
    order), each with the passages it should have (none: it is searched whole)."""
    stored = store.passages(scope)
    out = []
    for turn in store.turns(scope):
        spans = passage_spans(turn, size)
        if spans != stored.get(turn.id, []):
            out.append((turn, spans))
    return out


Batch = Sequence[tuple[Turn, list[Span]]]


def _write(store: MemoryStore, scope: Scope, embedder: Embedder, batch: Batch) -> int:
    """Embed and store the passages of ``batch`` (each text cut as every writer cuts it);
    the number of passages."""
    passages = [(turn, span) for turn, spans in batch for span in spans]
    texts = [document_text(search_text(turn, span)) for turn, span in passages]
    vectors = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), np.float32)
    store.put_passages(scope, [t.id for t, _ in batch], passages, vectors, embedder.id)
    return len(passages)


def _pinned_work(
    store: MemoryStore, scopes: Sequence[Scope], size: int
) -> list[tuple[Scope, list[tuple[Turn, list[Span]]]]]:
    """The stale turns of each conversation of ``scopes`` that has any, each conversation
    pinned to its current life first (one deleted meanwhile is left out)."""
    work = []
    for scope in scopes:
        with suppress(NotFoundError):
            pinned = store.pin(scope)
            if stale := stale_turns(store, pinned, size):
                work.append((pinned, stale))
    return work


def _write_conversation(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    stale: Batch,
    batch: int,
    report: ReindexReport,
    tick: Callable[[int], None],
) -> None:
    """Write the passages of one conversation's ``stale`` turns, about ``batch`` passages a
    transaction; ``tick`` gets the passages of each."""
    name = str(scope)
    report.turns[name] = report.turns.get(name, 0)
    report.passages[name] = report.passages.get(name, 0)
    chunk: list[tuple[Turn, list[Span]]] = []
    for n, item in enumerate(stale, start=1):
        chunk.append(item)
        if n == len(stale) or sum(len(s) for _, s in chunk) >= batch:
            written = _write(store, scope, embedder, chunk)
            report.turns[name] += len(chunk)
            report.passages[name] += written
            chunk = []
            tick(written)


def reindex(
    store: MemoryStore,
    embedder: Embedder,
    *,
    batch: int = 64,
    size: int = PASSAGE_CHARS,
    rounds: int = 3,
    progress: Progress | None = None,
) -> ReindexReport:
    """Build the passages of every conversation's long turns (see the module doc);
    ``progress`` gets (passages embedded, passages to embed). Each conversation is pinned to
    its life: one deleted meanwhile is left out, and one that loses a message or fact by hand
    meanwhile (whose text the passages might hold) writes nothing more and is read again, up
    to ``rounds`` times."""
    known = store.embedder()
    if known is not None and known[0] != embedder.id:
        raise EmbedderMismatchError(
            f"this store was embedded with {known[0]!r}, not {embedder.id!r}: reindex it with "
            "its own embedder (--embedder or QEMEM_EMBEDDER)"
        )
    report = ReindexReport()
    scopes = [Scope(c.id, c.namespace) for c in store.conversations()]
    work = _pinned_work(store, scopes, size)
    total = sum(len(spans) for _, stale in work for _, spans in stale)
    done = [0]

    def tick(written: int) -> None:
        done[0] += written
        if progress:
            progress(done[0], max(total, done[0]))

    for attempt in range(rounds):
        changed: list[Scope] = []
        for scope, stale in work:
            try:
                _write_conversation(store, scope, embedder, stale, batch, report, tick)
            except ConversationChangedError:
                if attempt == rounds - 1:
                    raise
                changed.append(scope)
            except NotFoundError:
                continue  # deleted meanwhile: nothing of it is left to index
        work = _pinned_work(store, [Scope(s.conversation, s.namespace) for s in changed], size)
        if not work:
            break
    return report


def reindex_store(
    store: str,
    embedder: Embedder | str | None = None,
    *,
    batch: int = 64,
    progress: Progress | None = None,
) -> ReindexReport:
    """Open the store at ``store`` (a path or URL) and build its passages with ``embedder``
    (an instance or a spec; ``QEMEM_EMBEDDER`` or the default when None): it must be the
    embedder the store was made with."""
    model = embedder if isinstance(embedder, Embedder) else open_embedder(embedder)
    opened = open_store(store)
    try:
        return reindex(opened, model, batch=batch, progress=progress)
    finally:
        opened.close()
