"""The LoCoMo run: per-question analysis helpers, and the harness end to end on the bundled
sample with the fake LLM and fake judge (resuming, warm-cache rerun, retrieval mode)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.answer import Answer
from qemem.answer.ask import Round0Answer, Trace
from qemem.cli import app
from qemem.errors import ConfigError, InputError
from qemem.eval.judge import Judgement
from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.eval.records import evidence_share, evidence_visible, refinement_info, stage_costs
from qemem.eval.runs import answer_all
from qemem.evidence.cards import Feedback
from qemem.evidence.refine import Evidence, RoundTrace, Shown
from qemem.ingest.locomo import LocomoQuestion
from qemem.llm import LLMCache, LLMClient, LLMRequest, LLMResponse
from qemem.models import Episode, Pool, PoolItem, Ref, Turn
from qemem.retrieve.plan import rule_plan
from qemem.testing import OfflineLLM

runner = CliRunner()
WHEN = datetime(2024, 3, 14, 19, 15)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    for name in ("QEMEM_LLM", "QEMEM_LLM_CACHE", "QEMEM_CACHE_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")


# ---------------------------------------------------------------------------- helpers

ALIASES = {
    "D1:1": ("Ann", "2024-03-14T19:15:00", "I adopted a cat."),
    "D3:1": ("Ann", "2024-03-14T19:15:00", "I adopted a cat."),  # alias of D1:1
    "D2:2": ("Bo", "2024-04-01T10:00:00", "Nice!"),
    "D2:3": ("Ann", "2024-04-01T10:00:00", "Her name is Biscuit."),
}


def test_visibility_counts_aliases() -> None:
    evidence = ["D1:1", "D2:3"]
    assert evidence_visible(["D3:1", "D2:3"], evidence, ALIASES) is True
    assert evidence_visible(["D3:1", "D2:2"], evidence, ALIASES) is False
    assert evidence_share(["D3:1", "D2:2"], evidence, ALIASES) == 0.5
    assert evidence_share(["D2:2"], evidence, ALIASES) == 0.0
    # an evidence id the store does not know is never visible
    assert evidence_visible(["D3:1", "D2:3"], [*evidence, "D9:9"], ALIASES) is False
    assert evidence_share(["D9:9"], ["D9:9", "D1:1"], ALIASES) == 0.5
    assert evidence_visible(["D1:1"], [], ALIASES) is None
    assert evidence_share(["D1:1"], [], ALIASES) is None


def call(stage: str, inp: int, out: int, usd: float | None) -> dict[str, Any]:
    return {"stage": stage, "input_tokens": inp, "output_tokens": out, "cost_usd": usd}


def test_stage_costs_group_repairs_and_missing_prices() -> None:
    calls = [
        call("plan", 10, 2, 0.5),
        call("plan.repair", 5, 1, 0.25),
        call("answer", 7, 3, None),
        {**call("answer.retry", 1, 1, 0.1), "cache_read_tokens": 1},
    ]
    cache = {"cache_write_tokens": 0, "cache_read_tokens": 0}  # absent in older records: 0
    assert stage_costs(calls) == {
        "answer": {
            "calls": 2,
            "input_tokens": 8,
            "output_tokens": 4,
            **cache,
            "cache_read_tokens": 1,
            "cost_usd": None,
        },
        "plan": {"calls": 2, "input_tokens": 15, "output_tokens": 3, **cache, "cost_usd": 0.75},
    }


def item(space: str, record: Turn | Episode, score: float = 1.0) -> PoolItem:
    return PoolItem(space, record, score)  # type: ignore[arg-type]


def turn(tid: str) -> Turn:
    return Turn(tid, "c", int(tid[1]), int(tid.split(":")[1]), "Ann", "text", WHEN)


def refined_answer() -> Answer:
    """Round 0 examined episode E1 (turns D1:1, D1:2) and turn D1:5 and asked for more;
    round 1 added turn D2:1; calls: plan, construct (+repair), construct (+repair), answer."""
    episode = Episode("E1", "c", 1, "t", "content", WHEN, ("D1:1", "D1:2"))
    pool = Pool(
        "c",
        ["q"],
        episodes=[item("episode", episode)],
        turns=[item("turn", turn("D1:5")), item("turn", turn("D2:1"))],
    )
    calls = [
        call("plan", 100, 10, 0.001),
        call("construct", 1000, 100, 0.01),
        call("construct.repair", 1100, 90, 0.011),
        call("construct", 400, 50, 0.004),
        call("construct.repair", 450, 40, 0.005),
        call("answer", 900, 20, 0.009),
    ]
    first = [pool.episodes[0].entry(), pool.turns[0].entry()]
    rounds = [
        RoundTrace(0, None, first, feedback=Feedback(False, "when?"), calls=calls[1:3]),
        RoundTrace(1, ["when"], [pool.turns[1].entry()], feedback=Feedback(True), calls=calls[3:5]),
    ]
    shown = Shown(["D1:5", "D2:1"], [], ["D1:5", "D2:1"])
    evidence = Evidence(rule_plan("q"), rounds, [], pool, "sufficient", shown=shown)
    return Answer("q", "a", "a", "full", ["D2:1"], evidence, Trace(calls))


def test_round_turn_ids_from_the_record() -> None:
    evidence = refined_answer().evidence
    assert evidence.turn_ids([0]) == ["D1:1", "D1:2", "D1:5"]
    assert evidence.turn_ids([0, 1]) == ["D1:1", "D1:2", "D1:5", "D2:1"]
    assert evidence.rounds[0].refs() == [Ref("episode", "E1"), Ref("turn", "D1:5")]


def test_refinement_info_counts_calls_after_the_first_construction() -> None:
    answer = refined_answer()
    info = refinement_info(answer)
    assert info == {
        "triggered": True,
        "rounds": 1,
        "termination": "sufficient",
        "extra_calls": 2,  # the second construct call and its repair
        "extra_input_tokens": 850,
        "extra_output_tokens": 90,
        "extra_cost_usd": pytest.approx(0.009),
        "round0_answer": None,
        "round0_judge_labels": [],
        "round0_score": None,
        "round0_calls": 0,
        "round0_cost_usd": 0.0,
    }


def test_refinement_info_keeps_the_judged_round0_answer_and_its_cost() -> None:
    answer = refined_answer()
    answer.round0 = Round0Answer("14 March", "... FINAL ANSWER: 14 March")
    answer.trace.calls.append(call("answer_round0", 700, 15, 0.007))
    info = refinement_info(answer, Judgement(["CORRECT", "WRONG"]))
    assert info["round0_answer"] == "14 March"
    assert info["round0_judge_labels"] == ["CORRECT", "WRONG"] and info["round0_score"] == 0.5
    assert info["round0_calls"] == 1 and info["round0_cost_usd"] == pytest.approx(0.007)
    assert info["extra_calls"] == 2  # the round-0 answer is not a refinement call


# ---------------------------------------------------------------------------- end to end


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_harness_end_to_end_resume_and_warm_rerun(tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "run"
    base = ["eval", "locomo", "--data", str(sample_path), "--out", str(out)]
    fake = [
        "--llm",
        "fake",
        "--judge",
        "fake",
        "--judge-runs",
        "2",
        "--concurrency",
        "3",
        "--no-plots",
    ]
    invoke(*base, *fake, "--limit", "3")
    assert len(lines(out / "results.jsonl")) == 3
    with (out / "results.jsonl").open("a") as handle:  # as if killed while writing
        handle.write('{"conversation": "demo-1", "ind')
    text = invoke(*base, *fake)
    assert "resumed 3" in text and "answered 11" in text and "refinement triggered" in text
    records = lines(out / "results.jsonl")
    keys = [(r["conversation"], r["index"], r["mode"]) for r in records]
    assert len(keys) == 14 == len(set(keys))  # categories 1-4 of the sample, no duplicates
    assert {r["category"] for r in records} == {1, 2, 3, 4}
    first = min(records, key=lambda r: r["index"])
    assert first["category_name"] == "multi-hop" and first["evidence"] == ["D1:13", "D3:11", "D5:9"]
    assert first["evidence_sessions"] == [1, 3, 5] and len(first["judge_labels"]) == 2
    assert set(first["llm"]) == {"plan", "construct", "answer", "judge"}
    assert first["llm"]["judge"]["calls"] == 2
    for field in (
        "prediction",
        "gold",
        "f1",
        "f1_locomo",
        "bleu1",
        "latency_s",
        "refinement",
        "visible_turn_ids",
        "cited_turn_ids",
        "initial_pool_turn_ids",
    ):
        assert field in first
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["answerer"] == "fake:fake" and manifest["embedder"].startswith("hash")
    assert manifest["config"]["judge_runs"] == 2 and len(manifest["data_sha256"]) == 64
    assert "judge" in manifest["prompts"] and manifest["mode"] == "full"
    summary = (out / "summary.json").read_text()
    assert json.loads(summary)["questions"] == 14
    assert (out / "report.md").exists() and (out / "build.json").exists()

    # warm cache: answer everything again in the same folder, with no provider call
    calls: list[str] = []
    offline = OfflineLLM()

    def counting(request: LLMRequest) -> LLMResponse:
        calls.append(request.stage)
        return offline.complete(request)

    warm = LLMClient(OfflineLLM(counting), cache=LLMCache(out / "llm-cache.db"))
    (out / "results.jsonl").unlink()
    result = run_locomo(
        LocomoRunConfig(
            sample_path, out, llm="fake", judge="fake", judge_runs=2, concurrency=2, plots=False
        ),
        llm=warm,
        judge=warm,
    )
    assert calls == [] and result.provider_calls == 0 and result.answered == 14
    # plan, construct, answer, two judge runs; a triggered question adds its refinement
    # constructs, its round-0 answer and the two judge runs of that
    triggered = [r for r in records if r["refinement"]["triggered"]]
    assert triggered and all(r["llm"]["answer_round0"]["calls"] == 1 for r in triggered)
    extra = sum(r["refinement"]["extra_calls"] + 3 for r in triggered)
    assert result.cached_calls == 14 * 5 + extra
    assert (out / "summary.json").read_text() == summary

    # a different answerer in the same folder is refused
    with pytest.raises(ConfigError, match="different answerer"):
        run_locomo(LocomoRunConfig(sample_path, out, llm="fake:other", judge="fake"))


def test_retrieval_mode_needs_no_llm(tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "ret"
    result = run_locomo(
        LocomoRunConfig(sample_path, out, mode="retrieval", categories=(2, 4), limit=4, plots=False)
    )
    assert result.questions == 4 and result.provider_calls == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accuracy"] == {"n": 0, "accuracy": None} and summary["judge"] is None
    assert summary["coverage"]["questions"] == 4 and summary["coverage"]["auc"] is not None
    assert summary["scores"] == {"f1": None, "f1_locomo": None, "bleu1": None}  # no answers
    assert summary["evidence"]["visible_cited"] is None  # no cards in retrieval mode
    assert {r["category"] for r in lines(out / "results.jsonl")} == {2}  # first four: cat 2
    assert not (out / "build.json").exists()


def test_bad_selection_is_an_input_error(tmp_path: Path, sample_path: Path) -> None:
    with pytest.raises(InputError, match="unknown conversation"):
        run_locomo(LocomoRunConfig(sample_path, tmp_path, conversations=("nope",)))
    with pytest.raises(InputError, match="categories"):
        run_locomo(LocomoRunConfig(sample_path, tmp_path, categories=(7,)))


def test_a_failing_worker_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    questions = [LocomoQuestion("c", n, f"q{n}?", "a", 1, ()) for n in range(4)]

    def answer_one(q: LocomoQuestion) -> dict[str, Any]:
        if q.index == 1:
            raise KeyError("D9:9")  # not an LLM error: a bug or a bad record
        return {"conversation": q.conversation, "index": q.index, "mode": "full"}

    results = tmp_path / "results.jsonl"
    failures = answer_all(questions, answer_one, results, 2, 0, 4, None)
    assert failures == ["c#1: KeyError: 'D9:9'"]
    assert sorted(r["index"] for r in lines(results)) == [0, 2, 3]


def test_no_build_answers_from_turns_and_the_manifest_says_so(
    tmp_path: Path, sample_path: Path
) -> None:
    out = tmp_path / "nobuild"
    config = LocomoRunConfig(sample_path, out, llm="fake", limit=2, build=False, plots=False)
    result = run_locomo(config)
    assert result.answered == 2 and not (out / "build.json").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["built"] is False and manifest["config"]["build"] is False
    assert manifest["judge_is_answerer"] is True and manifest["judge_max_tokens"] == 1024
    report = (out / "report.md").read_text()
    assert "--no-build" in report and "grading its own answers" in report
    assert "Judge outputs that could not be parsed (scored WRONG): 0." in report


CARD_FIELDS = {
    "claim",
    "sources",
    "quote",
    "verified",
    "score",
    "grounded_in",
    "model_time",
    "resolved_time",
    "time_agrees",
    "time_kind",
    "round",
}


@pytest.mark.slow
def test_records_carry_cards_and_eval_report_rebuilds_byte_identically(
    tmp_path: Path, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "audit"
    run_locomo(LocomoRunConfig(sample_path, out, llm="fake", judge="fake", limit=4))
    records = lines(out / "results.jsonl")
    cards = [c for r in records for c in r["cards"]]
    assert cards and all(set(c) >= CARD_FIELDS for c in cards)
    assert all(set(r["cited_context_turn_ids"]) <= set(r["visible_turn_ids"]) for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grounding"]["cards"] == len(cards)
    assert summary["grounding"]["questions"] == 4
    report = (out / "report.md").read_text()
    assert "## Grounding audit" in report and "- cited: the turns the answer context" in report
    written = {
        p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".json", ".md", ".png")
    }
    assert {"summary.json", "report.md", "coverage_curve.png"} <= set(written)
    for name in ("summary.json", "report.md", "coverage_curve.png", "accuracy_by_category.png"):
        (out / name).unlink(missing_ok=True)

    def no_call(self: OfflineLLM, request: Any) -> Any:
        raise AssertionError("eval report must not call an LLM")

    monkeypatch.setattr(OfflineLLM, "complete", no_call)
    invoke("eval", "report", str(out))
    rebuilt = {
        p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".json", ".md", ".png")
    }
    assert rebuilt == written


def test_eval_report_needs_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no manifest\.json"):
        runner.invoke(app, ["eval", "report", str(tmp_path)], catch_exceptions=False)


@pytest.mark.slow
def test_matched_mode_with_budgets_through_the_cli(tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "matched"
    args = ["eval", "locomo", "--data", str(sample_path), "--out", str(out), "--mode", "matched"]
    args += ["--llm", "fake", "--limit", "3", "--no-plots", "--budget-turns", "5", "--json"]
    result = runner.invoke(app, [*args, "--prompt-layout", "paper"])
    assert result.exit_code == 0, result.output
    records = lines(out / "results.jsonl")
    assert len(records) == 3 and {r["mode"] for r in records} == {"matched"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["retrieval"]["budget_turns"] == 5
    assert manifest["prompt_layout"] == manifest["config"]["prompt_layout"] == "paper"
    assert all(r["prediction"] for r in records)


@pytest.mark.slow
def test_full_run_measures_refinement_before_and_after(tmp_path: Path, sample_path: Path) -> None:
    """The offline constructor finds some sample questions' evidence insufficient: those get a
    judged round-0 answer, counted as its own stage outside the method's cost."""
    out = tmp_path / "run"
    result = run_locomo(LocomoRunConfig(sample_path, out, llm="fake", judge="fake", plots=False))
    records = lines(out / "results.jsonl")
    triggered = [r for r in records if r["refinement"]["triggered"]]
    assert 0 < len(triggered) < len(records)
    for r in records:
        info = r["refinement"]
        if info["triggered"]:
            assert info["round0_answer"] is not None and len(info["round0_judge_labels"]) == 1
            assert r["answer"]["round0"]["text"] == info["round0_answer"]
        else:
            assert info["round0_answer"] is None and "answer_round0" not in r["llm"]
            assert r["answer"]["round0"] is None
    rf = result.summary["refinement"]
    assert rf["triggered"] == len(triggered) and rf["round0_answer_calls"] == len(triggered)
    by_initial = rf["trigger_by_initial_evidence"]
    with_evidence = [r for r in records if r["evidence"]]
    assert by_initial["initial_visible"]["questions"] + by_initial["initial_not_visible"][
        "questions"
    ] == len(with_evidence)
    before = rf["triggered_before_after"]
    assert before["questions"] == len(triggered)
    assert before["accuracy_before"] == pytest.approx(
        sum(r["refinement"]["round0_score"] for r in triggered) / len(triggered), abs=1e-4
    )
    extra = sum(r["refinement"]["extra_calls"] for r in records)
    assert rf["extra_calls_per_triggered"] == pytest.approx(extra / len(triggered), abs=1e-4)
    cost = result.summary["cost"]
    assert "answer_round0" in cost["by_stage"]
    assert cost["by_stage"]["answer_round0"]["token_share"] is None  # not the method's
    method = sum(cost["by_stage"][s]["calls_per_question"] for s in ("plan", "construct", "answer"))
    assert cost["method_calls_per_question"] == pytest.approx(method, abs=1e-3)
    report = (out / "report.md").read_text()
    assert "from the round-0 cards" in report and "per triggered question" in report
    assert "from the round-0 cards" in (out / "report.html").read_text()


@pytest.mark.slow
def test_no_plan_run_skips_the_planner_and_says_so(tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", "locomo", "--data", str(sample_path), "--out", str(out), "--llm", "fake"]
    invoke(*args, "--limit", "3", "--no-plots", "--no-plan")
    records = lines(out / "results.jsonl")
    assert all("plan" not in r["llm"] for r in records)
    assert all(r["answer"]["evidence"]["plan"]["source"] == "rules" for r in records)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["planning"] is False and manifest["config"]["plan"] is False
    assert json.loads((out / "summary.json").read_text())["planning"] is False
    with pytest.raises(ConfigError, match="different planning"):  # no mixing in one folder
        run_locomo(LocomoRunConfig(sample_path, out, llm="fake", limit=3, plots=False))
