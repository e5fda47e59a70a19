"""Price table: USD per million input / output tokens (and prompt-cache writes / reads),
matched against model ids."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from qemem.errors import ConfigError

Price = tuple[float, float]

#: Defaults. Claude Haiku 4.5 / Opus 4.5 are the Bedrock prices the paper used.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-haiku-4-5": (1.1, 5.5),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4o-mini": (0.15, 0.6),
    "fake": (0.0, 0.0),
}

CachePrice = tuple[float, float]
"""USD per million tokens written to / read from a provider's prompt cache."""

#: Claude: writes 1.25x and reads 0.1x the input price (5-minute cache); OpenAI: no write
#: premium, reads at the model's cached-input price.
DEFAULT_CACHE_PRICES: dict[str, CachePrice] = {
    "claude-haiku-4-5": (1.375, 0.11),
    "claude-opus-4-5": (6.25, 0.5),
    "claude-sonnet-4-5": (3.75, 0.3),
    "gpt-4.1-mini": (0.4, 0.1),
    "gpt-4.1": (2.0, 0.5),
    "gpt-4o-mini": (0.15, 0.075),
    "fake": (0.0, 0.0),
}


class PriceTable:
    """Looks up a model's price: exact key first, else the longest key contained in the id.

    So ``us.anthropic.claude-haiku-4-5-20251001-v1:0`` is priced as ``claude-haiku-4-5`` and
    ``gpt-4.1-mini-2025-04-14`` as ``gpt-4.1-mini`` (not ``gpt-4.1``).
    """

    def __init__(
        self,
        prices: Mapping[str, Price] | None = None,
        cache_prices: Mapping[str, CachePrice] | None = None,
    ) -> None:
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES)
        if prices:
            self.prices.update(prices)
        self.cache_prices: dict[str, CachePrice] = dict(DEFAULT_CACHE_PRICES)
        if cache_prices:
            self.cache_prices.update(cache_prices)

    def lookup(self, model: str) -> Price | None:
        """The (input, output) price per million tokens of ``model``, or None if unknown."""
        return _match(self.prices, model)

    def cache_lookup(self, model: str) -> CachePrice | None:
        """The (cache write, cache read) price per million tokens of ``model``: its listed
        one, else its input price for both (no discount assumed), None when it has no price."""
        listed = _match(self.cache_prices, model)
        price = self.lookup(model)
        if listed is not None and price is not None:
            return listed
        return (price[0], price[0]) if price is not None else None

    def cost(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cache_write: int = 0,
        cache_read: int = 0,
    ) -> float | None:
        """USD cost of one exchange, or None when the model has no price. ``input_tokens``
        counts every input token; ``cache_write`` and ``cache_read`` of them are priced at the
        model's cache write and read prices instead of its input price."""
        price = self.lookup(model)
        cached = self.cache_lookup(model)
        if price is None or cached is None:
            return None
        plain = max(0, input_tokens - cache_write - cache_read)
        total = plain * price[0] + output_tokens * price[1]
        return (total + cache_write * cached[0] + cache_read * cached[1]) / 1_000_000


def _match(table: Mapping[str, tuple[float, float]], model: str) -> tuple[float, float] | None:
    """Exact key first, else the longest key contained in ``model``."""
    if model in table:
        return table[model]
    matches = [key for key in table if key in model]
    return table[max(matches, key=len)] if matches else None


def load_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read a JSON price file: ``{"m": [in, out]}`` or ``{"m": {"input": x, "output": y}}``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"cannot read the price table {path}: {exc}; QEMEM_PRICES must name a JSON file "
            'like {"my-model": [0.5, 1.5]} (USD per million input/output tokens)'
        ) from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"price table {path} must be a JSON object mapping model -> price")
    out: dict[str, Price] = {}
    for model, value in raw.items():
        try:
            if isinstance(value, dict):
                out[model] = (float(value["input"]), float(value["output"]))
            else:
                pin, pout = value
                out[model] = (float(pin), float(pout))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"bad price for {model!r} in {path}: expected [input, output] or "
                '{"input": x, "output": y} in USD per million tokens'
            ) from exc
    return out


def load_cache_prices(path: str | os.PathLike[str]) -> dict[str, CachePrice]:
    """The cache prices of a JSON price file (see :func:`load_prices`): the entries of the
    form ``{"input": x, "output": y, "cache_write": w, "cache_read": r}``."""
    load_prices(path)  # the same checks, the same messages
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    out: dict[str, CachePrice] = {}
    for model, value in raw.items():
        if isinstance(value, dict) and ("cache_write" in value or "cache_read" in value):
            try:
                out[model] = (float(value["cache_write"]), float(value["cache_read"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(
                    f"bad cache price for {model!r} in {path}: give both cache_write and "
                    "cache_read in USD per million tokens"
                ) from exc
    return out
