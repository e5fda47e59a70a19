"""LLMClient: retries, cache modes, structured output with repair, concurrency, open_llm."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import BaseModel

from qemem.errors import (
    CacheMissError,
    ConfigError,
    LLMAuthError,
    LLMCallError,
    StructuredOutputError,
)
from qemem.llm import (
    Ledger,
    LLMCache,
    LLMClient,
    LLMRequest,
    LLMResponse,
    Message,
    cache_key,
    open_llm,
)
from qemem.llm.types import Provider
from qemem.testing import OfflineLLM


class Verdict(BaseModel):
    label: str
    score: int


def _req(text: str = "q", stage: str = "judge") -> LLMRequest:
    return LLMRequest("sys", [Message("user", text)], stage)


class Flaky:
    """Fails with the given errors, then answers."""

    name = "flaky"
    model = "claude-haiku-4-5"

    def __init__(self, errors: list[LLMCallError]) -> None:
        self.errors = list(errors)
        self.calls = 0

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return LLMResponse("ok", None, 1000, 2000, 1.5, self.model, None, request.stage)


def test_retries_transient_errors_honouring_retry_after() -> None:
    waits: list[float] = []
    provider = Flaky(
        [
            LLMCallError("429", retryable=True, status=429, retry_after=7.0),
            LLMCallError("503", retryable=True, status=503),
        ]
    )
    client = LLMClient(provider, sleep=waits.append, rng=random.Random(0), base_delay_s=1.0)
    out = client.complete(_req())
    assert out.text == "ok" and provider.calls == 3
    assert waits[0] == 7.0
    assert 1.0 <= waits[1] <= 2.0  # attempt 1: 1 * 2**1 with jitter in [0.5, 1]
    assert out.cost_usd == pytest.approx(0.0121)  # haiku prices: 1000*1.1e-6 + 2000*5.5e-6


def test_gives_up_after_max_attempts_and_never_retries_permanent_errors() -> None:
    waits: list[float] = []
    failing = Flaky([LLMCallError("boom", retryable=True, status=500)] * 3)
    client = LLMClient(failing, max_attempts=3, sleep=waits.append)
    with pytest.raises(LLMCallError, match="gave up after 3 attempts"):
        client.complete(_req())
    assert failing.calls == 3 and len(waits) == 2
    auth = Flaky([LLMAuthError("check key", status=401)])
    with pytest.raises(LLMAuthError):
        LLMClient(auth, sleep=waits.append).complete(_req())
    assert auth.calls == 1


def test_readwrite_cache_serves_hits_without_calls_and_counts_no_spend(tmp_path) -> None:
    path = tmp_path / "c.db"
    provider = Flaky([])
    client = LLMClient(provider, cache=LLMCache(path))
    first = client.complete(_req(stage="plan"))
    again = client.complete(_req(stage="answer"))  # stage is not part of the key
    assert provider.calls == 1
    assert again.cached and not first.cached
    assert again.stage == "answer" and again.latency_s == first.latency_s
    assert again.cost_usd == first.cost_usd
    total = client.ledger.total()
    assert total.cost_nominal_usd == pytest.approx(2 * 0.0121)
    assert total.cost_spent_usd == pytest.approx(0.0121)


def test_replay_is_byte_identical_and_a_miss_is_an_error(tmp_path) -> None:
    path = tmp_path / "c.db"
    rec = LLMClient(OfflineLLM(), cache=LLMCache(path, "readwrite"))
    recorded = [rec.structured(_req(f"D1:{i} hello", "construct"), Verdict) for i in range(3)]
    offline = OfflineLLM(lambda r: pytest.fail("replay must not call the provider"))
    replay = LLMClient(offline, cache=LLMCache(path, "replay"))
    replayed = [replay.structured(_req(f"D1:{i} hello", "construct"), Verdict) for i in range(3)]
    dump = [json.dumps(s.value.model_dump(), sort_keys=True) for s in recorded]
    assert dump == [json.dumps(s.value.model_dump(), sort_keys=True) for s in replayed]
    assert [s.response.text for s in replayed] == [s.response.text for s in recorded]
    with pytest.raises(CacheMissError, match="QEMEM_CACHE_MODE=readwrite"):
        replay.complete(_req("never recorded"))
    with pytest.raises(ConfigError, match="does not exist"):
        LLMCache(tmp_path / "nothing.db", "replay")


def test_cache_key_covers_parameters_but_not_stage() -> None:
    base = _req()
    key = cache_key("p", "m", base)
    assert key == cache_key("p", "m", base.with_(stage="other"))
    for changed in (
        base.with_(temperature=0.5),
        base.with_(max_tokens=10),
        base.with_(schema={"type": "object"}),
        base.with_(system="other"),
    ):
        assert cache_key("p", "m", changed) != key
    assert cache_key("p", "m2", base) != key and cache_key("p2", "m", base) != key


def test_structured_repairs_once_with_the_validation_error() -> None:
    seen: list[LLMRequest] = []

    def handler(request: LLMRequest) -> str:
        seen.append(request)
        if request.stage == "judge":
            return 'I think {"label": "CORRECT", "score": "high"}'
        return '```json\n{"label": "CORRECT", "score": 1}\n```'

    ledger = Ledger()
    client = LLMClient(OfflineLLM(handler))
    result = client.structured(_req(), Verdict, ledger=ledger)
    assert result.value == Verdict(label="CORRECT", score=1) and result.repaired
    repair = seen[1]
    assert repair.stage == "judge.repair"
    assert repair.messages[1].role == "assistant" and "score" in repair.messages[1].content
    assert "score: Input should be a valid integer" in repair.messages[2].content
    assert seen[0].schema == Verdict.model_json_schema() and seen[0].schema_name == "Verdict"
    assert set(ledger.by_stage()) == {"judge", "judge.repair"}


def test_structured_raises_typed_error_after_failed_repair() -> None:
    client = LLMClient(OfflineLLM(lambda r: "I cannot answer that."))
    with pytest.raises(StructuredOutputError, match="even after a repair call") as info:
        client.structured(_req(), Verdict)
    assert len(info.value.responses) == 2  # type: ignore[attr-defined]
    assert client.ledger.total().calls == 2


class Slow:
    name = "slow"
    model = "slow"

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResponse:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.02)
        with self.lock:
            self.active -= 1
        return LLMResponse("x", None, 1, 1, 0.02, "slow", None, request.stage)


def test_concurrency_bound_is_shared_by_all_stages() -> None:
    slow = Slow()
    assert isinstance(slow, Provider)
    client = LLMClient(slow, concurrency=3)
    stages = ["plan", "construct", "answer", "judge"] * 6
    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda i: client.complete(_req(str(i), stages[i])), range(24)))
    assert slow.peak == 3
    assert client.ledger.total().calls == 24
    assert client.ledger.total().cost_nominal_usd is None  # unknown model: tokens, no cost


def test_async_wrappers_run_the_same_implementation() -> None:
    client = LLMClient(OfflineLLM(lambda r: '{"label": "a", "score": 2}'))

    async def main() -> tuple[LLMResponse, Verdict]:
        plain = await client.acomplete(_req())
        structured = await client.astructured(_req("other"), Verdict)
        return plain, structured.value

    plain, verdict = asyncio.run(main())
    assert plain.text == '{"label": "a", "score": 2}' and verdict.score == 2


def test_open_llm_reads_env_and_returns_none_when_unconfigured(monkeypatch, tmp_path) -> None:
    for var in ("QEMEM_LLM", "QEMEM_LLM_CACHE", "QEMEM_CACHE_MODE", "QEMEM_PRICES"):
        monkeypatch.delenv(var, raising=False)
    assert open_llm() is None
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"fake-big": [1, 2]}))
    monkeypatch.setenv("QEMEM_LLM", "fake")
    monkeypatch.setenv("QEMEM_LLM_CACHE", str(tmp_path / "cache.db"))
    monkeypatch.setenv("QEMEM_LLM_CONCURRENCY", "2")
    monkeypatch.setenv("QEMEM_PRICES", str(prices))
    client = open_llm()
    assert client is not None
    assert client.describe() == {
        "provider": "fake",
        "model": "fake",
        "cache_mode": "readwrite",
        "cache_path": str(tmp_path / "cache.db"),
        "concurrency": 2,
    }
    assert client.prices.lookup("fake-big") == (1.0, 2.0)
    assert client.complete(_req()).cost_usd == 0.0
    assert open_llm("fake", cache_mode="off").cache is None  # type: ignore[union-attr]
    monkeypatch.setenv("QEMEM_CACHE_MODE", "sometimes")
    with pytest.raises(ConfigError, match="off, readwrite, replay"):
        open_llm()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt4", "unknown provider 'gpt4'"),
        ("anthropic:", "needs an argument"),
        ("openai-compat:llama3", "<model>@<http"),
        ("openai-compat:llama3@ftp://x", "<model>@<http"),
    ],
)
def test_bad_specs_list_the_valid_forms(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match="valid forms") as info:
        open_llm(spec)
    assert message in str(info.value) and "llamacpp:<path to .gguf>" in str(info.value)


@pytest.mark.slow
def test_missing_keys_name_the_variable(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        open_llm("anthropic:claude-haiku-4-5")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        open_llm("openai:gpt-4.1-mini")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(ConfigError, match="AWS_REGION"):
        open_llm("bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0")


@pytest.mark.parametrize(
    "reason",
    ["max_tokens", "length", "model_context_window_exceeded", "modelContextWindowExceeded"],
)
def test_output_cut_at_a_limit_is_never_cacheable(reason: str) -> None:
    from qemem.llm.client import cacheable
    from qemem.llm.types import LLMRequest, LLMResponse, Message

    request = LLMRequest("s", [Message("user", "hi")], "answer")
    response = LLMResponse("partial", None, 1, 1, 0.0, "m", None, "answer", extra={})
    assert cacheable(request, response)
    assert not cacheable(request, response.with_(extra={"stop_reason": reason}))
