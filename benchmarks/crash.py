"""Crash safety: SIGKILL an ingest + build at a random moment, then check the store.

python benchmarks/crash.py --store /tmp/crash.db --data locomo10.json --rounds 50
python benchmarks/crash.py --postgres --data locomo10.json --rounds 20

``--postgres`` starts a throwaway PostgreSQL (``pgserver``) in a temporary folder and uses it as
the store; ``--store`` also takes any ``postgresql://`` URL.

First one uninterrupted run (ingest, then build with the fake LLM slowed by ``--delay`` s per
call; hash embedder for speed: vectors are compared, not their quality) gives the reference
dump. Then, each round: empty the store, start the same run in a child process, kill it with
SIGKILL at a moment drawn uniformly over the reference run's working time, and check:

- integrity: SQLite's ``PRAGMA integrity_check`` and ``foreign_key_check`` (SQLite stores),
  and for any store that every record has its vector and every link points to a record;
- nothing partial is visible: each stored conversation has exactly the reference's sessions
  and turns; each stored episode equals the reference's; each stored fact has the reference's
  content and a prefix of its episode links;
- the rerun of the same command (in this process) completes and its canonical dump (turns,
  episodes, facts, vectors, build state) equals the reference byte for byte.

Prints the run info, then one JSON line: rounds, kills that landed mid-work, integrity
failures, partial records seen, differences after the rerun.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qemem.embed import HashEmbedder
from qemem.eval.manifest import run_info
from qemem.llm import LLMClient, LLMRequest, LLMResponse
from qemem.memory import Memory
from qemem.store.base import Scope
from qemem.testing import OfflineLLM

READY = "ready"


class SlowFake:
    """The fake LLM with a fixed delay per call, so a build takes long enough to be cut."""

    def __init__(self, delay: float) -> None:
        self.inner = OfflineLLM()
        self.name, self.model = self.inner.name, self.inner.model
        self.delay = delay

    def complete(self, request: LLMRequest) -> LLMResponse:
        time.sleep(self.delay)
        return self.inner.complete(request)


def open_memory(store: str, delay: float) -> Memory:
    llm = LLMClient(SlowFake(delay), concurrency=4)
    return Memory.open(store, embedder=HashEmbedder(), llm=llm)


def child(store: str, data: Path, delay: float, ready: bool = False) -> None:
    """The command under test: ingest ``data``, then build every conversation."""
    with open_memory(store, delay) as memory:
        if ready:
            print(READY, flush=True)
        memory.ingest(data)
        memory.build()


def run_child(args: argparse.Namespace, kill_after: float | None) -> tuple[float, bool]:
    """Run the command in a child; SIGKILL it ``kill_after`` s after it is ready. Returns the
    working time and whether it was killed before finishing."""
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            "--store",
            args.store,
            "--data",
            str(args.data),
            "--delay",
            str(args.delay),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != READY:
        raise SystemExit("the child did not start")
    started = time.perf_counter()
    try:
        proc.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return time.perf_counter() - started, True
    if proc.returncode != 0:
        raise SystemExit(f"the child failed with status {proc.returncode}")
    return time.perf_counter() - started, False


def digest(vector: Any) -> str:
    return hashlib.sha256(vector.astype("<f4").tobytes()).hexdigest()


def dump(memory: Memory) -> dict[str, Any]:
    """Canonical content of the store through the public API (any backend): conversations,
    sessions, turns, episodes, facts, vectors (sha256 of the float32 bytes), build state."""
    out: dict[str, Any] = {}
    for conv in memory.conversations():
        scope = Scope(conv.id, conv.namespace)
        vectors = {}
        for space in ("turn", "episode", "fact"):
            ids, matrix = memory.store.vectors(scope, space)  # type: ignore[arg-type]
            vectors[space] = {i: digest(row) for i, row in zip(ids, matrix, strict=True)}
        out[conv.id] = {
            "speakers": list(conv.speakers),
            "sessions": [[s.index, s.key, s.date_time.isoformat()] for s in conv.sessions],
            "turns": [repr(t) for t in memory.turns(conv.id)],
            "episodes": [repr(e) for e in memory.episodes(conv.id)],
            "facts": [repr(f) for f in memory.facts(conv.id)],
            "vectors": vectors,
            "state": {
                s.index: memory.store.get_state(scope, f"build.segments.{s.index}")
                for s in conv.sessions
            },
        }
    return out


def canonical(data: dict[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, ensure_ascii=False).encode()


def integrity_problems(store: str, memory: Memory) -> list[str]:
    """What is broken in the store right after a kill (empty when all is well)."""
    problems = []
    path = store.removeprefix("sqlite:///")
    if "://" not in path and Path(path).exists():
        with sqlite3.connect(path) as conn:
            if (check := conn.execute("PRAGMA integrity_check").fetchone()[0]) != "ok":
                problems.append(f"integrity_check: {check}")
            if conn.execute("PRAGMA foreign_key_check").fetchall():
                problems.append("foreign_key_check found dangling rows")
        conn.close()
    for conv in memory.conversations():
        scope = Scope(conv.id, conv.namespace)
        records = {
            "turn": {t.id for t in memory.turns(conv.id)},
            "episode": {e.id for e in memory.episodes(conv.id)},
            "fact": {f.id for f in memory.facts(conv.id)},
        }
        for space, ids in records.items():
            if set(memory.store.vectors(scope, space)[0]) != ids:  # type: ignore[arg-type]
                problems.append(f"{conv.id}: {space} records and vectors differ")
        if any(not set(e.turn_ids) <= records["turn"] for e in memory.episodes(conv.id)):
            problems.append(f"{conv.id}: an episode cites a missing turn")
        if any(not set(f.episode_ids) <= records["episode"] for f in memory.facts(conv.id)):
            problems.append(f"{conv.id}: a fact cites a missing episode")
    return problems


def snapshot(memory: Memory) -> dict[str, Any]:
    """The reference's records by conversation, to judge what a killed run left."""
    return {
        conv.id: {
            "sessions": conv.sessions,
            "turns": memory.turns(conv.id),
            "episodes": {e.id: e for e in memory.episodes(conv.id)},
            "facts": {f.id: f for f in memory.facts(conv.id)},
        }
        for conv in memory.conversations()
    }


