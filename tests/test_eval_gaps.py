"""Complexity gaps (``eval compare --by``): the pure gap statistics on hand-made data, checked
against a direct re-computation, and the comparison of two hand-made run folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import InputError
from qemem.eval.compare import compare_gaps, complexity_group
from qemem.eval.stats import (
    cluster_bootstrap_gap,
    gap_difference,
    leave_one_cluster_out_gap,
)

runner = CliRunner()

# diff = a - b = [1, 1, 0 | 0, 0, -1]; high diffs [1, 1, 0], low diffs [0, 0, -1]
A = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
B = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
HIGH = [True, True, False, False, True, False]
CLUSTERS = ["c1", "c1", "c1", "c2", "c2", "c2"]


def test_gap_difference_by_hand() -> None:
    assert gap_difference(A, B, HIGH) == pytest.approx(2 / 3 - (-1 / 3))


def test_leave_one_conversation_out_gaps_by_hand() -> None:
    loo = leave_one_cluster_out_gap(A, B, HIGH, CLUSTERS)
    # without c1: high [0], low [0, -1]; without c2: high [1, 1], low [0]
    assert loo == {"c1": pytest.approx(0.5), "c2": pytest.approx(1.0)}
    # a conversation holding every high question leaves no gap without it
    only = leave_one_cluster_out_gap(A, B, HIGH, ["h", "h", "l", "l", "h", "l"])
    assert only == {"h": None, "l": None}


def test_cluster_bootstrap_gap_matches_a_direct_recomputation() -> None:
    clusters = ["c1", "c1", "c2", "c3", "c3", "c2"]
    result = cluster_bootstrap_gap(A, B, HIGH, clusters, n_resamples=200, seed=7)
    diff = np.asarray(A) - np.asarray(B)
    names = sorted(set(clusters))
    members = [[i for i, c in enumerate(clusters) if c == name] for name in names]
    draws = np.random.default_rng(7).integers(0, len(names), size=(200, len(names)))
    expected = []
    for draw in draws:
        chosen = [i for k in draw for i in members[k]]
        hi = [diff[i] for i in chosen if HIGH[i]]
        lo = [diff[i] for i in chosen if not HIGH[i]]
        if hi and lo:
            expected.append(np.mean(hi) - np.mean(lo))
    assert result.n_resamples == len(expected) < 200  # some draws miss a group
    low, high = np.quantile(expected, [0.025, 0.975])
    assert (result.ci_low, result.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.difference == pytest.approx(1.0) and result.unit == "cluster"
    assert result.p_value == pytest.approx(np.mean(np.asarray(expected) <= 0))
    again = cluster_bootstrap_gap(A, B, HIGH, clusters, n_resamples=200, seed=7)
    assert again == result


@pytest.mark.parametrize(
    ("high", "clusters", "message"),
    [
        ([True] * 6, CLUSTERS, "both the high and the low group"),
        ([False] * 6, CLUSTERS, "both the high and the low group"),
        (HIGH[:5], CLUSTERS, "group flags"),
        (HIGH, ["c1"] * 6, "at least two conversations"),
    ],
)
def test_gap_statistics_refuse_what_they_cannot_compute(
    high: list[bool], clusters: list[str], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        cluster_bootstrap_gap(A, B, high, clusters, n_resamples=10)


# ---------------------------------------------------------------------------- run folders


def record(conv: str, index: int, score: float, turns: int, sessions: int, span: int) -> Any:
    return {
        "conversation": conv,
        "index": index,
        "mode": "full",
        "score": score,
        "f1": score,
        "f1_locomo": score,
        "evidence": [f"D{n + 1}:1" for n in range(turns)],
        "evidence_sessions": list(range(1, sessions + 1)),
        "evidence_span_days": span,
        "visibility": {"final": True},
    }


def write_run(path: Path, mode: str, rows: list[Any]) -> Path:
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({"mode": mode}))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_complexity_groups() -> None:
    one, two, far = (
        record("c", 0, 1, 1, 1, 0),
        record("c", 1, 1, 2, 2, 20),
        record("c", 2, 1, 3, 2, 90),
    )
    assert [complexity_group(r, "evidence_turns") for r in (one, two, far)] == [False, True, True]
    assert [complexity_group(r, "sessions") for r in (one, two, far)] == [False, True, True]
    assert [complexity_group(r, "span") for r in (one, two, far)] == [False, False, True]
    none = {**one, "evidence": [], "evidence_sessions": [], "evidence_span_days": None}
    assert complexity_group(none, "sessions") is None


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    # A and B agree on single-turn questions and A wins the multi-turn ones of c1 and c2
    a = [
        record("c1", 0, 1.0, 1, 1, 0),
        record("c1", 1, 1.0, 2, 2, 40),
        record("c2", 0, 0.0, 1, 1, 0),
        record("c2", 1, 1.0, 3, 3, 200),
        record("c3", 0, 1.0, 1, 1, 0),
        record("c3", 1, 0.0, 2, 1, 0),
    ]
    b = [
        {**r, "mode": "matched", "score": s}
        for r, s in zip(a, [1.0, 0, 0, 0, 1.0, 0.0], strict=True)
    ]
    return write_run(tmp_path / "a", "full", a), write_run(tmp_path / "b", "matched", b)


def test_compare_gaps_over_run_folders(folders: tuple[Path, Path]) -> None:
    result = compare_gaps(*folders, by="evidence_turns", n_resamples=500)
    assert result.groups["low"] == {"questions": 3, "mean_a": 2 / 3, "mean_b": 2 / 3, "gap": 0.0}
    assert result.groups["high"]["questions"] == 3
    assert result.groups["high"]["gap"] == pytest.approx(2 / 3)
    assert result.difference == pytest.approx(2 / 3)
    assert result.leave_one_out == {
        "c1": pytest.approx(0.5),  # high gaps [1, 0], low [0, 0]
        "c2": pytest.approx(0.5),
        "c3": pytest.approx(1.0),
    }
    assert result.cluster is not None and result.cluster.n_units == 3
    assert result.cluster.ci_low <= result.difference <= result.cluster.ci_high
    data = result.to_dict()
    assert data["by"] == "evidence_turns" and data["high_labels"] == ["2", ">=3"]
    span = compare_gaps(*folders, by="span", n_resamples=100)
    assert span.groups["high"]["questions"] == 2  # 40 and 200 days apart


def test_compare_gaps_errors(folders: tuple[Path, Path]) -> None:
    with pytest.raises(InputError, match="unknown grouping"):
        compare_gaps(*folders, by="length")


def test_cli_compare_by(folders: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "gaps.json"
    args = ["eval", "compare", *map(str, folders), "--by", "sessions", "--resamples", "200"]
    result = runner.invoke(app, [*args, "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "gap difference high - low" in result.output and "without c1" in result.output
    assert json.loads(out.read_text())["by"] == "sessions"
    bad = runner.invoke(app, [*args[:-4], "--by", "nope"])
    assert isinstance(bad.exception, InputError) and "unknown grouping" in str(bad.exception)
