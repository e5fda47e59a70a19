"""The ``qemem-memory/2`` file: a conversation's episodes, semantic facts, supersessions and
corrections, portable (``qemem-memory/1`` files, without supersessions, still import).

A memory file is a portable backup of the expensive part of a store (the LLM-built episodes and
facts) and the way to move it between embedders and backends: vectors are not in the file,
the importing store embeds the records with its own embedder. Turns are not in it either; they
come from ingesting the conversation itself, and every id the file cites must already be there.

Format (JSON, written with one-space indentation and UTF-8 text, so that export, import and
export again give the same bytes)::

    {"format": "qemem-memory/2", "conversation": ID, "note": TEXT,
     "episodes": [{"id", "session", "title", "content", "timestamp", "turn_ids"}],
     "facts": [{"id", "content", "session", "episode_ids", "kind"?, "turn_ids"?}],
     "supersessions": [{"old", "new", "turn_ids", "at", "kind", "recorded"}],
     "corrections": [{"fact", "turn_ids", "corrected_turns", "recorded"}]}

``session`` is the session index, ``timestamp`` ISO 8601, ``turn_ids`` in episode order. A
supersession says fact ``new`` replaces fact ``old`` from ``at`` (ISO 8601, conversation time)
on, shown by ``turn_ids`` (never empty for ``kind`` "build"; a "manual" correction may cite
none), stored at ``recorded`` (UTC). A fact written by hand (a correction) may have no
episodes (``episode_ids`` empty): its source is its correction, which cites ``turn_ids`` (maybe
none), records the turns the statement it corrected was learned from (``corrected_turns``)
and when it was made (``recorded``). A version 2 file without ``corrections`` (written before
they were recorded) gets one for each manual supersession's new fact, from that supersession
and the corrected fact's episodes. Version 1 has no ``supersessions`` and every fact has
episodes. A fact's ``kind`` (``instruction`` or ``preference``; written only when it is not a
plain ``fact``) and ``turn_ids`` (the messages it was read from directly, as an ingest's rules
read standing instructions and preferences; written only when there are some) are optional: a
fact with ``turn_ids`` needs no episode.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, cast

from qemem.errors import InputError, OutputError
from qemem.lexicon import check_year
from qemem.models import (
    FACT_KINDS,
    Correction,
    Episode,
    SemanticFact,
    Supersession,
    check_id,
    check_path,
)

FORMAT = "qemem-memory/2"
FORMATS = ("qemem-memory/1", FORMAT)
"""The versions that import; export writes ``FORMAT``."""
NOTE_KEY = "memory.note"
"""Store state key that keeps the imported file's note, so an export writes it back."""


@dataclass(frozen=True)
class MemoryFile:
    """The parsed content of a memory file."""

    conversation: str
    note: str
    episodes: tuple[Episode, ...]
    facts: tuple[SemanticFact, ...]
    supersessions: tuple[Supersession, ...] = ()
    corrections: tuple[Correction, ...] = ()


@dataclass
class MemoryImportReport:
    """What an import added and what it found already stored (identical, so skipped)."""

    conversation: str
    episodes_added: int = 0
    facts_added: int = 0
    episodes_unchanged: int = 0
    facts_unchanged: int = 0
    supersessions_added: int = 0
    corrections_added: int = 0
    seconds: float = 0.0
    added_ids: list[str] = field(default_factory=list)


def to_dict(memory: MemoryFile) -> dict[str, Any]:
    """The JSON-ready form of a memory file (field order as the format defines it)."""
    return {
        "format": FORMAT,
        "conversation": memory.conversation,
        "note": memory.note,
        "episodes": [
            {
                "id": e.id,
                "session": e.session,
                "title": e.title,
                "content": e.content,
                "timestamp": e.timestamp.isoformat(),
                "turn_ids": list(e.turn_ids),
            }
            for e in memory.episodes
        ],
        "facts": [_fact_dict(f) for f in memory.facts],
        "supersessions": [
            {
                "old": s.old,
                "new": s.new,
                "turn_ids": list(s.turn_ids),
                "at": s.at.isoformat(),
                "kind": s.kind,
                "recorded": s.recorded.isoformat(),
            }
            for s in memory.supersessions
        ],
        "corrections": [
            {
                "fact": c.fact,
                "turn_ids": list(c.turn_ids),
                "corrected_turns": list(c.corrected_turns),
                "recorded": c.recorded.isoformat(),
            }
            for c in memory.corrections
        ],
    }


