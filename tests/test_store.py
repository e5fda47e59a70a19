"""SQLite store: round trips, provenance, deletion, embedder bookkeeping, migrations."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from qemem.embed import HashEmbedder
from qemem.errors import EmbedderMismatchError, NotFoundError, StoreError
from qemem.memory import Memory
from qemem.models import Episode, SemanticFact
from qemem.store import Scope, SQLiteStore
from qemem.store.schema import SCHEMA_VERSION

SCOPE = Scope("demo-1")


def add_derived(memory: Memory) -> tuple[Episode, SemanticFact]:
    turns = memory.turns("demo-1")[:4]
    episode = Episode(
        "E1",
        "demo-1",
        1,
        "Pottery class",
        "Priya started a pottery class.",
        turns[0].timestamp,
        tuple(t.id for t in turns[:3]),
    )
    fact = SemanticFact("S1", "demo-1", "Priya does pottery.", 1, ("E1",))
    store = memory.store
    store.add_episodes(SCOPE, [episode], memory.embed_documents([episode]), memory.embedder.id)
    store.put_facts(SCOPE, [fact], memory.embed_documents([fact]), memory.embedder.id)
    return episode, fact


def test_round_trip_of_all_three_spaces(memory: Memory) -> None:
    episode, fact = add_derived(memory)
    assert memory.episodes("demo-1") == [episode]
    assert memory.facts("demo-1") == [fact]
    assert memory.episodes("demo-1", ["E1", "E9"]) == [episode]
    ids, matrix = memory.store.vectors(SCOPE, "episode")
    assert ids == ["E1"] and matrix.shape == (1, memory.embedder.dim)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0)


def test_put_facts_replaces_content_and_unites_provenance(memory: Memory) -> None:
    add_derived(memory)
    updated = SemanticFact("S1", "demo-1", "Priya does pottery.", 1, ("E1", "E1"))
    memory.store.put_facts(SCOPE, [updated], memory.embed_documents([updated]), memory.embedder.id)
    assert memory.facts("demo-1")[0].episode_ids == ("E1",)


def test_episode_must_cite_existing_turns(memory: Memory) -> None:
    bad = Episode("E2", "demo-1", 1, "t", "c", datetime(2024, 1, 1), ("D9:99",))
    with pytest.raises(sqlite3.IntegrityError):
        memory.store.add_episodes(SCOPE, [bad], memory.embed_documents([bad]), memory.embedder.id)
    assert memory.episodes("demo-1") == []


def test_delete_removes_everything_derived(memory: Memory) -> None:
    add_derived(memory)
    memory.store.set_state(SCOPE, "built", "1")
    assert memory.delete("demo-1") is True
    assert memory.delete("demo-1") is False
    conn = memory.store._conn  # type: ignore[attr-defined]
    for table in (
        "conversations",
        "sessions",
        "turns",
        "episodes",
        "episode_turns",
        "facts",
        "fact_episodes",
        "vectors",
        "state",
    ):
        assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
    with pytest.raises(NotFoundError, match="ingest it first"):
        memory.turns("demo-1")


def test_mixing_embedders_is_refused(memory: Memory, sample_path: Path) -> None:
    other = Memory(memory.store, HashEmbedder(dim=64))
    with pytest.raises(EmbedderMismatchError, match="hash-256"):
        other.search("demo-1", "pottery")
    turn = memory.turns("demo-1")[:1]
    with pytest.raises(EmbedderMismatchError, match="refusing to mix"):
        memory.store.add_episodes(
            SCOPE,
            [Episode("E5", "demo-1", 1, "t", "c", turn[0].timestamp, (turn[0].id,))],
            np.ones((1, 64), dtype=np.float32),
            "hash-64",
        )
    assert memory.store.embedder() == ("hash-256", 256)


def test_file_store_persists_and_reopens(tmp_path: Path, sample_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(path, embedder=HashEmbedder()) as mem:
        mem.ingest(sample_path)
        turns = mem.turns("demo-1")
    with Memory.open(path, embedder=HashEmbedder()) as mem:
        assert mem.turns("demo-1") == turns
        assert mem.search("demo-1", "Biscuit", k=1)[0].record.text
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="upgrade qemem"):
        SQLiteStore(path)


def test_failed_transaction_rolls_back(memory: Memory) -> None:
    before = memory.turns("demo-1")
    with pytest.raises(RuntimeError), memory.store.transaction():
        memory.store.set_state(SCOPE, "k", "v")
        raise RuntimeError("boom")
    assert memory.store.get_state(SCOPE, "k") is None
    assert memory.turns("demo-1") == before


def test_index_cache_sees_writes_from_another_connection(tmp_path: Path, sample_path: Path) -> None:
    path = tmp_path / "shared.db"
    reader = Memory.open(path, embedder=HashEmbedder())
    writer = Memory.open(path, embedder=HashEmbedder())
    writer.ingest(sample_path)
    assert reader.search("demo-1", "Miso", k=3)
    episode, _ = add_derived(writer)
    ids, _ = reader.store.vectors(SCOPE, "episode")
    assert ids == [episode.id]
    reader.close()
    writer.close()


def test_cached_reads_see_writes_inside_and_after_a_transaction(memory: Memory) -> None:
    assert memory.episodes("demo-1") == []  # warms the cache
    with memory.store.transaction():
        episode, fact = add_derived(memory)
        assert memory.episodes("demo-1") == [episode]  # the transaction's own write
        assert memory.store.vectors(SCOPE, "fact")[0] == [fact.id]
    assert memory.episodes("demo-1") == [episode]
    listed = memory.turns("demo-1")
    listed.clear()  # callers get copies, never the cache itself
    assert memory.turns("demo-1")
