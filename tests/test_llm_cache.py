"""The SQLite record/replay cache under concurrent writers (threads and processes)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from qemem.llm import LLMCache, LLMClient, LLMRequest, Message, cache_key
from qemem.testing import OfflineLLM


def _req(i: int) -> LLMRequest:
    return LLMRequest("sys", [Message("user", f"question {i} about D1:{i}")], "answer")


def _writer(path: str, start: int, count: int) -> None:
    client = LLMClient(OfflineLLM(), cache=LLMCache(path), concurrency=4)
    for i in range(start, start + count):
        client.complete(_req(i))


def test_many_threads_writing_the_same_and_different_keys(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    fake = OfflineLLM()
    client = LLMClient(fake, cache=LLMCache(path), concurrency=8)
    # 160 requests over 40 distinct prompts: every prompt is written by several threads
    with ThreadPoolExecutor(max_workers=16) as pool:
        outs = list(pool.map(lambda i: client.complete(_req(i % 40)), range(160)))
    assert LLMCache(path).count() == 40
    by_prompt: dict[int, set[str]] = {}
    for i, out in enumerate(outs):
        by_prompt.setdefault(i % 40, set()).add(out.text)
    assert all(len(texts) == 1 for texts in by_prompt.values())
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


@pytest.mark.slow
def test_several_processes_writing_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "cache.db")
    ctx = multiprocessing.get_context("spawn")
    # four processes, overlapping ranges: keys 0..59, each written by two processes
    procs = [ctx.Process(target=_writer, args=(path, start, 30)) for start in (0, 15, 30, 0)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    cache = LLMCache(path, "replay")
    assert cache.count() == 60
    replay = LLMClient(OfflineLLM(lambda r: "must not be called"), cache=cache)
    for i in range(60):
        out = replay.complete(_req(i))
        assert out.cached and out.text == OfflineLLM().complete(_req(i)).text
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_off_mode_stores_nothing(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "c.db", "off")
    client = LLMClient(OfflineLLM(), cache=cache)
    client.complete(_req(1))
    assert not client.complete(_req(1)).cached
    assert cache.count() == 0 and not (tmp_path / "c.db").exists()


class _CompatFake(OfflineLLM):
    """A fake that names itself like an openai-compat server at ``base_url``."""

    name = "openai-compat"

    def __init__(self, base_url: str, answer: str) -> None:
        super().__init__(lambda r: answer, model="llama3.1")
        self.base_url = base_url


def test_cache_key_includes_the_openai_compat_base_url(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    first = LLMClient(_CompatFake("http://server-a:8000/v1", "from A"), cache=LLMCache(path))
    second = LLMClient(_CompatFake("http://server-b:8000/v1", "from B"), cache=LLMCache(path))
    assert first.complete(_req(1)).text == "from A"
    out = second.complete(_req(1))  # same model name, another server: not A's answer
    assert (out.text, out.cached) == ("from B", False)
    again = LLMClient(_CompatFake("http://server-a:8000/v1", "unused"), cache=LLMCache(path))
    assert again.complete(_req(1)).text == "from A"
    assert second.describe()["endpoint"] == "http://server-b:8000/v1"


def test_structured_inputs_are_not_in_the_key_nor_the_recorded_request(tmp_path: Path) -> None:
    plain = LLMRequest(
        "sys",
        [Message("user", "When did Priya go?")],
        "plan",
        max_tokens=256,
        schema={"type": "object"},
    )
    rich = plain.with_(inputs={"question": "When did Priya go?", "turns": [object()]})
    # the key main computed for this request before requests carried inputs
    before = "4ea327193232d18ce8d06d86dbbd93412d7366240602bce656f19ccf97872ed7"
    assert cache_key("fake", "fake", plain) == cache_key("fake", "fake", rich) == before
    assert rich.to_dict() == plain.to_dict() and "inputs" not in rich.to_dict()
    cache = LLMCache(tmp_path / "c.db")
    LLMClient(OfflineLLM(), cache=cache).complete(rich)
    hit = LLMClient(OfflineLLM(lambda r: "must not be called"), cache=cache).complete(plain)
    assert hit.cached
    cache.close()
