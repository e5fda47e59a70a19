"""The analyses of a LoCoMo run and the reports of its folder: ``summary.json`` from its
records, ``report.md`` (:mod:`qemem.eval.markdown`), the PNG plots (:mod:`qemem.eval.plots`) and
``report.html`` (:func:`qemem.view.report_html`).

``summary.json`` is a pure function of the records and the run's models: keys sorted, floats
rounded, no timestamps or durations (those go to ``timings.json``), so a rerun from a warm LLM
cache reproduces it byte for byte. Evidence analyses count only questions with annotated
evidence; accuracy counts only judged questions (none in retrieval mode).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from qemem.errors import InputError
from qemem.eval.audit.markdown import audit_markdown, load_audits
from qemem.eval.coverage import (
    MILESTONE,
    PLANNING_BUDGET,
    TURN_BUDGETS,
    auc,
    coverage_curve,
    milestone,
)
from qemem.eval.errata import ERRATA_FILE, changed_questions, corrected_records
from qemem.eval.grounding import VISIBILITY_RULES, grounding
from qemem.eval.markdown import render_markdown
from qemem.eval.plots import plot_images, write_plots
from qemem.eval.results import load_records, record_key, run_records
from qemem.eval.sources import load_run_sources
from qemem.eval.stats import mean_std, wilson_interval
from qemem.ingest.locomo import CATEGORY_NAMES
from qemem.llm.stages import ANSWER, ANSWER_ROUND0, CONSTRUCT, JUDGE, PLAN
from qemem.view import report_html

Record = Mapping[str, Any]
METHOD_STAGES = (PLAN, CONSTRUCT, ANSWER)
#: stages that measure the method rather than belong to it (left out of the method's cost)
ANALYSIS_STAGES = (JUDGE, ANSWER_ROUND0)
EVIDENCE_TURN_BUCKETS = ("1", "2", ">=3")
SPAN_BUCKETS = ("same session", "<=30 days", "31-180 days", ">180 days")
#: the evidence visibility stages, in order: initial pool, refined pool, final context, cited
VISIBILITY = tuple(VISIBILITY_RULES)


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# ---------------------------------------------------------------------------- analyses


def accuracy(records: Sequence[Record]) -> dict[str, Any]:
    """Judge accuracy of the judged records: mean over questions (of the per-question share of
    CORRECT runs), Wilson 95% interval (successes = accuracy x n, rounded), per-run accuracies
    with their mean and sample std, and parse failures."""
    judged = [r for r in records if r["judge_labels"]]
    n = len(judged)
    if not n:
        return {"n": 0, "accuracy": None}
    mean = sum(float(r["score"]) for r in judged) / n
    runs = min(len(r["judge_labels"]) for r in judged)
    per_run = [sum(r["judge_labels"][j] == "CORRECT" for r in judged) / n for j in range(runs)]
    low, high = wilson_interval(round(mean * n), n)
    run_mean, run_std = mean_std(per_run)
    return {
        "n": n,
        "accuracy": _r(mean),
        "ci95": [_r(low), _r(high)],
        "runs": [_r(a) for a in per_run],
        "mean_over_runs": _r(run_mean),
        "std_over_runs": _r(run_std),
        "parse_failures": sum(int(r["judge_parse_failures"]) for r in judged),
    }


def scores(records: Sequence[Record]) -> dict[str, float | None]:
    """Mean token F1 (both conventions) and BLEU-1 of the records that have them."""
    keys = ("f1", "f1_locomo", "bleu1")
    return {k: _r(_mean([float(r[k]) for r in records if r[k] is not None])) for k in keys}


def _block(records: Sequence[Record]) -> dict[str, Any]:
    return {**accuracy(records), "scores": scores(records)}


def by_category(records: Sequence[Record]) -> dict[str, Any]:
    """Accuracy and scores per raw category number, with its name."""
    out = {}
    for category in sorted({int(r["category"]) for r in records}):
        chosen = [r for r in records if int(r["category"]) == category]
        out[str(category)] = {"name": CATEGORY_NAMES.get(category, str(category)), **_block(chosen)}
    return out


def evidence(records: Sequence[Record]) -> dict[str, Any]:
    """Complete-evidence visibility of the initial pool, the pool after refinement, the final
    answer context and the card citations; mean share of evidence turns the cards cite (None
    where the mode has no cards)."""
    with_evidence = [r for r in records if r["evidence"]]
    out: dict[str, Any] = {
        "questions": len(with_evidence),
        "unknown_evidence_questions": sum(1 for r in with_evidence if r["evidence_unknown"]),
    }
    for key in (*VISIBILITY, "cited_share"):
        values = [r["visibility"][key] for r in with_evidence]
        known = [float(v) for v in values if v is not None]
        out[key if key == "cited_share" else f"visible_{key}"] = _r(_mean(known))
    return out


def _share(part: int, whole: int) -> float | None:
    return _r(part / whole) if whole else None


def _per(total: float | None, n: int, digits: int = 4) -> float | None:
    return _r(total / n, digits) if n and total is not None else None


def _sum_cost(values: Iterable[Any]) -> float | None:
    """Sum of nominal costs; None when any is unpriced (None)."""
    costs = list(values)
    return None if any(c is None for c in costs) else sum(float(c) for c in costs)


def trigger_by_initial(records: Sequence[Record]) -> dict[str, Any]:
    """Trigger rate where the round-0 pool already shows all annotated evidence, and where it
    does not (questions with annotated evidence only)."""
    out: dict[str, Any] = {}
    for key, wanted in (("initial_visible", True), ("initial_not_visible", False)):
        chosen = [
            r for r in records if r["evidence"] and bool(r["visibility"]["initial"]) is wanted
        ]
        triggered = sum(1 for r in chosen if r["refinement"]["triggered"])
        out[key] = {
            "questions": len(chosen),
            "triggered": triggered,
            "trigger_rate": _share(triggered, len(chosen)),
        }
    return out


def before_after(records: Sequence[Record]) -> dict[str, Any]:
    """Accuracy of the triggered questions from the round-0 cards (before refinement) and after
    it, over those whose round-0 answer was judged; how many refinement fixed or broke."""
    pairs = [
        (float(r["refinement"]["round0_score"]), float(r["score"]))
        for r in records
        if r["refinement"]["triggered"]
        and r["refinement"].get("round0_score") is not None
        and r["score"] is not None
    ]
    n = len(pairs)
    return {
        "questions": n,
        "accuracy_before": _r(_mean([b for b, _ in pairs])),
        "accuracy_after": _r(_mean([a for _, a in pairs])),
        "difference": _r(_mean([a - b for b, a in pairs])),
        "fixed": sum(1 for b, a in pairs if a > b),
        "broken": sum(1 for b, a in pairs if a < b),
    }


def refinement(records: Sequence[Record], refines: bool = True) -> dict[str, Any]:
    """Trigger rate (overall, and by whether the round-0 pool already showed all evidence),
    accuracy with and without refinement, accuracy of the triggered questions before and
    after it (:func:`before_after`), rounds, extra calls, tokens and cost of the refinement
    rounds per question and per triggered question, the round-0 answer calls (analysis cost,
    not the method's), and how the loop ended (``terminations``, empty for a mode that does
    not refine)."""
    n = len(records)
    triggered = [r for r in records if r["refinement"]["triggered"]]
    rest = [r for r in records if not r["refinement"]["triggered"]]
    k = len(triggered)
    info = [r["refinement"] for r in records]
    extra_calls = sum(int(i["extra_calls"]) for i in info)
    extra_tokens = (
        sum(int(i["extra_input_tokens"]) + int(i["extra_output_tokens"]) for i in info)
        if all("extra_input_tokens" in i for i in info)
        else None  # records written before the token counts
    )
    extra_cost = _sum_cost(i["extra_cost_usd"] for i in info)
    return {
        "questions": n,
        "triggered": k,
        "trigger_rate": _share(k, n),
        "trigger_by_initial_evidence": trigger_by_initial(records),
        "accuracy_triggered": accuracy(triggered)["accuracy"],
        "accuracy_not_triggered": accuracy(rest)["accuracy"],
        "triggered_before_after": before_after(records),
        "mean_rounds_triggered": _r(_mean([float(r["refinement"]["rounds"]) for r in triggered])),
        "extra_calls_per_question": _per(extra_calls, n),
        "extra_calls_per_triggered": _per(extra_calls, k),
        "extra_tokens_per_question": _per(extra_tokens, n, 1),
        "extra_tokens_per_triggered": _per(extra_tokens, k, 1),
        "extra_cost_usd_per_question": _per(extra_cost, n, 6),
        "extra_cost_usd_per_triggered": _per(extra_cost, k, 6),
        "round0_answer_calls": sum(int(i.get("round0_calls", 0)) for i in info),
        "round0_answer_cost_usd": _r(_sum_cost(i.get("round0_cost_usd", 0.0) for i in info), 6),
        "terminations": dict(Counter(str(r["refinement"]["termination"]) for r in records))
        if refines
        else {},
    }


def cost(records: Sequence[Record]) -> dict[str, Any]:
    """Per question: calls, tokens and nominal USD by stage group; method totals (plan,
    construct, answer and anything else but the analysis stages: the judge and the round-0
    answer) and each stage's share of them."""
    n = len(records)
    stages = sorted({s for r in records for s in r["llm"]})
    per_stage: dict[str, Any] = {}
    for stage in stages:
        tallies = [r["llm"][stage] for r in records if stage in r["llm"]]
        costs = [t["cost_usd"] for t in tallies]
        total_cost = None if any(c is None for c in costs) else sum(float(c) for c in costs)
        per_stage[stage] = {
            "calls": sum(int(t["calls"]) for t in tallies),
            "input_tokens": sum(int(t["input_tokens"]) for t in tallies),
            "output_tokens": sum(int(t["output_tokens"]) for t in tallies),
            "cost_usd": total_cost,
        }
    method = {k: v for k, v in per_stage.items() if k not in ANALYSIS_STAGES}

    def total(tallies: Iterable[Mapping[str, Any]], key: str) -> float | None:
        values = [t[key] for t in tallies]
        return None if any(v is None for v in values) else float(sum(values))

    tokens = (
        total([{"t": t["input_tokens"] + t["output_tokens"]} for t in method.values()], "t") or 0.0
    )
    method_cost = total(method.values(), "cost_usd")
    out: dict[str, Any] = {"questions": n, "by_stage": {}}
    for stage, t in per_stage.items():
        stage_tokens = t["input_tokens"] + t["output_tokens"]
        out["by_stage"][stage] = {
            "calls_per_question": _r(t["calls"] / n) if n else None,
            "input_tokens_per_question": _r(t["input_tokens"] / n, 1) if n else None,
            "output_tokens_per_question": _r(t["output_tokens"] / n, 1) if n else None,
            "cost_usd_per_question": _r(t["cost_usd"] / n, 6)
            if n and t["cost_usd"] is not None
            else None,
            "cost_share": _r(t["cost_usd"] / method_cost)
            if stage not in ANALYSIS_STAGES and method_cost and t["cost_usd"] is not None
            else None,
            "token_share": _r(stage_tokens / tokens)
            if stage not in ANALYSIS_STAGES and tokens
            else None,
        }
    for key, label in (
        ("calls", "calls"),
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("cost_usd", "cost_usd"),
    ):
        value = total(method.values(), key)
        digits = {"calls": 4, "cost_usd": 6}.get(key, 1)
        out[f"method_{label}_per_question"] = (
            _r(value / n, digits) if n and value is not None else None
        )
    return out


