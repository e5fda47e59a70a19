"""An LRU of query embeddings: refinement rounds and repeated questions re-use the vectors of
queries already embedded, and all missing queries go to the encoder in one call."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from qemem.embed.base import Embedder

QUERY_CACHE_SIZE = 4096


class QueryCache:
    """Query vectors by (embedder id, text), least recently used evicted first."""

    def __init__(self, size: int = QUERY_CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Query vectors of ``texts`` (rows in order); those not cached are embedded in one
        ``embedder.embed`` call."""
        with self._lock:
            cached = {
                t: self._items[(embedder.id, t)] for t in texts if (embedder.id, t) in self._items
            }
            for text in cached:
                self._items.move_to_end((embedder.id, text))
        missing = [t for t in dict.fromkeys(texts) if t not in cached]
        if missing:
            vectors = embedder.embed(missing, query=True)
            fresh = dict(zip(missing, vectors, strict=True))
            cached.update(fresh)
            with self._lock:
                for text, vector in fresh.items():
                    self._items[(embedder.id, text)] = vector
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        if not texts:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.stack([cached[t] for t in texts])

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


query_cache = QueryCache()
"""The process-wide query cache :func:`~qemem.retrieve.pool.build_pool` uses."""
