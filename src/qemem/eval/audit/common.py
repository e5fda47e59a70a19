"""What the run-folder audits share: reading a run folder and writing the audit record (their
stratified samples and weighted shares are :mod:`qemem.answer.sampling`'s, shared with the
memory audit)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qemem.errors import InputError
from qemem.eval.results import load_records
from qemem.eval.sources import load_run_sources

Record = dict[str, Any]


@dataclass(frozen=True)
class Run:
    """A run folder's records and source records (by conversation)."""

    path: Path
    records: list[Record]
    sources: dict[str, Any]


def load_run(path: Path) -> Run:
    """The run folder ``path`` (its results.jsonl and sources.json)."""
    results = path / "results.jsonl"
    if not results.exists():
        raise InputError(f"{path} holds no results.jsonl: give the folder of a LoCoMo run")
    return Run(path, load_records(results), load_run_sources(path) or {})


def write_audit(out: Path, name: str, data: Mapping[str, Any]) -> Path:
    """Write the audit record ``name`` (``audit-claims.json`` ...) into the run folder."""
    path = out / name
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", "utf-8")
    return path


def session_date(sources: Mapping[str, Any], session: object) -> str:
    """The ISO date of ``session`` in one conversation's source records ('' when unknown)."""
    return str(sources.get("sessions", {}).get(str(session), ""))[:10]


def record_cards(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A record's cards: from its answer's evidence (format 2), else its own list."""
    answer = record.get("answer")
    if isinstance(answer, Mapping):
        cards = answer.get("evidence", {}).get("cards")
        if cards is not None:
            return list(cards)
    return list(record.get("cards") or [])
