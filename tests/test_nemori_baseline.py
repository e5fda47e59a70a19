"""The ``nemori-baseline`` mode: dense top-10 episodes / top-20 facts, no turns, one answer call
whose prompt has the structure of NEMORI's LoCoMo answer prompt; refusal without memory; the
mode through the library, the CLI, the evidence record, eval runs and ``eval compare``."""

from __future__ import annotations

import json
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from qemem import RemoteMemory
from qemem.answer import AskConfig, ask
from qemem.answer.nemori import (
    EPISODES,
    FACTS,
    SOURCE_EPISODES,
    memory_line,
    source_lines,
    stamp,
)
from qemem.answer.wire import answer_from_json, answer_to_json
from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import InputError
from qemem.llm import LLMClient, LLMRequest
from qemem.llm.stages import ANSWER_NEMORI
from qemem.memory import Memory
from qemem.models import Episode, SemanticFact, Space, Turn, search_text
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.dense import dense_pool
from qemem.store import Scope, SQLiteStore, open_store
from qemem.store.base import MemoryStore
from qemem.testing import OfflineLLM
from service_helpers import served

SCOPE = Scope("demo-1")
QUESTION = "When did Priya go to her first pottery class?"
EMBEDDER = HashEmbedder()
runner = CliRunner()


def sample_store() -> SQLiteStore:
    store = SQLiteStore(":memory:")
    sample = resources.files("qemem.data").joinpath("sample.json")
    with resources.as_file(sample) as path:
        Memory(store, EMBEDDER).ingest(path)
    return store


def chunks(turns: list[Turn], size: int) -> list[list[Turn]]:
    """Consecutive runs of at most ``size`` turns, never across a session."""
    out: list[list[Turn]] = []
    for turn in turns:
        if out and out[-1][-1].session == turn.session and len(out[-1]) < size:
            out[-1].append(turn)
        else:
            out.append([turn])
    return out


def add_memory(store: MemoryStore, episodes: int, facts: int) -> None:
    """``episodes`` episodes of 4 consecutive turns each and ``facts`` one-turn facts."""
    turns = store.turns(SCOPE)
    made = [
        Episode(
            f"E{n}",
            "demo-1",
            run[0].session,
            f"Episode {n}",
            " ".join(f"{t.speaker} said {t.text}" for t in run),
            run[0].timestamp,
            tuple(t.id for t in run),
        )
        for n, run in enumerate(chunks(turns, 4)[:episodes], start=1)
    ]
    of_turn = {t: e.id for e in made for t in e.turn_ids}
    learned = [
        SemanticFact(f"S{n}", "demo-1", f"{t.speaker} says: {t.text}", t.session, (of_turn[t.id],))
        for n, t in enumerate((t for t in turns if t.id in of_turn), start=1)
        if n <= facts
    ]
    if made:
        vectors = EMBEDDER.embed([search_text(e) for e in made])
        store.add_episodes(SCOPE, made, vectors, EMBEDDER.id)
    if learned:
        vectors = EMBEDDER.embed([search_text(f) for f in learned])
        store.put_facts(SCOPE, learned, vectors, EMBEDDER.id)


@pytest.fixture(scope="module")
def store() -> SQLiteStore:
    store = sample_store()
    add_memory(store, episodes=14, facts=30)
    return store


class Recorder:
    """An offline LLM handler that records every request and replies with ``reply``."""

    def __init__(self, reply: str = "  7 March 2024 \n") -> None:
        self.reply = reply
        self.requests: list[LLMRequest] = []

    def __call__(self, request: LLMRequest) -> str:
        self.requests.append(request)
        return self.reply


def by_cosine(store: SQLiteStore, space: Space, question: str, k: int) -> list[str]:
    """The reference ranking: cosine of the question's vector with every stored vector."""
    ids, matrix = store.vectors(SCOPE, space)
    sims = matrix @ EMBEDDER.embed([question], query=True)[0]
    return [ids[i] for i in np.argsort(-sims, kind="stable")[:k]]


def test_retrieves_dense_top_k_episodes_and_facts_and_no_turns(store: SQLiteStore) -> None:
    recorder = Recorder()
    answer = ask(
        store, SCOPE, EMBEDDER, LLMClient(OfflineLLM(recorder)), QUESTION, mode="nemori-baseline"
    )
    assert (EPISODES, FACTS) == (10, 20)
    assert [i.id for i in answer.pool.episodes] == by_cosine(store, "episode", QUESTION, 10)
    assert [i.id for i in answer.pool.facts] == by_cosine(store, "fact", QUESTION, 20)
    assert answer.pool.turns == [] and answer.pool.queries == [QUESTION]
    scores = [i.score for i in answer.pool.episodes]
    assert scores == sorted(scores, reverse=True)
    assert [i.position for i in (*answer.pool.episodes, *answer.pool.facts)] == list(range(30))
    reasons = [r for i in answer.pool.facts for r in i.reasons]
    assert {(r.kind, r.method) for r in reasons} == {("ranked", "dense")}
    assert [r.rank for r in reasons] == list(range(1, 21))
    # exactly one LLM call, and it is the answer
    assert [r.stage for r in recorder.requests] == [ANSWER_NEMORI]
    assert [c["stage"] for c in answer.trace.calls] == [ANSWER_NEMORI]
    assert answer.trace.totals["total"]["calls"] == 1
    assert answer.text == answer.reasoning == "7 March 2024"  # the whole reply, stripped
    assert answer.cards == [] and answer.citations == [] and answer.mode == "nemori-baseline"


