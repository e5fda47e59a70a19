"""The command line, end to end on the bundled sample (hash embedder, temporary store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_ingest_list_search_delete(tmp_path: Path, sample_path: Path) -> None:
    store = str(tmp_path / "m.db")
    out = invoke("ingest", str(sample_path), "--store", store, "--quiet")
    assert "demo-1: +5 sessions, +65 turns" in out
    assert "+0 turns" in invoke("ingest", str(sample_path), "--store", store, "--quiet")
    listed = json.loads(invoke("conversations", "--store", store, "--json").splitlines()[-1])
    assert listed[0]["id"] == "demo-1" and listed[0]["turns"] == 65
    hits = json.loads(
        invoke(
            "search", "Biscuit the cat", "--store", store, "-c", "demo-1", "--k", "3", "--json"
        ).splitlines()[-1]
    )
    assert len(hits) == 3 and {"id", "speaker", "text", "date", "score"} <= set(hits[0])
    assert "D1:11" in [h["id"] for h in hits]
    assert "deleted demo-1" in invoke("delete", "demo-1", "--store", store)
    assert json.loads(invoke("conversations", "--store", store, "--json")) == []


def test_eval_coverage_json_last_line(sample_path: Path) -> None:
    out = invoke("eval", "coverage", "--data", str(sample_path), "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert result["questions"] == 14  # categories 1-4 of the sample
    assert set(result["coverage"]) == {str(b) for b in range(10, 121, 10)}
    assert 0 < result["auc"] <= 1
    assert result["coverage"]["120"] >= result["coverage"]["10"]


def test_user_errors_exit_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from qemem.cli import main

    argv = sys.argv
    sys.argv = ["qemem", "search", "x", "--store", str(tmp_path / "m.db"), "-c", "nope"]
    try:
        with pytest.raises(SystemExit) as info:
            main()
    finally:
        sys.argv = argv
    assert info.value.code == 2
    assert "no conversation nope" in capsys.readouterr().err
