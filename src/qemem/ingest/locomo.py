"""The LoCoMo format (``locomo10.json``: a list of samples, or one sample). A turn may carry a
``role`` (``user``, ``assistant`` or ``other``), as converted chats with an assistant do;
LoCoMo's own turns have none: its speakers are two people."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from qemem.errors import InputError
from qemem.ingest.generic import read_text
from qemem.lexicon import parse_datetime
from qemem.models import (
    ConversationInput,
    SessionInput,
    TurnInput,
    check_same_kind,
    fold_caption,
    parse_role,
)

_SESSION_KEY = re.compile(r"^session_(\d+)$")
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


@dataclass(frozen=True)
class LocomoQuestion:
    """One QA item. ``answer`` is text (numbers cast); adversarial items use their
    ``adversarial_answer``. ``evidence`` keeps the annotated turn ids, split and cleaned."""

    conversation: str
    index: int
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]

    @property
    def category_name(self) -> str:
        return CATEGORY_NAMES.get(self.category, str(self.category))


def load_locomo(path: str | Path) -> list[dict[str, Any]]:
    """Read a LoCoMo file: a JSON list of samples or a single sample object."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"cannot read LoCoMo JSON: {exc}", file=str(path)) from None
    samples = data if isinstance(data, list) else [data]
    for n, sample in enumerate(samples):
        if not isinstance(sample, dict) or "conversation" not in sample:
            raise InputError(
                "not a LoCoMo sample: expected an object with 'conversation'",
                file=str(path),
                record=f"sample {n}",
                field="conversation",
            )
    return samples


def parse_locomo(samples: list[dict[str, Any]], file: str = "<input>") -> list[ConversationInput]:
    """Turn LoCoMo samples into conversations; errors name the file, sample and field."""
    return [_parse_sample(sample, n, file) for n, sample in enumerate(samples)]


def _parse_turn(
    turn: Any, where: str, date_time: datetime, seen: set[str], file: str, record: str
) -> TurnInput:
    """One LoCoMo turn (at ``where`` in ``record`` of ``file``) of a session dated
    ``date_time``; its id joins ``seen`` (a repeated one is refused)."""

    def fail(message: str, field: str) -> InputError:
        return InputError(message, file=file, record=record, field=field)

    if not isinstance(turn, dict):
        raise fail("a turn must be an object", where)
    for name in ("speaker", "text", "dia_id"):
        if not isinstance(turn.get(name), str):
            raise fail(f"turn lacks a string {name!r}", f"{where}.{name}")
    caption = turn.get("blip_caption")
    if caption is not None and not isinstance(caption, str):
        raise fail(
            f"'blip_caption' must be a string, not {type(caption).__name__}",
            f"{where}.blip_caption",
        )
    tid = turn["dia_id"].strip()
    if tid in seen:
        raise fail(f"duplicate turn id {tid!r}", f"{where}.dia_id")
    seen.add(tid)
    speaker = " ".join(turn["speaker"].split())  # a name: one line, as prompts show it
    text = fold_caption(turn["text"], turn.get("blip_caption"))
    role = parse_role(turn.get("role"), file=file, record=record, field=f"{where}.role")
    return TurnInput(speaker, text, date_time, tid, role)


def _parse_sample(sample: dict[str, Any], n: int, file: str) -> ConversationInput:
    cid = str(sample.get("sample_id") or f"sample-{n}")

    def fail(message: str, field: str) -> InputError:
        return InputError(message, file=file, record=f"sample {cid}", field=field)

    conv = sample["conversation"]
    if not isinstance(conv, dict):
        raise fail("'conversation' must be an object", "conversation")
    speakers = [" ".join(str(conv[k]).split()) for k in ("speaker_a", "speaker_b") if conv.get(k)]
    sessions: list[SessionInput] = []
    seen: set[str] = set()
    keys = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.match(key)))
    for number, key in keys:
        raw_turns = conv[key]
        if not raw_turns:
            continue
        if not isinstance(raw_turns, list):
            raise fail("a session must be a list of turns", key)
        date_text = conv.get(f"{key}_date_time")
        if not isinstance(date_text, str):
            raise fail("session has turns but no date", f"{key}_date_time")
        try:
            date_time = parse_datetime(date_text)
        except InputError as exc:
            raise fail(str(exc), f"{key}_date_time") from None
        if sessions:
            check_same_kind(
                date_time,
                sessions[0].date_time,
                file=file,
                record=f"sample {cid}",
                field=f"{key}_date_time",
            )
        session = SessionInput(key, date_time, number)
        for position, turn in enumerate(raw_turns):
            where = f"{key}[{position}]"
            parsed = _parse_turn(turn, where, date_time, seen, file, f"sample {cid}")
            if parsed.speaker not in speakers:
                speakers.append(parsed.speaker)
            session.turns.append(parsed)
        sessions.append(session)
    if not sessions:
        raise fail("conversation has no session with turns", "conversation")
    return ConversationInput(cid, speakers, sessions)


_EVIDENCE_ID = re.compile(r"D(\d+):(\d+)")


def clean_evidence(raw: Any) -> tuple[str, ...]:
    """Annotated evidence ids, normalised: ``D30:05`` -> ``D30:5``; several ids in one string
    are split; anything without a ``D<n>:<m>`` pattern is dropped."""
    items = raw if isinstance(raw, list) else [raw]
    found: list[str] = []
    for item in items:
        for session, turn in _EVIDENCE_ID.findall(str(item)):
            tid = f"D{int(session)}:{int(turn)}"
            if tid not in found:
                found.append(tid)
    return tuple(found)


def locomo_questions(samples: list[dict[str, Any]]) -> list[LocomoQuestion]:
    """All QA items of the samples, in file order."""
    questions = []
    for n, sample in enumerate(samples):
        cid = str(sample.get("sample_id") or f"sample-{n}")
        items = sample.get("qa", [])
        if not isinstance(items, list):
            raise InputError("'qa' must be a list", record=f"sample {cid}", field="qa")
        for index, qa in enumerate(items):
            questions.append(_question(qa, cid, index))
    return questions


def _question(qa: Any, cid: str, index: int) -> LocomoQuestion:
    """One validated QA item; InputError names the sample, item and field at fault."""

    def fail(message: str, field: str) -> InputError:
        return InputError(message, record=f"sample {cid}, qa {index}", field=field)

    if not isinstance(qa, dict):
        raise fail("a QA item must be an object", "qa")
    if not isinstance(qa.get("question"), str) or not qa["question"].strip():
        raise fail("missing or empty 'question'", "question")
    category = qa.get("category")
    if isinstance(category, str) and category.strip().isdigit():
        category = int(category)
    if not isinstance(category, int) or isinstance(category, bool):
        raise fail(f"'category' must be an integer 1-5, got {category!r}", "category")
    answer = qa.get("answer", qa.get("adversarial_answer"))
    if answer is None or isinstance(answer, dict | list) or not str(answer).strip():
        raise fail("missing or empty 'answer' (or 'adversarial_answer')", "answer")
    return LocomoQuestion(
        cid,
        index,
        qa["question"],
        str(answer),
        category,
        clean_evidence(qa.get("evidence", [])),
    )
