"""LLMClient: the one seam every stage calls (cache, retries, concurrency, cost, structure)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pydantic

from qemem.errors import LLMCallError, StructuredOutputError
from qemem.llm.cache import LLMCache, Subject, cache_key, provider_endpoint
from qemem.llm.jsonx import extract_json
from qemem.llm.ledger import Ledger
from qemem.llm.prices import Price, PriceTable
from qemem.llm.stages import REPAIR
from qemem.llm.types import LLMRequest, LLMResponse, Message, Provider

T = TypeVar("T", bound=pydantic.BaseModel)

MAX_RETRY_AFTER_S = 300.0
TRUNCATED = frozenset(
    {"max_tokens", "length", "model_context_window_exceeded", "modelContextWindowExceeded"}
)
"""Stop reasons of output cut at the token limit or at the context window (Anthropic and
Bedrock, OpenAI and llama.cpp): such output is never cached."""


def cacheable(request: LLMRequest, response: LLMResponse) -> bool:
    """Whether ``response`` is a complete answer worth recording: not empty, not truncated at
    max tokens, and holding JSON when a schema was asked for. Failures are never cached."""
    if response.extra.get("stop_reason") in TRUNCATED:
        return False
    if request.schema is not None:
        return response.parsed is not None
    return bool(response.text.strip())


@dataclass(frozen=True)
class Structured(Generic[T]):
    """A validated structured output and the response(s) it took (two when repaired)."""

    value: T
    responses: list[LLMResponse] = field(default_factory=list)

    @property
    def response(self) -> LLMResponse:
        """The response whose output validated."""
        return self.responses[-1]

    @property
    def repaired(self) -> bool:
        """Whether a repair call was needed."""
        return len(self.responses) > 1


def _error_summary(exc: Exception) -> str:
    """A compact, model-readable account of why an output did not validate."""
    if isinstance(exc, pydantic.ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()[:20]
        ]
        return "; ".join(parts)
    return str(exc)[:1000]


def _fault_kind(error: LLMCallError) -> str:
    if error.status is not None:
        return f"http {error.status}"
    text = str(error).lower()
    return "timeout" if "timed out" in text else "connection" if "connect" in text else "other"


class LLMClient:
    """Wraps a provider with record/replay cache, retries, a concurrency bound and accounting.

    ``sleep`` and ``rng`` are injectable for tests. The concurrency bound holds only while a
    provider call is in flight (not during backoff waits or cache look-ups).
    """

    def __init__(
        self,
        provider: Provider,
        *,
        cache: LLMCache | None = None,
        concurrency: int = 4,
        prices: PriceTable | Mapping[str, Price] | None = None,
        max_attempts: int = 5,
        base_delay_s: float = 1.0,
        max_delay_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.provider = provider
        self.cache = cache
        self.concurrency = max(1, concurrency)
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable(prices)
        self.max_attempts = max(1, max_attempts)
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.ledger = Ledger(keep_responses=False)  # sums only: a client may live for long
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self.faults: Counter[str] = Counter()
        """Provider failures that were retried (by HTTP status or error kind) and outputs that
        needed a repair call (``invalid output``)."""
        self.subjects: tuple[Subject, ...] = ()
        """The conversations this client's exchanges are about (``about``): the cache ties
        what it records or replays to them, so forgetting one removes them."""

    def about(self, namespace: str, conversations: Iterable[str]) -> LLMClient:
        """This client for calls about ``conversations`` of ``namespace``: the same provider,
        cache, concurrency bound, ledger and fault counts (a shallow copy), whose exchanges
        the cache ties to those conversations (:meth:`LLMCache.forget`). Close the client it
        came from, not this one."""
        view = copy.copy(self)
        view.subjects = tuple(dict.fromkeys((namespace, c) for c in conversations))
        return view

    def forget(self) -> None:
        """Remove the cache's exchanges about this client's conversations (``about``)."""
        if self.cache is not None:
            for namespace, conversation in self.subjects:
                self.cache.forget(namespace, conversation)

    def __repr__(self) -> str:
        return f"LLMClient({self.provider.name}:{self.provider.model})"

    def describe(self) -> dict[str, Any]:
        """Secret-free identity of this client for run manifests (with the endpoint, e.g. an
        openai-compat base URL, when the provider has one)."""
        endpoint = provider_endpoint(self.provider)
        return {
            "provider": self.provider.name,
            "model": self.provider.model,
            **({"endpoint": endpoint} if endpoint else {}),
            "cache_mode": self.cache.mode if self.cache is not None else "off",
            "cache_path": str(self.cache.path) if self.cache is not None else None,
            "concurrency": self.concurrency,
        }

    def close(self) -> None:
        """Close the cache's database connections."""
        if self.cache is not None:
            self.cache.close()

    def _cost(self, response: LLMResponse) -> float | None:
        if self.provider.name == "fake":
            return 0.0
        tokens = (
            response.input_tokens,
            response.output_tokens,
            response.cache_write_tokens,
            response.cache_read_tokens,
        )
        cost = self.prices.cost(response.model, *tokens)
        if cost is None and response.model != self.provider.model:
            cost = self.prices.cost(self.provider.model, *tokens)
        return cost

    def _delay(self, attempt: int, error: LLMCallError) -> float:
        if error.retry_after is not None:
            return min(float(error.retry_after), MAX_RETRY_AFTER_S)
        backoff = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        with self._rng_lock:
            return float(backoff * (0.5 + 0.5 * self._rng.random()))

    def _call(self, request: LLMRequest) -> LLMResponse:
        for attempt in range(self.max_attempts):
            try:
                with self._slots:
                    return self.provider.complete(request)
            except LLMCallError as exc:
                if not exc.retryable:
                    raise
                with self._rng_lock:
                    self.faults[_fault_kind(exc)] += 1
                if attempt == self.max_attempts - 1:
                    raise LLMCallError(
                        f"{exc} (gave up after {self.max_attempts} attempts)",
                        retryable=True,
                        status=exc.status,
                    ) from exc
                self._sleep(self._delay(attempt, exc))
        raise AssertionError("unreachable")

    def complete(
        self,
        request: LLMRequest,
        *,
        ledger: Ledger | None = None,
        accept: Callable[[LLMResponse], bool] | None = None,
    ) -> LLMResponse:
        """One exchange: from the cache when recorded, else from the provider (with retries).

        Recorded into the client's run ledger and, when given, into ``ledger`` too. A new
        response enters the cache only when it is :func:`cacheable` and ``accept`` (if given)
        approves it, so no failed output is ever replayed as a success.
        """
        name, model = self.provider.name, self.provider.model
        key = cache_key(name, model, request, provider_endpoint(self.provider))
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None and self.cache is not None:
            self.cache.tie(key, self.subjects)
            response = hit.with_(stage=request.stage, cached=True)
            response = response.with_(cost_usd=self._cost(response))
        else:
            if self.cache is not None and self.cache.mode == "replay":
                raise self.cache.miss(key, name, model, request.stage)
            response = self._call(request)
            if request.schema is not None and response.parsed is None:
                with contextlib.suppress(ValueError):
                    response = response.with_(parsed=extract_json(response.text))
            response = response.with_(stage=request.stage, cached=False)
            response = response.with_(cost_usd=self._cost(response))
            if (
                self.cache is not None
                and cacheable(request, response)
                and (accept is None or accept(response))
            ):
                self.cache.put(key, name, model, request, response, self.subjects)
        self.ledger.record(response)
        if ledger is not None:
            ledger.record(response)
        return response

    def _validate(self, response: LLMResponse, model: type[T]) -> T:
        data = response.parsed if response.parsed is not None else extract_json(response.text)
        return model.model_validate(data)

    def structured(
        self, request: LLMRequest, model: type[T], *, ledger: Ledger | None = None
    ) -> Structured[T]:
        """Ask for output matching the pydantic ``model``; one repair call on invalid output.

        Raises StructuredOutputError when the repaired output is still invalid.
        """
        schema_name = request.schema_name or model.__name__
        request = request.with_(schema=model.model_json_schema(), schema_name=schema_name)

        def valid(response: LLMResponse) -> bool:
            try:
                self._validate(response, model)
            except (ValueError, pydantic.ValidationError):
                return False
            return True

        first = self.complete(request, ledger=ledger, accept=valid)
        try:
            return Structured(self._validate(first, model), [first])
        except (ValueError, pydantic.ValidationError) as exc:
            problem = _error_summary(exc)
            with self._rng_lock:
                self.faults["invalid output"] += 1
        repair = request.with_(
            stage=request.stage + REPAIR,
            messages=[
                *request.messages,
                Message("assistant", first.text or "(empty output)"),
                Message(
                    "user",
                    f"That output does not validate against the {schema_name} schema: {problem}. "
                    "Reply again with only the corrected JSON, fixing exactly these problems.",
                ),
            ],
        )
        second = self.complete(repair, ledger=ledger, accept=valid)
        try:
            return Structured(self._validate(second, model), [first, second])
        except (ValueError, pydantic.ValidationError) as exc:
            error = StructuredOutputError(
                f"stage {request.stage!r}: {self.provider.name}:{self.provider.model} output did "
                f"not validate against {schema_name} even after a repair call "
                f"({_error_summary(exc)[:500]}); treat this result as degraded, or use a "
                "stronger model or a larger max_tokens"
            )
            error.responses = [first, second]  # type: ignore[attr-defined]
            raise error from exc

    async def acomplete(self, request: LLMRequest, *, ledger: Ledger | None = None) -> LLMResponse:
        """Async form of :meth:`complete` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.complete, request, ledger=ledger)

    async def astructured(
        self, request: LLMRequest, model: type[T], *, ledger: Ledger | None = None
    ) -> Structured[T]:
        """Async form of :meth:`structured` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.structured, request, model, ledger=ledger)
