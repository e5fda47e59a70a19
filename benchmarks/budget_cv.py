"""Retrieval budgets in tokens, chosen by leave-one-conversation-out on LoCoMo and BEAM at once.

    python benchmarks/budget_cv.py --locomo DEV --memory-dir MEMORY --store S \\
        --beam BEAM.json --beam-store S2 [--stage pool|final|both] [--json]

``--locomo`` is a LoCoMo file whose conversations with a ``qemem-memory`` file in
``--memory-dir`` take part (categories 1-4, with the episodes and facts a capable model
built); ``--beam`` a LoCoMo-shaped BEAM file (``qemem data beam``: turns only, no memory;
``--beam-conversations`` keeps some chats). Stores are kept (``--store``, ``--beam-store``),
so a second run embeds nothing. Only questions with annotated evidence count.

1. **Pool** (LLM-free): per question the rule plan's fusion is computed once and the pool
   rebuilt for every setting of ``GRID``: token budgets of turn passages, episodes and facts,
   and the context window (no count limits). A question counts as visible when the pool holds
   all its evidence (of each evidence turn the passage that best matches the answer,
   :func:`qemem.eval.coverage.best_passage`); its cost is what the budgets count: the tokens
   (characters / 4) of the units the pool exposes and of its episodes' and facts' own lines.
   ``REFERENCES`` (the count budgets 25 / 2 / 4 and 40 / 2 / 4) are measured beside the
   grid.
2. **Final context** (the offline LLM, ``full`` mode, LoCoMo): stage 1's picks and the
   references through ``Memory.ask``; visible when the complete evidence is in the answer
   context, cost the input tokens of every call.

The selection rule weighs cost against visibility (:func:`qemem.eval.selection.value`: mean
over the two datasets of visibility less ``--price`` per 1,000 tokens). Each fold holds one
conversation of either dataset out, picks on the others (pooled per dataset) and scores the
pick on the held-out one; the final pick uses every conversation.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qemem.answer import AskConfig
from qemem.eval.coverage import (
    ConversationUnits,
    alias_keys,
    budget_positions,
    load_questions,
    order_groups,
)
from qemem.eval.manifest import run_info
from qemem.eval.records import evidence_visible
from qemem.eval.selection import PRICE, Fold, Tally, best_value, leave_one_out_value, pooled
from qemem.ingest.locomo import LocomoQuestion
from qemem.llm import LLMClient
from qemem.llm.types import estimate_tokens
from qemem.memory import Memory
from qemem.memory_file import load as load_memory_file
from qemem.models import Pool, search_text, user_turns
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.plan import rule_plan
from qemem.retrieve.pool import fused_spaces, pool_from_fusion
from qemem.testing import OfflineLLM


@dataclass(frozen=True, order=True)
class Setting:
    """Token budgets of turn passages, episodes and facts and the context window; a count
    setting (``counts``: turn hits, episodes, facts) instead of token budgets."""

    turns: int = 0
    episodes: int = 0
    facts: int = 0
    window: int = 2
    counts: tuple[int, int, int] | None = None
    cap: int | None = None

    def label(self) -> str:
        capped = "" if self.cap is None else f"/c{self.cap}"
        if self.counts is not None:
            return "/".join(map(str, self.counts)) + capped
        return f"t{self.turns}/e{self.episodes}/f{self.facts}/w{self.window}{capped}"

    def config(self) -> RetrievalConfig:
        if self.counts is not None:
            turns, episodes, facts = self.counts
            return RetrievalConfig(
                budget_turns=turns,
                budget_episodes=episodes,
                budget_facts=facts,
                max_tokens=self.cap,
            )
        return RetrievalConfig(
            budget_turns=None,
            budget_episodes=None,
            budget_facts=None,
            budget_tokens=self.turns,
            budget_tokens_episodes=self.episodes,
            budget_tokens_facts=self.facts,
            context_window=self.window,
            max_tokens=self.cap,
        )


GRID: dict[str, tuple[int, ...]] = {
    "turns": (1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000),
    "episodes": (0, 150, 300),
    "facts": (0, 100, 200),
    "window": (2,),
}
COUNTS: dict[str, tuple[int, ...]] = {
    "turns": (15, 20, 25, 30, 35, 40),
    "episodes": (0, 2, 4),
    "facts": (0, 4, 8),
}
"""Count budgets (turn hits, episodes, facts) measured beside the token grid."""
REFERENCES = (Setting(counts=(25, 2, 4)), Setting(counts=(40, 2, 4)))


def settings() -> list[Setting]:
    grid = [Setting(*values) for values in itertools.product(*GRID.values())]
    counts = [Setting(counts=(t, e, f)) for t, e, f in itertools.product(*COUNTS.values())]
    return list(dict.fromkeys([*grid, *counts, *REFERENCES]))


def parse(label: str) -> Setting:
    """The setting of a label (``t2000/e300/f200/w2`` or ``25/2/4``, either with ``/c6000``
    for a cap on the whole pool)."""
    parts = label.split("/")
    cap = int(parts.pop()[1:]) if parts[-1].startswith("c") else None
    if parts[0].startswith("t"):
        turns, episodes, facts, window = (int(p[1:]) for p in parts)
        return Setting(turns, episodes, facts, window, cap=cap)
    counts = tuple(int(p) for p in parts)
    return Setting(counts=(counts[0], counts[1], counts[2]), cap=cap)


def pool_stage(
    memory: Memory, conversation: str, questions: Sequence[LocomoQuestion]
) -> dict[Setting, Tally]:
    """Stage 1 for one conversation: each setting's pool visibility and rendered tokens."""
    scope = memory.scope(conversation)
    turns = memory.turns(conversation)
    passages = memory.passages(conversation)
    episodes = {e.id: e for e in memory.episodes(conversation)}
    facts = {f.id: f for f in memory.facts(conversation)}
    known = ConversationUnits.of(turns, passages)
    base = RetrievalConfig(budget_turns=None, budget_episodes=None, budget_facts=None)
    fused = []
    for q in questions:
        plan = rule_plan(q.question)
        spaces = fused_spaces(
            memory.store, scope, memory.embedder, plan.query_set, base, user_turns(turns)
        )
        fused.append((known.evidence(q.evidence, q.answer), plan, spaces))
    seen: dict[tuple[Any, ...], Tally] = {}
    tallies: dict[Setting, Tally] = {}
    for setting in settings():
        config = setting.config()
        key = (
            (setting.turns, setting.window, setting.counts, setting.cap)
            if not (episodes or facts)
            else setting
        )
        if key in seen:
            tallies[setting] = seen[key]
            continue
        hits, cost = 0, 0
        for evidence, plan, spaces in fused:
            pool = pool_from_fusion(
                conversation,
                plan.query_set,
                spaces,
                turns,
                episodes,
                facts,
                aggregate=plan.aggregate,
                config=config,
                passages=passages,
                temporal=plan.temporal,
                units=known.units,
            )
            found = budget_positions(order_groups(pool), evidence, known.aliases)[0]
            hits += found is not None
            cost += pool_cost(pool, known)
        tallies[setting] = seen[key] = Tally(hits, len(fused), float(cost))
    return tallies


