"""Reading an input file in a named or detected format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from qemem.errors import InputError
from qemem.ingest.generic import load_records, not_utf8, parse_generic
from qemem.ingest.locomo import load_locomo, parse_locomo
from qemem.models import ConversationInput, check_path

Format = Literal["locomo", "jsonl", "auto"]


def detect_format(path: Path) -> Literal["locomo", "jsonl"]:
    """LoCoMo when the file is a JSON object/array of objects with ``conversation``."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            head = handle.read(1 << 16)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    if path.suffix == ".jsonl":
        return "jsonl"
    if '"conversation"' in head and '"speaker_a"' in head:
        return "locomo"
    try:
        first = json.loads(head) if head.lstrip().startswith("{") else None
    except json.JSONDecodeError:
        first = None
    return "locomo" if isinstance(first, dict) and "conversation" in first else "jsonl"


def read_conversations(path: str | Path, fmt: Format = "auto") -> list[ConversationInput]:
    """Parse every conversation of ``path``; nothing is written anywhere."""
    path = check_path(path, "input file")
    if not path.exists():
        raise InputError("no such file", file=str(path))
    kind = detect_format(path) if fmt == "auto" else fmt
    if kind == "locomo":
        return parse_locomo(load_locomo(path), str(path))
    if kind == "jsonl":
        return parse_generic(load_records(path), str(path))
    raise InputError(f"unknown format {fmt!r}: use locomo, jsonl or auto", file=str(path))
