"""Search tokens: the English-stemmed word tokens BM25 indexes and queries with.

A neutral module: the store keeps each record's tokens, retrieval scores queries with them,
and neither depends on the other for it.
"""

from __future__ import annotations

import re
import threading

import Stemmer

from qemem.lexicon import BM25_STOPWORDS

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
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
    words = [w for w in _TOKEN.findall(text.lower()) if w not in BM25_STOPWORDS]
    return list(stemmer().stemWords(words))
