"""Latency of ``Memory.context`` against the bare encode of its question, in one run.

The store is ``retrieval_latency.py``'s (one LoCoMo conversation, default conv-41 with 663
turns, plus synthetic episodes and facts, default embedder, SQLite in memory or ``--store``).
Times ``--runs`` calls each after 5 warm-up calls: ``Memory.context`` for the question with
the query-vector cache cleared before each call (the rule plan: no LLM; embedding, hybrid
retrieval over three spaces, the budget cut and the rendering included), and the bare encode
of the question alone. The ratio is context p50 over encode p50 (goal <= 1.5).

    python benchmarks/context_latency.py --data locomo10.json [--budget 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from retrieval_latency import PLAN, build, summary, timed

from qemem.embed.cache import query_cache
from qemem.eval.manifest import run_info
from qemem.memory import Memory


def cold_context(memory: Memory, conversation: str, budget: int) -> None:
    """``context`` as a new question sees it: no query vector cached."""
    query_cache.clear()
    memory.context(conversation, PLAN.question, budget_tokens=budget)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file")
    parser.add_argument("--conversation", default="conv-41")
    parser.add_argument("--store", default=None, help="an empty store URL (default: in memory)")
    parser.add_argument("--budget", type=int, default=2000, help="tokens of the block")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    args = parser.parse_args()
    memory = build(args.data, args.conversation, args.store)
    conv = args.conversation
    counts = (len(memory.turns(conv)), len(memory.episodes(conv)), len(memory.facts(conv)))
    context = timed(lambda: cold_context(memory, conv, args.budget), args.runs)
    encode = timed(lambda: memory.embedder.embed([PLAN.question], query=True), args.runs)
    block = memory.context(conv, PLAN.question, budget_tokens=args.budget)
    context_p50, encode_p50 = statistics.median(context[0]), statistics.median(encode[0])
    result = {
        **run_info(
            args.data,
            embedder=memory.embedder.id,
            conversation=conv,
            records=counts,
            budget_tokens=args.budget,
            runs=args.runs,
            cpus=len(os.sched_getaffinity(0)),
        ),
        "block_tokens": block.tokens,
        "block_items": len(block.items),
        "context_p50_ms": round(context_p50, 2),
        "encode_p50_ms": round(encode_p50, 2),
        "ratio": round(context_p50 / encode_p50, 3),
    }
    if not args.json:
        print(f"conversation: {conv} turns/episodes/facts={counts}; runs: {args.runs}")
        print(f"block: {block.tokens} tokens, {len(block.items)} records")
        print(summary("context (query cache cleared)", context))
        print(summary("bare encode of the question", encode))
        print(f"ratio context/encode: {result['ratio']} (goal <= 1.5)")
    memory.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
