"""Prompt caching through the real provider SDKs against recorded exchanges (see
``test_llm_providers``): each provider's breakpoint shape (Anthropic ``cache_control``,
Bedrock ``cachePoint``, OpenAI's stable prefix and ``prompt_cache_key``), the cache usage
parsed and priced, and no breakpoint below a model's minimum cacheable length."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import test_llm_providers as providers
from qemem.llm import LLMClient, LLMRequest, Message
from qemem.llm.providers.anthropic import AnthropicProvider
from qemem.llm.providers.bedrock import BedrockProvider
from qemem.llm.providers.openai import OpenAIProvider
from qemem.llm.types import Part
from replay_server import ReplayServer
from test_llm_providers import BEDROCK_MODEL, Answer, sdk

# the replay-server fixtures of the provider tests
replay, anthropic_at = providers.replay, providers.anthropic_at
openai_at, bedrock_at = providers.openai_at, providers.bedrock_at


PREFIX = "Memories:\n" + "[D1:1] Priya: I went to my first pottery class last Saturday.\n" * 300


def _cached_pair() -> tuple[LLMRequest, LLMRequest]:
    """A structured and a plain request sharing one long prefix closed by a breakpoint."""
    shared = Part(PREFIX, cache=True)
    first = LLMRequest(
        "Be brief.", [Message.of("user", [shared, Part("Task A. When? [D1:3]")])], "construct"
    )
    second = LLMRequest(
        "Be brief.",
        [Message.of("user", [shared, Part("Task B. When? [D1:3]")])],
        "answer",
        max_tokens=32,
    )
    return first.with_(max_tokens=64), second


def test_anthropic_marks_the_shared_prefix_ephemeral_and_reads_cache_usage(
    anthropic_at: Callable[[str], tuple[AnthropicProvider, ReplayServer]],
) -> None:
    provider, server = anthropic_at("anthropic_prompt_cache")
    client = LLMClient(provider)
    first, second = _cached_pair()
    structured = client.structured(first, Answer)
    plain = client.complete(second)
    server.verify()  # no tools: the schema is stated after the breakpoint
    bodies = [r.json() for r in server.received]
    for body, own in zip(bodies, ("Task A.", "Task B."), strict=True):
        head, *tail = body["messages"][0]["content"]
        assert head == {"type": "text", "text": PREFIX, "cache_control": {"type": "ephemeral"}}
        assert tail[0]["text"].startswith(own)
        assert not any("cache_control" in block for block in tail)
    assert "JSON schema" in bodies[0]["messages"][0]["content"][-1]["text"]
    assert structured.value == Answer(answer="7 May 2023", sources=["D1:3"])
    one, two = structured.response, plain
    assert (one.input_tokens, one.cache_write_tokens, one.cache_read_tokens) == (4540, 4500, 0)
    assert (two.input_tokens, two.cache_write_tokens, two.cache_read_tokens) == (4530, 0, 4500)
    assert one.cost_usd == pytest.approx((40 * 1.1 + 4500 * 1.375 + 20 * 5.5) / 1e6)
    assert two.cost_usd == pytest.approx((30 * 1.1 + 4500 * 0.11 + 8 * 5.5) / 1e6)
    totals = client.ledger.to_dict()["total"]
    assert (totals["cache_write_tokens"], totals["cache_read_tokens"]) == (4500, 4500)


def test_bedrock_sends_a_cache_point_after_the_prefix_and_reads_cache_usage(
    bedrock_at: Callable[..., tuple[BedrockProvider, ReplayServer]],
) -> None:
    provider, server = bedrock_at("bedrock_prompt_cache")
    client = LLMClient(provider)
    first, second = _cached_pair()
    structured = client.structured(first, Answer)
    plain = client.complete(second)
    server.verify()  # no toolConfig: the schema is stated after the cache point
    for received in server.received:
        blocks = received.json()["messages"][0]["content"]
        assert blocks[:2] == [{"text": PREFIX}, {"cachePoint": {"type": "default"}}]
        assert blocks[2]["text"].startswith("Task") and all("text" in b for b in blocks[2:])
    assert "JSON schema" in server.received[0].json()["messages"][0]["content"][-1]["text"]
    assert structured.value == Answer(answer="7 May 2023", sources=["D1:3"])
    one, two = structured.response, plain
    assert (one.input_tokens, one.cache_write_tokens, one.cache_read_tokens) == (4540, 4500, 0)
    assert (two.input_tokens, two.cache_write_tokens, two.cache_read_tokens) == (4530, 0, 4500)
    assert two.cost_usd == pytest.approx((30 * 1.1 + 4500 * 0.11 + 8 * 5.5) / 1e6)


@pytest.mark.slow
def test_openai_keeps_the_prefix_stable_and_reads_cached_tokens(
    openai_at: Callable[..., tuple[OpenAIProvider, ReplayServer]],
) -> None:
    provider, server = openai_at("openai_prompt_cache")
    client = LLMClient(provider)
    first, second = _cached_pair()
    structured = client.structured(first, Answer)
    plain = client.complete(second)
    server.verify()  # no response_format: it would be part of the cached prefix
    bodies = [r.json() for r in server.received]
    assert bodies[0]["prompt_cache_key"] == bodies[1]["prompt_cache_key"]
    assert bodies[0]["prompt_cache_key"].startswith("qemem-")
    for body in bodies:
        system, user = body["messages"]
        assert system == {"role": "system", "content": "Be brief."}
        assert user["content"].startswith(PREFIX)
    assert structured.value == Answer(answer="7 May 2023", sources=["D1:3"])
    assert (plain.input_tokens, plain.cache_write_tokens, plain.cache_read_tokens) == (
        4590,
        0,
        4480,
    )
    assert plain.cost_usd == pytest.approx((110 * 0.4 + 4480 * 0.1 + 8 * 1.6) / 1e6)


def test_no_breakpoint_below_the_models_minimum_cacheable_length() -> None:
    sdk("anthropic")
    sdk("openai")
    short = LLMRequest(
        "Be brief.",
        [Message.of("user", [Part("Memories: [D1:3] ...", cache=True), Part("When?")])],
        "construct",
    ).with_(schema=Answer.model_json_schema(), schema_name="Answer")
    anthropic = AnthropicProvider("claude-haiku-4-5", api_key="k", client=object()).payload(short)
    assert anthropic["messages"][0]["content"] == "Memories: [D1:3] ...When?"
    assert anthropic["tool_choice"] == {"type": "tool", "name": "Answer"}  # a native tool
    bedrock = BedrockProvider(BEDROCK_MODEL, client=object()).payload(short)
    assert bedrock["messages"][0]["content"] == [{"text": "Memories: [D1:3] ...When?"}]
    assert "toolConfig" in bedrock
    openai = OpenAIProvider("gpt-4.1-mini", api_key="k", client=object()).payload(short)
    assert "extra_body" not in openai and "response_format" in openai
    # 5,000 tokens reach Haiku 4.5's 4,096 only with the prefix; Sonnet 4.5 caches 1,024
    mid = "x" * 4 * 2000
    sonnet = short.with_(messages=[Message.of("user", [Part(mid, cache=True), Part("When?")])])
    assert (
        AnthropicProvider("claude-haiku-4-5", api_key="k", client=object()).payload(sonnet)[
            "messages"
        ][0]["content"]
        == mid + "When?"
    )
    blocks = AnthropicProvider("claude-sonnet-4-5", api_key="k", client=object()).payload(sonnet)
    assert blocks["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
