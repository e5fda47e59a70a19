"""What a new user meets first (issue 30, findings 8 to 10), on both backends: a store opened
without an embedder setting uses the one it records (a different explicit one is refused); a
refused ingest creates no store, so the "no qemem store" typo guard keeps working; memory files
are exported to and imported from paths and file objects."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.cli import app, main
from qemem.embed import HashEmbedder
from qemem.errors import EmbedderMismatchError
from qemem.memory import Memory, reembed_store
from qemem.memory_file import MemoryFile, dumps
from qemem.store import open_store, store_exists

runner = CliRunner()
TALK = [
    "I adopted a grey cat named Pixel last week.",
    "Lovely! What does Pixel eat?",
    "Pixel eats tuna every morning.",
    "Cats love tuna.",
]


def _talk(conversation: str | None = None) -> list[dict[str, str]]:
    return [
        {
            "session_id": "s1",
            "timestamp": f"2024-03-14T19:{n:02d}:00",
            "speaker": "Ana" if n % 2 else "Ben",
            "text": text,
            "id": f"m{n}",
        }
        | ({"conversation_id": conversation} if conversation else {})
        for n, text in enumerate(TALK, start=1)
    ]


@pytest.fixture(autouse=True)
def no_embedder_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QEMEM_EMBEDDER", raising=False)
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    monkeypatch.delenv("QEMEM_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


def _run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``qemem ARGS`` through the console entry point: exit status and what it printed."""
    import sys

    old, sys.argv = sys.argv, ["qemem", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out + out.err


# ------------------------------------------------------------------ 8. the store's embedder
def test_a_store_opened_without_an_embedder_uses_the_one_it_records(store_url: str) -> None:
    with Memory.open(store_url, embedder="hash:32") as memory:
        memory.add_messages("c", _talk())
    reembed_store(store_url, "hash")  # qemem reembed --embedder hash
    with Memory.open(store_url) as memory:
        assert memory.embedder.id == "hash-256"
        assert memory.search("c", "what does the cat eat")[0].record.id in {"m2", "m3", "m4"}
    with (
        Memory.open(store_url, embedder="hash:32") as memory,
        pytest.raises(EmbedderMismatchError, match="leave both unset"),
    ):
        memory.search("c", "tuna")


def test_the_cli_searches_a_reembedded_store_without_qemem_embedder(
    store_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(_talk("c")), "utf-8")
    for args in (
        ["ingest", str(source), "--embedder", "hash:32", "--quiet"],
        ["reembed", "--embedder", "hash", "--quiet"],
        ["search", "tuna", "-c", "c", "--json"],
    ):
        done = runner.invoke(app, [*args, "--store", store_url])
        assert done.exit_code == 0, done.output
    assert {hit["id"] for hit in json.loads(done.output.splitlines()[-1])} >= {"m3", "m4"}


# ------------------------------------------------------------------ 9. no store when refused
@pytest.mark.parametrize(
    "problem",
    [
        [{**m, "session_id": "later", "timestamp": "2024-03-20T10:00:00"} for m in _talk("c")[:1]]
        + _talk("c")[1:],  # sessions dated backwards
        [{**m, "id": "m/1"} if m["id"] == "m1" else m for m in _talk("c")],  # '/' in an id
    ],
    ids=["dates-backwards", "slash-in-id"],
)
def test_a_refused_ingest_creates_no_store(
    problem: list[dict[str, str]],
    store_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(problem), "utf-8")
    code, printed = _run_main(["ingest", str(source), "--store", store_url], capsys)
    assert code == 2 and "Traceback" not in printed and "error:" in printed
    assert not store_exists(store_url)
    code, printed = _run_main(["delete", "c", "--store", store_url], capsys)
    assert code == 2 and "no qemem store" in printed  # the typo guard still works


def test_an_unknown_embedder_creates_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, store = tmp_path / "chat.json", tmp_path / "new.db"
    source.write_text(json.dumps(_talk("c")), "utf-8")
    code, printed = _run_main(
        ["ingest", str(source), "--store", str(store), "--embedder", "nonsense"], capsys
    )
    assert code == 2 and "unknown embedder spec" in printed and not store.exists()


# ------------------------------------------------------------------ 10. memory files
@pytest.fixture
def built(store_url: str) -> Iterator[Memory]:
    with Memory(open_store(store_url), HashEmbedder(), llm="fake") as memory:
        memory.add_messages("c", _talk())
        memory.build("c")
        yield memory


def _fresh() -> Memory:
    memory = Memory(open_store(None), HashEmbedder())
    memory.add_messages("c", _talk())
    return memory


def test_export_memory_writes_to_a_path_or_a_file_object(built: Memory, tmp_path: Path) -> None:
    expected = dumps(built.export_memory("c"))
    as_text, as_path = tmp_path / "c.mem.json", tmp_path / "p.mem.json"
    assert isinstance(built.export_memory("c", str(as_text)), MemoryFile)
    built.export_memory("c", as_path)
    text, binary = io.StringIO(), io.BytesIO()
    built.export_memory("c", text)
    built.export_memory("c", binary)
    with (tmp_path / "h.mem.json").open("w", encoding="utf-8") as handle:
        built.export_memory("c", handle)
    assert as_text.read_text("utf-8") == as_path.read_text("utf-8") == expected
    assert text.getvalue() == binary.getvalue().decode("utf-8") == expected
    assert (tmp_path / "h.mem.json").read_text("utf-8") == expected
    assert '"episodes"' in expected and built.episodes("c")


def test_import_memory_reads_a_path_or_a_file_object(built: Memory, tmp_path: Path) -> None:
    path = tmp_path / "c.mem.json"
    built.export_memory("c", path)
    episodes = [e.id for e in built.episodes("c")]
    sources: list[object] = [
        str(path),
        path,
        io.StringIO(path.read_text("utf-8")),
        io.BytesIO(path.read_bytes()),
        built.export_memory("c"),
    ]
    for source in sources:
        with _fresh() as memory:
            report = memory.import_memory(source)  # type: ignore[arg-type]
            assert report.episodes_added == len(episodes), type(source)
            assert [e.id for e in memory.episodes("c")] == episodes
    with path.open("rb") as handle, _fresh() as memory:
        assert memory.import_memory(handle).facts_added == len(built.facts("c"))
