"""Expected figures: the pinned record that applies to a run, grades, and re-recording."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from qemem.errors import QememError
from qemem.reproduce.conditions import Condition
from qemem.reproduce.grading import extract, grade, pinned_diff

OFFLINE_LLMS = ("fake", "faulty")


class RunSettings(Protocol):
    """What a pinned record is matched on."""

    @property
    def data_label(self) -> str: ...
    @property
    def data_sha256(self) -> str: ...
    @property
    def embedder(self) -> str: ...


@dataclass
class RunOutcome:
    """One run's command, output document (or error) and what it says it ran with."""

    name: str
    command: str
    document: Any = None
    error: str | None = None
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class FigureResult:
    """One figure: measured, expected (pinned or published) and its grade.

    ``grade`` is OK, OKish or FAIL for a pinned figure; DATA when its pinned values are for
    other data (or another embedder or LLM), NEW when nothing is pinned for it yet, REF for
    a reference-only figure, ERROR when the run failed, ``-`` when it was not run."""

    name: str
    measured: Any
    expected: Any
    grade: str
    tolerance: float
    reference: dict[str, float | str] | None = None
    reference_source: str = ""
    note: str = ""


def matching_record(
    records: list[dict[str, Any]], settings: RunSettings, llm: str | None
) -> dict[str, Any] | None:
    """The pinned record for this data hash, embedder and LLM, if there is one."""
    for record in records:
        if (
            record.get("data_sha256") == settings.data_sha256
            and record.get("embedder") == settings.embedder
            and record.get("llm") == llm
        ):
            return record
    return None


def unpinned_note(records: list[dict[str, Any]], settings: RunSettings, llm: str | None) -> str:
    """Why no pinned value applies (different data hash, embedder or LLM)."""
    if not records:
        return "nothing pinned yet (qemem reproduce --record)"
    same = [r for r in records if r.get("data_sha256") == settings.data_sha256]
    if not same:
        pinned = ", ".join(f"{r['data']} ({r['data_sha256'][:12]})" for r in records)
        return f"data sha256 {settings.data_sha256[:12]} differs: pinned for {pinned}"
    kinds = ", ".join(f"embedder {r['embedder']}, LLM {r.get('llm')}" for r in same)
    return f"pinned on this data with {kinds}; this run: embedder {settings.embedder}, LLM {llm}"


def _expected(figure_name: str, record: dict[str, Any] | None) -> tuple[bool, Any]:
    figures = (record or {}).get("figures", {})
    return figure_name in figures, figures.get(figure_name)


def judge_figures(
    condition: Condition,
    outcomes: dict[str, RunOutcome],
    records: list[dict[str, Any]],
    settings: RunSettings,
    llm: str | None,
    run: bool = True,
) -> list[FigureResult]:
    """Every figure of the condition, extracted from its run's document and graded."""
    record = matching_record(records, settings, llm)
    answerer = llm.split(",")[0] if llm else None
    offline = answerer is None or answerer.split(":")[0] in OFFLINE_LLMS
    results = []
    for figure in condition.figures:
        has, expected = _expected(figure.name, record) if figure.pinned else (False, None)
        ref = figure.reference.for_llm(answerer) if figure.reference else None
        result = FigureResult(
            figure.name,
            None,
            expected,
            "-",
            figure.tolerance,
            ref,
            figure.reference.source if figure.reference else "",
        )
        results.append(result)
        if not run:
            continue
        outcome = outcomes[figure.run]
        if outcome.error:
            result.grade, result.note = "ERROR", outcome.error
            continue
        try:
            result.measured = extract(outcome.document, figure.path)
        except QememError as exc:
            result.grade, result.note = "ERROR", str(exc)
            continue
        if figure.pinned and has:
            result.grade = grade(expected, result.measured, figure.tolerance)
        elif figure.pinned:
            result.grade = "NEW" if record is not None or not records else "DATA"
            result.note = "not pinned yet" if record else unpinned_note(records, settings, llm)
        else:
            result.grade = "REF" if ref else "-"
        if ref and offline:
            result.note = "offline LLM: not comparable with the published figure"
    return results


def record_figures(
    records: list[dict[str, Any]],
    condition: Condition,
    figures: list[FigureResult],
    settings: RunSettings,
    llm: str | None,
) -> tuple[list[dict[str, Any]], list[tuple[str, Any, Any]]]:
    """The condition's records with this run's pinned figures re-recorded, and the diff."""
    pinned_names = {f.name for f in condition.figures if f.pinned}
    new = {f.name: f.measured for f in figures if f.name in pinned_names and f.grade != "ERROR"}
    old_record = matching_record(records, settings, llm)
    old = dict((old_record or {}).get("figures", {}))
    entry = {
        "data": settings.data_label,
        "data_sha256": settings.data_sha256,
        "embedder": settings.embedder,
        "llm": llm,
        "figures": new,
    }
    kept = [r for r in records if r is not old_record]
    return [*kept, entry], pinned_diff(old, new)
