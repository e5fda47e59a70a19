"""Chaos drill of the HTTP service (issue 34): open-loop load on PostgreSQL while the database
restarts and a server worker is killed.

Starts a throwaway PostgreSQL (``pgserver``) with the bundled sample conversation (or
``--data``), and ``qemem serve --workers 2`` over it with the hash embedder. Then sends requests
at a fixed ``--rate`` (default 25/s, open loop: each request is due at its time whatever the
answers' latency, and its latency counts from then) for ``--seconds``: 70% reads (half hybrid
searches, half context blocks of the sample conversation) and 30% appends of 1-3 messages
without ids, each batch under its own ``Idempotency-Key``; an append that fails (5xx or a
broken connection) is sent again with the same key until it is acknowledged or the drill ends,
as a careful client does. During the load:

- at 1/3 of the run PostgreSQL is stopped (``pg_ctl stop -m fast``) for ``--outage`` seconds,
  then started again;
- at 2/3 one server worker is killed with SIGKILL (uvicorn starts a new one).

At the end the server is stopped and the store is read: every acknowledged message must be
stored, exactly once, with its text. Prints a timeline and one table: acknowledged writes lost
(must be 0), 5xx after recovery (must be 0), 5xx, broken connections and timeouts during each
fault (counted apart), the recovery time of each fault (from the database's return, or the kill,
until ``STREAK`` requests in a row succeed) and p95 latency before the first fault and after
the last recovery. Requests not answered within ``TIMEOUT_S`` count as timed out (the server
is overloaded: the rate is more than the machine serves), apart from 5xx. ``--json`` ends with
one JSON line.

    python benchmarks/chaos.py --seconds 90
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from serve_load import QUESTIONS, free_port, percentile

from qemem.keys import create_key, open_key_store
from qemem.memory import Memory

APPENDS = "chaos-appends"
"""The conversation the appends go to."""
STREAK = 10
"""A fault is over once this many requests in a row (by due time) have succeeded."""
SENDERS = 128
"""Clients of the open loop: enough for the requests held during an outage."""
TIMEOUT_S = 30.0
"""A request not answered by then counts as timed out (an overloaded server)."""


@dataclass
class Outcome:
    """One request: what it was, when it was due and answered, and how."""

    route: str
    due: float
    done: float
    status: int  # 0: the connection broke (reset, refused); -1: no answer within TIMEOUT_S
    retry: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class Drill:
    """Everything the senders record, and the faults' times."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: list[Outcome] = field(default_factory=list)
    acknowledged: dict[str, str] = field(default_factory=dict)
    events: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)

    def event(self, name: str) -> None:
        with self.lock:
            self.events[name] = time.perf_counter()
        print(f"{self.events[name] - self.events['start']:6.1f} s  {name}", flush=True)


# ---------------------------------------------------------------------- PostgreSQL