def partial_records(memory: Memory, reference: dict[str, Any]) -> list[str]:
    """Records visible after a kill that an uninterrupted run would not have stored as such:
    a conversation without all its sessions and turns, an episode unlike the reference's, a
    fact with other content or links than a prefix of the reference's."""
    found = []
    for conv in memory.conversations():
        ref = reference[conv.id]
        if conv.sessions != ref["sessions"] or memory.turns(conv.id) != ref["turns"]:
            found.append(f"{conv.id}: partial sessions or turns")
        for episode in memory.episodes(conv.id):
            if ref["episodes"].get(episode.id) != episode:
                found.append(f"{conv.id}: episode {episode.id} differs from the reference")
        for fact in memory.facts(conv.id):
            whole = ref["facts"].get(fact.id)
            links = len(fact.episode_ids)
            if whole is None or (whole.content, whole.episode_ids[:links]) != (
                fact.content,
                fact.episode_ids,
            ):
                found.append(f"{conv.id}: fact {fact.id} differs from the reference")
    return found


def empty(store: str) -> None:
    with Memory.open(store, embedder=HashEmbedder()) as memory:
        for conv in memory.conversations():
            memory.delete(conv.id)


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """The URL of a PostgreSQL server started by ``pgserver`` in a temporary folder, removed
    at the end."""
    import pgserver  # the [postgres] extra

    with tempfile.TemporaryDirectory(prefix="qemem-crash-pg-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="delete")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="store path or URL (emptied each round)")
    where.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL store")
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.01, help="seconds per fake LLM call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.store, args.data, args.delay, ready=True)
        return
    if args.postgres:
        with throwaway_postgres() as url:
            args.store = url
            trial(args)
    else:
        trial(args)


def trial(args: argparse.Namespace) -> None:
    """The reference run, then ``args.rounds`` killed runs against ``args.store``."""
    rng = random.Random(args.seed)
    info = run_info(
        args.data, embedder="hash-256", llm=f"fake (+{args.delay} s per call)", seed=args.seed
    )
    print(json.dumps(info, indent=1), flush=True)
    empty(args.store)
    working, _ = run_child(args, None)
    with Memory.open(args.store, embedder=HashEmbedder()) as memory:
        expected_records = snapshot(memory)
        reference = dump(memory)
    expected = canonical(reference)
    tally = {"rounds": args.rounds, "killed_mid_work": 0, "integrity_failures": 0}
    tally |= {"partial_records": 0, "differences_after_rerun": 0}
    for n in range(args.rounds):
        empty(args.store)
        _, killed = run_child(args, rng.uniform(0, working))
        tally["killed_mid_work"] += killed
        with Memory.open(args.store, embedder=HashEmbedder()) as memory:
            problems = integrity_problems(args.store, memory)
            partial = partial_records(memory, expected_records)
        tally["integrity_failures"] += bool(problems)
        tally["partial_records"] += bool(partial)
        child(args.store, args.data, args.delay)  # the rerun, in this process: same code
        with Memory.open(args.store, embedder=HashEmbedder()) as memory:
            same = canonical(dump(memory)) == expected
        tally["differences_after_rerun"] += not same
        status = "ok" if same and not problems and not partial else "FAIL"
        print(f"round {n + 1}: killed={killed} {status} {problems + partial}", flush=True)
    print(f"reference run: {working:.2f} s of work, {len(expected)} bytes of canonical dump")
    print(json.dumps(tally))


if __name__ == "__main__":
    main()
