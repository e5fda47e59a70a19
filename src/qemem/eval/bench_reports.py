"""Rebuilding the report of a BEAM or LongMemEval run folder (``qemem eval report``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qemem.errors import InputError
from qemem.eval.beam_report import rebuild_beam_report
from qemem.eval.longmemeval import rebuild_lme_report
from qemem.eval.runs import run_benchmark


def rebuild_bench_report(out: Path) -> dict[str, Any]:
    """Rewrite the summary and report of a BEAM or LongMemEval run folder from its records."""
    benchmark = run_benchmark(out)
    if benchmark == "BEAM":
        return rebuild_beam_report(out)
    if benchmark == "LongMemEval":
        return rebuild_lme_report(out)
    raise InputError(f"{out} holds a {benchmark} run, not a BEAM or LongMemEval one")
