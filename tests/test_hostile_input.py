"""Regression tests for the bad-input probe of issue 15: each failure it found, fixed."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.embed import HashEmbedder, open_embedder
from qemem.errors import ConfigError, InputError, LLMCallError, StoreError
from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.ingest.locomo import locomo_questions
from qemem.lexicon import parse_datetime
from qemem.llm.providers.cmd import CmdProvider
from qemem.llm.types import LLMRequest, Message
from qemem.locks import writer_lock
from qemem.memory import EMBED_CHARS, MAX_QUESTION_CHARS, Memory
from qemem.passages import PASSAGE_CHARS
from qemem.store.base import Scope
from qemem.store.guard import write_error

runner = CliRunner()


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


def message(n: int, **changes: Any) -> dict[str, Any]:
    base = {
        "conversation_id": "c1",
        "session_id": "s1",
        "timestamp": "2024-03-01T10:00:00",
        "speaker": "Ann",
        "text": f"message number {n} about pottery",
    }
    return base | changes


def write_jsonl(path: Path, records: Sequence[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def ingest(tmp_path: Path, records: Sequence[object]) -> Memory:
    memory = Memory.open(tmp_path / "m.db", embedder="hash")
    memory.ingest(write_jsonl(tmp_path / "in.jsonl", records))
    return memory


# ---------------------------------------------------------------- 2, 3: tables
def test_tables_show_user_text_verbatim_and_cut_long_text(tmp_path: Path) -> None:
    records = [
        message(1, speaker="[bold red]X[/]", text="closing [/] tag", image_caption="a red vase"),
        message(2, text="pottery " * 2000),
    ]
    ingest(tmp_path, records).close()
    result = runner.invoke(
        app, ["search", "pottery vase tag", "--store", str(tmp_path / "m.db"), "-c", "c1"]
    )
    assert result.exit_code == 0, result.output
    assert "[bold red]X[/]" in result.output and "closing [/] tag" in result.output
    assert "[shares a photo: a red vase]" in result.output
    assert "chars)" in result.output and len(result.output.splitlines()) < 40


def test_huge_messages_are_refused_and_long_ones_embedded_by_passage(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="more than the 100000 allowed"):
        ingest(tmp_path, [message(1, text="x" * 1_000_001)])

    class Recording(HashEmbedder):
        longest = 0

        def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
            Recording.longest = max([Recording.longest, *(len(t) for t in texts)])
            return super().embed(texts, query=query)

    memory = Memory.open(None, embedder=Recording())
    memory.ingest(write_jsonl(tmp_path / "long.jsonl", [message(1, text="word " * 20_000)]))
    [turn] = memory.turns("c1")
    assert len(turn.text) == len("word " * 20_000) - 1  # stored whole
    # embedded whole, passage by passage: no text longer than a passage reaches the embedder
    [spans] = memory.passages("c1").values()
    assert Recording.longest <= PASSAGE_CHARS + 10 < EMBED_CHARS
    assert spans[0][0] == 0 and spans[-1][1] == len(turn.text)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    with pytest.raises(InputError, match="more than the 2000 allowed"):
        memory.search("c1", "q" * (MAX_QUESTION_CHARS + 1))
    for blank in ("", "   "):
        with pytest.raises(InputError, match="empty"):
            memory.search("c1", blank)
        with pytest.raises(InputError, match="empty"):
            memory.ask("c1", blank, mode="retrieval")


# ---------------------------------------------------------------- 4, 9: stores
def test_read_only_commands_need_an_existing_qemem_store(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    with pytest.raises(StoreError, match="no qemem store"):
        Memory.open(missing, read_only=True)
    assert not missing.exists()
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE invoices (n INTEGER)")
    for read_only in (True, False):
        with pytest.raises(StoreError, match="not a qemem store"):
            Memory.open(foreign, read_only=read_only)
    with sqlite3.connect(foreign) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert tables == {"invoices"}


def test_build_and_delete_never_create_a_store(tmp_path: Path) -> None:
    for argv in (["build", "--llm", "fake"], ["delete", "c1"]):
        result = runner.invoke(app, [*argv, "--store", str(tmp_path / "typo.db")])
        assert result.exit_code != 0 and "no qemem store" in str(result.exception)
    assert not (tmp_path / "typo.db").exists()


def test_eval_limit_zero_is_refused(tmp_path: Path, sample_path: Path) -> None:
    config = LocomoRunConfig(data=sample_path, out=tmp_path / "out", limit=0, llm="fake")
    with pytest.raises(InputError, match="limit must be at least 1"):
        run_locomo(config)


def test_read_only_store_reads_and_refuses_writes(tmp_path: Path, sample_path: Path) -> None:
    Memory.open(tmp_path / "m.db", embedder="hash").ingest(sample_path)
    with Memory.open(tmp_path / "m.db", embedder="hash", read_only=True) as memory:
        assert memory.search("demo-1", "pottery", k=2)
        with pytest.raises(StoreError, match="read-only"):
            memory.delete("demo-1")
    readonly = sqlite3.OperationalError("attempt to write a readonly database")
    assert "read-only" in str(write_error("m.db", readonly))
    locked = write_error("m.db", sqlite3.OperationalError("database is locked"))
    assert "another writer" in str(locked)
    assert write_error("m.db", sqlite3.IntegrityError("FOREIGN KEY constraint failed")) is None


# ---------------------------------------------------------------- 5: two writers
def test_second_writer_skips_what_the_first_stored(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [message(n) for n in range(30)])
    first = Memory.open(tmp_path / "m.db", embedder="hash")
    other = Memory.open(tmp_path / "m.db", embedder="hash")
    interleaved = []

    def meanwhile(done: int, total: int) -> None:
        if not interleaved:
            interleaved.append(other.ingest(path))

    report = first.ingest(path, progress=meanwhile)
    assert interleaved[0].turns_added == 30
    assert report.turns_added == 0 and report.skipped == 30
    assert len(first.turns("c1")) == 30


def test_build_lock_refuses_a_live_owner_and_takes_over_a_dead_one(tmp_path: Path) -> None:
    memory = ingest(tmp_path, [message(1)])
    scope = Scope("c1")
    with (
        writer_lock(memory.store, scope, "build"),
        pytest.raises(StoreError, match="another build of conversation c1 is running"),
        writer_lock(memory.store, scope, "build"),
    ):
        pass
    dead = subprocess.Popen(["true"])
    dead.wait()
    memory.store.set_state(
        scope,
        "lock.build",
        json.dumps({"pid": dead.pid, "host": os.uname().nodename, "since": time.time()}),
    )
    with writer_lock(memory.store, scope, "build"):
        assert json.loads(memory.store.get_state(scope, "lock.build") or "{}")["pid"] == os.getpid()


# ---------------------------------------------------------------- 6, smaller: cmd runner
@pytest.mark.slow
def test_cmd_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    provider = CmdProvider(f"sleep 30 & echo $! > {pids}; echo secret-token >&2; wait", timeout=3)
    request = LLMRequest("s", [Message("user", "q")], "test")
    with pytest.raises(LLMCallError, match="timed out") as info:
        provider.complete(request)
    assert info.value.retryable
    status = Path(f"/proc/{int(pids.read_text())}/status")

    def running() -> bool:
        try:
            return "zombie" not in status.read_text()
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)  # SIGKILL is delivered asynchronously
    assert not running()
    failing = CmdProvider("echo secret-token >&2; exit 3")
    with pytest.raises(LLMCallError, match="status 3") as failed:
        failing.complete(request)
    assert "secret-token" not in str(failed.value)


# ---------------------------------------------------------------- 7, 8: files and fields
def test_encodings(tmp_path: Path) -> None:
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(
        json.dumps(message(1, text="café"), ensure_ascii=False)
        .encode("utf-8")
        .replace(b"\xc3\xa9", b"\xe9")
    )
    with pytest.raises(InputError, match="not UTF-8"):
        Memory.open(None, embedder="hash").ingest(latin)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(message(1)).encode() + b"\n")
    assert Memory.open(None, embedder="hash").ingest(bom).turns_added == 1


def test_wrong_types_times_and_dates(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="'speaker' must be a string, not int"):
        ingest(tmp_path, [message(1, speaker=5)])
    assert parse_datetime("2024-03-01T10:00+05:30") != parse_datetime("2024-03-01T10:00Z")
    assert parse_datetime("2024-03-01T10:00+05:30").isoformat() == "2024-03-01T10:00:00+05:30"
    with pytest.raises(InputError, match="dates run backwards"):
        ingest(
            tmp_path,
            [message(1), message(2, session_id="s2", timestamp="2024-02-01T10:00:00")],
        )
    memory = ingest(tmp_path, [message(1)])
    moved = write_jsonl(tmp_path / "moved.jsonl", [message(1, timestamp="2024-03-02T10:00:00")])
    with pytest.raises(InputError, match="conflicts with the stored session date"):
        memory.ingest(moved)
    earlier = write_jsonl(
        tmp_path / "early.jsonl", [message(1, session_id="s0", timestamp="2024-01-01T10:00")]
    )
    with pytest.raises(InputError, match="before the latest stored session"):
        memory.ingest(earlier)


# ---------------------------------------------------------------- 10: LoCoMo QA items
@pytest.mark.parametrize(
    ("qa", "field"),
    [
        ({"question": "q?", "answer": "a"}, "category"),
        ({"question": "q?", "answer": "a", "category": "two"}, "category"),
        ({"question": "q?", "category": 2}, "answer"),
        ({"answer": "a", "category": 2}, "question"),
    ],
)
def test_locomo_qa_items_are_validated(qa: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError, match=f"field {field}"):
        locomo_questions([{"sample_id": "x", "conversation": {}, "qa": [qa]}])


# ---------------------------------------------------------------- smaller items
@pytest.mark.parametrize("spec", ["hash:0", "hash:abc", "hash:-5"])
def test_bad_hash_dimensions(spec: str) -> None:
    with pytest.raises(ConfigError, match="whole number"):
        open_embedder(spec)


def test_search_k_and_pool(tmp_path: Path, sample_path: Path) -> None:
    store = str(tmp_path / "m.db")
    Memory.open(store, embedder="hash").ingest(sample_path)
    bad = runner.invoke(app, ["search", "pottery", "--store", store, "-c", "demo-1", "-k", "-1"])
    assert bad.exit_code == 2
    out = runner.invoke(
        app, ["search", "pottery", "--store", store, "-c", "demo-1", "--pool", "-k", "2", "--json"]
    )
    pool = json.loads(out.output.splitlines()[-1])["pool"]
    assert all(len(pool[space]) <= 2 for space in ("episodes", "facts", "turns"))


def test_cli_errors_suggest_flags_and_extras(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sample_path: Path, capsys: Any
) -> None:
    from qemem.cli import main

    store = str(tmp_path / "m.db")
    Memory.open(store, embedder="hash").ingest(sample_path)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    for argv, expected in (
        (["build", "--store", store], "--llm"),
        (["build", "--store", store, "--llm", "llamacpp:/m.gguf"], "pip install 'qemem[local]'"),
    ):
        monkeypatch.setattr(sys, "argv", ["qemem", *argv])
        with pytest.raises(SystemExit):
            main()
        assert expected in capsys.readouterr().err


@pytest.mark.slow
def test_python_dash_m_and_fake_demo_notice(tmp_path: Path) -> None:
    help_run = subprocess.run(
        [sys.executable, "-m", "qemem", "--help"], capture_output=True, text=True, check=False
    )
    assert help_run.returncode == 0 and "ingest" in help_run.stdout
    demo = runner.invoke(app, ["demo", "--store", str(tmp_path / "d.db"), "--llm", "fake"])
    assert demo.exit_code == 0, demo.output
    assert "fake LLM" in demo.output
