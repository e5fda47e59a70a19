"""Concurrent writers and readers on one SQLite store: nothing lost, no "database is locked"."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from qemem.errors import StoreError
from qemem.llm import LLMClient
from qemem.memory import Memory
from qemem.testing import OfflineLLM


def conversation(cid: str, n: int) -> str:
    return "".join(
        json.dumps(
            {
                "conversation_id": cid,
                "session_id": f"s{i // 10}",
                "timestamp": f"2024-03-{1 + i // 10:02d}T10:{i % 60:02d}:00",
                "speaker": "Ann" if i % 2 else "Bob",
                "text": f"{cid} message {i} about gardens and kilns",
            }
        )
        + "\n"
        for i in range(n)
    )


@pytest.mark.slow
def test_two_processes_ingest_at_once(tmp_path: Path) -> None:
    shared = tmp_path / "shared.jsonl"
    shared.write_text(conversation("both", 60) + conversation("also", 40))
    own = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    own[0].write_text(conversation("a", 50))
    own[1].write_text(conversation("b", 50))
    store = tmp_path / "m.db"
    env = {"QEMEM_EMBEDDER": "hash", "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "qemem", "ingest", str(f), "--store", str(store), "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for f in (shared, own[0], shared, own[1])
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "locked" not in out + err and "Traceback" not in err
    with Memory.open(store, embedder="hash", read_only=True) as memory:
        counts = {c.id: len(memory.turns(c.id)) for c in memory.conversations()}
    assert counts == {"a": 50, "also": 40, "b": 50, "both": 60}


def test_a_writer_holding_the_lock_too_long_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(conversation("c", 5))
    memory = Memory.open(tmp_path / "m.db", embedder="hash")
    memory.store._conn.execute("PRAGMA busy_timeout = 50")  # type: ignore[attr-defined]
    other = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="locked by another writer"):
        memory.ingest(path)
    other.execute("ROLLBACK")
    assert memory.ingest(path).turns_added == 5
    memory.close()


def test_reads_go_on_while_a_build_writes(tmp_path: Path, sample_path: Path) -> None:
    store = tmp_path / "m.db"
    builder = Memory.open(store, embedder="hash", llm=LLMClient(OfflineLLM()))
    builder.ingest(sample_path)
    reader = Memory.open(store, embedder="hash", read_only=True)
    seen = []

    def read(done: int, total: int) -> None:
        seen.append(len(reader.search("demo-1", "pottery class", k=3)))

    builder.build("demo-1", progress=read)
    assert seen and all(n == 3 for n in seen)
    assert len(reader.episodes("demo-1")) == len(builder.episodes("demo-1")) > 0
    builder.close()
    reader.close()
