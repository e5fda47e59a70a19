"""Several processes on one store at once: two ingest different conversations while a third
builds another (episodes and facts, with the offline ``fake`` LLM); then the counts.

Nothing may be lost (turns, episodes and facts equal those of the same ingests and build run
one after another on a fresh SQLite store) and nothing duplicated (the
reference counts, and every stored id distinct). Uses the ``hash`` embedder.

    python benchmarks/store_concurrency.py --data locomo10.json --store postgresql://USER@HOST/DB
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from pathlib import Path

from qemem.eval.manifest import run_info
from qemem.ingest.locomo import load_locomo, parse_locomo
from qemem.memory import Memory
from qemem.store import parse_store_url


def ingest(store: str, data: str, conversation: str) -> None:
    samples = [s for s in load_locomo(data) if s.get("sample_id") == conversation]
    with Memory.open(store, embedder="hash") as memory:
        memory.ingest(parse_locomo(samples, data))


def build(store: str, conversation: str) -> None:
    with Memory.open(store, embedder="hash", llm="fake") as memory:
        memory.build(conversation)


def counts(store: str, conversation: str) -> dict[str, int]:
    with Memory.open(store, embedder="hash") as memory:
        spaces = {
            "turns": [t.id for t in memory.turns(conversation)],
            "episodes": [e.id for e in memory.episodes(conversation)],
            "facts": [f.id for f in memory.facts(conversation)],
        }
    for name, ids in spaces.items():
        if len(ids) != len(set(ids)):
            raise SystemExit(f"duplicated {name} in {conversation}")
    return {name: len(ids) for name, ids in spaces.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="LoCoMo JSON with >= 3 conversations")
    parser.add_argument("--store", required=True, help="an empty store URL")
    args = parser.parse_args()
    first, second, built = [s["sample_id"] for s in load_locomo(args.data)][:3]
    with tempfile.TemporaryDirectory() as tmp:
        reference = str(Path(tmp) / "reference.db")
        for conv in (first, second, built):
            ingest(reference, args.data, conv)
        ingest(args.store, args.data, built)
        build(reference, built)
        expected = {conv: counts(reference, conv) for conv in (first, second, built)}
        context = multiprocessing.get_context("spawn")
        workers = [
            context.Process(target=ingest, args=(args.store, args.data, first)),
            context.Process(target=ingest, args=(args.store, args.data, second)),
            context.Process(target=build, args=(args.store, built)),
        ]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        wall = time.perf_counter() - started
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    found = {conv: counts(args.store, conv) for conv in expected}
    result = {
        **run_info(args.data, store=parse_store_url(args.store)[0], embedder="hash-256"),
        "processes": ["ingest " + first, "ingest " + second, "build " + built],
        "wall_s": round(wall, 1),
        "exit_codes_nonzero": failed,
        "expected": expected,
        "found": found,
        "ok": not failed and found == expected,
    }
    for conv in expected:
        print(f"{conv}: expected {expected[conv]}  found {found[conv]}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
