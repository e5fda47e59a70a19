"""The analyses of report.py on five hand-made records with hand-computed expected values."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from qemem.errors import InputError
from qemem.eval.markdown import render_markdown
from qemem.eval.report import (
    load_records,
    rebuild_report,
    span_bucket,
    summarise,
    write_report,
)
from qemem.llm.stages import ANSWER_ROUND0
from qemem.view.report import ANALYSIS_STAGES, method_cost


def tally(calls: int, inp: int, out: int, usd: float | None) -> dict[str, Any]:
    return {"calls": calls, "input_tokens": inp, "output_tokens": out, "cost_usd": usd}


def rec(
    conv: str,
    index: int,
    category: int,
    evidence: list[str],
    sessions: list[int],
    span: int | None,
    labels: list[str],
    vis: tuple[bool | None, ...],
    share: float | None,
    rank: int | None,
    refine: tuple[bool, int, int, float] = (False, 0, 0, 0.0),
    construct: tuple[int, int, int, float] = (1, 500, 50, 0.002),
) -> dict[str, Any]:
    triggered, rounds, extra, extra_usd = refine
    return {
        "conversation": conv,
        "index": index,
        "mode": "full",
        "category": category,
        "evidence": evidence,
        "evidence_sessions": sessions,
        "evidence_span_days": span,
        "evidence_unknown": [],
        "judge_labels": labels,
        "judge_parse_failures": 0,
        "score": sum(label == "CORRECT" for label in labels) / len(labels),
        "f1": 0.5,
        "f1_locomo": 0.25,
        "bleu1": 0.1,
        "llm": {
            "plan": tally(1, 100, 10, 0.001),
            "construct": tally(*construct),
            "answer": tally(1, 500, 20, 0.002),
            "judge": tally(2, 50, 5, 0.0001),
        },
        "refinement": {
            "triggered": triggered,
            "rounds": rounds,
            "termination": "round_budget" if triggered else "sufficient",
            "extra_calls": extra,
            "extra_cost_usd": extra_usd,
        },
        "initial_pool_turn_ids": [f"D1:{n}" for n in range(10)],
        "visibility": dict(
            zip(("initial", "refined", "final", "cited"), vis, strict=True),
            cited_share=share,
            initial_pool_rank=rank,
        ),
        "degradations": [],
    }


C, W = "CORRECT", "WRONG"
RECORDS = [
    rec(
        "c1",
        0,
        1,
        ["D1:1", "D2:1"],
        [1, 2],
        10,
        [C, C],
        (False, True, True, True),
        1.0,
        None,
        refine=(True, 1, 1, 0.002),
        construct=(2, 1000, 100, 0.004),
    ),
    rec("c1", 1, 2, ["D3:4"], [3], 0, [C, W], (True, True, True, False), 0.0, 15),
    rec(
        "c2",
        0,
        2,
        ["D1:1", "D5:2", "D9:3"],
        [1, 5, 9],
        200,
        [W, W],
        (False, False, False, False),
        1 / 3,
        None,
        refine=(True, 2, 2, 0.004),
        construct=(3, 1500, 150, 0.006),
    ),
    rec("c2", 1, 4, [], [], None, [C, C], (None, None, None, None), None, None),
    rec("c2", 2, 4, ["D2:1", "D4:1"], [2, 4], 45, [C, W], (True, True, False, True), 1.0, 40),
]
MANIFEST = {"mode": "full", "answerer": "fake:fake", "judge": "fake:fake", "judge_runs": 2}


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return summarise(RECORDS[::-1], MANIFEST)  # order of records does not matter


def test_accuracy_wilson_and_runs(summary: dict[str, Any]) -> None:
    acc = summary["accuracy"]
    # per-question shares 1, .5, 0, 1, .5 -> 0.6; run 1: 4/5, run 2: 2/5
    assert acc["n"] == 5 and acc["accuracy"] == 0.6
    assert acc["runs"] == [0.8, 0.4] and acc["mean_over_runs"] == 0.6
    assert acc["std_over_runs"] == 0.2828  # sqrt(2 * 0.2^2 / 1)
    # Wilson(3, 5): centre (0.6 + 1.96^2/10) / (1 + 1.96^2/5) = 0.55655, half 0.32583
    assert acc["ci95"] == [0.2307, 0.8824]
    cats = summary["by_category"]
    assert {c: b["accuracy"] for c, b in cats.items()} == {"1": 1.0, "2": 0.25, "4": 0.75}
    assert cats["2"]["name"] == "temporal" and cats["2"]["scores"]["f1_locomo"] == 0.25


def test_evidence_visibility(summary: dict[str, Any]) -> None:
    ev = summary["evidence"]
    # the record without evidence does not count: 4 questions
    assert ev["questions"] == 4
    assert ev["visible_initial"] == 0.5 and ev["visible_refined"] == 0.75
    assert ev["visible_final"] == 0.5 and ev["visible_cited"] == 0.5
    assert ev["cited_share"] == 0.5833  # (1 + 0 + 1/3 + 1) / 4


def test_refinement(summary: dict[str, Any]) -> None:
    rf = summary["refinement"]
    assert rf["triggered"] == 2 and rf["trigger_rate"] == 0.4
    assert rf["accuracy_triggered"] == 0.5 and rf["accuracy_not_triggered"] == 0.6667
    assert rf["mean_rounds_triggered"] == 1.5
    assert rf["extra_calls_per_question"] == 0.6 and rf["extra_calls_per_triggered"] == 1.5
    assert rf["extra_cost_usd_per_question"] == 0.0012
    assert rf["terminations"] == {"round_budget": 2, "sufficient": 3}


def test_cost_split(summary: dict[str, Any]) -> None:
    cost = summary["cost"]
    stages = cost["by_stage"]
    assert stages["construct"]["calls_per_question"] == 1.6  # 8 calls / 5
    assert stages["construct"]["input_tokens_per_question"] == 800.0
    assert stages["judge"]["calls_per_question"] == 2.0 and stages["judge"]["cost_share"] is None
    # method cost 0.005 + 0.016 + 0.010 = 0.031
    assert stages["plan"]["cost_share"] == 0.1613
    assert stages["construct"]["cost_share"] == 0.5161
    assert stages["answer"]["cost_share"] == 0.3226
    assert cost["method_calls_per_question"] == 3.6
    assert cost["method_cost_usd_per_question"] == 0.0062
    assert cost["method_input_tokens_per_question"] == 1400.0  # (500 + 4000 + 2500) / 5


def test_complexity_buckets(summary: dict[str, Any]) -> None:
    cx = summary["complexity"]
    turns = {k: (v["n"], v["accuracy"]) for k, v in cx["evidence_turns"].items()}
    assert turns == {"1": (1, 0.5), "2": (2, 0.75), ">=3": (1, 0.0)}
    assert cx["evidence_turns"]["2"]["visible_final"] == 0.5
    sessions = {k: (v["n"], v["accuracy"]) for k, v in cx["sessions"].items()}
    assert sessions == {"single-session": (1, 0.5), "cross-session": (3, 0.5)}
    span = {k: (v["n"], v["accuracy"]) for k, v in cx["span"].items()}
    assert span == {
        "same session": (1, 0.5),
        "<=30 days": (1, 1.0),
        "31-180 days": (1, 0.5),
        ">180 days": (1, 0.0),
    }


def test_span_bucket_edges() -> None:
    base = {"evidence_sessions": [1, 2]}
    assert span_bucket({**base, "evidence_span_days": 30}) == "<=30 days"
    assert span_bucket({**base, "evidence_span_days": 31}) == "31-180 days"
    assert span_bucket({**base, "evidence_span_days": 180}) == "31-180 days"
    assert span_bucket({**base, "evidence_span_days": 181}) == ">180 days"
    # two sessions on the same day are cross-session, not "same session"
    assert span_bucket({**base, "evidence_span_days": 0}) == "<=30 days"
    assert span_bucket({"evidence_sessions": [3], "evidence_span_days": 0}) == "same session"
    assert span_bucket({"evidence_sessions": [], "evidence_span_days": None}) is None


def test_coverage_curve_of_initial_pool(summary: dict[str, Any]) -> None:
    cov = summary["coverage"]
    # ranks None, 15, None, 40 over four questions with evidence
    assert cov["questions"] == 4
    assert cov["coverage"]["10"] == 0.0 and cov["coverage"]["20"] == 0.25
    assert cov["coverage"]["30"] == 0.25 and cov["coverage"]["40"] == 0.5
    assert cov["coverage"]["120"] == 0.5
    assert cov["auc"] == 0.4167  # (0 + .25 + .25 + 9 * .5) / 12
    assert cov["mean_initial_pool_turns"] == 10.0


def test_write_report_files_and_bytes(tmp_path: Path) -> None:
    first = write_report(tmp_path, RECORDS, MANIFEST)
    text = (tmp_path / "summary.json").read_text()
    assert json.loads(text) == first and json.loads(text)["questions"] == 5
    write_report(tmp_path, RECORDS[::-1], MANIFEST, plots=False)
    assert (tmp_path / "summary.json").read_text() == text
    report = (tmp_path / "report.md").read_text()
    assert "| 2 temporal | 25.0% ± 35.4" in report and "AUC over turn budgets" in report
    assert {"accuracy_by_category.png", "coverage_curve.png", "cost_split.png"} <= {
        p.name for p in tmp_path.iterdir()
    }


def test_load_records_dedupes_and_ignores_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    lines = [json.dumps(RECORDS[0]), json.dumps({**RECORDS[0], "f1": 0.9}), json.dumps(RECORDS[1])]
    path.write_text("\n".join(lines) + '\n{"conversation": "c', "utf-8")
    records = load_records(path)
    assert [(r["conversation"], r["index"]) for r in records] == [("c1", 0), ("c1", 1)]
    assert records[0]["f1"] == 0.5  # the first record of a key wins
    path.write_text('{"broken\n' + lines[0] + "\n", "utf-8")
    with pytest.raises(InputError, match="line 1"):
        load_records(path)
    assert load_records(tmp_path / "missing.jsonl") == []


def test_no_terminations_for_a_mode_without_refinement() -> None:
    direct = [
        {**r, "mode": "direct", "refinement": {**r["refinement"], "termination": None}}
        for r in RECORDS
    ]
    summary = summarise(direct, {**MANIFEST, "mode": "direct"})
    assert summary["refinement"]["terminations"] == {}
    assert "terminations" not in render_markdown(summary, [])
    full = summarise(RECORDS, MANIFEST)
    assert "terminations {'round_budget': 2, 'sufficient': 3}" in render_markdown(full, [])


def test_header_names_a_self_judging_answerer_and_parse_failures() -> None:
    failed = [{**RECORDS[0], "judge_parse_failures": 2}, *RECORDS[1:]]
    own = render_markdown(summarise(failed, {**MANIFEST, "judge_is_answerer": True}), [])
    assert "grading its own answers" in own and "published protocol uses a separate judge" in own
    assert "could not be parsed (scored WRONG): 2." in own
    separate = render_markdown(summarise(RECORDS, MANIFEST), [])
    assert "grading its own answers" not in separate


def test_a_run_folder_of_record_format_1_still_rebuilds(tmp_path: Path) -> None:
    """tests/fixtures/runs/main-v1: results.jsonl and manifest.json written by main before the
    evidence record (``evidence_view`` records, no ``format``), with the summary it wrote."""
    fixture = Path(__file__).parent / "fixtures" / "runs" / "main-v1"
    for name in ("results.jsonl", "manifest.json"):
        shutil.copy(fixture / name, tmp_path / name)
    summary = rebuild_report(tmp_path)
    assert summary == json.loads((fixture / "summary.json").read_text("utf-8"))
    assert (tmp_path / "summary.json").read_text("utf-8") == (fixture / "summary.json").read_text(
        "utf-8"
    )
    html = (tmp_path / "report.html").read_text("utf-8")
    assert html.count('class="expand"') == 3 and 'id="d-2"' in html


def test_refinement_by_initial_evidence_and_before_after(summary: dict[str, Any]) -> None:
    rf = summary["refinement"]
    # c1#0 and c2#0 triggered, neither's initial pool showed all evidence; c1#1 and c2#2 did
    assert rf["trigger_by_initial_evidence"] == {
        "initial_visible": {"questions": 2, "triggered": 0, "trigger_rate": 0.0},
        "initial_not_visible": {"questions": 2, "triggered": 2, "trigger_rate": 1.0},
    }
    assert rf["extra_cost_usd_per_triggered"] == pytest.approx(0.003)
    assert rf["extra_tokens_per_question"] is None  # the records predate the token counts
    assert rf["triggered_before_after"]["questions"] == 0  # no round-0 answers recorded
    records = [dict(r, refinement=dict(r["refinement"])) for r in RECORDS]
    records[0]["refinement"].update(round0_score=0.0, round0_calls=1, round0_cost_usd=0.001)
    records[2]["refinement"].update(round0_score=0.5, round0_calls=1, round0_cost_usd=0.002)
    again = summarise(records, MANIFEST)["refinement"]
    assert again["triggered_before_after"] == {
        "questions": 2,
        "accuracy_before": 0.25,
        "accuracy_after": 0.5,  # c1#0 1.0, c2#0 0.0
        "difference": 0.25,
        "fixed": 1,
        "broken": 1,
    }
    assert again["round0_answer_calls"] == 2
    assert again["round0_answer_cost_usd"] == pytest.approx(0.003)
    markdown = render_markdown(summarise(records, MANIFEST), [])
    assert "accuracy from the round-0 cards 25.0%, after refinement 50.0%" in markdown


def test_coverage_by_category_and_milestone(summary: dict[str, Any]) -> None:
    cov = summary["coverage"]
    assert cov["by_category"] == {
        "1": {"questions": 1, "at_20": 0.0, "whole_pool": 0.0},
        "2": {"questions": 2, "at_20": 0.5, "whole_pool": 0.5},
        "4": {"questions": 1, "at_20": 0.0, "whole_pool": 1.0},
    }
    assert cov["milestone_turns"] is None  # two of four never covered
    assert summary["planning"] is True and summary["errata"] is None


def test_round0_answers_are_not_the_method_cost() -> None:
    records = [dict(r, llm=dict(r["llm"])) for r in RECORDS]
    for r in records:
        r["llm"]["answer_round0"] = tally(1, 400, 10, 0.5)
    with_round0 = summarise(records, MANIFEST)["cost"]
    without = summarise(RECORDS, MANIFEST)["cost"]
    assert with_round0["method_cost_usd_per_question"] == without["method_cost_usd_per_question"]
    assert with_round0["by_stage"]["answer_round0"]["cost_share"] is None
    assert ANSWER_ROUND0 in ANALYSIS_STAGES
    assert method_cost(records[0]) == method_cost(RECORDS[0])


def test_the_run_page_shows_coverage_its_milestone_and_the_planning_setting(
    tmp_path: Path,
) -> None:
    summary = write_report(tmp_path, RECORDS, MANIFEST, plots=False)
    assert summary["coverage"]["coverage"]
    html = (tmp_path / "report.html").read_text("utf-8")
    assert "Initial-pool coverage (planning on)" in html
    assert "80% complete-evidence coverage:" in html and "within 20 turns" in html
    off = tmp_path / "no-plan"
    off.mkdir()
    write_report(off, RECORDS, {**MANIFEST, "planning": False}, plots=False)
    assert "planning off: --no-plan" in (off / "report.html").read_text("utf-8")
