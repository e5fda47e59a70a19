"""report.md of a LoCoMo run: one function per section of the summary (see
:func:`qemem.eval.report.summarise`), joined by :func:`render_markdown`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qemem.eval.grounding import VISIBILITY_RULES, render_grounding

Summary = Mapping[str, Any]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _acc(block: Mapping[str, Any]) -> str:
    if block.get("accuracy") is None:
        return "n/a"
    low, high = block["ci95"]
    spread = f" ± {100 * block['std_over_runs']:.1f}" if len(block["runs"]) > 1 else ""
    return f"{_pct(block['accuracy'])}{spread} [{_pct(low)}, {_pct(high)}] (n={block['n']})"


def header(s: Summary) -> list[str]:
    """The title and the run's models, selection and reading notes."""
    self_judged = (
        " (the answerer grading its own answers: no separate judge was given; the published "
        "protocol uses a separate judge)"
        if s["judge_is_answerer"]
        else ""
    )
    parse_failures = s["accuracy"].get("parse_failures", 0)
    return [
        f"# LoCoMo evaluation: mode {s['mode']}",
        "",
        f"Answerer {s['answerer'] or 'none'}, judge {s['judge'] or 'none'}{self_judged} "
        f"({s['judge_runs']} run(s)), embedder "
        f"{s['embedder']}; {s['questions']} questions from {', '.join(s['conversations'])}.",
        f"Judge outputs that could not be parsed (scored WRONG): {parse_failures}.",
        *(
            []
            if s["built"]
            else ["Memory not built for this run (--no-build): answered from what the store held."]
        ),
        "Accuracy: mean [Wilson 95% interval] (± std over judge runs when several).",
    ]


def accuracy_section(s: Summary) -> list[str]:
    """Accuracy and answer scores by category and over all questions."""
    lines = [
        "",
        "## Accuracy",
        "",
        "| category | accuracy | F1 | F1 (LoCoMo) | BLEU-1 |",
        "| --- | --- | --- | --- | --- |",
    ]
    rows = [(f"{c} {b['name']}", b, b["scores"]) for c, b in s["by_category"].items()]
    rows.append(("all", s["accuracy"], s["scores"]))
    for label, block, sc in rows:
        lines.append(
            f"| {label} | {_acc(block)} | {sc['f1']} | {sc['f1_locomo']} | {sc['bleu1']} |"
        )
    return lines


def evidence_section(s: Summary) -> list[str]:
    """Where the complete evidence was visible, what each row counts, and the grounding audit."""
    ev = s["evidence"]
    lines = ["", "## Evidence", "", f"Questions with annotated evidence: {ev['questions']}.", ""]
    lines += ["| complete evidence visible in | share |", "| --- | --- |"]
    for key in VISIBILITY_RULES:
        lines.append(f"| {key} | {_pct(ev[f'visible_{key}'])} |")
    lines.append(f"| (mean share of evidence turns cited) | {_pct(ev['cited_share'])} |")
    lines += ["", "Which turns each row counts as shown:", ""]
    lines += [f"- {key}: {rule}." for key, rule in s["visibility_rules"].items()]
    return lines + render_grounding(s["grounding"])


def refinement_section(s: Summary) -> list[str]:
    """How often refinement ran (and by what the round-0 pool showed), what it changed on the
    triggered questions, what it cost and how it ended."""
    rf = s["refinement"]
    lines = [
        "",
        "## Refinement",
        "",
        f"Triggered on {rf['triggered']} of {rf['questions']} ({_pct(rf['trigger_rate'])}); "
        f"accuracy when triggered {_pct(rf['accuracy_triggered'])}, otherwise "
        f"{_pct(rf['accuracy_not_triggered'])}"
        + (f"; terminations {rf['terminations']}." if rf["terminations"] else "."),
    ]
    by_initial = rf.get("trigger_by_initial_evidence")
    if by_initial:
        lines += [
            "",
            "| round-0 pool | questions | triggered | trigger rate |",
            "| --- | --- | --- | --- |",
        ]
        for key, label in (
            ("initial_visible", "shows all evidence"),
            ("initial_not_visible", "misses evidence"),
        ):
            b = by_initial[key]
            lines.append(
                f"| {label} | {b['questions']} | {b['triggered']} | {_pct(b['trigger_rate'])} |"
            )
    ba = rf.get("triggered_before_after")
    if ba and ba["questions"]:
        lines += [
            "",
            f"Triggered questions with a judged round-0 answer: {ba['questions']}; accuracy "
            f"from the round-0 cards {_pct(ba['accuracy_before'])}, after refinement "
            f"{_pct(ba['accuracy_after'])} (fixed {ba['fixed']}, broken {ba['broken']}).",
        ]
    lines += [
        "",
        "| extra cost of refinement | per question | per triggered question |",
        "| --- | --- | --- |",
    ]
    for label, key in (("calls", "calls"), ("tokens", "tokens"), ("USD", "cost_usd")):
        per_q, per_t = rf.get(f"extra_{key}_per_question"), rf.get(f"extra_{key}_per_triggered")
        lines.append(f"| {label} | {per_q} | {per_t} |")
    if "round0_answer_calls" in rf:
        lines += [
            "",
            f"The round-0 answers (analysis only, outside the method's cost): "
            f"{rf['round0_answer_calls']} calls, USD {rf['round0_answer_cost_usd']}.",
        ]
    return lines


