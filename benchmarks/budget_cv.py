"""Retrieval budgets chosen by leave-one-conversation-out, not on one conversation.

    python benchmarks/budget_cv.py --data DEV --memory-dir MEMORY --store /tmp/cv.db [--json]

``--data`` is a LoCoMo file; ``--memory-dir`` holds one ``qemem-memory`` file per conversation
(``conv-26.json`` ...: episodes and facts a capable model built); every conversation with a
memory file takes part (categories 1-4). Two stages:

1. **Pool** (LLM-free): for every question the rule plan's fusion is computed once and the pool
   rebuilt for every setting of ``GRID`` (turn hits / episodes / facts). A question counts as
   visible when the pool exposes all its annotated evidence turns; its cost is the pool as the
   prompts render it, in tokens (characters / 4).
2. **Final context** (the offline LLM, ``full`` mode): the settings stage 1's folds picked,
   the default and ``--also`` settings are run through ``Memory.ask``; a question counts as
   visible when its complete evidence is in the answer context; its cost is the input tokens of
   every call. The offline LLM cites by rule (the cards quote the pool turns that share most
   words with the plan's queries), so this figure measures what the cards' selection keeps of
   the pool under that rule, not what a real model would cite.

For each stage: per conversation and pooled, each setting's visibility and tokens; the folds
(hold one conversation out, pick the cheapest setting within 1 point of the best visibility on
the other two, score it on the held-out one: :mod:`qemem.eval.selection`); the held-out curve
(each setting's held-out visibility and tokens, question-weighted over the folds, which for a
fixed setting is its figure over all questions) and the Pareto-best settings of it; and the
final pick (the procedure on all conversations).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qemem.answer import AskConfig
from qemem.eval.coverage import alias_keys, evidence_rank, exposure_groups, load_questions
from qemem.eval.manifest import run_info
from qemem.eval.records import evidence_visible
from qemem.eval.selection import Fold, Tally, cheapest_within, held_out_total, leave_one_out, pooled
from qemem.evidence.context import SourceIndex, format_memories
from qemem.ingest.locomo import LocomoQuestion
from qemem.llm import LLMClient
from qemem.llm.types import estimate_tokens
from qemem.memory import Memory
from qemem.memory_file import load as load_memory_file
from qemem.models import Episode, SemanticFact, Turn
from qemem.retrieve.plan import rule_plan
from qemem.retrieve.pool import RetrievalConfig, fused_spaces, pool_from_fusion
from qemem.testing import OfflineLLM

Setting = tuple[int, int, int]
"""Budgets: turn hits, episodes, facts."""
GRID: dict[str, tuple[int, ...]] = {
    "budget_turns": (15, 20, 25, 30, 40),
    "budget_episodes": (0, 2, 4, 8),
    "budget_facts": (0, 4, 8, 16),
}
DEFAULT: Setting = (25, 2, 4)
EARLIER: Setting = (40, 4, 8)


def config_of(setting: Setting) -> RetrievalConfig:
    turns, episodes, facts = setting
    return RetrievalConfig(budget_turns=turns, budget_episodes=episodes, budget_facts=facts)


def label(setting: Setting) -> str:
    return "/".join(map(str, setting))


def parse(text: str) -> Setting:
    """The setting of a label ``T/E/F``."""
    turns, episodes, facts = (int(part) for part in text.split("/"))
    return turns, episodes, facts


def pool_stage(
    memory: Memory, conversation: str, questions: Sequence[LocomoQuestion]
) -> dict[Setting, Tally]:
    """Stage 1 for one conversation: each setting's pool visibility and rendered tokens."""
    scope = memory.scope(conversation)
    turns = memory.turns(conversation)
    episodes = {e.id: e for e in memory.episodes(conversation)}
    facts = {f.id: f for f in memory.facts(conversation)}
    index = SourceIndex(memory.store, scope)
    aliases = alias_keys(turns)
    base = config_of((max(GRID["budget_turns"]), 8, 16))
    fused = []
    for q in questions:
        plan = rule_plan(q.question)
        spaces = fused_spaces(memory.store, scope, memory.embedder, plan.query_set, base)
        fused.append((q, plan, spaces))
    tallies: dict[Setting, Tally] = {}
    for setting in itertools.product(*GRID.values()):
        config = config_of(setting)
        hits, cost = 0, 0
        for q, plan, spaces in fused:
            pool = pool_from_fusion(
                conversation,
                plan.query_set,
                spaces,
                turns,
                episodes,
                facts,
                aggregate=plan.aggregate,
                config=config,
            )
            exposed = [t for group in exposure_groups(pool.entries()) for t in group]
            hits += evidence_rank(exposed, q.evidence, aliases) is not None
            records = [i.record for i in pool.items()]
            cost += estimate_tokens(
                format_memories(
                    index,
                    [r for r in records if isinstance(r, Episode)],
                    [r for r in records if isinstance(r, SemanticFact)],
                    [r for r in records if isinstance(r, Turn)],
                )
            )
        tallies[setting] = Tally(hits, len(fused), float(cost))
    return tallies


