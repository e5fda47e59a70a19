"""``ask``: the query-time method end to end, at one of four operating points.

* ``retrieval``: no LLM call at all: rule plan, pool, and the resolved times of the pool turns;
  the answer text is empty.
* ``direct``: LLM plan, pool, one answer call over the pool (no cards).
* ``no-refine``: LLM plan, pool, one constructor round, verification, assembly, answer.
* ``full``: as ``no-refine`` with sufficiency-guided refinement (``AskConfig.refine_rounds``).
* ``respond``: as ``full``, then the assistant's reply to the request instead of a short
  answer: at the length the request needs (code, lists, summaries), following the user's
  standing instructions and preferences, citing the ids it rests on (stage ``respond``).
* ``matched``: the matched-context baseline: LLM plan and pool only to count the turns the
  query-guided pool exposes, then plain question-only hybrid search for as many turns
  (:func:`~qemem.retrieve.pool.matched_pool`) and one answer call over them, with the
  ``direct`` answer prompt.
* ``nemori-baseline``: NEMORI's published query-time recipe over the same memory: dense top-10
  episodes and top-20 facts for the question, no plan, no turn search, one answer call with a
  prompt of the structure of that system's LoCoMo answer prompt (:mod:`qemem.answer.nemori`).

Every answering call but ``nemori-baseline``'s carries the user's current standing instructions
and preferences (:mod:`qemem.evidence.standing`) in a short section before the question.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args

from qemem.answer import nemori
from qemem.answer.assemble import Assembly, assemble, assemble_pool
from qemem.answer.corpus import Corpus, OneConversation
from qemem.answer.reply import Asking, answer_candidates, answer_question
from qemem.answer.sources import Sources, collect_sources
from qemem.embed.base import Embedder
from qemem.errors import InputError, LLMError
from qemem.evidence.cards import ViewCard
from qemem.evidence.context import SourceIndex
from qemem.evidence.layout import LAYOUTS, AnswerStage, Layout, SharedPrefix, shared_prefix
from qemem.evidence.quotes import DEFAULT_THRESHOLD
from qemem.evidence.refine import (
    Evidence,
    Retriever,
    RoundTrace,
    Shown,
    build_evidence,
    call_records,
)
from qemem.evidence.standing import STANDING_TOKENS, StandingSection, standing_section
from qemem.evidence.times import TimeResolution, resolve_times
from qemem.llm import Ledger, LLMClient
from qemem.llm.prompt_cache import min_cacheable_tokens
from qemem.llm.stages import ANSWER, ANSWER_ROUND0, RESPOND
from qemem.models import OMIT_NONE, Plan, Pool, Ref, Turn
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.dense import dense_pool
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.store.base import MemoryStore, Scope

Mode = Literal["retrieval", "direct", "no-refine", "full", "respond", "matched", "nemori-baseline"]
MODES: tuple[Mode, ...] = get_args(Mode)

NO_LLM_MESSAGE = (
    "mode {mode!r} needs an LLM and none is configured: set QEMEM_LLM (for example "
    "QEMEM_LLM=anthropic:claude-haiku-4-5, QEMEM_LLM=openai:gpt-4.1-mini, or QEMEM_LLM=fake for "
    "an offline demo; see docs/llm.md), or use mode='retrieval', which needs none"
)


@dataclass(frozen=True)
class AskConfig:
    """Knobs of ``ask``: retrieval settings, refinement rounds after the first construction,
    token limits, the abstention retry, the answer context widths, and the prompt layout
    (``cached``: the stages share a prompt-cache prefix; ``paper``: the method's published
    order; see ``qemem.evidence.layout``).

    ``plan`` False skips the planner (the planning ablation): the question alone is the query
    set, with the rule-derived aggregate/temporal flags (:func:`~qemem.retrieve.plan.rule_plan`),
    everything else unchanged. ``answer_round0`` True makes, in full mode and only when round 0
    asks for refinement, one extra answer call over the round-0 cards (stage
    ``answer_round0``), kept as ``Answer.round0``: what the answer would have been without
    refinement. ``neighbours`` units each side of a cited passage are shown, each side
    within ``neighbour_tokens`` (None: no limit), as the pool's context windows
    (``RetrievalConfig.context_tokens``). ``standing_tokens`` caps the standing instructions
    and preferences section of the answer prompt; ``respond_max_tokens`` the reply of mode
    ``respond``. ``background_tokens`` bounds the answer prompt's background, the pool records
    no card cites, shown best-ranked first (:mod:`qemem.answer.background`; None: the whole
    rest of the pool, the method's published prompt); in the ``cached`` layout the records of
    the shared prefix stay shown there and only the follow-up rounds' are bounded. 1,000: on
    80 held-out LoCoMo questions answered by a capable model, the cited context alone held the
    complete evidence of 0.938, a 1,000-token background raised it to 0.950 and the whole
    background (about 5,700 tokens) to 0.975."""

    retrieval: RetrievalConfig | None = None
    refine_rounds: int = 2
    construct_max_tokens: int = 4096
    answer_max_tokens: int = 1024
    respond_max_tokens: int = 4096
    standing_tokens: int = STANDING_TOKENS
    retry_abstention: bool = True
    neighbours: int = 2
    neighbour_tokens: int | None = 100
    background_tokens: int | None = 1000
    episode_turns: int = 12
    quote_threshold: float = DEFAULT_THRESHOLD
    plan: bool = True
    answer_round0: bool = False
    prompt_layout: Layout = "paper"

    def __post_init__(self) -> None:
        if self.background_tokens is not None and self.background_tokens < 0:
            raise InputError("ask config: background_tokens must be >= 0 or None (no limit)")


@dataclass
class Round0Answer:
    """The answer the round-0 cards alone would have given (full mode, refinement triggered,
    ``AskConfig.answer_round0``): its short text, the answerer's full text, and what its
    prompt showed. It is made only to measure refinement, never returned as the answer."""

    text: str
    reasoning: str
    shown: Shown = field(default_factory=Shown)


@dataclass
class Trace:
    """What answering cost: the LLM calls, their totals, the duration, and whether the answer
    call was retried after an abstention (the evidence record is ``Answer.evidence``)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)
    abstention_retry: bool = False
    seconds: float = 0.0

    def record(self, ledger: Ledger, started: float) -> None:
        """Take the ledger's calls and totals, and the seconds since ``started``
        (``time.perf_counter``)."""
        self.calls = call_records(ledger.responses)
        self.totals = ledger.to_dict()
        self.seconds = time.perf_counter() - started


