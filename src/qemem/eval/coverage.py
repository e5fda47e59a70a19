"""Retrieval coverage: how early a ranking exposes *all* annotated evidence turns of a question.

Evidence annotations are used only here, for analysis; the system never sees them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions, parse_locomo
from qemem.memory import Memory, Progress
from qemem.models import Episode, Pool, Turn, document
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.retrieve.pool import RetrievalConfig

if TYPE_CHECKING:
    from qemem.llm import Ledger, LLMClient

TURN_BUDGETS: tuple[int, ...] = tuple(range(10, 121, 10))
TOKEN_BUDGETS: tuple[int, ...] = tuple(range(300, 3601, 300))
CURVE_NAMES: tuple[str, ...] = (
    "turns/strict",
    "turns/inclusive",
    "tokens/strict",
    "tokens/inclusive",
)
DEFAULT_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)


def alias_keys(turns: Iterable[Turn]) -> dict[str, tuple[str, str, str]]:
    """Map each turn id to (speaker, session date-time, text): ids sharing it are aliases."""
    return {t.id: (t.speaker, t.timestamp.isoformat(), t.text) for t in turns}


def evidence_rank(
    exposed: Sequence[str], evidence: Iterable[str], aliases: Mapping[str, object]
) -> int | None:
    """The 1-based position in ``exposed`` at which every evidence turn (or an alias of it) has
    appeared; None when some evidence turn never appears or is unknown; 0 for no evidence."""
    needed = {aliases.get(e, ("missing", e)) for e in evidence}
    if not needed:
        return 0
    for position, tid in enumerate(exposed, start=1):
        needed.discard(aliases.get(tid, ("missing", tid)))
        if not needed:
            return position
    return None


def coverage_curve(
    ranks: Sequence[int | float | None], budgets: Sequence[int] = TURN_BUDGETS
) -> dict[int, float]:
    """Share of questions whose complete evidence is exposed within each budget."""
    if not ranks:
        return {b: 0.0 for b in budgets}
    return {b: sum(r is not None and r <= b for r in ranks) / len(ranks) for b in budgets}


def curves_by_category(
    ranks: Sequence[int | None],
    questions: Sequence[LocomoQuestion],
    categories: Sequence[int],
    budgets: Sequence[int],
) -> dict[int, dict[int, float]]:
    """The coverage curve of each category's questions (``ranks`` aligned with ``questions``)."""
    grouped: dict[int, list[int | None]] = {c: [] for c in categories}
    for rank, question in zip(ranks, questions, strict=True):
        grouped.setdefault(question.category, []).append(rank)
    return {c: coverage_curve(grouped[c], budgets) for c in categories}


def auc(curve: Mapping[int, float]) -> float:
    """Area under a coverage curve, as the mean coverage over its budgets."""
    return sum(curve.values()) / len(curve) if curve else 0.0


@dataclass
class CoverageReport:
    """Coverage of one evaluation: per-question ranks and the curve over budgets."""

    questions: int
    coverage: dict[int, float]
    auc: float
    ranks: list[int | None] = field(default_factory=list)
    per_category: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "questions": self.questions,
            "coverage": {str(b): round(v, 4) for b, v in self.coverage.items()},
            "auc": round(self.auc, 4),
            "auc_by_category": {str(c): round(v, 4) for c, v in self.per_category.items()},
        }


def load_questions(
    memory: Memory, data: str | Path, categories: Sequence[int]
) -> list[LocomoQuestion]:
    """Ingest ``data`` (LoCoMo) into ``memory`` if needed; its questions of ``categories``."""
    samples = load_locomo(data)
    memory.ingest(parse_locomo(samples, str(data)))
    return [q for q in locomo_questions(samples) if q.category in categories]


def question_ranking(memory: Memory, question: LocomoQuestion) -> list[str]:
    """The foundation ranking: hybrid turn search with the question alone, every turn ranked."""
    return [r.record.id for r in memory.search(question.conversation, question.question, k=None)]


def evaluate_coverage(
    memory: Memory,
    data: str | Path,
    *,
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    budgets: Sequence[int] = TURN_BUDGETS,
    progress: Progress | None = None,
) -> CoverageReport:
    """Ingest ``data`` (LoCoMo) if needed, rank turns for each question, measure coverage."""
    questions = load_questions(memory, data, categories)
    aliases: dict[str, dict[str, tuple[str, str, str]]] = {}
    ranks: list[int | None] = []
    for n, question in enumerate(questions, start=1):
        if question.conversation not in aliases:
            aliases[question.conversation] = alias_keys(memory.turns(question.conversation))
        exposed = question_ranking(memory, question)
        ranks.append(evidence_rank(exposed, question.evidence, aliases[question.conversation]))
        if progress:
            progress(n, len(questions))
    curve = coverage_curve(ranks, budgets)
    per_category = {
        c: auc(curve)
        for c, curve in curves_by_category(ranks, questions, categories, budgets).items()
    }
    return CoverageReport(len(questions), curve, auc(curve), ranks, per_category)


# ---------------------------------------------------------------------------- pool coverage


def turn_tokens(turn: Turn) -> int:
    """A turn's length in tokens, tokenizer-free: ceil(characters of "Speaker: text" / 4)
    (about 4 characters per token for English text with common tokenizers)."""
    return math.ceil(len(document(turn)) / 4)


