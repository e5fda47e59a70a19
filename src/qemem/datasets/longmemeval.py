"""LongMemEval (Wu et al., ICLR 2025) as LoCoMo-shaped JSON: ``qemem data longmemeval``.

The input is one of the benchmark's published files (``longmemeval_s.json`` and the like): a
list of questions, each ``{question_id, question_type, question, answer, question_date,
haystack_session_ids, haystack_dates, haystack_sessions, answer_session_ids}``, where a session
is a list of ``{role, content, has_answer}`` messages and a question id ending in ``_abs`` marks
an abstention question (the history does not hold the answer).

Each question becomes its own LoCoMo sample (its history is its own conversation, as the
benchmark evaluates it), id ``lme-<question_id>``: participants User and Assistant (each turn
with its ``role``), one session per haystack session dated by ``haystack_dates`` (sessions are
put in date order when the file lists them otherwise, keeping ties in file order, and the
manifest counts such histories), and one QA item whose evidence is the ``has_answer`` turns.
The item keeps ``question_type``, ``question_date``, ``abstention`` and the
``answer_session_ids``; its LoCoMo category is multi-session 1, temporal-reasoning 2,
abstention 5, the others 4 (single-hop).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from qemem.errors import InputError

MANIFEST_FORMAT = "qemem-longmemeval-conversion/1"
QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
TYPE_CATEGORY = {"multi-session": 1, "temporal-reasoning": 2}
SPEAKERS = {"user": "User", "assistant": "Assistant"}
_DATE = re.compile(
    r"^\s*(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})\s*(?:\([A-Za-z]+\))?\s*"
    r"(?P<H>\d{1,2}):(?P<M>\d{2})\s*$"
)


def parse_lme_date(value: Any, where: str, field: str, file: str) -> datetime:
    """A LongMemEval date (``2023/05/20 (Sat) 02:21``) as a naive date-time."""
    match = _DATE.match(value) if isinstance(value, str) else None
    if match is None:
        raise InputError(
            f"unrecognised date {value!r}: expected a date such as 2023/05/20 (Sat) 02:21",
            file=file,
            record=where,
            field=field,
        )
    try:
        y, m, d, hour, minute = (int(match[k]) for k in ("y", "m", "d", "H", "M"))
        return datetime(y, m, d, hour, minute)
    except ValueError as exc:
        raise InputError(
            f"invalid date {value!r}: {exc}", file=file, record=where, field=field
        ) from None


def _fail(message: str, file: str, where: str, field: str) -> InputError:
    return InputError(message, file=file, record=where, field=field)


def _session_turns(
    raw: Any, s: int, file: str, where: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """The LoCoMo turns of one haystack session (number ``s``) and its evidence turn ids."""
    if not isinstance(raw, list) or not raw:
        raise _fail(
            "a session must be a non-empty list of messages", file, where, "haystack_sessions"
        )
    turns, evidence = [], []
    for n, message in enumerate(raw, start=1):
        field = f"haystack_sessions[{s - 1}][{n - 1}]"
        if not isinstance(message, dict) or message.get("role") not in SPEAKERS:
            raise _fail("a message needs role user or assistant", file, where, f"{field}.role")
        if not isinstance(message.get("content"), str) or not message["content"].strip():
            raise _fail("a message needs non-empty content", file, where, f"{field}.content")
        tid = f"D{s}:{n}"
        turns.append(
            {
                "speaker": SPEAKERS[message["role"]],
                "dia_id": tid,
                "text": message["content"],
                "role": message["role"],
            }
        )
        if message.get("has_answer") is True:
            evidence.append(tid)
    return turns, evidence


def convert_question(item: Any, n: int, file: str) -> tuple[dict[str, Any], bool]:
    """One LongMemEval question as a LoCoMo sample, and whether its sessions were reordered."""
    where = f"question {n}"
    if not isinstance(item, dict):
        raise _fail("a question must be an object", file, where, "question")
    qid = item.get("question_id")
    if not isinstance(qid, str) or not qid.strip():
        raise _fail("missing question_id", file, where, "question_id")
    where = f"question {qid}"
    qtype = item.get("question_type")
    if qtype not in QUESTION_TYPES:
        raise _fail(f"unknown question_type {qtype!r}", file, where, "question_type")
    for name in ("question", "answer"):
        if not isinstance(item.get(name), str | int | float) or not str(item[name]).strip():
            raise _fail(f"missing or empty {name!r}", file, where, name)
    sessions, dates = item.get("haystack_sessions"), item.get("haystack_dates")
    if not isinstance(sessions, list) or not isinstance(dates, list) or not sessions:
        raise _fail(
            "needs haystack_sessions and haystack_dates lists", file, where, "haystack_sessions"
        )
    if len(sessions) != len(dates):
        raise _fail(
            f"{len(sessions)} sessions but {len(dates)} dates", file, where, "haystack_dates"
        )
    when = [parse_lme_date(d, where, f"haystack_dates[{i}]", file) for i, d in enumerate(dates)]
    order = sorted(range(len(sessions)), key=lambda i: when[i])
    conversation: dict[str, Any] = {"speaker_a": "User", "speaker_b": "Assistant"}
    evidence: list[str] = []
    for s, i in enumerate(order, start=1):
        conversation[f"session_{s}_date_time"] = when[i].isoformat(timespec="minutes")
        turns, found = _session_turns(sessions[i], s, file, where)
        conversation[f"session_{s}"] = turns
        evidence.extend(found)
    asked = parse_lme_date(item.get("question_date"), where, "question_date", file)
    abstention = qid.endswith("_abs")
    qa = {
        "question": str(item["question"]),
        "answer": str(item["answer"]),
        "category": 5 if abstention else TYPE_CATEGORY.get(str(qtype), 4),
        "evidence": evidence,
        "question_type": qtype,
        "abstention": abstention,
        "question_date": asked.isoformat(timespec="minutes"),
        "answer_session_ids": list(item.get("answer_session_ids") or []),
    }
    if not evidence:
        qa["evidence_note"] = "no message of the history is marked has_answer"
    sample = {"sample_id": f"lme-{qid}", "conversation": conversation, "qa": [qa]}
    return sample, order != sorted(order)


@dataclass
class LongMemEvalConversion:
    """Converted samples and the manifest that says how."""

    samples: list[dict[str, Any]]
    manifest: dict[str, Any]


def convert_longmemeval(path: Path, limit: int | None = None) -> LongMemEvalConversion:
    """Convert a LongMemEval file (its first ``limit`` questions when given)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read JSON: {exc}", file=str(path)) from None
    if not isinstance(data, list) or not data:
        raise InputError("expected a non-empty list of questions", file=str(path))
    chosen: Sequence[Any] = data[:limit] if limit is not None else data
    converted = [convert_question(item, n, str(path)) for n, item in enumerate(chosen)]
    samples = [s for s, _ in converted]
    types: dict[str, int] = {}
    for sample in samples:
        qtype = sample["qa"][0]["question_type"]
        types[qtype] = types.get(qtype, 0) + 1
    manifest = {
        "format": MANIFEST_FORMAT,
        "qemem": importlib.metadata.version("qemem"),
        "source": str(path),
        "source_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "questions": len(samples),
        "by_type": dict(sorted(types.items())),
        "abstention": sum(s["qa"][0]["abstention"] for s in samples),
        "without_evidence": sum(not s["qa"][0]["evidence"] for s in samples),
        "reordered_histories": sum(reordered for _, reordered in converted),
        "rules": {
            "conversations": "one per question (its own history), sessions in date order",
            "evidence": "the has_answer turns",
            "categories": {**TYPE_CATEGORY, "abstention (_abs)": 5, "other types": 4},
        },
    }
    return LongMemEvalConversion(samples, manifest)
