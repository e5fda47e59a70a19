"""What forgetting costs on SQLite, and what it leaves in the files, before and after qemem ran
with ``secure_delete`` and a log checkpoint after each forgetting transaction.

Each round fills a fresh store file (``--conversations`` conversations of ``--turns`` synthetic
turns, each turn's text holding a unique marker, with random 384-d vectors: no embedding), then
runs a delete-heavy workload: ``--deletes`` single messages deleted from every other
conversation, then the remaining conversations deleted whole. It is timed three ways per round, in
rotating order so machine load falls on all alike:

- ``before``: ``PRAGMA secure_delete = OFF`` and no checkpoint (qemem before issue 30, which
  left ``secure_delete`` to the SQLite library's build: off in SQLite's default build, on in
  some distributions' builds);
- ``secure``: ``secure_delete`` on, no checkpoint (to show what each step costs and removes);
- ``after``: the store as qemem opens it (``secure_delete`` on, the write-ahead log checkpointed
  and truncated after each commit that forgot something).

After the workload, with the store still open (as a running server has it), the database and
``-wal`` files are scanned for the markers of deleted turns: ``residue`` counts those still
readable in the files.

    python benchmarks/secure_delete.py [--conversations 20] [--turns 200] [--deletes 20]
        [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from qemem import __version__
from qemem.embed.base import HashEmbedder
from qemem.eval.manifest import git_commit
from qemem.memory import Memory
from qemem.models import Session, Turn
from qemem.store import Scope, SQLiteStore

PER_SESSION = 20
START = datetime(2023, 5, 8, 13, 0)
DIM = 384
MARKER = re.compile(rb"zq(\d{4})x(\d{5})q")


class _Unscrubbed(SQLiteStore):
    """A store that does not checkpoint after forgetting; ``secure_delete`` as ``secure``."""

    def __init__(self, path: str, secure: bool) -> None:
        super().__init__(path)
        self._conn.execute(f"PRAGMA secure_delete = {'ON' if secure else 'OFF'}")

    def _forgotten(self) -> None:
        return


MODES = ("before", "secure", "after")


def open_mode(mode: str, path: str) -> SQLiteStore:
    """The store of one mode (see the module doc) at ``path``."""
    return SQLiteStore(path) if mode == "after" else _Unscrubbed(path, mode == "secure")


def fill(memory: Memory, conversation: int, turns: int) -> None:
    """Store ``turns`` synthetic turns of conversation ``c<conversation>`` (random vectors)."""
    cid = f"c{conversation}"
    scope = Scope(cid)
    sessions = [
        Session(i + 1, START + timedelta(days=i), f"s{i + 1}") for i in range(-(-turns // 20))
    ]
    rows = [
        Turn(
            f"D{n // PER_SESSION + 1}:{n % PER_SESSION + 1}",
            cid,
            n // PER_SESSION + 1,
            n % PER_SESSION,
            ("Ann", "Bob")[n % 2],
            f"zq{conversation:04d}x{n:05d}q we talked about the garden and a trip to the lake",
            START + timedelta(days=n // PER_SESSION, minutes=n % PER_SESSION),
        )
        for n in range(turns)
    ]
    vectors = np.random.default_rng(conversation).standard_normal((turns, DIM))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    with memory.store.transaction():
        memory.store.put_conversation(scope, ["Ann", "Bob"])
        memory.store.add_sessions(scope, sessions)
        memory.store.add_turns(scope, rows, vectors, memory.embedder.id)


def residue(path: Path, deleted: set[tuple[int, int]]) -> int:
    """How many markers of deleted turns the store's files still hold (database and log)."""
    found: set[tuple[int, int]] = set()
    for file in (path, Path(f"{path}-wal")):
        if file.exists():
            found |= {(int(a), int(b)) for a, b in MARKER.findall(file.read_bytes())}
    return len(found & deleted)


def workload(store: SQLiteStore, args: argparse.Namespace) -> dict[str, float]:
    """Fill the store, time the deletes; seconds per operation and the residue."""
    memory = Memory(store, HashEmbedder(DIM))
    for c in range(args.conversations):
        fill(memory, c, args.turns)
    deleted: set[tuple[int, int]] = set()
    messages = conversations = 0.0
    for c in range(args.conversations):
        if c % 2 == 0:
            for n in range(0, args.turns, max(1, args.turns // args.deletes))[: args.deletes]:
                turn = f"D{n // PER_SESSION + 1}:{n % PER_SESSION + 1}"
                start = time.perf_counter()
                memory.delete_message(f"c{c}", turn)
                messages += time.perf_counter() - start
                deleted.add((c, n))
        else:
            start = time.perf_counter()
            memory.delete(f"c{c}")
            conversations += time.perf_counter() - start
            deleted |= {(c, n) for n in range(args.turns)}
    left = residue(Path(store.path), deleted)
    memory.close()
    halves = args.conversations // 2
    return {
        "ms_per_message": 1000 * messages / max(1, args.deletes * (args.conversations - halves)),
        "ms_per_conversation": 1000 * conversations / max(1, halves),
        "residue": left,
        "deleted": len(deleted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--deletes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for mode in MODES[n % 3 :] + MODES[: n % 3]:
                path = str(Path(tmp) / f"{mode}-{n}.db")
                runs[mode].append(workload(open_mode(mode, path), args))

    def median(mode: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[mode]), 3)

    result: dict[str, object] = {
        "qemem": __version__,
        "commit": git_commit(),
        "python": platform.python_version(),
        "data": "synthetic",
        "cpus": len(os.sched_getaffinity(0)),
        "conversations": args.conversations,
        "turns": args.turns,
        "deletes": args.deletes,
        "rounds": args.rounds,
    }
    for mode in runs:
        for key in ("ms_per_message", "ms_per_conversation", "residue", "deleted"):
            result[f"{mode}_{key}"] = median(mode, key)
    for key in ("ms_per_message", "ms_per_conversation"):
        result[f"ratio_{key}"] = round(median("after", key) / median("before", key), 3)
    if not args.json:
        for mode in runs:
            print(
                f"{mode}: {result[f'{mode}_ms_per_message']} ms per message, "
                f"{result[f'{mode}_ms_per_conversation']} ms per conversation; "
                f"{result[f'{mode}_residue']} of {result[f'{mode}_deleted']} deleted turns "
                "still readable in the files"
            )
        print(
            f"after / before: {result['ratio_ms_per_message']} (messages), "
            f"{result['ratio_ms_per_conversation']} (conversations)"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
