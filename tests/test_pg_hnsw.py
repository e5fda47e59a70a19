"""PostgreSQL's HNSW top-k when many conversations share the store: k hits from the searched
conversation (pgvector 0.6 filters an index scan's candidates after the scan, so a shared
index used to return a few rows instead of k)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from qemem.embed import HashEmbedder
from qemem.models import Session, Turn, search_text
from qemem.retrieve.index import search_index
from qemem.store import Scope

WORDS = [f"topic{n}" for n in range(300)]
EMBEDDER = HashEmbedder(64)


def _fill(store: object, conversations: int, turns: int) -> None:
    rng = random.Random(5)
    start = datetime(2024, 1, 1)
    for c in range(conversations):
        scope = Scope(f"c{c}")
        session = Session(1, start, "s1")
        records = [
            Turn(
                f"D1:{n + 1}",
                scope.conversation,
                1,
                n,
                "A",
                " ".join(rng.choice(WORDS) for _ in range(12)),
                start + timedelta(minutes=n),
            )
            for n in range(turns)
        ]
        vectors = EMBEDDER.embed([search_text(t) for t in records])
        with store.transaction():  # type: ignore[attr-defined]
            store.put_conversation(scope, ["A"])  # type: ignore[attr-defined]
            store.add_sessions(scope, [session])  # type: ignore[attr-defined]
            store.add_turns(scope, records, vectors, EMBEDDER.id)  # type: ignore[attr-defined]


def test_each_conversation_gets_k_hits_from_its_own_index(pg_url: str) -> None:
    from qemem.store.postgres import PostgresStore

    store = PostgresStore(pg_url, hnsw_min_rows=50)
    try:
        _fill(store, conversations=12, turns=60)
        store._exec("ANALYZE")  # with statistics the planner prefers the index scan
        queries = EMBEDDER.embed(["topic1 topic2 topic3", "topic250 topic7"], query=True)
        for scope in (Scope("c0"), Scope("c7")):
            found = store.nearest(scope, "turn", queries, 10)
            exact = search_index(store, scope, "turn").dense(queries, 10)
            assert found is not None
            for hits, ranked in zip(found, exact, strict=True):
                assert len(hits) == 10
                assert len(set(hits) & {rid for rid, _ in ranked}) >= 8
        indexes = [r[0] for r in store._query("SELECT indexname FROM pg_indexes", ())]
        assert sum(name.startswith("vectors_hnsw_64_") for name in indexes) == 2
        assert store.nearest(Scope("c1"), "episode", queries, 10) is None  # no episodes
    finally:
        store.close()


def test_deleting_a_conversation_drops_its_indexes_only(pg_url: str) -> None:
    from qemem.store.postgres import PostgresStore

    store = PostgresStore(pg_url, hnsw_min_rows=50)
    try:
        _fill(store, conversations=2, turns=60)
        queries = EMBEDDER.embed(["topic1 topic2"], query=True)
        pks = {}
        for scope in (Scope("c0"), Scope("c1")):
            assert store.nearest(scope, "turn", queries, 10) is not None
            pks[scope.conversation] = store._pk(scope)

        def indexes() -> set[str]:
            rows = store._query("SELECT indexname FROM pg_indexes", ())
            return {r[0] for r in rows if r[0].startswith("vectors_hnsw_")}

        assert indexes() == {
            f"vectors_hnsw_64_{pks['c0']}_turn",
            f"vectors_hnsw_64_{pks['c1']}_turn",
        }
        assert store.delete_conversation(Scope("c0"))
        assert indexes() == {f"vectors_hnsw_64_{pks['c1']}_turn"}
        assert store.nearest(Scope("c1"), "turn", queries, 10) is not None
        assert not store.delete_conversation(Scope("c0"))
    finally:
        store.close()