def test_prompt_lists_memories_in_rank_order_with_the_leading_episodes_sources(
    store: SQLiteStore,
) -> None:
    recorder = Recorder()
    answer = ask(
        store, SCOPE, EMBEDDER, LLMClient(OfflineLLM(recorder)), QUESTION, mode="nemori-baseline"
    )
    (request,) = recorder.requests
    assert request.system == "" and len(request.messages) == 1
    assert request.messages[0].role == "user" and request.temperature == 0.0
    prompt = request.messages[0].content
    assert prompt.index("# CONTEXT:") < prompt.index("# INSTRUCTIONS:") < prompt.index("# APPROACH")
    head, rest = prompt.split("Episodic Memories:\n", 1)
    assert "most recent" in head and "5-6 words" in head  # the recipe's instructions
    episodic, rest = rest.split("\n\nSemantic Memories:\n", 1)
    semantic, rest = rest.split("\n\nQuestion: ", 1)
    assert rest == f"{QUESTION}\n\nAnswer:\n"
    episodes = [i.record for i in answer.pool.episodes]
    assert isinstance(episodes[0], Episode)
    index_of = {t.id: t for t in store.turns(SCOPE)}
    expected: list[str] = []
    for n, ep in enumerate(episodes):
        assert isinstance(ep, Episode)
        expected.append(memory_line(ep.timestamp, ep.content))
        if n < SOURCE_EPISODES:
            expected.extend(source_lines([index_of[t] for t in ep.turn_ids]))
    assert episodic.split("\n") == expected
    dates = {s.index: s.date_time for s in store.get_conversation(SCOPE).sessions}
    facts = [i.record for i in answer.pool.facts]
    assert semantic.split("\n") == [
        memory_line(dates[f.session], f.content) for f in facts if isinstance(f, SemanticFact)
    ]
    # what was shown: the leading episodes' turns, and every episode and fact
    leading = [
        t for ep in episodes[:SOURCE_EPISODES] if isinstance(ep, Episode) for t in ep.turn_ids
    ]
    order = list(index_of)
    assert answer.evidence.shown.turns == sorted(set(leading), key=order.index)
    assert answer.evidence.shown.background_refs == answer.pool.refs()
    assert set(answer.sources.turns) >= set(leading)


def test_listing_helpers() -> None:
    when = datetime(2023, 5, 8, 13, 56)
    assert stamp(when) == "2023-05-08T13:56:00"
    assert (
        memory_line(when, "Caroline went\nto a group.")
        == "- [2023-05-08T13:56:00] Caroline went to a group."
    )
    turn = Turn("D1:1", "c", 1, 0, "Ann", "Hi\nthere", when)
    assert source_lines([turn]) == ["    Source Messages:", "    - Ann: Hi there"]
    assert source_lines([]) == []


def test_fewer_records_than_k_and_episodes_only() -> None:
    store = sample_store()
    add_memory(store, episodes=3, facts=0)
    recorder = Recorder()
    answer = ask(
        store, SCOPE, EMBEDDER, LLMClient(OfflineLLM(recorder)), QUESTION, mode="nemori-baseline"
    )
    assert len(answer.pool.episodes) == 3 and answer.pool.facts == []
    prompt = recorder.requests[0].messages[0].content
    assert "Semantic Memories:\n\n\nQuestion:" in prompt


def test_a_conversation_without_episodes_or_facts_is_refused_before_any_call() -> None:
    store = sample_store()
    recorder = Recorder()
    with pytest.raises(InputError, match=r"has none: build them first .*import-memory"):
        ask(
            store,
            SCOPE,
            EMBEDDER,
            LLMClient(OfflineLLM(recorder)),
            QUESTION,
            mode="nemori-baseline",
        )
    assert recorder.requests == []


def test_retrieval_settings_are_refused(store: SQLiteStore) -> None:
    config = AskConfig(retrieval=RetrievalConfig(budget_episodes=3))
    recorder = Recorder()
    with pytest.raises(InputError, match="fixed top-10 episodes and top-20 facts"):
        ask(
            store,
            SCOPE,
            EMBEDDER,
            LLMClient(OfflineLLM(recorder)),
            QUESTION,
            mode="nemori-baseline",
            config=config,
        )
    assert recorder.requests == []


def test_dense_pool_bounds(store: SQLiteStore) -> None:
    pool = dense_pool(store, SCOPE, EMBEDDER, QUESTION, episodes=0, facts=3)
    assert pool.episodes == [] and len(pool.facts) == 3
    assert [i.position for i in pool.facts] == [0, 1, 2]
    with pytest.raises(InputError, match="at least 0"):
        dense_pool(store, SCOPE, EMBEDDER, QUESTION, episodes=-1, facts=3)
    with pytest.raises(InputError, match="non-empty question"):
        dense_pool(store, SCOPE, EMBEDDER, "  ", episodes=1, facts=1)


