"""The summary and report of a BEAM run: ``summary.json`` and ``report.md``.

``summary.json`` is a pure function of the records and the manifest (keys sorted, floats
rounded, no durations): BEAM's scores per ability and overall (:func:`beam_average`) with
95% intervals from resampling chats, the event-ordering figures, LLM-free evidence coverage
per ability (probes without evidence counted apart), and tokens and cost per probe.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qemem.datasets.beam_probes import ABILITIES
from qemem.eval.answering import COVERAGE_BUDGETS, cost_per_question, coverage_block
from qemem.eval.beam_scoring import ProbeScore, beam_average, chat_bootstrap
from qemem.eval.results import run_records

Record = Mapping[str, Any]


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _order(names: Sequence[str]) -> list[str]:
    """Abilities in BEAM's order, unknown ones after, alphabetically."""
    known = [a for a in ABILITIES if a in names]
    return known + sorted(set(names) - set(known))


def scores(records: Sequence[Record], *, seed: int = 0) -> dict[str, Any] | None:
    """BEAM's averaged scores of the judged records (None when none was judged)."""
    judged = [
        ProbeScore(str(r["conversation"]), str(r["ability"]), float(r["score"]))
        for r in records
        if r["score"] is not None
    ]
    if not judged:
        return None
    average = beam_average(judged)
    intervals = chat_bootstrap(judged, seed=seed)

    def ci(name: str) -> list[float | None] | None:
        found = intervals.get(name)
        return [_r(found[0]), _r(found[1])] if found else None

    by_ability = {}
    for ability in _order(list(average.by_ability)):
        chosen = [s for s in judged if s.ability == ability]
        by_ability[ability] = {
            "score": _r(average.by_ability[ability]),
            "ci95": ci(ability),
            "probes": len(chosen),
            "chats": len({s.chat for s in chosen}),
        }
    return {
        "overall": _r(average.overall),
        "ci95": ci("overall"),
        "probes": len(judged),
        "chats": average.chats,
        "by_ability": by_ability,
        "interval": "95% percentile, 2,000 resamples of the chats",
    }


def ordering(records: Sequence[Record]) -> dict[str, Any] | None:
    """Mean event-ordering figures: tau_norm (the score), F1, their product, rubric mean."""
    found = [r for r in records if r.get("ordering")]
    if not found:
        return None
    keys = ("tau_norm", "f1", "tau_norm_x_f1", "precision", "recall")
    out = {k: _r(_mean([float(r["ordering"][k]) for r in found])) for k in keys}
    out["rubric_score"] = _r(_mean([float(r["rubric_score"]) for r in found]))
    out["probes"] = len(found)
    return out


def coverage(records: Sequence[Record]) -> dict[str, Any]:
    """LLM-free evidence coverage, overall and per ability: over the probes with evidence,
    the share whose every evidence turn the initial pool's exposure order holds within each
    token budget, in the whole initial pool, and in the answer prompt."""
    abilities = _order(sorted({str(r["ability"]) for r in records}))
    return {
        "overall": coverage_block(records),
        "by_ability": {
            a: coverage_block([r for r in records if r["ability"] == a]) for a in abilities
        },
    }


def summarise(records: Sequence[Record], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The run's summary."""
    return {
        "benchmark": "BEAM",
        "mode": manifest.get("mode"),
        "answerer": manifest.get("answerer"),
        "judge": manifest.get("judge"),
        "data_sha256": manifest.get("data_sha256"),
        "probes": len(records),
        "parse_failures": sum(int(r["judge_parse_failures"]) for r in records),
        "score": scores(records),
        "event_ordering": ordering(records),
        "coverage": coverage(records),
        "cost": cost_per_question(records),
    }


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}"


def _ci(block: Mapping[str, Any]) -> str:
    found = block.get("ci95")
    return "-" if not found else f"{_pct(found[0])}-{_pct(found[1])}"


def render_markdown(summary: Mapping[str, Any]) -> str:
    """report.md of a BEAM run."""
    lines = [
        f"# BEAM run: mode {summary['mode']}",
        "",
        f"Answerer {summary['answerer']}, judge {summary['judge']}; {summary['probes']} probes; "
        f"judge parse failures {summary['parse_failures']}.",
        "",
    ]
    score = summary["score"]
    if score:
        lines += [
            "## Scores (%, BEAM's rubric judge; event ordering by tau_norm)",
            "",
            "| ability | score | 95% CI | probes | chats |",
            "|---|---|---|---|---|",
        ]
        for ability, block in score["by_ability"].items():
            lines.append(
                f"| {ability} | {_pct(block['score'])} | {_ci(block)} | {block['probes']} "
                f"| {block['chats']} |"
            )
        lines += [
            f"| **overall** | **{_pct(score['overall'])}** | {_ci(score)} | {score['probes']} "
            f"| {score['chats']} |",
            "",
        ]
    budgets = [str(b) for b in COVERAGE_BUDGETS]
    lines += [
        "## Evidence coverage (LLM-free; probes without evidence counted apart)",
        "",
        "| ability | probes | without | "
        + " | ".join(f"<= {b} tok" for b in budgets)
        + " | initial pool | answer prompt |",
        "|---|---|---|" + "---|" * (len(budgets) + 2),
    ]
    blocks = [("all", summary["coverage"]["overall"]), *summary["coverage"]["by_ability"].items()]
    for name, block in blocks:
        cells = [_pct(block.get("tokens", {}).get(b)) for b in budgets]
        cells += [_pct(block.get("visible_initial")), _pct(block.get("visible_final"))]
        lines.append(
            f"| {name} | {block['probes']} | {block['without_evidence']} | "
            + " | ".join(cells)
            + " |"
        )
    lines += ["", "## Cost per probe", ""]
    lines += [f"- {k}: {v}" for k, v in sorted(summary["cost"].items())]
    return "\n".join(lines) + "\n"


def rebuild_beam_report(out: Path) -> dict[str, Any]:
    """Rewrite a BEAM run folder's summary.json and report.md from its records (no LLM call)."""
    manifest, records = run_records(out)
    return write_beam_report(out, records, manifest)


def write_beam_report(
    out: Path, records: Sequence[Record], manifest: Mapping[str, Any]
) -> dict[str, Any]:
    """Write summary.json and report.md into the run folder ``out``; return the summary."""
    summary = summarise(records, manifest)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", "utf-8")
    (out / "report.md").write_text(render_markdown(summary), "utf-8")
    return summary
