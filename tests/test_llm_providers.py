"""Real providers through their real SDKs against recorded exchanges on a loopback server.

Each SDK is pointed at ``tests/replay_server.py`` by its own base-URL option (ANTHROPIC_BASE_URL,
OPENAI_BASE_URL, AWS_ENDPOINT_URL_BEDROCK_RUNTIME, the openai-compat URL), so its real HTTP
client is exercised; the exchanges in ``tests/fixtures/exchanges/`` are written from each
provider's documented request and response shapes (each fixture's ``source`` cites where from).
A missing SDK fails these tests under CI=true (the dev extra installs all) and skips them only
locally. The last tests prove that the conftest guard fails any call to a real provider.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from provider_guard import ProviderGuard, is_local
from qemem.errors import ConfigError, LLMAuthError, LLMCallError
from qemem.llm import LLMCache, LLMClient, LLMRequest, Message, open_llm
from qemem.llm.providers._common import parse_retry_after
from qemem.llm.providers.anthropic import AnthropicProvider
from qemem.llm.providers.bedrock import BedrockProvider
from qemem.llm.providers.cmd import CmdProvider
from qemem.llm.providers.llamacpp import LlamaCppProvider
from qemem.llm.providers.openai import OpenAIProvider
from replay_server import ReplayServer, load_exchanges

SECRET = "sk-live-SECRET-0123456789abcdef"  # the key the fixtures expect
BEDROCK_MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


class Answer(BaseModel):
    answer: str
    sources: list[str]


def sdk(module: str) -> types.ModuleType:
    """``module`` imported; if missing, a failure under CI=true (the dev extra installs every
    provider SDK), a skip only on a developer's machine."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} must be installed under CI (dev extra): {exc}", pytrace=False)
        pytest.skip(f"{module} is not installed")


def _req(schema: bool = False) -> LLMRequest:
    req = LLMRequest("Be brief.", [Message("user", "When? [D1:3]")], "answer", max_tokens=64)
    return req.with_(schema=Answer.model_json_schema(), schema_name="Answer") if schema else req


def _client(provider: Any, waits: list[float], attempts: int = 3) -> LLMClient:
    return LLMClient(provider, sleep=waits.append, max_attempts=attempts)


