"""A small LoCoMo run folder made with the offline LLM, for the audit tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.llm import LLMRequest


def make_run(sample_path: Path, out: Path) -> Path:
    """A run of the offline answerer and judge over the sample's first eight questions."""
    run_locomo(
        LocomoRunConfig(sample_path, out, llm="fake", judge="fake", limit=8, embedder="hash")
    )
    return out


def copy_run(run: Path, out: Path) -> Path:
    """A copy of ``run`` without its audit records or LLM cache."""
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("audit-*.json", "llm-cache.db*"))
    return out


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def leaked(request: LLMRequest, secrets: list[str]) -> list[str]:
    """The secrets found in the request's prompt or its structured inputs."""
    shown = request.prompt_text + json.dumps(dict(request.inputs), ensure_ascii=False)
    return [s for s in secrets if s in shown]


def mark_golds(run: Path) -> list[str]:
    """Give every record of ``run`` a unique gold answer and return them (so a leak shows)."""
    rows = records(run)
    for n, row in enumerate(rows):
        row["gold"] = f"gold-sentinel-{n}"
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [str(r["gold"]) for r in rows]
