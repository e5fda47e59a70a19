"""Latency of the retrieval stage against the bare encode time of its queries, in one run.

Builds a store (in memory, or ``--store URL``) with one LoCoMo conversation (default conv-41,
663 turns) plus synthetic episodes (8 consecutive turns of a session, their text concatenated)
and one fact per episode (its first turn's text), all embedded with the default embedder, then
times, 200 runs each after 5 warm-up runs: ``build_pool`` for a plan of 7 queries (the question
+ 6) with the query-embedding cache cleared before each run (embedding included); the bare
encode of the same 7 queries in one call; and ``build_pool`` with the queries cached
(retrieval alone, as refinement rounds and repeated questions see it). The ratio is pool p50
over encode p50 (goal <= 1.2). CPU times sum all threads.

    python benchmarks/retrieval_latency.py --data locomo10.json [--conversation conv-41] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from qemem.embed.cache import query_cache
from qemem.eval.manifest import run_info
from qemem.ingest.locomo import load_locomo, parse_locomo
from qemem.memory import Memory
from qemem.models import Episode, Plan, SemanticFact
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.pool import build_pool

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


def build(data: Path, conversation: str, store: str | None) -> Memory:
    """A store with the conversation, synthetic episodes and facts."""
    samples = [s for s in load_locomo(data) if s.get("sample_id") == conversation]
    if not samples:
        raise SystemExit(f"no conversation {conversation!r} in {data}")
    memory = Memory.open(store)
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


def cold_pool(memory: Memory, conversation: str) -> None:
    """build_pool as a new question sees it: no query vector cached."""
    query_cache.clear()
    build_pool(memory.store, memory.scope(conversation), memory.embedder, PLAN)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file")
    parser.add_argument("--conversation", default="conv-41")
    parser.add_argument("--store", default=None, help="an empty store URL (default: in memory)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    args = parser.parse_args()
    memory = build(args.data, args.conversation, args.store)
    scope = memory.scope(args.conversation)
    config = RetrievalConfig()
    counts = (
        len(memory.turns(args.conversation)),
        len(memory.episodes(args.conversation)),
        len(memory.facts(args.conversation)),
    )
    full = timed(lambda: cold_pool(memory, args.conversation), args.runs)
    embed = timed(lambda: memory.embedder.embed(PLAN.query_set, query=True), args.runs)
    warm = timed(lambda: build_pool(memory.store, scope, memory.embedder, PLAN), args.runs)
    pool_p50, encode_p50 = statistics.median(full[0]), statistics.median(embed[0])
    result = {
        **run_info(
            args.data,
            embedder=memory.embedder.id,
            conversation=args.conversation,
            records=counts,
            queries=len(PLAN.query_set),
            runs=args.runs,
            cpus=len(os.sched_getaffinity(0)),
            config=asdict(config),
        ),
        "pool_p50_ms": round(pool_p50, 2),
        "encode_p50_ms": round(encode_p50, 2),
        "retrieval_p50_ms": round(statistics.median(warm[0]), 2),
        "ratio": round(pool_p50 / encode_p50, 3),
    }
    if not args.json:
        print(f"conversation: {args.conversation} turns/episodes/facts={counts}")
        print(f"embedder: {memory.embedder.id}; queries: {len(PLAN.query_set)}; runs: {args.runs}")
        print(summary("build_pool, queries embedded (cache cleared)", full))
        print(summary("bare encode of the 7 queries (one call)", embed))
        print(summary("build_pool, queries cached (retrieval alone)", warm))
        print(f"ratio pool/encode: {result['ratio']} (goal <= 1.2)")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [cold_pool(memory, args.conversation) for _ in range(50)])
        pstats.Stats(profile).sort_stats("cumulative").print_stats(15)
    memory.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
