"""``qemem eval beam`` end to end on the BEAM fixture with the offline LLM: qemem's modes and the
rag and full-context baselines, resuming, the judge's records, coverage counted apart for
probes without evidence, and `eval compare` over two BEAM runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.datasets.beam import convert_beam, write_beam
from qemem.errors import InputError
from qemem.eval.beam import BeamRunConfig, run_beam
from qemem.eval.beam_records import beam_probes
from qemem.eval.compare import compare_runs
from qemem.ingest.locomo import load_locomo
from qemem.llm import LLMClient
from qemem.testing import OfflineLLM

FIXTURE = Path(__file__).parent / "fixtures" / "beam"
runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("beam") / "beam.json"
    write_beam(convert_beam(FIXTURE, ["100K"]), path)
    return path


def _run(
    data: Path, out: Path, mode: str, **settings: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    fake = LLMClient(OfflineLLM())
    config = BeamRunConfig(data=data, out=out, mode=mode, embedder="hash", **settings)
    result = run_beam(config, llm=None if mode == "retrieval" else fake)
    assert result.failures == []
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return result.summary, records


def test_full_mode_scores_every_ability_with_the_rubric_judge(data: Path, tmp_path: Path) -> None:
    summary, records = _run(data, tmp_path / "full", "full")
    assert len(records) == 14 and summary["probes"] == 14
    by_ability = summary["score"]["by_ability"]
    assert len(by_ability) == 10 and by_ability["abstention"]["chats"] == 2
    for record in records:
        assert len(record["rubric_scores"]) == len(record["rubric"])
        assert set(record["rubric_scores"]) <= {0.0, 0.5, 1.0}
        assert record["llm"]["judge"]["calls"] >= len(record["rubric"])
    ordering = [r for r in records if r["ability"] == "event_ordering"]
    assert all(r["score"] == r["ordering"]["tau_norm"] for r in ordering)
    others = [r for r in records if r["ability"] != "event_ordering"]
    assert all(r["score"] == r["rubric_score"] for r in others)
    # probes without evidence are counted apart, not as covered
    overall = summary["coverage"]["overall"]
    assert (overall["probes"], overall["without_evidence"]) == (11, 3)
    assert summary["coverage"]["by_ability"]["abstention"] == {"probes": 0, "without_evidence": 2}
    manifest = json.loads((tmp_path / "full" / "manifest.json").read_text())
    assert "beam_judge" in manifest["judge_prompts"] and "tau_norm" in manifest["scoring"]
    assert summary["cost"]["method_input_tokens_per_probe"] > 0
    assert "| **overall** |" in (tmp_path / "full" / "report.md").read_text()


def test_a_rerun_resumes_and_reproduces_the_summary(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first, _ = _run(data, out, "direct", abilities=("information_extraction",))
    lines = (out / "results.jsonl").read_text()
    second, _ = _run(data, out, "direct", abilities=("information_extraction",))
    assert (out / "results.jsonl").read_text() == lines and second == first


def test_baselines_answer_from_the_same_store(data: Path, tmp_path: Path) -> None:
    rag, records = _run(data, tmp_path / "rag", "rag", rag_turns=3)
    assert all(len(r["visible_turn_ids"]) == 3 for r in records)
    assert all(r["llm"]["answer"]["calls"] == 1 for r in records)
    assert rag["score"]["overall"] is not None
    full, records = _run(data, tmp_path / "ctx", "full-context")
    assert full["coverage"]["overall"]["visible_final"] == 1.0
    with pytest.raises(InputError, match=r"exceed the window of 100 tokens"):
        _run(data, tmp_path / "small", "full-context", window_tokens=100)


def test_retrieval_mode_needs_no_llm_and_reports_coverage(data: Path, tmp_path: Path) -> None:
    summary, records = _run(data, tmp_path / "ret", "retrieval")
    assert summary["score"] is None and all(r["score"] is None for r in records)
    assert summary["coverage"]["overall"]["visible_initial"] is not None


def test_compare_two_beam_runs_by_chat(data: Path, tmp_path: Path) -> None:
    _run(data, tmp_path / "a", "direct")
    _run(data, tmp_path / "b", "rag")
    result = compare_runs(tmp_path / "a", tmp_path / "b", n_resamples=200)
    assert result.questions == 14 and result.cluster is not None
    assert (result.mode_a, result.mode_b) == ("direct", "rag")


def test_a_locomo_file_is_refused_with_the_field_named(tmp_path: Path) -> None:
    sample = Path(__file__).parents[1] / "src" / "qemem" / "data" / "sample.json"
    with pytest.raises(InputError, match=r"not a BEAM probe .*qemem data beam.*field ability"):
        beam_probes(load_locomo(sample), str(sample))


def test_cli_runs_beam_with_the_fake_llm(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    args = ["eval", "beam", "--data", str(data), "--out", str(out), "--llm", "fake"]
    args += ["--embedder", "hash", "--mode", "direct", "--conversations", "beam-100K-2"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["probes"] == 4 and summary["failures"] == []
    table = runner.invoke(app, args)
    assert table.exit_code == 0 and "BEAM, mode direct" in table.output


def test_eval_report_rebuilds_a_beam_run_byte_for_byte(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(data, out, "direct", conversations=("beam-100K-2",))
    before = {n: (out / n).read_bytes() for n in ("summary.json", "report.md")}
    (out / "report.md").unlink()
    result = runner.invoke(app, ["eval", "report", str(out)])
    assert result.exit_code == 0, result.output
    assert {n: (out / n).read_bytes() for n in before} == before
    refused = runner.invoke(app, ["eval", "report", str(out), "--errata", str(data)])
    assert isinstance(refused.exception, InputError) and "LoCoMo runs" in str(refused.exception)


def test_the_answers_background_is_a_setting_of_the_run(data: Path, tmp_path: Path) -> None:
    picked = {"conversations": ("beam-100K-1",), "limit": 3}
    _, whole = _run(data, tmp_path / "whole", "full", background_tokens=None, **picked)
    _, bare = _run(data, tmp_path / "bare", "full", background_tokens=0, **picked)
    manifest = json.loads((tmp_path / "bare" / "manifest.json").read_text())
    assert manifest["config"]["background_tokens"] == 0
    tokens = [[r["llm"]["answer"]["input_tokens"] for r in run] for run in (bare, whole)]
    assert all(b <= w for b, w in zip(*tokens, strict=True)) and sum(tokens[0]) < sum(tokens[1])
