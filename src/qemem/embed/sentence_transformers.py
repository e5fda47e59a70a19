"""Adapter for any sentence-transformers model, local path or hub name (extra ``local``).

Hub downloads are for users with network access; qemem's defaults and tests never need one.
Models with query/document prompts (e5, Qwen3-Embedding) get them through ``query_prompt`` and
``passage_prompt``; for e5 models the ``query: ``/``passage: `` prefixes are applied by default.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from qemem.embed.base import normalise_rows
from qemem.errors import ConfigError, EmbedderUnavailableError


class SentenceTransformerEmbedder:
    """Wraps ``sentence_transformers.SentenceTransformer``; loads the model lazily."""

    def __init__(
        self,
        model: str,
        *,
        query_prompt: str | None = None,
        passage_prompt: str | None = None,
        batch_size: int = 32,
    ) -> None:
        is_e5 = "e5" in model.lower()
        self.model_name = model
        self.query_prompt = (
            query_prompt if query_prompt is not None else ("query: " if is_e5 else "")
        )
        self.passage_prompt = (
            passage_prompt if passage_prompt is not None else ("passage: " if is_e5 else "")
        )
        self.batch_size = batch_size
        self.id = f"st/{model}"
        self._model: Any = None
        self._dim: int | None = None
        # one load, and one encode at a time: the model is not safe for concurrent use
        self._lock = threading.RLock()

    def _load(self) -> Any:
        with self._lock:
            return self._load_unlocked()

    def _load_unlocked(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ConfigError(
                    "the sentence-transformers embedder needs: pip install 'qemem[local]'"
                ) from exc
            try:
                self._model = SentenceTransformer(self.model_name)
            except Exception as exc:
                raise EmbedderUnavailableError(
                    f"cannot load sentence-transformers model {self.model_name!r}: {exc}"
                ) from exc
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._load().get_sentence_embedding_dimension())
        return self._dim

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        prefix = self.query_prompt if query else self.passage_prompt
        with self._lock:
            vectors = self._load_unlocked().encode(
                [prefix + t for t in texts], batch_size=self.batch_size, convert_to_numpy=True
            )
        return normalise_rows(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))
