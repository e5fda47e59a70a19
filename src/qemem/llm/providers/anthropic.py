"""Anthropic Messages API provider (extra ``anthropic``; key in ANTHROPIC_API_KEY).

With a schema, the request carries one tool whose ``input_schema`` is the schema and forces
``tool_choice`` to it; the tool input is the parsed output.

Prompt caching: a request's cache breakpoint (``Part.cache``) becomes ``cache_control:
{"type": "ephemeral"}`` (five minutes, refreshed on use) on the content block it closes, when
its prefix reaches the model's minimum cacheable length (``qemem.llm.prompt_cache``). Tools
come before the system prompt in the cached prefix, so a request with a breakpoint states its
schema in text after the breakpoint instead of as a tool: the stages that share a prefix (the
constructor with a schema, the answerer without) then share it byte for byte. Usage reports
``cache_creation_input_tokens`` and ``cache_read_input_tokens`` beside ``input_tokens`` (the
uncached rest); ``LLMResponse.input_tokens`` is their sum.
"""

from __future__ import annotations

import json
import time
from typing import Any

from qemem.llm.prompt_cache import breakpoint_allowed
from qemem.llm.providers._common import env_key, map_sdk_error, require, with_schema_text
from qemem.llm.types import LLMRequest, LLMResponse, Message

EPHEMERAL = {"type": "ephemeral"}


def content(message: Message, cache: bool) -> str | list[dict[str, Any]]:
    """A message's content: its text, or with ``cache`` its parts as text blocks, each
    breakpoint carrying ``cache_control``."""
    if not cache or not message.parts:
        return message.content
    return [
        {"type": "text", "text": p.text, **({"cache_control": EPHEMERAL} if p.cache else {})}
        for p in message.parts
    ]


class AnthropicProvider:
    """Claude through the official ``anthropic`` SDK (no SDK retries: the client retries)."""

    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        http_client: Any = None,
        client: Any = None,
    ) -> None:
        self.model = model
        sdk = require("anthropic", "anthropic")
        self._errors: tuple[type[Exception], ...] = (sdk.AnthropicError,)
        key = api_key or env_key("ANTHROPIC_API_KEY", "anthropic")
        self._secrets = [key]
        self._client = client or sdk.Anthropic(
            api_key=key, timeout=timeout, max_retries=0, http_client=http_client
        )

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r})"

    def payload(self, request: LLMRequest) -> dict[str, Any]:
        """Keyword arguments of ``messages.create`` for ``request``."""
        cache = breakpoint_allowed(request, self.name, self.model)
        if cache and request.schema is not None:
            request = with_schema_text(request)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            # recent SDKs no longer declare ``temperature``; the Messages API still takes it
            "extra_body": {"temperature": request.temperature},
            "messages": [{"role": m.role, "content": content(m, cache)} for m in request.messages],
        }
        if request.system:
            kwargs["system"] = request.system
        if request.schema is not None:
            tool = request.schema_name or "output"
            kwargs["tools"] = [
                {
                    "name": tool,
                    "description": "Record the answer in this exact structure.",
                    "input_schema": request.schema,
                }
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": tool}
        return kwargs

    def complete(self, request: LLMRequest) -> LLMResponse:
        """One Messages API call."""
        start = time.perf_counter()
        try:
            msg = self._client.messages.create(**self.payload(request))
        except self._errors as exc:
            raise map_sdk_error(exc, self.name, self.model, self._secrets) from None
        latency = time.perf_counter() - start
        texts: list[str] = []
        parsed: Any = None
        for block in msg.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use" and parsed is None:
                parsed = block.input
        text = json.dumps(parsed, ensure_ascii=False) if parsed is not None else "".join(texts)
        usage = msg.usage
        write = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        return LLMResponse(
            text=text,
            parsed=parsed,
            input_tokens=int(usage.input_tokens or 0) + write + read,
            output_tokens=int(usage.output_tokens or 0),
            cache_write_tokens=write,
            cache_read_tokens=read,
            latency_s=latency,
            model=str(msg.model or self.model),
            cost_usd=None,
            stage=request.stage,
            extra={"stop_reason": msg.stop_reason},
        )
