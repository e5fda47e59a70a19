"""Coverage AUC of LLM-free pool configurations on a LoCoMo file (question only, rule plan).

    python benchmarks/coverage_ablation.py --data locomo-dev.json --store /tmp/dev.db

The store is ingested from ``--data`` if it lacks the conversations (use a copy of a shared
store: ingestion writes to it). Prints one line per configuration and curve.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from qemem.eval.coverage import evaluate_pool_coverage
from qemem.eval.manifest import run_info
from qemem.memory import Memory
from qemem.retrieve.budgets import RetrievalConfig

# The ablation ranks with 40 turn hits (the answer-time default, 25, cuts B = 100-120).
HITS = 40
CONFIGS: dict[str, RetrievalConfig] = {
    "turns-only hybrid (no context, names kept)": RetrievalConfig(
        context_window=0, strip_speakers=False, budget_turns=200, depth=None
    ),
    "+ context w=2": RetrievalConfig(strip_speakers=False, budget_turns=HITS),
    "+ context w=1": RetrievalConfig(strip_speakers=False, context_window=1, budget_turns=HITS),
    "+ dense queries without speaker names, no context": RetrievalConfig(
        context_window=0, budget_turns=200, depth=None
    ),
    "w=2, speaker names stripped": RetrievalConfig(budget_turns=HITS),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--only", default="", help="run configurations whose name has this")
    args = parser.parse_args()
    memory = Memory.open(args.store)
    info = run_info(args.data, embedder=memory.embedder.id, plan="rules (question only)")
    print(json.dumps(info, indent=1))
    for name, config in CONFIGS.items():
        if args.only not in name:
            continue
        start = time.perf_counter()
        report = evaluate_pool_coverage(memory, args.data, config=config).to_dict()
        print(f"{name}  [{time.perf_counter() - start:.0f} s, {report['questions']} questions]")
        print(f"    config: {asdict(config)}")
        for curve, values in report["curves"].items():  # type: ignore[attr-defined]
            print(f"    {curve:17} AUC {values['auc']:.4f}")
        print(f"    by category (turns/strict): {report['auc_by_category']}")


if __name__ == "__main__":
    main()
