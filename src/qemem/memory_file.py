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
     "facts": [{"id", "content", "session", "episode_ids"}],
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
episodes.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, cast

from qemem.errors import InputError, OutputError, StoreError
from qemem.models import (
    REDACTED,
    Correction,
    Episode,
    SemanticFact,
    Supersession,
    Turn,
    check_id,
    check_path,
    check_same_kind,
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
        "facts": [
            {
                "id": f.id,
                "content": f.content,
                "session": f.session,
                "episode_ids": list(f.episode_ids),
            }
            for f in memory.facts
        ],
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
        stamp = _field(raw, "timestamp", str, where, file)
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            raise InputError(
                f"timestamp {stamp!r} is not ISO 8601", file=file, record=where, field="timestamp"
            ) from None
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
        facts.append(
            SemanticFact(
                _record_id(raw, where, file),
                conversation,
                _field(raw, "content", str, where, file),
                _field(raw, "session", int, where, file),
                _ids(raw, "episode_ids", where, file, empty=version2),
            )
        )
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
    stamp = _field(raw, name, str, where, file)
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        raise InputError(
            f"{name} {stamp!r} is not ISO 8601", file=file, record=where, field=name
        ) from None


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


def check_provenance(
    memory: MemoryFile,
    turns: Sequence[Turn],
    stored_episodes: Sequence[Episode],
    sessions: Sequence[int],
) -> None:
    """The provenance rules ``build`` keeps, checked before anything is written: every turn id
    is a stored turn, none of an episode's is redacted (the episode would bring its text
    back); an episode's turns lie in its session, each once, in conversation order; its
    session exists; a fact's episodes are in the file or the store, and its session is one
    of theirs or later (a fact is learned no earlier than its first source episode).
    Raises InputError naming the first offending record."""
    stored = {t.id: (n, t) for n, t in enumerate(turns)}
    known_sessions = set(sessions)
    episode_session = {e.id: e.session for e in stored_episodes}
    for episode in memory.episodes:
        _check_episode(episode, memory.conversation, stored, known_sessions)
        episode_session[episode.id] = episode.session
    corrected = {c.fact for c in memory.corrections}
    for fact in memory.facts:
        if not fact.episode_ids:
            if fact.id not in corrected:
                raise InputError(
                    "cites no episode and is no correction by hand (a fact of the file's "
                    "corrections)",
                    record=f"fact {fact.id}",
                )
            continue
        missing = [e for e in fact.episode_ids if e not in episode_session]
        if missing:
            raise InputError(
                f"cites episodes {', '.join(missing)} that are neither in the file nor stored",
                record=f"fact {fact.id}",
            )
        if fact.session < min(episode_session[e] for e in fact.episode_ids):
            raise InputError(
                "session is earlier than every episode it was learned from",
                record=f"fact {fact.id}",
            )


def _check_episode(
    episode: Episode, conversation: str, stored: Mapping[str, tuple[int, Turn]], sessions: set[int]
) -> None:
    """An episode of a file cites ``stored`` turns (by id: position and turn), none redacted,
    of its stored session, in conversation order, with their kind of timestamp."""
    where = f"episode {episode.id}"
    unknown = [t for t in episode.turn_ids if t not in stored]
    if unknown:
        raise InputError(
            f"turn ids {', '.join(unknown[:5])} are not in the stored conversation "
            f"{conversation!r}: ingest the conversation first (qemem ingest), then import its "
            "memory",
            record=where,
        )
    order, cited = zip(*(stored[t] for t in episode.turn_ids), strict=True)
    if redacted := [t.id for t in cited if t.text == REDACTED]:
        raise InputError(
            f"turns {', '.join(redacted[:5])} were redacted after this file was written: its "
            "episode would bring their text back (export again, or build instead)",
            record=where,
        )
    if episode.session not in sessions:
        raise InputError(f"session {episode.session} is not stored", record=where)
    check_same_kind(episode.timestamp, cited[0].timestamp, record=where, field="timestamp")
    if any(t.session != episode.session for t in cited):
        raise InputError(
            f"every turn must belong to the episode's session {episode.session}", record=where
        )
    if list(order) != sorted(order):
        raise InputError("turn ids must be in conversation order", record=where)


def check_supersessions(
    memory: MemoryFile, turns: Sequence[Turn], stored_facts: Sequence[SemanticFact]
) -> None:
    """A correction's fact is in the file or the store and it cites stored turns; a
    supersession's facts are in the file or the store, it cites stored turns, and no fact
    replaces itself. Raises InputError naming the first offending record."""
    facts = {f.id for f in stored_facts} | {f.id for f in memory.facts}
    turn_ids = {t.id for t in turns}
    for fix in memory.corrections:
        unknown = [t for t in (*fix.turn_ids, *fix.corrected_turns) if t not in turn_ids]
        if fix.fact not in facts or unknown:
            why = (
                f"turn ids {', '.join(unknown[:5])} are not in the stored conversation"
                if unknown
                else "the fact is not in the file or the store"
            )
            raise InputError(why, record=f"correction of {fix.fact}")
    for item in memory.supersessions:
        where = f"supersession of {item.old}"
        missing = [i for i in (item.old, item.new) if i not in facts]
        if missing or item.old == item.new:
            why = f"facts {', '.join(missing)} are" if missing else "the new fact is"
            raise InputError(f"{why} not another fact of the file or the store", record=where)
        unknown = [t for t in item.turn_ids if t not in turn_ids]
        if unknown:
            raise InputError(
                f"turn ids {', '.join(unknown[:5])} are not in the stored conversation",
                record=where,
            )


def new_supersessions(memory: MemoryFile, stored: Sequence[Supersession]) -> list[Supersession]:
    """The file's supersessions the store lacks; a different one of a fact the store has
    one of raises StoreError before anything is written."""
    known = {s.old: s for s in stored}
    clashes = [s.old for s in memory.supersessions if s.old in known and known[s.old] != s]
    if clashes:
        raise StoreError(
            f"conversation {memory.conversation!r} already records other supersessions of "
            f"facts {', '.join(clashes[:5])}: import into another store, or delete those facts"
        )
    return [s for s in memory.supersessions if s.old not in known]


def new_corrections(memory: MemoryFile, stored: Sequence[Correction]) -> list[Correction]:
    """The file's corrections the store lacks; a different one of a fact the store has one
    of raises StoreError before anything is written."""
    known = {c.fact: c for c in stored}
    clashes = [c.fact for c in memory.corrections if c.fact in known and known[c.fact] != c]
    if clashes:
        raise StoreError(
            f"conversation {memory.conversation!r} already records other corrections of facts "
            f"{', '.join(clashes[:5])}: import into another store, or delete those facts"
        )
    return [c for c in memory.corrections if c.fact not in known]


def split_new(
    memory: MemoryFile, stored_episodes: Sequence[Episode], stored_facts: Sequence[SemanticFact]
) -> tuple[list[Episode], list[SemanticFact]]:
    """The file's episodes and facts the store lacks. A record stored under the same id must
    be identical (then it is skipped: importing twice changes nothing); a different one
    raises StoreError before anything is written."""
    episodes = {e.id: e for e in stored_episodes}
    facts = {f.id: f for f in stored_facts}
    new_episodes = [e for e in memory.episodes if e.id not in episodes]
    new_facts = [f for f in memory.facts if f.id not in facts]
    clashes = [e.id for e in memory.episodes if e.id in episodes and episodes[e.id] != e]
    clashes += [f.id for f in memory.facts if f.id in facts and facts[f.id] != f]
    if clashes:
        raise StoreError(
            f"conversation {memory.conversation!r} already holds different records under "
            f"ids {', '.join(clashes[:5])}: delete the conversation and ingest it again "
            "before importing this memory, or import it into another store"
        )
    return new_episodes, new_facts
