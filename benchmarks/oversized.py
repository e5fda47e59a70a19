"""Oversized input: what a 1 MB message, a 99k-character message, a 10k-character question and a
100k-message JSONL file do (hash embedder, fresh temporary stores). Prints one JSON line each.

python benchmarks/oversized.py --messages 100000

Bounds (documented in docs/reliability.md): messages over 100,000 characters are refused at
ingest; only the first 4,000 characters of a message are embedded (BM25 indexes it all); tables
cut text at 400 characters; questions and queries over 2,000 characters are refused; JSON Lines
files are read one line at a time.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from qemem.embed import HashEmbedder
from qemem.errors import QememError
from qemem.eval.manifest import run_info
from qemem.memory import Memory


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def record(n: int, text: str, per_session: int = 100) -> str:
    return json.dumps(
        {
            "conversation_id": "big",
            "session_id": f"s{n // per_session:05d}",
            "timestamp": "2024-01-01T10:00:00",
            "speaker": "Ann" if n % 2 else "Bob",
            "text": text,
        }
    )


def attempt(what: str, action: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        outcome = f"ok: {action()}"
    except QememError as exc:
        outcome = f"{type(exc).__name__}: {str(exc)[:160]}"
    return {"case": what, "seconds": round(time.perf_counter() - started, 3), "outcome": outcome}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="qemem-oversized-"))
    one = tmp / "one-mb.jsonl"
    one.write_text(record(0, "x" * 1_000_000) + "\n")
    long = tmp / "long.jsonl"
    long.write_text(record(0, "pottery " * 12_375) + "\n")
    big = tmp / "big.jsonl"
    with big.open("w") as handle:
        for n in range(args.messages):
            handle.write(record(n, f"message {n} about the kiln, glazes and a cat named Biscuit"))
            handle.write("\n")
    print(json.dumps(run_info(big, embedder="hash-256", messages=args.messages), indent=1))
    memory = Memory.open(tmp / "a.db", embedder=HashEmbedder())
    print(json.dumps(attempt("1 MB message", lambda: memory.ingest(one).turns_added)))
    print(json.dumps(attempt("99k-char message", lambda: memory.ingest(long).turns_added)))
    print(json.dumps(attempt("10k-char question", lambda: memory.search("big", "q" * 10_000))))
    memory.close()
    before = peak_mb()
    with Memory.open(tmp / "b.db", embedder=HashEmbedder()) as memory:
        result = attempt(f"{args.messages}-message JSONL", lambda: memory.ingest(big).turns_added)
        result["file_mb"] = round(big.stat().st_size / 2**20, 1)
        result["peak_rss_mb_before"] = round(before, 1)
        result["peak_rss_mb_after"] = round(peak_mb(), 1)
        print(json.dumps(result), flush=True)
        print(json.dumps(attempt("search it", lambda: len(memory.search("big", "Biscuit")))))
    for path in tmp.iterdir():
        path.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main()
