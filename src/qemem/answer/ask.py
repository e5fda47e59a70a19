"""``ask``: the query-time method end to end, at one of four operating points.

* ``retrieval``: no LLM call at all: rule plan, pool, and the resolved times of the pool turns;
  the answer text is empty.
* ``direct``: LLM plan, pool, one answer call over the pool (no cards).
* ``no-refine``: LLM plan, pool, one constructor round, verification, assembly, answer.
* ``full``: as ``no-refine`` with sufficiency-guided refinement (``AskConfig.refine_rounds``).
* ``matched``: the matched-context baseline: LLM plan and pool only to count the turns the
  query-guided pool exposes, then plain question-only hybrid search for as many turns
  (:func:`~qemem.retrieve.pool.matched_pool`) and one answer call over them, with the
  ``direct`` answer prompt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from qemem.answer.assemble import assemble, assemble_pool
from qemem.answer.respond import answer_question
from qemem.answer.sources import Sources, collect_sources
from qemem.embed.base import Embedder
from qemem.errors import InputError, LLMError
from qemem.evidence.cards import ViewCard
from qemem.evidence.context import SourceIndex
from qemem.evidence.quotes import DEFAULT_THRESHOLD
from qemem.evidence.refine import RoundTrace, build_evidence, pool_ids
from qemem.evidence.times import TimeResolution, resolve_times
from qemem.llm import Ledger, LLMClient
from qemem.models import Plan, Pool, Turn, document
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.retrieve.pool import RetrievalConfig, build_pool, matched_pool
from qemem.store.base import MemoryStore, Scope

Mode = Literal["retrieval", "direct", "no-refine", "full", "matched"]
MODES: tuple[Mode, ...] = get_args(Mode)

NO_LLM_MESSAGE = (
    "mode {mode!r} needs an LLM and none is configured: set QEMEM_LLM (for example "
    "QEMEM_LLM=anthropic:claude-haiku-4-5, QEMEM_LLM=openai:gpt-4.1-mini, or QEMEM_LLM=fake for "
    "an offline demo; see docs/llm.md), or use mode='retrieval', which needs none"
)


@dataclass(frozen=True)
class AskConfig:
    """Knobs of ``ask``: retrieval settings, refinement rounds after the first construction,
    token limits, the abstention retry, and the answer context widths."""

    retrieval: RetrievalConfig | None = None
    refine_rounds: int = 2
    construct_max_tokens: int = 4096
    answer_max_tokens: int = 1024
    retry_abstention: bool = True
    neighbours: int = 2
    episode_turns: int = 12
    quote_threshold: float = DEFAULT_THRESHOLD


@dataclass
class Trace:
    """How an answer came about (see ``Answer``)."""

    plan: Plan
    rounds: list[RoundTrace]
    termination: str | None
    visible_turn_ids: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)
    degradations: list[str] = field(default_factory=list)
    abstention_retry: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "plan": {
                "question": plan.question,
                "need": plan.need,
                "answer_type": plan.answer_type,
                "aggregate": plan.aggregate,
                "temporal": plan.temporal,
                "queries": list(plan.queries),
                "source": plan.source,
                "note": plan.note,
                "query_set": plan.query_set,
            },
            "rounds": [r.to_dict() for r in self.rounds],
            "termination": self.termination,
            "visible_turn_ids": list(self.visible_turn_ids),
            "calls": list(self.calls),
            "totals": self.totals,
            "degradations": list(self.degradations),
            "abstention_retry": self.abstention_retry,
            "seconds": self.seconds,
        }


@dataclass
class Answer:
    """An answer with its evidence.

    ``text`` is the short final answer (empty in retrieval mode), ``reasoning`` the answerer's
    full text, ``cards`` the verified/marked evidence cards, ``citations`` the turn ids the cards
    cite (episode and fact sources expanded to their turns), ``pool`` the final candidate pool
    (all rounds merged), ``pool_times`` the resolved relative times of the pool's turns
    (against their session dates), ``trace`` how it came about, and ``sources`` the records
    the pool, cards and answer context show (what the evidence viewer displays).
    """

    question: str
    text: str
    reasoning: str
    mode: Mode
    cards: list[ViewCard]
    citations: list[str]
    pool: Pool
    trace: Trace
    pool_times: dict[str, list[TimeResolution]] = field(default_factory=dict)
    sources: Sources = field(default_factory=Sources)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "question": self.question,
            "text": self.text,
            "reasoning": self.reasoning,
            "mode": self.mode,
            "cards": [c.to_dict() for c in self.cards],
            "citations": list(self.citations),
            "pool": pool_to_dict(self.pool),
            "pool_times": {k: [t.to_dict() for t in v] for k, v in self.pool_times.items()},
            "trace": self.trace.to_dict(),
            "sources": self.sources.to_dict(),
        }

    def to_html(self) -> str:
        """A self-contained HTML page of the answer and its evidence (see :mod:`qemem.view`)."""
        from qemem.view import answer_html

        return answer_html(self)


def pool_to_dict(pool: Pool) -> dict[str, Any]:
    """JSON-ready form of a pool: per space, each candidate's id, score, text and reasons."""

    def items(space_items: list[Any]) -> list[dict[str, Any]]:
        return [
            {
                "id": item.id,
                "score": item.score,
                "text": document(item.record),
                "reasons": [
                    {k: v for k, v in vars(r).items() if v is not None} for r in item.reasons
                ],
            }
            for item in space_items
        ]

    return {
        "conversation": pool.conversation,
        "queries": list(pool.queries),
        "episodes": items(pool.episodes),
        "facts": items(pool.facts),
        "turns": items(pool.turns),
    }


