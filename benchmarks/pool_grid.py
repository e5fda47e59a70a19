"""Grid of the multi-granular pool's settings on real memory: coverage against turns only.

    python benchmarks/pool_grid.py --data locomo10.json --memory conv-26.json \\
        --store /tmp/grid.db [--conversation conv-26]

Ingests ``--data`` into ``--store`` and imports ``--memory`` (a ``qemem-memory/1`` file) if
the store lacks them, then, for every question of the memory's conversation (categories 1-4,
rule plan: the question alone), fuses each space once and rebuilds the pool for every
setting of the grid (the fusion does not depend on them). Prints, per setting, the strict
coverage AUC over 10-120 turns and 300-3600 tokens, the worst per-budget margin over the
turns-only pool (negative: some budget is worse) and the mean exposed turns; the turns-only
baseline first. Runs in a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import replace
from pathlib import Path

from qemem.eval.coverage import (
    TOKEN_BUDGETS,
    TURN_BUDGETS,
    alias_keys,
    auc,
    budget_positions,
    coverage_curve,
    exposure_groups,
    load_questions,
    turns_only,
)
from qemem.eval.manifest import run_info
from qemem.memory import Memory
from qemem.memory_file import load
from qemem.passages import turn_tokens
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.plan import rule_plan
from qemem.retrieve.pool import fused_spaces, pool_from_fusion

GRID: dict[str, tuple[object, ...]] = {
    "weight_episodes": (0.5, 0.75, 1.0),
    "weight_facts": (0.25, 0.5, 1.0),
    "focus_turns": (None, 1),
    "budget_episodes": (4, 8),
    "budget_facts": (8, 16),
    "provenance_weight": (0.0, 0.5),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON")
    parser.add_argument("--memory", type=Path, required=True, help="qemem-memory/1 file")
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--top", type=int, default=25, help="print the best N settings")
    args = parser.parse_args()
    memory_file = load(args.memory)
    memory = Memory.open(args.store)
    questions = [
        q
        for q in load_questions(memory, args.data, (1, 2, 3, 4))
        if q.conversation == memory_file.conversation
    ]
    memory.import_memory(memory_file)
    conv = memory_file.conversation
    scope = memory.scope(conv)
    turns = memory.turns(conv)
    episodes = {e.id: e for e in memory.episodes(conv)}
    facts = {f.id: f for f in memory.facts(conv)}
    aliases = alias_keys(turns)
    tokens = {t.id: turn_tokens(t) for t in turns}
    base = RetrievalConfig(budget_turns=40)  # the turn hits the grid was measured with
    print(
        json.dumps(
            run_info(
                args.data,
                memory=str(args.memory),
                conversation=conv,
                questions=len(questions),
                embedder=memory.embedder.id,
                plan="rules (question only)",
                episodes=len(episodes),
                facts=len(facts),
                grid={k: list(v) for k, v in GRID.items()},
            ),
            indent=1,
        )
    )
    started = time.perf_counter()
    cached = []
    for q in questions:
        plan = rule_plan(q.question)
        fused = fused_spaces(memory.store, scope, memory.embedder, plan.query_set, base)
        cached.append((q, plan, fused))
    print(f"fused {len(cached)} questions in {time.perf_counter() - started:.0f} s")

    def curves(config: RetrievalConfig) -> tuple[dict[int, float], dict[int, float], float]:
        by_turns, by_tokens, exposed = [], [], 0
        for q, plan, fused in cached:
            pool = pool_from_fusion(
                conv,
                plan.query_set,
                fused,
                turns,
                episodes,
                facts,
                aggregate=plan.aggregate,
                config=config,
            )
            groups = exposure_groups(pool.entries())
            exposed += sum(len(g) for g in groups)
            by_turns.append(budget_positions(groups, q.evidence, aliases)[0])
            by_tokens.append(budget_positions(groups, q.evidence, aliases, tokens)[0])
        return (
            coverage_curve(by_turns, TURN_BUDGETS),
            coverage_curve(by_tokens, TOKEN_BUDGETS),
            exposed / max(1, len(cached)),
        )

    turns_curve, tokens_curve, exposed = curves(turns_only(base))
    print(
        f"turns only: AUC turns {auc(turns_curve):.4f} tokens {auc(tokens_curve):.4f} "
        f"exposed {exposed:.0f}"
    )
    print("  turns  " + " ".join(f"{v:.3f}" for v in turns_curve.values()))
    print("  tokens " + " ".join(f"{v:.3f}" for v in tokens_curve.values()))
    rows = []
    for values in itertools.product(*GRID.values()):
        settings = dict(zip(GRID, values, strict=True))
        config = replace(base, **settings)  # type: ignore[arg-type]
        by_turns, by_tokens, exposed = curves(config)
        margin = min(
            min(v - turns_curve[b] for b, v in by_turns.items()),
            min(v - tokens_curve[b] for b, v in by_tokens.items()),
        )
        rows.append((settings, by_turns, by_tokens, exposed, margin))
        print(
            f"{settings}: AUC turns {auc(by_turns):.4f} ({auc(by_turns) - auc(turns_curve):+.4f})"
            f" tokens {auc(by_tokens):.4f} ({auc(by_tokens) - auc(tokens_curve):+.4f}) "
            f"worst margin {margin:+.3f} exposed {exposed:.0f}",
            flush=True,
        )
    rows.sort(key=lambda r: -(auc(r[1]) + auc(r[2])))
    print(f"\nbest {args.top} by AUC turns + tokens:")
    for settings, by_turns, by_tokens, exposed, margin in rows[: args.top]:
        print(
            f"  {settings}: turns {auc(by_turns):.4f} tokens {auc(by_tokens):.4f} "
            f"worst margin {margin:+.3f} exposed {exposed:.0f}"
        )
        print("    turns  " + " ".join(f"{v:.3f}" for v in by_turns.values()))
        print("    tokens " + " ".join(f"{v:.3f}" for v in by_tokens.values()))
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
