"""``qemem data longmemeval`` and ``qemem eval longmemeval`` on a hand-made file in the
benchmark's published format (tests/fixtures/longmemeval: six questions of five types, one
abstention, one history listed out of date order)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.datasets.convert import write_conversion
from qemem.datasets.longmemeval import convert_longmemeval
from qemem.errors import InputError
from qemem.eval.longmemeval import LongMemEvalRunConfig, run_longmemeval
from qemem.ingest.reader import read_conversations
from qemem.llm import LLMClient
from qemem.prompts import load_prompt
from qemem.testing import OfflineLLM

FIXTURE = Path(__file__).parent / "fixtures" / "longmemeval" / "longmemeval_sample.json"


def _by_id(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["sample_id"]: s for s in samples}


def test_each_question_becomes_its_own_conversation() -> None:
    conversion = convert_longmemeval(FIXTURE)
    samples = _by_id(conversion.samples)
    assert len(samples) == 6
    dog = samples["lme-q_dog_1"]
    (qa,) = dog["qa"]
    assert qa["evidence"] == ["D2:1"] and qa["category"] == 4 and not qa["abstention"]
    assert qa["question_date"] == "2023-05-30T23:40"
    talk = dog["conversation"]
    assert talk["session_1_date_time"] == "2023-05-01T09:12"
    assert talk["session_2"][0] == {
        "speaker": "User",
        "dia_id": "D2:1",
        "text": "I'm looking for a harness that fits my beagle, Pepper, she pulls a lot on walks.",
        "role": "user",
    }
    # the file lists the trip's sessions latest first: they are put in date order
    trip = samples["lme-q_trip_2"]["conversation"]
    assert trip["session_1_date_time"] == "2023-04-03T14:05"
    assert trip["session_1"][0]["text"].startswith("I renewed my passport")
    assert samples["lme-q_trip_2"]["qa"][0]["category"] == 2
    assert samples["lme-q_tips_5"]["qa"][0]["evidence"] == ["D1:2"]  # the assistant's turn
    abstention = samples["lme-q_dog_1_abs"]["qa"][0]
    assert abstention["abstention"] and abstention["category"] == 5
    assert abstention["evidence"] == [] and "has_answer" in abstention["evidence_note"]
    manifest = conversion.manifest
    assert manifest["reordered_histories"] == 1 and manifest["abstention"] == 1
    assert manifest["by_type"]["single-session-user"] == 2
    assert len(convert_longmemeval(FIXTURE, limit=2).samples) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda q: q.update(question_type="trivia"), r"unknown question_type 'trivia'"),
        (lambda q: q["haystack_dates"].pop(), r"2 sessions but 1 dates"),
        (lambda q: q.update(question_date="30 May 2023"), r"unrecognised date '30 May 2023'"),
        (lambda q: q["haystack_sessions"][0][0].update(role="system"), r"role user or assistant"),
    ],
)
def test_what_cannot_be_mapped_is_refused(tmp_path: Path, change: Any, message: str) -> None:
    data = json.loads(FIXTURE.read_text())
    change(data[1])
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message) as caught:
        convert_longmemeval(path)
    assert "question q_trip_2" in str(caught.value) and "field" in str(caught.value)


def test_run_judges_each_type_by_its_rule(tmp_path: Path) -> None:
    data = tmp_path / "lme.json"
    conversion = convert_longmemeval(FIXTURE)
    write_conversion(conversion.samples, conversion.manifest, data)
    assert len(read_conversations(data)) == 6
    offline = OfflineLLM()
    config = LongMemEvalRunConfig(data=data, out=tmp_path / "run", mode="direct", embedder="hash")
    result = run_longmemeval(config, llm=LLMClient(offline))
    assert result.failures == [] and result.questions == 6
    judged = {c.inputs["question"]: c.system for c in offline.calls if c.stage == "judge"}
    assert len(judged) == 6
    trip = next(q for q in judged if q.startswith("How many days before my trip"))
    assert trip.endswith("(Current date: 2023-04-20 10:00.)")
    assert load_prompt("lme_rule_temporal").strip() in judged[trip]
    cat = next(q for q in judged if q.startswith("What breed is my cat"))
    assert load_prompt("lme_rule_abstention").strip() in judged[cat]
    summary = result.summary
    assert summary["accuracy"]["n"] == 6 and summary["abstention"]["n"] == 1
    assert set(summary["by_type"]) == {
        "single-session-user",
        "single-session-assistant",
        "single-session-preference",
        "temporal-reasoning",
        "knowledge-update",
    }
    assert summary["coverage"]["overall"]["without_evidence"] == 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "lme_rule_update" in manifest["judge_prompts"]
    assert "| abstention |" in (tmp_path / "run" / "report.md").read_text()


def test_cli_converts_and_runs(tmp_path: Path) -> None:
    runner = CliRunner()
    data = tmp_path / "lme.json"
    converted = runner.invoke(app, ["data", "longmemeval", str(FIXTURE), "--out", str(data)])
    assert converted.exit_code == 0, converted.output
    assert (tmp_path / "lme.manifest.json").exists()
    args = ["eval", "longmemeval", "--data", str(data), "--out", str(tmp_path / "run")]
    args += ["--llm", "fake", "--embedder", "hash", "--mode", "rag", "--types", "knowledge-update"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["questions"] == 1 and summary["mode"] == "rag"


def test_eval_report_rebuilds_a_longmemeval_run(tmp_path: Path) -> None:
    data = tmp_path / "lme.json"
    conversion = convert_longmemeval(FIXTURE, limit=2)
    write_conversion(conversion.samples, conversion.manifest, data)
    out = tmp_path / "run"
    config = LongMemEvalRunConfig(data=data, out=out, mode="retrieval", embedder="hash")
    run_longmemeval(config)
    before = (out / "summary.json").read_bytes()
    (out / "summary.json").unlink()
    result = CliRunner().invoke(app, ["eval", "report", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert (out / "summary.json").read_bytes() == before
    assert json.loads(result.output)["accuracy"] == {"n": 0, "accuracy": None}
