"""Load and concurrency of the HTTP service: K concurrent clients for T seconds on 127.0.0.1.

Starts the real server (``qemem serve``, a SQLite store in a temporary directory unless
``--store`` names one) with one conversation ingested, measures single-client search latency,
then runs ``--clients`` threads, each with its own HTTP connection, for ``--seconds``, mixing
appends (default 40%: batches of 1-3 messages with ids to one shared conversation, every 10th
one a retry of an acknowledged batch), searches (default 40%: hybrid turn search of the ingested
conversation) and retrieval-mode asks (the rest: the evidence pool and resolved times, no
LLM). Prints req/s, p50/p95/p99 per route and the errors, then stops the server and checks in
the store that every acknowledged message is stored exactly once (and nothing else was). The
embedder defaults to ``hash`` (fast, so the figures measure the service, not the embedding
model).

    python benchmarks/serve_load.py --data locomo10.json --conversation conv-26 \\
        --clients 16 --seconds 30
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from importlib import resources
from pathlib import Path

import httpx

import qemem
from qemem.keys import create_key, open_key_store
from qemem.memory import Memory

APPEND_ID = "load-appends"
QUESTIONS = (
    "When did she go to the support group?",
    "What books has she read?",
    "What did they talk about painting?",
    "Where did they go camping?",
    "What does she do to relax?",
    "pottery class",
    "adoption agency interview",
    "the concert last week",
)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of ``values`` in milliseconds."""
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Load:
    """Shared results of the client threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {}
        self.errors: Counter[str] = Counter()
        self.acknowledged: dict[str, str] = {}

    def record(self, route: str, seconds: float, ok: bool, detail: str = "") -> None:
        with self.lock:
            self.latency.setdefault(route, []).append(seconds)
            if not ok:
                self.errors[f"{route}: {detail[:120]}"] += 1


def client(
    base: str, key: str, cid: str, n: int, until: float, load: Load, mix: tuple[float, float]
) -> None:
    rng = random.Random(n)
    headers = {"Authorization": f"Bearer {key}"}
    sent: list[list[dict[str, str]]] = []
    counter = appends = 0
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        while time.perf_counter() < until:
            roll = rng.random()
            if roll < mix[0]:
                route, url = "append", f"/v1/conversations/{APPEND_ID}/messages"
                appends += 1
                if sent and appends % 10 == 0:
                    batch = rng.choice(sent)
                else:
                    batch = []
                    for _ in range(rng.randint(1, 3)):
                        counter += 1
                        batch.append(
                            {
                                "id": f"c{n}-m{counter}",
                                "session_id": f"client-{n}",
                                "timestamp": "2024-05-01T10:00:00",
                                "speaker": f"client {n}",
                                "text": f"message {counter} of client {n}: {rng.random():.6f}",
                            }
                        )
                body: dict[str, object] = {"messages": batch}
            elif roll < mix[0] + mix[1]:
                route, url = "search", f"/v1/conversations/{cid}/search"
                body = {"query": rng.choice(QUESTIONS), "k": 10}
            else:
                route, url = "ask(retrieval)", f"/v1/conversations/{cid}/ask"
                body = {"question": rng.choice(QUESTIONS), "mode": "retrieval"}
            started = time.perf_counter()
            try:
                response = http.post(url, json=body)
                ok, detail = response.status_code == 200, response.text
            except httpx.HTTPError as exc:
                ok, detail = False, repr(exc)
            load.record(route, time.perf_counter() - started, ok, detail)
            if ok and route == "append":
                ids = response.json()["ids"]
                with load.lock:
                    for message, stored in zip(batch, ids, strict=True):
                        load.acknowledged[stored] = message["text"]
                if batch not in sent:
                    sent.append(batch)


def single_client_search(base: str, key: str, cid: str, runs: int) -> list[float]:
    times = []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        for i in range(runs + 3):
            started = time.perf_counter()
            http.post(
                f"/v1/conversations/{cid}/search", json={"query": QUESTIONS[i % 8], "k": 10}
            ).raise_for_status()
            if i >= 3:
                times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="LoCoMo file (default: the bundled sample)")
    parser.add_argument("--conversation", default=None, help="conversation id in --data")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0, help="at most 300")
    parser.add_argument("--appends", type=float, default=0.4, help="share of appends")
    parser.add_argument("--searches", type=float, default=0.4, help="share of searches")
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--store", help="SQLite store file (default: a temporary one)")
    args = parser.parse_args()
    seconds = min(args.seconds, 300.0)
    data = args.data or Path(str(resources.files("qemem").joinpath("data/sample.json")))
    digest = hashlib.sha256(data.read_bytes()).hexdigest()[:16]
    tmp = tempfile.TemporaryDirectory()
    store = args.store or str(Path(tmp.name) / "serve_load.db")
    with Memory.open(store, embedder=args.embedder, namespace="load") as memory:
        memory.ingest(data)
        cid = args.conversation or memory.conversations()[0].id
        turns = len(memory.turns(cid))
        embedder_id = memory.embedder.id
    keys = open_key_store(store)
    key, _ = create_key(keys, "load", label="serve_load")
    keys.close()
    print(
        f"qemem {qemem.__version__} serve_load: data={data.name} sha256={digest} "
        f"conversation={cid} ({turns} turns) embedder={embedder_id} store=sqlite "
        f"workers={args.workers} clients={args.clients} seconds={seconds:g} "
        f"mix=append:{args.appends:g},search:{args.searches:g},"
        f"ask:{1 - args.appends - args.searches:g} "
        f"python={sys.version.split()[0]} cpus={os.cpu_count()}"
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from qemem.cli import main; main()",
            "serve",
            "--store",
            store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
        ],
        env={**os.environ, "QEMEM_EMBEDDER": args.embedder},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise SystemExit("the server did not start")
        single = single_client_search(base, key, cid, 50)
        single_p50 = percentile(single, 50)
        print(f"single client: search p50 {single_p50:.1f} ms, p95 {percentile(single, 95):.1f} ms")
        load = Load()
        until = time.perf_counter() + seconds
        threads = [
            threading.Thread(
                target=client, args=(base, key, cid, n, until, load, (args.appends, args.searches))
            )
            for n in range(args.clients)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    total = sum(len(v) for v in load.latency.values())
    print(f"{args.clients} clients, {elapsed:.1f} s: {total} requests, {total / elapsed:.1f} req/s")
    print(f"{'route':<16}{'requests':>9}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    for route, values in sorted(load.latency.items()):
        print(
            f"{route:<16}{len(values):>9}{len(values) / elapsed:>8.1f}"
            f"{percentile(values, 50):>9.1f}{percentile(values, 95):>9.1f}"
            f"{percentile(values, 99):>9.1f}"
        )
    errors = sum(load.errors.values())
    print(f"errors: {errors}")
    for what, count in load.errors.most_common(5):
        print(f"  {count} x {what}")
    search_p95 = percentile(load.latency.get("search", [0.0]), 95)
    print(
        f"search p95 under load / single-client p50: {search_p95 / single_p50:.1f}x "
        "(goal: under 5x)"
    )
    with Memory.open(store, embedder=args.embedder, namespace="load") as memory:
        stored = memory.turns(APPEND_ID) if load.acknowledged else []
    stored_ids = Counter(t.id for t in stored)
    texts = Counter(t.text for t in stored)
    lost = set(load.acknowledged) - set(stored_ids)
    extra = set(stored_ids) - set(load.acknowledged)
    duplicated = [t for t, n in texts.items() if n > 1]
    wrong = [t.id for t in stored if load.acknowledged.get(t.id, t.text) != t.text]
    print(
        f"appends: {len(load.acknowledged)} acknowledged messages, {len(stored)} stored; "
        f"lost {len(lost)}, unacknowledged {len(extra)}, duplicated {len(duplicated)}, "
        f"altered {len(wrong)}"
    )
    ok = errors == 0 and not (lost or extra or duplicated or wrong)
    print("PASS: no errors, every acknowledged append stored exactly once" if ok else "FAIL")
    tmp.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
