"""The generic chat format: one record per message, as a JSON array or JSON Lines.

Each record is an object with:

- ``conversation_id`` (string, required): which conversation the message belongs to;
- ``session_id`` (string, required): the sitting; sessions are ordered by first appearance;
- ``timestamp`` (string, required): ISO 8601 (``2024-03-14T19:15:00``) or LoCoMo's
  ``7:15 pm on 14 March, 2024``; a session's date is that of its first message;
- ``speaker`` and ``text`` (strings, required);
- ``id`` (string, optional): a stable message id; without one qemem assigns ``D<session>:<n>``;
- ``image_caption`` (string, optional): folded into the text as ``[shares a photo: …]``;
- ``namespace`` (string, optional): the user or tenant, ``default`` when absent;
- ``role`` (string, optional): who the message is from in a conversation with an assistant,
  ``user``, ``assistant`` or ``other`` (any case); without it the speakers are people.

Messages keep their file order inside a session; they are never re-sorted by timestamp.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from qemem.errors import InputError
from qemem.lexicon import parse_datetime
from qemem.models import (
    ConversationInput,
    SessionInput,
    TurnInput,
    check_same_kind,
    check_text,
    fold_caption,
    parse_role,
)

REQUIRED = ("conversation_id", "session_id", "timestamp", "speaker", "text")


def read_text(path: str | Path) -> str:
    """A whole UTF-8 file (a byte-order mark is accepted); InputError when it is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None


_UTF16_BOMS = {b"\xff\xfe": "UTF-16LE", b"\xfe\xff": "UTF-16BE"}


def not_utf8(path: str | Path, exc: UnicodeDecodeError) -> InputError:
    """The error for a file that is not UTF-8, with the conversion to run: from UTF-16 when
    the file starts with a UTF-16 byte order mark, else from Latin-1 (the usual other one)."""
    source = _UTF16_BOMS.get(bytes(exc.object[:2]))
    if source is not None:
        return InputError(
            f"the file is {source} text (it starts with a UTF-16 byte order mark), not UTF-8: "
            f"convert it first, e.g. iconv -f {source.lower()} -t utf-8 FILE > FILE.utf8",
            file=str(path),
        )
    return InputError(
        f"not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} at offset {exc.start}): "
        "convert it first, e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8",
        file=str(path),
    )


def load_records(path: str | Path) -> Iterator[Any]:
    """The message records of a JSON array or JSON Lines file; JSON Lines are read one line
    at a time, so only the parsed records are held in memory."""
    file = str(path)
    try:
        with Path(path).open(encoding="utf-8-sig") as handle:
            head = handle.read(4096).lstrip()
            if head.startswith("["):
                yield from _json_array(path)
                return
            handle.seek(0)
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"invalid JSON: {exc.msg}", file=file, record=f"line {line_no}"
                    ) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", file=file) from exc
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None


def _json_array(path: str | Path) -> list[Any]:
    try:
        records = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", file=str(path)) from None
    if not isinstance(records, list):
        raise InputError("expected a JSON array of message records", file=str(path))
    return records


def parse_generic(records: Iterable[Any], file: str = "<input>") -> list[ConversationInput]:
    """Group message records into conversations and sessions, validating every field."""
    conversations: dict[tuple[str, str], ConversationInput] = {}
    sessions: dict[tuple[str, str, str], SessionInput] = {}
    for n, record in enumerate(records, start=1):
        where = f"record {n}"
        if not isinstance(record, dict):
            raise InputError("a record must be a JSON object", file=file, record=where)
        for name in REQUIRED:
            value = record.get(name)
            if value is not None and not isinstance(value, str):
                raise InputError(
                    f"{name!r} must be a string, not {type(value).__name__}",
                    file=file,
                    record=where,
                    field=name,
                )
            if value is None or not value.strip():
                raise InputError(f"missing or empty {name!r}", file=file, record=where, field=name)
        for name in ("id", "image_caption", "namespace"):
            if record.get(name) is not None and not isinstance(record[name], str):
                raise InputError(
                    f"{name!r} must be a string, not {type(record[name]).__name__}",
                    file=file,
                    record=where,
                    field=name,
                )
        for name in (*REQUIRED, "id", "image_caption", "namespace"):
            if isinstance(record.get(name), str):  # before a store sees it (an id is looked up)
                what = name.replace("_", " ")
                check_text(record[name], what, file=file, record=where, field=name)
        try:
            timestamp = parse_datetime(record["timestamp"])
        except InputError as exc:
            raise InputError(str(exc), file=file, record=where, field="timestamp") from None
        namespace = record.get("namespace") or "default"
        cid, skey = record["conversation_id"], record["session_id"]
        conv = conversations.setdefault((namespace, cid), ConversationInput(cid, [], [], namespace))
        if conv.sessions:
            check_same_kind(
                timestamp, conv.sessions[0].date_time, file=file, record=where, field="timestamp"
            )
        session = sessions.get((namespace, cid, skey))
        if session is None:
            session = SessionInput(skey, timestamp, len(conv.sessions) + 1)
            sessions[(namespace, cid, skey)] = session
            conv.sessions.append(session)
        speaker = " ".join(record["speaker"].split())  # a name: one line, as prompts show it
        if speaker not in conv.speakers:
            conv.speakers.append(speaker)
        text = fold_caption(record["text"], record.get("image_caption"))
        role = parse_role(record.get("role"), file=file, record=where)
        session.turns.append(TurnInput(speaker, text, timestamp, record.get("id"), role))
    _check_unique_ids(list(conversations.values()), file)
    return list(conversations.values())


def _check_unique_ids(conversations: list[ConversationInput], file: str) -> None:
    for conv in conversations:
        seen: set[str] = set()
        for session in conv.sessions:
            for turn in session.turns:
                if turn.id is None:
                    continue
                if turn.id in seen:
                    raise InputError(
                        f"duplicate message id {turn.id!r}",
                        file=file,
                        record=f"conversation {conv.id}",
                        field="id",
                    )
                seen.add(turn.id)
