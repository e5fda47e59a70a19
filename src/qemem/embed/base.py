"""The ``Embedder`` protocol, a deterministic hashing embedder and selection by spec string."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from qemem.tokens import tokenize


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    ``id`` names the model (recorded in the store; vectors of different ids never mix).
    ``query`` selects the query-side encoding for asymmetric models (e5 prefixes).
    """

    @property
    def id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray: ...


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Scale each row to unit L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class HashEmbedder:
    """Deterministic, dependency-free embedder for tests and constrained machines.

    Each stemmed token and each character trigram is hashed into one of ``dim`` buckets with a
    sign; the vector is L2-normalised. Texts sharing words are close; it has no semantics beyond
    that, so use it for tests, never for quality measurements.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.id = f"hash-{dim}"

    def _features(self, text: str) -> list[str]:
        tokens = tokenize(text)
        grams = [t[i : i + 3] for t in tokens for i in range(max(1, len(t) - 2))]
        return tokens + tokens + grams

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if (value >> 32) & 1 else -1.0
        return normalise_rows(out)
