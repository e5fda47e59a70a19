"""benchmarks/prompt_cost.py end to end on the bundled sample: one JSON line, the layouts at
equal final-context visibility, and the cached input made of its simulated parts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parent.parent / "benchmarks" / "prompt_cost.py"


@pytest.mark.slow
def test_prompt_cost_prints_costs_with_and_without_caching(
    tmp_path: Path, sample_path: Path
) -> None:
    args = [sys.executable, str(BENCHMARK), "--data", str(sample_path)]
    args += ["--store", str(tmp_path / "s.db"), "--embedder", "hash", "--limit", "4", "--json"]
    run = subprocess.run(args, capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["questions"] == 4 and result["memory"] == "turns only"
    assert result["final_visible"] == result["final_visible_paper"]
    # the sample's pools stay below Haiku 4.5's 4,096 tokens: both layouts are the published one
    assert result["usd_per_question_cached"] == result["usd_per_question"] > 0
    split = result["cached_input_split_anthropic"]
    assert split["cache_write"] == split["cache_read"] == 0
    total = split["uncached"] + split["cache_write"] + split["cache_read"]
    assert abs(total - result["input_tokens_per_question"]["cached"]) < 0.2
    assert result["cached_input_split_openai"]["cache_write"] == 0
