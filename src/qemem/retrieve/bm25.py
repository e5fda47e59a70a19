"""BM25 over one search scope, on English-stemmed tokens (bm25s + PyStemmer).

Statistics (document frequencies, average length) are those of the documents indexed, which is
always exactly the scope searched: one space of one conversation.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np

from qemem.tokens import tokenize

__all__ = ["BM25Index", "tokenize", "top_positive"]


class BM25Index:
    """A BM25 (Lucene variant, k1=1.5, b=0.75) index over pre-tokenised documents."""

    def __init__(self, documents: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75):
        self.size = len(documents)
        self._model: bm25s.BM25 | None = None
        if any(documents):
            self._model = bm25s.BM25(k1=k1, b=b)
            self._model.index([list(doc) for doc in documents], show_progress=False)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every indexed document for the query (0 where no term matches)."""
        if self._model is None or not query_tokens:
            return np.zeros(self.size, dtype=np.float32)
        vocab = self._model.vocab_dict
        known = [t for t in query_tokens if t in vocab]
        if not known:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._model.get_scores(known), dtype=np.float32)

    def rank(self, query_tokens: Sequence[str], k: int | None = None) -> list[tuple[int, float]]:
        """Documents with a positive score, best first, as (index, score); at most ``k``."""
        scores = self.scores(query_tokens)
        return top_positive(scores, k)


def top_positive(scores: np.ndarray, k: int | None = None) -> list[tuple[int, float]]:
    """Indices of the positive entries of ``scores`` in descending order (ties by index)."""
    positive = np.flatnonzero(scores > 0)
    order = positive[np.lexsort((positive, -scores[positive]))]
    if k is not None:
        order = order[:k]
    return [(int(i), float(scores[i])) for i in order]
