"""The answer audit: shared contexts, claim splitting, second retrieval pass, blinding, the
per-run figures and the paired differences, caching and replay, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit_support import copy_run, leaked, make_run, mark_golds, records
from qemem.audit_names import ANSWER_METRICS
from qemem.cli import app
from qemem.errors import InputError
from qemem.eval.audit import audit_answers
from qemem.llm import LLMCache, LLMClient, LLMRequest
from qemem.testing import OfflineLLM


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory, sample_path: Path) -> Path:
    return make_run(sample_path, tmp_path_factory.mktemp("answers") / "run")


def abstain_everywhere(run: Path) -> None:
    rows = records(run)
    for row in rows:
        row["prediction"] = "Not mentioned in the conversation."
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.slow
def test_two_runs_share_contexts_and_get_paired_differences(base_run: Path, tmp_path: Path) -> None:
    a = copy_run(base_run, tmp_path / "run-alpha")
    b = copy_run(base_run, tmp_path / "run-beta")
    abstain_everywhere(b)
    offline = OfflineLLM()
    record = audit_answers([a, b], LLMClient(offline), sample=5, seed=0)
    assert json.loads((b / "audit-answers.json").read_text()) == record
    first, second = record["runs"]
    assert set(first["summary"]) == set(ANSWER_METRICS)
    assert second["summary"]["abstention"]["share"] == 1.0
    assert second["summary"]["claims_per_answer"]["share"] == 0.0
    assert [q["key"] for q in first["questions"]] == [q["key"] for q in second["questions"]]
    assert sum(q["weight"] for q in first["questions"]) == pytest.approx(record["population"])
    diff = record["differences"][f"{a} - {b}"]["fully_grounded"]
    grounded = [q["scores"]["fully_grounded"] for q in first["questions"]]
    assert diff["difference"] == pytest.approx(sum(grounded) / len(grounded))
    assert diff["n_units"] == 5
    assert diff["ci_low"] <= diff["difference"] <= diff["ci_high"]
    assert not [
        r for r in offline.calls if r.stage == "audit.split" and "Not mentioned" in r.prompt_text
    ]


@pytest.mark.slow
def test_unsupported_claims_get_a_second_retrieval_pass(base_run: Path, tmp_path: Path) -> None:
    run = copy_run(base_run, tmp_path / "run")
    rows = records(run)
    for row in rows:
        row["prediction"] = "Zebras juggled quantum marmalade. Priya ran."
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    offline = OfflineLLM()
    record = audit_answers([run], LLMClient(offline), sample=2, seed=0)
    claims = [c for q in record["runs"][0]["questions"] for c in q["claims"]]
    assert [c["core"] for c in claims[:2]] == [True, False]
    judged = [r for r in offline.calls if r.stage == "audit.answer"]
    assert any("check pass 2" in r.prompt_text for r in judged)
    assert len(judged) > len(claims)
    assert record["runs"][0]["summary"]["fully_grounded"]["share"] == 0.0


@pytest.mark.slow
def test_the_claim_judge_is_blind_to_run_gold_and_label(base_run: Path, tmp_path: Path) -> None:
    run = copy_run(base_run, tmp_path / "run-secret-name")
    golds = mark_golds(run)
    offline = OfflineLLM()
    audit_answers([run], LLMClient(offline), sample=6, seed=1)
    asked = [r for r in offline.calls if r.stage in ("audit.answer", "audit.split")]
    assert any(r.stage == "audit.answer" for r in asked)
    secrets = ["run-secret-name", "CORRECT", "WRONG", *golds]
    assert [leaked(r, secrets) for r in asked] == [[] for _ in asked]


@pytest.mark.slow
def test_answer_audit_replays_from_the_cache(base_run: Path, tmp_path: Path) -> None:
    run = copy_run(base_run, tmp_path / "run")
    cache = tmp_path / "cache.db"
    first = audit_answers([run], LLMClient(OfflineLLM(), cache=LLMCache(cache)), sample=4, seed=3)

    def refuse(request: LLMRequest) -> str:
        raise AssertionError(f"replay called the model for {request.stage}")

    replay = LLMClient(OfflineLLM(refuse), cache=LLMCache(cache, "replay"))
    assert audit_answers([run], replay, sample=4, seed=3) == first


def test_runs_without_shared_questions_are_refused(base_run: Path, tmp_path: Path) -> None:
    a = copy_run(base_run, tmp_path / "a")
    b = copy_run(base_run, tmp_path / "b")
    rows = records(b)
    for row in rows:
        row["conversation"] = "elsewhere"
    (b / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="share no question"):
        audit_answers([a, b], LLMClient(OfflineLLM()), sample=3, seed=0)


@pytest.mark.slow
def test_cli_answer_audit_writes_report_and_page(base_run: Path, tmp_path: Path) -> None:
    a = copy_run(base_run, tmp_path / "a")
    b = copy_run(base_run, tmp_path / "b")
    args = ["eval", "audit", "answers", str(a), str(b), "--judge", "fake", "--sample", "3"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for run in (a, b):
        assert "## Answer audit" in (run / "report.md").read_text()
        assert 'id="audit-answers"' in (run / "report.html").read_text()