def _pool_times(index: SourceIndex, pool: Pool) -> dict[str, list[TimeResolution]]:
    out: dict[str, list[TimeResolution]] = {}
    for item in pool.turns:
        if isinstance(item.record, Turn):
            found = resolve_times(item.record.text, index.session_date(item.record))
            if found:
                out[item.id] = found
    return out


def ask(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    llm: LLMClient | None,
    question: str,
    *,
    mode: Mode = "full",
    config: AskConfig | None = None,
) -> Answer:
    """Answer ``question`` over the memory of ``scope`` at operating point ``mode``.

    Raises InputError for an empty question or an unknown mode, LLMError when ``mode`` needs
    an LLM and ``llm`` is None (or a call fails outright), NotFoundError for an unknown scope.
    A constructor whose output does not validate degrades (no cards, flagged in the trace).
    """
    started = time.perf_counter()
    config = config or AskConfig()
    question = question.strip()
    if not question:
        raise InputError("the question is empty: ask something about the conversation")
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    if llm is None and mode != "retrieval":
        raise LLMError(NO_LLM_MESSAGE.format(mode=mode))
    index = SourceIndex(store, scope)
    ledger = Ledger()
    degradations: list[str] = []
    if llm is None or mode == "retrieval":
        plan = rule_plan(question, "retrieval mode makes no LLM call")
    else:
        conversation = index.conversation
        plan = plan_question(llm, question, conversation.speakers, conversation.span, ledger=ledger)
        if plan.source == "rules":
            degradations.append(f"plan fell back to rules: {plan.note or 'no reason given'}")
    pool = build_pool(store, scope, embedder, plan, config=config.retrieval)
    answer = Answer(question, "", "", mode, [], [], pool, Trace(plan, [], None))
    answer.trace.rounds = [RoundTrace(0, None, pool_ids(pool))]
    if llm is None or mode == "retrieval":
        answer.trace.termination = "no_llm"
        answer.trace.visible_turn_ids = [item.id for item in pool.turns]
        return _finish(answer, index, ledger, degradations, started, config)
    if mode == "matched":
        pool = matched_pool(store, scope, embedder, question, len(pool.turns))
        answer.pool, answer.trace.rounds = pool, [RoundTrace(0, None, pool_ids(pool))]
    if mode in ("direct", "matched"):
        assembly = assemble_pool(index, pool)
    else:
        evidence = build_evidence(
            llm,
            index,
            plan,
            pool,
            lambda queries, exclude: build_pool(
                store,
                scope,
                embedder,
                plan,
                config=config.retrieval,
                exclude=exclude,
                queries=queries,
            ),
            refine_rounds=config.refine_rounds if mode == "full" else 0,
            max_tokens=config.construct_max_tokens,
            threshold=config.quote_threshold,
            ledger=ledger,
        )
        degradations.extend(evidence.degradations)
        answer.cards, answer.pool = evidence.cards, evidence.pool
        answer.trace.rounds, answer.trace.termination = evidence.rounds, evidence.termination
        assembly = assemble(
            index,
            evidence.cards,
            evidence.pool,
            neighbours=config.neighbours,
            episode_turns=config.episode_turns,
        )
    reply = answer_question(
        llm,
        question,
        assembly.text,
        max_tokens=config.answer_max_tokens,
        retry_abstention=config.retry_abstention,
        ledger=ledger,
        inputs=assembly.inputs,
    )
    answer.text, answer.reasoning = reply.text, reply.reasoning
    answer.citations = assembly.citations
    answer.trace.visible_turn_ids = assembly.visible_turn_ids
    answer.trace.abstention_retry = reply.abstention_retry
    degradations.extend(reply.degradations)
    return _finish(answer, index, ledger, degradations, started, config)


def _finish(
    answer: Answer,
    index: SourceIndex,
    ledger: Ledger,
    degradations: list[str],
    started: float,
    config: AskConfig | None = None,
) -> Answer:
    """Fill in the pool times, sources, degradations, calls, totals and duration."""
    config = config or AskConfig()
    answer.pool_times = _pool_times(index, answer.pool)
    answer.sources = collect_sources(
        index,
        answer.pool,
        answer.cards,
        answer.trace.visible_turn_ids,
        neighbours=config.neighbours,
        episode_turns=config.episode_turns,
    )
    answer.trace.degradations = degradations
    answer.trace.calls = [
        {
            "stage": r.stage,
            "model": r.model,
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "latency_s": r.latency_s,
            "cost_usd": r.cost_usd,
            "cached": r.cached,
        }
        for r in ledger.responses
    ]
    answer.trace.totals = ledger.to_dict()
    answer.trace.seconds = time.perf_counter() - started
    return answer
