"""Shared fixtures: the bundled sample conversation in an in-memory store with a hash embedder."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from qemem.embed import HashEmbedder
from qemem.memory import Memory
from qemem.store import SQLiteStore

SAMPLE_ID = "demo-1"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return Path(str(resources.files("qemem").joinpath("data/sample.json")))


@pytest.fixture
def memory(sample_path: Path) -> Iterator[Memory]:
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder())
    mem.ingest(sample_path)
    yield mem
    mem.close()


@pytest.fixture
def empty_memory() -> Iterator[Memory]:
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder())
    yield mem
    mem.close()