def pool_cost(pool: Pool, known: ConversationUnits) -> int:
    """What the budgets count of a pool: its units' tokens and its episodes' and facts'
    own lines."""
    lines = [*(i.record for i in pool.episodes), *(i.record for i in pool.facts)]
    own = sum(estimate_tokens(f"[{r.id}] {search_text(r)}") for r in lines)
    return own + sum(known.units.cost[u] for e in pool.order for u in e.units)


def final_stage(
    memory: Memory, conversation: str, questions: Sequence[LocomoQuestion], setting: Setting
) -> Tally:
    """Stage 2 for one conversation and setting: final-context visibility, input tokens."""
    aliases = alias_keys(memory.turns(conversation))
    config = AskConfig(retrieval=setting.config())
    hits, cost = 0, 0
    for q in questions:
        answer = memory.ask(conversation, q.question, mode="full", config=config)
        hits += bool(evidence_visible(answer.evidence.shown.turns, q.evidence, aliases))
        cost += sum(int(call["input_tokens"]) for call in answer.trace.calls)
    return Tally(hits, len(questions), float(cost))


def _fold_line(fold: Fold[Setting]) -> str:
    return (
        f"  held out {fold.held_out}: picked {fold.picked.label()} -> visibility "
        f"{fold.score.visibility:.3f} (its best {fold.best_visibility:.3f}), "
        f"{fold.score.mean_cost:.0f} tokens"
    )


