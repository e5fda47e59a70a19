"""The user's messages ranked apart (qemem.retrieve.roles): restricted lists, their fusion, and
a conversation without roles left as it was."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from qemem.embed.base import HashEmbedder
from qemem.memory import Memory
from qemem.models import passage_key
from qemem.retrieve.across import fused_spaces_across
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.index import SearchIndex
from qemem.retrieve.roles import restricted_lists, row_mask
from qemem.store.base import IndexRows

WHEN = "2024-03-01T10:00:00"


def _index() -> SearchIndex:
    ids = ["D1:1", passage_key("D1:2", (0, 10)), passage_key("D1:2", (10, 20)), "D1:3"]
    tokens = [["budget", "tracker"], ["budget"], ["budget", "budget"], ["flask"]]
    matrix = np.eye(4, dtype=np.float32)
    return SearchIndex(IndexRows(ids, tokens, matrix))


def test_rows_of_owners_include_a_long_turns_passages() -> None:
    index = _index()
    assert row_mask(index.ids, {"D1:2"}).tolist() == [False, True, True, False]
    assert row_mask(index.ids, set()).tolist() == [False] * 4


def test_restricted_lists_rank_only_the_owners_rows_by_the_same_scores() -> None:
    index = _index()
    vectors = np.array([[0.1, 0.2, 0.3, 0.9]], dtype=np.float32)
    lists = restricted_lists(index, {"D1:1", "D1:3"}, vectors, [["budget"]], None)
    assert lists[(0, "dense-user")] == ["D1:3", "D1:1"]
    assert lists[(0, "bm25-user")] == ["D1:1"]  # D1:3 does not match: no BM25 entry
    cut = restricted_lists(index, {"D1:1", "D1:3"}, vectors, [["budget"]], 1)
    assert cut[(0, "dense-user")] == ["D1:3"]
    assert restricted_lists(index, {"nobody"}, vectors, [["budget"]], None) == {}


def _chat(memory: Memory, roles: bool, conversation: str = "c1") -> None:
    reply = " ".join(f"The plan covers item {n} of the budget tracker." for n in range(200))
    texts = [
        ("User", "user", "I set the budget tracker deadline to March 29."),
        ("Assistant", "assistant", reply),
        ("User", "user", "Thanks, noted."),
    ]
    messages = [
        {"session_id": "s1", "timestamp": WHEN, "speaker": speaker, "text": text}
        | ({"role": role} if roles else {})
        for speaker, role, text in texts
    ]
    memory.add_messages(conversation, messages)


def test_the_users_message_rises_in_a_conversation_with_an_assistant() -> None:
    question = "When is the budget tracker deadline?"
    with Memory.open(None, embedder=HashEmbedder()) as memory:
        _chat(memory, roles=True)
        config = RetrievalConfig(budget_turns=None, context_window=0)
        pool = memory.retrieve("c1", question, config=config)
        first = pool.order[0].units[0][0]
        methods = {r.method for i in pool.turns if i.id == "D1:1" for r in i.reasons}
        assert first == "D1:1" and {"dense-user", "bm25-user"} <= methods
        plain = memory.retrieve("c1", question, config=replace(config, user_lists=False))
        assert all(r.method in {"dense", "bm25"} for i in plain.turns for r in i.reasons)
    with Memory.open(None, embedder=HashEmbedder()) as memory:
        _chat(memory, roles=False)  # no roles: ranked as before, no restricted list
        pool = memory.retrieve("c1", question, config=config)
        assert all(r.method in {"dense", "bm25", None} for i in pool.turns for r in i.reasons)


def test_across_conversations_the_users_lists_are_merged_too() -> None:
    question = "When is the budget tracker deadline?"
    with Memory.open(None, embedder=HashEmbedder()) as memory:
        _chat(memory, roles=True, conversation="c1")
        _chat(memory, roles=True, conversation="c2")
        scopes = {c: memory.scope(c) for c in ("c1", "c2")}
        vectors = {c: memory.embedder.embed([question], query=True) for c in scopes}
        users = {c: frozenset({"D1:1", "D1:3"}) for c in scopes}
        fused = fused_spaces_across(
            memory.store, scopes, vectors, [question], depth=200, user_turns=users
        )["turn"]
        top = next(iter(fused))
        assert top[1] == "D1:1"
        assert {m for _, m, _ in fused[top].ranks} == {"dense", "bm25", "dense-user", "bm25-user"}
        plain = fused_spaces_across(memory.store, scopes, vectors, [question], depth=200)["turn"]
        assert all(m in {"dense", "bm25"} for e in plain.values() for _, m, _ in e.ranks)
