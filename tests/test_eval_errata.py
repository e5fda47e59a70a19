"""Known answer-key errors: the errata file's validation, and scoring a run on the original
and the corrected gold side by side (``eval locomo --errata``, ``eval report --errata``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import InputError
from qemem.eval.errata import corrected_records, load_errata, parse_errata
from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.eval.manifest import data_sha256

runner = CliRunner()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    for name in ("QEMEM_LLM", "QEMEM_LLM_CACHE", "QEMEM_CACHE_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")


def test_a_valid_file() -> None:
    fixes = parse_errata(
        {
            "conv-26#12": {
                "answer": "the Tuesday before 17 December 2023",
                "reason": "said 17 Dec",
            },
            "conv-30#4": {"excluded": True, "reason": "no answer in the conversation"},
        }
    )
    assert fixes["conv-26#12"].answer == "the Tuesday before 17 December 2023"
    assert not fixes["conv-26#12"].excluded and fixes["conv-30#4"].excluded


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "JSON object keyed by question key"),
        ({"conv-26": {"answer": "x", "reason": "r"}}, "not a question key"),
        ({"c#1": "x"}, "give an object"),
        ({"c#1": {"answer": "x"}}, "non-empty reason"),
        ({"c#1": {"answer": "x", "reason": " "}}, "non-empty reason"),
        ({"c#1": {"reason": "r"}}, "not neither"),
        ({"c#1": {"answer": "x", "excluded": True, "reason": "r"}}, "not both"),
        ({"c#1": {"answer": "", "reason": "r"}}, "non-empty string"),
        ({"c#1": {"excluded": "yes", "reason": "r"}}, "true or false"),
        ({"c#1": {"answer": "x", "reason": "r", "source": "me"}}, "unknown field"),
    ],
)
def test_bad_files_say_what_is_wrong(data: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_errata(data)


def test_unreadable_files(tmp_path: Path) -> None:
    path = tmp_path / "errata.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_errata(path)
    with pytest.raises(InputError, match="cannot read"):
        load_errata(tmp_path / "missing.json")


def test_corrected_records_replace_and_exclude() -> None:
    records = [
        {"conversation": "c", "index": n, "gold": "g", "judge_labels": ["WRONG"], "score": 0.0}
        for n in range(3)
    ]
    judged = {
        "questions": {
            "c#0": {"excluded": False, "corrected": "h", "judge_labels": ["CORRECT"]},
            "c#1": {"excluded": True, "corrected": None, "judge_labels": []},
        }
    }
    out = corrected_records(records, judged)
    assert [(r["index"], r["gold"], r["score"]) for r in out] == [(0, "h", 1.0), (2, "g", 0.0)]
    assert records[0]["gold"] == "g"  # the originals are untouched


def write_errata(path: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Correct a WRONG question's gold to its prediction and exclude another question."""
    wrong = next(r for r in records if r["score"] == 0.0)
    other = next(r for r in records if r is not wrong)
    data = {
        f"{wrong['conversation']}#{wrong['index']}": {
            "answer": wrong["prediction"],
            "reason": "the gold contradicts the conversation",
        },
        f"{other['conversation']}#{other['index']}": {"excluded": True, "reason": "ambiguous"},
        "demo-1#999": {"excluded": True, "reason": "not in this run"},
    }
    path.write_text(json.dumps(data))
    return {"wrong": wrong, "other": other}


@pytest.mark.slow
def test_run_and_report_with_errata(tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "run"
    config = LocomoRunConfig(sample_path, out, llm="fake", judge="fake", limit=6, plots=False)
    run_locomo(config)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    errata = tmp_path / "errata.json"
    picked = write_errata(errata, records)
    wrong, other = picked["wrong"], picked["other"]

    result = run_locomo(
        LocomoRunConfig(
            sample_path, out, llm="fake", judge="fake", limit=6, plots=False, errata=errata
        )
    )
    block = result.summary["errata"]
    assert block["sha256"] == data_sha256(errata)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["errata"] == {"file": str(errata), "sha256": data_sha256(errata)}
    scores = {(r["conversation"], r["index"]): r["score"] for r in records}
    original = sum(scores.values()) / 6
    assert block["original"]["accuracy"] == pytest.approx(original, abs=1e-4)
    fixed = dict(scores)
    fixed[(wrong["conversation"], wrong["index"])] = 1.0  # the prediction is the new gold
    del fixed[(other["conversation"], other["index"])]
    assert block["corrected"]["n"] == 5
    assert block["corrected"]["accuracy"] == pytest.approx(sum(fixed.values()) / 5, abs=1e-4)
    assert block["corrected_questions"] == 1 and block["excluded_questions"] == 1
    assert block["unmatched"] == ["demo-1#999"]
    changed = {row["key"]: row for row in block["changed"]}
    row = changed[f"{wrong['conversation']}#{wrong['index']}"]
    assert row["gold"] == wrong["gold"] and row["corrected"] == wrong["prediction"]
    assert (row["score_original"], row["score_corrected"]) == (0.0, 1.0)
    assert changed[f"{other['conversation']}#{other['index']}"]["score_corrected"] is None
    report = (out / "report.md").read_text()
    assert "## Known answer-key errors" in report and "the gold contradicts" in report
    assert "Known answer-key errors" in (out / "report.html").read_text()

    # eval report rebuilds it byte for byte (errata.json kept, manifest says so)
    summary = (out / "summary.json").read_text()
    assert runner.invoke(app, ["eval", "report", str(out)]).exit_code == 0
    assert (out / "summary.json").read_text() == summary

    # a run without --errata drops the stale scoring
    run_locomo(config)
    assert json.loads((out / "summary.json").read_text())["errata"] is None
    assert not (out / "errata.json").exists()

    # eval report --errata scores it again from the records alone (judge from the manifest)
    shown = runner.invoke(app, ["eval", "report", str(out), "--errata", str(errata)])
    assert shown.exit_code == 0, shown.output
    assert "corrected" in shown.output and "not in this run: demo-1#999" in shown.output
    assert (out / "summary.json").read_text() == summary


def test_errata_need_judged_answers(tmp_path: Path, sample_path: Path) -> None:
    errata = tmp_path / "errata.json"
    errata.write_text(json.dumps({"demo-1#0": {"excluded": True, "reason": "r"}}))
    with pytest.raises(InputError, match="needs judged answers"):
        run_locomo(LocomoRunConfig(sample_path, tmp_path / "r", mode="retrieval", errata=errata))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"demo-1#0": {"reason": "r"}}))
    with pytest.raises(InputError, match="not neither"):  # checked before any work
        run_locomo(LocomoRunConfig(sample_path, tmp_path / "r2", llm="fake", errata=bad))
    assert not (tmp_path / "r2").exists()
