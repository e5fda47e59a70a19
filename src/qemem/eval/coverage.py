"""Retrieval coverage: how early a ranking exposes *all* annotated evidence turns of a question.

Evidence annotations are used only here, for analysis; the system never sees them. A question
without evidence turns (a BEAM abstention probe, say) has nothing to expose: it is counted
apart (``without_evidence``), not as covered, and every share is over the questions with
evidence.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions, parse_locomo
from qemem.memory import Memory, Progress
from qemem.models import Pool, PoolEntry, Span, Turn, Unit
from qemem.passages import Units
from qemem.retrieve.budgets import RetrievalConfig
from qemem.retrieve.plan import plan_question, rule_plan
from qemem.tokens import tokenize

if TYPE_CHECKING:
    from qemem.llm import Ledger, LLMClient

K = TypeVar("K", bound=Hashable)

TURN_BUDGETS: tuple[int, ...] = tuple(range(10, 121, 10))
TOKEN_BUDGETS: tuple[int, ...] = tuple(range(300, 3601, 300))
CURVE_NAMES: tuple[str, ...] = (
    "turns/strict",
    "turns/inclusive",
    "tokens/strict",
    "tokens/inclusive",
)
DEFAULT_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)
#: the turn budget of the planning ablation's "small budget" column
PLANNING_BUDGET = 20
#: the coverage the milestones look for
MILESTONE = 0.8


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


def milestone(ranks: Sequence[int | float | None], target: float = 0.8) -> int | None:
    """The smallest budget at which at least ``target`` of the questions have their complete
    evidence exposed (``ranks`` as :func:`coverage_curve` takes them; None: never within the
    ranking, i.e. fewer than ``target`` of the questions are ever covered, or no questions)."""
    if not 0 < target <= 1:
        raise ValueError(f"target must lie in (0, 1], got {target}")
    if not ranks:
        return None
    needed = math.ceil(target * len(ranks) - 1e-9)
    covered = sorted(r for r in ranks if r is not None)
    return None if len(covered) < needed else math.ceil(covered[needed - 1])


def category_coverage(
    ranks: Sequence[int | None],
    questions: Sequence[LocomoQuestion],
    categories: Sequence[int],
    budget: int = PLANNING_BUDGET,
) -> dict[int, dict[str, float | int]]:
    """Per category: its questions, the share covered within ``budget`` and the share covered
    anywhere in the pool (``ranks`` aligned with ``questions``)."""
    out: dict[int, dict[str, float | int]] = {}
    for category in categories:
        chosen = [r for r, q in zip(ranks, questions, strict=True) if q.category == category]
        n = len(chosen)
        out[category] = {
            "questions": n,
            f"at_{budget}": sum(r is not None and r <= budget for r in chosen) / n if n else 0.0,
            "whole_pool": sum(r is not None for r in chosen) / n if n else 0.0,
        }
    return out


def auc(curve: Mapping[int, float]) -> float:
    """Area under a coverage curve, as the mean coverage over its budgets."""
    return sum(curve.values()) / len(curve) if curve else 0.0


def with_evidence(questions: Sequence[LocomoQuestion]) -> tuple[list[LocomoQuestion], int]:
    """The questions that have evidence turns, and how many have none (counted apart)."""
    kept = [q for q in questions if q.evidence]
    return kept, len(questions) - len(kept)


@dataclass
class CoverageReport:
    """Coverage of one evaluation: per-question ranks and the curve over budgets, over the
    ``questions`` with evidence (``without_evidence`` more were left out)."""

    questions: int
    coverage: dict[int, float]
    auc: float
    ranks: list[int | None] = field(default_factory=list)
    per_category: dict[int, float] = field(default_factory=dict)
    without_evidence: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "questions": self.questions,
            "questions_without_evidence": self.without_evidence,
            "coverage": {str(b): round(v, 4) for b, v in self.coverage.items()},
            "auc": round(self.auc, 4),
            "auc_by_category": {str(c): round(v, 4) for c, v in self.per_category.items()},
            "milestone_turns": milestone(self.ranks, MILESTONE),
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
    """Ingest ``data`` (LoCoMo) if needed, rank turns for each question with evidence (of
    ``conversations`` when given), measure coverage."""
    questions, apart = with_evidence(load_questions(memory, data, categories, conversations))
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
    return CoverageReport(len(questions), curve, auc(curve), ranks, per_category, apart)


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
    groups: Sequence[Sequence[K]],
    evidence: Iterable[K],
    aliases: Mapping[K, object],
    cost: Mapping[K, int] | None = None,
) -> tuple[int | None, int | None]:
    """(strict, inclusive) budget positions at which every evidence turn (or an alias) is
    exposed by ``groups`` taken whole, in order; ``cost`` per turn id (default 1). Turns may
    be units (a turn or one of its passages, :func:`unit_aliases`).

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


