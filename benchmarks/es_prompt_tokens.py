"""Prompt tokens of ``full`` with and without the episode and fact spaces, against the
final-context evidence visibility each reaches (LLM-free: the offline fake LLM).

    python benchmarks/es_prompt_tokens.py --data locomo10.json --memory conv-26.json \\
        --store /tmp/tokens.db [--limit 60]

Ingests ``--data`` and imports ``--memory`` (a ``qemem-memory/1`` file) if the store lacks
them, then answers the memory's conversation's questions (categories 1-4) in mode ``full``
with ``QEMEM_LLM=fake`` under each retrieval setting below: the default pool (turns, episodes,
facts), the same with fewer turn hits, and turns-only pools of growing turn budgets. Prints,
per setting, the mean input tokens per question (all calls; construct and answer apart; the
fake counts 4 characters a token), the share of questions whose every evidence turn is in the
final answer context, and the mean initial pool turns. Compare the spaces at equal
visibility: the cheapest row of each kind that reaches a given visibility, and its tokens.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from qemem.answer import AskConfig
from qemem.eval.coverage import alias_keys, load_questions, turns_only
from qemem.eval.locomo import evidence_visible
from qemem.eval.manifest import run_info
from qemem.memory import Memory
from qemem.memory_file import load
from qemem.retrieve.pool import RetrievalConfig

DEFAULT = RetrievalConfig()
SETTINGS: dict[str, RetrievalConfig] = {
    "turns + episodes + facts (default)": DEFAULT,
    "turns + episodes + facts, 30 hits": RetrievalConfig(budget_turns=30),
    "turns + episodes + facts, 20 hits": RetrievalConfig(budget_turns=20),
    "turns + episodes + facts, 10 hits": RetrievalConfig(budget_turns=10),
    "turns only, 30 hits": turns_only(RetrievalConfig(budget_turns=30)),
    "turns only, 40 hits": turns_only(DEFAULT),
    "turns only, 50 hits": turns_only(RetrievalConfig(budget_turns=50)),
    "turns only, 60 hits": turns_only(RetrievalConfig(budget_turns=60)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON")
    parser.add_argument("--memory", type=Path, required=True, help="qemem-memory/1 file")
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--only", default="", help="only the settings whose name has this")
    args = parser.parse_args()
    memory_file = load(args.memory)
    memory = Memory.open(args.store, llm="fake")
    conv = memory_file.conversation
    questions = load_questions(memory, args.data, (1, 2, 3, 4), (conv,))[: args.limit]
    memory.import_memory(memory_file)
    aliases = alias_keys(memory.turns(conv))
    print(
        json.dumps(
            run_info(
                args.data,
                memory=str(args.memory),
                conversation=conv,
                questions=len(questions),
                embedder=memory.embedder.id,
                llm="fake (offline; tokens = characters / 4)",
                mode="full",
            ),
            indent=1,
        )
    )
    for name, config in SETTINGS.items():
        if args.only not in name:
            continue
        started = time.perf_counter()
        tokens = {"total": 0, "construct": 0, "answer": 0}
        visible, exposed = 0, 0
        for q in questions:
            answer = memory.ask(conv, q.question, mode="full", config=AskConfig(retrieval=config))
            totals = answer.trace.totals
            tokens["total"] += totals["total"]["input_tokens"]
            for group in ("construct", "answer"):
                tokens[group] += totals["by_group"].get(group, {}).get("input_tokens", 0)
            visible += bool(evidence_visible(answer.trace.visible_turn_ids, q.evidence, aliases))
            exposed += sum(
                1 for r in answer.trace.rounds[:1] for p in r.pool_ids if p.startswith("turn:")
            )
        n = max(1, len(questions))
        print(
            f"{name:38} input tokens/question {tokens['total'] / n:7.0f} "
            f"(construct {tokens['construct'] / n:6.0f}, answer {tokens['answer'] / n:6.0f}) "
            f"evidence visible {visible / n:.3f}  initial pool turns {exposed / n:5.1f}  "
            f"[{time.perf_counter() - started:.0f} s]",
            flush=True,
        )


if __name__ == "__main__":
    main()
