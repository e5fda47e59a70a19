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


@pytest.mark.slow
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


@pytest.mark.slow
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
    whole = json.loads(
        invoke(*question, "-c", "demo-1", "--background-tokens", "none", "--json").splitlines()[-1]
    )
    bare = json.loads(
        invoke(*question, "-c", "demo-1", "--background-tokens", "0", "--json").splitlines()[-1]
    )
    assert bare["evidence"]["shown"]["background"] == []
    assert set(answer["evidence"]["shown"]["background"]) < set(
        whole["evidence"]["shown"]["background"]
    )
    refused = runner.invoke(app, [*question, "-c", "demo-1", "--background-tokens", "lots"])
    assert refused.exit_code == 2 and "give a number of tokens" in refused.output
    assert answer["evidence"]["plan"]["source"] == "llm"
    unplanned = json.loads(
        invoke(
            "ask",
            "When did Priya go to her first pottery class?",
            *("--store", store, "-c", "demo-1", "--no-plan", "--json"),
        ).splitlines()[-1]
    )
    assert unplanned["evidence"]["plan"]["source"] == "rules"
    assert "plan" not in {c["stage"] for c in unplanned["trace"]["calls"]}
    assert unplanned["round0"] is None  # ask never makes the analysis call
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


def test_version_prints_the_package_version_and_exits() -> None:
    from qemem import __version__

    result = runner.invoke(app, ["--version", "ingest"])  # eager: the command is not run
    assert result.exit_code == 0 and result.stdout == f"qemem {__version__}\n"


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


@pytest.mark.slow
def test_eval_coverage_planning_ablation_and_milestones(sample_path: Path) -> None:
    base = ["eval", "coverage", "--data", str(sample_path), "--pool"]
    table = invoke(*base, "--planner", "--llm", "fake", "--baseline", "no-plan")
    assert "no plan: 20" in table and "within 20 turns" in table and "whole pool" in table
    assert "80% complete-evidence coverage (pool):" in table
    assert "80% complete-evidence coverage (no plan):" in table
    plain = invoke(*base, "--no-plan", "--json")
    result = json.loads(plain.strip().splitlines()[-1])
    assert result["planner"] == "rules" and result["run"]["planning"] is False
    assert set(result["milestones"]) == {"target", "turns", "tokens"}
    turns = invoke("eval", "coverage", "--data", str(sample_path))
    assert "80% complete-evidence coverage:" in turns
    for bad in (["--planner", "--no-plan"], ["--baseline", "no-plan"], ["--baseline", "x"]):
        result = runner.invoke(app, [*base, "--llm", "fake", *bad])
        assert result.exit_code == 2, result.output


@pytest.mark.slow
def test_facts_as_of_and_the_single_record_edits(tmp_path: Path, sample_path: Path) -> None:
    store = str(tmp_path / "m.db")
    invoke("ingest", str(sample_path), "--store", store, "--quiet")
    built = invoke("build", "--store", store, "-c", "demo-1", "--llm", "fake")
    assert "0 superseding a known fact" in built
    assert "pronoun rule: 0 named, 0 refused" in built and "greeting/closing runs merged" in built

    def facts(*extra: str) -> list[dict[str, object]]:
        out = invoke("facts", "--store", store, "-c", "demo-1", "--json", *extra)
        return list(json.loads(out.splitlines()[-1]))

    current = facts()
    assert current and all(f["superseded_by"] is None for f in current)
    assert len(facts("--as-of", "2024-03-14")) < len(current)
    out = invoke("correct-fact", "S2", "Priya makes mugs.", "--store", store, "-c", "demo-1")
    new = out.split()[0]
    assert f"{new} supersedes S2 (manual)" in out
    assert "S2" not in [f["id"] for f in facts()]
    every = {f["id"]: f for f in facts("--all")}
    assert every["S2"]["superseded_by"] == new and every[new]["episode_ids"] == []
    table = invoke("facts", "--store", store, "-c", "demo-1", "--all")
    assert f"{new} (manual: by hand)" in table
    done = invoke("redact-message", "D1:3", "--store", store, "-c", "demo-1", "--json")
    assert json.loads(done.splitlines()[-1])["redacted"] == ["D1:3"]
    assert "1 message(s) deleted" in invoke(
        "delete-message", "D2:1", "--store", store, "-c", "demo-1"
    )
    assert "facts removed: S3" in invoke("delete-fact", "S3", "--store", store, "-c", "demo-1")
    bad = runner.invoke(app, ["delete-fact", "S999", "--store", store, "-c", "demo-1"])
    assert bad.exit_code != 0 and "no fact 'S999'" in str(bad.exception)
    bad = runner.invoke(app, ["facts", "--store", store, "-c", "demo-1", "--as-of", "soon"])
    assert isinstance(bad.exception, InputError)
