"""``qemem eval audit …``: the claim and answer audits of a run folder and the audit of a
conversation's memory (LLM-judged)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qemem.cli.common import (
    ConversationOpt,
    JsonOpt,
    NamespaceOpt,
    OptionalStoreOpt,
    console,
    existing_store,
    input_path,
    input_paths,
    markup_safe,
    output_folder,
    print_json,
)
from qemem.cli.flags import FlagGroup
from qemem.errors import InputError, LLMError
from qemem.llm import LLMClient
from qemem.llm.spec import open_llm

audit_app = typer.Typer(
    help="LLM-judged audits of a run folder or of a memory.", no_args_is_help=True, cls=FlagGroup
)

JudgeOpt = Annotated[
    str,
    typer.Option(
        "--judge", envvar="QEMEM_JUDGE", help="Judge LLM spec (a real model for real figures)."
    ),
]
SampleOpt = Annotated[int, typer.Option("--sample", min=1, help="Sample size.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Sampling and bootstrap seed.")]


def _judge(spec: str, out: Path | None) -> LLMClient:
    """The judge client, recording into (and replaying from) the run's LLM cache."""
    client = open_llm(spec, cache_path=None if out is None else out / "llm-cache.db")
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


def _interval(ci: tuple[float, float] | None) -> str:
    return "n/a" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}"


def _memory_store(store: str | None, out: Path | None) -> str:
    """The store to audit: ``--store``, else the run folder's own memory.db."""
    if store is None and out is not None and (out / "memory.db").exists():
        store = str(out / "memory.db")
    if store is None:
        raise InputError("say which memory to audit: --store URL (or --out RUN holding memory.db)")
    return existing_store(store)


@audit_app.command("memory")
def memory(
    conversation: ConversationOpt,
    judge: JudgeOpt,
    store: OptionalStoreOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Run folder to keep the audit in (audit-memory.json, shown on its page).",
            callback=output_folder,
        ),
    ] = None,
    namespace: NamespaceOpt = "default",
    sample: SampleOpt = 60,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Judge a stratified sample of a conversation's facts and episodes against the turns their
    provenance cites; count pronoun and dated facts, near-duplicates and superseded facts."""
    from qemem.answer.wire import audit_to_json
    from qemem.eval.audit.memory import MEMORY_FILE, write_memory_audit
    from qemem.memory import Memory

    url = _memory_store(store, out)
    client = _judge(judge, out)
    try:
        with Memory.open(url, namespace=namespace, read_only=True) as mem:
            result = mem.audit_memory(conversation, sample=sample, seed=seed, judge=client)
    finally:
        client.close()
    data = audit_to_json(result)
    if out is not None:
        write_memory_audit(out, data)
        if (out / "results.jsonl").exists():
            _refresh(out)
    if as_json:
        print_json({k: v for k, v in data.items() if k not in ("items", "trace")})
        return
    facts, census = result.facts["supported_or_partial"], result.census
    if not result.population:
        console.print(
            f"nothing to audit: conversation {markup_safe(conversation)} has no episodes or "
            "facts yet (build its memory first: qemem build)"
        )
        return
    console.print(
        f"{len(result.items)} of {census.facts + census.episodes} records judged; facts "
        f"supported or partially: {facts.share} (95% CI {_interval(facts.ci95)}); facts with "
        f"a pronoun {len(census.pronoun)} ({len(census.unresolved)} standing for no one "
        f"named before it), with a date {len(census.dated)}, near-duplicate pairs "
        f"{len(census.duplicates)}, superseded {len(census.superseded)}"
        + (f"; see {markup_safe(out / MEMORY_FILE)}" if out is not None else "")
    )
