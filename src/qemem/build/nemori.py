"""Import of a NEMORI memory export (JSONL) onto the stored turns of one conversation.

What is read: every ``*.jsonl`` file under the directory (recursively; typically
``episodes/<user>.jsonl`` + ``semantic/<user>.jsonl`` or ``<user>_episodes.jsonl`` +
``<user>_semantic.jsonl``), one JSON object a line; ``user`` keeps only files whose name
contains it. A record with a message list is an episode, any other record with text is a
semantic memory. Field names accepted (first present wins):

- episode: id ``episode_id``/``id``; ``title``; narrative ``content``/``narrative``/
  ``episode``/``summary``; messages ``original_messages``/``messages``, each with text
  ``content``/``text``, speaker ``metadata.original_speaker``/``speaker``/``name``/``role``
  and ``timestamp``/``time``/``date`` (ISO 8601 or LoCoMo's form);
- semantic memory: text ``content``/``memory``/``fact``/``text``; sources
  ``source_episodes``/``episode_ids``/``source_episode_ids``/``sources``.

Each message is matched to a stored turn with the same speaker (when the speaker is one of the
conversation's), the same whitespace- and case-normalised text (or one a prefix of the other,
for folded image captions) and, when the message has a timestamp, the same day. Unmatched
messages are reported, never invented; an episode with no matched turn is skipped, and a fact
none of whose sources was imported is skipped; both are reported.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from qemem.build.origin import IMPORTED, Origin, record_origin
from qemem.build.pipeline import next_number
from qemem.embed.base import Embedder
from qemem.embed.documents import embed_documents
from qemem.errors import InputError, QememError, StoreError
from qemem.lexicon import parse_datetime
from qemem.models import Conversation, Episode, SemanticFact, Turn, check_path, search_text
from qemem.store.base import MemoryStore, Scope

_EPISODE_ID = ("episode_id", "id", "uuid")
_TITLE = ("title",)
_NARRATIVE = ("content", "narrative", "episode", "summary")
_MESSAGES = ("original_messages", "messages")
_TEXT = ("content", "text")
_SPEAKER = ("speaker", "name", "role")
_TIME = ("timestamp", "time", "date")
_FACT_TEXT = ("content", "memory", "fact", "text")
_SOURCES = ("source_episodes", "episode_ids", "source_episode_ids", "sources")


@dataclass
class ImportReport:
    """What an import read, matched, stored and left out."""

    conversation: str
    files: list[str] = field(default_factory=list)
    episodes: int = 0
    facts: int = 0
    messages: int = 0
    matched: int = 0
    unmatched: list[str] = field(default_factory=list)
    skipped_episodes: list[str] = field(default_factory=list)
    skipped_facts: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _first(record: dict[str, Any], keys: Sequence[str]) -> Any:
    return next((record[k] for k in keys if record.get(k) not in (None, "")), None)


def _norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def _records(directory: Path, user: str | None) -> Iterable[tuple[str, int, dict[str, Any]]]:
    files = sorted(p for p in directory.rglob("*.jsonl") if p.is_file())
    if user is not None:
        files = [p for p in files if user in p.name]
    for path in files:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"invalid JSON ({exc.msg}); fix or remove the line",
                        file=str(path),
                        record=f"line {number}",
                    ) from None
                if isinstance(record, dict):
                    yield str(path), number, record


class _Matcher:
    """Finds the stored turn of a message; prefers turns not yet used (aliases)."""

    def __init__(self, turns: Sequence[Turn], speakers: Sequence[str]) -> None:
        self.turns = turns
        self.speakers = {s.casefold() for s in speakers}
        self.used: set[str] = set()

    def match(self, speaker: str | None, text: str, day: date | None) -> Turn | None:
        wanted = _norm(text)
        who = speaker.casefold() if speaker and speaker.casefold() in self.speakers else None
        candidates = [
            t
            for t in self.turns
            if (who is None or t.speaker.casefold() == who)
            and (day is None or t.timestamp.date() == day)
        ]

        def exact(t: Turn) -> bool:
            return _norm(t.text) == wanted

        def prefix(t: Turn) -> bool:
            stored = _norm(t.text)
            return bool(wanted) and (stored.startswith(wanted) or wanted.startswith(stored))

        for test in (exact, prefix):
            found = [t for t in candidates if test(t)]
            if found:
                turn = next((t for t in found if t.id not in self.used), found[0])
                self.used.add(turn.id)
                return turn
        return None


def _message_fields(message: dict[str, Any]) -> tuple[str | None, str, date | None]:
    meta = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    speaker = (meta or {}).get("original_speaker") or _first(message, _SPEAKER)
    stamp = _first(message, _TIME)
    day = None
    if isinstance(stamp, str):
        try:
            day = parse_datetime(stamp).date()
        except QememError:
            day = None
    return (str(speaker) if speaker else None), str(_first(message, _TEXT) or ""), day


def import_nemori(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    directory: str | Path,
    *,
    user: str | None = None,
) -> ImportReport:
    """Store the episodes and semantic memories of a NEMORI export (see the module docstring)
    as episodes ``E<n>`` and facts ``S<n>`` of ``scope``, linked to the stored turns.

    Refuses a conversation that already has episodes or facts (importing twice would
    duplicate them). All records are written in one transaction.
    """
    started = time.perf_counter()
    folder = check_path(directory, "NEMORI folder")
    if not folder.is_dir():
        raise InputError(f"{folder} is not a directory: pass the folder of NEMORI's JSONL files")
    conversation = store.get_conversation(scope)
    existing_episodes, existing_facts = store.episodes(scope), store.facts(scope)
    if existing_episodes or existing_facts:
        raise StoreError(
            f"conversation {scope} already has {len(existing_episodes)} episodes and "
            f"{len(existing_facts)} facts: import NEMORI memory into a freshly ingested "
            "conversation (qemem delete, then ingest again)"
        )
    report = ImportReport(scope.conversation)
    first = next_number(store, scope, "E")
    reader = _EpisodeReader(conversation, store.turns(scope), scope, report, first)
    fact_records: list[tuple[str, dict[str, Any]]] = []
    for path, number, record in _records(folder, user):
        if path not in report.files:
            report.files.append(path)
        where = f"{Path(path).name}:{number}"
        messages = _first(record, _MESSAGES)
        if isinstance(messages, list):
            reader.add(record, messages, where)
        elif _first(record, _FACT_TEXT):
            fact_records.append((where, record))
    episodes = reader.episodes
    first_fact = next_number(store, scope, "S")
    facts = _facts(fact_records, reader.ids, {e.id: e for e in episodes}, first_fact, report)
    if episodes or facts:
        _write(store, scope, embedder, episodes, facts)
    report.episodes, report.facts = len(episodes), len(facts)
    report.seconds = time.perf_counter() - started
    return report


class _EpisodeReader:
    """Turns NEMORI episode records into episodes on the stored turns, numbered in order from
    ``E<first>``."""

    def __init__(
        self,
        conversation: Conversation,
        turns: Sequence[Turn],
        scope: Scope,
        report: ImportReport,
        first: int,
    ) -> None:
        self.scope, self.report = scope, report
        self.turns = turns
        self.matcher = _Matcher(self.turns, conversation.speakers)
        self.order = {t.id: n for n, t in enumerate(self.turns)}
        self.dates = {s.index: s.date_time for s in conversation.sessions}
        self.episodes: list[Episode] = []
        self.ids: dict[str, str] = {}
        """NEMORI episode id -> the imported episode's id."""
        self.next_number = first
        """The number of the next episode id."""

    def add(self, record: dict[str, Any], messages: list[Any], where: str) -> None:
        """Import one episode record (skipped, and reported, when no message matches a turn)."""
        report = self.report
        source_id = str(_first(record, _EPISODE_ID) or where)
        matched: list[str] = []
        for message in messages:
            if not isinstance(message, dict):
                continue
            report.messages += 1
            speaker, text, day = _message_fields(message)
            turn = self.matcher.match(speaker, text, day)
            if turn is None:
                report.unmatched.append(f"episode {source_id}: {speaker}: {text[:80]!r}")
            else:
                report.matched += 1
                matched.append(turn.id)
        if not matched:
            report.skipped_episodes.append(f"{source_id} ({where}): no message matched a turn")
            return
        turn_ids = tuple(sorted(dict.fromkeys(matched), key=self.order.__getitem__))
        first = self.turns[self.order[turn_ids[0]]]
        episode = Episode(
            f"E{self.next_number}",
            self.scope.conversation,
            first.session,
            " ".join(str(_first(record, _TITLE) or "").split()) or f"Episode {source_id}",
            str(_first(record, _NARRATIVE) or "").strip(),
            self.dates.get(first.session, first.timestamp),
            turn_ids,
        )
        self.next_number += 1
        self.ids[source_id] = episode.id
        self.episodes.append(episode)


