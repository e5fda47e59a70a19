"""Retrieval: tokenisation, BM25, dense ranking and rank fusion."""
