"""Evidence in the block when the conversation is not known: ``context_many`` over every
conversation of a LoCoMo file against ``context`` of the right one, in one run.

Ingests the file (and, with ``--memory``, qemem-memory/1 files of real episodes and facts),
then for every question of categories 1-4 of each conversation X builds a block of
``--budget`` tokens (rule plan, no LLM) twice: ``context(X)`` (the conversation is known) and
``context_many(all)`` (it is not). Reported per arm: evidence recall (the share of the gold
evidence turns of X that the block shows, turns shown directly or inside a shown episode
counted, mean over questions), the share of the block's items that come from X, and the p50
latency; the ratios put the two arms side by side.

    python benchmarks/context_across.py --data locomo-dev.json [--memory conv-26.json ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from qemem import memory_file
from qemem.eval.manifest import run_info
from qemem.evidence.block import Context
from qemem.ingest.locomo import load_locomo, parse_locomo
from qemem.memory import Memory


def shown_turns(memory: Memory, block: Context, conversation: str) -> set[str]:
    """The turn ids of ``conversation`` the block shows: its turns, and the turns of its
    episodes (a shown episode carries its turns' content)."""
    own = [i for i in block.items if (i.ref.conversation or conversation) == conversation]
    turns = {i.ref.id for i in own if i.ref.space == "turn"}
    episodes = [i.ref.id for i in own if i.ref.space == "episode"]
    for episode in memory.episodes(conversation, episodes) if episodes else []:
        turns.update(episode.turn_ids)
    return turns


def arm(memory: Memory, blocks: list[tuple[str, list[str], Context, float]]) -> dict[str, Any]:
    """Recall, own share and p50 latency of one arm's blocks."""
    recalls, shares = [], []
    for conversation, evidence, block, _ in blocks:
        shown = shown_turns(memory, block, conversation)
        recalls.append(len(shown & set(evidence)) / len(evidence))
        own = [i for i in block.items if (i.ref.conversation or conversation) == conversation]
        shares.append(len(own) / len(block.items) if block.items else 0.0)
    return {
        "evidence_recall": round(statistics.fmean(recalls), 4),
        "own_share": round(statistics.fmean(shares), 4),
        "p50_ms": round(statistics.median(b[3] for b in blocks) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file")
    parser.add_argument("--memory", type=Path, nargs="*", default=[], help="memory files")
    parser.add_argument("--budget", type=int, default=2000, help="tokens of each block")
    parser.add_argument("--limit", type=int, default=None, help="questions per conversation")
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    args = parser.parse_args()
    samples = load_locomo(args.data)
    memory = Memory.open(None)
    memory.ingest(parse_locomo(samples, str(args.data)))
    for path in args.memory:
        memory.import_memory(memory_file.load(path))
    everyone = [s["sample_id"] for s in samples]
    single: list[tuple[str, list[str], Context, float]] = []
    across: list[tuple[str, list[str], Context, float]] = []
    for sample in samples:
        cid = sample["sample_id"]
        known = {t.id for t in memory.turns(cid)}
        questions = [
            q
            for q in sample["qa"]
            if q.get("category") in (1, 2, 3, 4) and set(q.get("evidence", [])) & known
        ][: args.limit]
        for q in questions:
            evidence = [e for e in q["evidence"] if e in known]
            started = time.perf_counter()
            one = memory.context(cid, q["question"], budget_tokens=args.budget)
            middle = time.perf_counter()
            many = memory.context_many(everyone, q["question"], budget_tokens=args.budget)
            done = time.perf_counter()
            single.append((cid, evidence, one, middle - started))
            across.append((cid, evidence, many, done - middle))
    one_arm, many_arm = arm(memory, single), arm(memory, across)
    result = {
        **run_info(
            args.data,
            embedder=memory.embedder.id,
            conversations=everyone,
            memory=[str(p.name) for p in args.memory],
            budget_tokens=args.budget,
            questions=len(single),
            cpus=len(os.sched_getaffinity(0)),
        ),
        "context": one_arm,
        "context_many": many_arm,
        "recall_ratio": round(many_arm["evidence_recall"] / one_arm["evidence_recall"], 4),
        "latency_ratio": round(many_arm["p50_ms"] / one_arm["p50_ms"], 3),
    }
    if not args.json:
        print(f"{len(single)} questions over {everyone}; budget {args.budget} tokens")
        for name, values in (("context (known)", one_arm), ("context_many (all)", many_arm)):
            print(
                f"{name:>20}: evidence recall {values['evidence_recall']:.3f}, "
                f"own share {values['own_share']:.3f}, p50 {values['p50_ms']} ms"
            )
        print(f"recall ratio {result['recall_ratio']}, latency ratio {result['latency_ratio']}")
    memory.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
