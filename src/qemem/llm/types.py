"""Request/response types of the LLM seam and the provider Protocol."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Part:
    """A piece of a message; ``cache`` marks a prompt-cache breakpoint after it: everything
    up to the end of this part (system prompt included) is a prefix other requests share."""

    text: str
    cache: bool = False


@dataclass(frozen=True)
class Message:
    """One chat message (the system prompt is carried separately on the request).

    ``parts``, when given, are the pieces ``content`` is made of (see :meth:`of`), so a
    provider can mark a cache breakpoint between them; the text, and so the record/replay
    cache key, is ``content`` either way.
    """

    role: Role
    content: str
    parts: tuple[Part, ...] = ()

    def __post_init__(self) -> None:
        if self.parts and "".join(p.text for p in self.parts) != self.content:
            raise ValueError("a message's parts must join to its content")

    @classmethod
    def of(cls, role: Role, parts: Sequence[Part]) -> Message:
        """A message made of ``parts`` (empty ones dropped)."""
        kept = tuple(p for p in parts if p.text)
        return cls(role, "".join(p.text for p in kept), kept)

    def blocks(self) -> tuple[Part, ...]:
        """The message's parts (one uncached part when it has none)."""
        return self.parts or (Part(self.content),)

    @property
    def cache_prefix(self) -> str | None:
        """The message's text up to its last cache breakpoint, None without one."""
        ends = [n for n, p in enumerate(self.parts) if p.cache]
        return "".join(p.text for p in self.parts[: ends[-1] + 1]) if ends else None

    def to_dict(self) -> dict[str, str]:
        """JSON-serialisable form."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class LLMRequest:
    """What a stage asks of a model; ``stage`` labels the call for accounting only.

    ``inputs`` holds the structured inputs the stage rendered into its prompt (the question,
    the candidate records, the cards ...), for offline models (``qemem.testing``) to answer
    from without parsing prompt text. It is never sent to a provider, never part of the
    record/replay cache key, and not in :meth:`to_dict`.
    """

    system: str
    messages: list[Message]
    stage: str
    temperature: float = 0.0
    max_tokens: int = 1024
    schema: dict[str, Any] | None = None
    schema_name: str | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (without ``inputs``)."""
        data = asdict(replace(self, inputs={}))
        del data["inputs"]
        data["messages"] = [m.to_dict() for m in self.messages]
        return data

    def with_(self, **changes: Any) -> LLMRequest:
        """A copy with some fields replaced."""
        return replace(self, **changes)

    @property
    def cache_prefix(self) -> str | None:
        """The text a cache breakpoint closes (system prompt and messages up to the last
        breakpoint, joined as :attr:`prompt_text` joins them), None without a breakpoint."""
        for n in range(len(self.messages) - 1, -1, -1):
            head = self.messages[n].cache_prefix
            if head is not None:
                return "\n".join([self.system, *(m.content for m in self.messages[:n]), head])
        return None

    @property
    def prompt_text(self) -> str:
        """System prompt and all message contents joined (for token estimates)."""
        return "\n".join([self.system, *(m.content for m in self.messages)])


@dataclass(frozen=True)
class LLMResponse:
    """What came back: text, parsed JSON (when a schema was given), usage, latency and cost.

    ``cost_usd`` is the nominal cost of the exchange (None when the model has no price);
    ``cached`` marks a response served from the record/replay cache, which cost nothing now.
    ``input_tokens`` counts every input token; ``cache_write_tokens`` and
    ``cache_read_tokens`` are the parts of them the provider wrote to and read from its prompt
    cache (priced apart, see ``PriceTable.cost``).
    """

    text: str
    parsed: dict[str, Any] | list[Any] | None
    input_tokens: int
    output_tokens: int
    latency_s: float
    model: str
    cost_usd: float | None
    stage: str
    cached: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMResponse:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)

    def with_(self, **changes: Any) -> LLMResponse:
        """A copy with some fields replaced."""
        return replace(self, **changes)


@runtime_checkable
class Provider(Protocol):
    """A raw model backend: one call, no cache, no retries, no pricing.

    ``name`` (e.g. ``"anthropic"``) and ``model`` identify the backend in cache keys and traces;
    neither may contain a secret. Failures raise ``LLMCallError`` (``retryable`` set for
    429/5xx/timeouts/connection errors) or ``LLMAuthError``.
    """

    name: str
    model: str

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Send one request and return the model's response."""
        ...


def estimate_tokens(text: str) -> int:
    """Rough token count: ceil(characters / 4)."""
    return math.ceil(len(text) / 4)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of each non-empty secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return re.sub(r"\b(sk-[A-Za-z0-9_\-]{4})[A-Za-z0-9_\-*]+", r"\1***", text)


def schema_instruction(request: LLMRequest) -> str:
    """System-prompt suffix asking for JSON matching ``request.schema`` (non-native providers)."""
    return (
        "\n\nRespond with a single JSON value that validates against this JSON schema "
        f"(name: {request.schema_name or 'output'}), and nothing else:\n"
        + json.dumps(request.schema, sort_keys=True)
    )
