"""Retrieval coverage: how early a ranking exposes *all* annotated evidence turns of a question.

Evidence annotations are used only here, for analysis; the system never sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions, parse_locomo
from qemem.memory import Memory, Progress
from qemem.models import PoolEntry, Turn
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.retrieve.pool import RetrievalConfig, turn_tokens

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
    memory: Memory, data: str | Path, categories: Sequence[int], conversations: Sequence[str] = ()
) -> list[LocomoQuestion]:
    """Ingest ``data`` (LoCoMo) into ``memory`` if needed; its questions of ``categories``
    (and of ``conversations``, when given)."""
    samples = load_locomo(data)
    memory.ingest(parse_locomo(samples, str(data)))
    return [
        q
        for q in locomo_questions(samples)
        if q.category in categories and (not conversations or q.conversation in conversations)
    ]


def question_ranking(memory: Memory, question: LocomoQuestion) -> list[str]:
    """The foundation ranking: hybrid turn search with the question alone, every turn ranked."""
    return [r.record.id for r in memory.search(question.conversation, question.question, k=None)]


def evaluate_coverage(
    memory: Memory,
    data: str | Path,
    *,
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    conversations: Sequence[str] = (),
    budgets: Sequence[int] = TURN_BUDGETS,
    progress: Progress | None = None,
) -> CoverageReport:
    """Ingest ``data`` (LoCoMo) if needed, rank turns for each question (of ``conversations``
    when given), measure coverage."""
    questions = load_questions(memory, data, categories, conversations)
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


def exposure_groups(entries: Sequence[PoolEntry]) -> list[list[str]]:
    """The turns a pool exposes, candidate by candidate in its exposure order (each entry's
    ``position``; the entries of ``Pool.entries()`` or of a round of the evidence record, turns
    in conversation order): a turn hit with its context, an episode or fact with the turns it
    exposes (reasons ``context``/``provenance`` via it); each group lists only turns no earlier
    candidate exposed, in conversation order; empty groups dropped."""
    holders: dict[str, list[str]] = {}
    for entry in (e for e in entries if e.ref.space == "turn"):
        tid = entry.ref.id
        for reason in entry.reasons:
            holder = tid if reason.kind == "ranked" else reason.via
            if holder is not None and tid not in holders.setdefault(holder, []):
                holders[holder].append(tid)
    candidates = sorted(
        (e for e in entries if e.position is not None), key=lambda e: e.position or 0
    )
    seen: set[str] = set()
    groups: list[list[str]] = []
    for entry in candidates:
        new = [t for t in holders.get(entry.ref.id, []) if t not in seen]
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


def _curves_dict(curves: Mapping[str, Mapping[int, float]]) -> dict[str, object]:
    return {
        name: {
            "coverage": {str(b): round(v, 4) for b, v in curve.items()},
            "auc": round(auc(curve), 4),
        }
        for name, curve in curves.items()
    }


def turns_only(config: RetrievalConfig) -> RetrievalConfig:
    """``config`` without the episode and fact spaces (budgets 0): the turns-only baseline."""
    return replace(config, budget_episodes=0, budget_facts=0)


@dataclass
class PoolCoverageReport:
    """Coverage of the full pool under turn and token budgets, strict and inclusive rules.

    ``curves`` is keyed ``turns/strict``, ``turns/inclusive``, ``tokens/strict``,
    ``tokens/inclusive``; the headline (``coverage``, ``auc``) is ``turns/strict``.
    ``baseline`` holds the same curves of a baseline pool (e.g. :func:`turns_only`) built for
    the same questions in the same run, when one was asked for.
    """

    questions: int
    curves: dict[str, dict[int, float]]
    per_category: dict[int, dict[int, float]]
    pool_turns: float
    planner: str
    config: RetrievalConfig
    baseline: PoolCoverageReport | None = None

    @property
    def coverage(self) -> dict[int, float]:
        return self.curves["turns/strict"]

    @property
    def auc(self) -> float:
        return auc(self.coverage)

    def difference(self) -> dict[str, dict[int, float]]:
        """Per curve and budget, this pool's coverage minus the baseline's (empty without)."""
        if self.baseline is None:
            return {}
        return {
            name: {b: v - self.baseline.curves[name][b] for b, v in curve.items()}
            for name, curve in self.curves.items()
        }

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "questions": self.questions,
            "coverage": {str(b): round(v, 4) for b, v in self.coverage.items()},
            "auc": round(self.auc, 4),
            "auc_by_category": {
                str(c): round(auc(curve), 4) for c, curve in self.per_category.items()
            },
            "curves": _curves_dict(self.curves),
            "mean_pool_turns": round(self.pool_turns, 1),
            "planner": self.planner,
            "config": asdict(self.config),
        }
        if self.baseline is not None:
            out["baseline"] = {
                "config": asdict(self.baseline.config),
                "curves": _curves_dict(self.baseline.curves),
                "mean_pool_turns": round(self.baseline.pool_turns, 1),
                "difference": {
                    name: {
                        "coverage": {str(b): round(v, 4) for b, v in diff.items()},
                        "auc": round(auc(diff), 4),
                    }
                    for name, diff in self.difference().items()
                },
            }
        return out


def evaluate_pool_coverage(
    memory: Memory,
    data: str | Path,
    *,
    config: RetrievalConfig | None = None,
    baseline: RetrievalConfig | None = None,
    llm: LLMClient | None = None,
    ledger: Ledger | None = None,
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    conversations: Sequence[str] = (),
    turn_budgets: Sequence[int] = TURN_BUDGETS,
    token_budgets: Sequence[int] = TOKEN_BUDGETS,
    progress: Progress | None = None,
) -> PoolCoverageReport:
    """Ingest ``data`` (LoCoMo) if needed, build each question's full pool (planned with
    ``llm`` when given, else the rule plan: the question alone) and measure how early its
    exposure order (:func:`exposure_groups`) covers the annotated evidence. With
    ``baseline``, a second pool per question (same plan) gives the baseline's curves;
    ``conversations`` keeps only their questions (all when empty)."""
    config = config or RetrievalConfig()
    questions = load_questions(memory, data, categories, conversations)
    configs = [config] if baseline is None else [config, baseline]
    context: dict[str, tuple[dict[str, tuple[str, str, str]], dict[str, int]]] = {}
    ranks: list[dict[str, list[int | None]]] = [{k: [] for k in CURVE_NAMES} for _ in configs]
    exposed_total = [0 for _ in configs]
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
        for c, cfg in enumerate(configs):
            pool = memory.retrieve(conv, question.question, plan=plan, config=cfg)
            groups = exposure_groups(pool.entries())
            exposed_total[c] += sum(len(g) for g in groups)
            for unit, cost in (("turns", None), ("tokens", tokens)):
                strict, inclusive = budget_positions(groups, question.evidence, aliases, cost)
                ranks[c][f"{unit}/strict"].append(strict)
                ranks[c][f"{unit}/inclusive"].append(inclusive)
        if progress:
            progress(n, len(questions))
    budgets = {"turns": turn_budgets, "tokens": token_budgets}
    reports = [
        PoolCoverageReport(
            len(questions),
            {name: coverage_curve(r, budgets[name.split("/")[0]]) for name, r in rank.items()},
            curves_by_category(rank["turns/strict"], questions, categories, turn_budgets),
            total / max(1, len(questions)),
            "rules" if llm is None else repr(llm),
            cfg,
        )
        for rank, total, cfg in zip(ranks, exposed_total, configs, strict=True)
    ]
    if baseline is not None:
        reports[0].baseline = reports[1]
    return reports[0]
