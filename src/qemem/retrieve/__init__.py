"""Retrieval: tokenisation, BM25, dense ranking, rank fusion, planning and the evidence pool."""
