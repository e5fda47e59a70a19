"""BEAM (Tavakoli et al., ICLR 2026) as LoCoMo-shaped JSON: ``qemem data beam``.

The input is a local copy of the public BEAM repository: ``chats/<size>/<n>/chat.json`` (a list
of batches, each a list of message groups, each message ``{role, id, content}``; the 10M chats
split into ``plan-N/chat.json`` folders whose message ids restart at 0, while their probes count
ids across the plans) and ``chats/<size>/<n>/probing_questions/probing_questions.json``.

Each chat becomes one LoCoMo sample ``beam-<size>-<n>``: participants ``User`` and
``Assistant`` (each turn also carries its ``role``, ``user`` or ``assistant``, and its BEAM
message id ``beam_id``), one session per batch, dated by the batch's ``time_anchor`` or, where
that is null as in the published data, by its first message's (at 9:00 that day; the turns of a
session keep their order). A session dated before the one before it is re-dated forward, with
every later session shifted by the same number of days (their spacing kept), and the manifest
says so. Message text loses its generator markers and runaway output
(:mod:`qemem.datasets.beam_text`). The probes become the sample's ``qa``
(:mod:`qemem.datasets.beam_probes`).

A 10M chat whose ``plan-N/chat.json`` is absent (several are, in the repository's snapshot)
cannot be mapped: every later plan's message ids depend on the lengths of the plans before it,
and its probes point into the missing plan. It is refused with the file named, or, with
``skip_incomplete``, left out with the absent files recorded in the manifest.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from qemem.datasets.beam_probes import ABILITY_CATEGORY, convert_probes
from qemem.datasets.beam_text import MAX_BLANK_RUN, MAX_REPEATED_LINES, clean_message
from qemem.datasets.convert import write_conversion
from qemem.errors import InputError

SIZES: tuple[str, ...] = ("100K", "500K", "1M", "10M")
SPEAKERS: dict[str, str] = {"user": "User", "assistant": "Assistant"}
MANIFEST_FORMAT = "qemem-beam-conversion/1"
#: the hour every session starts at (BEAM dates days, not times)
SESSION_HOUR = 9
_PLAN = re.compile(r"^plan-(\d+)$")
_DATE_FORMATS = ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d")


@dataclass
class ChatNotes:
    """What converting one chat changed or left out, for the manifest."""

    tail_markers: int = 0
    inner_markers: int = 0
    runaway: list[dict[str, int]] = field(default_factory=list)
    redated: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Batch:
    """One batch of a chat: its date, its messages (global id, role, raw text) and where it
    came from (file and batch position, for errors)."""

    day: date
    messages: list[tuple[int, str, str]]
    file: str
    number: int


def parse_anchor(value: Any, file: str, field_name: str) -> date:
    """A BEAM time anchor (``March-15-2024``; ISO dates too) as a date."""
    if isinstance(value, str):
        for fmt in _DATE_FORMATS:
            try:
                return datetime.strptime(value.strip(), fmt).date()
            except ValueError:
                continue
    raise InputError(
        f"unrecognised time anchor {value!r}: expected a date such as March-15-2024",
        file=file,
        field=field_name,
    )


def dates_forward(days: Sequence[date]) -> tuple[list[date], list[int]]:
    """``days`` made non-decreasing: a day before the (re-dated) day before it moves to the
    day after that one, and every later day moves by the same amount. Returns the new days
    and the positions that were moved forward first (each a backwards step of the input)."""
    out: list[date] = []
    moved: list[int] = []
    shift = timedelta(0)
    for n, day in enumerate(days):
        new = day + shift
        if out and new < out[-1]:
            extra = out[-1] + timedelta(days=1) - new
            shift += extra
            new += extra
            moved.append(n)
        out.append(new)
    return out, moved


def chat_files(folder: Path, size: str) -> tuple[list[Path], list[Path]]:
    """The chat.json files of a chat in order (a 10M chat's plans by number) and those
    expected but absent."""
    if size != "10M" or not any(_PLAN.match(p.name) for p in folder.iterdir()):
        path = folder / "chat.json"
        return ([path], []) if path.exists() else ([], [path])
    plans = sorted(
        (int(m.group(1)), p) for p in folder.iterdir() if (m := _PLAN.match(p.name)) and p.is_dir()
    )
    files = [p / "chat.json" for _, p in plans]
    return [f for f in files if f.exists()], [f for f in files if not f.exists()]


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read JSON: {exc}", file=str(path)) from None


def _message(raw: Any, file: str, where: str) -> tuple[int, str, str]:
    """(local id, role, content) of one raw message."""

    def fail(message: str, name: str) -> InputError:
        return InputError(message, file=file, record=where, field=name)

    if not isinstance(raw, dict):
        raise fail("a message must be an object", "turns")
    if raw.get("role") not in SPEAKERS:
        raise fail(f"role must be user or assistant, got {raw.get('role')!r}", "role")
    mid = raw.get("id")
    if not isinstance(mid, int) or isinstance(mid, bool):
        raise fail(f"message id must be a number, got {mid!r}", "id")
    if not isinstance(raw.get("content"), str):
        raise fail("message content must be text", "content")
    return mid, str(raw["role"]), str(raw["content"])


def read_batches(path: Path, offset: int) -> list[Batch]:
    """The batches of one chat.json; message ids must run 0, 1, 2, ... in file order and
    become ``offset`` + id."""
    file = str(path)
    data = _load_json(path)
    if not isinstance(data, list) or not data:
        raise InputError("expected a non-empty list of batches", file=file, field="batches")
    batches: list[Batch] = []
    expected = 0
    for b, raw in enumerate(data):
        where = f"batch {b + 1}"
        groups = raw.get("turns") if isinstance(raw, dict) else None
        if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
            raise InputError("a batch must hold a list of message lists", file=file, field="turns")
        messages = []
        for n, item in enumerate(m for g in groups for m in g):
            mid, role, content = _message(item, file, f"{where}, message {n + 1}")
            if mid != expected:
                raise InputError(
                    f"message ids must run 0, 1, 2, ... in file order: found {mid}, "
                    f"expected {expected}",
                    file=file,
                    record=f"{where}, message {n + 1}",
                    field="id",
                )
            expected += 1
            messages.append((offset + mid, role, content))
        if not messages:
            raise InputError("batch has no messages", file=file, record=where, field="turns")
        anchor = raw.get("time_anchor") or groups[0][0].get("time_anchor")
        day = parse_anchor(anchor, file, f"{where}: time_anchor of the batch or first message")
        batches.append(Batch(day, messages, file, b + 1))
    return batches


def _session_time(day: date) -> str:
    """LoCoMo's session date form, at ``SESSION_HOUR``."""
    return f"{SESSION_HOUR}:00 am on {day.day} {day.strftime('%B')}, {day.year}"


def build_conversation(
    batches: Sequence[Batch], notes: ChatNotes
) -> tuple[dict[str, Any], dict[int, str]]:
    """The LoCoMo ``conversation`` object of a chat's batches and its message-id -> turn-id
    mapping; what was cleaned or re-dated goes to ``notes``."""
    conversation: dict[str, Any] = {
        "speaker_a": SPEAKERS["user"],
        "speaker_b": SPEAKERS["assistant"],
    }
    days, moved = dates_forward([b.day for b in batches])
    for n in moved:
        notes.redated.append(
            {
                "session": f"session_{n + 1}",
                "source": f"{batches[n].file} batch {batches[n].number}",
                "date": batches[n].day.isoformat(),
                "after": batches[n - 1].day.isoformat(),
                "new_date": days[n].isoformat(),
            }
        )
    id_map: dict[int, str] = {}
    for s, (batch, day) in enumerate(zip(batches, days, strict=True), start=1):
        conversation[f"session_{s}_date_time"] = _session_time(day)
        turns = []
        for position, (mid, role, content) in enumerate(batch.messages, start=1):
            clean = clean_message(content)
            notes.tail_markers += clean.tail_markers
            notes.inner_markers += clean.inner_markers
            if clean.runaway_chars is not None:
                notes.runaway.append(
                    {"message": mid, "chars": clean.runaway_chars, "kept": len(clean.text)}
                )
            if not clean.text.strip():
                raise InputError(
                    "message is empty once its generator marker is removed",
                    file=batch.file,
                    record=f"batch {batch.number}, message id {mid}",
                    field="content",
                )
            tid = f"D{s}:{position}"
            id_map[mid] = tid
            turns.append(
                {
                    "speaker": SPEAKERS[role],
                    "dia_id": tid,
                    "text": clean.text,
                    "role": role,
                    "beam_id": mid,
                }
            )
        conversation[f"session_{s}"] = turns
    return conversation, id_map


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def convert_chat(folder: Path, size: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One chat folder as a LoCoMo sample, and its manifest entry."""
    files, absent = chat_files(folder, size)
    if absent:
        raise InputError(
            f"chat file absent ({len(absent)} of {len(files) + len(absent)}); the chat cannot "
            "be mapped without it (pass --skip-incomplete to leave such chats out)",
            file=str(absent[0]),
        )
    batches: list[Batch] = []
    for path in files:
        batches.extend(read_batches(path, sum(len(b.messages) for b in batches)))
    notes = ChatNotes()
    conversation, id_map = build_conversation(batches, notes)
    probes_path = folder / "probing_questions" / "probing_questions.json"
    if not probes_path.exists():
        raise InputError("no probing questions", file=str(probes_path))
    qa = convert_probes(_load_json(probes_path), id_map, str(probes_path))
    sample_id = f"beam-{size}-{folder.name}"
    sample = {
        "sample_id": sample_id,
        "conversation": conversation,
        "qa": qa,
        "beam": {"size": size, "chat": folder.name, "sessions": len(batches)},
    }
    entry = {
        "id": sample_id,
        "size": size,
        "chat": folder.name,
        "files": {str(p): _sha256(p) for p in [*files, probes_path]},
        "sessions": len(batches),
        "messages": len(id_map),
        "probes": len(qa),
        "probes_without_evidence": sum(not q["evidence"] for q in qa),
        "markers_removed": {"end": notes.tail_markers, "inside": notes.inner_markers},
        "runaway_messages": notes.runaway,
        "redated_sessions": notes.redated,
    }
    return sample, entry


def is_beam_file(path: Path) -> bool:
    """Whether ``path`` is a file ``qemem data beam`` wrote: LoCoMo-shaped JSON whose first
    QA item carries a BEAM ability."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    first = data[0] if isinstance(data, list) and data else data
    qa = first.get("qa") if isinstance(first, dict) else None
    return bool(qa) and isinstance(qa, list) and isinstance(qa[0], dict) and "ability" in qa[0]


def parse_chat_numbers(value: str) -> list[int]:
    """Chat numbers from ``1-5,8`` (ranges and single numbers, comma-separated)."""
    numbers: list[int] = []
    for part in (p.strip() for p in value.split(",") if p.strip()):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise InputError(
                f"chats {value!r}: use numbers and ranges such as 1-5,8", field="chats"
            ) from None
        if first < 1 or last < first:
            raise InputError(f"chats {value!r}: {part!r} is not a range of chat numbers")
        numbers.extend(n for n in range(first, last + 1) if n not in numbers)
    return numbers


def _chat_order(name: str) -> tuple[int, int, str]:
    """Chat folders by number, then any others by name."""
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def chat_folders(source: Path, size: str, chats: Sequence[int]) -> list[Path]:
    """The chat folders of ``size`` under ``source`` (the repository root, its ``chats``
    folder, or the folder BEAM's download script writes), in chat order; only the chats
    numbered ``chats`` when given (each must exist)."""
    if size not in SIZES:
        raise InputError(f"unknown size {size!r}: use {', '.join(SIZES)}", field="sizes")
    root = source / "chats" if (source / "chats").is_dir() else source
    base = root / size
    if not base.is_dir():
        raise InputError(
            f"no {size} folder: give the BEAM repository (or its chats folder)", file=str(base)
        )
    found = {p.name: p for p in base.iterdir() if p.is_dir()}
    missing = [n for n in chats if str(n) not in found]
    if missing:
        numbers = sorted(int(n) for n in found if n.isdigit())
        known = f"{numbers[0]}-{numbers[-1]}" if numbers else "none"
        raise InputError(f"no chat {', '.join(map(str, missing))} (it has {known})", file=str(base))
    names = [str(n) for n in chats] if chats else sorted(found, key=_chat_order)
    return [found[n] for n in names]


@dataclass
class BeamConversion:
    """Converted samples and the manifest that says how they were made."""

    samples: list[dict[str, Any]]
    manifest: dict[str, Any]


def conversion_rules() -> dict[str, Any]:
    """The rules a conversion applied, in words, for its manifest."""
    return {
        "sessions": "one per batch, dated by the batch's time_anchor or its first message's, "
        f"at {SESSION_HOUR}:00; turns keep their order",
        "backwards_dates": "a session dated before the previous one moves to the day after "
        "it and every later session moves by the same number of days (see redated_sessions)",
        "markers": "generator markers such as '->-> 1,14' removed: at a message's end with the "
        "rest of their line, inside a message replaced by a space",
        "runaway_output": f"runs of more than {MAX_BLANK_RUN} spaces or tabs cut to "
        f"{MAX_BLANK_RUN}; more than {MAX_REPEATED_LINES} consecutive copies of a non-blank "
        f"line cut to {MAX_REPEATED_LINES} (see runaway_messages)",
        "evidence": "source_chat_ids (lists, nested lists or objects of message ids) mapped to "
        "turn ids; probes without them have no evidence and an evidence_note",
        "categories": ABILITY_CATEGORY,
    }


def convert_beam(
    source: Path,
    sizes: Sequence[str] = ("100K",),
    chats: Sequence[int] = (),
    *,
    skip_incomplete: bool = False,
) -> BeamConversion:
    """Convert the chosen chats of each size; a chat with an absent chat file is refused (the
    file named) or, with ``skip_incomplete``, left out and recorded."""
    samples: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for size in sizes:
        for folder in chat_folders(source, size, chats):
            _, absent = chat_files(folder, size)
            if absent and skip_incomplete:
                skipped.append(
                    {"id": f"beam-{size}-{folder.name}", "absent": [str(p) for p in absent]}
                )
                continue
            sample, entry = convert_chat(folder, size)
            samples.append(sample)
            entries.append(entry)
    if not samples:
        raise InputError("no chat could be converted (every chosen chat lacks a chat file)")
    manifest = {
        "format": MANIFEST_FORMAT,
        "qemem": importlib.metadata.version("qemem"),
        "source": str(source),
        "sizes": list(sizes),
        "rules": conversion_rules(),
        "totals": {
            "conversations": len(entries),
            "messages": sum(e["messages"] for e in entries),
            "probes": sum(e["probes"] for e in entries),
            "probes_without_evidence": sum(e["probes_without_evidence"] for e in entries),
            "markers_removed": sum(sum(e["markers_removed"].values()) for e in entries),
            "runaway_messages": sum(len(e["runaway_messages"]) for e in entries),
            "redated_sessions": sum(len(e["redated_sessions"]) for e in entries),
        },
        "conversations": entries,
        "skipped": skipped,
    }
    return BeamConversion(samples, manifest)


def write_beam(conversion: BeamConversion, out: Path) -> Path:
    """Write the samples to ``out`` and the manifest beside it; returns the manifest's path."""
    return write_conversion(conversion.samples, conversion.manifest, out)
