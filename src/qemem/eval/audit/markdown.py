"""The audit sections of a run's report.md, read from the audit records in the run folder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qemem.audit_names import ANSWER_METRICS, CLAIM_LABELS
from qemem.eval.audit.answers import ANSWERS_FILE
from qemem.eval.audit.claims import CLAIMS_FILE
from qemem.eval.audit.memory import MEMORY_FILE, memory_section


def load_audits(out: Path) -> dict[str, Any]:
    """The audit records the run folder holds, by kind (``claims``, ``answers``,
    ``memory``)."""
    found = {}
    for kind, name in (("claims", CLAIMS_FILE), ("answers", ANSWERS_FILE), ("memory", MEMORY_FILE)):
        path = out / name
        if path.exists():
            found[kind] = json.loads(path.read_text("utf-8"))
    return found


def _cell(block: Mapping[str, Any]) -> str:
    share, ci = block.get("share"), block.get("ci95")
    if share is None:
        return "n/a"
    return f"{share:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{share:.3f}"


def claims_section(record: Mapping[str, Any]) -> list[str]:
    """The claim audit: label shares per stratum and overall."""
    head = "| stratum | population | judged | " + " | ".join(CLAIM_LABELS) + " |"
    lines = [
        "## Claim audit",
        "",
        f"Judge {record['judge']}: {record['sampled']} of {record['population']} cards "
        f"(seed {record['seed']}), population-weighted shares with bootstrap 95% CIs. "
        f"Cards with unresolvable source ids: {record['unresolved_share']}.",
        "",
        head,
        "|" + "---|" * (len(CLAIM_LABELS) + 3),
    ]
    rows = [
        *record["by_stratum"].items(),
        ("all", {"population": record["population"], **record["overall"]}),
    ]
    for key, block in rows:
        judged = sum(block["counts"].values())
        cells = " | ".join(_cell(block[label]) for label in CLAIM_LABELS)
        lines.append(f"| {key} | {block['population']} | {judged} | {cells} |")
    return [*lines, ""]


def answers_section(record: Mapping[str, Any]) -> list[str]:
    """The answer audit: the figures per run and the paired differences."""
    lines = [
        "## Answer audit",
        "",
        f"Judge {record['judge']}: {record['sampled']} of {record['population']} shared "
        f"questions (seed {record['seed']}), population-weighted with bootstrap 95% CIs.",
        "",
        "| run | " + " | ".join(ANSWER_METRICS) + " |",
        "|" + "---|" * (len(ANSWER_METRICS) + 1),
    ]
    for entry in record["runs"]:
        cells = " | ".join(_cell(entry["summary"][m]) for m in ANSWER_METRICS)
        lines.append(f"| {entry['run']} | {cells} |")
    for pair, diffs in record["differences"].items():
        for metric, d in diffs.items():
            lines.append(
                f"\n{pair}, {metric}: {d['difference']:+.3f} "
                f"[{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] (paired bootstrap)"
            )
    return [*lines, ""]


def audit_markdown(out: Path) -> str:
    """The audit sections of the run folder ``out`` ('' without audits)."""
    audits = load_audits(out)
    lines = [
        *(claims_section(audits["claims"]) if "claims" in audits else []),
        *(answers_section(audits["answers"]) if "answers" in audits else []),
        *(memory_section(audits["memory"]) if "memory" in audits else []),
    ]
    return "\n".join(lines)
