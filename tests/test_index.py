"""Search indexes (one matrix product for all queries), the query-embedding LRU, store URLs
and the per-thread stemmer."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from qemem.embed import HashEmbedder
from qemem.embed.cache import QueryCache
from qemem.errors import ConfigError, StoreError
from qemem.memory import Memory
from qemem.retrieve.fusion import cosine_rank
from qemem.retrieve.index import SearchIndex, search_index
from qemem.store import IndexRows, Scope, SQLiteStore, open_store, parse_store_url
from qemem.tokens import stemmer, tokenize


def test_dense_scores_all_queries_like_one_cosine_ranking_each() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(30, 8)).astype(np.float32)
    queries = rng.normal(size=(4, 8)).astype(np.float32)
    index = SearchIndex(IndexRows([f"t{i}" for i in range(30)], [["a"]] * 30, matrix))
    for k in (None, 5):
        lists = index.dense(queries, k)
        for query, ranked in zip(queries, lists, strict=True):
            assert [rid for rid, _ in ranked] == [f"t{i}" for i, _ in cosine_rank(matrix, query, k)]
    assert SearchIndex(IndexRows([], [], np.zeros((0, 8), np.float32))).dense(queries) == [[]] * 4


def test_sparse_ranks_positive_bm25_scores() -> None:
    index = SearchIndex(
        IndexRows(["a", "b", "c"], [["cat", "miso"], ["dog"], ["cat"]], np.eye(3, dtype=np.float32))
    )
    [ranked, nothing] = index.sparse([["miso", "cat"], ["zebra"]])
    assert [rid for rid, _ in ranked] == ["a", "c"] and nothing == []


def test_search_index_is_cached_until_its_scope_changes(memory: Memory) -> None:
    scope = Scope("demo-1")
    index = search_index(memory.store, scope, "turn")
    assert search_index(memory.store, scope, "turn") is index
    memory.store.set_state(scope, "k", "v")  # state is not indexed: no new version
    assert search_index(memory.store, scope, "turn") is index
    memory.store.put_conversation(scope, ["Someone new"])
    assert search_index(memory.store, scope, "turn") is not index


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(32)
        self.id = "counting-32"
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts, query=query)


def test_query_cache_embeds_missing_queries_in_one_call() -> None:
    cache, embedder = QueryCache(size=3), CountingEmbedder()
    first = cache.embed(embedder, ["a cat", "a dog", "a cat"])
    assert embedder.calls == [["a cat", "a dog"]]
    assert np.array_equal(first[0], first[2])
    again = cache.embed(embedder, ["a dog", "a bird"])
    assert embedder.calls[1:] == [["a bird"]] and np.array_equal(again[0], first[1])
    cache.embed(embedder, ["x", "y"])  # evicts the least recently used ("a cat")
    cache.embed(embedder, ["a cat"])
    assert embedder.calls[-1] == ["a cat"]
    assert np.array_equal(embedder.embed(["a cat"], query=True)[0], first[0])


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        (None, ("sqlite", ":memory:")),
        ("memory.db", ("sqlite", "memory.db")),
        ("dir/with:colon.db", ("sqlite", "dir/with:colon.db")),
        ("sqlite:///rel/m.db", ("sqlite", "rel/m.db")),
        ("sqlite:////abs/m.db", ("sqlite", "/abs/m.db")),
        ("sqlite://", ("sqlite", ":memory:")),
        ("postgresql://u@h/db", ("postgresql", "postgresql://u@h/db")),
        ("postgres://u:pw@h:5433/db", ("postgresql", "postgres://u:pw@h:5433/db")),
    ],
)
def test_store_urls(url: str | None, parsed: tuple[str, str]) -> None:
    assert parse_store_url(url) == parsed


@pytest.mark.parametrize("url", ["mysql://u@h/db", "postgresql:", "sqlite:m.db", "s3://b/k"])
def test_a_scheme_is_never_a_file_path(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"sqlite:///|postgresql://"):
        open_store(url)
    assert list(tmp_path.iterdir()) == []  # no file was created


def test_sqlite_url_opens_a_file(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    assert isinstance(store, SQLiteStore) and (tmp_path / "m.db").exists()
    store.close()


def test_each_thread_has_its_own_stemmer() -> None:
    texts = [f"running runners ran {i} races quickly happily" for i in range(400)]
    serial = [tokenize(t) for t in texts]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(tokenize, texts)) == serial
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(stemmer()))
    thread.start()
    thread.join()
    assert seen[0] is not stemmer() and stemmer() is stemmer()


@pytest.mark.slow
def test_cli_takes_store_urls(
    pg_url: str, sample_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from qemem.cli import app

    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    refused = runner.invoke(app, ["conversations", "--store", "mysql://u@h/db"])
    assert isinstance(refused.exception, ConfigError)
    assert "unknown store scheme 'mysql'" in str(refused.exception)
    monkeypatch.setenv("QEMEM_STORE", pg_url)
    result = runner.invoke(app, ["ingest", str(sample_path), "--quiet"])
    assert result.exit_code == 0 and "+65 turns" in result.output
    listed = runner.invoke(app, ["conversations"])
    assert "demo-1" in listed.output and list(tmp_path.iterdir()) == []


def test_unreachable_postgres_is_a_store_error() -> None:
    with pytest.raises(StoreError, match=r"cannot open store postgresql://u:\*\*\*@"):
        open_store("postgresql://u:secret@127.0.0.1:1/none?connect_timeout=2")