class Postgres:
    """A throwaway ``pgserver`` PostgreSQL that can be stopped and started again."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import pgserver

            self.folder = tempfile.mkdtemp(prefix="qemem-chaos-pg-")
            self.server = pgserver.get_server(self.folder, cleanup_mode="delete")
        self.uri: str = self.server.get_uri()

    def database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        head, _, tail = self.uri.partition("?")
        return f"{head.rsplit('/', 1)[0]}/{name}?{tail}"

    def _ctl(self, *args: str) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(list(args), pgdata=self.server.pgdata, user=self.server.system_user, timeout=60)

    def stop(self) -> None:
        self._ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        socket_dir = self.uri.split("host=", 1)[1]
        log = str(self.server.log)
        self._ctl("-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", log, "start")

    def remove(self) -> None:
        import shutil

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)


# ---------------------------------------------------------------------- the server


@contextmanager
def serving(
    store: str, workers: int, log: Path | None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``qemem serve --workers N`` on a free port (its own process group, killed whole at the
    end; its output to ``log``, if given): its base URL and process."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = ["serve", "--store", store, "--port", str(port), "--workers", str(workers)]
    server = subprocess.Popen(
        [sys.executable, "-c", "from qemem.cli import main; main()", *command],
        env={**os.environ, "QEMEM_EMBEDDER": "hash"},
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb") if log else subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not _ready(base):
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        yield base, server
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def worker_pids(server: subprocess.Popen[bytes]) -> list[int]:
    """The server's worker processes (uvicorn's children that serve requests)."""
    import psutil

    return [
        child.pid
        for child in psutil.Process(server.pid).children()
        if "spawn_main" in " ".join(child.cmdline())
    ]


# ---------------------------------------------------------------------- the load


class Mix:
    """The requests: 70% reads (searches and context blocks), 30% appends under their own
    Idempotency-Key."""

    def __init__(self, cid: str, seed: int) -> None:
        self.cid, self.rng, self.lock, self.count = cid, random.Random(seed), threading.Lock(), 0

    def next(self) -> tuple[str, str, dict[str, Any], dict[str, str]]:
        """(route, url, body, headers) of the next request."""
        with self.lock:
            roll, question = self.rng.random(), self.rng.choice(QUESTIONS)
            if roll < 0.3:
                self.count += 1
                size = self.rng.randint(1, 3)
                texts = [
                    f"chaos message {self.count}.{n}: {self.rng.random():.9f}" for n in range(size)
                ]
        if roll < 0.3:
            messages = [
                {
                    "session_id": "s1",
                    "timestamp": "2024-05-01T10:00:00",
                    "speaker": "client",
                    "text": text,
                }
                for text in texts
            ]
            key = {"Idempotency-Key": str(uuid.uuid4())}
            return "append", f"/v1/conversations/{APPENDS}/messages", {"messages": messages}, key
        if roll < 0.65:
            return "search", f"/v1/conversations/{self.cid}/search", {"query": question}, {}
        return "context", f"/v1/conversations/{self.cid}/context", {"question": question}, {}


def send(
    http: httpx.Client,
    drill: Drill,
    request: tuple[str, str, dict[str, Any], dict[str, str]],
    due: float,
) -> None:
    """Send one request (an append again and again with its key until acknowledged or the
    drill ends), recording each attempt."""
    route, url, body, headers = request
    retry = False
    while True:
        try:
            response = http.post(url, json=body, headers=headers)
            status = response.status_code
        except httpx.TimeoutException:
            status = -1
        except httpx.HTTPError:
            status = 0
        drill.record(Outcome(route, due, time.perf_counter(), status, retry))
        if 200 <= status < 300:
            if route == "append":
                ids = response.json()["ids"]
                with drill.lock:
                    for message, stored in zip(body["messages"], ids, strict=True):
                        drill.acknowledged[stored] = message["text"]
            return
        if route != "append" or drill.stop.is_set() or 400 <= status < 500:
            return
        retry, due = True, time.perf_counter()
        time.sleep(0.5)


def warm_up(base: str, key: str, mix: Mix, requests: int = 60) -> None:
    """Send ``requests`` reads from 4 clients before the drill (each worker builds its search
    indexes on first use), so the drill's "before" figures are those of a warm server."""
    auth = {"Authorization": f"Bearer {key}"}

    def client() -> None:
        with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
            for _ in range(requests // 4):
                route, url, body, headers = mix.next()
                if route != "append":
                    http.post(url, json=body, headers=headers)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def open_loop(base: str, key: str, mix: Mix, rate: float, seconds: float, drill: Drill) -> None:
    """Requests due every 1 / ``rate`` s for ``seconds``, sent by ``SENDERS`` clients."""
    due: queue.Queue[float | None] = queue.Queue()

    def sender() -> None:
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=auth, timeout=TIMEOUT_S) as http:
            while (scheduled := due.get()) is not None:
                send(http, drill, mix.next(), scheduled)

    threads = [threading.Thread(target=sender) for _ in range(SENDERS)]
    for thread in threads:
        thread.start()
    start = drill.events["start"]
    for i in range(int(rate * seconds)):
        scheduled = start + i / rate
        time.sleep(max(0.0, scheduled - time.perf_counter()))
        due.put(scheduled)
    drill.stop.set()
    for _ in threads:
        due.put(None)
    for thread in threads:
        thread.join()


def faults(
    pg: Postgres, server: subprocess.Popen[bytes], args: argparse.Namespace, drill: Drill
) -> None:
    """The faults, at 1/3 and 2/3 of the run."""
    start = drill.events["start"]
    time.sleep(max(0.0, start + args.seconds / 3 - time.perf_counter()))
    drill.event("PostgreSQL stopped")
    pg.stop()
    time.sleep(args.outage)
    pg.start()
    drill.event("PostgreSQL back")
    time.sleep(max(0.0, start + 2 * args.seconds / 3 - time.perf_counter()))
    victim = worker_pids(server)[0]
    os.kill(victim, signal.SIGKILL)
    drill.event(f"worker {victim} killed")


# ---------------------------------------------------------------------- the figures


def recovery(outcomes: list[Outcome], since: float) -> float | None:
    """The due time from which ``STREAK`` first attempts in a row (by due time) succeeded,
    among those due after ``since``; None when that never happened."""
    run: list[Outcome] = []
    for outcome in sorted(
        (o for o in outcomes if o.due >= since and not o.retry), key=lambda o: o.due
    ):
        run = [*run, outcome] if outcome.ok else []
        if len(run) == STREAK:
            return run[0].due
    return None


def lost_writes(store: str, acknowledged: dict[str, str]) -> tuple[int, int]:
    """(acknowledged messages not stored with their text, texts stored more than once)."""
    with Memory.open(store, embedder="hash", namespace="chaos") as memory:
        turns = memory.turns(APPENDS)
    stored = {t.id: t.text for t in turns}
    lost = sum(1 for i, text in acknowledged.items() if stored.get(i) != text)
    texts = [t.text for t in turns]
    return lost, len(texts) - len(set(texts))


