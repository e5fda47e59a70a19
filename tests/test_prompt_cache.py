"""Provider prompt caching: the simulated prefix rules, minimum lengths, cache prices, the
ledger's cache token sums, and messages made of parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qemem.errors import ConfigError
from qemem.llm import Ledger, LLMRequest, LLMResponse, Message, PriceTable, open_llm
from qemem.llm.prices import load_cache_prices
from qemem.llm.prompt_cache import (
    CacheSplit,
    Prompt,
    automatic_cached_tokens,
    breakpoint_allowed,
    common_prefix_length,
    min_cacheable_tokens,
    simulate_automatic_cache,
    simulate_breakpoint_cache,
)
from qemem.llm.types import Part

POOL = "p" * 4 * 5000  # 5,000 tokens at characters / 4


def _prompt(own: str, prefix: str = POOL) -> Prompt:
    return Prompt(prefix + own, prefix)


def test_breakpoint_rule_writes_once_then_reads_the_exact_prefix() -> None:
    prompts = [Prompt("plan " * 80), _prompt("a" * 400), _prompt("b" * 800), _prompt("b" * 804)]
    splits = simulate_breakpoint_cache(prompts, minimum=4096)
    assert splits[0] == CacheSplit(100)  # no breakpoint: all uncached
    assert splits[1] == CacheSplit(100, write=5000)
    assert splits[2] == CacheSplit(200, read=5000)
    assert splits[3] == CacheSplit(201, read=5000)
    assert [s.total for s in splits] == [100, 5100, 5200, 5201]


def test_breakpoint_rule_caches_nothing_below_the_minimum_or_for_another_prefix() -> None:
    short = "s" * 4 * 4095
    splits = simulate_breakpoint_cache([_prompt("a", short), _prompt("b", short)], 4096)
    assert all(s.write == s.read == 0 for s in splits)
    other = POOL[:-1] + "q"  # one character differs: a new prefix, written again
    splits = simulate_breakpoint_cache([_prompt("a"), _prompt("b", other)], 4096)
    assert (splits[1].write, splits[1].read) == (5000, 0)


def test_automatic_rule_reads_the_longest_shared_prefix_in_128_token_steps() -> None:
    assert common_prefix_length("abcd", "abxy") == 2 and common_prefix_length("", "a") == 0
    assert automatic_cached_tokens(1023, 5000) == 0
    assert automatic_cached_tokens(1024, 5000) == 1024
    assert automatic_cached_tokens(1151, 5000) == 1024
    assert automatic_cached_tokens(1152, 5000) == 1152
    assert automatic_cached_tokens(2000, 1000) == 0  # prompts under 1,024 tokens: never
    splits = simulate_automatic_cache([_prompt("a" * 400), _prompt("b" * 400)])
    assert splits[0] == CacheSplit(5100)  # nothing earlier: no write premium either
    assert splits[1].read == 1024 + (5000 - 1024) // 128 * 128 and splits[1].write == 0
    assert splits[1].total == 5100


def test_documented_minimums_by_model_and_provider() -> None:
    assert min_cacheable_tokens("anthropic", "claude-haiku-4-5") == 4096
    assert min_cacheable_tokens("bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0") == 4096
    assert min_cacheable_tokens("anthropic", "claude-sonnet-4-5-20250929") == 1024
    assert min_cacheable_tokens("anthropic", "claude-opus-4-5") == 4096  # not opus-4's 1,024
    assert min_cacheable_tokens("anthropic", "claude-3-5-haiku-latest") == 2048
    assert min_cacheable_tokens("openai", "gpt-4.1-mini") == 1024
    assert min_cacheable_tokens("anthropic", "some-new-model") == 4096  # never too short
    assert min_cacheable_tokens("fake", "fake") == 0
    assert min_cacheable_tokens("fake", "claude-haiku-4-5") == 4096  # standing for Haiku


def test_request_cache_prefix_and_breakpoint_allowed() -> None:
    message = Message.of("user", [Part(POOL, cache=True), Part(""), Part("When?")])
    assert message.content == POOL + "When?" and len(message.parts) == 2  # empty part dropped
    assert message.to_dict() == {"role": "user", "content": POOL + "When?"}
    request = LLMRequest("Role.", [message], "answer")
    assert request.cache_prefix == f"Role.\n{POOL}"
    assert request.prompt_text.startswith(request.cache_prefix)
    assert breakpoint_allowed(request, "anthropic", "claude-haiku-4-5")
    plain = LLMRequest("Role.", [Message("user", "When?")], "answer")
    assert plain.cache_prefix is None and not breakpoint_allowed(plain, "openai", "gpt-4.1")
    with pytest.raises(ValueError, match="must join to its content"):
        Message("user", "other", (Part("x"),))


def test_costs_price_cache_writes_and_reads_apart() -> None:
    prices = PriceTable()
    assert prices.cache_lookup("us.anthropic.claude-haiku-4-5-20251001-v1:0") == (1.375, 0.11)
    cost = prices.cost("claude-haiku-4-5", 10_000, 1000, cache_write=4000, cache_read=5000)
    assert cost == pytest.approx((1000 * 1.1 + 4000 * 1.375 + 5000 * 0.11 + 1000 * 5.5) / 1e6)
    assert prices.cost("claude-haiku-4-5", 100, 10) == pytest.approx((110 + 55) / 1e6)
    custom = PriceTable({"my-model": (1.0, 2.0)})
    assert custom.cache_lookup("my-model") == (1.0, 1.0)  # no discount assumed
    assert custom.cost("unknown", 1, 1, 1, 0) is None


def test_ledger_sums_cache_tokens_by_stage() -> None:
    ledger = Ledger()
    for stage, write, read in (("construct", 4000, 0), ("answer", 0, 4000), ("answer", 0, 10)):
        ledger.record(
            LLMResponse(
                "x", None, 4500, 10, 0.0, "m", 0.0, stage,
                cache_write_tokens=write, cache_read_tokens=read,
            )
        )  # fmt: skip
    data = ledger.to_dict()
    assert data["total"]["cache_write_tokens"] == 4000
    assert data["total"]["cache_read_tokens"] == 4010
    assert data["by_stage"]["answer"]["cache_read_tokens"] == 4010
    old = LLMResponse.from_dict({k: v for k, v in ledger.responses[0].to_dict().items()
                                 if not k.startswith("cache_")})  # fmt: skip
    assert old.cache_write_tokens == old.cache_read_tokens == 0  # records from before


def test_a_price_file_may_give_cache_prices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "prices.json"
    entry = {"input": 1.0, "output": 2.0, "cache_write": 1.25, "cache_read": 0.1}
    path.write_text(json.dumps({"my-model": entry, "other": [0.5, 1.0]}))
    assert load_cache_prices(path) == {"my-model": (1.25, 0.1)}
    monkeypatch.setenv("QEMEM_PRICES", str(path))
    client = open_llm("fake")
    assert client is not None and client.prices.cache_lookup("my-model") == (1.25, 0.1)
    path.write_text(json.dumps({"m": {"input": 1, "output": 2, "cache_read": 0.1}}))
    with pytest.raises(ConfigError, match="give both cache_write and cache_read"):
        load_cache_prices(path)