def report(
    name: str, by_conversation: Mapping[tuple[str, str], Mapping[Setting, Tally]], price: float
) -> dict[str, Any]:
    """Print one stage's folds, per-dataset figures of the picks and references; as data."""
    datasets = sorted({d for d, _ in by_conversation})
    per_dataset = {
        d: pooled(t for (ds, _), t in by_conversation.items() if ds == d) for d in datasets
    }
    print(f"\n== {name}: folds (pick the best value on the others, price {price} per 1k)")
    folds = leave_one_out_value(by_conversation, price) if len(by_conversation) > 1 else []
    for fold in folds:
        print(_fold_line(fold))
    held: dict[str, Tally] = {}
    for fold in folds:
        dataset = fold.held_out.split("/", 1)[0]
        held[dataset] = held.get(dataset, Tally(0, 0, 0.0)) + fold.score
    for dataset, tally in held.items():
        print(
            f"  procedure held out on {dataset}: visibility {tally.visibility:.3f}, "
            f"{tally.mean_cost:.0f} tokens ({tally.questions} questions)"
        )
    pick = best_value(per_dataset, price)
    shown = dict.fromkeys([pick, *REFERENCES, *(f.picked for f in folds)])
    for setting in shown:
        if all(setting in t for t in per_dataset.values()):
            figures = "; ".join(
                f"{d} {t[setting].visibility:.3f} at {t[setting].mean_cost:.0f}"
                for d, t in per_dataset.items()
            )
            mark = " (pick on all)" if setting == pick else ""
            print(f"  {setting.label():>22}: {figures}{mark}")
    return {
        "folds": [
            {
                "held_out": f.held_out,
                "picked": f.picked.label(),
                "visibility": round(f.score.visibility, 4),
                "tokens": round(f.score.mean_cost, 1),
            }
            for f in folds
        ],
        "held_out": {d: [round(t.visibility, 4), round(t.mean_cost, 1)] for d, t in held.items()},
        "curve": {
            d: {s.label(): [round(x.visibility, 4), round(x.mean_cost, 1)] for s, x in t.items()}
            for d, t in per_dataset.items()
        },
        "pick": pick.label(),
    }


def _open(
    store: Path, data: Path, categories: Sequence[int], memory_dir: Path | None
) -> tuple[Memory, dict[str, list[LocomoQuestion]]]:
    memory = Memory.open(store, llm=LLMClient(OfflineLLM()))
    files = (
        {load_memory_file(p).conversation: p for p in sorted(memory_dir.glob("*.json"))}
        if memory_dir
        else {}
    )
    questions = [q for q in load_questions(memory, data, categories, sorted(files)) if q.evidence]
    for path in files.values():
        memory.import_memory(load_memory_file(path))
    by_conv: dict[str, list[LocomoQuestion]] = {}
    for q in questions:
        by_conv.setdefault(q.conversation, []).append(q)
    return memory, by_conv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo JSON")
    parser.add_argument("--memory-dir", type=Path, required=True, help="qemem-memory files")
    parser.add_argument("--store", type=Path, required=True, help="LoCoMo store file (kept)")
    parser.add_argument("--beam", type=Path, help="LoCoMo-shaped BEAM JSON")
    parser.add_argument("--beam-store", type=Path, help="BEAM store file (kept)")
    parser.add_argument("--beam-conversations", nargs="*", default=[], help="BEAM chats")
    parser.add_argument("--price", type=float, default=PRICE, help="points per 1k tokens")
    parser.add_argument("--stage", choices=("pool", "final", "both"), default="both")
    parser.add_argument("--final", nargs="*", default=[], help="stage 2 settings (labels)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    started = time.perf_counter()
    locomo, locomo_questions = _open(args.store, args.locomo, (1, 2, 3, 4), args.memory_dir)
    datasets = {"locomo": (locomo, locomo_questions)}
    if args.beam is not None:
        beam, beam_questions = _open(args.beam_store, args.beam, (1, 2, 3, 4), None)
        if args.beam_conversations:
            beam_questions = {c: beam_questions[c] for c in args.beam_conversations}
        datasets["beam"] = (beam, beam_questions)
    info = run_info(
        args.locomo,
        beam=str(args.beam) if args.beam else None,
        questions={d: {c: len(q) for c, q in qs.items()} for d, (_, qs) in datasets.items()},
        embedder=locomo.embedder.id,
        llm="fake (offline)",
        plan="rules (question only)",
        grid={k: list(v) for k, v in GRID.items()},
        counts={k: list(v) for k, v in COUNTS.items()},
        references=[s.label() for s in REFERENCES],
        price=args.price,
    )
    print(json.dumps(info, indent=1))
    result: dict[str, Any] = dict(info)
    finals = {parse(s) for s in args.final} | set(REFERENCES)
    if args.stage != "final":
        pools = {
            (name, conv): pool_stage(memory, conv, qs)
            for name, (memory, questions) in datasets.items()
            for conv, qs in questions.items()
        }
        result["pool"] = report("pool (LLM-free)", pools, args.price)
        print(f"stage 1 took {time.perf_counter() - started:.0f} s", flush=True)
        if not args.final:
            finals |= {parse(f["picked"]) for f in result["pool"]["folds"]}
            finals.add(parse(result["pool"]["pick"]))
    if args.stage != "pool":
        runs = {
            ("locomo", conv): {
                s: final_stage(locomo, conv, qs, s) for s in sorted(finals, key=Setting.label)
            }
            for conv, qs in locomo_questions.items()
        }
        result["final"] = report("final context (offline LLM, full; LoCoMo)", runs, args.price)
    for memory, _ in datasets.values():
        memory.close()
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
