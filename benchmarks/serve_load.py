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

Open loop instead (``--rates 10,25,50,100``): for each rate, requests are due at fixed
intervals for ``--seconds`` whatever the answers' latency, sent by a pool of clients, and each
latency is counted from the time its request was due (so waiting for a free client counts:
no coordinated omission); the last line names the lowest rate at which search p95 exceeds 5x
the single-client search p50. ``--postgres`` runs it on a throwaway PostgreSQL (``pgserver``);
``--store`` also takes a ``postgresql://`` URL of an empty database. ``--json`` ends with one
JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import cast

import httpx
from crash import throwaway_postgres

import qemem
from qemem.keys import create_key, open_key_store
from qemem.memory import Memory

APPEND_ID = "load-appends"
KNEE = 5.0
"""The goal: search p95 under load at most this many times the single-client search p50."""
SENDERS = 64
"""Clients of the open-loop mode: enough that a request rarely waits for a free one."""
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


class Requests:
    """The request mix: appends (every 10th re-sends an acknowledged batch), searches and
    retrieval-mode asks; thread-safe, so clients of either mode draw from one generator."""

    def __init__(self, cid: str, mix: tuple[float, float], seed: int) -> None:
        self.cid, self.mix, self.seed = cid, mix, seed
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counter = self.appends = 0
        self.sent: list[list[dict[str, str]]] = []

    def next(self, sender: int) -> tuple[str, str, dict[str, object]]:
        """(route, url, body) of the next request, sent by client ``sender``."""
        with self.lock:
            roll = self.rng.random()
            if roll < self.mix[0]:
                return "append", f"/v1/conversations/{APPEND_ID}/messages", self._batch(sender)
            query = self.rng.choice(QUESTIONS)
        if roll < self.mix[0] + self.mix[1]:
            return "search", f"/v1/conversations/{self.cid}/search", {"query": query, "k": 10}
        body = {"question": query, "mode": "retrieval"}
        return "ask(retrieval)", f"/v1/conversations/{self.cid}/ask", body

    def _batch(self, sender: int) -> dict[str, object]:
        self.appends += 1
        if self.sent and self.appends % 10 == 0:
            return {"messages": self.rng.choice(self.sent)}
        batch = []
        for _ in range(self.rng.randint(1, 3)):
            self.counter += 1
            batch.append(
                {
                    "id": f"r{self.seed}-c{sender}-m{self.counter}",
                    "session_id": f"client-{sender}",
                    "timestamp": "2024-05-01T10:00:00",
                    "speaker": f"client {sender}",
                    "text": f"message {self.counter} of client {sender}: {self.rng.random():.6f}",
                }
            )
        return {"messages": batch}


def send(
    http: httpx.Client,
    request: tuple[str, str, dict[str, object]],
    since: float,
    load: Load,
    requests: Requests,
) -> None:
    """Send one request and record its latency from ``since`` (its send time in closed loop,
    its scheduled time in open loop, so time spent waiting for a free sender counts)."""
    route, url, body = request
    try:
        response = http.post(url, json=body)
        ok, detail = response.status_code == 200, response.text
    except httpx.HTTPError as exc:
        ok, detail = False, repr(exc)
    load.record(route, time.perf_counter() - since, ok, detail)
    if ok and route == "append":
        batch = cast(list[dict[str, str]], body["messages"])
        with load.lock:
            for message, stored in zip(batch, response.json()["ids"], strict=True):
                load.acknowledged[stored] = message["text"]
        with requests.lock:
            if batch not in requests.sent:
                requests.sent.append(batch)


def client(base: str, key: str, n: int, until: float, load: Load, requests: Requests) -> None:
    """A closed-loop client: the next request as soon as the last one is answered."""
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as http:
        while time.perf_counter() < until:
            send(http, requests.next(n), time.perf_counter(), load, requests)