def _write(
    store: MemoryStore,
    scope: Scope,
    embedder: Embedder,
    episodes: Sequence[Episode],
    facts: Sequence[SemanticFact],
) -> None:
    """Embed, then store the imported episodes (marked as imported) and facts in one
    transaction."""
    episode_vectors = embed_documents(embedder, [search_text(e) for e in episodes])
    fact_vectors = embed_documents(embedder, [search_text(f) for f in facts])
    with store.transaction():
        if episodes:
            store.add_episodes(scope, episodes, episode_vectors, embedder.id)
        for episode in episodes:
            record_origin(store, scope, episode.id, Origin(IMPORTED))
        if facts:
            store.put_facts(scope, facts, fact_vectors, embedder.id)


def _facts(
    records: Sequence[tuple[str, dict[str, Any]]],
    ids: dict[str, str],
    episodes: dict[str, Episode],
    first: int,
    report: ImportReport,
) -> list[SemanticFact]:
    """Facts of the semantic records whose sources were imported (session: earliest source),
    numbered ``S<first>`` on."""
    facts: list[SemanticFact] = []
    for where, record in records:
        sources = _first(record, _SOURCES) or []
        sources = [sources] if isinstance(sources, str) else list(sources)
        linked = tuple(dict.fromkeys(ids[str(s)] for s in sources if str(s) in ids))
        text = " ".join(str(_first(record, _FACT_TEXT)).split())
        if not linked:
            report.skipped_facts.append(f"{where}: no source episode was imported ({text[:60]!r})")
            continue
        session = min(episodes[e].session for e in linked)
        fact = SemanticFact(f"S{first + len(facts)}", report.conversation, text, session, linked)
        facts.append(fact)
    return facts
