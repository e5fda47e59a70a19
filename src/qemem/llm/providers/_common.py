"""Helpers shared by the providers: lazy imports, env keys, HTTP error mapping."""

from __future__ import annotations

import email.utils
import importlib
import math
import os
import time
from types import ModuleType
from typing import Any

from qemem.errors import ConfigError, LLMAuthError, LLMCallError
from qemem.llm.types import LLMRequest, Message, Part, redact, schema_instruction

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise ConfigError naming the pip extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"the {module!r} package is not installed; run: pip install 'qemem[{extra}]'"
        ) from exc


def env_key(var: str, provider: str) -> str:
    """The API key in environment variable ``var``, or ConfigError naming it."""
    value = os.environ.get(var, "").strip()
    if not value:
        raise ConfigError(f"{provider} needs an API key: set the environment variable {var}")
    return value


def _seconds(value: str, scale: float) -> float | None:
    """``value`` / ``scale`` as a finite, non-negative number of seconds, or None."""
    try:
        seconds = float(value) / scale
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date); None
    when neither header holds a usable value."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    seconds = _seconds(ms, 1000) if ms else None
    value = headers.get("retry-after")
    if seconds is not None or not value:
        return seconds
    seconds = _seconds(value, 1)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def status_error(
    provider: str, model: str, status: int, detail: str, headers: Any, secrets: list[str]
) -> LLMCallError:
    """Map an HTTP error status of a provider to a typed, secret-free error."""
    if status in (401, 403):
        return LLMAuthError(
            f"{provider} rejected the credentials (HTTP {status}); check the API key and that "
            f"it may use model {model!r}",
            status=status,
        )
    detail = redact(detail, secrets)[:500]
    if status == 404:
        return LLMCallError(
            f"{provider} does not know model {model!r} (HTTP 404: {detail}); check the model "
            "name in QEMEM_LLM",
            status=status,
        )
    retryable = status in RETRYABLE_STATUS or status >= 500
    return LLMCallError(
        f"{provider} call failed with HTTP {status}: {detail}",
        retryable=retryable,
        status=status,
        retry_after=parse_retry_after(headers) if retryable else None,
    )


def map_sdk_error(exc: Exception, provider: str, model: str, secrets: list[str]) -> LLMCallError:
    """Translate an anthropic/openai SDK exception (same shapes) into LLMCallError."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        return status_error(provider, model, status, str(exc), headers, secrets)
    kind = type(exc).__name__
    if "Timeout" in kind:
        return LLMCallError(f"{provider} call timed out; raise QEMEM_LLM_TIMEOUT", retryable=True)
    if "Connection" in kind:
        return LLMCallError(
            f"cannot reach {provider} ({redact(str(exc), secrets)[:200]}); check the network "
            "or base URL",
            retryable=True,
        )
    return LLMCallError(f"{provider} call failed: {kind}: {redact(str(exc), secrets)[:300]}")


def with_schema_text(request: LLMRequest) -> LLMRequest:
    """``request`` without its native schema, stated instead as text at the end of its last
    message, after any cache breakpoint (so the cached prefix is the same with or without a
    schema); the client extracts the JSON from the reply."""
    *head, last = request.messages
    tail = Message.of(last.role, [*last.blocks(), Part(schema_instruction(request))])
    return request.with_(messages=[*head, tail], schema=None, schema_name=None)