def span_bucket(record: Record) -> str | None:
    """Time between the earliest and latest evidence session: same session, <=30 days,
    31-180 days, >180 days (calendar days between session dates); None without known evidence."""
    sessions, days = record["evidence_sessions"], record["evidence_span_days"]
    if not sessions or days is None:
        return None
    if len(sessions) == 1:
        return SPAN_BUCKETS[0]
    return SPAN_BUCKETS[1] if days <= 30 else SPAN_BUCKETS[2] if days <= 180 else SPAN_BUCKETS[3]


def turns_bucket(record: Record) -> str | None:
    """Number of annotated evidence turns: 1, 2 or >=3 (None for none)."""
    count = len(record["evidence"])
    return None if count == 0 else EVIDENCE_TURN_BUCKETS[min(count, 3) - 1]


def sessions_bucket(record: Record) -> str | None:
    """single-session or cross-session evidence (None without known evidence)."""
    sessions = record["evidence_sessions"]
    return None if not sessions else "single-session" if len(sessions) == 1 else "cross-session"


def complexity(records: Sequence[Record]) -> dict[str, Any]:
    """Accuracy (and final-context visibility) by evidence turns, sessions and time span."""
    groups: dict[str, tuple[Callable[[Record], str | None], Sequence[str]]] = {
        "evidence_turns": (turns_bucket, EVIDENCE_TURN_BUCKETS),
        "sessions": (sessions_bucket, ("single-session", "cross-session")),
        "span": (span_bucket, SPAN_BUCKETS),
    }
    out: dict[str, Any] = {}
    for name, (bucket, labels) in groups.items():
        out[name] = {}
        for label in labels:
            chosen = [r for r in records if bucket(r) == label]
            visible = [float(bool(r["visibility"]["final"])) for r in chosen]
            out[name][label] = {**accuracy(chosen), "visible_final": _r(_mean(visible))}
    return out


