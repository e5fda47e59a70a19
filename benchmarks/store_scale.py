"""Store scale: ingest rate and pool build latency as the number of stored conversations grows.

Writes synthetic conversations (deterministic word salad over a 2,000-word vocabulary, 25 turns
per session, two speakers) into the store a URL names, embedded with the ``hash`` embedder
outside the timed part, so the figures are the store's own cost. After each checkpoint
(conversations stored) it times, for the first conversation: a cold pool build (a freshly
opened store: the scope's rows are read and indexed) and warm pool builds (index cached; the
query-embedding cache is cleared before each). A scope's search must not touch other scopes, so
neither figure should grow with the number of conversations.

    python benchmarks/store_scale.py --store sqlite:///scale.db
    python benchmarks/store_scale.py --store postgresql://USER@HOST/DB --conversations 200
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import datetime, timedelta

from qemem.embed.base import HashEmbedder
from qemem.embed.cache import query_cache
from qemem.eval.manifest import git_commit
from qemem.models import Session, Turn, search_text
from qemem.retrieve.plan import rule_plan
from qemem.retrieve.pool import build_pool
from qemem.store import MemoryStore, Scope, open_store, parse_store_url

QUESTION = "When did Alex go hiking with the river group and what did they bring?"


def conversation(seed: int, turns: int) -> tuple[list[Session], list[Turn]]:
    """A synthetic conversation ``conv-<seed>`` with ``turns`` turns."""
    rng = random.Random(seed)
    vocab = [f"w{n}" for n in range(2000)] + ["hiking", "river", "group", "bring", "Alex"]
    start = datetime(2023, 1, 1) + timedelta(days=seed)
    sessions: list[Session] = []
    out: list[Turn] = []
    for n in range(turns):
        index, position = n // 25 + 1, n % 25
        if position == 0:
            sessions.append(Session(index, start + timedelta(days=7 * index), f"session_{index}"))
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(8, 30)))
        out.append(
            Turn(
                f"D{index}:{position + 1}",
                f"conv-{seed}",
                index,
                position,
                ("Alex", "Sam")[n % 2],
                text,
                sessions[-1].date_time + timedelta(minutes=position),
            )
        )
    return sessions, out


def ingest(store: MemoryStore, embedder: HashEmbedder, seed: int, turns: int) -> tuple[int, float]:
    """Write one conversation in one transaction; (rows written, seconds of store time)."""
    sessions, records = conversation(seed, turns)
    vectors = embedder.embed([search_text(t) for t in records])
    scope = Scope(f"conv-{seed}")
    started = time.perf_counter()
    with store.transaction():
        store.put_conversation(scope, ["Alex", "Sam"])
        store.add_sessions(scope, sessions)
        store.add_turns(scope, records, vectors, embedder.id)
    return len(records), time.perf_counter() - started


def pool_times(
    url: str, embedder: HashEmbedder, warm_runs: int
) -> tuple[float, list[float], list[float]]:
    """(cold ms, warm wall ms, warm CPU ms) of build_pool for conv-0 on a freshly opened
    store. CPU time tells the store's cost apart from waiting for a busy machine's cores."""
    plan = rule_plan(QUESTION)
    store = open_store(url)
    try:
        query_cache.clear()
        started = time.perf_counter()
        build_pool(store, Scope("conv-0"), embedder, plan)
        cold = (time.perf_counter() - started) * 1000
        warm, cpu = [], []
        for _ in range(warm_runs):
            query_cache.clear()
            started, started_cpu = time.perf_counter(), time.process_time()
            build_pool(store, Scope("conv-0"), embedder, plan)
            warm.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
    finally:
        store.close()
    return cold, warm, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="store URL (an empty store)")
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=700)
    parser.add_argument("--checkpoints", default="1,50,100,200")
    parser.add_argument("--warm-runs", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    args = parser.parse_args()
    checkpoints = sorted(
        {int(c) for c in args.checkpoints.split(",") if int(c) <= args.conversations}
    )
    embedder = HashEmbedder()
    config = {
        "store": parse_store_url(args.store)[0],
        "conversations": args.conversations,
        "turns": args.turns,
        "checkpoints": checkpoints,
        "warm_runs": args.warm_runs,
        "embedder": embedder.id,
        "commit": git_commit(),
        "data": "synthetic (seeded)",
    }
    if not args.json:
        print(json.dumps(config))
        print("stored  ingest rows/s  pool cold ms  warm p50 ms  warm p95 ms  warm CPU p50 ms")
    rows: list[dict[str, float]] = []
    store = open_store(args.store)
    try:
        done = rows_written = 0
        seconds = 0.0
        for checkpoint in checkpoints:
            while done < checkpoint:
                written, spent = ingest(store, embedder, done, args.turns)
                rows_written, seconds, done = rows_written + written, seconds + spent, done + 1
            cold, warm, cpu = pool_times(args.store, embedder, args.warm_runs)
            row = {
                "conversations": done,
                "ingest_rows_per_s": round(rows_written / seconds, 1),
                "pool_cold_ms": round(cold, 1),
                "pool_warm_p50_ms": round(statistics.median(warm), 2),
                "pool_warm_p95_ms": round(statistics.quantiles(warm, n=20)[18], 2),
                "pool_warm_cpu_p50_ms": round(statistics.median(cpu), 2),
            }
            rows.append(row)
            rows_written, seconds = 0, 0.0
            if not args.json:
                print(
                    f"{done:6d}  {row['ingest_rows_per_s']:14.0f}  {cold:12.1f}  "
                    f"{row['pool_warm_p50_ms']:11.2f}  {row['pool_warm_p95_ms']:11.2f}  "
                    f"{row['pool_warm_cpu_p50_ms']:15.2f}",
                    flush=True,
                )
    finally:
        store.close()
    print(json.dumps({**config, "results": rows}))


if __name__ == "__main__":
    main()
