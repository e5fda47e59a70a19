"""What the ``qemem eval`` commands print: coverage tables and milestones, a run's summary,
errata, and complexity-gap comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from qemem.cli.common import console, err_console
from qemem.eval.coverage import CoverageReport, PoolCoverageReport, auc

if TYPE_CHECKING:
    from qemem.eval.compare import GapComparison
    from qemem.eval.runs import RunResult


def check_coverage_flags(baseline: str | None, planner: bool, no_plan: bool) -> None:
    """Refuse contradictory coverage flags, saying what to pass instead."""
    if baseline not in (None, "turns", "no-plan"):
        raise typer.BadParameter("use turns or no-plan", param_hint="--baseline")
    if no_plan and planner:
        raise typer.BadParameter(
            "--no-plan and --planner contradict each other: for both on the same questions "
            "pass --planner --baseline no-plan",
            param_hint="--no-plan",
        )
    if baseline == "no-plan" and not planner:
        raise typer.BadParameter(
            "the no-plan baseline compares against LLM planning: add --planner (and --llm)",
            param_hint="--baseline",
        )


def _budget_text(value: int | None, unit: str) -> str:
    return "never within the pool" if value is None else f"{value} {unit}"


def show_milestones(report: CoverageReport | PoolCoverageReport) -> None:
    """The smallest budgets at which complete-evidence coverage reaches 80%, per pool."""
    if isinstance(report, CoverageReport):
        found = report.to_dict()["milestone_turns"]
        turns = found if isinstance(found, int) else None
        console.print(f"80% complete-evidence coverage: {_budget_text(turns, 'turns')}")
        return
    pools = [("pool", report)]
    if report.baseline is not None:
        pools.append((report.baseline_name, report.baseline))
    for name, found in pools:
        reached = found.milestones()
        console.print(
            f"80% complete-evidence coverage ({name}): "
            f"{_budget_text(reached['turns'], 'turns')}, "
            f"{_budget_text(reached['tokens'], 'tokens')}"
        )


def show_categories(report: PoolCoverageReport) -> None:
    """Per category: coverage within 20 turns and over the whole pool (and the baseline's)."""
    base = report.baseline
    columns = ["category", "n", "within 20 turns", "whole pool"]
    if base is not None:
        columns += [f"{report.baseline_name}: 20", f"{report.baseline_name}: whole"]
    table = Table(*columns, title="complete-evidence coverage by category")
    for category, block in report.categories.items():
        row = [str(category), str(block["questions"])]
        row += [f"{block['at_20']:.3f}", f"{block['whole_pool']:.3f}"]
        if base is not None:
            other = base.categories[category]
            row += [f"{other['at_20']:.3f}", f"{other['whole_pool']:.3f}"]
        table.add_row(*row)
    console.print(table)


def show_curves(report: CoverageReport | PoolCoverageReport, data: Path) -> None:
    """One table of coverage per budget for each curve of the report, with its AUC."""
    curves = (
        report.curves
        if isinstance(report, PoolCoverageReport)
        else {"turns/strict": report.coverage}
    )
    for name, curve in curves.items():
        table = Table(
            f"budget ({name.split('/')[0]})", "coverage", title=f"{name} coverage on {data}"
        )
        for budget, share in curve.items():
            table.add_row(str(budget), f"{share:.3f}")
        console.print(table)
        console.print(f"{name} AUC: {auc(curve):.4f}")


def show_against_baseline(report: PoolCoverageReport, data: Path) -> None:
    """Each curve of the pool beside the baseline's, with the difference per budget."""
    assert report.baseline is not None
    differences = report.difference()
    for name, curve in report.curves.items():
        base = report.baseline.curves[name]
        table = Table(
            f"budget ({name.split('/')[0]})",
            "pool",
            report.baseline_name,
            "difference",
            title=f"{name} coverage on {data}",
        )
        for budget, share in curve.items():
            table.add_row(
                str(budget),
                f"{share:.3f}",
                f"{base[budget]:.3f}",
                f"{differences[name][budget]:+.3f}",
            )
        table.add_row(
            "AUC", f"{auc(curve):.4f}", f"{auc(base):.4f}", f"{auc(curve) - auc(base):+.4f}"
        )
        console.print(table)
    console.print(
        f"mean exposed turns: pool {report.pool_turns:.1f}, {report.baseline_name} "
        f"{report.baseline.pool_turns:.1f}"
    )


def show_run(result: RunResult, mode: str, out: Path) -> None:
    """The run's accuracy by category, its visibility and cost line, and its failures."""
    summary = result.summary
    table = Table("category", "n", "accuracy", "95% CI", "F1", title=f"LoCoMo, mode {mode}")
    rows: list[tuple[str, dict[str, Any]]] = [
        (f"{c} {b['name']}", b) for c, b in summary["by_category"].items()
    ]
    for label, block in [*rows, ("all", {**summary["accuracy"], "scores": summary["scores"]})]:
        acc = block.get("accuracy")
        ci = block.get("ci95")
        table.add_row(
            label,
            str(block.get("n", 0)),
            "n/a" if acc is None else f"{acc:.3f}",
            "" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
            f"{block['scores']['f1']}",
        )
    console.print(table)
    ev, cost = summary["evidence"], summary["cost"]
    console.print(
        f"final-context evidence visibility {ev['visible_final']}, initial-pool AUC "
        f"{summary['coverage']['auc']}, method calls/question {cost['method_calls_per_question']}"
    )
    rf = summary["refinement"]
    if mode == "full" and rf["questions"]:
        before = rf["triggered_before_after"]
        console.print(
            f"refinement triggered {rf['triggered']}/{rf['questions']}; triggered accuracy "
            f"from the round-0 cards {before['accuracy_before']}, after refinement "
            f"{before['accuracy_after']}; extra calls per triggered question "
            f"{rf['extra_calls_per_triggered']}"
        )
    console.print(
        f"answered {result.answered}, resumed {result.skipped}, provider calls "
        f"{result.provider_calls}, cached {result.cached_calls}; report: {out / 'report.md'}, "
        f"{out / 'report.html'}"
    )
    for failure in result.failures:
        err_console.print(f"[yellow]failed (rerun to retry):[/] {failure}")
    if summary.get("errata"):
        show_errata(summary["errata"])


def show_errata(block: dict[str, Any]) -> None:
    """Accuracy on the original and the corrected gold, and the changed questions."""
    table = Table("gold", "n", "accuracy", title=f"answer-key errata ({block['file']})")
    for side in ("original", "corrected"):
        acc = block[side]["accuracy"]
        table.add_row(side, str(block[side]["n"]), "n/a" if acc is None else f"{acc:.4f}")
    console.print(table)
    for row in block["changed"]:
        change = "excluded" if row["excluded"] else f"-> {row['corrected']!r}"
        console.print(
            f"{row['key']}: gold {row['gold']!r} {change} ({row['reason']}); score "
            f"{row['score_original']} -> {row['score_corrected']}",
            markup=False,
        )
    if block["unmatched"]:
        console.print(f"not in this run: {', '.join(block['unmatched'])}", markup=False)


def show_gaps(result: GapComparison) -> None:
    """The A-B gap per complexity group, their difference, its interval and leave-one-out."""
    table = Table("group", "n", "A", "B", "A - B", title=f"{result.metric} A - B by {result.by}")
    for name, group in result.groups.items():
        label = f"{name} ({', '.join(result.high_labels)})" if name == "high" else name
        table.add_row(
            label,
            str(group["questions"]),
            f"{group['mean_a']:.4f}",
            f"{group['mean_b']:.4f}",
            f"{group['gap']:+.4f}",
        )
    console.print(table)
    boot = result.cluster
    interval = (
        "n/a"
        if boot is None
        else f"[{boot.ci_low:+.4f}, {boot.ci_high:+.4f}] (cluster bootstrap, "
        f"{boot.n_units} conversations, {boot.n_resamples} resamples, p {boot.p_value:.4f})"
    )
    console.print(f"gap difference high - low: {result.difference:+.4f}, 95% {interval}")
    for conversation, value in (result.leave_one_out or {}).items():
        shown = "n/a (a group empties)" if value is None else f"{value:+.4f}"
        console.print(f"  without {conversation}: {shown}", markup=False)
    if result.note:
        console.print(result.note)
