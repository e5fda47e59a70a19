"""``faulty:RATE:SPEC``: a provider wrapper that injects the failures real providers show.

With probability ``RATE`` per call (e.g. ``QEMEM_LLM=faulty:0.2:fake``), instead of the wrapped
provider's answer the call gets one fault, drawn uniformly from the kinds that apply:

- transport faults, raised as retryable ``LLMCallError``: a timeout, HTTP 429 with a
  Retry-After of ``RETRY_AFTER_S`` and without one, HTTP 500, HTTP 529 (overloaded), a
  connection reset;
- output faults, returned as a response: malformed JSON and JSON that fails the schema (only
  for requests with a schema), output truncated at max tokens (``stop_reason`` ``max_tokens``)
  and empty output.

Draws come from one ``random.Random`` seeded by ``QEMEM_FAULT_SEED`` (default 0) in call order,
so a run with concurrency 1 is reproducible, and a rerun, which makes only the missing calls,
meets its faults on other calls. ``injected`` counts the faults by kind. The wrapper keeps the
wrapped provider's ``name`` and ``model``, so what it lets through is cached as that provider's
answer; the client never caches the faulty outputs (see ``LLMClient.complete``).
"""

from __future__ import annotations

import os
import random
import threading
from collections import Counter

from qemem.errors import ConfigError, LLMCallError
from qemem.llm.types import LLMRequest, LLMResponse, Provider

RETRY_AFTER_S = 0.1
"""The Retry-After the injected 429s carry (small, so drills stay quick)."""

TRANSPORT = ("timeout", "429-retry-after", "429", "500", "529", "connection-reset")
OUTPUT = ("malformed-json", "schema-invalid", "truncated", "empty")


class FaultyProvider:
    """Wraps ``inner``; each call fails with probability ``rate`` (see the module docstring)."""

    def __init__(self, inner: Provider, rate: float, *, seed: int = 0) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ConfigError(f"faulty: the fault rate must be between 0 and 1, got {rate}")
        self.inner = inner
        self.rate = rate
        self.name = inner.name
        self.model = inner.model
        self.injected: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FaultyProvider({self.rate}, {self.inner!r})"

    def _draw(self, request: LLMRequest) -> str | None:
        kinds = TRANSPORT + (OUTPUT if request.schema is not None else OUTPUT[2:])
        with self._lock:
            if self._rng.random() >= self.rate:
                return None
            kind = self._rng.choice(kinds)
            self.injected[kind] += 1
            return kind

    def complete(self, request: LLMRequest) -> LLMResponse:
        """The wrapped provider's answer, or an injected fault."""
        kind = self._draw(request)
        if kind is None:
            return self.inner.complete(request)
        if kind in TRANSPORT:
            raise _transport(kind)
        response = self.inner.complete(request)
        if kind == "malformed-json":
            text = response.text[: max(1, len(response.text) // 2)].rstrip("}] ") + ', "'
            return response.with_(text=text, parsed=None)
        if kind == "schema-invalid":
            return response.with_(text='{"unexpected": true}', parsed={"unexpected": True})
        if kind == "truncated":
            text = response.text[: len(response.text) // 2]
            return response.with_(text=text, parsed=None, extra={"stop_reason": "max_tokens"})
        return response.with_(text="", parsed=None)


def _transport(kind: str) -> LLMCallError:
    if kind == "timeout":
        return LLMCallError("injected fault: the call timed out", retryable=True)
    if kind == "connection-reset":
        return LLMCallError("injected fault: connection reset by peer", retryable=True)
    status = int(kind[:3])
    retry_after = RETRY_AFTER_S if kind == "429-retry-after" else None
    return LLMCallError(
        f"injected fault: HTTP {status}", retryable=True, status=status, retry_after=retry_after
    )


def parse_faulty(arg: str) -> tuple[float, str]:
    """``RATE:SPEC`` -> (rate, inner spec); ConfigError when malformed."""
    rate, _, inner = arg.partition(":")
    try:
        value = float(rate)
    except ValueError:
        value = -1.0
    if not inner.strip() or not 0.0 <= value <= 1.0:
        raise ConfigError(
            f"bad faulty spec 'faulty:{arg}': use faulty:RATE:SPEC with RATE from 0 to 1, "
            "e.g. faulty:0.2:fake"
        )
    return value, inner


def fault_seed() -> int:
    """The seed of injected faults: ``QEMEM_FAULT_SEED`` (default 0)."""
    raw = os.environ.get("QEMEM_FAULT_SEED", "0").strip() or "0"
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"QEMEM_FAULT_SEED must be an integer, got {raw!r}") from None
