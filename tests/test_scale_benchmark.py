"""benchmarks/scale.py end to end at a tiny size: one JSON line with a row per size, exact
recall on SQLite, and the slope and targets per backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).parent.parent / "benchmarks" / "scale.py"


def test_scale_prints_rows_and_a_summary() -> None:
    args = [sys.executable, str(BENCHMARK), "--sizes", "40,60", "--conversations", "2"]
    args += ["--queries", "3", "--backends", "sqlite", "--embedder", "hash", "--json"]
    run = subprocess.run(args, capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    rows = result["results"]
    assert [(r["backend"], r["messages"]) for r in rows] == [("sqlite", 40), ("sqlite", 60)]
    for row in rows:
        assert row["texts_embedded"] >= row["messages"] and row["tokens"] > 300 * row["messages"]
        assert row["recall_at_k"] == 1.0 and row["min_hits"] == 10
        assert 0 < row["search_p50_ms"] <= row["search_p95_ms"]
        assert row["context_p95_ms"] > 0 and row["store_mb"] > 0 and row["peak_mb"] > 0
    [summary] = result["summary"]
    assert summary["backend"] == "sqlite" and "search_p95_ms_per_1k_messages" in summary


def test_unknown_backend_is_refused() -> None:
    args = [sys.executable, str(BENCHMARK), "--backends", "oracle"]
    run = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
    assert run.returncode == 2 and "unknown backends ['oracle']" in run.stderr
