"""Retrieval: tokenisation, BM25, dense ranking, rank fusion, planning and the evidence pool.

Importing this package registers the fake LLM's offline ``plan`` responder.
"""

from qemem.retrieve import fake as _fake  # noqa: F401  (registers the fake plan responder)