def coverage(records: Sequence[Record]) -> dict[str, Any]:
    """Coverage curve of the initial pool over turn budgets 10-120, with its AUC, the smallest
    turn budget reaching 80% (None: never within the pool), and per category the coverage
    within 20 turns and over the whole initial pool (the planning ablation's figures)."""
    ranks = [r["visibility"]["initial_pool_rank"] for r in records if r["evidence"]]
    curve = coverage_curve(ranks, TURN_BUDGETS)
    sizes = [float(len(r["initial_pool_turn_ids"])) for r in records]
    with_evidence = [r for r in records if r["evidence"]]
    by_category: dict[str, Any] = {}
    for category, chosen in _by_category(with_evidence).items():
        found = [r["visibility"]["initial_pool_rank"] for r in chosen]
        by_category[category] = {
            "questions": len(chosen),
            f"at_{PLANNING_BUDGET}": _r(coverage_curve(found, [PLANNING_BUDGET])[PLANNING_BUDGET]),
            "whole_pool": _r(_mean([float(bool(r["visibility"]["initial"])) for r in chosen])),
        }
    return {
        "questions": len(ranks),
        "coverage": {str(b): _r(v) for b, v in curve.items()},
        "auc": _r(auc(curve)) if ranks else None,
        "mean_initial_pool_turns": _r(_mean(sizes), 1),
        "milestone_turns": milestone(ranks, MILESTONE),
        "by_category": by_category,
    }