def _fact_dict(fact: SemanticFact) -> dict[str, Any]:
    """A fact as the file writes it (``kind`` and ``turn_ids`` only when they say something)."""
    out: dict[str, Any] = {
        "id": fact.id,
        "content": fact.content,
        "session": fact.session,
        "episode_ids": list(fact.episode_ids),
    }
    if fact.kind != "fact":
        out["kind"] = fact.kind
    if fact.turn_ids:
        out["turn_ids"] = list(fact.turn_ids)
    return out


def _fact_of(
    raw: Mapping[str, Any], conversation: str, where: str, file: str, version2: bool
) -> SemanticFact:
    """One fact of the file, checked."""
    kind = raw.get("kind", "fact")
    if kind not in FACT_KINDS:
        raise InputError(
            f"'kind' must be one of {', '.join(FACT_KINDS)}", file=file, record=where, field="kind"
        )
    read = _ids(raw, "turn_ids", where, file, empty=True) if "turn_ids" in raw else ()
    return SemanticFact(
        _record_id(raw, where, file),
        conversation,
        _field(raw, "content", str, where, file),
        _field(raw, "session", int, where, file),
        _ids(raw, "episode_ids", where, file, empty=version2 or bool(read)),
        kind=kind,
        turn_ids=read,
    )


def dumps(memory: MemoryFile) -> str:
    """The file's text: one-space indentation, non-ASCII kept, no trailing newline."""
    return json.dumps(to_dict(memory), indent=1, ensure_ascii=False)


def _field(record: Mapping[str, Any], name: str, kind: type, where: str, file: str) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(
            f"{name!r} must be a {kind.__name__}: fix the file (format {FORMAT})",
            file=file,
            record=where,
            field=name,
        )
    return value


def _record_id(record: Mapping[str, Any], where: str, file: str) -> str:
    """The ``id`` of an episode or fact of the file: text without ``/`` (``check_id``)."""
    return check_id(_field(record, "id", str, where, file), "id", file=file, record=where)


def _ids(
    record: Mapping[str, Any], name: str, where: str, file: str, empty: bool = False
) -> tuple[str, ...]:
    values = _field(record, name, list, where, file)
    if (not values and not empty) or not all(isinstance(v, str) and v for v in values):
        what = "a list of ids" if empty else "a non-empty list of ids"
        raise InputError(f"{name!r} must be {what}", file=file, record=where, field=name)
    if len(set(values)) != len(values):
        raise InputError(f"{name!r} repeats an id", file=file, record=where, field=name)
    return tuple(values)


def parse(data: Any, file: str = "<memory>") -> MemoryFile:
    """Validate the decoded JSON of a memory file; InputError naming the record otherwise."""
    if not isinstance(data, dict) or data.get("format") not in FORMATS:
        raise InputError(
            f'not a {FORMAT} file: expected a JSON object with "format": "{FORMAT}" '
            '(or "qemem-memory/1"; write one with qemem export-memory)',
            file=file,
        )
    version2 = data["format"] == FORMAT
    conversation = _field(data, "conversation", str, "the header", file)
    note = data.get("note", "")
    if not isinstance(note, str):
        raise InputError("'note' must be text", file=file, field="note")
    episodes: list[Episode] = []
    for n, raw in enumerate(_field(data, "episodes", list, "the header", file), start=1):
        where = f"episode {n}"
        if not isinstance(raw, dict):
            raise InputError("an episode must be a JSON object", file=file, record=where)
        when = _moment(raw, "timestamp", where, file)
        episodes.append(
            Episode(
                _record_id(raw, where, file),
                conversation,
                _field(raw, "session", int, where, file),
                _field(raw, "title", str, where, file),
                _field(raw, "content", str, where, file),
                when,
                _ids(raw, "turn_ids", where, file),
            )
        )
    facts: list[SemanticFact] = []
    for n, raw in enumerate(_field(data, "facts", list, "the header", file), start=1):
        where = f"fact {n}"
        if not isinstance(raw, dict):
            raise InputError("a fact must be a JSON object", file=file, record=where)
        facts.append(_fact_of(raw, conversation, where, file, version2))
    for kind, ids in (("episode", [e.id for e in episodes]), ("fact", [f.id for f in facts])):
        if len(set(ids)) != len(ids):
            raise InputError(f"{kind} ids repeat: every id must be unique", file=file)
    supersessions = _supersessions(data, file) if version2 else ()
    if "corrections" in data:
        corrections = _corrections(data, file)
    else:
        corrections = _derived_corrections(supersessions, facts, episodes)
    return MemoryFile(conversation, note, tuple(episodes), tuple(facts), supersessions, corrections)


