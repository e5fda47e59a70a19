from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.cli.app import app
from qemem.embed.base import HashEmbedder
from qemem.errors import InputError, NotFoundError, StoreError
from qemem.memory import Memory
from qemem.memory_file import dumps, load, parse
from qemem.store import open_store
from qemem.store.sqlite import SQLiteStore

FIXTURE = Path(__file__).parent / "fixtures" / "memory" / "demo-1.json"


def _raw() -> dict[str, object]:
    data: dict[str, object] = json.loads(FIXTURE.read_text("utf-8"))
    return data


def test_import_embeds_links_and_is_idempotent(memory: Memory) -> None:
    report = memory.import_memory(load(FIXTURE))
    assert (report.episodes_added, report.facts_added) == (3, 3)
    assert [e.id for e in memory.episodes("demo-1")] == ["E1", "E2", "E3"]
    assert [t.id for t in memory.episode_turns("demo-1", "E2")] == ["D1:3", "D1:4", "D1:5", "D1:6"]
    assert [e.id for e in memory.fact_episodes("demo-1", "S3")] == ["E3"]
    ids, vectors = memory.store.vectors(memory.scope("demo-1"), "fact")
    assert ids == ["S1", "S2", "S3"] and vectors.shape == (3, memory.embedder.dim)
    found = memory.search("demo-1", "lopsided mug", k=1, space="fact")
    assert found[0].record.id == "S2"
    again = memory.import_memory(load(FIXTURE))
    assert (again.episodes_added, again.facts_added) == (0, 0)
    assert (again.episodes_unchanged, again.facts_unchanged) == (3, 3)
    assert len(memory.facts("demo-1")) == 3


def test_export_import_export_is_byte_identical(memory: Memory, tmp_path: Path) -> None:
    memory.import_memory(load(FIXTURE))
    first = dumps(memory.export_memory("demo-1"))
    assert first == FIXTURE.read_text("utf-8")  # the note comes back too
    other = Memory(SQLiteStore(str(tmp_path / "other.db")), HashEmbedder(dim=64))
    other.ingest(Path(__file__).parents[1] / "src" / "qemem" / "data" / "sample.json")
    path = tmp_path / "export.json"
    path.write_text(first, "utf-8")
    other.import_memory(load(path))  # another embedder: records move, vectors are remade
    assert dumps(other.export_memory("demo-1")) == first
    other.close()


def test_unknown_turn_ids_are_refused_before_writing(memory: Memory) -> None:
    raw = _raw()
    raw["episodes"][1]["turn_ids"].append("D9:99")  # type: ignore[index]
    with pytest.raises(InputError, match=r"D9:99.*ingest the conversation first"):
        memory.import_memory(parse(raw))
    assert memory.episodes("demo-1") == [] and memory.facts("demo-1") == []


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("episodes", 0, "turn_ids"), ["D1:2", "D1:1"], "conversation order"),
        (("episodes", 0, "turn_ids"), ["D1:1", "D2:1"], "episode's session"),
        (("episodes", 0, "session"), 9, "session 9 is not stored"),
        (("facts", 0, "episode_ids"), ["E7"], "E7 that are neither"),
        (("facts", 2, "session"), 1, "earlier than every episode"),
    ],
)
def test_provenance_checks(
    memory: Memory, path: tuple[str, int, str], value: object, message: str
) -> None:
    raw = _raw()
    raw[path[0]][path[1]][path[2]] = value  # type: ignore[index]
    with pytest.raises(InputError, match=message):
        memory.import_memory(parse(raw))
    assert memory.episodes("demo-1") == []


def test_malformed_files_and_clashes(memory: Memory, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a qemem-memory/2 file"):
        parse({"format": "other"})
    raw = _raw()
    raw["facts"][0]["episode_ids"] = []  # type: ignore[index]
    with pytest.raises(InputError, match="no correction by hand"):
        memory.import_memory(parse(raw))  # version 2: only a correction cites no episode
    with pytest.raises(InputError, match="non-empty list"):
        parse({**raw, "format": "qemem-memory/1"})
    bad = tmp_path / "bad.json"
    bad.write_text("{", "utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        load(bad)
    memory.import_memory(load(FIXTURE))
    changed = _raw()
    changed["facts"][0]["content"] = "Tomas ran a full marathon."  # type: ignore[index]
    with pytest.raises(StoreError, match="different records under ids S1"):
        memory.import_memory(parse(changed))
    other = _raw()
    other["conversation"] = "nope"
    with pytest.raises(NotFoundError):
        memory.import_memory(parse(other))


@pytest.mark.slow
def test_cli_round_trip(tmp_path: Path, sample_path: Path) -> None:
    runner = CliRunner()
    store = str(tmp_path / "cli.db")
    env = {"QEMEM_EMBEDDER": "hash"}
    ingested = runner.invoke(app, ["ingest", str(sample_path), "-s", store, "-q"], env=env)
    assert ingested.exit_code == 0, ingested.output
    result = runner.invoke(app, ["import-memory", str(FIXTURE), "-s", store], env=env)
    assert result.exit_code == 0, result.output
    assert "+3 episodes, +3 facts" in result.output
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["export-memory", "-s", store, "-c", "demo-1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == FIXTURE.read_bytes()
    printed = runner.invoke(app, ["export-memory", "-s", store, "-c", "demo-1"], env=env)
    assert printed.stdout == FIXTURE.read_text("utf-8")


def _said(texts: list[str], start: int = 0) -> list[dict[str, str]]:
    return [
        {"session_id": "s1", "timestamp": f"2024-03-14T19:{n:02d}:00", "speaker": "Ana", "text": t}
        for n, t in enumerate(texts, start=start)
    ]


def test_a_memory_file_whose_turns_were_built_again_is_refused(
    store_url: str, tmp_path: Path
) -> None:
    """Found by the state machine: a file exported before messages were appended to a built
    session (its last episode is then built again with them) imported that episode beside
    the new one: two episodes of the same turns, and a fact twice (correcting one of them
    left the other current)."""
    path = tmp_path / "c.mem.json"
    with Memory(open_store(store_url), HashEmbedder(), llm="fake") as memory:
        memory.add_messages("c", _said(["I adopted a cat.", "Lovely!", "She is grey."]))
        memory.build("c")
        memory.export_memory("c", path)
        memory.add_messages("c", _said(["Her name is Pixel.", "Cute."], start=3))
        memory.build("c")
        before = memory.export_memory("c")
        [episode] = before.episodes
        with pytest.raises(InputError, match=f"already in the stored episode {episode.id}"):
            memory.import_memory(path)
        assert memory.export_memory("c") == before