def errata_summary(records: Sequence[Record], judged: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy (overall and by category) on the original gold and on the corrected gold side
    by side, the changed questions, and the errata keys the records lack (``judged`` as
    :func:`~qemem.eval.errata.judge_errata` gives)."""
    fixed = corrected_records(records, judged)

    def side(chosen: Sequence[Record]) -> dict[str, Any]:
        return {
            **accuracy(chosen),
            "by_category": {c: accuracy(b)["accuracy"] for c, b in _by_category(chosen).items()},
        }

    changed = changed_questions(records, judged)
    return {
        "file": judged.get("file"),
        "sha256": judged.get("sha256"),
        "original": side(records),
        "corrected": side(fixed),
        "corrected_questions": sum(1 for c in changed if not c["excluded"]),
        "excluded_questions": sum(1 for c in changed if c["excluded"]),
        "changed": changed,
        "unmatched": list(judged.get("unmatched", [])),
    }


def _by_category(records: Sequence[Record]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = {}
    for record in sorted(records, key=lambda r: int(r["category"])):
        groups.setdefault(str(record["category"]), []).append(record)
    return groups


def summarise(
    records: Sequence[Record],
    manifest: Mapping[str, Any],
    errata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every analysis of the records, as summary.json holds it; ``errata`` (an
    ``errata.json``'s content) adds accuracy on the corrected gold."""
    records = sorted(records, key=record_key)
    return {
        "mode": str(manifest.get("mode", "")),
        "answerer": manifest.get("answerer"),
        "judge": manifest.get("judge"),
        "judge_is_answerer": bool(manifest.get("judge_is_answerer", False)),
        "judge_runs": manifest.get("judge_runs"),
        "built": bool(manifest.get("built", True)),
        "embedder": manifest.get("embedder"),
        "questions": len(records),
        "conversations": sorted({str(r["conversation"]) for r in records}),
        "accuracy": accuracy(records),
        "scores": scores(records),
        "by_category": by_category(records),
        "evidence": evidence(records),
        "refinement": refinement(records, refines=manifest.get("mode") == "full"),
        "cost": cost(records),
        "complexity": complexity(records),
        "coverage": coverage(records),
        "degraded_questions": sum(1 for r in records if r["degradations"]),
        "grounding": grounding(records),
        "visibility_rules": dict(VISIBILITY_RULES),
        "degradations_by_kind": dict(
            Counter(str(d).split(":")[0] for r in records for d in r["degradations"])
        ),
        "planning": bool(manifest.get("planning", True)),
        "errata": errata_summary(records, errata) if errata is not None else None,
    }


def write_report(
    out: Path,
    records: Sequence[Record],
    manifest: Mapping[str, Any],
    *,
    plots: bool = True,
    errata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write summary.json, the plots (unless ``plots`` is False), report.md and report.html
    into ``out``; return the summary. ``errata`` is the run's ``errata.json`` content."""
    summary = summarise(records, manifest, errata)
    (out / "summary.json").write_text(
        json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n", "utf-8"
    )
    made, note = write_plots(out, summary) if plots else ([], "")
    build = out / "build.json"
    if build.exists():
        reports = json.loads(build.read_text("utf-8"))
        calls = sum(t["calls"] for r in reports.values() for t in r["llm"].values())
        costs = [t["cost_nominal_usd"] for r in reports.values() for t in r["llm"].values()]
        usd = "n/a" if any(c is None for c in costs) else f"{sum(costs):.4f}"
        note = (
            f"Memory construction (one-off, not in the per-question cost): {calls} calls, "
            f"USD {usd} over {len(reports)} conversation(s); see build.json.\n\n{note}"
        ).strip()
    audits = audit_markdown(out)
    markdown = render_markdown(summary, made, note)
    (out / "report.md").write_text(markdown + ("\n" + audits if audits else ""), "utf-8")
    write_report_html(out, records)
    return summary


def write_report_html(out: Path, records: Sequence[Record] | None = None) -> Path:
    """Write ``report.html`` (:func:`qemem.view.report_html`) into the run folder ``out`` for
    ``records`` (default: its results.jsonl), with its summary.json (else the summary of the
    records and manifest.json), sources.json and plots when present; return its path."""
    if records is None:
        records = load_records(out / "results.jsonl")
    path = out / "summary.json"
    if path.exists():
        summary = json.loads(path.read_text("utf-8"))
    else:
        manifest_path = out / "manifest.json"
        manifest = json.loads(manifest_path.read_text("utf-8")) if manifest_path.exists() else {}
        summary = summarise(records, manifest)
    ordered = sorted(records, key=record_key)
    html = report_html(
        ordered, summary, plot_images(out), load_run_sources(out), audits=load_audits(out)
    )
    target = out / "report.html"
    target.write_text(html, "utf-8")
    return target


def rebuild_report(out: Path) -> dict[str, Any]:
    """Rewrite summary.json, report.md and the plots of the run folder ``out`` from its
    results.jsonl and manifest.json alone (no LLM, no store, no data file): the records of the
    run's selection and mode, as the run wrote them, so the files come out byte-identical."""
    manifest, records = run_records(out)
    plots = bool(manifest.get("config", {}).get("plots", True))
    return write_report(
        out, records, manifest, plots=plots, errata=load_judged_errata(out, manifest)
    )


def load_judged_errata(out: Path, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's ``errata.json`` when its manifest records an errata file, else None."""
    if not manifest.get("errata"):
        return None
    path = out / ERRATA_FILE
    if not path.exists():
        raise InputError(
            f"{out}'s manifest records an errata file but {path} is missing: rerun "
            "qemem eval report --errata FILE"
        )
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data