@pytest.fixture
def replay() -> Iterator[Callable[[str], ReplayServer]]:
    """Start the replay server of a fixture by name; all are stopped after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda name: stack.enter_context(ReplayServer.of(name))


@pytest.fixture
def anthropic_at(
    replay: Callable[[str], ReplayServer], monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], tuple[AnthropicProvider, ReplayServer]]:
    """An AnthropicProvider whose SDK talks to the replay server of a fixture."""
    sdk("anthropic")

    def make(name: str) -> tuple[AnthropicProvider, ReplayServer]:
        server = replay(name)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        return AnthropicProvider("claude-haiku-4-5", api_key=SECRET), server

    return make


@pytest.fixture
def openai_at(
    replay: Callable[[str], ReplayServer], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[OpenAIProvider, ReplayServer]]:
    """An OpenAIProvider whose SDK talks to the replay server of a fixture."""
    sdk("openai")

    def make(name: str, model: str = "gpt-4.1-mini") -> tuple[OpenAIProvider, ReplayServer]:
        server = replay(name)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        return OpenAIProvider(model, api_key=SECRET), server

    return make


@pytest.fixture
def bedrock_at(
    replay: Callable[[str], ReplayServer], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[BedrockProvider, ReplayServer]]:
    """A BedrockProvider that builds its own boto3 client, with dummy credentials and region,
    against the replay server of a fixture."""
    boto3 = sdk("boto3")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "AKIAFAKE",
        "AWS_SECRET_ACCESS_KEY": "fake-secret",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)

    def make(name: str, model: str = BEDROCK_MODEL) -> tuple[BedrockProvider, ReplayServer]:
        server = replay(name)
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
        return BedrockProvider(model), server

    return make


def test_anthropic_structured_uses_a_forced_tool_and_parses_usage(
    anthropic_at: Callable[[str], tuple[AnthropicProvider, ReplayServer]], tmp_path: Path
) -> None:
    provider, server = anthropic_at("anthropic_tool_use")
    client = LLMClient(provider, cache=LLMCache(tmp_path / "c.db"))
    result = client.structured(_req(), Answer)
    again = client.structured(_req(), Answer)
    assert again.response.cached and len(server.received) == 1
    server.verify()  # model, system, messages, the forced tool with the schema, max_tokens...
    client.cache.close()  # type: ignore[union-attr]
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"7 May 2023" in stored and SECRET.encode() not in stored
    assert SECRET not in json.dumps([client.ledger.to_dict(), result.response.to_dict()])
    assert result.value == Answer(answer="7 May 2023", sources=["D1:3"])
    resp = result.response
    assert (resp.input_tokens, resp.output_tokens) == (120, 30)
    assert (resp.model, resp.extra) == ("claude-haiku-4-5-20251001", {"stop_reason": "tool_use"})
    assert resp.cost_usd == pytest.approx((120 * 1.1 + 30 * 5.5) / 1e6)


def test_anthropic_retries_429_with_retry_after_and_500_then_fails(
    anthropic_at: Callable[[str], tuple[AnthropicProvider, ReplayServer]],
) -> None:
    provider, server = anthropic_at("anthropic_rate_limited")
    waits: list[float] = []
    assert _client(provider, waits).complete(_req()).text == "FINAL ANSWER: x"
    assert waits == [3.0]
    server.verify()  # two requests: the SDK itself does not retry
    provider, failing = anthropic_at("anthropic_server_error")
    with pytest.raises(LLMCallError, match="HTTP 500") as info:
        _client(provider, waits).complete(_req())
    failing.verify()
    assert "gave up after 3 attempts" in str(info.value) and info.value.status == 500


def test_anthropic_retries_529_overloaded(
    anthropic_at: Callable[[str], tuple[AnthropicProvider, ReplayServer]],
) -> None:
    provider, server = anthropic_at("anthropic_overloaded")
    waits: list[float] = []
    client = _client(provider, waits)
    assert client.complete(_req()).text == "FINAL ANSWER: x"
    server.verify()
    assert len(waits) == 1 and client.faults["http 529"] == 1


def test_anthropic_401_says_check_the_key_without_leaking_it(
    anthropic_at: Callable[[str], tuple[AnthropicProvider, ReplayServer]],
) -> None:
    provider, server = anthropic_at("anthropic_auth")
    client = _client(provider, [])
    with pytest.raises(LLMAuthError, match="check the API key") as info:
        client.complete(_req())
    server.verify()  # one request: an auth error is not retried
    assert isinstance(info.value, ConfigError) and info.value.status == 401
    assert SECRET not in str(info.value)
    assert SECRET not in repr(provider) + repr(client) + json.dumps(client.describe())


def test_anthropic_output_cut_at_max_tokens_is_never_cached(
    anthropic_at: Callable[[str], tuple[AnthropicProvider, ReplayServer]], tmp_path: Path
) -> None:
    provider, server = anthropic_at("anthropic_max_tokens")
    client = LLMClient(provider, cache=LLMCache(tmp_path / "c.db"))
    first, second = client.complete(_req()), client.complete(_req())
    client.close()
    server.verify()  # both went to the provider
    assert first.extra == {"stop_reason": "max_tokens"} and not second.cached
    assert first.output_tokens == 64


def test_openai_sends_json_schema_response_format_and_parses_text(
    openai_at: Callable[..., tuple[OpenAIProvider, ReplayServer]],
) -> None:
    provider, server = openai_at("openai_json_schema")
    result = LLMClient(provider).structured(_req(), Answer)
    server.verify()  # max_completion_tokens, system message first, response_format json_schema
    assert result.value.sources == ["D1:3"] and result.response.parsed is not None
    assert (result.response.input_tokens, result.response.output_tokens) == (50, 10)
    assert result.response.extra == {"stop_reason": "stop"}
    assert result.response.cost_usd == pytest.approx((50 * 0.4 + 10 * 1.6) / 1e6)


def test_openai_401_message_is_redacted_and_429_is_retried(
    openai_at: Callable[..., tuple[OpenAIProvider, ReplayServer]],
) -> None:
    provider, server = openai_at("openai_auth")
    with pytest.raises(LLMAuthError) as info:
        _client(provider, []).complete(_req())
    server.verify()
    assert SECRET not in str(info.value)
    provider, server = openai_at("openai_rate_limited")
    waits: list[float] = []
    assert _client(provider, waits).complete(_req()).text == "hi" and waits == [1.5]
    server.verify()
    provider, server = openai_at("openai_unknown_model", model="gpt-9")
    with pytest.raises(LLMCallError, match="does not know model 'gpt-9'"):
        _client(provider, []).complete(_req())
    server.verify()


def test_openai_503_with_an_unusable_retry_after_is_retried_with_backoff(
    openai_at: Callable[..., tuple[OpenAIProvider, ReplayServer]],
) -> None:
    provider, server = openai_at("openai_bad_retry_after")
    waits: list[float] = []
    assert _client(provider, waits).complete(_req()).text == "hi"  # no ValueError escapes
    server.verify()
    assert len(waits) == 1 and 0.5 <= waits[0] <= 1.0  # the client's own first backoff


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "-5"}, 0.0),
        ({"retry-after-ms": "nan", "retry-after": "2"}, 2.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_finite_and_never_negative(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert parse_retry_after(headers) == seconds


def test_openai_compat_puts_schema_in_prompt_and_hides_url_credentials(
    replay: Callable[[str], ReplayServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sdk("openai")
    monkeypatch.setenv("QEMEM_LLM_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-leave")
    hidden = OpenAIProvider("m", base_url="http://user:pw@localhost:8000/v1?token=abc")
    assert hidden.base_url == "http://localhost:8000/v1"
    assert "pw" not in repr(hidden) and "abc" not in repr(hidden)
    server = replay("compat_llamacpp_server")  # llama.cpp's llama-server: 503 while loading
    opened = open_llm(f"openai-compat:llama3.1:8b@{server.url}/v1")
    assert opened is not None
    provider = opened.provider
    waits: list[float] = []
    client = _client(provider, waits)
    assert (provider.name, provider.model) == ("openai-compat", "llama3.1:8b")
    result = client.structured(_req(), Answer)
    server.verify()  # max_tokens, the schema stated in the system prompt, no response_format
    assert result.value == Answer(answer="x", sources=[])
    assert client.faults["http 503"] == 1 and len(waits) == 1  # "Loading model" is retried
    assert result.response.cost_usd is None  # unknown model: tokens only
    assert (result.response.input_tokens, result.response.output_tokens) == (50, 10)


def test_bedrock_converse_with_tool_config_and_usage(
    bedrock_at: Callable[..., tuple[BedrockProvider, ReplayServer]],
) -> None:
    provider, server = bedrock_at("bedrock_tool_use")
    result = LLMClient(provider).structured(_req(), Answer)
    server.verify()  # SigV4 with the dummy key, one attempt, toolConfig forcing the tool
    assert result.value == Answer(answer="y", sources=["D1:3"])
    assert server.received[0].json()["toolConfig"]["toolChoice"] == {"tool": {"name": "Answer"}}
    assert (result.response.input_tokens, result.response.output_tokens) == (1000, 100)
    assert result.response.extra == {"stop_reason": "tool_use"}
    assert result.response.cost_usd == pytest.approx((1000 * 1.1 + 100 * 5.5) / 1e6)


def test_bedrock_states_the_schema_in_the_prompt_for_models_that_cannot_be_forced(
    bedrock_at: Callable[..., tuple[BedrockProvider, ReplayServer]],
) -> None:
    provider, server = bedrock_at("bedrock_schema_in_prompt", "us.meta.llama3-3-70b-instruct-v1:0")
    assert not provider.forces_tool
    result = LLMClient(provider).structured(_req(), Answer)
    server.verify()  # no toolConfig: the schema is in the system prompt
    assert result.value == Answer(answer="y", sources=["D1:3"])
    assert result.response.parsed == {"answer": "y", "sources": ["D1:3"]}
    nova = BedrockProvider("us.amazon.nova-pro-v1:0", client=object())
    assert nova.forces_tool and "toolConfig" in nova.payload(_req(schema=True))


def test_bedrock_errors_are_mapped_and_throttling_retried(
    bedrock_at: Callable[..., tuple[BedrockProvider, ReplayServer]],
) -> None:
    provider, server = bedrock_at("bedrock_errors")
    waits: list[float] = []
    client = _client(provider, waits)
    assert client.complete(_req()).text == "hi" and len(waits) == 1
    with pytest.raises(LLMAuthError, match="model access") as denied:
        client.complete(_req())
    with pytest.raises(LLMCallError, match="check the model id") as unknown:
        client.complete(_req(False).with_(system="other"))
    assert client.complete(_req()).text == "back" and len(waits) == 2
    server.verify()
    assert (denied.value.status, unknown.value.status, unknown.value.retryable) == (403, 400, False)
    assert dict(client.faults) == {"http 429": 1, "http 503": 1}


RUNNER = """
import json, sys
req = json.load(sys.stdin)
if req["stage"] == "fail":
    sys.stderr.write("runner broke")
    sys.exit(3)