def _moment(raw: Mapping[str, Any], name: str, where: str, file: str) -> datetime:
    """The ISO 8601 date-time of field ``name``, of the years qemem takes (InputError else)."""
    stamp = _field(raw, name, str, where, file)
    try:
        moment = datetime.fromisoformat(stamp)
        check_year(moment, stamp, name)
    except ValueError:
        raise InputError(
            f"{name} {stamp!r} is not ISO 8601", file=file, record=where, field=name
        ) from None
    except InputError as exc:
        raise InputError(str(exc), file=file, record=where, field=name) from None
    return moment


def _supersessions(data: Mapping[str, Any], file: str) -> tuple[Supersession, ...]:
    """The supersessions of a version 2 file, checked one by one."""
    out: list[Supersession] = []
    for n, raw in enumerate(_field(data, "supersessions", list, "the header", file), start=1):
        where = f"supersession {n}"
        if not isinstance(raw, dict):
            raise InputError("a supersession must be a JSON object", file=file, record=where)
        kind = raw.get("kind")
        if kind not in ("build", "manual"):
            raise InputError(
                '\'kind\' must be "build" or "manual"', file=file, record=where, field="kind"
            )
        out.append(
            Supersession(
                _field(raw, "old", str, where, file),
                _field(raw, "new", str, where, file),
                _ids(raw, "turn_ids", where, file, empty=kind == "manual"),
                _moment(raw, "at", where, file),
                kind,
                _moment(raw, "recorded", where, file),
            )
        )
    olds = [s.old for s in out]
    if len(set(olds)) != len(olds):
        raise InputError("a fact is superseded twice: each fact at most once", file=file)
    return tuple(out)


def _corrections(data: Mapping[str, Any], file: str) -> tuple[Correction, ...]:
    """The corrections of a version 2 file that has them, checked one by one."""
    out: list[Correction] = []
    for n, raw in enumerate(_field(data, "corrections", list, "the header", file), start=1):
        where = f"correction {n}"
        if not isinstance(raw, dict):
            raise InputError("a correction must be a JSON object", file=file, record=where)
        out.append(
            Correction(
                _field(raw, "fact", str, where, file),
                _ids(raw, "turn_ids", where, file, empty=True),
                _ids(raw, "corrected_turns", where, file, empty=True),
                _moment(raw, "recorded", where, file),
            )
        )
    facts = [c.fact for c in out]
    if len(set(facts)) != len(facts):
        raise InputError("a fact has two corrections: each fact at most one", file=file)
    return tuple(out)


def _derived_corrections(
    supersessions: Sequence[Supersession],
    facts: Sequence[SemanticFact],
    episodes: Sequence[Episode],
) -> tuple[Correction, ...]:
    """The corrections of a file written before they were recorded: one per new fact of a
    manual supersession, citing its turns, the corrected fact's episodes' turns as its
    ``corrected_turns`` (those in the file)."""
    episode_turns = {e.id: e.turn_ids for e in episodes}
    sources = {f.id: f.episode_ids for f in facts}
    out: dict[str, Correction] = {}
    for item in supersessions:
        if item.kind != "manual" or item.new in out:
            continue
        learned = [t for e in sources.get(item.old, ()) for t in episode_turns.get(e, ())]
        out[item.new] = Correction(
            item.new, item.turn_ids, tuple(dict.fromkeys(learned)), item.recorded
        )
    return tuple(out.values())


FileLike = str | os.PathLike[str] | IO[str] | IO[bytes]
"""Where a memory file is read from or written to: a path, or a file object (text or binary)."""


def load(source: FileLike) -> MemoryFile:
    """Read and validate a memory file: the file at a path, or what a file object open for
    reading (text or binary) holds."""
    if not isinstance(source, str | os.PathLike):
        name = str(getattr(source, "name", "<memory>"))
        try:
            return parse(json.loads(source.read()), name)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"not valid JSON ({exc})", file=name) from None
    file = check_path(os.fspath(source), "memory file")
    try:
        data = json.loads(file.read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(f"no such file {file}: give the path of a {FORMAT} file") from None
    except OSError as exc:  # a folder, a file that cannot be read
        raise InputError(f"cannot read {file}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", file=str(file)) from None
    return parse(data, str(file))


def save(memory: MemoryFile, target: FileLike) -> None:
    """Write ``memory`` (:func:`dumps`, UTF-8) to the file at a path (replaced if it exists)
    or to a file object open for writing (text, or binary: then UTF-8 bytes); OutputError
    when the path cannot be written."""
    text = dumps(memory)
    if isinstance(target, io.RawIOBase | io.BufferedIOBase):
        target.write(text.encode("utf-8"))
    elif not isinstance(target, str | os.PathLike):
        cast(IO[str], target).write(text)
    else:
        path = check_path(os.fspath(target), "memory file")
        try:
            path.write_text(text, "utf-8")
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
