"""``qemem reembed`` (issue 22, item 7): a store re-embedded in place with another embedder,
resumably, on both backends; the old embedder answers until the swap."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.embed import HashEmbedder
from qemem.errors import EmbedderMismatchError
from qemem.llm import LLMClient
from qemem.memory import Memory, reembed
from qemem.store import Scope, open_store
from qemem.testing import OfflineLLM

OLD, NEW = HashEmbedder(256), HashEmbedder(128)
SPACES = ("turn", "episode", "fact")


class Failing:
    """NEW that fails on its ``after``-th call (a kill part way)."""

    def __init__(self, after: int) -> None:
        self.id, self.dim, self.calls, self.after = NEW.id, NEW.dim, 0, after

    def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        self.calls += 1
        if self.calls == self.after:
            raise RuntimeError("killed")
        return NEW.embed(texts, query=query)


def built(url: str, sample: Path) -> Memory:
    memory = Memory.open(url, embedder=OLD, llm=LLMClient(OfflineLLM()))
    memory.ingest(sample)
    memory.build("demo-1")
    return memory


def vectors(memory: Memory) -> dict[str, dict[str, list[float]]]:
    scope = Scope("demo-1")
    out = {}
    for space in SPACES:
        ids, matrix = memory.store.vectors(scope, space)  # type: ignore[arg-type]
        out[space] = {i: row.round(6).tolist() for i, row in zip(ids, matrix, strict=True)}
    return out


def test_reembedding_equals_embedding_afresh(store_url: str, sample_path: Path) -> None:
    with built(store_url, sample_path) as old:
        report = reembed(old.store, NEW, batch=16)
        assert (report.before, report.after, report.resumed) == (OLD.id, NEW.id, False)
        assert report.embedded["turn"] == len(old.turns("demo-1")) and report.embedded["fact"]
        with pytest.raises(EmbedderMismatchError):
            old.search("demo-1", "pottery")
        new = Memory(old.store, NEW)
        fresh = Memory(open_store(None), NEW)
        assert new.search("demo-1", "pottery class")[0].record.id
        for space, rows in vectors(new).items():
            records = new.records("demo-1", space, list(rows))  # type: ignore[arg-type]
            expected = fresh.embed_documents(records)
            got = np.array([rows[r.id] for r in records])
            assert np.allclose(got, expected, atol=1e-5), space
        assert reembed(old.store, NEW).unchanged


def test_an_interrupted_run_resumes_and_the_old_embedder_answers_meanwhile(
    store_url: str, sample_path: Path
) -> None:
    with built(store_url, sample_path) as old:
        with pytest.raises(RuntimeError, match="killed"):
            reembed(old.store, Failing(after=3), batch=8)  # type: ignore[arg-type]
        assert old.store.reembed_target() == (NEW.id, NEW.dim)
        assert old.search("demo-1", "pottery")  # still the old embedder's store
        # a message written meanwhile, with the old embedder, is embedded before the swap
        old.add_messages(
            "demo-1",
            [
                {
                    "session_id": "s9",
                    "timestamp": "2024-09-01T10:00:00",
                    "speaker": "Priya",
                    "text": "I bought a kiln.",
                }
            ],
        )
        report = reembed(old.store, NEW, batch=8)
        assert report.resumed
        total = len(old.store.turns(Scope("demo-1")))
        assert 0 < report.embedded["turn"] < total  # only what the first run had not staged
        new = Memory(old.store, NEW)
        assert [r.record.id for r in new.search("demo-1", "kiln", k=1)] == [
            new.turns("demo-1")[-1].id
        ]
        assert old.store.reembed_target() is None and old.store.embedder() == (NEW.id, NEW.dim)


def test_another_target_abandons_the_staged_vectors(store_url: str, sample_path: Path) -> None:
    with built(store_url, sample_path) as old:
        with pytest.raises(RuntimeError):
            reembed(old.store, Failing(after=2), batch=8)  # type: ignore[arg-type]
        report = reembed(old.store, HashEmbedder(64))
        assert not report.resumed and report.embedded["turn"] == len(old.turns("demo-1"))
        assert old.store.embedder() == ("hash-64", 64)


@pytest.mark.slow
def test_cli(tmp_path: Path, sample_path: Path) -> None:
    store = str(tmp_path / "m.db")
    runner = CliRunner()
    assert (
        runner.invoke(
            app, ["ingest", str(sample_path), "--store", store, "--embedder", "hash"]
        ).exit_code
        == 0
    )
    done = runner.invoke(app, ["reembed", "--store", store, "--embedder", "hash:128", "-q"])
    assert done.exit_code == 0, done.output
    assert "re-embedded" in done.stdout and "hash-256 -> hash-128" in done.stdout
    again = runner.invoke(app, ["reembed", "--store", store, "--embedder", "hash:128", "-q"])
    assert "already embedded with hash-128" in again.stdout
    found = runner.invoke(
        app, ["search", "pottery", "--store", store, "-c", "demo-1", "--embedder", "hash:128"]
    )
    assert found.exit_code == 0
    missing = runner.invoke(
        app, ["reembed", "--store", str(tmp_path / "nope.db"), "--embedder", "hash"]
    )
    assert missing.exit_code != 0 and not (tmp_path / "nope.db").exists()
