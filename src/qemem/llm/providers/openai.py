"""OpenAI Chat Completions provider, also for OpenAI-compatible servers.

``openai``: key in OPENAI_API_KEY; a schema becomes ``response_format`` of type ``json_schema``.
``openai-compat`` (vLLM, Ollama, llama.cpp server, LM Studio, OpenRouter...): any ``base_url``;
key in QEMEM_LLM_API_KEY if the server needs one (OPENAI_API_KEY is never sent to a foreign
server); a schema is stated in the system prompt and the JSON is extracted from the text.

Prompt caching is automatic (prompts of 1,024 tokens or more, the longest prefix an earlier
request shares): a request with a cache breakpoint whose prefix reaches 1,024 tokens keeps
everything before it stable, so its schema is stated in text after the breakpoint (a
``response_format`` schema is part of the cached prefix, which would differ between stages
with and without one), and ``openai`` gets a ``prompt_cache_key`` naming the prefix (routing
requests that share it to the same cache). Usage reports
``prompt_tokens_details.cached_tokens`` among ``prompt_tokens``.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any
from urllib.parse import urlsplit

from qemem.errors import ConfigError
from qemem.llm.prompt_cache import breakpoint_allowed
from qemem.llm.providers._common import env_key, map_sdk_error, require, with_schema_text
from qemem.llm.types import LLMRequest, LLMResponse, schema_instruction


class OpenAIProvider:
    """GPT models or any OpenAI-compatible endpoint through the official ``openai`` SDK."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        http_client: Any = None,
        client: Any = None,
    ) -> None:
        self.model = model
        self.compat = base_url is not None
        self.name = "openai-compat" if self.compat else "openai"
        if base_url is not None:
            parts = urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ConfigError(
                    f"openai-compat needs an http(s) base URL, got {base_url!r}; "
                    "example: openai-compat:llama3.1@http://localhost:11434/v1"
                )
            # identity for cache keys and traces: no userinfo, no query string
            self.base_url: str | None = (
                f"{parts.scheme}://{parts.hostname}"
                + (f":{parts.port}" if parts.port else "")
                + parts.path.rstrip("/")
            )
            key = api_key or os.environ.get("QEMEM_LLM_API_KEY", "").strip() or "not-needed"
        else:
            self.base_url = None
            key = api_key or env_key("OPENAI_API_KEY", "openai")
        sdk = require("openai", "openai")
        self._errors: tuple[type[Exception], ...] = (sdk.OpenAIError,)
        self._secrets = [key]
        self._client = client or sdk.OpenAI(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=0, http_client=http_client
        )

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"OpenAIProvider(name={self.name!r}, model={self.model!r}{where})"

    def payload(self, request: LLMRequest) -> dict[str, Any]:
        """Keyword arguments of ``chat.completions.create`` for ``request``."""
        kwargs: dict[str, Any] = {"model": self.model, "temperature": request.temperature}
        prefix = request.cache_prefix
        if prefix is not None and breakpoint_allowed(request, self.name, self.model):
            if request.schema is not None:
                request = with_schema_text(request)
            if not self.compat:
                digest = hashlib.sha256(prefix.encode("utf-8")).hexdigest()[:32]
                kwargs["extra_body"] = {"prompt_cache_key": f"qemem-{digest}"}
        system = request.system
        if self.compat:
            kwargs["max_tokens"] = request.max_tokens
            if request.schema is not None:
                system += schema_instruction(request)
        else:
            kwargs["max_completion_tokens"] = request.max_tokens
            if request.schema is not None:
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": request.schema_name or "output",
                        "schema": request.schema,
                        "strict": False,
                    },
                }
        messages = [{"role": "system", "content": system}] if system else []
        kwargs["messages"] = messages + [m.to_dict() for m in request.messages]
        return kwargs

    def complete(self, request: LLMRequest) -> LLMResponse:
        """One chat completion; parsing of JSON is left to the client."""
        start = time.perf_counter()
        try:
            out = self._client.chat.completions.create(**self.payload(request))
        except self._errors as exc:
            raise map_sdk_error(exc, self.name, self.model, self._secrets) from None
        latency = time.perf_counter() - start
        choice = out.choices[0]
        usage = out.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        return LLMResponse(
            text=choice.message.content or "",
            parsed=None,
            input_tokens=int(usage.prompt_tokens or 0) if usage else 0,
            output_tokens=int(usage.completion_tokens or 0) if usage else 0,
            cache_read_tokens=int(getattr(details, "cached_tokens", 0) or 0),
            latency_s=latency,
            model=str(out.model or self.model),
            cost_usd=None,
            stage=request.stage,
            extra={"stop_reason": choice.finish_reason},
        )
