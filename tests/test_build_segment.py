"""Segmentation: deterministic repair of the model's groups, the size cap, the fallback."""

from __future__ import annotations

import random

import pytest

from qemem.build import BuildConfig, build_memory, repair_groups, windows
from qemem.embed import HashEmbedder
from qemem.errors import LLMCallError
from qemem.llm import LLMClient, LLMRequest, LLMResponse
from qemem.memory import Memory
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

SAMPLE = "src/qemem/data/sample.json"
SCOPE = Scope("demo-1")


def test_missing_turns_join_the_group_before_them() -> None:
    assert repair_groups([[0, 1], [4, 5]], 6, 10) == [[0, 1, 2, 3], [4, 5]]


def test_missing_leading_turns_join_the_first_group() -> None:
    assert repair_groups([[2, 3], [4]], 5, 10) == [[0, 1, 2, 3], [4]]


def test_duplicates_keep_their_first_mention() -> None:
    assert repair_groups([[0, 1, 2], [2, 3], [3, 4, 5]], 6, 10) == [[0, 1, 2], [3], [4, 5]]


def test_out_of_range_indices_are_dropped() -> None:
    assert repair_groups([[0, 1, -1, 9], [2, 3, 4]], 4, 10) == [[0, 1], [2, 3]]


def test_groups_become_ordered_contiguous_runs() -> None:
    assert repair_groups([[3, 4], [0, 1, 2]], 5, 10) == [[0, 1, 2], [3, 4]]
    assert repair_groups([[0, 1, 4], [2, 3]], 5, 10) == [[0, 1], [2, 3], [4]]


def test_size_cap_splits_evenly() -> None:
    assert repair_groups([list(range(10))], 10, 4) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_nothing_usable_gives_one_group() -> None:
    assert repair_groups([], 3, 15) == [[0, 1, 2]]
    assert repair_groups([[7, 8]], 3, 2) == [[0, 1], [2]]


def test_windows_are_even() -> None:
    assert windows(10, 4) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert windows(0, 4) == []


def test_repair_always_partitions_every_turn() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 30)
        groups = [
            [rng.randint(-3, n + 3) for _ in range(rng.randint(0, 8))]
            for _ in range(rng.randint(0, 6))
        ]
        out = repair_groups(groups, n, 5)
        assert [i for g in out for i in g] == list(range(n))
        assert all(1 <= len(g) <= 5 for g in out)


def _store() -> SQLiteStore:
    store = SQLiteStore(":memory:")
    Memory(store, HashEmbedder()).ingest(SAMPLE)
    return store


def test_model_groups_are_repaired_and_capped_in_the_store() -> None:
    default = OfflineLLM()

    def handler(request: LLMRequest) -> dict | LLMResponse:
        if request.stage == "build.segment":
            # numbers are 1-based; 2 is left out, 99 is out of range, 5 repeated
            return {"groups": [[1, 3, 99], [4, 5], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]]}
        return default.complete(request)

    store = _store()
    config = BuildConfig(max_episode=5)
    report = build_memory(
        store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM(handler)), config=config
    )
    first = [e.turn_ids for e in store.episodes(SCOPE) if e.session == 1]
    assert first == [
        ("D1:1", "D1:2", "D1:3"),
        ("D1:4", "D1:5"),
        ("D1:6", "D1:7", "D1:8", "D1:9", "D1:10"),
        ("D1:11", "D1:12", "D1:13", "D1:14"),
    ]
    assert report.fallbacks == []


def test_failed_segmentation_falls_back_to_windows() -> None:
    default = OfflineLLM()

    def handler(request: LLMRequest) -> str | LLMResponse:
        if request.stage.startswith("build.segment"):
            return "I cannot do that."
        return default.complete(request)

    store = _store()
    config = BuildConfig(window_size=5)
    report = build_memory(
        store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM(handler)), config=config
    )
    assert [f.session for f in report.fallbacks] == [1, 2, 3, 4, 5]
    assert "did not validate" in report.fallbacks[0].reason
    sizes = [len(e.turn_ids) for e in store.episodes(SCOPE) if e.session == 1]
    assert sizes == [5, 5, 4]  # 14 turns in even windows of at most 5
    assert report.llm["segment"].calls == 10  # each call plus its repair call


def test_provider_error_falls_back_too() -> None:
    default = OfflineLLM()

    def handler(request: LLMRequest) -> LLMResponse:
        if request.stage == "build.segment" and "Tomas! It's been ages" in request.prompt_text:
            raise LLMCallError("server on fire")
        return default.complete(request)

    store = _store()
    report = build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM(handler)))
    assert [(f.session, "server on fire" in f.reason) for f in report.fallbacks] == [(1, True)]
    assert [len(e.turn_ids) for e in store.episodes(SCOPE) if e.session == 1] == [7, 7]


@pytest.mark.parametrize("size", [1, 6, 40])
def test_batches_cover_long_sessions(size: int) -> None:
    store = _store()
    config = BuildConfig(batch_size=size, max_episode=15)
    report = build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()), config=config)
    per_session = [14, 13, 13, 12, 13]
    assert report.llm["segment"].calls == sum(-(-n // size) for n in per_session)
    covered = [t for e in store.episodes(SCOPE) for t in e.turn_ids]
    assert sorted(covered) == sorted(t.id for t in store.turns(SCOPE))
