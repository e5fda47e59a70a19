"""The ``faulty:`` provider and fault drills: builds and asks survive injected provider faults,
and no failed output is ever cached as a success."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pydantic
import pytest

from qemem.embed import HashEmbedder
from qemem.errors import ConfigError, LLMCallError, LLMError
from qemem.llm import LLMCache, LLMClient, LLMRequest, Message, open_llm
from qemem.llm.client import cacheable
from qemem.llm.faulty import OUTPUT, TRANSPORT, FaultyProvider
from qemem.memory import Memory
from qemem.store import SQLiteStore
from qemem.testing import OfflineLLM


class Reply(pydantic.BaseModel):
    answer: str


def request(n: int, schema: bool = True) -> LLMRequest:
    req = LLMRequest("Answer briefly.", [Message("user", f"question {n} about D1:3")], "test")
    return req.with_(schema=Reply.model_json_schema(), schema_name="Reply") if schema else req


def no_wait(seconds: float) -> None:
    """Backoff waits are skipped in tests."""


def test_spec_parses_and_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_FAULT_SEED", "7")
    client = open_llm("faulty:0.25:fake")
    assert client is not None and isinstance(client.provider, FaultyProvider)
    assert client.provider.rate == 0.25 and (client.provider.name, client.provider.model) == (
        "fake",
        "fake",
    )
    for bad in ("faulty:2:fake", "faulty:x:fake", "faulty:0.2", "faulty:0.2:nope:x"):
        with pytest.raises(ConfigError):
            open_llm(bad)


def test_every_fault_kind_is_injected_and_transport_faults_are_retryable() -> None:
    provider = FaultyProvider(OfflineLLM(), 1.0, seed=3)
    for n in range(200):
        try:
            provider.complete(request(n))
        except LLMCallError as exc:
            assert exc.retryable
    assert set(provider.injected) == set(TRANSPORT + OUTPUT)
    assert sum(provider.injected.values()) == 200
    quiet = FaultyProvider(OfflineLLM(), 0.0)
    assert quiet.complete(request(1)).parsed is not None and not quiet.injected


def test_nothing_that_failed_is_cached(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "c.db")
    client = LLMClient(FaultyProvider(OfflineLLM(), 1.0, seed=1), cache=cache, sleep=no_wait)
    for n in range(40):
        with contextlib.suppress(LLMError):
            client.structured(request(n), Reply)
        with contextlib.suppress(LLMError):
            client.complete(request(n, schema=False))
    assert cache.count() == 0
    flaky = LLMClient(FaultyProvider(OfflineLLM(), 0.3, seed=2), cache=cache, sleep=no_wait)
    for n in range(40):
        with contextlib.suppress(LLMError):
            flaky.structured(request(n), Reply)
    assert 0 < cache.count() <= 80
    replay = LLMClient(OfflineLLM(handler=lambda r: "not json"), cache=cache)
    for n in range(40):
        key_hit = replay.complete(request(n))
        if key_hit.cached:
            assert cacheable(request(n), key_hit)
            Reply.model_validate(key_hit.parsed)
    cache.close()


def test_build_and_ask_survive_20_percent_faults(sample_path: Path, tmp_path: Path) -> None:
    provider = FaultyProvider(OfflineLLM(), 0.2, seed=11)
    llm = LLMClient(provider, cache=LLMCache(tmp_path / "c.db"), concurrency=2, sleep=no_wait)
    memory = Memory(SQLiteStore(":memory:"), HashEmbedder(), llm=llm)
    memory.ingest(sample_path)
    [report] = memory.build("demo-1")
    covered = {t for e in memory.episodes("demo-1") for t in e.turn_ids}
    assert covered == {t.id for t in memory.turns("demo-1")}
    injected = sum(provider.injected.values())
    transport = sum(provider.injected[k] for k in TRANSPORT)
    assert injected > 0 and transport == sum(
        n for kind, n in llm.faults.items() if kind != "invalid output"
    )
    assert llm.faults["invalid output"] + len(report.degraded) > 0
    answers = [memory.ask("demo-1", q) for q in ("What books has Priya read?", "Who is Biscuit?")]
    assert all(a.question for a in answers)
    memory.close()
