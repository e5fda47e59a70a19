"""The memory audit in a run folder: ``audit-memory.json`` keeps the audit record
(:func:`qemem.answer.wire.audit_to_json`) of each audited conversation, and the run's report
shows them in one section (the audit itself is ``Memory.audit_memory``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qemem.audit_names import MEMORY_LABELS
from qemem.errors import InputError
from qemem.eval.audit.common import write_audit

MEMORY_FILE = "audit-memory.json"


def write_memory_audit(out: Path, audit: Mapping[str, Any]) -> dict[str, Any]:
    """Add the audit record of one conversation to the run folder's ``audit-memory.json``
    (replacing that conversation's earlier audit); return the file's record."""
    path = out / MEMORY_FILE
    record: dict[str, Any] = (
        json.loads(path.read_text("utf-8"))
        if path.exists()
        else {"audit": "memory", "conversations": {}}
    )
    if record.get("audit") != "memory":
        raise InputError(f"{path} is not a memory audit record: move it away and audit again")
    record["conversations"][str(audit["conversation"])] = {
        k: v for k, v in audit.items() if k != "trace"
    } | {"calls": _calls(audit)}
    write_audit(out, MEMORY_FILE, record)
    return record


def _calls(audit: Mapping[str, Any]) -> int:
    totals = audit.get("trace", {}).get("totals") or {}
    return int(totals.get("total", {}).get("calls", 0))


def _cell(block: Mapping[str, Any]) -> str:
    share, ci = block.get("share"), block.get("ci95")
    if share is None:
        return "n/a"
    return f"{share:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{share:.3f}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def memory_section(record: Mapping[str, Any]) -> list[str]:
    """The memory audit: per conversation, the label shares of facts and episodes and the
    census of its facts."""
    lines = ["## Memory audit", ""]
    for cid, audit in sorted(record["conversations"].items()):
        census = audit["census"]
        sampled = len(audit["items"])
        lines += [
            f"Conversation {cid}, judge {audit['judge']}: {sampled} of "
            f"{census['facts'] + census['episodes']} records (seed {audit['seed']}), "
            "population-weighted shares with bootstrap 95% CIs; each judged against only the "
            f"turns its provenance cites ({audit['unresolved']} cite no stored turn).",
            "",
            "| records | judged | " + " | ".join(MEMORY_LABELS) + " |",
            "|" + "---|" * (len(MEMORY_LABELS) + 2),
        ]
        for space in ("facts", "episodes"):
            shares = audit[space]
            cells = " | ".join(_cell(shares[label]) for label in MEMORY_LABELS)
            lines.append(f"| {space} | {shares[MEMORY_LABELS[0]]['n']} | {cells} |")
        lines += [
            "",
            f"Facts ({census['facts']}): with a personal pronoun {len(census['pronoun'])} "
            f"({_share(census['pronoun_share'])}; standing for no one the fact names before "
            f"it: {len(census['unresolved'])}), with a date or time "
            f"{len(census['dated'])} ({_share(census['date_share'])}); near-duplicate pairs "
            f"{len(census['duplicates'])}; superseded {len(census['superseded'])}.",
            "",
        ]
    return lines