def final_stage(
    memory: Memory, conversation: str, questions: Sequence[LocomoQuestion], setting: Setting
) -> Tally:
    """Stage 2 for one conversation and setting: final-context visibility, input tokens."""
    aliases = alias_keys(memory.turns(conversation))
    config = AskConfig(retrieval=config_of(setting))
    hits, cost = 0, 0
    for q in questions:
        answer = memory.ask(conversation, q.question, mode="full", config=config)
        hits += bool(evidence_visible(answer.evidence.shown.turns, q.evidence, aliases))
        cost += sum(int(call["input_tokens"]) for call in answer.trace.calls)
    return Tally(hits, len(questions), float(cost))


def pareto(tallies: Mapping[Setting, Tally]) -> list[Setting]:
    """The settings no other setting beats on both visibility and cost, cheapest first."""
    front = [
        s
        for s, t in tallies.items()
        if not any(
            o.visibility >= t.visibility and o.mean_cost <= t.mean_cost and o != t
            for o in tallies.values()
        )
    ]
    return sorted(front, key=lambda s: tallies[s].mean_cost)


def report(name: str, by_conversation: Mapping[str, Mapping[Setting, Tally]]) -> dict[str, Any]:
    """Print one stage's folds, held-out curve and pick; the same as data."""
    folds: list[Fold[Setting]] = leave_one_out(by_conversation)
    total = pooled(by_conversation.values())
    print(f"\n== {name}: folds (pick on the others, cheapest within 1 point of their best)")
    for f in folds:
        print(
            f"  held out {f.held_out}: picked {label(f.picked)} -> visibility "
            f"{f.score.visibility:.3f} (held-out best {f.best_visibility:.3f}), "
            f"{f.score.mean_cost:.0f} tokens"
        )
    procedure = held_out_total(folds)
    print(
        f"  procedure, held out: visibility {procedure.visibility:.3f}, "
        f"{procedure.mean_cost:.0f} tokens per question ({procedure.questions} questions)"
    )
    print(f"  held-out curve, Pareto-best settings ({len(total)} settings):")
    for s in pareto(total):
        print(
            f"    {label(s):>9}  visibility {total[s].visibility:.3f}  "
            f"{total[s].mean_cost:.0f} tokens"
        )
    for s in (DEFAULT, EARLIER):
        if s in total:
            print(
                f"  {label(s):>9} ({'default' if s == DEFAULT else 'earlier'}): visibility "
                f"{total[s].visibility:.3f}  {total[s].mean_cost:.0f} tokens"
            )
    pick = cheapest_within(total)
    print(
        f"  pick on all: {label(pick)} (visibility {total[pick].visibility:.3f}, "
        f"{total[pick].mean_cost:.0f} tokens)"
    )
    return {
        "folds": [
            {
                "held_out": f.held_out,
                "picked": label(f.picked),
                "visibility": round(f.score.visibility, 4),
                "best_visibility": round(f.best_visibility, 4),
                "tokens": round(f.score.mean_cost, 1),
            }
            for f in folds
        ],
        "held_out_visibility": round(procedure.visibility, 4),
        "held_out_tokens": round(procedure.mean_cost, 1),
        "curve": {
            label(s): [round(t.visibility, 4), round(t.mean_cost, 1)] for s, t in total.items()
        },
        "pick": label(pick),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON")
    parser.add_argument("--memory-dir", type=Path, required=True, help="qemem-memory files")
    parser.add_argument("--store", type=Path, required=True, help="store file (kept)")
    parser.add_argument("--also", nargs="*", default=[label(EARLIER)], help="T/E/F settings")
    parser.add_argument(
        "--stage", choices=("pool", "final", "both"), default="both", help="what to run"
    )
    parser.add_argument(
        "--final", nargs="*", default=[], help="stage 2 settings T/E/F (default: stage 1's picks)"
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    files = {load_memory_file(p).conversation: p for p in sorted(args.memory_dir.glob("*.json"))}
    started = time.perf_counter()
    with Memory.open(args.store, llm=LLMClient(OfflineLLM())) as memory:
        questions = load_questions(memory, args.data, (1, 2, 3, 4), sorted(files))
        for path in files.values():
            memory.import_memory(load_memory_file(path))
        by_conv = {c: [q for q in questions if q.conversation == c] for c in sorted(files)}
        info = run_info(
            args.data,
            memory={c: str(p) for c, p in files.items()},
            questions={c: len(qs) for c, qs in by_conv.items()},
            embedder=memory.embedder.id,
            llm="fake (offline)",
            plan="rules (question only)",
            grid={k: list(v) for k, v in GRID.items()},
            tolerance=0.01,
        )
        print(json.dumps(info, indent=1))
        result: dict[str, Any] = dict(info)
        finals = {parse(s) for s in [*args.final, *args.also]} | {DEFAULT}
        if args.stage != "final":
            pools = {c: pool_stage(memory, c, qs) for c, qs in by_conv.items()}
            result["pool"] = report("pool (LLM-free)", pools)
            print(f"stage 1 took {time.perf_counter() - started:.0f} s", flush=True)
            if not args.final:
                finals |= {parse(f["picked"]) for f in result["pool"]["folds"]}
                finals.add(parse(result["pool"]["pick"]))
        if args.stage != "pool":
            runs = {
                c: {s: final_stage(memory, c, qs, s) for s in sorted(finals)}
                for c, qs in by_conv.items()
            }
            result["final"] = report("final context (offline LLM, full)", runs)
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