@dataclass
class Across:
    """What an answer across conversations adds (``qemem.answer.across``): the conversations
    it ranked together, the explicit ref of every label its strings hold (card ``sources``,
    ``citations``, ``evidence.shown``, ``pool_times`` keys: ``conv-26/D1:3`` is
    ``Ref("turn", "D1:3", "conv-26")``), and each conversation's source records by their own
    ids (the answer's ``sources`` stays empty)."""

    conversations: list[str]
    labels: dict[str, Ref] = field(default_factory=dict)
    sources: dict[str, Sources] = field(default_factory=dict)


@dataclass
class Answer:
    """An answer with its evidence.

    ``text`` is the short final answer (empty in retrieval mode), ``reasoning`` the answerer's
    full text, ``citations`` the turn ids the cards cite (episode and fact sources expanded to
    their turns), ``evidence`` the record of how the evidence came about (plan, rounds, cards,
    merged pool, termination, degradations, and what the answer prompt showed), ``pool_times``
    the resolved relative times of the pool's turns (against their session dates), ``trace``
    the LLM calls and time, ``sources`` the records the pool, cards and answer context
    show (what the evidence viewer displays), and ``round0`` the answer from the round-0 cards
    alone when refinement ran and ``AskConfig.answer_round0`` asked for it. ``across`` is set
    only for an answer across conversations (``ask_many``).
    """

    question: str
    text: str
    reasoning: str
    mode: Mode
    citations: list[str]
    evidence: Evidence
    trace: Trace = field(default_factory=Trace)
    pool_times: dict[str, list[TimeResolution]] = field(default_factory=dict)
    sources: Sources = field(default_factory=Sources)
    round0: Round0Answer | None = None
    across: Annotated[Across | None, OMIT_NONE] = None

    @property
    def cards(self) -> list[ViewCard]:
        """The verified (or marked unverified) cards of all rounds."""
        return self.evidence.cards

    @property
    def pool(self) -> Pool:
        """The final candidate pool (all rounds merged)."""
        return self.evidence.pool


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
    question = check_ask(question, mode, llm)
    corpus = OneConversation(store, scope, embedder)
    if mode == "nemori-baseline" and llm is not None:
        config = config or AskConfig()
        return _nemori(store, scope, embedder, llm, question, corpus.index, config, started)
    return ask_over(corpus, llm, question, mode, config, started)


