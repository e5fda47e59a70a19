"""Search tokens: the English-stemmed word tokens BM25 indexes and queries with.

A neutral module: the store keeps each record's tokens, retrieval scores queries with them,
and neither depends on the other for it.
"""

from __future__ import annotations

import re
import threading

import Stemmer
from bm25s.stopwords import STOPWORDS_EN

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = frozenset(STOPWORDS_EN)
_local = threading.local()


def stemmer() -> Stemmer.Stemmer:
    """This thread's English Snowball stemmer. PyStemmer's documentation forbids using one
    instance from several threads at once, so each thread gets its own."""
    instance: Stemmer.Stemmer | None = getattr(_local, "stemmer", None)
    if instance is None:
        instance = _local.stemmer = Stemmer.Stemmer("english")
    return instance


def tokenize(text: str) -> list[str]:
    """Lowercase ``text``, split into word tokens of 2+ characters, drop English stopwords and
    Snowball-stem the rest. The same function serves documents and queries."""
    words = [w for w in _TOKEN.findall(text.lower()) if w not in _STOPWORDS]
    return list(stemmer().stemWords(words))
