"""Serve a store over HTTP and use it through RemoteMemory, the client of the same API.

    python examples/serve_remote.py                  # the offline LLM (placeholder answers)
    QEMEM_LLM=anthropic:claude-haiku-4-5 python examples/serve_remote.py

Needs the server extra (pip install 'qemem[server]'). It creates a store and a key, starts
`qemem serve` on a free local port, then appends messages, builds memory, searches, asks and
gets an evidence block through `RemoteMemory`, and stops the server. Code written against
`Memory` runs against the server by changing the line that opens it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from qemem import RemoteMemory

QEMEM = [sys.executable, "-m", "qemem"]
MESSAGES = [
    {"session_id": "s1", "timestamp": "2024-05-06T19:02", "speaker": "Mia", "id": "m1",
     "text": "I adopted a grey cat from the shelter today, her name is Pebble."},
    {"session_id": "s1", "timestamp": "2024-05-06T19:03", "speaker": "Leo", "id": "m2",
     "text": "Pebble! How old is she?"},
    {"session_id": "s1", "timestamp": "2024-05-06T19:05", "speaker": "Mia", "id": "m3",
     "text": "Two years old, and she already sleeps on my keyboard."},
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(store: Path, port: int, llm: str) -> Iterator[str]:
    """``qemem serve`` on ``port`` until the block ends; yields its base URL."""
    command = [*QEMEM, "serve", "--store", str(store), "--port", str(port), "--llm", llm]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"qemem serve stopped: {process.stderr.read().decode()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    llm = os.environ.get("QEMEM_LLM", "fake")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "memory.db"
        created = subprocess.run(
            [*QEMEM, "keys", "create", "--store", str(store), "--namespace", "demo", "--json"],
            check=True,
            capture_output=True,
            text=True,
        )
        api_key = json.loads(created.stdout)["key"]
        with server(store, free_port(), llm) as url, RemoteMemory(url, api_key) as memory:
            stored = memory.add_messages("pets", MESSAGES)
            print("stored:", stored.ids)
            [report] = memory.build("pets")  # a background job on the server, waited for
            print(f"built: {report.episodes} episodes, {report.facts_added} facts")
            for hit in memory.search("pets", "What is the cat called?", k=2):
                print(f"hit {hit.record.id}: {hit.record.text}")
            answer = memory.ask("pets", "How old is Mia's cat?")
            print("answer:", answer.text, "cited", answer.citations)
            print(memory.context("pets", "What is Mia's cat called?", budget_tokens=300).text)


if __name__ == "__main__":
    main()
