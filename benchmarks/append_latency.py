"""Latency of ``Memory.add_messages`` as a conversation grows, in one run.

Two conversations are pre-filled through the store (synthetic turns with random vectors
recorded under the embedder's id, so filling costs no embedding): one with ``--small`` stored
turns, one with ``--large``. Then ``--runs`` appends of one message each (the default embedder
embeds it; SQLite, a file store in a temporary directory or ``--store``) are timed per
conversation, alternating between the two so machine load falls on both alike. Half the
appends go to the last session, half open no new session (the session's tail is what the
append must read). Goal: p50 at ``--large`` within 1.2x of p50 at ``--small``.

    python benchmarks/append_latency.py [--small 500] [--large 5000] [--runs 60] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from qemem import __version__
from qemem.eval.manifest import git_commit
from qemem.memory import Memory
from qemem.models import Session, Turn
from qemem.store import Scope, open_store

TURNS_PER_SESSION = 20
START = datetime(2023, 5, 8, 13, 0)


def fill(memory: Memory, conversation: str, turns: int) -> None:
    """Store ``turns`` synthetic turns in sessions of ``TURNS_PER_SESSION`` (random vectors)."""
    scope = Scope(conversation, memory.namespace)
    sessions = [
        Session(i + 1, START + timedelta(days=i), f"s{i + 1}")
        for i in range(-(-turns // TURNS_PER_SESSION))
    ]
    rows = [
        Turn(
            f"D{n // TURNS_PER_SESSION + 1}:{n % TURNS_PER_SESSION + 1}",
            conversation,
            n // TURNS_PER_SESSION + 1,
            n % TURNS_PER_SESSION,
            ("Ann", "Bob")[n % 2],
            f"message {n} about the garden, the weather and a trip to the lake",
            START + timedelta(days=n // TURNS_PER_SESSION, minutes=n % TURNS_PER_SESSION),
        )
        for n in range(turns)
    ]
    vectors = np.random.default_rng(0).standard_normal((turns, memory.embedder.dim))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    with memory.store.transaction():
        memory.store.put_conversation(scope, ["Ann", "Bob"])
        memory.store.add_sessions(scope, sessions)
        memory.store.add_turns(scope, rows, vectors, memory.embedder.id)


def append_one(memory: Memory, conversation: str, n: int) -> float:
    """Seconds to append one message to the conversation's last session."""
    last = memory.conversation(conversation).sessions[-1]
    message = {
        "session_id": last.key,
        "timestamp": (last.date_time + timedelta(hours=1, seconds=n)).isoformat(),
        "speaker": "Ann",
        "text": f"new message {n}: we planted tomatoes by the fence",
    }
    start = time.perf_counter()
    memory.add_messages(conversation, [message])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--store", default=None, help="an empty store URL (default: temp file)")
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or str(Path(tmp) / "append.db")
        memory = Memory(open_store(url))
        fill(memory, "small", args.small)
        fill(memory, "large", args.large)
        for n in range(5):  # warm up the embedder and both conversations
            append_one(memory, "small", -1 - n)
            append_one(memory, "large", -1 - n)
        times: dict[str, list[float]] = {"small": [], "large": []}
        for n in range(args.runs):
            for conversation in ("small", "large"):
                times[conversation].append(append_one(memory, conversation, n))
        memory.close()
    small, large = statistics.median(times["small"]), statistics.median(times["large"])
    result = {
        "qemem": __version__,
        "commit": git_commit(),
        "python": platform.python_version(),
        "data": "synthetic",
        "embedder": memory.embedder.id,
        "runs": args.runs,
        "cpus": len(os.sched_getaffinity(0)),
        "stored_small": args.small,
        "stored_large": args.large,
        "p50_ms_small": round(small * 1000, 1),
        "p50_ms_large": round(large * 1000, 1),
        "p95_ms_large": round(statistics.quantiles(times["large"], n=20)[-1] * 1000, 1),
        "ratio": round(large / small, 3),
    }
    if not args.json:
        print(
            f"append p50: {result['p50_ms_small']} ms at {args.small} stored turns, "
            f"{result['p50_ms_large']} ms at {args.large} (ratio {result['ratio']})"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
