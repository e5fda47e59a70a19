"""Search across conversations (issue 22, item 6): the merge math of ``qemem.retrieve.across``
and ``Memory.search_many`` over two conversations of one namespace."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from fusion_helpers import complete_then_cut
from qemem.embed import HashEmbedder
from qemem.errors import InputError, NotFoundError
from qemem.memory import Memory, SearchResult
from qemem.memory.searching import MAX_CONVERSATIONS
from qemem.models import Turn, passage_key, split_key
from qemem.retrieve.across import (
    fuse_across,
    fused_spaces_across,
    merge_by_score,
    search_across,
)
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.fusion import ListKey, best_items, fuse_lists, fuse_top, rrf
from qemem.retrieve.pool import dense_vectors, fused_spaces
from qemem.retrieve.search import hybrid_search
from qemem.store import SQLiteStore
from service_helpers import MESSAGES


def test_merge_by_score_ranks_weak_conversations_below_strong_hits() -> None:
    lists = {"strong": [("s1", 0.9), ("s2", 0.8)], "weak": [("w1", 0.2), ("w2", 0.1)]}
    # interleaving would give s1, w1, s2, w2: the weak conversation's top hit second
    assert merge_by_score(lists) == [
        ("strong", "s1"),
        ("strong", "s2"),
        ("weak", "w1"),
        ("weak", "w2"),
    ]
    assert merge_by_score({"a": [("x", 0.5)], "b": [("x", 0.7)]}) == [("b", "x"), ("a", "x")]
    assert merge_by_score({"a": [("x", 0.5)], "b": [("y", 0.5)]}) == [("a", "x"), ("b", "y")]
    assert merge_by_score({}) == []


def test_fuse_across_keeps_equal_ids_of_different_conversations_apart() -> None:
    dense = [{"a": [("D1:1", 0.9), ("D1:2", 0.1)], "b": [("D1:1", 0.5)]}]
    sparse = [{"a": [], "b": [("D1:1", 3.0)]}]
    hits = fuse_across(dense, sparse, "turn")
    assert [(cid, h.id) for cid, h in hits] == [("b", "D1:1"), ("a", "D1:1"), ("a", "D1:2")]
    (_, top), (_, second), _ = hits
    assert top.ranks == {"dense:0": 2, "bm25:0": 1}
    assert top.score == pytest.approx(1 / 62 + 1 / 61)
    assert second.ranks == {"dense:0": 1}


def test_top_k_fusion_equals_the_complete_fusion_cut_to_k() -> None:
    rng = random.Random(7)
    passages = [passage_key(f"t{n}", (s, s + 9)) for n in range(40, 48) for s in (0, 10)]
    items = [f"t{n}" for n in range(40)] + passages

    def owner(item: str) -> str:
        return split_key(item)[0]

    for _ in range(200):
        lists: dict[ListKey, list[str]] = {
            (q, m): rng.sample(items, rng.randint(0, len(items)))
            for q in range(rng.randint(1, 3))
            for m in ("dense", "bm25")
        }
        for k in (0, 1, 3, 10, 60, None):
            want = complete_then_cut(lists, k, owner)
            got = fuse_top(lists, k, owner=owner)
            assert [(i, e.score, e.ranks) for i, e in got.items()] == want
            assert best_items(rrf(lists.values()), k, owner) == [i for i, _, _ in want]


def test_top_k_keeps_tied_items_in_order_of_first_appearance() -> None:
    lists: dict[ListKey, list[str]] = {(0, "dense"): ["a", "b"], (0, "bm25"): ["b", "a"]}
    assert list(fuse_top(lists, 1)) == ["a"] == list(fuse_lists(lists))[:1]
    assert best_items({}, 5) == [] and best_items({"x": 1.0}, 0) == []


@pytest.fixture
def two(sample_path: Path) -> Memory:
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=None, namespace="alice")
    memory.ingest(sample_path)
    memory.add_messages("c1", MESSAGES)
    return memory


def test_search_many_ranks_both_conversations_together(two: Memory) -> None:
    results = two.search_many(["demo-1", "c1"], "grey cat named Pixel", k=None)
    assert results[0].conversation == "c1" and results[0].record.id == "m1"
    assert {r.conversation for r in results} == {"demo-1", "c1"}
    assert all(r.conversation == r.record.conversation_id for r in results)
    scores = [r.hit.score for r in results]
    assert scores == sorted(scores, reverse=True)
    assert len(two.search_many(["c1", "demo-1"], "pottery", k=3)) == 3


def test_one_conversation_ranks_as_hybrid_search(two: Memory) -> None:
    queries = ["pottery class", "wheel"]
    alone = hybrid_search(two.store, two.scope("demo-1"), "turn", queries, two.embedder, k=7)
    across = search_across(
        two.store, {"demo-1": two.scope("demo-1")}, "turn", queries, two.embedder, k=7
    )
    assert across == [("demo-1", hit) for hit in alone] and len(alone) == 7
    assert two.search_many(["demo-1"], queries, k=7) == two.search("demo-1", queries, k=7)
    assert two.search_many(["c1", "c1"], "Pixel") == two.search("c1", "Pixel")


def test_one_conversation_fuses_every_space_as_the_pool_does(two: Memory) -> None:
    texts, config = ["pottery class", "cat"], RetrievalConfig()
    scope = two.scope("demo-1")
    alone = fused_spaces(two.store, scope, two.embedder, texts, config)
    vectors = {"demo-1": dense_vectors(two.embedder, texts, ("Priya", "Tomas"), config)}
    across = fused_spaces_across(two.store, {"demo-1": scope}, vectors, texts, depth=config.depth)
    for space, fused in alone.items():
        assert [(cid, rid) for cid, rid in across[space]] == [("demo-1", r) for r in fused]
        assert [e.score for e in across[space].values()] == [e.score for e in fused.values()]


def test_search_many_refuses_bad_conversation_lists(two: Memory) -> None:
    with pytest.raises(NotFoundError):
        two.search_many(["demo-1", "nope"], "pottery")
    with pytest.raises(InputError, match="no conversations"):
        two.search_many([], "pottery")
    with pytest.raises(InputError, match="a list"):
        two.search_many("demo-1", "pottery")
    with pytest.raises(InputError, match=f"the {MAX_CONVERSATIONS}"):
        two.search_many([f"c{i}" for i in range(MAX_CONVERSATIONS + 1)], "pottery")
    with pytest.raises(InputError):
        two.search_many(["c1"], " ")


def test_a_result_without_a_conversation_names_its_records() -> None:
    # what a server from before the field sends: the client fills it from the record
    hit = {"space": "turn", "id": "m1", "score": 0.1, "ranks": {}}
    record = {"id": "m1", "conversation_id": "c9", "session": 1, "position": 0, "speaker": "A"}
    old = [{"hit": hit, "record": {**record, "text": "x", "timestamp": "2024-01-01T00:00:00"}}]
    [result] = TypeAdapter(list[SearchResult]).validate_python(old)
    assert result.conversation == "c9" and isinstance(result.record, Turn)
