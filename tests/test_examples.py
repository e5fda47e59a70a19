"""Every script of examples/ runs to the end with the offline LLM (QEMEM_LLM unset), as a
newcomer would run it: a fresh process, in a folder of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def _marks(path: Path) -> list[pytest.MarkDecorator]:
    server = "qemem[server]" in path.read_text(encoding="utf-8")  # starts qemem serve or mcp
    return [pytest.mark.slow, *([pytest.mark.server] if server else [])]


@pytest.mark.parametrize("example", [pytest.param(p, marks=_marks(p), id=p.name) for p in EXAMPLES])
def test_the_example_runs_with_the_offline_llm(example: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QEMEM_")}
    done = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "an example prints what it did"
