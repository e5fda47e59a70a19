"""Provider prompt caching: minimum cacheable lengths, and the two prefix rules simulated.

A request marks its shared prefix with a cache breakpoint (``Part.cache``). Anthropic (and
Claude on Bedrock) cache exactly the prefix up to a breakpoint, only when it is at least the
model's minimum cacheable length (below it the request runs uncached); a cache entry lives
five minutes from its last use (``CACHE_TTL_S``; writes cost 1.25x the input price, reads
0.1x). OpenAI caches automatically: prompts of at least 1,024 tokens, the longest prefix
an earlier prompt shares, in 128-token steps beyond the first 1,024, with no write premium
(entries last 5-10 minutes idle). The minimums below are the providers' documented ones
(Anthropic "Prompt caching", Amazon Bedrock "Prompt caching", OpenAI "Prompt caching");
a model not listed gets the largest Claude minimum, so no breakpoint is ever set too short.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qemem.llm.types import LLMRequest, estimate_tokens

CACHE_TTL_S = 300
"""Lifetime of an Anthropic/Bedrock ``ephemeral``/``default`` cache entry, refreshed on use."""

OPENAI_MIN_TOKENS = 1024
OPENAI_INCREMENT = 128

CLAUDE_MIN_TOKENS: dict[str, int] = {
    "claude-opus-4-7": 4096,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-3-opus": 1024,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "amazon.nova": 1024,
}
"""Minimum cacheable prefix in tokens by model-id part (longest match wins)."""

UNKNOWN_MIN_TOKENS = 4096


def min_cacheable_tokens(provider: str, model: str) -> int:
    """The minimum prefix length (tokens) ``provider`` caches for ``model`` (none for the
    offline model ``fake``; an offline LLM standing for a real model takes its name)."""
    if model == "fake":
        return 0
    if provider in ("openai", "openai-compat"):
        return OPENAI_MIN_TOKENS
    matches = [key for key in CLAUDE_MIN_TOKENS if key in model]
    return CLAUDE_MIN_TOKENS[max(matches, key=len)] if matches else UNKNOWN_MIN_TOKENS


def breakpoint_allowed(request: LLMRequest, provider: str, model: str) -> bool:
    """Whether ``request`` has a cache breakpoint whose prefix (estimated as characters / 4)
    reaches the model's minimum cacheable length: only then is a breakpoint sent."""
    prefix = request.cache_prefix
    if prefix is None:
        return False
    return estimate_tokens(prefix) >= min_cacheable_tokens(provider, model)


@dataclass(frozen=True)
class CacheSplit:
    """One request's input tokens: written to the cache, read from it, and neither."""

    uncached: int
    write: int = 0
    read: int = 0

    @property
    def total(self) -> int:
        """Every input token of the request."""
        return self.uncached + self.write + self.read


@dataclass(frozen=True)
class Prompt:
    """A request as the simulations see it: its whole text and its text up to the cache
    breakpoint (None without one)."""

    text: str
    prefix: str | None = None


def simulate_breakpoint_cache(prompts: Sequence[Prompt], minimum: int) -> list[CacheSplit]:
    """Anthropic's rule over requests made in order within the cache lifetime: a prefix of at
    least ``minimum`` tokens is written the first time it is sent and read every later time
    it is sent byte for byte; shorter prefixes and the text after the breakpoint are uncached.
    """
    seen: set[str] = set()
    out: list[CacheSplit] = []
    for prompt in prompts:
        total = estimate_tokens(prompt.text)
        head = estimate_tokens(prompt.prefix) if prompt.prefix is not None else 0
        if prompt.prefix is None or head < minimum:
            out.append(CacheSplit(total))
        elif prompt.prefix in seen:
            out.append(CacheSplit(total - head, read=head))
        else:
            seen.add(prompt.prefix)
            out.append(CacheSplit(total - head, write=head))
    return out


def common_prefix_length(a: str, b: str) -> int:
    """The number of leading characters ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def automatic_cached_tokens(shared: int, total: int) -> int:
    """OpenAI's cached tokens for a prompt of ``total`` tokens sharing ``shared`` leading
    tokens with an earlier one: none below 1,024, else 1,024 plus whole 128-token steps."""
    if total < OPENAI_MIN_TOKENS or shared < OPENAI_MIN_TOKENS:
        return 0
    return OPENAI_MIN_TOKENS + (shared - OPENAI_MIN_TOKENS) // OPENAI_INCREMENT * OPENAI_INCREMENT


def simulate_automatic_cache(prompts: Sequence[Prompt]) -> list[CacheSplit]:
    """OpenAI's automatic rule over requests made in order within the cache lifetime: each
    prompt reads the longest prefix it shares with an earlier prompt (``automatic_cached_tokens``),
    with no write premium (the rest is uncached)."""
    out: list[CacheSplit] = []
    for n, prompt in enumerate(prompts):
        total = estimate_tokens(prompt.text)
        chars = max((common_prefix_length(prompt.text, p.text) for p in prompts[:n]), default=0)
        read = min(automatic_cached_tokens(chars // 4, total), total)
        out.append(CacheSplit(total - read, read=read))
    return out
