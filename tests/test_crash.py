"""Crash safety, quick version: five SIGKILLed ingest + build runs of the bundled sample."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parent.parent / "benchmarks" / "crash.py"


@pytest.mark.slow
def test_killed_runs_leave_a_sound_store_and_resume_to_the_reference(
    tmp_path: Path, sample_path: Path
) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARK),
            "--store",
            str(tmp_path / "crash.db"),
            "--data",
            str(sample_path),
            "--rounds",
            "5",
            "--delay",
            "0.005",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    tally = json.loads(run.stdout.strip().splitlines()[-1])
    assert tally["rounds"] == 5 and tally["killed_mid_work"] >= 1
    assert tally["integrity_failures"] == tally["partial_records"] == 0
    assert tally["differences_after_rerun"] == 0