def summary(drill: Drill, store: str, args: argparse.Namespace) -> dict[str, Any]:
    """The drill's figures. A request answered after a fault began and due before the
    recovery from it counts for that fault; any other 5xx counts as one after recovery."""
    ev, out = drill.events, drill.outcomes
    down, back = ev["PostgreSQL stopped"], ev["PostgreSQL back"]
    killed = next(v for k, v in ev.items() if k.startswith("worker"))
    pg_ok = recovery(out, back)
    kill_ok = recovery(out, killed)
    never = float("inf")
    first = [o for o in out if not o.retry]
    before = [o.done - o.due for o in first if o.due < down and o.ok]
    after = [o.done - o.due for o in first if o.due >= (kill_ok or never) and o.ok]

    def failures(began: float, recovered: float | None) -> list[int]:
        """5xx, broken connections and timeouts of the requests a fault hit."""
        inside = [o for o in out if o.done >= began and o.due < (recovered or never)]
        return [
            sum(o.status >= 500 for o in inside),
            sum(o.status == 0 for o in inside),
            sum(o.status == -1 for o in inside),
        ]

    def healthy(o: Outcome) -> bool:
        return (
            o.done < down
            or (o.due >= (pg_ok or never) and o.done < killed)
            or o.due >= (kill_ok or never)
        )

    after_recovery = sum(1 for o in out if o.status >= 500 and healthy(o))
    timeouts_outside = sum(1 for o in out if o.status == -1 and healthy(o))
    lost, duplicated = lost_writes(store, drill.acknowledged)
    return {
        "requests": len(first),
        "rate": args.rate,
        "seconds": args.seconds,
        "acknowledged_messages": len(drill.acknowledged),
        "acknowledged_writes_lost": lost,
        "messages_stored_twice": duplicated,
        "5xx_after_recovery": after_recovery,
        "timeouts_outside_faults": timeouts_outside,
        "postgres_outage_s": round(back - down, 1),
        "postgres_failures": failures(down, pg_ok),
        "postgres_recovery_s": None if pg_ok is None else round(max(0.0, pg_ok - back), 1),
        "kill_failures": failures(killed, kill_ok),
        "kill_recovery_s": None if kill_ok is None else round(max(0.0, kill_ok - killed), 1),
        "p95_before_ms": round(percentile(before, 95), 1) if before else None,
        "p95_after_ms": round(percentile(after, 95), 1) if after else None,
        "retried_appends": sum(o.retry for o in out),
    }


def print_table(figures: dict[str, Any]) -> None:
    rows = [
        (
            "requests (rate/s, seconds)",
            f"{figures['requests']} ({figures['rate']:g}/s, {figures['seconds']:g} s)",
        ),
        ("acknowledged messages", figures["acknowledged_messages"]),
        ("acknowledged writes lost", figures["acknowledged_writes_lost"]),
        ("messages stored twice", figures["messages_stored_twice"]),
        ("5xx after recovery", figures["5xx_after_recovery"]),
        ("timeouts outside the faults (overload)", figures["timeouts_outside_faults"]),
        (
            f"PostgreSQL down {figures['postgres_outage_s']} s: 5xx / broken / timed out",
            "{} / {} / {}".format(*figures["postgres_failures"]),
        ),
        ("PostgreSQL: recovery after it is back (s)", figures["postgres_recovery_s"]),
        (
            "kill -9 of a worker: 5xx / broken / timed out",
            "{} / {} / {}".format(*figures["kill_failures"]),
        ),
        ("kill -9 of a worker: recovery (s)", figures["kill_recovery_s"]),
        ("p95 before the faults (ms)", figures["p95_before_ms"]),
        ("p95 after recovery (ms)", figures["p95_after_ms"]),
        ("append attempts retried", figures["retried_appends"]),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="conversation file (default: the bundled sample)")
    parser.add_argument("--rate", type=float, default=25.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=90.0, help="length of the load")
    parser.add_argument("--outage", type=float, default=5.0, help="seconds PostgreSQL is down")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", type=Path, help="write the server's log to this file")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    data = args.data or Path(str(resources.files("qemem").joinpath("data/sample.json")))
    pg = Postgres()
    try:
        store = pg.database("chaos")
        with Memory.open(store, embedder="hash", namespace="chaos") as memory:
            memory.ingest(data)
            cid = memory.conversations()[0].id
        keys = open_key_store(store)
        key, _ = create_key(keys, "chaos", label="chaos drill")
        keys.close()
        drill = Drill()
        with serving(store, args.workers, args.log) as (base, server):
            warm_up(base, key, Mix(cid, args.seed + 1))
            drill.events["start"] = time.perf_counter()
            drill.event("load starts")
            injector = threading.Thread(target=faults, args=(pg, server, args, drill))
            injector.start()
            open_loop(base, key, Mix(cid, args.seed), args.rate, args.seconds, drill)
            injector.join()
            drill.event("load ends")
        figures = summary(drill, store, args)
    finally:
        pg.remove()
    print_table(figures)
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
