"""Thread-safe accounting of LLM calls: calls, tokens and cost, in total and by stage."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from qemem.llm.types import LLMResponse


@dataclass
class Tally:
    """Sums over a group of calls.

    ``cost_nominal_usd`` counts every call (cache hits included) at its listed price;
    ``cost_spent_usd`` excludes cache hits. Both are None when any call in the group has no price.
    """

    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_nominal_usd: float | None = 0.0
    cost_spent_usd: float | None = 0.0

    def add(self, response: LLMResponse) -> None:
        """Count one response."""
        self.calls += 1
        self.cached_calls += int(response.cached)
        self.input_tokens += response.input_tokens
        self.output_tokens += response.output_tokens
        self.latency_s += response.latency_s
        cost = response.cost_usd
        if cost is None:
            self.cost_nominal_usd = self.cost_spent_usd = None
            return
        if self.cost_nominal_usd is not None:
            self.cost_nominal_usd += cost
        if self.cost_spent_usd is not None and not response.cached:
            self.cost_spent_usd += cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_s": self.latency_s,
            "cost_nominal_usd": self.cost_nominal_usd,
            "cost_spent_usd": self.cost_spent_usd,
        }


def stage_group(stage: str) -> str:
    """Top-level stage of a label: ``build.segment`` -> ``build``, ``plan.repair`` -> ``plan``."""
    return stage.split(".", 1)[0]


class Ledger:
    """Records LLM responses; reports totals and splits by full stage label and by group."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._responses: list[LLMResponse] = []

    def record(self, response: LLMResponse) -> None:
        """Add one response."""
        with self._lock:
            self._responses.append(response)

    @property
    def responses(self) -> list[LLMResponse]:
        """A snapshot of every recorded response, in recording order."""
        with self._lock:
            return list(self._responses)

    def total(self) -> Tally:
        """Sums over every call."""
        tally = Tally()
        for response in self.responses:
            tally.add(response)
        return tally

    def by_stage(self, *, group: bool = False) -> dict[str, Tally]:
        """Sums per stage label (per top-level group such as ``build`` when ``group``)."""
        out: dict[str, Tally] = {}
        for response in self.responses:
            key = stage_group(response.stage) if group else response.stage
            out.setdefault(key, Tally()).add(response)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        """Totals, per-stage and per-group sums, JSON-serialisable."""
        return {
            "total": self.total().to_dict(),
            "by_stage": {k: v.to_dict() for k, v in self.by_stage().items()},
            "by_group": {k: v.to_dict() for k, v in self.by_stage(group=True).items()},
        }
