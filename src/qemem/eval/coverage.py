"""Retrieval coverage: how early a ranking exposes *all* annotated evidence turns of a question.

Evidence annotations are used only here, for analysis; the system never sees them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions, parse_locomo
from qemem.memory import Memory, Progress
from qemem.models import Turn

TURN_BUDGETS: tuple[int, ...] = tuple(range(10, 121, 10))
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


Ranker = Callable[[Memory, LocomoQuestion], Sequence[str]]


def question_ranking(memory: Memory, question: LocomoQuestion) -> list[str]:
    """The foundation ranking: hybrid turn search with the question alone, every turn ranked."""
    return [r.record.id for r in memory.search(question.conversation, question.question, k=None)]


def evaluate_coverage(
    memory: Memory,
    data: str | Path,
    *,
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    budgets: Sequence[int] = TURN_BUDGETS,
    ranker: Ranker = question_ranking,
    progress: Progress | None = None,
) -> CoverageReport:
    """Ingest ``data`` (LoCoMo) if needed, rank turns for each question, measure coverage."""
    samples = load_locomo(data)
    memory.ingest(parse_locomo(samples, str(data)))
    questions = [q for q in locomo_questions(samples) if q.category in categories]
    aliases: dict[str, dict[str, tuple[str, str, str]]] = {}
    ranks: list[int | None] = []
    for n, question in enumerate(questions, start=1):
        if question.conversation not in aliases:
            aliases[question.conversation] = alias_keys(memory.turns(question.conversation))
        exposed = ranker(memory, question)
        ranks.append(evidence_rank(exposed, question.evidence, aliases[question.conversation]))
        if progress:
            progress(n, len(questions))
    curve = coverage_curve(ranks, budgets)
    per_category = {
        c: auc(
            coverage_curve(
                [r for r, q in zip(ranks, questions, strict=True) if q.category == c], budgets
            )
        )
        for c in categories
    }
    return CoverageReport(len(questions), curve, auc(curve), ranks, per_category)
