"""Summary-level figures of `qemem eval locomo` run folders (and their audits) as Markdown.

    python benchmarks/results_page.py RUN [RUN ...]

Reads each folder's manifest.json, summary.json and, when present, audit-claims.json and
audit-answers.json, and prints: what was run, accuracy by category with Wilson 95%
intervals, calls and tokens per question by stage, evidence visibility, grounding, the
audits with their intervals, and every figure of qemem reproduce's conditions that has a
published value, beside that value. It prints no question, answer or conversation text.
The results page's capable-model block is this output (scripts/docs_blocks.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qemem.reproduce.conditions import Figure, load_conditions
from qemem.reproduce.grading import extract

CATEGORIES = ("1", "2", "3", "4")
STAGES = ("plan", "construct", "answer")
# the reproduce runs whose output a run folder holds, and the file holding it
RUN_FILES = {
    "locomo-full": "summary.json",
    "audit-claims": "audit-claims.json",
    "audit-answers": "audit-answers.json",
}


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def interval(ci: Sequence[float] | None) -> str:
    return "" if not ci else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def number(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def load(folder: Path, name: str) -> Any:
    path = folder / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def provenance(folder: Path, manifest: dict[str, Any], summary: dict[str, Any]) -> str:
    config = manifest["config"]
    budgets = "the default budgets" if config.get("retrieval") is None else "set budgets"
    memory = "memory built" if summary["built"] else "turns-only memory (nothing built)"
    judge = "the answerer's own model" if manifest["judge_is_answerer"] else "a separate judge"
    return (
        f"Run `{folder.name}`: `qemem eval locomo --mode {summary['mode']}` (qemem "
        f"{manifest['qemem']}, {budgets}, {manifest['prompt_layout']} prompt layout, embedder "
        f"{summary['embedder']}, {memory}); {summary['questions']} questions of LoCoMo "
        f"categories {', '.join(str(c) for c in config['categories'])} from "
        f"{len(summary['conversations'])} conversations ({', '.join(summary['conversations'])}; "
        f"data sha256 {manifest['data_sha256'][:8]}…); answers through the `cmd` provider, "
        f"graded by {judge} ({manifest['judge_runs']} judge run).\n"
    )


def accuracy(summary: dict[str, Any]) -> str:
    rows = []
    for key in CATEGORIES:
        if c := summary["by_category"].get(key):
            share = pct(c["accuracy"]) + interval(c["ci95"])
            rows.append([f"{key} {c['name']}", str(c["n"]), share, *_f1(c["scores"])])
    a = summary["accuracy"]
    share = f"**{pct(a['accuracy'])}**" + interval(a["ci95"])
    if a["runs"] == [a["accuracy"]]:  # one judge run: the count of correct answers
        share += f" ({round(a['accuracy'] * a['n'])} of {a['n']})"
    rows.append(["all", str(a["n"]), share, *_f1(summary["scores"])])
    columns = ["category", "questions", "judge accuracy [Wilson 95%]", "F1", "F1 (LoCoMo)"]
    return table(columns, rows)


def _f1(scores: dict[str, float]) -> list[str]:
    return [number(scores["f1"]), number(scores["f1_locomo"])]


def cost(summary: dict[str, Any]) -> str:
    stages, c = summary["cost"]["by_stage"], summary["cost"]
    rows = [[stage, *_per_question(stages[stage])] for stage in STAGES if stage in stages]
    method = {k.removeprefix("method_"): v for k, v in c.items() if k.startswith("method_")}
    rows.append(["**method**", *_per_question(method)])
    if "judge" in stages:
        rows.append(["judge (outside the method)", *_per_question(stages["judge"])])
    return table(["stage", "calls", "input tokens", "output tokens"], rows)


def _per_question(stage: dict[str, Any]) -> list[str]:
    keys = ("calls_per_question", "input_tokens_per_question", "output_tokens_per_question")
    return [number(stage[key]) for key in keys]


def evidence(summary: dict[str, Any]) -> str:
    e, g = summary["evidence"], summary["grounding"]
    rows = [
        ["complete evidence in the initial pool", pct(e["visible_initial"])],
        ["... after refinement", pct(e["visible_refined"])],
        ["... in the final answer context", pct(e["visible_final"])],
        ["... among the cards' cited turns", pct(e["visible_cited"])],
        [
            "coverage AUC of the initial pool (turn budgets 10-120)",
            number(summary["coverage"]["auc"]),
        ],
        ["cards per question", number(g["cards_per_question"])],
        [f"card quotes verified (of {g['cards']})", pct(g["verified"])],
        ["... against a speaker's original turn", pct(g["verified_against_turns"])],
        [f"card times agreeing with the rules (of {g['time_cards']})", pct(g["time_agreement"])],
        ["refinement triggered", pct(summary["refinement"]["trigger_rate"])],
    ]
    return table(["figure", "value"], rows)


def claim_audit(audit: dict[str, Any]) -> str:
    overall = audit["overall"]
    labels = ("fully supported", "partially supported", "supported_or_partial", "unsupported")
    rows = [
        [label.replace("_", " "), pct(overall[label]["share"]) + interval(overall[label]["ci95"])]
        for label in (*labels, "contradicted")
    ]
    head = (
        f"Claim audit: {audit['sampled']} of {audit['population']} cards (stratified, seed "
        f"{audit['seed']}), judged from the claim, its time and its cited sources only; "
        f"population-weighted shares with bootstrap 95% intervals.\n"
    )
    return head + "\n" + table(["label", "share [95%]"], rows)


def answer_audit(audit: dict[str, Any]) -> str:
    rows = []
    names = ("fully_grounded", "core_grounded", "claim_support", "correct_and_grounded")
    for run in audit["runs"]:
        s = run["summary"]
        rows.extend(
            [name.replace("_", " "), pct(s[name]["share"]) + interval(s[name]["ci95"])]
            for name in (*names, "abstention")
        )
        rows.append(["claims per answer", number(s["claims_per_answer"]["share"])])
    head = (
        f"Answer audit: {audit['sampled']} of {audit['population']} answers (stratified, seed "
        f"{audit['seed']}), split into claims and checked against the conversation.\n"
    )
    return head + "\n" + table(["figure", "value [95%]"], rows)


def published(folder: Path) -> str:
    """Each figure of the conditions file with a published value, measured in this run."""
    outputs = {run: load(folder, name) for run, name in RUN_FILES.items()}
    rows = []
    for condition in load_conditions().conditions.values():
        for figure in condition.figures:
            if figure.reference is None or outputs.get(figure.run) is None:
                continue
            measured = _measured(outputs[figure.run], figure)
            rows.append([condition.title, figure.name, measured, _reference(figure)])
    return table(["condition", "figure", "this run", "published"], rows)


def _measured(output: Any, figure: Figure) -> str:
    value = extract(output, figure.path)
    return number(value) if isinstance(value, float | int) else "n/a (no prices)"


def _reference(figure: Figure, percent: bool = False) -> str:
    """The published value(s) of a figure, by backbone (as percentages: ``percent``)."""
    assert figure.reference is not None
    values = figure.reference.values
    shown = {k: pct(v) if percent and isinstance(v, float) else str(v) for k, v in values.items()}
    if len(shown) == 1:
        return next(iter(shown.values()))
    return ", ".join(f"{_backbone(k)} {v}" for k, v in shown.items())


def _backbone(model: str) -> str:
    """``claude-haiku-4-5`` -> ``Haiku 4.5``."""
    name, *version = model.removeprefix("claude-").split("-")
    return " ".join([name.capitalize(), ".".join(version)]).strip()


def render_run(folder: Path) -> str:
    manifest, summary = load(folder, "manifest.json"), load(folder, "summary.json")
    if manifest is None or summary is None:
        raise FileNotFoundError(f"{folder} holds no manifest.json and summary.json")
    parts = [
        provenance(folder, manifest, summary),
        "Accuracy by LoCoMo category (token F1 the common way and LoCoMo's):\n",
        accuracy(summary),
        "Calls and tokens per question, by stage:\n",
        cost(summary),
        "Evidence and grounding:\n",
        evidence(summary),
    ]
    if claims := load(folder, "audit-claims.json"):
        parts.append(claim_audit(claims))
    if answers := load(folder, "audit-answers.json"):
        parts.append(answer_audit(answers))
    parts.append(
        "Beside the method's published figures (all 1,540 questions; a figure with no "
        "published value is left out):\n"
    )
    parts.append(published(folder))
    return "\n".join(parts)


def headline(folder: Path) -> str:
    """The few figures a reader looks for first, beside the published ones."""
    manifest, summary = load(folder, "manifest.json"), load(folder, "summary.json")
    references = {
        (c.name, f.name): _reference(f, percent=f.name != "calls per question")
        for c in load_conditions().conditions.values()
        for f in c.figures
        if f.reference is not None
    }
    a, c, e, g = summary["accuracy"], summary["cost"], summary["evidence"], summary["grounding"]
    tokens = [c["method_input_tokens_per_question"], c["method_output_tokens_per_question"]]
    rows = [
        [
            "judge accuracy [Wilson 95%]",
            pct(a["accuracy"]) + interval(a["ci95"]),
            references["accuracy-full", "accuracy"],
        ],
        [
            "method calls per question",
            number(c["method_calls_per_question"]),
            references["accuracy-full", "calls per question"],
        ],
        ["input / output tokens per question", " / ".join(number(n) for n in tokens), ""],
        [
            "complete evidence in the answer context",
            pct(e["visible_final"]),
            references["visibility", "final context"],
        ],
        ["card quotes verified against the turns", pct(g["verified_against_turns"]), ""],
        [
            "card times agreeing with the rules",
            pct(g["time_agreement"]),
            references["quote-time-audit", "time agreement"],
        ],
    ]
    if claims := load(folder, "audit-claims.json"):
        share = claims["overall"]["supported_or_partial"]
        rows.append(["audited claims supported (fully or partly)", pct(share["share"]), ""])
    if answers := load(folder, "audit-answers.json"):
        share = answers["runs"][0]["summary"]["fully_grounded"]
        rows.append(
            ["audited answers fully grounded", pct(share["share"]) + interval(share["ci95"]), ""]
        )
    columns = ["figure", "this run", "published (all 1,540 questions)"]
    return provenance(folder, manifest, summary) + "\n" + table(columns, rows)


def render_runs(folders: Sequence[Path]) -> str:
    """The Markdown of every run folder, in order."""
    return "\n".join(render_run(folder) for folder in folders)


def main(argv: Sequence[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(render_runs([Path(a) for a in argv]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