out = {"text": "echo " + req["messages"][-1]["content"], "input_tokens": 11, "model": "runner-1"}
if req["schema"] is not None:
    out["parsed"] = {"answer": req["system"], "sources": ["D1:3"]}
print(json.dumps(out))
"""


def test_cmd_provider_speaks_json_over_stdin_and_stdout(tmp_path: Path) -> None:
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    provider = CmdProvider(f"{sys.executable} {script}")
    client = LLMClient(provider, prices={"runner-1": (1.0, 1.0)})
    out = client.complete(_req())
    assert out.text == "echo When? [D1:3]" and out.model == "runner-1"
    assert (out.input_tokens, out.output_tokens) == (11, 5)  # 5 = ceil(len(text) / 4)
    assert out.cost_usd == pytest.approx(16 / 1e6)
    assert client.structured(_req(), Answer).value == Answer(answer="Be brief.", sources=["D1:3"])
    with pytest.raises(LLMCallError, match="status 3") as info:
        client.complete(_req().with_(stage="fail"))
    assert not info.value.retryable and "runner broke" not in str(info.value)
    flaky = LLMClient(CmdProvider("exit 75"), max_attempts=2, sleep=lambda s: None)
    with pytest.raises(LLMCallError, match="gave up after 2 attempts"):
        flaky.complete(_req())
    bad = LLMClient(CmdProvider("echo not json"))
    with pytest.raises(LLMCallError, match="one JSON object"):
        bad.complete(_req())


class ReplayLlama:
    """A ``Llama`` stand-in replaying recorded create_chat_completion calls in order."""

    def __init__(self, name: str) -> None:
        self.calls = load_exchanges(name)
        self.received: list[dict[str, Any]] = []

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.received.append(kwargs)
        response: dict[str, Any] = self.calls[len(self.received) - 1]["response"]
        return response


def test_llamacpp_missing_extra_and_request_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigError, match=r"pip install 'qemem\[local\]'"):
        open_llm("llamacpp:/models/m.gguf")
    llama = ReplayLlama("llamacpp_json_schema")
    provider = LlamaCppProvider("/models/qwen.gguf", llama=llama)
    result = LLMClient(provider).structured(_req(), Answer)
    assert llama.received == [call["request"] for call in llama.calls]
    assert llama.received[0]["response_format"] == {
        "type": "json_object",
        "schema": Answer.model_json_schema(),
    }
    assert result.value.answer == "z" and provider.model == "qwen.gguf"
    assert (result.response.input_tokens, result.response.output_tokens) == (40, 9)
    assert (result.response.cost_usd, result.response.extra) == (None, {"stop_reason": "stop"})


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with pytest.raises(ConfigError, match=r"pip install 'qemem\[anthropic\]'"):
        open_llm("anthropic:claude-haiku-4-5")
    with pytest.raises(ConfigError, match=r"pip install 'qemem\[openai\]'"):
        open_llm("openai:gpt-4.1")


def test_a_missing_sdk_fails_under_ci_and_skips_only_locally(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="anthropic must be installed under CI"):
        sdk("anthropic")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="anthropic is not installed"):
        sdk("anthropic")


def _real(spec: str) -> Callable[[], Any]:
    """A provider for ``spec`` at its real, default endpoint."""
    return lambda: open_llm(spec, api_key=SECRET).provider  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("module", "make", "host"),
    [
        ("anthropic", _real("anthropic:claude-haiku-4-5"), "api.anthropic.com"),
        ("openai", _real("openai:gpt-4.1-mini"), "api.openai.com"),
        ("openai", _real("openai-compat:m@https://llm.example.invalid/v1"), "llm.example.invalid"),
        ("boto3", lambda: BedrockProvider(BEDROCK_MODEL, region="us-east-1"), "bedrock-runtime"),
    ],
)
def test_the_guard_fails_any_call_to_a_real_provider(
    module: str,
    make: Callable[[], Any],
    host: str,
    provider_guard: ProviderGuard,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if module == "boto3":
        monkeypatch.setattr(sdk(module), "DEFAULT_SESSION", None)
    sdk(module)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    provider = make()
    with pytest.raises(pytest.fail.Exception, match=f"real provider call blocked: .*{host}"):
        provider.complete(_req())
    assert len(provider_guard.blocked) == 1 and host in provider_guard.blocked[0]
    provider_guard.blocked.clear()  # provoked on purpose: do not fail this test at teardown


def test_the_guard_refuses_a_real_gguf_load_and_raw_sockets(
    provider_guard: ProviderGuard, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=object))
    with pytest.raises(pytest.fail.Exception, match="load of the GGUF model"):
        LlamaCppProvider(str(model))
    with (
        socket.socket() as sock,
        pytest.raises(pytest.fail.Exception, match=r"connection to llm\.example\.invalid:443"),
    ):
        sock.connect(("llm.example.invalid", 443))
    with pytest.raises(pytest.fail.Exception, match=r"name lookup of llm\.example\.invalid"):
        socket.create_connection(("llm.example.invalid", 443))
    assert len(provider_guard.blocked) == 3
    with pytest.raises(pytest.fail.Exception, match="swallowed a blocked real provider call"):
        provider_guard.finish(failed_already=False)
    provider_guard.finish(failed_already=True)  # already reported by the test's own failure
    provider_guard.blocked.clear()


def test_the_guard_lets_loopback_and_unix_sockets_through(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"):
        assert is_local(host), host
    for host in ("192.0.2.1", "10.0.0.1", "::ffff:192.0.2.1", "api.openai.com", 443):
        assert not is_local(host), host
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as listener, socket.socket(socket.AF_UNIX) as peer:
        listener.bind(path)
        listener.listen(1)
        peer.connect(path)
    with ReplayServer([]) as server, socket.create_connection(("localhost", server.port)):
        assert server.received == []
