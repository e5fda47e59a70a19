"""The claim audit: sampling, weights, intervals, blinding, caching and replay, report and page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit_support import copy_run, leaked, make_run, mark_golds, records
from qemem.answer.sampling import allocate, stratified_sample, weighted_share
from qemem.cli import app
from qemem.errors import InputError
from qemem.eval.audit import audit_claims
from qemem.llm import LLMCache, LLMClient, LLMRequest
from qemem.testing import OfflineLLM
from qemem.view import report_html


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory, sample_path: Path) -> Path:
    return make_run(sample_path, tmp_path_factory.mktemp("audit") / "run-secret-name")


def test_allocation_is_proportional_with_one_per_stratum() -> None:
    assert allocate({"a": 90, "b": 9, "c": 1}, 10) == {"a": 8, "b": 1, "c": 1}
    assert allocate({"a": 3, "b": 2}, 10) == {"a": 3, "b": 2}
    assert sum(allocate({"a": 7, "b": 5, "c": 3}, 6).values()) == 6


def test_stratified_sample_weights_sum_to_the_population_and_are_seeded() -> None:
    items = list(range(100))
    drawn = stratified_sample(items, lambda i: "small" if i < 10 else "big", 20, seed=3)
    assert len(drawn) == 20
    assert sum(d.weight for d in drawn) == pytest.approx(100)
    assert {d.stratum for d in drawn} == {"small", "big"}
    again = stratified_sample(items, lambda i: "small" if i < 10 else "big", 20, seed=3)
    assert [d.item for d in again] == [d.item for d in drawn]
    other = stratified_sample(items, lambda i: "small" if i < 10 else "big", 20, seed=4)
    assert [d.item for d in other] != [d.item for d in drawn]
    with pytest.raises(InputError):
        stratified_sample(items, str, 0, seed=0)


@pytest.mark.slow
def test_weighted_share_uses_population_weights_and_brackets_the_estimate() -> None:
    # stratum a: 2 of 2 sampled succeed, weight 9; stratum b: 0 of 2, weight 1
    result = weighted_share([1, 1, 0, 0], [9, 9, 1, 1], ["a", "a", "b", "b"], seed=1)
    assert result["share"] == pytest.approx(0.9)
    low, high = result["ci95"]
    assert low <= 0.9 <= high
    mixed = weighted_share([1, 0, 1, 0, 1, 0], [1] * 6, ["a"] * 6, seed=1)
    assert mixed["ci95"][0] < 0.5 < mixed["ci95"][1]
    assert weighted_share([], [], [])["share"] is None


@pytest.mark.slow
def test_claim_audit_writes_weighted_figures_by_stratum(base_run: Path, tmp_path: Path) -> None:
    run = copy_run(base_run, tmp_path / "run")
    record = audit_claims(run, LLMClient(OfflineLLM()), sample=6, seed=0)
    assert json.loads((run / "audit-claims.json").read_text()) == record
    assert record["sampled"] == 6 < record["population"]
    assert sum(c["weight"] for c in record["cards"]) == pytest.approx(record["population"])
    for key, block in record["by_stratum"].items():
        category, grounded = key.split("|")
        assert int(category) in {1, 2, 3, 4, 5} and grounded in {"turn", "episode", "fact"}
        assert block["population"] >= sum(block["counts"].values())
    overall = record["overall"]["supported_or_partial"]
    assert overall["ci95"][0] <= overall["share"] <= overall["ci95"][1]
    assert 0.0 <= record["unresolved_share"] <= 1.0
    assert all(c["label"] and c["reason"] for c in record["cards"])


@pytest.mark.slow
def test_the_claim_judge_sees_neither_question_gold_label_nor_run(
    base_run: Path, tmp_path: Path
) -> None:
    run = copy_run(base_run, tmp_path / "run-secret-name")
    golds = mark_golds(run)
    offline = OfflineLLM()
    audit_claims(run, LLMClient(offline), sample=10, seed=1)
    asked = [r for r in offline.calls if r.stage == "audit.claim"]
    assert asked
    secrets = ["run-secret-name", "CORRECT", "WRONG", "Question:"]
    secrets += [str(r["question"]) for r in records(run)]
    secrets += golds
    assert [leaked(request, secrets) for request in asked] == [[] for _ in asked]
    assert all(set(request.inputs) == {"claim", "time", "sources"} for request in asked)


@pytest.mark.slow
def test_claim_audit_is_cached_and_replays_without_the_model(
    base_run: Path, tmp_path: Path
) -> None:
    run = copy_run(base_run, tmp_path / "run")
    cache = tmp_path / "audit-cache.db"
    first = audit_claims(run, LLMClient(OfflineLLM(), cache=LLMCache(cache)), sample=5, seed=2)

    def refuse(request: LLMRequest) -> str:
        raise AssertionError(f"replay called the model for {request.stage}")

    replay = LLMClient(OfflineLLM(refuse), cache=LLMCache(cache, "replay"))
    assert audit_claims(run, replay, sample=5, seed=2) == first


@pytest.mark.slow
def test_cli_claim_audit_adds_report_and_page_sections(base_run: Path, tmp_path: Path) -> None:
    run = copy_run(base_run, tmp_path / "run")
    args = ["eval", "audit", "claims", str(run), "--judge", "fake", "--sample", "4", "--json"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.splitlines()[-1])["sampled"] == 4
    assert "## Claim audit" in (run / "report.md").read_text()
    assert 'id="audit-claims"' in (run / "report.html").read_text()
    assert (run / "llm-cache.db").exists()


@pytest.mark.slow
def test_the_page_section_renders_the_record_and_escapes_its_text(
    base_run: Path, tmp_path: Path
) -> None:
    run = copy_run(base_run, tmp_path / "run")
    record = audit_claims(run, LLMClient(OfflineLLM()), sample=3, seed=0)
    record["cards"][0]["reason"] = "<script>alert(1)</script>"
    page = report_html(records(run), {}, audits={"claims": record})
    assert 'id="audit-claims"' in page and 'id="audit-answers"' not in page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
