"""Comparing two runs: shared questions, bootstraps on fixed seeds, leave-one-out, one
conversation, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import InputError
from qemem.eval.compare import compare_runs
from qemem.eval.stats import cluster_bootstrap, paired_bootstrap

runner = CliRunner()


def record(conv: str, index: int, score: float | None, mode: str, visible: bool) -> dict[str, Any]:
    return {
        "conversation": conv,
        "index": index,
        "mode": mode,
        "score": score,
        "f1": score or 0.0,
        "f1_locomo": 0.0,
        "visibility": {"final": visible},
    }


def write_run(path: Path, mode: str, rows: list[tuple[str, int, float | None, bool]]) -> Path:
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({"mode": mode}))
    lines = [json.dumps(record(c, i, s, mode, v)) for c, i, s, v in rows]
    (path / "results.jsonl").write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = write_run(
        tmp_path / "a",
        "full",
        [
            ("c1", 0, 1.0, True),
            ("c1", 1, 1.0, True),
            ("c2", 0, 1.0, False),
            ("c2", 1, 0.0, True),
            ("c3", 0, 1.0, True),
            ("c3", 1, 0.5, True),
            ("c3", 9, 1.0, True),  # only in A
        ],
    )
    b = write_run(
        tmp_path / "b",
        "direct",
        [
            ("c1", 0, 1.0, False),
            ("c1", 1, 0.0, True),
            ("c2", 0, 0.0, False),
            ("c2", 1, 0.0, False),
            ("c3", 0, 1.0, True),
            ("c3", 1, 1.0, True),
        ],
    )
    return a, b


def test_compare_shared_questions_on_fixed_seed(runs: tuple[Path, Path]) -> None:
    a, b = runs
    result = compare_runs(a, b, n_resamples=2000, seed=7)
    # shared (sorted): c1#0 0, c1#1 +1, c2#0 +1, c2#1 0, c3#0 0, c3#1 -0.5 -> mean 1.5 / 6
    assert result.questions == 6 and result.only_a == 1 and result.only_b == 0
    assert result.mean_a == pytest.approx(4.5 / 6) and result.mean_b == pytest.approx(3 / 6)
    assert result.paired.difference == pytest.approx(0.25)
    left, right = [1.0, 1.0, 1.0, 0.0, 1.0, 0.5], [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    expected = paired_bootstrap(left, right, n_resamples=2000, seed=7)
    assert result.paired == expected
    clusters = ["c1", "c1", "c2", "c2", "c3", "c3"]
    assert result.cluster == cluster_bootstrap(left, right, clusters, n_resamples=2000, seed=7)
    assert result.cluster is not None and result.cluster.n_units == 3
    # without c1: (1 + 0 + 0 - 0.5) / 4; without c2: (0 + 1 + 0 - 0.5) / 4; without c3: 2 / 4
    assert result.leave_one_out == pytest.approx({"c1": 0.125, "c2": 0.125, "c3": 0.5})
    visible = compare_runs(a, b, metric="visible", n_resamples=500, seed=1)
    assert visible.paired.difference == pytest.approx(2 / 6)  # c1#0 and c2#1 gained


def test_one_conversation_reports_cluster_analyses_as_na(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", "full", [("c1", 0, 1.0, True), ("c1", 1, 0.0, True)])
    b = write_run(tmp_path / "b", "full", [("c1", 0, 0.0, True), ("c1", 1, 0.0, True)])
    result = compare_runs(a, b, n_resamples=200)
    assert result.cluster is None and result.leave_one_out is None and "n/a" in result.note
    assert result.paired.difference == pytest.approx(0.5)


def test_runs_without_shared_judged_questions(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", "retrieval", [("c1", 0, None, True)])
    b = write_run(tmp_path / "b", "retrieval", [("c1", 0, None, False)])
    with pytest.raises(InputError, match="--metric visible"):
        compare_runs(a, b)
    assert compare_runs(a, b, metric="visible", n_resamples=100).paired.difference == 1.0
    with pytest.raises(InputError, match="unknown metric"):
        compare_runs(a, b, metric="bleu")
    with pytest.raises(InputError, match=r"no results\.jsonl"):
        compare_runs(tmp_path, b)


def test_cli_prints_table_and_writes_only_where_asked(
    runs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    a, b = runs
    result = runner.invoke(app, ["eval", "compare", str(a), str(b), "--resamples", "500"])
    assert result.exit_code == 0, result.output
    assert "paired (questions), n=6" in result.output and "without c3" in result.output
    assert "+0.2500" in result.output
    assert not (a / "compare.json").exists() and not (b / "compare.json").exists()
    target = tmp_path / "cmp.json"
    args = ["eval", "compare", str(a), str(b), "--resamples", "500", "--out", str(target)]
    assert runner.invoke(app, args).exit_code == 0
    data = json.loads(target.read_text())
    assert data["questions"] == 6 and data["paired"]["difference"] == 0.25
    assert data["cluster"]["unit"] == "cluster" and set(data["leave_one_out"]) == {"c1", "c2", "c3"}


def test_per_question_differences(runs: tuple[Path, Path]) -> None:
    a, b = runs
    result = compare_runs(a, b, n_resamples=200)
    rows = {(r["conversation"], r["index"]): r["difference"] for r in result.per_question}
    assert rows == {
        ("c1", 0): 0.0,
        ("c1", 1): 1.0,
        ("c2", 0): 1.0,
        ("c2", 1): 0.0,
        ("c3", 0): 0.0,
        ("c3", 1): -0.5,
    }
    out = runner.invoke(app, ["eval", "compare", str(a), str(b), "--per-question"])
    assert out.exit_code == 0, out.output
    assert "-0.500" in out.output and f"{result.mode_a} - {result.mode_b}" in out.output