def exposure_groups(pool: Pool) -> list[list[str]]:
    """The turns the pool exposes, as candidates in rank order: each turn hit with its context
    window (conversation order), each episode with its turns (episode order); candidates by
    score (episodes first on ties), each listing only turns no earlier candidate exposed,
    empty ones dropped."""
    windows: dict[str, list[str]] = {}
    for item in pool.turns:
        for reason in item.reasons:
            holder = item.id if reason.kind == "ranked" else reason.via
            if holder is not None and item.id not in windows.setdefault(holder, []):
                windows[holder].append(item.id)
    scores = {item.id: item.score for item in pool.turns}
    candidates = [
        (e.score, list(e.record.turn_ids)) for e in pool.episodes if isinstance(e.record, Episode)
    ]
    candidates += [(scores.get(hit, 0.0), turns) for hit, turns in windows.items()]
    candidates.sort(key=lambda c: -c[0])
    seen: set[str] = set()
    groups: list[list[str]] = []
    for _, turns in candidates:
        new = [t for t in dict.fromkeys(turns) if t not in seen]
        seen.update(new)
        if new:
            groups.append(new)
    return groups


def budget_positions(
    groups: Sequence[Sequence[str]],
    evidence: Iterable[str],
    aliases: Mapping[str, object],
    cost: Mapping[str, int] | None = None,
) -> tuple[int | None, int | None]:
    """(strict, inclusive) budget positions at which every evidence turn (or an alias) is
    exposed by ``groups`` taken whole, in order; ``cost`` per turn id (default 1).

    Strict rule: stop before the candidate that would exceed the budget, so evidence is
    covered within budget b iff the total cost up to and including its last needed candidate
    is <= b. Inclusive rule: the candidate that crosses the budget is taken whole, so it is
    covered iff that candidate starts within the budget (cost before it < b, i.e. cost before
    + 1 <= b). None when never covered; (0, 0) for no evidence.
    """
    needed = {aliases.get(e, ("missing", e)) for e in evidence}
    if not needed:
        return 0, 0
    spent = 0
    for group in groups:
        before = spent
        for tid in group:
            spent += 1 if cost is None else cost.get(tid, 1)
            needed.discard(aliases.get(tid, ("missing", tid)))
        if not needed:
            return spent, before + 1
    return None, None


@dataclass
class PoolCoverageReport:
    """Coverage of the full pool under turn and token budgets, strict and inclusive rules.

    ``curves`` is keyed ``turns/strict``, ``turns/inclusive``, ``tokens/strict``,
    ``tokens/inclusive``; the headline (``coverage``, ``auc``) is ``turns/strict``.
    """

    questions: int
    curves: dict[str, dict[int, float]]
    per_category: dict[int, dict[int, float]]
    pool_turns: float
    planner: str
    config: RetrievalConfig

    @property
    def coverage(self) -> dict[int, float]:
        return self.curves["turns/strict"]

    @property
    def auc(self) -> float:
        return auc(self.coverage)

    def to_dict(self) -> dict[str, object]:
        return {
            "questions": self.questions,
            "coverage": {str(b): round(v, 4) for b, v in self.coverage.items()},
            "auc": round(self.auc, 4),
            "auc_by_category": {
                str(c): round(auc(curve), 4) for c, curve in self.per_category.items()
            },
            "curves": {
                name: {
                    "coverage": {str(b): round(v, 4) for b, v in curve.items()},
                    "auc": round(auc(curve), 4),
                }
                for name, curve in self.curves.items()
            },
            "mean_pool_turns": round(self.pool_turns, 1),
            "planner": self.planner,
            "config": asdict(self.config),
        }


def evaluate_pool_coverage(
    memory: Memory,
    data: str | Path,
    *,
    config: RetrievalConfig | None = None,
    llm: LLMClient | None = None,
    ledger: Ledger | None = None,
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    turn_budgets: Sequence[int] = TURN_BUDGETS,
    token_budgets: Sequence[int] = TOKEN_BUDGETS,
    progress: Progress | None = None,
) -> PoolCoverageReport:
    """Ingest ``data`` (LoCoMo) if needed, build each question's full pool (planned with
    ``llm`` when given, else the rule plan: the question alone) and measure how early its
    exposure order (:func:`exposure_groups`) covers the annotated evidence."""
    config = config or RetrievalConfig()
    questions = load_questions(memory, data, categories)
    context: dict[str, tuple[dict[str, tuple[str, str, str]], dict[str, int]]] = {}
    ranks: dict[str, list[int | None]] = {k: [] for k in CURVE_NAMES}
    exposed_total = 0
    for n, question in enumerate(questions, start=1):
        conv = question.conversation
        if conv not in context:
            turns = memory.turns(conv)
            context[conv] = (alias_keys(turns), {t.id: turn_tokens(t) for t in turns})
        aliases, tokens = context[conv]
        if llm is None:
            plan = rule_plan(question.question)
        else:
            info = memory.conversation(conv)
            plan = plan_question(llm, question.question, info.speakers, info.span, ledger=ledger)
        pool = memory.retrieve(conv, question.question, plan=plan, config=config)
        groups = exposure_groups(pool)
        exposed_total += sum(len(g) for g in groups)
        for unit, cost in (("turns", None), ("tokens", tokens)):
            strict, inclusive = budget_positions(groups, question.evidence, aliases, cost)
            ranks[f"{unit}/strict"].append(strict)
            ranks[f"{unit}/inclusive"].append(inclusive)
        if progress:
            progress(n, len(questions))
    budgets = {"turns": turn_budgets, "tokens": token_budgets}
    curves = {name: coverage_curve(r, budgets[name.split("/")[0]]) for name, r in ranks.items()}
    per_category = curves_by_category(ranks["turns/strict"], questions, categories, turn_budgets)
    return PoolCoverageReport(
        len(questions),
        curves,
        per_category,
        exposed_total / max(1, len(questions)),
        "rules" if llm is None else repr(llm),
        config,
    )
