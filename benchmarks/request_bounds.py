"""The worst requests the HTTP API allows (issue 34): their time and memory.

Every list and size a request controls is bounded in the OpenAPI schema and refused with a 422
before any work (queries per search: 8 of at most 2,000 characters; ``k``: at most 1,000,
``null`` included; conversations per call across conversations: 50; context budget: 200,000
tokens; messages per append: 1,000, within the 1 MB body limit; ids: 1,000 characters). This
script builds a store of ``--conversations`` conversations of ``--turns`` turns each (synthetic
text, hash embedder, SQLite in a temporary folder), then sends each request at its bounds once
through the app (in this process, no network) and prints, per request, its status, its time
and how much the process's resident memory grew while it ran (sampled every 5 ms). The first
line is the request of the issue (90,000 queries, 28 s and 566 MB before the bounds). The search
across conversations runs twice: the first builds and caches the search indexes of every
conversation it spans (kept for later requests), the second finds them built.

    python benchmarks/request_bounds.py --conversations 50 --turns 300
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from qemem.embed import HashEmbedder
from qemem.keys import create_key, open_key_store
from qemem.memory import Memory
from qemem.memory.searching import MAX_CONVERSATIONS, MAX_SEARCH_QUERIES
from qemem.operations.schemas import MAX_K, MAX_MESSAGES, MAX_REFS
from qemem.service import create_app
from qemem.store import open_store

WORDS = (
    "pottery class marathon camping painting adoption agency concert beach hiking garden "
    "sister brother friend weekend morning evening yesterday book guitar recipe cake kitten "
    "puppy school work office travel flight museum festival parade support group therapy"
).split()
PAGE = os.sysconf("SC_PAGE_SIZE")
START = datetime(2023, 1, 1, 9, 0)


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def rss() -> int:
    """This process's resident memory in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def measured(send: Any) -> tuple[int, float, float]:
    """(status, seconds, MB of resident memory grown at the peak) of one request."""
    base, peak, done = rss(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], rss())

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    status = send().status_code
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    return status, seconds, max(0, max(peak[0], rss()) - base) / 2**20


def fill(store: str, conversations: int, turns: int, rng: random.Random) -> None:
    with Memory.open(store, embedder=HashEmbedder(), namespace="bench") as memory:
        for c in range(conversations):
            messages = [
                {
                    "session_id": f"s{n // 20}",
                    "timestamp": (START + timedelta(hours=n)).isoformat(),
                    "speaker": "Ana" if n % 2 else "Ben",
                    "text": text(rng, 25),
                    "id": f"m{n}",
                }
                for n in range(turns)
            ]
            memory.add_messages(f"c{c}", messages)


def requests(rng: random.Random, conversations: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, path, body) of each request at the bounds."""
    long_query = text(rng, 400)[:2000]
    queries = [text(rng, 400)[:2000] for _ in range(MAX_SEARCH_QUERIES)]
    every = [f"c{c}" for c in range(min(conversations, MAX_CONVERSATIONS))]
    batch = [
        {
            "session_id": "new",
            "timestamp": "2026-01-01T10:00:00",
            "speaker": "Ana",
            "text": text(rng, 200)[:900],
        }
        for _ in range(MAX_MESSAGES)
    ]
    refs = [{"space": "turn", "id": f"m{n}"} for n in range(MAX_REFS)]
    one = "/v1/conversations/c0"
    return [
        ("the issue's: 90,000 queries", f"{one}/search", {"query": ["pottery"] * 90_000}),
        (
            f"search: {MAX_SEARCH_QUERIES} x 2,000 chars, k 1,000",
            f"{one}/search",
            {"query": queries, "k": MAX_K},
        ),
        ("search: k null (cut to 1,000)", f"{one}/search", {"query": queries, "k": None}),
        (
            f"search across {len(every)}: {MAX_SEARCH_QUERIES} x 2,000 chars, k 1,000",
            "/v1/search",
            {"conversations": every, "query": queries, "k": MAX_K},
        ),
        (
            "  the same again (indexes cached)",
            "/v1/search",
            {"conversations": every, "query": queries, "k": MAX_K},
        ),
        (
            "pool: 2,000 chars, 1,000 excluded",
            f"{one}/search",
            {"query": long_query, "pool": True, "exclude": refs},
        ),
        (
            "context: 2,000 chars, budget 200,000",
            f"{one}/context",
            {"question": long_query, "budget_tokens": 200_000},
        ),
        (
            f"context across {len(every)}: budget 200,000",
            "/v1/context",
            {"conversations": every, "question": long_query, "budget_tokens": 200_000},
        ),
        (
            f"ask (retrieval) across {len(every)}",
            "/v1/ask",
            {"conversations": every, "question": long_query, "mode": "retrieval"},
        ),
        (
            "append: 1,000 messages of 900 chars",
            "/v1/conversations/new/messages",
            {"messages": batch},
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder = Path(tempfile.mkdtemp(prefix="qemem-bounds-"))
    store_path = str(folder / "memory.db")
    started = time.perf_counter()
    fill(store_path, args.conversations, args.turns, rng)
    print(
        f"store: {args.conversations} conversations x {args.turns} turns "
        f"(filled in {time.perf_counter() - started:.0f} s)"
    )
    store, keys = open_store(store_path), open_key_store(store_path)
    key, _ = create_key(keys, "bench")
    app = create_app(store, keys=keys, embedder=HashEmbedder(), metrics=False)
    rows = []
    with TestClient(app) as client:
        auth = {"Authorization": f"Bearer {key}"}
        client.post("/v1/conversations/c0/search", json={"query": "warm up"}, headers=auth)
        print(f"{'request':<44}{'status':>7}{'seconds':>9}{'RSS +MB':>9}")
        for name, path, body in requests(rng, args.conversations):
            payload = json.dumps(body).encode()
            status, seconds, grown = measured(
                lambda path=path, payload=payload: client.post(
                    path, content=payload, headers={**auth, "Content-Type": "application/json"}
                )
            )
            rows.append({"request": name, "status": status, "seconds": seconds, "rss_mb": grown})
            print(f"{name:<44}{status:>7}{seconds:>9.2f}{grown:>9.1f}")
    store.close()
    keys.close()
    shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
