"""Reading a run folder's results.jsonl: one record per question and mode."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qemem.errors import InputError

Record = Mapping[str, Any]


def record_key(record: Record) -> tuple[str, int, str]:
    """What identifies a record: conversation, question index and mode."""
    return (str(record["conversation"]), int(record["index"]), str(record["mode"]))


def load_records(path: Path) -> list[dict[str, Any]]:
    """The records of a results.jsonl (first record of each key; a cut-off last line, left by
    an interrupted run, is ignored); [] when the file does not exist."""
    if not path.exists():
        return []
    lines = path.read_text("utf-8").splitlines()
    records: dict[tuple[str, int, str], dict[str, Any]] = {}
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                continue
            raise InputError(f"line {n + 1} of {path} is not JSON; delete it and rerun") from None
        records.setdefault(record_key(record), record)
    return list(records.values())


def run_records(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run folder's manifest and the records of its selection and mode, as the run wrote
    them; InputError when the folder holds no manifest.json."""
    path = out / "manifest.json"
    if not path.exists():
        raise InputError(f"{out} holds no manifest.json: give the folder of a LoCoMo run")
    manifest: dict[str, Any] = json.loads(path.read_text("utf-8"))
    mode = str(manifest.get("mode", ""))
    selection = manifest.get("selection")
    chosen = {str(k) for k in selection} if selection is not None else None
    records = [
        r
        for r in load_records(out / "results.jsonl")
        if str(r["mode"]) == mode
        and (chosen is None or f"{r['conversation']}#{r['index']}" in chosen)
    ]
    return manifest, records
