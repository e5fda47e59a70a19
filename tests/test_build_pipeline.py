"""The build pipeline: results independent of concurrency and latency, exact resumes, origins
of episodes, rebuilding degraded memory and memory built by another LLM, several
conversations at once."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.build import BuildConfig, build_memory
from qemem.build.origin import origin_of
from qemem.cli.app import app
from qemem.embed import HashEmbedder
from qemem.errors import LLMCallError
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

SAMPLE = Path("src/qemem/data/sample.json")
SCOPE = Scope("demo-1")


def _store() -> SQLiteStore:
    store = SQLiteStore(":memory:")
    Memory(store, HashEmbedder()).ingest(SAMPLE)
    return store


def _answers(request: LLMRequest) -> object:
    """The offline fake's answers, plus a fact every episode restates and, when the prompt
    shows known facts, one fact naming how many it shows (so merges and snapshots matter)."""
    default = OfflineLLM().complete(request)
    if request.stage != "build.calibrate":
        return default
    facts = [*json.loads(default.text)["facts"], "Priya has a cat named Biscuit."]
    text = request.prompt_text
    block = (
        text.split("Facts already known:")[1].split("A guess of what")[0]
        if ("Facts already known:" in text)
        else ""
    )
    known = block.count("\n- ")
    return {"facts": [*facts, f"Tomas counted {known} known things."]}


def _client(delay: float = 0.0, model: str = "fake", fail: str | None = None) -> LLMClient:
    digest = hashlib.sha256

    def handler(request: LLMRequest) -> object:
        if delay:  # a per-request pseudo-random latency, so calls finish out of order
            time.sleep(delay * digest(request.prompt_text.encode()).digest()[0] / 255)
        if fail and fail in request.prompt_text and request.stage != "build.segment":
            raise LLMCallError("model unavailable")
        return _answers(request)

    return LLMClient(OfflineLLM(handler, model=model), concurrency=8)  # type: ignore[arg-type]


def _dump(store: SQLiteStore) -> dict[str, Any]:
    """Everything a build writes, comparable with ==."""
    vectors = {s: store.vectors(SCOPE, s) for s in ("episode", "fact")}  # type: ignore[arg-type]
    return {
        "episodes": store.episodes(SCOPE),
        "facts": store.facts(SCOPE),
        "vectors": {s: (ids, m.tobytes()) for s, (ids, m) in vectors.items()},
        "origins": {e.id: origin_of(store, SCOPE, e.id) for e in store.episodes(SCOPE)},
    }


@pytest.mark.parametrize("lag", [1, 3])
def test_store_does_not_depend_on_concurrency_or_latency(lag: int) -> None:
    config = BuildConfig(snapshot_lag=lag)
    serial = _store()
    build_memory(serial, SCOPE, HashEmbedder(), _client(), concurrency=1, config=config)
    parallel = _store()
    report = build_memory(
        parallel, SCOPE, HashEmbedder(), _client(0.01), concurrency=8, config=config
    )
    assert _dump(parallel) == _dump(serial)
    assert report.facts_merged >= 13  # the restated fact merges into the first episode's
    shown = [f.content for f in parallel.facts(SCOPE) if f.content.startswith("Tomas counted")]
    assert shown[0] == "Tomas counted 0 known things."  # the first episodes see no fact


def test_later_episodes_see_facts_up_to_their_snapshot_point() -> None:
    store = _store()
    build_memory(store, SCOPE, HashEmbedder(), _client(), config=BuildConfig(snapshot_lag=3))
    counted = {f.content: f.episode_ids for f in store.facts(SCOPE) if "known" in f.content}
    # E1-E3 know nothing; E4 knows E1's three facts; E5 also E2's one new fact
    assert counted["Tomas counted 0 known things."] == ("E1", "E2", "E3")
    assert counted["Tomas counted 3 known things."][0] == "E4"
    assert counted["Tomas counted 4 known things."][0] == "E5"


def test_interrupted_build_resumes_to_the_uninterrupted_store() -> None:
    whole = _store()
    build_memory(whole, SCOPE, HashEmbedder(), _client(), concurrency=4)
    calls = {"n": 0}
    lock = threading.Lock()
    client = _client()
    inner = client.provider

    class Killed(Exception):
        """Stands for the process being killed mid-build."""

    class Crashing:
        name, model = inner.name, inner.model

        def complete(self, request: LLMRequest) -> object:
            with lock:
                calls["n"] += 1
                if calls["n"] == 30:
                    raise Killed
            return inner.complete(request)

    crashed = _store()
    with pytest.raises(Killed):
        build_memory(crashed, SCOPE, HashEmbedder(), LLMClient(Crashing()), concurrency=4)  # type: ignore[arg-type]
    assert 0 < len(crashed.episodes(SCOPE)) < 14
    build_memory(crashed, SCOPE, HashEmbedder(), _client(), concurrency=4)
    assert _dump(crashed) == _dump(whole)


def test_degraded_episodes_are_recorded_and_rebuilt_by_the_next_build() -> None:
    store = _store()
    report = build_memory(store, SCOPE, HashEmbedder(), _client(fail="Born to Run"))
    assert report.degraded and all(": " in line for line in report.degraded)
    bad = [e.id for e in store.episodes(SCOPE) if origin_of(store, SCOPE, e.id).degraded]  # type: ignore[union-attr]
    assert bad and all(origin_of(store, SCOPE, e).llm == "fake:fake" for e in bad)  # type: ignore[union-attr]
    again = build_memory(store, SCOPE, HashEmbedder(), _client())
    assert again.episodes == len(bad) and not again.degraded
    episodes = store.episodes(SCOPE)
    assert not any(origin_of(store, SCOPE, e.id).degraded for e in episodes)  # type: ignore[union-attr]
    covered = sorted(t for e in episodes for t in e.turn_ids)
    assert covered == sorted(t.id for t in store.turns(SCOPE))
    assert any("Born to Run" in e.content for e in episodes)
    cited = {e for f in store.facts(SCOPE) for e in f.episode_ids}
    assert cited <= {e.id for e in episodes}
    quiet = build_memory(store, SCOPE, HashEmbedder(), _client())
    assert quiet.llm_calls == 0


def test_rebuild_replaces_memory_another_llm_built() -> None:
    store = _store()
    build_memory(store, SCOPE, HashEmbedder(), _client())
    other = _client(model="other")
    kept = build_memory(store, SCOPE, HashEmbedder(), other)
    assert kept.llm_calls == 0
    replaced = build_memory(store, SCOPE, HashEmbedder(), other, rebuild=True)
    assert replaced.episodes == 14
    assert replaced.llm["segment"].calls == 5  # the other model's segmentation is not reused
    origins = {origin_of(store, SCOPE, e.id).llm for e in store.episodes(SCOPE)}  # type: ignore[union-attr]
    assert origins == {"fake:other"}
    # the replacing episodes are new records: their ids are never the replaced ones'
    assert [e.id for e in store.episodes(SCOPE)] == [f"E{n}" for n in range(15, 29)]
    assert len(store.vectors(SCOPE, "episode")[0]) == 14
    assert len(store.vectors(SCOPE, "fact")[0]) == len(store.facts(SCOPE))


def test_several_conversations_build_at_once(tmp_path: Path) -> None:
    data = json.loads(SAMPLE.read_text())
    twin = json.loads(json.dumps(data[0]))
    twin["sample_id"] = "demo-2"
    path = tmp_path / "two.json"
    path.write_text(json.dumps([data[0], twin]))
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=_client(0.002))
    memory.ingest(path)
    seen: list[tuple[int, int]] = []
    reports = memory.build(progress=lambda d, t: seen.append((d, t)))
    assert [r.conversation for r in reports] == ["demo-1", "demo-2"]
    assert [r.episodes for r in reports] == [14, 14]
    first = [(e.title, e.turn_ids) for e in memory.episodes("demo-1")]
    assert first == [(e.title, e.turn_ids) for e in memory.episodes("demo-2")]
    assert seen[-1] == (130, 130)


@pytest.mark.slow
def test_cli_build_with_degradations_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "m.db")
    runner = CliRunner()
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    assert runner.invoke(app, ["ingest", str(SAMPLE), "--store", store, "--quiet"]).exit_code == 0
    monkeypatch.setenv("QEMEM_LLM", "cmd:exit 1")
    failed = runner.invoke(app, ["build", "--store", store])
    assert failed.exit_code == 3
    assert "rebuilt by the next build" in failed.output
    monkeypatch.setenv("QEMEM_LLM", "fake")
    fixed = runner.invoke(app, ["build", "--store", store, "--json"])
    assert fixed.exit_code == 0
    [report] = json.loads(fixed.output.splitlines()[-1])
    assert report["episodes"] > 0 and not report["degraded"]


def test_a_session_whose_segmentation_fell_back_is_segmented_again() -> None:
    def handler(request: LLMRequest) -> object:
        if request.stage.startswith("build.segment") and "14 March 2024" in request.prompt_text:
            raise LLMCallError("model unavailable")
        return _answers(request)

    store = _store()
    first = build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM(handler)))  # type: ignore[arg-type]
    assert [f.session for f in first.fallbacks] == [1] and not first.degraded
    fell_back = [e for e in store.episodes(SCOPE) if e.session == 1]
    reasons = origin_of(store, SCOPE, fell_back[0].id).degraded  # type: ignore[union-attr]
    assert reasons[0].startswith("segmentation fell back to windows")
    again = build_memory(store, SCOPE, HashEmbedder(), _client())
    assert again.sessions == [1] and again.llm["segment"].calls == 1
    assert again.episodes == 3 and not again.fallbacks  # 14 turns: windows of 8 became 6+6+2
