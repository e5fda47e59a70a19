"""The build on long messages: batches and episodes bounded in tokens, the embedding cut that
ingest and ``reembed`` apply, and the cost per 1,000 messages ``qemem build`` prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from qemem.build import BuildConfig, build_memory
from qemem.build.segment import within_tokens
from qemem.cli import app
from qemem.embed import EMBED_CHARS, HashEmbedder, document_text
from qemem.ingest.generic import parse_generic
from qemem.llm import LLMClient, LLMRequest
from qemem.memory import Memory, reembed
from qemem.store import Scope, SQLiteStore
from qemem.testing import OfflineLLM

SCOPE = Scope("long")


def test_parts_stay_within_the_budget_and_a_large_item_stands_alone() -> None:
    sizes = [3, 3, 3, 10, 1, 1]
    assert within_tokens([0, 1, 2, 3, 4, 5], sizes, 6) == [[0, 1], [2], [3], [4, 5]]
    assert within_tokens([0, 1, 2], sizes, 100) == [[0, 1, 2]]
    assert within_tokens([], sizes, 5) == []


def _long_chat(replies: int, chars: int) -> SQLiteStore:
    """One session of a user asking and an assistant answering at length."""
    records = []
    for n in range(replies):
        for speaker, text in (("user", f"Question {n} about the parser?"), ("assistant", "")):
            body = text or " ".join(f"step{n} word{i}" for i in range(chars // 12))
            records.append(
                {
                    "conversation_id": "long",
                    "session_id": "s1",
                    "timestamp": f"2025-01-01T10:{n:02d}:00",
                    "speaker": speaker,
                    "text": body,
                }
            )
    store = SQLiteStore(":memory:")
    Memory(store, HashEmbedder()).ingest(parse_generic(records))
    return store


def test_long_messages_spread_over_more_calls_and_episodes() -> None:
    store = _long_chat(replies=10, chars=8_000)  # 20 turns, 10 of about 2,000 tokens
    config = BuildConfig(batch_tokens=6_000, episode_tokens=4_500)
    prompts: list[int] = []
    default = OfflineLLM()

    def handler(request: LLMRequest) -> object:
        if request.stage == "build.segment":
            prompts.append(len(request.prompt_text))
            return {"groups": [list(range(1, 41))]}  # everything in one episode
        return default.complete(request)

    report = build_memory(
        store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM(handler)), config=config
    )
    assert len(prompts) == 5 and max(prompts) < 6_000 * 4 + 4_000  # not one 80,000-char call
    episodes = store.episodes(SCOPE)
    turns = {t.id: t for t in store.turns(SCOPE)}
    assert [t for e in episodes for t in e.turn_ids] == list(turns)  # every turn, once, in order
    assert all(sum(len(turns[t].text) for t in e.turn_ids) <= 4_500 * 4 for e in episodes)
    assert report.messages == 20


def test_short_turns_are_batched_as_before() -> None:
    store = _long_chat(replies=10, chars=60)
    report = build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()))
    assert report.llm["segment"].calls == 1


def test_built_vectors_are_the_ones_ingest_and_reembed_make() -> None:
    store = _long_chat(replies=2, chars=300)
    narrative = "A long account of the parser work. " * 300  # over EMBED_CHARS
    default = OfflineLLM()

    def handler(request: LLMRequest) -> object:
        if request.stage == "build.episode":
            return {"title": "Parser work", "narrative": narrative}
        return default.complete(request)

    embedder = HashEmbedder()
    build_memory(store, SCOPE, embedder, LLMClient(OfflineLLM(handler)))
    ids, stored = store.vectors(SCOPE, "episode")
    assert len(f"Parser work. {narrative}") > EMBED_CHARS
    episodes = store.episodes(SCOPE, ids)
    expected = Memory(store, embedder).embed_documents(episodes)
    assert np.allclose(stored, expected, atol=1e-6)
    cut = embedder.embed([document_text(f"Parser work. {narrative}")])
    assert np.allclose(stored[0], cut[0], atol=1e-6)
    before = dict(zip(*store.vectors(SCOPE, "episode"), strict=True))
    reembed(store, HashEmbedder(128))
    reembed(store, embedder)
    after = dict(zip(*store.vectors(SCOPE, "episode"), strict=True))
    assert all(np.allclose(before[i], after[i], atol=1e-6) for i in before)


def test_cost_per_thousand_messages() -> None:
    store = _long_chat(replies=5, chars=400)
    report = build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM()))
    rate = report.per_thousand()
    calls = sum(t.calls for t in report.llm.values())
    tokens = sum(t.input_tokens for t in report.llm.values())
    assert report.messages == 10
    assert rate.calls == calls * 100 and rate.input_tokens == tokens * 100
    assert report.to_dict()["per_1000_messages"]["calls"] == rate.calls
    assert build_memory(store, SCOPE, HashEmbedder(), LLMClient(OfflineLLM())).per_thousand() == (
        type(rate)(0.0, 0.0, 0.0, 0.0)
    )


def test_build_prints_its_cost_per_thousand_messages(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory.open(db, embedder="hash") as memory:
        memory.ingest("src/qemem/data/sample.json")
    result = CliRunner().invoke(
        app, ["build", "--store", str(db), "--llm", "fake", "--embedder", "hash"]
    )
    assert result.exit_code == 0, result.output
    assert "build cost per 1,000 messages (65 built):" in result.output
    assert "calls" in result.output and "tokens in" in result.output
