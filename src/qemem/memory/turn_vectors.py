"""The vectors of new turns: one per turn, and one per passage of each long turn.

A turn that fits in one passage (:mod:`qemem.passages`) is embedded whole, as before
passages existed (its search document, cut by :func:`~qemem.embed.documents.document_text`
as every writer cuts it). A longer turn is embedded passage by passage, so every part of it
reaches dense search; its own vector, which no search reads while it has passages, is its
first passage's (nothing is embedded twice). Ingest, append and ``reindex`` store both with
:func:`store_turn_vectors` or ``put_passages``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from qemem.embed.documents import document_text
from qemem.models import SemanticFact, Span, Turn, search_text
from qemem.passages import PASSAGE_CHARS, is_whole, split_passages
from qemem.store import MemoryStore, Scope

EmbedTexts = Callable[[Sequence[str], Callable[[int, int], None] | None], np.ndarray]
"""Document-side vectors of search documents, each cut by
:func:`~qemem.embed.documents.document_text`, in batches, reporting (texts done, texts) as it
goes (``Memory`` passes :func:`~qemem.embed.documents.embed_documents` with its embedder)."""


@dataclass(frozen=True)
class TurnVectors:
    """One turn's vectors: its own, and its passages' (none for a turn of one passage)."""

    vector: np.ndarray
    passages: tuple[Span, ...] = ()
    passage_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))


def record_embedder(embed: EmbedTexts) -> Callable[[Sequence[SemanticFact]], np.ndarray]:
    """``embed`` for records taken whole (the standing facts an ingest finds): the vectors of
    their search documents, in their order."""
    return lambda records: embed([search_text(r) for r in records], None)


def passage_spans(turn: Turn, size: int = PASSAGE_CHARS) -> list[Span]:
    """The passages of a long turn; none for a turn of one passage (it is searched whole)."""
    spans = split_passages(turn.text, size)
    return [] if is_whole(turn.text, spans) else spans


def text_count(turns: Sequence[Turn], size: int = PASSAGE_CHARS) -> int:
    """How many texts :func:`embed_turns` embeds for ``turns`` (progress totals)."""
    return sum(max(1, len(passage_spans(t, size))) for t in turns)


def embed_turns(
    embed: EmbedTexts,
    turns: Sequence[Turn],
    progress: Callable[[int, int], None] | None = None,
    *,
    size: int = PASSAGE_CHARS,
) -> list[TurnVectors]:
    """The vectors of ``turns`` (see the module doc), in their order; ``progress`` gets
    (texts embedded, texts to embed): a long turn counts once per passage."""
    texts: list[str] = []
    owners: list[tuple[int, Span | None]] = []
    for n, turn in enumerate(turns):
        spans = passage_spans(turn, size)
        if not spans:
            texts.append(document_text(search_text(turn)))
            owners.append((n, None))
        for passage in spans:
            texts.append(document_text(search_text(turn, passage)))
            owners.append((n, passage))
    vectors = embed(texts, progress)
    whole: dict[int, np.ndarray] = {}
    parts: dict[int, list[tuple[Span, np.ndarray]]] = {}
    for (n, span), vector in zip(owners, vectors, strict=True):
        if span is None:
            whole[n] = vector
        else:
            parts.setdefault(n, []).append((span, vector))
    out = []
    for n in range(len(turns)):
        if n in whole:
            out.append(TurnVectors(whole[n]))
            continue
        spans, rows = zip(*parts[n], strict=True)
        out.append(TurnVectors(rows[0], tuple(spans), np.vstack(rows)))
    return out


def store_turn_vectors(
    store: MemoryStore,
    scope: Scope,
    turns: Sequence[Turn],
    vectors: Sequence[TurnVectors],
    embedder: str,
) -> None:
    """Add ``turns`` with their vectors and the passages of the long ones (one transaction
    when the caller's; the passages only when there are any)."""
    store.add_turns(scope, turns, np.vstack([v.vector for v in vectors]), embedder)
    passages = [(t, span) for t, v in zip(turns, vectors, strict=True) for span in v.passages]
    if passages:
        rows = np.vstack([v.passage_vectors for v in vectors if v.passages])
        store.put_passages(
            scope, list(dict.fromkeys(t.id for t, _ in passages)), passages, rows, embedder
        )
