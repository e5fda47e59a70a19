"""build_memory: episodes, predict-calibrate facts, de-duplication, incremental and resumed
builds, degradations and provenance."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from qemem.build import BuildConfig, build_memory, episode_turns, fact_episodes
from qemem.build.facts import compatible, find_duplicate
from qemem.embed import HashEmbedder
from qemem.errors import LLMCallError, NotFoundError
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

SAMPLE = Path("src/qemem/data/sample.json")
SCOPE = Scope("demo-1")
SESSION_SIZES = [14, 13, 13, 12, 13]
Handler = Callable[[LLMRequest], object]


def _store(source: Path = SAMPLE) -> SQLiteStore:
    store = SQLiteStore(":memory:")
    Memory(store, HashEmbedder()).ingest(source)
    return store


def _client(override: Handler | None = None) -> tuple[LLMClient, list[LLMRequest]]:
    """A client answering like the offline fake unless ``override`` returns something."""
    default = OfflineLLM()
    seen: list[LLMRequest] = []
    lock = threading.Lock()

    def handler(request: LLMRequest) -> object:
        with lock:
            seen.append(request)
        answer = override(request) if override else None
        return default.complete(request) if answer is None else answer

    return LLMClient(OfflineLLM(handler)), seen  # type: ignore[arg-type]


def _episodes_by_size(sizes: list[int]) -> int:
    return sum(-(-n // 6) for n in sizes)  # the fake segments into runs of six


def test_fake_build_makes_episodes_with_turn_ids_and_facts() -> None:
    store = _store()
    progress: list[tuple[int, int]] = []
    report = build_memory(
        store,
        SCOPE,
        HashEmbedder(),
        LLMClient(OfflineLLM()),
        progress=lambda done, total: progress.append((done, total)),
    )
    episodes = store.episodes(SCOPE)
    assert report.episodes == len(episodes) == _episodes_by_size(SESSION_SIZES) == 14
    assert [e.id for e in episodes] == [f"E{n}" for n in range(1, 15)]
    first = episodes[0]
    assert first.turn_ids == ("D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D1:6")
    assert first.session == 1 and first.timestamp == datetime(2024, 3, 14, 19, 15)
    assert first.title == "Priya: Tomas ages How's everything"
    assert first.content.startswith("Priya said: \"Hey Tomas! It's been ages.")
    covered = [t for e in episodes for t in e.turn_ids]
    assert sorted(covered) == sorted(t.id for t in store.turns(SCOPE))
    assert len(covered) == len(set(covered))
    facts = store.facts(SCOPE)
    assert facts[0].content == "Priya mentioned Hey Tomas! It's been ages. How's everything going"
    assert facts[0].episode_ids == ("E1",) and facts[0].session == 1
    assert report.facts_added == len(facts) == 14 and report.facts_merged == 0
    assert progress[-1] == (65, 65)
    assert report.llm["segment"].calls == 5 and report.llm["episode"].calls == 14
    # the first eight episodes (snapshot lag 8) know no earlier fact: direct extraction
    assert report.llm["predict"].calls == 14 - 8 and report.llm["calibrate"].calls == 14
    # episodes and facts are searchable like turns
    assert len(store.vectors(SCOPE, "episode")[0]) == 14 == len(store.vectors(SCOPE, "fact")[0])
    hits = Memory(store, HashEmbedder()).search("demo-1", "Born to Run", space="episode", k=1)
    assert [h.record.id for h in hits] == ["E2"]


def test_provenance_from_fact_to_turns() -> None:
    store = _store()
    build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()))
    fact = store.facts(SCOPE, ["S2"])[0]
    assert [e.id for e in fact_episodes(store, SCOPE, fact)] == ["E2"]
    assert [e.id for e in fact_episodes(store, SCOPE, "S2")] == ["E2"]
    turns = episode_turns(store, SCOPE, "E2")
    assert [t.id for t in turns] == ["D1:7", "D1:8", "D1:9", "D1:10", "D1:11", "D1:12"]
    with pytest.raises(NotFoundError):
        episode_turns(store, SCOPE, "E99")


def test_predict_then_calibrate_uses_the_known_facts() -> None:
    def override(request: LLMRequest) -> object:
        if request.stage == "build.predict":
            return {"prediction": ["Tomas keeps training for the half marathon."]}
        return None

    client, seen = _client(override)
    store = _store()
    config = BuildConfig(snapshot_lag=1)
    build_memory(store, SCOPE, HashEmbedder(), client, concurrency=1, config=config)
    calibrations = [r for r in seen if r.stage == "build.calibrate"]
    predictions = [r for r in seen if r.stage == "build.predict"]
    # the first episode has no prior facts: direct extraction, no prediction
    assert "Nothing is known about these people yet." in calibrations[0].messages[0].content
    assert len(predictions) == len(calibrations) - 1 == 13
    # later ones predict from the stored facts, then calibrate against the prediction
    shown = predictions[0].messages[0].content
    assert (
        "- Priya mentioned Hey Tomas! It's been ages. How's everything going (about Priya, Tomas)"
        in shown
    )
    assert '"Priya: signed full eight-week course Saturday"' in predictions[0].messages[0].content
    second = calibrations[1].messages[0].content
    assert "- Tomas keeps training for the half marathon." in second
    assert "a guess, not known facts" in second
    assert "[1] Priya (14 March 2024, 19:15): Yes" in second


def test_duplicate_facts_merge_their_provenance() -> None:
    def override(request: LLMRequest) -> object:
        if request.stage == "build.calibrate":
            return {"facts": ["Priya has a cat named Biscuit.", "Priya has a cat named Biscuit."]}
        return None

    client, _ = _client(override)
    store = _store()
    report = build_memory(store, SCOPE, HashEmbedder(), client)
    facts = store.facts(SCOPE)
    assert len(facts) == 1 and facts[0].id == "S1" and facts[0].session == 1
    assert facts[0].episode_ids == tuple(f"E{n}" for n in range(1, 15))
    assert report.facts_added == 1 and report.facts_merged == 13
    assert [e.id for e in fact_episodes(store, SCOPE, "S1")][:3] == ["E1", "E2", "E3"]


def test_dedup_threshold_is_applied() -> None:
    def override(request: LLMRequest) -> object:
        if request.stage == "build.calibrate":
            return {"facts": ["Priya has a cat named Biscuit."]}
        return None

    client, _ = _client(override)
    store = _store()
    config = BuildConfig(dedup_threshold=1.01, paraphrase_cosine=None)
    report = build_memory(store, SCOPE, HashEmbedder(), client, config=config)
    assert report.facts_added == 14 and report.facts_merged == 0


def test_dedup_guard_needs_same_subject_and_numbers() -> None:
    assert compatible("Melanie has kids.", "Melanie's kids love camping.")
    assert not compatible("Jon lost his job.", "Gina lost her job.")
    assert not compatible("Melanie has two kids.", "Melanie has three kids.")
    vector = np.array([1.0, 0.0], dtype=np.float32)
    matrix = np.array([[1.0, 0.0], [0.99, 0.141]], dtype=np.float32)
    texts = ["Gina has two kids.", "Melanie has two kids."]
    assert find_duplicate("Melanie has two kids.", vector, texts, matrix, 0.97) == 1
    assert find_duplicate("Melanie has two kids.", vector, texts, matrix, 0.995) is None
    assert find_duplicate("Melanie has three kids.", vector, texts, matrix, 0.9) is None


def test_second_build_does_nothing() -> None:
    store = _store()
    build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()))
    before = (store.episodes(SCOPE), store.facts(SCOPE))
    client, seen = _client()
    report = build_memory(store, SCOPE, HashEmbedder(), client)
    assert seen == [] and report.llm_calls == 0 and report.episodes == 0
    assert report.sessions == []
    assert (store.episodes(SCOPE), store.facts(SCOPE)) == before


def test_appended_session_is_the_only_one_built(tmp_path: Path) -> None:
    data = json.loads(SAMPLE.read_text())
    conv = data[0]["conversation"]
    for n in (4, 5):
        del conv[f"session_{n}"], conv[f"session_{n}_date_time"]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(data))
    store = _store(partial)
    build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()))
    built = store.episodes(SCOPE)
    assert len(built) == _episodes_by_size(SESSION_SIZES[:3]) == 9
    Memory(store, HashEmbedder()).ingest(SAMPLE)
    client, seen = _client()
    report = build_memory(store, SCOPE, HashEmbedder(), client)
    assert report.sessions == [4, 5] and report.episodes == 5
    assert report.llm["segment"].calls == 2
    shown = [r for r in seen if r.stage in ("build.segment", "build.episode")]
    assert len(shown) == 7
    assert all("July 2024" in r.prompt_text or "August 2024" in r.prompt_text for r in shown)
    episodes = store.episodes(SCOPE)
    assert episodes[:9] == built
    assert [e.id for e in episodes[9:]] == ["E10", "E11", "E12", "E13", "E14"]
    assert episodes[9].turn_ids[0] == "D4:1"


class Crash(Exception):
    """Stands for a process being killed: not a QememError, so nothing may absorb it."""


@pytest.mark.parametrize(("crash_at", "concurrency"), [(3, 1), (12, 1), (25, 3)])
def test_interrupted_build_resumes(crash_at: int, concurrency: int) -> None:
    calls = {"n": 0}
    lock = threading.Lock()

    def override(request: LLMRequest) -> object:
        with lock:
            calls["n"] += 1
            if calls["n"] == crash_at:
                raise Crash("killed")
        return None

    store = _store()
    client, _ = _client(override)
    with pytest.raises(Crash):
        build_memory(store, SCOPE, HashEmbedder(), client, concurrency=concurrency)
    partial = len(store.episodes(SCOPE))
    assert partial < 14
    client, _ = _client()
    report = build_memory(store, SCOPE, HashEmbedder(), client, concurrency=concurrency)
    episodes = store.episodes(SCOPE)
    assert len(episodes) == 14 and report.episodes == 14 - partial
    assert sorted(int(e.id[1:]) for e in episodes) == list(range(1, 15))
    covered = [t for e in episodes for t in e.turn_ids]
    assert sorted(covered) == sorted(t.id for t in store.turns(SCOPE))
    assert len(covered) == len(set(covered))
    fact_ids = [f.id for f in store.facts(SCOPE)]
    assert fact_ids == [f"S{n}" for n in range(1, len(fact_ids) + 1)]


def test_failed_narrative_and_fact_calls_degrade() -> None:
    def override(request: LLMRequest) -> object:
        if "Hey Tomas! It's been ages" in request.prompt_text and request.stage in (
            "build.episode",
            "build.calibrate",
        ):
            raise LLMCallError("model unavailable")
        return None

    client, _ = _client(override)
    store = _store()
    report = build_memory(store, SCOPE, HashEmbedder(), client)
    first = store.episodes(SCOPE)[0]
    assert first.title == "Priya: Tomas ages How's everything"
    assert first.content.startswith('On 14 March 2024, 19:15, Priya said: "Hey Tomas!')
    assert report.degraded == [
        "E1: narrative built from the turns (model unavailable)",
        "E1: no facts extracted (model unavailable)",
    ]
    assert store.facts(SCOPE)[0].episode_ids == ("E2",)
    assert report.episodes == 14


def test_report_is_serialisable() -> None:
    store = _store()
    report = build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["episodes"] == 14
    assert set(data["llm"]) == {"segment", "episode", "predict", "calibrate"}
    assert data["llm"]["calibrate"]["calls"] == 14
