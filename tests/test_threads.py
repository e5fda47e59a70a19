"""One Memory driven from many threads: lazy clients built once, ingest + search + ask."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from qemem.memory import Memory

THREADS = 8


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as possible, so races show up in a short test."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def all_at_once(task: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(THREADS)

    def run(n: int) -> Any:
        barrier.wait()
        return task(n)

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(run, range(THREADS)))


def test_lazy_embedder_and_llm_are_built_once(fast_switching: None) -> None:
    for _ in range(20):
        memory = Memory.open(embedder="hash", llm="fake")
        clients = all_at_once(lambda n, m=memory: m.llm)
        embedders = all_at_once(lambda n, m=memory: m.embedder)
        assert len({id(c) for c in clients}) == 1
        assert len({id(e) for e in embedders}) == 1
        memory.close()


@pytest.mark.slow
def test_one_memory_from_eight_threads(tmp_path: Path) -> None:
    sample = json.loads(resources.files("qemem.data").joinpath("sample.json").read_text("utf-8"))
    paths = []
    for n in range(THREADS):
        copy = [{**sample[0], "sample_id": f"conv-{n}"}]
        path = tmp_path / f"conv-{n}.json"
        path.write_text(json.dumps(copy), "utf-8")
        paths.append(path)
    question = sample[0]["qa"][0]["question"]
    memory = Memory.open(tmp_path / "m.db", embedder="hash", llm="fake")

    def work(n: int) -> tuple[int, int, str]:
        report = memory.ingest(paths[n])
        hits = memory.search(f"conv-{n}", "pottery class", k=5)
        answer = memory.ask(f"conv-{n}", question, mode="no-refine")
        return report.turns_added, len(hits), answer.text

    with memory:
        results = all_at_once(work)
        counts = {c.id: len(memory.turns(c.id)) for c in memory.conversations()}
    assert len({r[0] for r in results}) == 1 and results[0][0] > 0
    assert all(hits == 5 and text for _, hits, text in results)
    assert counts == {f"conv-{n}": results[0][0] for n in range(THREADS)}
