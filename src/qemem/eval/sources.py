"""A run folder's sources.json: every turn, episode and fact of each conversation asked, stored
once per conversation for the run page (instead of once per question)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qemem.answer.sources import Sources
from qemem.memory import Memory

#: the run folder's source records, by conversation
SOURCES_FILE = "sources.json"


def load_run_sources(out: Path) -> dict[str, Any] | None:
    """The source records the run folder ``out`` stores, by conversation (None without a
    sources.json)."""
    path = out / SOURCES_FILE
    return json.loads(path.read_text("utf-8")) if path.exists() else None


def write_run_sources(out: Path, memory: Memory, conversations: Sequence[str]) -> None:
    """Store every record of ``conversations`` in the run folder's sources.json, kept with the
    conversations written by earlier runs into the folder."""
    stored = load_run_sources(out) or {}
    for cid in conversations:
        conversation = memory.conversation(cid)
        sources = Sources(
            speakers=list(conversation.speakers),
            sessions={s.index: s.date_time.isoformat() for s in conversation.sessions},
            turns={t.id: t for t in memory.turns(cid)},
            episodes={e.id: e for e in memory.episodes(cid)},
            facts={f.id: f for f in memory.facts(cid, include_superseded=True)},
        )
        stored[cid] = sources.to_dict()
    path = out / SOURCES_FILE
    path.write_text(json.dumps(stored, ensure_ascii=False, separators=(",", ":")), "utf-8")
