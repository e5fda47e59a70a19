"""Your own chat, end to end: write a JSONL file, ingest it, build memory, ask, get context.

    python examples/own_chat.py                      # the offline LLM (placeholder answers)
    QEMEM_LLM=anthropic:claude-haiku-4-5 python examples/own_chat.py   # a real model

Without QEMEM_LLM it runs with qemem's offline LLM, which needs no key and no network but
echoes spans of its prompt instead of answering: the evidence, cards and context block are
real, the answer text is a placeholder.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from qemem import Memory

MESSAGES = [
    ("s1", "2024-03-02T09:15", "Ana", "I finally booked the flights to Lisbon for May 14."),
    ("s1", "2024-03-02T09:16", "Ben", "Nice! Is your passport still valid?"),
    ("s1", "2024-03-02T09:18", "Ana", "It expires in June, so I renewed it last week."),
    ("s2", "2024-04-20T18:40", "Ana", "The new passport arrived yesterday, right on time."),
    ("s2", "2024-04-20T18:42", "Ben", "Great, then Lisbon is all set."),
]


def write_chat(path: Path) -> None:
    """One JSON object per message: the generic chat format `qemem ingest` reads."""
    with path.open("w", encoding="utf-8") as out:
        for session, timestamp, speaker, text in MESSAGES:
            record = {"conversation_id": "trip", "session_id": session, "timestamp": timestamp}
            out.write(json.dumps(record | {"speaker": speaker, "text": text}) + "\n")


def main() -> None:
    llm = os.environ.get("QEMEM_LLM", "fake")
    with tempfile.TemporaryDirectory() as tmp:
        chat = Path(tmp) / "chat.jsonl"
        write_chat(chat)
        with Memory.open(Path(tmp) / "memory.db", llm=llm) as memory:
            memory.ingest(chat)
            [report] = memory.build("trip")
            print(f"built with {llm}: {report.episodes} episodes, {report.facts_added} facts")
            answer = memory.ask("trip", "When did Ana's new passport arrive?")
            print("answer:", answer.text)
            for card in answer.cards:
                checked = "verified" if card.verified else "not verified"
                time = f", time: {card.shown_time}" if card.shown_time else ""
                print(f"  card [{', '.join(card.sources)}] {checked}{time}: {card.quote!r}")
            block = memory.context("trip", "When is Ana flying to Lisbon?", budget_tokens=500)
            print(block.text)


if __name__ == "__main__":
    main()
