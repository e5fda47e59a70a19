"""Amazon Bedrock Converse API provider (extra ``bedrock``).

Credentials come from the standard AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
instance roles); the region from AWS_REGION or AWS_DEFAULT_REGION. With a schema, the request
carries a ``toolConfig`` with one tool whose input schema is the schema, forced by ``toolChoice``
for the models that Converse lets force a named tool (Anthropic Claude and Amazon Nova); for other
models (Llama, Mistral...) the schema is stated in the system prompt, as for openai-compat.

Prompt caching (Claude and Nova): a request's cache breakpoint (``Part.cache``) becomes a
``{"cachePoint": {"type": "default"}}`` content block after the part it closes (five minutes,
refreshed on use), when its prefix reaches the model's minimum cacheable length
(``qemem.llm.prompt_cache``); such a request states its schema in text after the breakpoint,
not as a tool (the tool configuration precedes the cached prefix). Usage reports
``cacheWriteInputTokens`` and ``cacheReadInputTokens`` beside ``inputTokens`` (the uncached
rest); ``LLMResponse.input_tokens`` is their sum.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from qemem.errors import ConfigError, LLMAuthError, LLMCallError
from qemem.llm.prompt_cache import breakpoint_allowed
from qemem.llm.providers._common import require, with_schema_text
from qemem.llm.types import LLMRequest, LLMResponse, Message, schema_instruction

_RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
        "ModelNotReadyException",
        "TooManyRequestsException",
    }
)
_NAMED_TOOL_FAMILIES = ("anthropic.", "amazon.nova")
"""Model-id parts of the families whose Converse ``toolChoice`` may name a tool (API reference,
ToolChoice: "Only supported by Anthropic Claude 3 and Amazon Nova models")."""
_CACHE_FAMILIES = ("anthropic.", "amazon.nova")
"""Model-id parts of the families Bedrock prompt caching supports."""
CACHE_POINT = {"cachePoint": {"type": "default"}}
_AUTH_CODES = frozenset(
    {"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"}
)


def content(message: Message, cache: bool) -> list[dict[str, Any]]:
    """A message's Converse content blocks: its text, or with ``cache`` its parts with a
    ``cachePoint`` block after each breakpoint."""
    if not cache or not message.parts:
        return [{"text": message.content}]
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        blocks.append({"text": part.text})
        if part.cache:
            blocks.append(CACHE_POINT)
    return blocks


class BedrockProvider:
    """Any Bedrock chat model (Claude, Llama, Nova...) through ``bedrock-runtime`` Converse."""

    name = "bedrock"

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        timeout: float = 120.0,
        client: Any = None,
    ) -> None:
        self.model = model
        self._botocore = require("botocore", "bedrock")
        if client is None:
            boto3 = require("boto3", "bedrock")
            from botocore.config import Config

            region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            if not region:
                raise ConfigError("bedrock needs a region: set AWS_REGION (e.g. us-east-1)")
            config = Config(
                read_timeout=timeout,
                connect_timeout=min(timeout, 30.0),
                retries={"total_max_attempts": 1, "mode": "standard"},
            )
            client = boto3.client("bedrock-runtime", region_name=region, config=config)
        self._client = client
        self.forces_tool = any(family in model for family in _NAMED_TOOL_FAMILIES)

    def __repr__(self) -> str:
        return f"BedrockProvider(model={self.model!r})"

    def payload(self, request: LLMRequest) -> dict[str, Any]:
        """Keyword arguments of ``converse`` for ``request``."""
        cache = any(f in self.model for f in _CACHE_FAMILIES) and breakpoint_allowed(
            request, self.name, self.model
        )
        if cache and request.schema is not None:
            request = with_schema_text(request)
        kwargs: dict[str, Any] = {
            "modelId": self.model,
            "messages": [{"role": m.role, "content": content(m, cache)} for m in request.messages],
            "inferenceConfig": {
                "maxTokens": request.max_tokens,
                "temperature": request.temperature,
            },
        }
        system = request.system
        if request.schema is not None and not self.forces_tool:
            system += schema_instruction(request)
        if system:
            kwargs["system"] = [{"text": system}]
        if request.schema is not None and self.forces_tool:
            tool = request.schema_name or "output"
            kwargs["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": tool,
                            "description": "Record the answer in this exact structure.",
                            "inputSchema": {"json": request.schema},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": tool}},
            }
        return kwargs

    def _map_error(self, exc: Exception) -> LLMCallError:
        exceptions = self._botocore.exceptions
        if isinstance(exc, exceptions.ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            message = str(err.get("Message", ""))[:400]
            if code in _AUTH_CODES:
                return LLMAuthError(
                    f"bedrock denied access ({code}); check the AWS credentials, region and "
                    f"that model access to {self.model!r} is enabled",
                    status=status,
                )
            if code == "ResourceNotFoundException" or "model identifier" in message:
                return LLMCallError(
                    f"bedrock does not know model {self.model!r} ({code}: {message}); check the "
                    "model id / inference profile in QEMEM_LLM and the region",
                    status=status,
                )
            retryable = code in _RETRYABLE_CODES or (isinstance(status, int) and status >= 500)
            return LLMCallError(
                f"bedrock call failed ({code}): {message}", retryable=retryable, status=status
            )
        if isinstance(exc, exceptions.NoCredentialsError | exceptions.PartialCredentialsError):
            return LLMAuthError(
                "bedrock found no AWS credentials; set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                "or AWS_PROFILE"
            )
        if isinstance(exc, exceptions.ReadTimeoutError | exceptions.ConnectTimeoutError):
            return LLMCallError("bedrock call timed out; raise QEMEM_LLM_TIMEOUT", retryable=True)
        if isinstance(exc, exceptions.EndpointConnectionError | exceptions.ConnectionError):
            return LLMCallError(f"cannot reach bedrock: {type(exc).__name__}", retryable=True)
        return LLMCallError(f"bedrock call failed: {type(exc).__name__}")

    def complete(self, request: LLMRequest) -> LLMResponse:
        """One Converse call."""
        start = time.perf_counter()
        try:
            out = self._client.converse(**self.payload(request))
        except self._botocore.exceptions.BotoCoreError as exc:
            raise self._map_error(exc) from None
        except self._botocore.exceptions.ClientError as exc:
            raise self._map_error(exc) from None
        latency = time.perf_counter() - start
        texts: list[str] = []
        parsed: Any = None
        for block in out.get("output", {}).get("message", {}).get("content", []):
            if "text" in block:
                texts.append(block["text"])
            elif "toolUse" in block and parsed is None:
                parsed = block["toolUse"].get("input")
        text = json.dumps(parsed, ensure_ascii=False) if parsed is not None else "".join(texts)
        usage = out.get("usage", {})
        write = int(usage.get("cacheWriteInputTokens", 0) or 0)
        read = int(usage.get("cacheReadInputTokens", 0) or 0)
        return LLMResponse(
            text=text,
            parsed=parsed,
            input_tokens=int(usage.get("inputTokens", 0)) + write + read,
            output_tokens=int(usage.get("outputTokens", 0)),
            cache_write_tokens=write,
            cache_read_tokens=read,
            latency_s=latency,
            model=self.model,
            cost_usd=None,
            stage=request.stage,
            extra={"stop_reason": out.get("stopReason")},
        )
