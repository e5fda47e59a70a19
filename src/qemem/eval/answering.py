"""Answering a benchmark question in an evaluation mode, and the record fields every benchmark
shares (BEAM's and LongMemEval's harnesses).

A mode is one of qemem's own (any mode ``ask`` has, through ``Memory.ask``) or a baseline on
the same store (:mod:`qemem.eval.beam_baselines`: ``rag``, ``full-context``). Whatever the mode,
answering yields the answer text, the turns its prompt showed, and the turns its first pool
exposed in exposure order, from which the records measure, without an LLM, whether and how
early the evidence was there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from qemem.answer import AskConfig
from qemem.answer.ask import MODES
from qemem.answer.wire import answer_to_json
from qemem.errors import InputError
from qemem.eval.beam_baselines import (
    BASELINES,
    context_tokens,
    full_context_answer,
    rag_answer,
)
from qemem.eval.coverage import budget_positions, exposure_groups
from qemem.eval.records import evidence_visible, stage_costs
from qemem.eval.runs import Context
from qemem.llm import Ledger, LLMClient, stages
from qemem.memory import Memory
from qemem.passages import turn_tokens
from qemem.retrieve.budgets import RetrievalConfig

#: the token budgets at which evidence coverage is reported (turn tokens, characters / 4)
COVERAGE_BUDGETS: tuple[int, ...] = (2_000, 4_000, 8_000, 16_000, 32_000)
#: stages that measure the method rather than belong to it
ANALYSIS_STAGES = (stages.JUDGE,)
Record = Mapping[str, Any]

#: every mode an evaluation run takes: qemem's own and the baselines
EVAL_MODES: tuple[str, ...] = (*MODES, *BASELINES)


class ModeSettings(Protocol):
    """What answering reads of a run's config."""

    @property
    def mode(self) -> str: ...
    @property
    def retrieval(self) -> RetrievalConfig | None: ...
    @property
    def background_tokens(self) -> int | None: ...
    @property
    def rag_turns(self) -> int: ...
    @property
    def window_tokens(self) -> int: ...


@dataclass
class Answered:
    """What answering a question produced: the answer text, the turns its prompt showed, the
    turns its first pool exposed in exposure order (groups taken whole), the calls it made
    and, for qemem's own modes, the answer's compact JSON."""

    text: str
    shown: list[str]
    exposed: list[list[str]]
    calls: list[dict[str, Any]] = field(default_factory=list)
    answer_json: dict[str, Any] | None = None


def answer_in_mode(
    memory: Memory,
    llm: LLMClient | None,
    settings: ModeSettings,
    conversation: str,
    question: str,
) -> Answered:
    """``question`` answered over ``conversation`` in the run's mode."""
    mode = settings.mode
    if mode in MODES:
        ask = AskConfig(retrieval=settings.retrieval, background_tokens=settings.background_tokens)
        answer = memory.ask(conversation, question, mode=mode, config=ask)
        evidence = answer.evidence
        return Answered(
            answer.text,
            list(evidence.shown.turns),
            exposure_groups(evidence.rounds[0].pool),
            list(answer.trace.calls),
            answer_to_json(answer, compact=True),
        )
    if llm is None or mode not in BASELINES:
        raise InputError(f"mode {mode!r} needs an LLM: pass --llm")
    ledger = Ledger()
    if mode == "rag":
        found = rag_answer(memory, llm, conversation, question, k=settings.rag_turns, ledger=ledger)
    else:
        found = full_context_answer(
            memory,
            llm,
            conversation,
            question,
            window_tokens=settings.window_tokens,
            ledger=ledger,
        )
    calls = [r.to_dict() for r in ledger.responses]
    return Answered(found.text, found.shown, [[t] for t in found.ranked], calls)


def check_window(memory: Memory, conversations: Sequence[str], window: int) -> None:
    """Refuse a full-context run over a conversation its prompt cannot hold."""
    over = {c: n for c in conversations if (n := context_tokens(memory, c)) > window}
    if over:
        listed = ", ".join(f"{c} ({n:,} tokens)" for c, n in over.items())
        raise InputError(
            f"full-context needs the whole conversation in the prompt, and {listed} exceed the "
            f"window of {window:,} tokens: leave them out (--conversations) or raise "
            "--window-tokens"
        )


def turn_costs(context: Context) -> dict[str, dict[str, int]]:
    """Per conversation, the tokens of each turn as budgets count them."""
    return {
        cid: {tid: turn_tokens(t) for tid, t in turns.items()}
        for cid, (turns, _) in context.items()
    }


def shared_record(
    answered: Answered,
    evidence: Sequence[str],
    judge_calls: Sequence[Mapping[str, Any]],
    aliases: Mapping[str, object],
    tokens: Mapping[str, int],
    latency: Mapping[str, float],
) -> dict[str, Any]:
    """The record fields every benchmark shares: cost per stage, latency, the turns shown and
    exposed, and the evidence's visibility (None for no evidence): in the first pool, in the
    answer prompt, and the token budget at which the exposure order held all of it."""
    initial = [t for group in answered.exposed for t in group]
    position = budget_positions(answered.exposed, evidence, aliases, tokens)[0]
    return {
        "prediction": answered.text,
        "llm": stage_costs([*answered.calls, *judge_calls]),
        "latency_s": {k: round(v, 3) for k, v in latency.items()},
        "visible_turn_ids": answered.shown,
        "initial_pool_turn_ids": initial,
        "visibility": {
            "initial": evidence_visible(initial, evidence, aliases),
            "final": evidence_visible(answered.shown, evidence, aliases),
            "initial_tokens": position if evidence else None,
        },
        "answer": answered.answer_json,
    }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def coverage_block(records: Sequence[Record]) -> dict[str, Any]:
    """LLM-free evidence coverage of ``records``: over those with evidence, the share whose
    every evidence turn the first pool's exposure order holds within each token budget, in
    the whole first pool, and in the answer prompt; those without evidence counted apart."""
    scored = [r for r in records if r["evidence"]]
    block: dict[str, Any] = {
        "probes": len(scored),
        "without_evidence": len(records) - len(scored),
    }
    if not scored:
        return block
    positions = [r["visibility"]["initial_tokens"] for r in scored]
    block["tokens"] = {
        str(b): _round(sum(p is not None and p <= b for p in positions) / len(scored))
        for b in COVERAGE_BUDGETS
    }
    for stage in ("initial", "final"):
        block[f"visible_{stage}"] = _round(
            sum(bool(r["visibility"][stage]) for r in scored) / len(scored)
        )
    return block


def cost_per_question(records: Sequence[Record]) -> dict[str, Any]:
    """Calls, tokens and cost per question (``*_per_probe``): the method's stages apart from
    the judge's."""
    n = len(records)
    if not n:
        return {}

    def total(key: str, judge: bool) -> float | None:
        values = [
            stage.get(key)
            for r in records
            for name, stage in r["llm"].items()
            if (name in ANALYSIS_STAGES) == judge
        ]
        if any(v is None for v in values):
            return None
        return sum(float(v) for v in values)

    out: dict[str, Any] = {}
    for prefix, judge in (("method", False), ("judge", True)):
        for key in ("calls", "input_tokens", "output_tokens", "cost_usd"):
            value = total(key, judge)
            out[f"{prefix}_{key}_per_probe"] = _round(value / n, 6) if value is not None else None
    return out
