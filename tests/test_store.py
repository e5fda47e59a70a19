"""The store contract, on both backends (SQLite and PostgreSQL + pgvector): round trips,
provenance, deletion, embedder bookkeeping, migrations, transactions, per-scope versions,
concurrent writers, and identical pools."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from qemem.embed import HashEmbedder
from qemem.errors import EmbedderMismatchError, NotFoundError, StoreError
from qemem.memory import Memory
from qemem.models import Episode, Pool, SemanticFact
from qemem.retrieve.index import search_index
from qemem.store import Scope, SQLiteStore, open_store
from qemem.store.base import Stored, select_records
from qemem.store.schema import SCHEMA_VERSION

SCOPE = Scope("demo-1")
TABLES = (
    "conversations",
    "sessions",
    "turns",
    "episodes",
    "episode_turns",
    "facts",
    "fact_episodes",
    "vectors",
    "state",
)
QUESTION = "What is the name of Priya's older cat, and when did she adopt it?"


@pytest.fixture
def memory(store_url: str, sample_path: Path) -> Iterator[Memory]:
    """The sample conversation in a store of each backend (overrides conftest's in-memory one)."""
    with Memory.open(store_url, embedder=HashEmbedder()) as mem:
        mem.ingest(sample_path)
        yield mem


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
    store, scope = memory.store, memory.scope("demo-1")
    store.add_episodes(scope, [episode], memory.embed_documents([episode]), memory.embedder.id)
    store.put_facts(scope, [fact], memory.embed_documents([fact]), memory.embedder.id)
    return episode, fact


def count(memory: Memory, table: str) -> int:
    """Rows of ``table`` (both backends' ``_query`` take plain SQL)."""
    return int(memory.store._query(f"SELECT COUNT(*) FROM {table}")[0][0])  # type: ignore[attr-defined]


def test_round_trip_of_all_three_spaces(memory: Memory) -> None:
    episode, fact = add_derived(memory)
    assert memory.episodes("demo-1") == [episode]
    assert memory.facts("demo-1") == [fact]
    assert memory.episodes("demo-1", ["E1", "E9"]) == [episode]
    ids, matrix = memory.store.vectors(SCOPE, "episode")
    assert ids == ["E1"] and matrix.shape == (1, memory.embedder.dim)
    assert np.array_equal(matrix, memory.embed_documents([episode]))
    rows = memory.store.index_rows(SCOPE, "turn")
    assert rows.ids == [t.id for t in memory.turns("demo-1")]
    assert rows.tokens[0] and len(rows.tokens) == rows.matrix.shape[0]


def test_put_facts_replaces_content_and_unites_provenance(memory: Memory) -> None:
    add_derived(memory)
    updated = SemanticFact("S1", "demo-1", "Priya does pottery weekly.", 1, ("E1", "E1"))
    memory.store.put_facts(SCOPE, [updated], memory.embed_documents([updated]), memory.embedder.id)
    [stored] = memory.facts("demo-1")
    assert stored.episode_ids == ("E1",) and stored.content == "Priya does pottery weekly."
    assert count(memory, "facts") == 1 == count(memory, "fact_episodes")


def test_episode_must_cite_existing_turns(memory: Memory) -> None:
    bad = Episode("E2", "demo-1", 1, "t", "c", datetime(2024, 1, 1), ("D9:99",))
    with pytest.raises(StoreError, match="write refused"):
        memory.store.add_episodes(SCOPE, [bad], memory.embed_documents([bad]), memory.embedder.id)
    assert memory.episodes("demo-1") == []
    assert count(memory, "vectors") == len(memory.turns("demo-1"))


def test_delete_removes_everything_derived(memory: Memory) -> None:
    add_derived(memory)
    memory.store.set_state(SCOPE, "built", "1")
    assert memory.delete("demo-1") is True
    assert memory.delete("demo-1") is False
    for table in TABLES:
        assert count(memory, table) == 0, table
    with pytest.raises(NotFoundError, match="ingest it first"):
        memory.turns("demo-1")


def test_delete_episodes_drops_their_links_vectors_and_orphaned_facts(memory: Memory) -> None:
    episode, fact = add_derived(memory)
    kept = SemanticFact("S2", "demo-1", "Priya likes clay.", 1, ("E1", "E2"))
    second = Episode("E2", "demo-1", 1, "Clay", "Clay talk.", episode.timestamp, episode.turn_ids)
    store, scope = memory.store, memory.scope("demo-1")
    store.add_episodes(scope, [second], memory.embed_documents([second]), memory.embedder.id)
    store.put_facts(scope, [kept], memory.embed_documents([kept]), memory.embedder.id)
    before = store.version(scope)
    store.delete_episodes(scope, ["E1"])
    assert [e.id for e in memory.episodes("demo-1")] == ["E2"]
    assert [(f.id, f.episode_ids) for f in memory.facts("demo-1")] == [("S2", ("E2",))]
    assert store.vectors(scope, "episode")[0] == ["E2"]
    assert store.vectors(scope, "fact")[0] == ["S2"]
    assert store.version(scope) != before
    assert fact.id not in {f.id for f in memory.facts("demo-1")}


def test_mixing_embedders_is_refused(memory: Memory) -> None:
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


def test_store_persists_and_reopens(store_url: str, sample_path: Path) -> None:
    with Memory.open(store_url, embedder=HashEmbedder()) as mem:
        mem.ingest(sample_path)
        turns = mem.turns("demo-1")
        assert mem.ingest(sample_path).turns_added == 0  # idempotent
    with Memory.open(store_url, embedder=HashEmbedder()) as mem:
        assert mem.turns("demo-1") == turns
        assert mem.search("demo-1", "Biscuit", k=1)[0].record.text


def test_sqlite_file_is_wal_at_the_current_schema(tmp_path: Path, sample_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory.open(f"sqlite:///{path}", embedder=HashEmbedder()) as mem:
        mem.ingest(sample_path)
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # while writers run
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conn.close()
    # the last writer out leaves rollback mode, so readers create no side files (issue 21)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_newer_schema_is_refused(store_url: str) -> None:
    store = open_store(store_url)
    if isinstance(store, SQLiteStore):
        store._conn.execute("PRAGMA user_version = 99")
    else:
        store._exec("UPDATE schema_version SET version = 99")  # type: ignore[attr-defined]
    store.close()
    with pytest.raises(StoreError, match="upgrade qemem"):
        open_store(store_url)


def test_failed_transaction_rolls_back(memory: Memory) -> None:
    before = memory.turns("demo-1")
    with pytest.raises(RuntimeError), memory.store.transaction():
        memory.store.set_state(SCOPE, "k", "v")
        raise RuntimeError("boom")
    assert memory.store.get_state(SCOPE, "k") is None
    assert memory.turns("demo-1") == before


def test_index_cache_sees_writes_from_another_connection(store_url: str, sample_path: Path) -> None:
    with (
        Memory.open(store_url, embedder=HashEmbedder()) as reader,
        Memory.open(store_url, embedder=HashEmbedder()) as writer,
    ):
        writer.ingest(sample_path)
        assert reader.search("demo-1", "Miso", k=3)
        assert reader.search("demo-1", "pottery", space="episode") == []
        episode, _ = add_derived(writer)
        assert reader.store.vectors(SCOPE, "episode")[0] == [episode.id]
        assert [r.record.id for r in reader.search("demo-1", "pottery", space="episode")] == ["E1"]


def test_cached_reads_see_writes_inside_and_after_a_transaction(memory: Memory) -> None:
    assert memory.episodes("demo-1") == []  # warms the cache
    with memory.store.transaction():
        episode, fact = add_derived(memory)
        assert memory.store.version(SCOPE) is None  # uncommitted: nothing is cached
        assert memory.episodes("demo-1") == [episode]  # the transaction's own write
        assert memory.store.vectors(SCOPE, "fact")[0] == [fact.id]
    assert memory.episodes("demo-1") == [episode]
    listed = memory.turns("demo-1")
    listed.clear()  # callers get copies, never the cache itself
    assert memory.turns("demo-1")


def test_versions_are_per_scope_and_never_reused(memory: Memory, sample_path: Path) -> None:
    other = Memory(memory.store, memory.embedder, namespace="other")
    other.ingest(sample_path)
    mine, theirs = memory.store.version(SCOPE), other.store.version(other.scope("demo-1"))
    index = search_index(memory.store, SCOPE, "turn")
    add_derived(other)  # writes to the other namespace's demo-1 only
    assert memory.store.version(SCOPE) == mine
    assert other.store.version(other.scope("demo-1")) != theirs
    assert search_index(memory.store, SCOPE, "turn") is index  # not rebuilt
    memory.delete("demo-1")
    memory.ingest(sample_path)
    assert memory.store.version(SCOPE) not in (mine, None)
    assert search_index(memory.store, SCOPE, "turn") is not index


def test_conversation_reads_follow_writes(memory: Memory) -> None:
    """A conversation read (cached by version) shows the sessions and speakers
    written after it."""
    before = memory.conversation("demo-1")
    assert memory.conversation("demo-1") == before
    memory.add_messages(
        "demo-1",
        [
            {
                "session_id": "later",
                "timestamp": "2030-01-01T10:00:00",
                "speaker": "Newcomer",
                "text": "hello again",
            }
        ],
    )
    after = memory.conversation("demo-1")
    assert "Newcomer" in after.speakers
    assert len(after.sessions) == len(before.sessions) + 1


def test_sqlite_reads_do_not_wait_for_a_write_transaction(
    tmp_path: Path, sample_path: Path
) -> None:
    """Another thread reads the last commit while a write transaction is open."""
    with Memory.open(str(tmp_path / "s.db"), embedder=HashEmbedder()) as mem:
        mem.ingest(sample_path)
        count = len(mem.turns("demo-1"))
        entered, release = threading.Event(), threading.Event()

        def write() -> None:
            with mem.store.transaction():
                mem.store.set_state(SCOPE, "probe", "1")
                entered.set()
                release.wait(10)

        writer = threading.Thread(target=write)
        writer.start()
        entered.wait(10)
        read: list[int | None] = []
        reader = threading.Thread(
            target=lambda: read.extend([len(mem.turns("demo-1")), mem.store.version(SCOPE)])
        )
        reader.start()
        reader.join(5)
        finished = not reader.is_alive()
        release.set()
        writer.join()
        reader.join()
        assert finished and read[0] == count and read[1] is not None
        assert mem.store.get_state(SCOPE, "probe") == "1"


def test_concurrent_writers_lose_and_duplicate_nothing(store_url: str, sample_path: Path) -> None:
    """Four connections ingest the same file into four namespaces at once, each twice."""
    errors: list[BaseException] = []

    def ingest(namespace: str) -> None:
        try:
            with Memory.open(store_url, embedder=HashEmbedder(), namespace=namespace) as mem:
                mem.ingest(sample_path)
                mem.ingest(sample_path)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with Memory.open(store_url, embedder=HashEmbedder()) as mem:
        mem.ingest(sample_path)
        per_conversation = len(mem.turns("demo-1"))
        threads = [threading.Thread(target=ingest, args=(f"ns{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert count(mem, "turns") == 5 * per_conversation == count(mem, "vectors")
        assert count(mem, "conversations") == 5


@pytest.mark.slow
def test_both_backends_give_the_same_pool(pg_url: str, tmp_path: Path, sample_path: Path) -> None:
    pools: list[Pool] = []
    for url in (str(tmp_path / "m.db"), pg_url):
        with Memory.open(url, embedder=HashEmbedder()) as mem:
            mem.ingest(sample_path)
            add_derived(mem)
            pools.append(mem.retrieve("demo-1", QUESTION))
    assert pools[0] == pools[1] and pools[0].turns and pools[0].episodes


@pytest.mark.slow
def test_hnsw_top_k_gives_the_exact_pool(pg_url: str, sample_path: Path) -> None:
    from qemem.store.postgres import PostgresStore

    exact = Memory(PostgresStore(pg_url), HashEmbedder())
    hnsw = Memory(PostgresStore(pg_url, hnsw_min_rows=1), HashEmbedder())
    with exact, hnsw:
        exact.ingest(sample_path)
        add_derived(exact)
        queries = exact.embedder.embed([QUESTION, "pottery class"], query=True)
        nearest = hnsw.store.nearest(SCOPE, "turn", queries, 10)  # type: ignore[attr-defined]
        scanned = search_index(exact.store, SCOPE, "turn").dense(queries, 10)
        assert nearest == [[rid for rid, _ in ranked] for ranked in scanned]
        assert exact.store.nearest(SCOPE, "turn", queries, 10) is None  # type: ignore[attr-defined]
        assert hnsw.retrieve("demo-1", QUESTION) == exact.retrieve("demo-1", QUESTION)


def test_records_by_id_come_from_an_index_kept_with_the_cached_records(memory: Memory) -> None:
    turns = memory.store.turns(SCOPE)
    picked = [turns[3].id, "nope", turns[0].id]
    assert memory.store.turns(SCOPE, picked) == [turns[3], turns[0]]
    stored = Stored(turns)
    assert select_records(stored, picked) == [turns[3], turns[0]]
    assert stored.by_id() is stored.by_id() and len(stored.by_id()) == len(turns)
    assert select_records(stored, None) == turns and select_records(turns, picked[:1]) == [turns[3]]
