"""Latency of the retrieval stage (query embedding included, no LLM): p50/p95 of build_pool.

Builds an in-memory store with one LoCoMo conversation (default conv-41, 663 turns) plus
synthetic episodes (8 consecutive turns of a session, their text concatenated) and one fact per
episode (its first turn's text), all embedded with the default embedder, then times
``build_pool`` for a plan of 7 queries (the question + 6), 200 runs after 5 warm-up runs; then
the embedding alone, and retrieval alone (query vectors cached). CPU times sum all threads.

    python benchmarks/retrieval_latency.py --data locomo.json [--conversation conv-41]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import os
import pstats
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from qemem.embed.base import Embedder
from qemem.ingest.locomo import load_locomo, parse_locomo
from qemem.memory import Memory
from qemem.models import Episode, Plan, SemanticFact
from qemem.retrieve.pool import RetrievalConfig, build_pool

PLAN = Plan(
    question="What did Maria donate to the homeless shelter, and when?",
    need="What Maria donated to a homeless shelter and the date of the donation.",
    answer_type="description",
    aggregate=True,
    temporal=True,
    queries=(
        "Maria donated to a homeless shelter",
        "dropping off donations at the shelter",
        "gave away my old car",
        "volunteering at the homeless shelter",
        "Maria shelter donation date",
        "what Maria gave to people in need",
    ),
)


def build(data: Path, conversation: str) -> Memory:
    """An in-memory store with the conversation, synthetic episodes and facts."""
    samples = [s for s in load_locomo(data) if s.get("sample_id") == conversation]
    if not samples:
        raise SystemExit(f"no conversation {conversation!r} in {data}")
    memory = Memory.open(None)
    memory.ingest(parse_locomo(samples, str(data)))
    scope = memory.scope(conversation)
    turns = memory.turns(conversation)
    episodes: list[Episode] = []
    for session in sorted({t.session for t in turns}):
        in_session = [t for t in turns if t.session == session]
        for start in range(0, len(in_session), 8):
            chunk = in_session[start : start + 8]
            episodes.append(
                Episode(
                    f"E{len(episodes) + 1}",
                    conversation,
                    session,
                    f"{chunk[0].speaker} and {chunk[-1].speaker}, session {session}",
                    " ".join(f"{t.speaker} said: {t.text}" for t in chunk),
                    chunk[0].timestamp,
                    tuple(t.id for t in chunk),
                )
            )
    facts = [
        SemanticFact(f"S{n}", conversation, f"{turns_by(e)}", e.session, (e.id,))
        for n, e in enumerate(episodes, start=1)
    ]
    memory.store.add_episodes(scope, episodes, memory.embed_documents(episodes), memory.embedder.id)
    memory.store.put_facts(scope, facts, memory.embed_documents(facts), memory.embedder.id)
    return memory


class CachedEmbedder:
    """Wraps an embedder, remembering query vectors: isolates retrieval from embedding."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.id, self.dim = inner, inner.id, inner.dim
        self.memo: dict[tuple[str, bool], np.ndarray] = {}

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if (t, query) not in self.memo]
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing, query=query), strict=True):
                self.memo[(text, query)] = vector
        return np.stack([self.memo[(t, query)] for t in texts])


def timed(fn: Callable[[], object], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (all threads) milliseconds of ``runs`` calls, after 5 warm-up calls."""
    for _ in range(5):
        fn()
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return wall, cpu


def summary(label: str, times: tuple[list[float], list[float]]) -> str:
    wall, cpu = times
    p95 = statistics.quantiles(wall, n=20)[18]
    return (
        f"{label}: wall p50={statistics.median(wall):.1f} ms p95={p95:.1f} ms; "
        f"CPU p50={statistics.median(cpu):.1f} ms"
    )


def turns_by(episode: Episode) -> str:
    return episode.content.split(" said: ", 1)[-1][:200]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file")
    parser.add_argument("--conversation", default="conv-41")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    args = parser.parse_args()
    memory = build(args.data, args.conversation)
    scope = memory.scope(args.conversation)
    config = RetrievalConfig()
    counts = (
        len(memory.turns(args.conversation)),
        len(memory.episodes(args.conversation)),
        len(memory.facts(args.conversation)),
    )
    cached = CachedEmbedder(memory.embedder)
    full = timed(lambda: build_pool(memory.store, scope, memory.embedder, PLAN), args.runs)
    embed = timed(lambda: memory.embedder.embed(PLAN.query_set, query=True), min(50, args.runs))
    retrieval = timed(lambda: build_pool(memory.store, scope, cached, PLAN), args.runs)
    print(f"data: {args.data} sha256={hashlib.sha256(args.data.read_bytes()).hexdigest()}")
    print(f"conversation: {args.conversation} turns/episodes/facts={counts}")
    print(f"embedder: {memory.embedder.id}; cpus available: {len(os.sched_getaffinity(0))}")
    print(f"config: {asdict(config)}")
    print(f"queries: {len(PLAN.query_set)}; runs: {args.runs}")
    print(summary("build_pool, embedding included", full))
    print(summary("query embedding alone (7 queries, one batch)", embed))
    print(summary("build_pool, query vectors cached (retrieval alone)", retrieval))
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [build_pool(memory.store, scope, cached, PLAN) for _ in range(50)])
        pstats.Stats(profile).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