def test_memory_ask_offline_and_the_evidence_record_round_trips(store: SQLiteStore) -> None:
    memory = Memory(store, EMBEDDER, llm=LLMClient(OfflineLLM()))
    answer = memory.ask("demo-1", QUESTION, mode="nemori-baseline")
    assert answer.text and "FINAL ANSWER" not in answer.text  # the offline short answer
    data = answer_to_json(answer)
    again = answer_from_json(json.loads(json.dumps(data)))
    assert again.mode == "nemori-baseline"
    assert [i.id for i in again.pool.episodes] == [i.id for i in answer.pool.episodes]
    assert again.evidence.shown == answer.evidence.shown


def test_cli_ask_json(tmp_path: Path, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    path = tmp_path / "m.db"
    disk = SQLiteStore(path)
    sample = resources.files("qemem.data").joinpath("sample.json")
    with resources.as_file(sample) as file:
        Memory(disk, EMBEDDER).ingest(file)
    add_memory(disk, episodes=12, facts=22)
    disk.close()
    args = ["ask", QUESTION, "--store", str(path), "-c", "demo-1", "--mode", "nemori-baseline"]
    result = runner.invoke(app, [*args, "--llm", "fake", "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    assert data["mode"] == "nemori-baseline"
    pool = data["evidence"]["pool"]
    assert (len(pool["episodes"]), len(pool["facts"]), pool["turns"]) == (10, 20, [])
    assert data["trace"]["totals"]["total"]["calls"] == 1
    page = tmp_path / "answer.html"
    result = runner.invoke(app, [*args, "--llm", "fake", "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert "mode nemori-baseline; 1 LLM calls" in result.output
    assert "nemori-baseline" in page.read_text(encoding="utf-8")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_eval_run_and_compare(
    tmp_path: Path, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    for name in ("QEMEM_LLM", "QEMEM_LLM_CACHE", "QEMEM_CACHE_MODE"):
        monkeypatch.delenv(name, raising=False)
    store = tmp_path / "memory.db"
    runs = {}
    for mode in ("direct", "nemori-baseline"):  # the first run builds the memory, both share it
        out = runs[mode] = tmp_path / mode
        args = [
            "eval",
            "locomo",
            "--data",
            str(sample_path),
            "--out",
            str(out),
            "--store",
            str(store),
        ]
        args += ["--mode", mode, "--llm", "fake", "--limit", "4", "--no-plots", "--json"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    records = lines(runs["nemori-baseline"] / "results.jsonl")
    assert len(records) == 4 and {r["mode"] for r in records} == {"nemori-baseline"}
    assert all(r["prediction"] for r in records)
    assert all(set(r["llm"]) == {"answer", "judge"} for r in records)
    assert all(r["llm"]["answer"]["calls"] == 1 for r in records)
    manifest = json.loads((runs["nemori-baseline"] / "manifest.json").read_text())
    assert manifest["mode"] == "nemori-baseline"
    result = runner.invoke(
        app, ["eval", "compare", str(runs["direct"]), str(runs["nemori-baseline"]), "--json"]
    )
    assert result.exit_code == 0, result.output
    compared = json.loads(result.output)
    assert compared["questions"] == 4 and compared["mode_b"] == "nemori-baseline"
    assert compared["mode_a"] == "direct"


@pytest.mark.slow
def test_http_and_remote_client(sample_path: Path) -> None:
    with served() as s:
        remote = RemoteMemory("http://testserver", s.alice, client=s.client, poll_seconds=0.02)
        remote.ingest(sample_path)
        with pytest.raises(InputError, match="has none: build them first"):
            remote.ask("demo-1", QUESTION, mode="nemori-baseline")
        remote.build("demo-1")
        answer = remote.ask("demo-1", QUESTION, mode="nemori-baseline")
        assert answer.mode == "nemori-baseline" and answer.text
        assert answer.pool.episodes and answer.pool.turns == []
        assert len(answer.pool.episodes) <= EPISODES and len(answer.pool.facts) <= FACTS
        assert answer.trace.totals["total"]["calls"] == 1


def test_postgresql_retrieves_and_shows_the_same(pg_url: str, store: SQLiteStore) -> None:
    pg = open_store(pg_url)
    try:
        sample = resources.files("qemem.data").joinpath("sample.json")
        with resources.as_file(sample) as path:
            Memory(pg, EMBEDDER).ingest(path)
        add_memory(pg, episodes=14, facts=30)
        answers = []
        for backend in (store, pg):
            recorder = Recorder()
            llm = LLMClient(OfflineLLM(recorder))
            answer = ask(backend, SCOPE, EMBEDDER, llm, QUESTION, mode="nemori-baseline")
            answers.append((answer.pool.refs(), recorder.requests[0].messages[0].content))
        assert answers[0] == answers[1]
    finally:
        pg.close()
