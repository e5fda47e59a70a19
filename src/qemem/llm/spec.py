"""``open_llm``: build an LLMClient from a spec string and the QEMEM_* environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from qemem.errors import ConfigError
from qemem.llm.cache import LLMCache, parse_mode
from qemem.llm.client import LLMClient
from qemem.llm.prices import CachePrice, Price, PriceTable, load_cache_prices, load_prices
from qemem.llm.types import Provider

VALID_FORMS = """valid forms:
  anthropic:<model>                 e.g. anthropic:claude-haiku-4-5   (ANTHROPIC_API_KEY)
  openai:<model>                    e.g. openai:gpt-4.1-mini          (OPENAI_API_KEY)
  bedrock:<model id>                e.g. bedrock:us.anthropic.claude-haiku-4-5-20251001-v1:0
  openai-compat:<model>@<base url>  e.g. openai-compat:llama3.1@http://localhost:11434/v1
  llamacpp:<path to .gguf>          e.g. llamacpp:/models/qwen2.5-7b-instruct-q4_k_m.gguf
  cmd:<shell command>               e.g. cmd:python my_runner.py
  faulty:<rate>:<spec>              e.g. faulty:0.2:fake   (fault drills; QEMEM_FAULT_SEED)
  fake"""

PROVIDERS = (
    "anthropic",
    "openai",
    "bedrock",
    "openai-compat",
    "llamacpp",
    "cmd",
    "fake",
    "faulty",
)


def _bad(spec: str, why: str) -> ConfigError:
    return ConfigError(f"bad LLM spec {spec!r}: {why}\n{VALID_FORMS}")


def make_provider(spec: str, *, timeout: float = 120.0, **clients: Any) -> Provider:
    """The provider named by ``spec``; ``clients`` passes SDK clients through (tests)."""
    kind, _, arg = spec.strip().partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind == "fake":
        # The one library -> qemem.testing import (lazy; an ignored import in the contracts):
        # the ``fake`` spec builds the offline LLM of the test doubles.
        from qemem.testing import OfflineLLM

        return OfflineLLM(model=arg or "fake")
    if kind not in PROVIDERS:
        raise _bad(spec, f"unknown provider {kind!r}")
    if not arg:
        raise _bad(spec, f"{kind} needs an argument after the colon")
    if kind == "faulty":
        from qemem.llm.faulty import FaultyProvider, fault_seed, parse_faulty

        rate, inner = parse_faulty(arg)
        wrapped = make_provider(inner, timeout=timeout, **clients)
        return FaultyProvider(wrapped, rate, seed=fault_seed())
    if kind == "anthropic":
        from qemem.llm.providers.anthropic import AnthropicProvider

        return AnthropicProvider(arg, timeout=timeout, **clients)
    if kind == "openai":
        from qemem.llm.providers.openai import OpenAIProvider

        return OpenAIProvider(arg, timeout=timeout, **clients)
    if kind == "openai-compat":
        at = arg.rfind("@http")
        if at <= 0:
            raise _bad(spec, "openai-compat needs <model>@<http(s) base url>")
        from qemem.llm.providers.openai import OpenAIProvider

        return OpenAIProvider(arg[:at], base_url=arg[at + 1 :], timeout=timeout, **clients)
    if kind == "bedrock":
        from qemem.llm.providers.bedrock import BedrockProvider

        return BedrockProvider(arg, timeout=timeout, **clients)
    if kind == "llamacpp":
        from qemem.llm.providers.llamacpp import LlamaCppProvider

        return LlamaCppProvider(arg, **clients)
    from qemem.llm.providers.cmd import CmdProvider

    return CmdProvider(arg, timeout=timeout)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {raw!r}")
    return value


def open_cache(
    path: str | os.PathLike[str] | None = None, mode: str | None = None
) -> LLMCache | None:
    """The record/replay cache ``open_llm`` uses: file ``path`` (else QEMEM_LLM_CACHE) in
    ``mode`` (else QEMEM_CACHE_MODE, default readwrite); None without a file or when off."""
    path = path if path is not None else os.environ.get("QEMEM_LLM_CACHE") or None
    chosen = parse_mode(mode or os.environ.get("QEMEM_CACHE_MODE") or "readwrite")
    if path is None and chosen == "replay":
        raise ConfigError("cache mode replay needs a cache file: set QEMEM_LLM_CACHE")
    return LLMCache(Path(path), chosen) if path is not None and chosen != "off" else None


def open_llm(
    spec: str | None = None,
    *,
    cache_path: str | os.PathLike[str] | None = None,
    cache_mode: str | None = None,
    concurrency: int | None = None,
    prices: dict[str, Price] | None = None,
    timeout: float | None = None,
    **clients: Any,
) -> LLMClient | None:
    """An LLMClient for ``spec`` (else env QEMEM_LLM), or None when no LLM is configured.

    Arguments override the environment: QEMEM_LLM_CACHE (cache file), QEMEM_CACHE_MODE
    (off | readwrite | replay; default readwrite when a cache file is set, else off),
    QEMEM_LLM_CONCURRENCY (default 4), QEMEM_LLM_TIMEOUT (seconds, default 120), QEMEM_PRICES
    (JSON price file adding to / overriding the defaults; ``prices`` overrides both).
    """
    spec = spec if spec is not None else os.environ.get("QEMEM_LLM", "").strip() or None
    if not spec:
        return None
    if timeout is None:
        timeout = _env_float("QEMEM_LLM_TIMEOUT", 120.0)
    if concurrency is None:
        concurrency = int(_env_float("QEMEM_LLM_CONCURRENCY", 4))
    cache = open_cache(cache_path, cache_mode)
    table: dict[str, Price] = {}
    cache_table: dict[str, CachePrice] = {}
    if os.environ.get("QEMEM_PRICES"):
        table.update(load_prices(os.environ["QEMEM_PRICES"]))
        cache_table.update(load_cache_prices(os.environ["QEMEM_PRICES"]))
    table.update(prices or {})
    provider = make_provider(spec, timeout=timeout, **clients)
    priced = PriceTable(table, cache_table)
    return LLMClient(provider, cache=cache, concurrency=concurrency, prices=priced)