def best_passage(turn: Turn, spans: Sequence[Span], answer: str) -> Span | None:
    """The passage of ``turn`` (``spans``; none: the turn is one passage, None) that best
    matches a reference ``answer``, by one fixed lexical rule: the most distinct search
    tokens (:func:`qemem.tokens.tokenize`: stemmed, stopwords dropped) shared with the
    answer; ties, and no shared token at all, go to the earliest passage."""
    if not spans:
        return None
    wanted = set(tokenize(answer))
    shared = [len(wanted & set(tokenize(turn.excerpt(span)))) for span in spans]
    return spans[shared.index(max(shared))]


@dataclass(frozen=True)
class ConversationUnits:
    """What measuring pool coverage needs of one conversation: its turns by id, the spans of
    its long turns, the units (with their token costs) and the alias of every unit."""

    turns: dict[str, Turn]
    passages: dict[str, list[Span]]
    units: Units
    aliases: dict[Unit, object]

    @classmethod
    def of(cls, turns: Sequence[Turn], passages: Mapping[str, Sequence[Span]]) -> ConversationUnits:
        units = Units(turns, passages)
        keys = alias_keys(turns)
        return cls(
            {t.id: t for t in turns},
            {t: list(s) for t, s in passages.items()},
            units,
            {unit: (keys[unit[0]], unit[1]) for unit in units.order},
        )

    def evidence(self, turn_ids: Iterable[str], answer: str) -> list[Unit]:
        """The units a question's evidence needs: of each evidence turn the passage that best
        matches the ``answer`` (:func:`best_passage`), or the turn itself; unknown turns are
        kept (as whole turns without an alias: never covered)."""
        out: list[Unit] = []
        for tid in turn_ids:
            turn = self.turns.get(tid)
            spans = self.passages.get(tid, [])
            out.append((tid, best_passage(turn, spans, answer) if turn else None))
        return out


def order_groups(pool: Pool) -> list[list[Unit]]:
    """The units a pool exposes, candidate by candidate in its exposure order (``Pool.order``;
    empty groups dropped)."""
    return [list(exposure.units) for exposure in pool.order if exposure.units]


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
    ``tokens/inclusive``; the headline (``coverage``, ``auc``) is ``turns/strict``; ``ranks``
    holds each curve's per-question budget positions and ``categories`` each category's
    coverage within 20 turns and over the whole pool (:func:`category_coverage`).
    ``baseline`` holds the same of a baseline pool built for the same questions in the same
    run (e.g. :func:`turns_only`, or the question alone without planning), when one was asked
    for; ``baseline_name`` says which. ``questions`` counts those with evidence;
    ``without_evidence`` the ones left out.
    """

    questions: int
    curves: dict[str, dict[int, float]]
    per_category: dict[int, dict[int, float]]
    pool_turns: float
    planner: str
    config: RetrievalConfig
    baseline: PoolCoverageReport | None = None
    ranks: dict[str, list[int | None]] = field(default_factory=dict)
    categories: dict[int, dict[str, float | int]] = field(default_factory=dict)
    baseline_name: str = ""
    pool_tokens: float = 0.0
    without_evidence: int = 0

    @property
    def coverage(self) -> dict[int, float]:
        return self.curves["turns/strict"]

    @property
    def auc(self) -> float:
        return auc(self.coverage)

    @property
    def whole_pool(self) -> float:
        """Share of questions whose complete evidence is anywhere in the pool (as cut by the
        config's budgets)."""
        found = self.ranks.get("turns/strict", [])
        return sum(r is not None for r in found) / len(found) if found else 0.0

    def milestones(self, target: float = MILESTONE) -> dict[str, int | None]:
        """The smallest turn and token budgets (strict rule) at which complete-evidence
        coverage reaches ``target``; None where it never does within the pool."""
        return {
            unit: milestone(self.ranks.get(f"{unit}/strict", []), target)
            for unit in ("turns", "tokens")
        }

    def difference(self) -> dict[str, dict[int, float]]:
        """Per curve and budget, this pool's coverage minus the baseline's (empty without)."""
        if self.baseline is None:
            return {}
        return {
            name: {b: v - self.baseline.curves[name][b] for b, v in curve.items()}
            for name, curve in self.curves.items()
        }

    def _own(self) -> dict[str, object]:
        """What this pool's (or the baseline's) entry reports."""
        return {
            "curves": _curves_dict(self.curves),
            "whole_pool": round(self.whole_pool, 4),
            "mean_pool_turns": round(self.pool_turns, 1),
            "mean_pool_tokens": round(self.pool_tokens, 1),
            "planner": self.planner,
            "config": asdict(self.config),
            "milestones": {"target": MILESTONE, **self.milestones()},
            "by_category": {
                str(c): {k: round(v, 4) for k, v in b.items()} for c, b in self.categories.items()
            },
        }

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "questions": self.questions,
            "questions_without_evidence": self.without_evidence,
            "coverage": {str(b): round(v, 4) for b, v in self.coverage.items()},
            "auc": round(self.auc, 4),
            "auc_by_category": {
                str(c): round(auc(curve), 4) for c, curve in self.per_category.items()
            },
            **self._own(),
        }
        if self.baseline is not None:
            out["baseline"] = {
                "name": self.baseline_name,
                **self.baseline._own(),
                "difference": {
                    name: {
                        "coverage": {str(b): round(v, 4) for b, v in diff.items()},
                        "auc": round(auc(diff), 4),
                    }
                    for name, diff in self.difference().items()
                },
            }
        return out