def open_loop(
    base: str, key: str, rate: float, seconds: float, load: Load, requests: Requests
) -> float:
    """Requests at a fixed ``rate`` per second for ``seconds`` (the i-th due at i / rate),
    whatever the answers' latency, sent by a pool of ``SENDERS`` clients; the elapsed time."""
    due: queue.Queue[float | None] = queue.Queue()

    def sender(n: int) -> None:
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
            while (scheduled := due.get()) is not None:
                send(http, requests.next(n), scheduled, load, requests)

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(SENDERS)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        scheduled = start + i / rate
        time.sleep(max(0.0, scheduled - time.perf_counter()))
        due.put(scheduled)
    for _ in threads:
        due.put(None)
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


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


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="LoCoMo file (default: the bundled sample)")
    parser.add_argument("--conversation", default=None, help="conversation id in --data")
    parser.add_argument("--clients", type=int, default=16, help="closed-loop clients")
    parser.add_argument(
        "--rates", default=None, help="open loop instead: requests/s, comma-separated (10,25,50)"
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="per rate; at most 300")
    parser.add_argument("--appends", type=float, default=0.4, help="share of appends")
    parser.add_argument("--searches", type=float, default=0.4, help="share of searches")
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument(
        "--store", help="an empty store: SQLite file or postgresql:// URL (default: temporary)"
    )
    parser.add_argument(
        "--postgres", action="store_true", help="a throwaway PostgreSQL (pgserver) as the store"
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    return parser.parse_args()


def prepare(
    store: str, data: Path, conversation: str | None, embedder: str
) -> tuple[str, int, str, str]:
    """Ingest ``data`` and make an API key: (conversation, its turns, embedder id, key)."""
    with Memory.open(store, embedder=embedder, namespace="load") as memory:
        memory.ingest(data)
        cid = conversation or memory.conversations()[0].id
        turns = len(memory.turns(cid))
        embedder_id = memory.embedder.id
    keys = open_key_store(store)
    key, _ = create_key(keys, "load", label="serve_load")
    keys.close()
    return cid, turns, embedder_id, key


@contextmanager
def serving(store: str, workers: int, embedder: str) -> Iterator[str]:
    """``qemem serve`` on a free port of 127.0.0.1 until the block ends: its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = ["serve", "--store", store, "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from qemem.cli import main; main()",
            *command,
            "--workers",
            str(workers),
        ],
        env={**os.environ, "QEMEM_EMBEDDER": embedder},
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
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def print_routes(load: Load, elapsed: float) -> dict[str, dict[str, float]]:
    """The per-route table of one run; its figures by route."""
    print(f"{'route':<16}{'requests':>9}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    figures = {}
    for route, values in sorted(load.latency.items()):
        row = {
            "requests": len(values),
            "per_s": round(len(values) / elapsed, 1),
            **{f"p{q}_ms": round(percentile(values, q), 1) for q in (50, 95, 99)},
        }
        figures[route] = row
        print(
            f"{route:<16}{row['requests']:>9}{row['per_s']:>8.1f}"
            f"{row['p50_ms']:>9.1f}{row['p95_ms']:>9.1f}{row['p99_ms']:>9.1f}"
        )
    print(f"errors: {sum(load.errors.values())}")
    for what, count in load.errors.most_common(5):
        print(f"  {count} x {what}")
    return figures


def knee(
    runs: Sequence[tuple[float, dict[str, dict[str, float]]]], single_p50: float
) -> float | None:
    """The lowest rate whose search p95 exceeds ``KNEE`` times the single-client search p50
    (None: no rate did)."""
    for rate, figures in sorted(runs):
        if figures.get("search", {}).get("p95_ms", 0.0) > KNEE * single_p50:
            return rate
    return None


def check_appends(store: str, embedder: str, loads: Sequence[Load]) -> bool:
    """Whether every acknowledged message is stored exactly once, and nothing else is."""
    acknowledged = {k: v for load in loads for k, v in load.acknowledged.items()}
    with Memory.open(store, embedder=embedder, namespace="load") as memory:
        stored = memory.turns(APPEND_ID) if acknowledged else []
    stored_ids = Counter(t.id for t in stored)
    texts = Counter(t.text for t in stored)
    lost = set(acknowledged) - set(stored_ids)
    extra = set(stored_ids) - set(acknowledged)
    duplicated = [t for t, n in texts.items() if n > 1]
    wrong = [t.id for t in stored if acknowledged.get(t.id, t.text) != t.text]
    print(
        f"appends: {len(acknowledged)} acknowledged messages, {len(stored)} stored; "
        f"lost {len(lost)}, unacknowledged {len(extra)}, duplicated {len(duplicated)}, "
        f"altered {len(wrong)}"
    )
    return not (lost or extra or duplicated or wrong)


def closed_loop(
    base: str, key: str, clients: int, seconds: float, load: Load, requests: Requests
) -> float:
    """``clients`` closed-loop clients for ``seconds``; the elapsed time."""
    until = time.perf_counter() + seconds
    threads = [
        threading.Thread(target=client, args=(base, key, n, until, load, requests))
        for n in range(clients)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def run_load(
    args: argparse.Namespace, base: str, key: str, cid: str, seconds: float
) -> tuple[list[Load], list[tuple[float, dict[str, dict[str, float]]]]]:
    """The closed-loop run, or one open-loop run per rate: the loads and figures per run."""
    mix = (args.appends, args.searches)
    loads, runs = [], []
    for rate in [float(r) for r in args.rates.split(",")] if args.rates else [0.0]:
        load, requests = Load(), Requests(cid, mix, seed=len(loads))
        if rate:
            elapsed = open_loop(base, key, rate, seconds, load, requests)
            print(f"open loop at {rate:g} requests/s, {elapsed:.1f} s:")
        else:
            elapsed = closed_loop(base, key, args.clients, seconds, load, requests)
            total = sum(len(v) for v in load.latency.values())
            print(f"{args.clients} clients, {elapsed:.1f} s: {total} requests")
        loads.append(load)
        runs.append((rate, print_routes(load, elapsed)))
    return loads, runs


def main() -> None:
    args = arguments()
    if not args.postgres:
        run(args)
        return
    with throwaway_postgres() as url:
        args.store = url
        run(args)


def run(args: argparse.Namespace) -> None:
    """The whole benchmark on ``args.store`` (a temporary SQLite file when None)."""
    seconds = min(args.seconds, 300.0)
    data = args.data or Path(str(resources.files("qemem").joinpath("data/sample.json")))
    digest = hashlib.sha256(data.read_bytes()).hexdigest()[:16]
    tmp = tempfile.TemporaryDirectory()
    store = args.store or str(Path(tmp.name) / "serve_load.db")
    backend = "postgresql" if store.startswith("postgres") else "sqlite"
    cid, turns, embedder_id, key = prepare(store, data, args.conversation, args.embedder)
    loop = f"rates={args.rates}" if args.rates else f"clients={args.clients}"
    print(
        f"qemem {qemem.__version__} serve_load: data={data.name} sha256={digest} "
        f"conversation={cid} ({turns} turns) embedder={embedder_id} store={backend} "
        f"workers={args.workers} {loop} seconds={seconds:g} "
        f"mix=append:{args.appends:g},search:{args.searches:g},"
        f"ask:{1 - args.appends - args.searches:g} "
        f"python={sys.version.split()[0]} cpus={os.cpu_count()}"
    )
    with serving(store, args.workers, args.embedder) as base:
        single = single_client_search(base, key, cid, 50)
        single_p50 = percentile(single, 50)
        print(f"single client: search p50 {single_p50:.1f} ms, p95 {percentile(single, 95):.1f} ms")
        loads, runs = run_load(args, base, key, cid, seconds)
    errors = sum(sum(load.errors.values()) for load in loads)
    for rate, figures in runs:
        ratio = figures.get("search", {}).get("p95_ms", 0.0) / single_p50
        at = f" at {rate:g}/s" if rate else ""
        print(
            f"search p95 under load{at} / single-client p50: {ratio:.1f}x (goal: under {KNEE:g}x)"
        )
    if args.rates:
        found = knee(runs, single_p50)
        print(
            f"search p95 exceeds {KNEE:g}x the single-client p50 from: {found or 'no rate tried'}"
        )
    ok = check_appends(store, args.embedder, loads) and errors == 0
    print("PASS: no errors, every acknowledged append stored exactly once" if ok else "FAIL")
    if args.json:
        result = {
            "backend": backend,
            "workers": args.workers,
            "single_p50_ms": round(single_p50, 2),
            "runs": [{"rate": r, "routes": f} for r, f in runs],
            "ok": ok,
        }
        if args.rates:
            result["knee_rate"] = knee(runs, single_p50)
        print(json.dumps(result))
    tmp.cleanup()
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