def ask_over(
    corpus: Corpus,
    llm: LLMClient | None,
    question: str,
    mode: Mode,
    config: AskConfig | None,
    started: float,
) -> Answer:
    """``ask`` over a corpus (one conversation or several), the question already checked
    (``started``: when answering began, ``time.perf_counter``)."""
    config = config or AskConfig()
    index = corpus.index
    ledger = Ledger()
    degradations: list[str] = []
    if config.prompt_layout not in LAYOUTS:
        raise InputError(
            f"unknown prompt layout {config.prompt_layout!r}: use one of {', '.join(LAYOUTS)}"
        )
    plan = _plan(llm, question, mode, index, ledger, degradations, planned=config.plan)
    pool = corpus.pool(plan, config.retrieval)
    if mode == "matched":
        pool = corpus.matched(question, len(pool.turns))
    evidence = Evidence(plan, [RoundTrace(0, None, pool.entries())], [], pool, None)
    answer = Answer(question, "", "", mode, [], evidence)
    if llm is None or mode == "retrieval":
        evidence.termination = "no_llm"
        ids = [item.id for item in pool.turns]
        evidence.shown = Shown(ids, [], ids, [item.ref for item in (*pool.episodes, *pool.facts)])
        return _finish(answer, index, ledger, degradations, started, config)
    task: AnswerStage = "respond" if mode == "respond" else "answer"
    prefix = _prefix(llm, index, pool, config, task)
    section = standing_section(
        index, question, config.standing_tokens, [item.id for item in pool.facts]
    )
    assembly = _assembled(answer, corpus, llm, mode, config, ledger, prefix, section)
    degradations.extend(answer.evidence.degradations)
    asking = _asking(index, section, answer.evidence.cards, task)
    _answer_from(answer, llm, assembly, config, ledger, degradations, prefix, asking)
    return _finish(answer, index, ledger, degradations, started, config)


def _assembled(
    answer: Answer,
    corpus: Corpus,
    llm: LLMClient,
    mode: Mode,
    config: AskConfig,
    ledger: Ledger,
    prefix: SharedPrefix | None,
    section: StandingSection,
) -> Assembly:
    """What the answer prompt shows: the pool alone (``direct``, ``matched``), or the cards of
    the constructor rounds (refined in ``full`` and ``respond``; recorded on ``answer``) with
    their sources and the pool as background; with ``config.answer_round0`` the round-0
    answer too."""
    index, pool = corpus.index, answer.evidence.pool
    above = pool if prefix is not None else None
    if mode in ("direct", "matched"):
        return assemble_pool(index, pool, above=above)
    plan = answer.evidence.plan
    answer.evidence = evidence = build_evidence(
        llm,
        index,
        plan,
        pool,
        _retriever(corpus, plan, config.retrieval),
        refine_rounds=config.refine_rounds if mode in ("full", "respond") else 0,
        max_tokens=config.construct_max_tokens,
        threshold=config.quote_threshold,
        ledger=ledger,
        prefix=prefix,
    )
    if mode == "full" and config.answer_round0 and _triggered(evidence):
        asked = _asking(index, section, evidence.rounds[0].cards, "answer")
        question = answer.question
        answer.round0 = _round0_answer(
            llm, index, question, pool, evidence, config, ledger, prefix, asked
        )
    return assemble(
        index,
        evidence.cards,
        evidence.pool,
        neighbours=config.neighbours,
        neighbour_tokens=config.neighbour_tokens,
        episode_turns=config.episode_turns,
        background_tokens=config.background_tokens,
        above=above,
    )


def _asking(
    index: SourceIndex, section: StandingSection, cards: Sequence[ViewCard], task: AnswerStage
) -> Asking:
    """How the answer call is made: ``task``, the participants, the standing section and
    the cards it may retry an abstention for."""
    fields = index.participants.prompt_fields()
    return Asking(task, fields, section, answer_candidates(cards))


def _nemori(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    llm: LLMClient,
    question: str,
    index: SourceIndex,
    config: AskConfig,
    started: float,
) -> Answer:
    """The ``nemori-baseline`` answer: the dense pool of episodes and facts, its listings
    (InputError, before any call, when the conversation has neither) and one answer call.
    Its top-k are the recipe's: retrieval settings (``config.retrieval``) are refused."""
    if config.retrieval is not None:
        raise InputError(
            "mode 'nemori-baseline' retrieves a fixed top-10 episodes and top-20 facts (the "
            "recipe it reproduces): leave the retrieval settings and budgets out"
        )
    pool = dense_pool(
        store, scope, embedder, question, episodes=nemori.EPISODES, facts=nemori.FACTS
    )
    shown = nemori.prompted(index, pool)
    plan = rule_plan(question, "the nemori-baseline mode makes no plan: the question alone")
    evidence = Evidence(plan, [RoundTrace(0, None, pool.entries())], [], pool, None)
    answer = Answer(question, "", "", "nemori-baseline", [], evidence)
    ledger = Ledger()
    text = nemori.nemori_answer(
        llm, question, shown, max_tokens=config.answer_max_tokens, ledger=ledger
    )
    answer.text = answer.reasoning = text
    evidence.shown = shown.shown
    return _finish(answer, index, ledger, [], started, config)


