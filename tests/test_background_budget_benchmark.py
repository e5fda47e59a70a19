"""benchmarks/background_budget.py on a run folder answered offline with the whole
background: its "all" row is the recorded visibility, and a larger budget never shows less."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qemem.eval.locomo import LocomoRunConfig, run_locomo

BENCHMARK = Path(__file__).parent.parent / "benchmarks" / "background_budget.py"


@pytest.mark.slow
def test_the_replay_matches_the_record_and_grows_with_the_budget(
    tmp_path: Path, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    out = tmp_path / "run"
    config = LocomoRunConfig(
        sample_path, out, llm="fake", judge="fake", limit=6, background_tokens=None, plots=False
    )
    run_locomo(config)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    scored = [r for r in records if r["evidence"]]
    recorded = sum(bool(r["visibility"]["final"]) for r in scored) / len(scored)
    args = [sys.executable, str(BENCHMARK), str(out), "--budgets", "0,100,400", "--json"]
    run = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    rows = result["by_budget"]
    assert result["questions"] == len(scored)
    assert rows["all"]["visible"] == round(recorded, 4) and rows["all"]["lost"] == 0
    shares = [rows[b]["visible"] for b in ("0", "100", "400", "all")]
    assert shares == sorted(shares)
    assert rows["0"]["background_tokens"] == 0 < rows["400"]["background_tokens"] <= 400
