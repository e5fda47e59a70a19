"""Thread-safe accounting of LLM calls: calls, tokens and cost, in total and by stage."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from qemem.llm.types import LLMResponse


@dataclass
class Tally:
    """Sums over a group of calls.

    ``input_tokens`` counts every input token, ``cache_write_tokens`` / ``cache_read_tokens``
    the parts of them a provider's prompt cache wrote / read. ``cost_nominal_usd`` counts
    every call (record/replay cache hits included) at its listed price; ``cost_spent_usd``
    excludes those hits. Both are None when any call in the group has no price.
    """

    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    latency_s: float = 0.0
    cost_nominal_usd: float | None = 0.0
    cost_spent_usd: float | None = 0.0

    def add(self, response: LLMResponse) -> None:
        """Count one response."""
        self.calls += 1
        self.cached_calls += int(response.cached)
        self.input_tokens += response.input_tokens
        self.output_tokens += response.output_tokens
        self.cache_write_tokens += response.cache_write_tokens
        self.cache_read_tokens += response.cache_read_tokens
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
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "latency_s": self.latency_s,
            "cost_nominal_usd": self.cost_nominal_usd,
            "cost_spent_usd": self.cost_spent_usd,
        }


def _merged(tallies: Iterable[Tally]) -> Tally:
    """The sum of several tallies (a cost is None when any part's is)."""
    out = Tally()
    for part in tallies:
        out.calls += part.calls
        out.cached_calls += part.cached_calls
        out.input_tokens += part.input_tokens
        out.output_tokens += part.output_tokens
        out.cache_write_tokens += part.cache_write_tokens
        out.cache_read_tokens += part.cache_read_tokens
        out.latency_s += part.latency_s
        for name in ("cost_nominal_usd", "cost_spent_usd"):
            mine, theirs = getattr(out, name), getattr(part, name)
            setattr(out, name, None if mine is None or theirs is None else mine + theirs)
    return out


def stage_group(stage: str) -> str:
    """Top-level stage of a label: ``build.segment`` -> ``build``, ``plan.repair`` -> ``plan``."""
    return stage.split(".", 1)[0]


class Ledger:
    """Records LLM responses; reports totals and splits by full stage label and by group.

    Sums are kept as calls come in; the responses themselves only with ``keep_responses``
    (a long-lived client's run ledger keeps sums only, so a server's memory does not grow
    with every call it ever made)."""

    def __init__(self, *, keep_responses: bool = True) -> None:
        self._lock = threading.Lock()
        self._responses: list[LLMResponse] = []
        self._stages: dict[str, Tally] = {}
        self.keep_responses = keep_responses

    def record(self, response: LLMResponse) -> None:
        """Add one response."""
        with self._lock:
            if self.keep_responses:
                self._responses.append(response)
            self._stages.setdefault(response.stage, Tally()).add(response)

    @property
    def responses(self) -> list[LLMResponse]:
        """A snapshot of every recorded response, in recording order (empty unless
        ``keep_responses``)."""
        with self._lock:
            return list(self._responses)

    def total(self) -> Tally:
        """Sums over every call."""
        return _merged(self._snapshot().values())

    def by_stage(self, *, group: bool = False) -> dict[str, Tally]:
        """Sums per stage label (per top-level group such as ``build`` when ``group``)."""
        out: dict[str, list[Tally]] = {}
        for stage, tally in self._snapshot().items():
            out.setdefault(stage_group(stage) if group else stage, []).append(tally)
        return {key: _merged(parts) for key, parts in sorted(out.items())}

    def _snapshot(self) -> dict[str, Tally]:
        with self._lock:
            return {stage: replace(tally) for stage, tally in self._stages.items()}

    def to_dict(self) -> dict[str, Any]:
        """Totals, per-stage and per-group sums, JSON-serialisable."""
        return {
            "total": self.total().to_dict(),
            "by_stage": {k: v.to_dict() for k, v in self.by_stage().items()},
            "by_group": {k: v.to_dict() for k, v in self.by_stage(group=True).items()},
        }