def check_ask(question: str, mode: Mode, llm: LLMClient | None) -> str:
    """The question stripped; InputError for an empty one or an unknown mode, LLMError when
    the mode needs an LLM and there is none."""
    question = question.strip()
    if not question:
        raise InputError("the question is empty: ask something about the conversation")
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    if llm is None and mode != "retrieval":
        raise LLMError(NO_LLM_MESSAGE.format(mode=mode))
    return question


def _plan(
    llm: LLMClient | None,
    question: str,
    mode: Mode,
    index: SourceIndex,
    ledger: Ledger,
    degradations: list[str],
    *,
    planned: bool = True,
) -> Plan:
    """The LLM plan of the question (a fallback to rules is a degradation), or the rule plan
    in retrieval mode and with planning off (``planned`` False)."""
    if llm is None or mode == "retrieval":
        return rule_plan(question, "retrieval mode makes no LLM call")
    if not planned:
        return rule_plan(question, "planning off (no-plan ablation)")
    conversation = index.conversation
    plan = plan_question(llm, question, index.participants, conversation.span, ledger=ledger)
    if plan.source == "rules":
        degradations.append(f"plan fell back to rules: {plan.note or 'no reason given'}")
    return plan


def _answer_from(
    answer: Answer,
    llm: LLMClient,
    assembly: Assembly,
    config: AskConfig,
    ledger: Ledger,
    degradations: list[str],
    prefix: SharedPrefix | None,
    asking: Asking,
) -> None:
    """The answer call over the assembled evidence (opening with the shared ``prefix`` when
    given) as ``asking`` says; fills in the text, the citations and what the prompt showed."""
    respond = asking.task == "respond"
    reply = answer_question(
        llm,
        answer.question,
        assembly.text,
        max_tokens=config.respond_max_tokens if respond else config.answer_max_tokens,
        retry_abstention=config.retry_abstention,
        ledger=ledger,
        inputs=assembly.inputs,
        stage=RESPOND if respond else ANSWER,
        prefix=prefix,
        asking=asking,
    )
    answer.text, answer.reasoning = reply.text, reply.reasoning
    answer.citations = assembly.citations
    answer.evidence.shown = dataclasses.replace(
        assembly.shown, standing=[Ref("fact", f.id) for f in asking.standing.facts]
    )
    answer.trace.abstention_retry = reply.abstention_retry
    degradations.extend(reply.degradations)


def _triggered(evidence: Evidence) -> bool:
    """Whether round 0 asked for refinement (its constructor found the evidence insufficient)."""
    first = evidence.rounds[0].feedback if evidence.rounds else None
    return first is not None and not first.sufficient


def _prefix(
    llm: LLMClient, index: SourceIndex, pool: Pool, config: AskConfig, task: AnswerStage
) -> SharedPrefix | None:
    """The prompt-cache prefix every stage of the question opens with, ``task`` answering
    (``cached`` layout; None for ``paper``, or when even the longest role leaves the prefix
    below the provider's minimum cacheable length)."""
    if config.prompt_layout != "cached":
        return None
    provider = llm.provider
    minimum = min_cacheable_tokens(provider.name, provider.model) if provider else 0
    return shared_prefix(index, pool, minimum, task)


def _round0_answer(
    llm: LLMClient,
    index: SourceIndex,
    question: str,
    pool: Pool,
    evidence: Evidence,
    config: AskConfig,
    ledger: Ledger,
    prefix: SharedPrefix | None,
    asking: Asking,
) -> Round0Answer:
    """The answer over the round-0 cards and the initial pool alone (stage ``answer_round0``),
    in the question's prompt layout, made as ``asking`` says."""
    assembly = assemble(
        index,
        evidence.rounds[0].cards,
        pool,
        neighbours=config.neighbours,
        neighbour_tokens=config.neighbour_tokens,
        episode_turns=config.episode_turns,
        background_tokens=config.background_tokens,
        above=pool if prefix is not None else None,
    )
    reply = answer_question(
        llm,
        question,
        assembly.text,
        max_tokens=config.answer_max_tokens,
        retry_abstention=config.retry_abstention,
        ledger=ledger,
        inputs=assembly.inputs,
        stage=ANSWER_ROUND0,
        prefix=prefix,
        asking=asking,
    )
    return Round0Answer(reply.text, reply.reasoning, assembly.shown)


def _retriever(corpus: Corpus, plan: Plan, config: RetrievalConfig | None) -> Retriever:
    """The refinement rounds' retrieval: the pool for follow-up queries, less ``exclude``."""

    def retrieve(queries: Sequence[str], exclude: Collection[Ref]) -> Pool:
        return corpus.pool(plan, config, exclude, queries)

    return retrieve


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
        answer.evidence.shown.turns,
        episode_turns=config.episode_turns,
        standing=answer.evidence.shown.standing,
    )
    answer.evidence.degradations = degradations
    answer.trace.record(ledger, started)
    return answer