def cost_section(s: Summary) -> list[str]:
    """Calls, tokens and USD per question by stage, and the method's total (no judge)."""
    lines = [
        "",
        "## Cost per question",
        "",
        "| stage | calls | input tokens | output tokens | USD | cost share | token share |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for stage, t in s["cost"]["by_stage"].items():
        lines.append(
            f"| {stage} | {t['calls_per_question']} | {t['input_tokens_per_question']} | "
            f"{t['output_tokens_per_question']} | {t['cost_usd_per_question']} | "
            f"{_pct(t['cost_share'])} | {_pct(t['token_share'])} |"
        )
    c = s["cost"]
    lines.append(
        f"| method (no judge) | {c['method_calls_per_question']} | "
        f"{c['method_input_tokens_per_question']} | {c['method_output_tokens_per_question']} | "
        f"{c['method_cost_usd_per_question']} | | |"
    )
    return lines


def complexity_section(s: Summary) -> list[str]:
    """Accuracy and final visibility by evidence span, turn count and session count."""
    lines = ["", "## Evidence complexity", "", "| group | bucket | accuracy | final visible |"]
    lines.append("| --- | --- | --- | --- |")
    for group, buckets in s["complexity"].items():
        for label, block in buckets.items():
            lines.append(f"| {group} | {label} | {_acc(block)} | {_pct(block['visible_final'])} |")
    return lines


def coverage_section(s: Summary) -> list[str]:
    """The initial pool's evidence coverage over turn budgets, its 80% milestone, and by
    category within 20 turns and over the whole initial pool."""
    cov = s["coverage"]
    lines = [
        "",
        "## Initial-pool coverage",
        "",
        f"AUC over turn budgets 10-120: {_pct(cov['auc'])} ({cov['questions']} questions; mean "
        f"initial pool {cov['mean_initial_pool_turns']} turns).",
        "",
        "| budget | " + " | ".join(cov["coverage"]) + " |",
        "| --- " * (len(cov["coverage"]) + 1) + "|",
        "| coverage | " + " | ".join(_pct(v) for v in cov["coverage"].values()) + " |",
        "",
    ]
    if "milestone_turns" in cov:
        reached = cov["milestone_turns"]
        lines += [
            "80% complete-evidence coverage: "
            + ("never within the pool" if reached is None else f"at {reached} turns")
            + f"; planning {'on' if s.get('planning', True) else 'off (--no-plan)'}.",
            "",
            "| category | questions | within 20 turns | whole initial pool |",
            "| --- | --- | --- | --- |",
        ]
        for category, block in cov["by_category"].items():
            lines.append(
                f"| {category} | {block['questions']} | {_pct(block['at_20'])} | "
                f"{_pct(block['whole_pool'])} |"
            )
        lines.append("")
    return lines


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def errata_section(s: Summary) -> list[str]:
    """Accuracy on the original and the corrected gold side by side, and the changed
    questions (only when the run was scored against an errata file)."""
    block = s.get("errata")
    if not block:
        return []
    original, corrected = block["original"], block["corrected"]
    categories = sorted(set(original["by_category"]) | set(corrected["by_category"]), key=int)
    lines = [
        "",
        "## Known answer-key errors",
        "",
        f"Errata file `{block['file']}` (sha256 {block['sha256'][:12]}…): "
        f"{block['corrected_questions']} corrected, {block['excluded_questions']} excluded.",
        "",
        "| gold | n | accuracy | " + " | ".join(f"cat {c}" for c in categories) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in categories) + " |",
    ]
    for name, side in (("original", original), ("corrected", corrected)):
        cells = [_pct(side["by_category"].get(c)) for c in categories]
        lines.append(
            f"| {name} | {side['n']} | {_pct(side['accuracy'])} | " + " | ".join(cells) + " |"
        )
    if block["changed"]:
        lines += [
            "",
            "| question | gold | corrected | reason | score before | after |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in block["changed"]:
            fixed = "excluded" if row["excluded"] else _cell(row["corrected"])
            lines.append(
                f"| {row['key']} | {_cell(row['gold'])} | {fixed} | {_cell(row['reason'])} | "
                f"{row['score_original']} | {row['score_corrected']} |"
            )
    if block["unmatched"]:
        lines += ["", f"Not in this run: {', '.join(block['unmatched'])}."]
    return lines


SECTIONS = (
    header,
    accuracy_section,
    errata_section,
    evidence_section,
    refinement_section,
    cost_section,
    complexity_section,
    coverage_section,
)


def render_markdown(summary: Summary, plots: Sequence[str], note: str = "") -> str:
    """report.md: the tables of the summary, the plots and ``note``."""
    lines = [line for section in SECTIONS for line in section(summary)]
    lines += [f"![{p}]({p})" for p in plots]
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"
