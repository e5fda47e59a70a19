"""The text of a record that its vector is made from, one rule for every writer.

Ingest, append, ``reembed``, the build and imports all embed a record's search document cut
at :data:`EMBED_CHARS` characters (BM25 indexes the whole of it), so re-embedding a store
reproduces the vectors the writers stored. Long messages reach dense search through their
passages, each shorter than the cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from qemem.embed.base import Embedder

EMBED_CHARS = 4000
"""Only the first characters of a record's search document are embedded."""


def document_text(text: str) -> str:
    """The part of a search document that is embedded: its first :data:`EMBED_CHARS`
    characters."""
    return text[:EMBED_CHARS]


def embed_documents(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    batch: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Document-side vectors of search documents (each cut by :func:`document_text`), in
    batches of ``batch``; ``progress`` gets (texts done, texts)."""
    cut = [document_text(t) for t in texts]
    parts = []
    for start in range(0, len(cut), batch):
        parts.append(embedder.embed(cut[start : start + batch]))
        if progress:
            progress(min(start + batch, len(cut)), len(cut))
    if not parts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.vstack(parts)
