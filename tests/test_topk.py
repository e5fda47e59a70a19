"""Exact top-k fusion from lists ranked to a depth (``qemem.retrieve.topk``, issue 31): the
same items, order, scores and ranks as fusing the complete lists, on random lists with ties,
items sharing an owner, empty lists and k beyond every item; and ``Memory.search``'s hits
against the complete fusion of a store larger than the first depth."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fusion_helpers import complete_then_cut
from qemem.embed import HashEmbedder
from qemem.memory import Memory
from qemem.retrieve.across import search_across
from qemem.retrieve.fusion import ListKey, fuse_top
from qemem.retrieve.topk import ScoreList, fuse_exact, start_depth, unseen_bound
from qemem.store import SQLiteStore


def _ranking(scores: np.ndarray, positive: bool) -> list[int]:
    """The ranking ``scores`` stand for, by Python's stable sort (independent of numpy)."""
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    return [i for i in order if not positive or scores[i] > 0]


def _random_scores(rng: random.Random, n: int, positive: bool) -> np.ndarray:
    """Scores with many ties (few distinct values), some not positive when ``positive``."""
    levels = rng.randint(1, 6)
    low = -2 if positive else 0
    return np.array([rng.randint(low, levels) / 7 for _ in range(n)], dtype=np.float32)


def test_a_score_list_ranks_as_a_stable_sort() -> None:
    rng = random.Random(3)
    for _ in range(300):
        positive = rng.random() < 0.5
        scores = _random_scores(rng, rng.randint(0, 40), positive)
        ranking = _ranking(scores, positive)
        scored = ScoreList(scores, positive=positive)
        assert scored.size == len(ranking)
        for depth in (1, 2, 5, len(ranking), len(ranking) + 3):
            assert scored.head(depth) == ranking[:depth]
        where = {item: rank for rank, item in enumerate(ranking, start=1)}
        assert scored.ranks(list(range(len(scores)))) == [where.get(i) for i in range(len(scores))]


def test_exact_top_k_equals_the_complete_fusion_cut_to_k() -> None:
    rng = random.Random(11)
    for _ in range(400):
        n = rng.choice((0, 3, 20, 80))
        width = rng.randint(1, 4)  # items n // width share an owner (passages of one turn)
        scored: dict[ListKey, ScoreList] = {}
        for query in range(rng.randint(1, 3)):
            scored[(query, "dense")] = ScoreList(_random_scores(rng, n, False))
            scored[(query, "bm25")] = ScoreList(_random_scores(rng, n, True), positive=True)
        lists = {key: _ranking(s.scores, s.members is not None) for key, s in scored.items()}

        def owner(item: int, width: int = width) -> int:
            return item // width

        for k in (1, 2, 3, 10, 200):
            want = complete_then_cut(lists, k, owner)
            assert [(i, e.score, e.ranks) for i, e in fuse_top(lists, k, owner=owner).items()] == (
                want
            )
            for depth in (1, 2, 7, None):
                got = fuse_exact(scored, k, owner=owner, depth=depth)
                assert [(i, e.score, e.ranks) for i, e in got.items()] == want


def test_equal_scores_keep_first_appearance_in_the_complete_lists() -> None:
    # x and y score alike; in the complete lists x comes first (rank 3 of the first list,
    # y rank 4), but cut at depth 2 only the third list reaches them, and it ranks y first
    a, b, c, d, x, y = range(6)
    orders = [[a, b, x, y], [c, d, y, x], [y, x], [x, y]]
    scored: dict[ListKey, ScoreList] = {}
    for n, order in enumerate(orders):
        scores = np.zeros(6, np.float32)
        scores[order] = np.arange(len(order), 0, -1)
        scored[(n, "bm25")] = ScoreList(scores, positive=True)
    lists = {key: orders[n] for n, key in enumerate(scored)}
    want = complete_then_cut(lists, 2, lambda item: item)
    assert [i for i, _, _ in want] == [x, y] and want[0][1] == want[1][1]
    got = fuse_exact(scored, 2, depth=2)
    assert [(i, e.score, e.ranks) for i, e in got.items()] == want


def test_exact_top_k_of_nothing() -> None:
    empty = {(0, "dense"): ScoreList(np.zeros(0, np.float32))}
    assert fuse_exact(empty, 5) == {} and fuse_exact({}, 5) == {}
    one = {(0, "bm25"): ScoreList(np.array([0.0, 2.0], np.float32), positive=True)}
    assert fuse_exact(one, 0) == {} and list(fuse_exact(one, 9)) == [1]


def test_the_unseen_bound_and_first_depth() -> None:
    assert unseen_bound(0, 50) == 0.0
    assert unseen_bound(2, 50) == pytest.approx(2 / 111)
    assert start_depth(1) == 50 and start_depth(30) == 120


def _messages(rng: random.Random, count: int) -> list[dict[str, str]]:
    """Short and long messages (long ones become several passages) over a small vocabulary,
    so that BM25 and passages of one turn tie and repeat."""
    words = "cat garden pottery wheel budget pergola trip rain coffee guitar".split()
    out = []
    for n in range(count):
        length = rng.choice((5, 12, 400))
        text = " ".join(rng.choice(words) for _ in range(length))
        stamp = f"2024-03-{1 + n // 40:02d}T{n % 24:02d}:00:00"
        out.append({"session_id": "s1", "timestamp": stamp, "speaker": "Ana", "text": text})
    return out


def test_search_is_the_complete_fusion_cut_to_k_in_a_larger_store() -> None:
    rng = random.Random(5)
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=None, namespace="n")
    for cid in ("a", "b"):
        memory.add_messages(cid, _messages(rng, 90))
    scopes = {cid: memory.scope(cid) for cid in ("b", "a")}
    for queries in (["cat garden"], ["budget", "rain coffee"], ["zebra"], ["pottery wheel trip"]):
        complete = search_across(memory.store, scopes, "turn", queries, memory.embedder)
        assert any(hit.span is not None for _, hit in complete)
        for k in (1, 3, 10, 40):
            got = search_across(memory.store, scopes, "turn", queries, memory.embedder, k=k)
            assert got == complete[:k]
        assert memory.search("a", queries, k=5) == memory.search("a", queries, k=None)[:5]
