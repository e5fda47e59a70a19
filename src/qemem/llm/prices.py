"""Price table: USD per million input / output tokens, matched against model ids."""

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


class PriceTable:
    """Looks up a model's price: exact key first, else the longest key contained in the id.

    So ``us.anthropic.claude-haiku-4-5-20251001-v1:0`` is priced as ``claude-haiku-4-5`` and
    ``gpt-4.1-mini-2025-04-14`` as ``gpt-4.1-mini`` (not ``gpt-4.1``).
    """

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(DEFAULT_PRICES)
        if prices:
            self.prices.update(prices)

    def lookup(self, model: str) -> Price | None:
        """The (input, output) price per million tokens of ``model``, or None if unknown."""
        if model in self.prices:
            return self.prices[model]
        matches = [key for key in self.prices if key in model]
        return self.prices[max(matches, key=len)] if matches else None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """USD cost of one exchange, or None when the model has no price."""
        price = self.lookup(model)
        if price is None:
            return None
        return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


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