def _positions(
    pool: Pool, question: LocomoQuestion, known: ConversationUnits
) -> tuple[dict[str, int | None], int, int]:
    """A question's budget positions in ``pool`` (per curve: units or tokens, strict or
    inclusive), and the units and tokens the pool exposes."""
    groups = order_groups(pool)
    evidence = known.evidence(question.evidence, question.answer)
    positions: dict[str, int | None] = {}
    for unit, cost in (("turns", None), ("tokens", known.units.cost)):
        strict, inclusive = budget_positions(groups, evidence, known.aliases, cost)
        positions[f"{unit}/strict"], positions[f"{unit}/inclusive"] = strict, inclusive
    tokens = sum(known.units.cost[u] for g in groups for u in g)
    return positions, sum(len(g) for g in groups), tokens


def evaluate_pool_coverage(
    memory: Memory,
    data: str | Path,
    *,
    config: RetrievalConfig | None = None,
    baseline: RetrievalConfig | None = None,
    baseline_plan: bool = True,
    llm: LLMClient | None = None,
    ledger: Ledger | None = None,
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    conversations: Sequence[str] = (),
    turn_budgets: Sequence[int] = TURN_BUDGETS,
    token_budgets: Sequence[int] = TOKEN_BUDGETS,
    progress: Progress | None = None,
) -> PoolCoverageReport:
    """Ingest ``data`` (LoCoMo) if needed, build the full pool of each question with evidence
    (planned with ``llm`` when given, else the rule plan: the question alone) and measure how
    early its exposure order (``Pool.order``) covers the annotated evidence: of every evidence
    turn the passage that best matches the question's answer (:func:`best_passage`; a short
    turn is one passage). Budgets count units (a turn, or a passage of a long one) and their
    tokens. With ``baseline`` (a config) or ``baseline_plan`` False (the planning ablation:
    the same config with the question alone and rule flags), a second pool per question gives
    the baseline's curves; ``conversations`` keeps only their questions (all when empty)."""
    config = config or RetrievalConfig()
    questions, apart = with_evidence(load_questions(memory, data, categories, conversations))
    variants: list[tuple[RetrievalConfig, bool]] = [(config, True)]
    if baseline is not None or not baseline_plan:
        variants.append((baseline or config, baseline_plan))
    context: dict[str, ConversationUnits] = {}
    ranks: list[dict[str, list[int | None]]] = [{k: [] for k in CURVE_NAMES} for _ in variants]
    exposed_total = [0 for _ in variants]
    tokens_total = [0 for _ in variants]
    for n, question in enumerate(questions, start=1):
        conv = question.conversation
        if conv not in context:
            context[conv] = ConversationUnits.of(memory.turns(conv), memory.passages(conv))
        plans = {False: rule_plan(question.question, "planning off")}
        if llm is None:
            plans[True] = rule_plan(question.question)
        else:
            info = memory.conversation(conv)
            plans[True] = plan_question(
                llm, question.question, info.speakers, info.span, ledger=ledger
            )
        for c, (cfg, planned) in enumerate(variants):
            pool = memory.retrieve(conv, question.question, plan=plans[planned], config=cfg)
            positions, units, tokens = _positions(pool, question, context[conv])
            exposed_total[c] += units
            tokens_total[c] += tokens
            for name, position in positions.items():
                ranks[c][name].append(position)
        if progress:
            progress(n, len(questions))
    budgets = {"turns": turn_budgets, "tokens": token_budgets}
    count = max(1, len(questions))
    reports = [
        PoolCoverageReport(
            len(questions),
            {name: coverage_curve(r, budgets[name.split("/")[0]]) for name, r in rank.items()},
            curves_by_category(rank["turns/strict"], questions, categories, turn_budgets),
            total / count,
            "rules" if llm is None or not planned else repr(llm),
            cfg,
            ranks=rank,
            categories=category_coverage(rank["turns/strict"], questions, categories),
            pool_tokens=tokens / count,
            without_evidence=apart,
        )
        for rank, total, tokens, (cfg, planned) in zip(
            ranks, exposed_total, tokens_total, variants, strict=True
        )
    ]
    if len(reports) > 1:
        reports[0].baseline = reports[1]
        names = ["turns only"] if baseline is not None else []
        reports[0].baseline_name = ", ".join([*names, *([] if baseline_plan else ["no plan"])])
    return reports[0]
