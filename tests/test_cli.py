"""The command line, end to end on the bundled sample (hash embedder, temporary store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import InputError
from service_helpers import MESSAGES

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


def test_search_with_several_conversations_names_each_hit(
    tmp_path: Path, sample_path: Path
) -> None:
    store = str(tmp_path / "m.db")
    invoke("ingest", str(sample_path), "--store", store, "--quiet")
    records = [{**m, "conversation_id": "c1"} for m in MESSAGES]
    (tmp_path / "chat.json").write_text(json.dumps(records), encoding="utf-8")
    invoke("ingest", str(tmp_path / "chat.json"), "--store", store, "--quiet")
    argv = ["search", "grey cat named Pixel", "--store", store, "-c", "demo-1", "-c", "c1"]
    hits = json.loads(invoke(*argv, "--json", "--k", "20").splitlines()[-1])
    assert (hits[0]["conversation"], hits[0]["id"]) == ("c1", "m1")
    assert {h["conversation"] for h in hits} == {"demo-1", "c1"}
    assert "c1" in invoke(*argv) and "conversation" in invoke(*argv)
    one = json.loads(invoke("search", "cat", "--store", store, "-c", "c1", "--json"))
    assert {h["conversation"] for h in one} == {"c1"}
    with pytest.raises(InputError, match="give -c once"):
        invoke(*argv, "--pool")


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
    assert "no qemem store at" in capsys.readouterr().err
    assert not (tmp_path / "m.db").exists()  # a read-only command never creates a store


def test_build_ask_and_pool_with_the_fake_llm(
    tmp_path: Path, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "m.db")
    invoke("ingest", str(sample_path), "--store", store, "--quiet")
    no_llm = runner.invoke(app, ["build", "--store", store])
    assert no_llm.exit_code != 0 and "needs an LLM" in str(no_llm.exception)
    monkeypatch.setenv("QEMEM_LLM", "fake")
    [built] = json.loads(invoke("build", "--store", store, "--json").splitlines()[-1])
    assert built["episodes"] > 0 and built["facts_added"] > 0
    [again] = json.loads(invoke("build", "--store", store, "--json").splitlines()[-1])
    assert again["episodes"] == 0
    answer = json.loads(
        invoke(
            "ask",
            "When did Priya go to her first pottery class?",
            "--store",
            store,
            "-c",
            "demo-1",
            "--json",
        ).splitlines()[-1]
    )
    assert answer["mode"] == "full" and answer["text"]
    assert answer["evidence"]["cards"] and "D1:3" in answer["citations"]
    question = ["ask", "When did Priya go to her first pottery class?", "--store", store]
    paper = json.loads(
        invoke(*question, "-c", "demo-1", "--prompt-layout", "paper", "--json").splitlines()[-1]
    )
    assert (paper["text"], paper["citations"]) == (answer["text"], answer["citations"])
    bad = runner.invoke(app, [*question, "-c", "demo-1", "--prompt-layout", "fancy"])
    assert bad.exit_code != 0
    assert answer["evidence"]["plan"]["source"] == "llm"
    shown = invoke(
        "ask", "What books has Priya read?", "--store", store, "-c", "demo-1", "--mode", "retrieval"
    )
    assert "retrieval" in shown
    pool = json.loads(
        invoke(
            "search",
            "What books has Priya read?",
            "--store",
            store,
            "-c",
            "demo-1",
            "--pool",
            "--plan",
            "--json",
        ).splitlines()[-1]
    )
    assert pool["plan"]["aggregate"] is True
    assert {"episodes", "facts", "turns"} <= set(pool["pool"])
    assert pool["pool"]["turns"] and pool["pool"]["episodes"]


def test_time_command() -> None:
    rows = json.loads(
        invoke(
            "time",
            "I went there yesterday and last Friday",
            "--anchor",
            "1:56 pm on 8 May, 2023",
            "--json",
        ).splitlines()[-1]
    )
    assert [(r["expression"], r["phrase"]) for r in rows] == [
        ("yesterday", "7 May 2023"),
        ("last Friday", "the Friday before 8 May 2023"),
    ]


def test_eval_coverage_pool_json(sample_path: Path) -> None:
    out = invoke("eval", "coverage", "--data", str(sample_path), "--pool", "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert result["questions"] == 14
    assert set(result["curves"]) == {
        "turns/strict",
        "turns/inclusive",
        "tokens/strict",
        "tokens/inclusive",
    }
    assert result["run"]["ranking"] == "full pool, question only"


def test_eval_coverage_against_the_turns_only_baseline(sample_path: Path) -> None:
    out = invoke(
        "eval",
        "coverage",
        "--data",
        str(sample_path),
        "--pool",
        "--baseline",
        "turns",
        "--conversations",
        "demo-1",
        "--budget-turns",
        "5",
        "--json",
    )
    result = json.loads(out.strip().splitlines()[-1])
    baseline = result["baseline"]
    assert baseline["config"]["budget_episodes"] == 0 and result["config"]["budget_turns"] == 5
    strict = result["curves"]["turns/strict"]["coverage"]
    base = baseline["curves"]["turns/strict"]["coverage"]
    diff = baseline["difference"]["turns/strict"]["coverage"]
    assert diff == {b: round(strict[b] - base[b], 4) for b in strict}
    table = invoke("eval", "coverage", "--data", str(sample_path), "--baseline", "turns")
    assert "turns only" in table and "difference" in table
