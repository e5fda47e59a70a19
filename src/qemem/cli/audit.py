"""``qemem eval audit …``: the claim and answer audits of a run folder (LLM-judged)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qemem.cli.common import JsonOpt, console, input_path, input_paths, print_json
from qemem.cli.flags import FlagGroup
from qemem.errors import LLMError
from qemem.llm import LLMClient
from qemem.llm.spec import open_llm

audit_app = typer.Typer(
    help="LLM-judged audits of a run folder.", no_args_is_help=True, cls=FlagGroup
)

JudgeOpt = Annotated[
    str,
    typer.Option(
        "--judge", envvar="QEMEM_JUDGE", help="Judge LLM spec (a real model for real figures)."
    ),
]
SampleOpt = Annotated[int, typer.Option("--sample", min=1, help="Sample size.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Sampling and bootstrap seed.")]


def _judge(spec: str, out: Path) -> LLMClient:
    """The judge client, recording into (and replaying from) the run's LLM cache."""
    client = open_llm(spec, cache_path=out / "llm-cache.db")
    if client is None:
        raise LLMError("the audit needs a judge: pass --judge (e.g. anthropic:claude-sonnet-4-5)")
    return client


def _refresh(out: Path) -> None:
    """Rewrite the run's report.md and page with the audit sections."""
    from qemem.eval.report import rebuild_report, write_report_html

    if (out / "manifest.json").exists():
        rebuild_report(out)
    else:
        write_report_html(out)


@audit_app.command("claims")
def claims(
    run: Annotated[
        Path, typer.Argument(help="Run folder of `qemem eval locomo`.", callback=input_path)
    ],
    judge: JudgeOpt,
    sample: SampleOpt = 60,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Judge a stratified sample of the run's cards against their cited sources."""
    from qemem.eval.audit import audit_claims

    client = _judge(judge, run)
    try:
        record = audit_claims(run, client, sample=sample, seed=seed)
    finally:
        client.close()
    _refresh(run)
    if as_json:
        print_json({k: v for k, v in record.items() if k != "cards"})
        return
    overall = record["overall"]["supported_or_partial"]
    console.print(
        f"{record['sampled']} of {record['population']} cards judged; fully or partially "
        f"supported: {overall['share']} (95% CI {overall['ci95']}); see {run / 'audit-claims.json'}"
    )


@audit_app.command("answers")
def answers(
    runs: Annotated[
        list[Path],
        typer.Argument(help="Run folders over the same questions.", callback=input_paths),
    ],
    judge: JudgeOpt,
    sample: SampleOpt = 50,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Split a stratified sample of answers into claims and check each against the conversation."""
    from qemem.eval.audit import audit_answers

    client = _judge(judge, runs[0])
    try:
        record = audit_answers(runs, client, sample=sample, seed=seed)
    finally:
        client.close()
    for run in runs:
        _refresh(run)
    if as_json:
        print_json(
            {
                "runs": [{"run": r["run"], "summary": r["summary"]} for r in record["runs"]],
                "differences": record["differences"],
            }
        )
        return
    for entry in record["runs"]:
        grounded = entry["summary"]["fully_grounded"]
        console.print(
            f"{entry['run']}: fully grounded {grounded['share']} (95% CI {grounded['ci95']})"
        )
