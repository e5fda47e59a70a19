"""Real providers through their real SDKs against in-process fake transports (no network)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from qemem.errors import ConfigError, LLMAuthError, LLMCallError
from qemem.llm import LLMCache, LLMClient, LLMRequest, Message, open_llm
from qemem.llm.providers.anthropic import AnthropicProvider
from qemem.llm.providers.bedrock import BedrockProvider
from qemem.llm.providers.cmd import CmdProvider
from qemem.llm.providers.llamacpp import LlamaCppProvider
from qemem.llm.providers.openai import OpenAIProvider

httpx2 = pytest.importorskip("httpx2")
SECRET = "sk-live-SECRET-0123456789abcdef"


class Answer(BaseModel):
    answer: str
    sources: list[str]


def _req(schema: bool = False) -> LLMRequest:
    req = LLMRequest("Be brief.", [Message("user", "When? [D1:3]")], "answer", max_tokens=64)
    return req.with_(schema=Answer.model_json_schema(), schema_name="Answer") if schema else req


class Server:
    """A scripted HTTP server for MockTransport: replies in order, records requests."""

    def __init__(self, replies: list[tuple[int, dict[str, Any], dict[str, str]]]) -> None:
        self.replies = list(replies)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        status, body, headers = self.replies.pop(0)
        return httpx2.Response(status, json=body, headers=headers)

    def client(self) -> Any:
        return httpx2.Client(transport=httpx2.MockTransport(self))

    def body(self, i: int = 0) -> dict[str, Any]:
        return json.loads(self.requests[i].content)


def _anthropic_msg(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5-20251001",
        "content": content, "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 30},
    }  # fmt: skip


def _openai_completion(text: str, model: str = "gpt-4.1-mini-2025-04-14") -> dict[str, Any]:
    return {
        "id": "c1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }  # fmt: skip


def _client(provider: Any, waits: list[float]) -> LLMClient:
    return LLMClient(provider, sleep=waits.append, max_attempts=3)


def test_anthropic_structured_uses_a_forced_tool_and_parses_usage(tmp_path: Path) -> None:
    tool = {"type": "tool_use", "id": "t1", "name": "Answer",
            "input": {"answer": "7 May 2023", "sources": ["D1:3"]}}  # fmt: skip
    server = Server([(200, _anthropic_msg([tool]), {})])
    provider = AnthropicProvider("claude-haiku-4-5", api_key=SECRET, http_client=server.client())
    client = LLMClient(provider, cache=LLMCache(tmp_path / "c.db"))
    result = client.structured(_req(), Answer)
    again = client.structured(_req(), Answer)
    assert again.response.cached and len(server.requests) == 1
    client.cache.close()  # type: ignore[union-attr]
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"7 May 2023" in stored and SECRET.encode() not in stored
    assert SECRET not in json.dumps([client.ledger.to_dict(), result.response.to_dict()])
    assert result.value == Answer(answer="7 May 2023", sources=["D1:3"])
    sent = server.body()
    assert sent["model"] == "claude-haiku-4-5" and sent["system"] == "Be brief."
    assert sent["messages"] == [{"role": "user", "content": "When? [D1:3]"}]
    assert sent["tools"][0]["name"] == "Answer"
    assert sent["tools"][0]["input_schema"] == Answer.model_json_schema()
    assert sent["tool_choice"] == {"type": "tool", "name": "Answer"}
    assert (sent["max_tokens"], sent["temperature"]) == (64, 0.0)
    headers = server.requests[0].headers
    assert SECRET in (headers.get("x-api-key", ""), headers.get("authorization", "")[7:])
    resp = result.response
    assert (resp.input_tokens, resp.output_tokens) == (120, 30)
    assert resp.cost_usd == pytest.approx((120 * 1.1 + 30 * 5.5) / 1e6)


def test_anthropic_retries_429_with_retry_after_and_500_then_fails() -> None:
    text = _anthropic_msg([{"type": "text", "text": "FINAL ANSWER: x"}])
    err = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    boom = {"type": "error", "error": {"type": "api_error", "message": "internal"}}
    server = Server([(429, err, {"retry-after": "3"}), (200, text, {})])
    provider = AnthropicProvider("claude-haiku-4-5", api_key=SECRET, http_client=server.client())
    waits: list[float] = []
    assert _client(provider, waits).complete(_req()).text == "FINAL ANSWER: x"
    assert waits == [3.0] and len(server.requests) == 2
    failing = Server([(500, boom, {})] * 3)
    provider = AnthropicProvider("claude-haiku-4-5", api_key=SECRET, http_client=failing.client())
    with pytest.raises(LLMCallError, match="HTTP 500") as info:
        _client(provider, waits).complete(_req())
    assert len(failing.requests) == 3 and "gave up after 3 attempts" in str(info.value)


def test_anthropic_401_says_check_the_key_without_leaking_it() -> None:
    err = {"type": "error", "error": {"type": "authentication_error", "message": f"bad {SECRET}"}}
    server = Server([(401, err, {})])
    provider = AnthropicProvider("claude-haiku-4-5", api_key=SECRET, http_client=server.client())
    client = _client(provider, [])
    with pytest.raises(LLMAuthError, match="check the API key") as info:
        client.complete(_req())
    assert isinstance(info.value, ConfigError) and len(server.requests) == 1
    assert SECRET not in str(info.value)
    assert SECRET not in repr(provider) + repr(client) + json.dumps(client.describe())


def test_openai_sends_json_schema_response_format_and_parses_text() -> None:
    server = Server([(200, _openai_completion('{"answer": "x", "sources": ["D1:3"]}'), {})])
    provider = OpenAIProvider("gpt-4.1-mini", api_key=SECRET, http_client=server.client())
    result = LLMClient(provider).structured(_req(), Answer)
    assert result.value.sources == ["D1:3"] and result.response.parsed is not None
    sent = server.body()
    assert sent["model"] == "gpt-4.1-mini" and sent["max_completion_tokens"] == 64
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["name"] == "Answer"
    assert str(server.requests[0].url) == "https://api.openai.com/v1/chat/completions"
    assert result.response.cost_usd == pytest.approx((50 * 0.4 + 10 * 1.6) / 1e6)


def test_openai_401_message_is_redacted_and_429_is_retried() -> None:
    err = {"error": {"message": f"Incorrect API key provided: {SECRET}", "type": "invalid"}}
    server = Server([(401, err, {})])
    provider = OpenAIProvider("gpt-4.1-mini", api_key=SECRET, http_client=server.client())
    with pytest.raises(LLMAuthError) as info:
        _client(provider, []).complete(_req())
    assert SECRET not in str(info.value)
    limited = {"error": {"message": "rate limited", "type": "requests"}}
    server = Server(
        [(429, limited, {"retry-after-ms": "1500"}), (200, _openai_completion("hi"), {})]
    )
    provider = OpenAIProvider("gpt-4.1-mini", api_key=SECRET, http_client=server.client())
    waits: list[float] = []
    assert _client(provider, waits).complete(_req()).text == "hi" and waits == [1.5]
    missing = Server([(404, {"error": {"message": "no such model"}}, {})])
    provider = OpenAIProvider("gpt-9", api_key=SECRET, http_client=missing.client())
    with pytest.raises(LLMCallError, match="does not know model 'gpt-9'"):
        _client(provider, []).complete(_req())


def test_openai_compat_puts_schema_in_prompt_and_hides_url_credentials(monkeypatch) -> None:
    monkeypatch.setenv("QEMEM_LLM_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-leave")
    hidden = OpenAIProvider("m", base_url="http://user:pw@localhost:8000/v1?token=abc")
    assert hidden.base_url == "http://localhost:8000/v1"
    assert "pw" not in repr(hidden) and "abc" not in repr(hidden)
    reply = 'Sure:\n```json\n{"answer": "x", "sources": []}\n```'
    server = Server([(200, _openai_completion(reply, "llama3.1:8b"), {})])
    client = open_llm(
        "openai-compat:llama3.1:8b@http://localhost:11434/v1",
        http_client=server.client(),
    )
    assert client is not None
    provider = client.provider
    assert (provider.name, provider.model) == ("openai-compat", "llama3.1:8b")
    result = client.structured(_req(), Answer)
    assert result.value == Answer(answer="x", sources=[])
    sent = server.body()
    assert "response_format" not in sent and sent["max_tokens"] == 64
    assert '"sources"' in sent["messages"][0]["content"]  # schema stated in the system prompt
    assert server.requests[0].url.host == "localhost"
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert result.response.cost_usd is None  # unknown model: tokens only


def _bedrock(stub: Callable[[Any, BedrockProvider], None]) -> tuple[BedrockProvider, Any]:
    import boto3
    from botocore.stub import Stubber

    raw = boto3.client(
        "bedrock-runtime", region_name="us-east-1",
        aws_access_key_id="AKIAFAKE", aws_secret_access_key="fake-secret",
    )  # fmt: skip
    stubber = Stubber(raw)
    provider = BedrockProvider("us.anthropic.claude-haiku-4-5-20251001-v1:0", client=raw)
    stub(stubber, provider)
    stubber.activate()
    return provider, stubber


def test_bedrock_converse_with_tool_config_and_usage() -> None:
    expected: dict[str, Any] = {}
    response = {
        "output": {"message": {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "t1", "name": "Answer",
                         "input": {"answer": "y", "sources": ["D1:3"]}}}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1000, "outputTokens": 100, "totalTokens": 1100},
        "metrics": {"latencyMs": 12},
    }  # fmt: skip

    def stub(s: Any, provider: BedrockProvider) -> None:
        expected.update(provider.payload(_req(schema=True)))
        s.add_response("converse", response, expected)

    provider, stubber = _bedrock(stub)
    result = LLMClient(provider).structured(_req(), Answer)
    stubber.assert_no_pending_responses()
    assert result.value == Answer(answer="y", sources=["D1:3"])
    assert expected["modelId"] == "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert expected["toolConfig"]["toolChoice"] == {"tool": {"name": "Answer"}}
    assert expected["system"] == [{"text": "Be brief."}]
    assert expected["inferenceConfig"] == {"maxTokens": 64, "temperature": 0.0}
    assert result.response.cost_usd == pytest.approx((1000 * 1.1 + 100 * 5.5) / 1e6)


def test_bedrock_errors_are_mapped_and_throttling_retried() -> None:
    ok = {
        "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
        "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }  # fmt: skip

    def stub(s: Any, provider: BedrockProvider) -> None:
        s.add_client_error("converse", "ThrottlingException", "slow", 429)
        s.add_response("converse", ok)
        s.add_client_error("converse", "AccessDeniedException", "no access", 403)
        s.add_client_error(
            "converse", "ValidationException", "The provided model identifier is invalid.", 400
        )

    provider, _ = _bedrock(stub)
    waits: list[float] = []
    client = _client(provider, waits)
    assert client.complete(_req()).text == "hi" and len(waits) == 1
    with pytest.raises(LLMAuthError, match="model access"):
        client.complete(_req())
    with pytest.raises(LLMCallError, match="check the model id"):
        client.complete(_req(False).with_(system="other"))


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


def test_llamacpp_missing_extra_and_request_mapping(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigError, match=r"pip install 'qemem\[local\]'"):
        open_llm("llamacpp:/models/m.gguf")

    class FakeLlama:
        def __init__(self) -> None:
            self.kwargs: dict[str, Any] = {}

        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            self.kwargs = kwargs
            return {
                "choices": [{"message": {"content": '{"answer": "z", "sources": []}'},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 9},
            }  # fmt: skip

    llama = FakeLlama()
    provider = LlamaCppProvider("/models/qwen.gguf", llama=llama)
    result = LLMClient(provider).structured(_req(), Answer)
    assert result.value.answer == "z" and provider.model == "qwen.gguf"
    assert llama.kwargs["response_format"] == {
        "type": "json_object",
        "schema": Answer.model_json_schema(),
    }
    assert llama.kwargs["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (result.response.input_tokens, result.response.cost_usd) == (40, None)


def test_missing_sdk_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with pytest.raises(ConfigError, match=r"pip install 'qemem\[anthropic\]'"):
        open_llm("anthropic:claude-haiku-4-5")
    with pytest.raises(ConfigError, match=r"pip install 'qemem\[openai\]'"):
        open_llm("openai:gpt-4.1")
