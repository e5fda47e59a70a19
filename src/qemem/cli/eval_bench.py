"""``qemem eval beam`` and ``qemem eval longmemeval``: the two long-memory benchmarks answered,
judged and scored as each publishes (thin wrappers over qemem.eval.beam and
qemem.eval.longmemeval)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from qemem.cli.budgets import (
    BudgetEpisodesOpt,
    BudgetFactsOpt,
    BudgetTokensOpt,
    BudgetTurnsOpt,
    PoolTokensOpt,
    retrieval_config,
)
from qemem.cli.common import (
    BACKGROUND_TOKENS,
    BackgroundTokensOpt,
    EmbedderOpt,
    JsonOpt,
    background_tokens_of,
    console,
    err_console,
    phase_bars,
    print_json,
)
from qemem.cli.eval import (
    AnswererOpt,
    BuildOpt,
    CacheModeOpt,
    CacheOpt,
    CalibrateOpt,
    ConcurrencyOpt,
    ConversationsOpt,
    DataOpt,
    JudgeOpt,
    JudgeTokensOpt,
    LimitOpt,
    OutOpt,
    RunStoreOpt,
    calibrate_rule_of,
)
from qemem.eval.beam_baselines import DEFAULT_RAG_TURNS, DEFAULT_WINDOW_TOKENS
from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS

if TYPE_CHECKING:
    from qemem.eval.runs import RunResult


def _split(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help="qemem's respond (BEAM's default: the assistant's reply), full (LongMemEval's "
        "default: a short answer), no-refine, direct, matched or retrieval (no LLM: coverage "
        "only); "
        "or a baseline: rag (top turns by hybrid search, one answer call) or full-context (the "
        "whole conversation, where it fits --window-tokens).",
    ),
]
RagTurnsOpt = Annotated[int, typer.Option("--rag-turns", help="Turns the rag baseline shows.")]
WindowOpt = Annotated[
    int, typer.Option("--window-tokens", help="The model window full-context must fit (tokens).")
]


def beam(
    data: DataOpt,
    out: OutOpt,
    store: RunStoreOpt = None,
    mode: ModeOpt = "respond",
    llm: AnswererOpt = None,
    judge: JudgeOpt = None,
    judge_max_tokens: JudgeTokensOpt = DEFAULT_JUDGE_MAX_TOKENS,
    build: BuildOpt = True,
    calibrate_rule: CalibrateOpt = "complete",
    abilities: Annotated[
        str, typer.Option("--abilities", help="Comma-separated abilities (all).")
    ] = "",
    conversations: ConversationsOpt = "",
    limit: LimitOpt = None,
    concurrency: ConcurrencyOpt = 4,
    embedder: EmbedderOpt = None,
    cache: CacheOpt = None,
    cache_mode: CacheModeOpt = None,
    budget_turns: BudgetTurnsOpt = None,
    budget_episodes: BudgetEpisodesOpt = None,
    budget_facts: BudgetFactsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    pool_tokens: PoolTokensOpt = None,
    background_tokens: BackgroundTokensOpt = BACKGROUND_TOKENS,
    rag_turns: RagTurnsOpt = DEFAULT_RAG_TURNS,
    window_tokens: WindowOpt = DEFAULT_WINDOW_TOKENS,
    as_json: JsonOpt = False,
) -> None:
    """Answer, judge (BEAM's rubric method) and score the probes of a `qemem data beam` file;
    write results.jsonl, summary.json and report.md. Resumable like `eval locomo`."""
    from qemem.eval.beam import BeamRunConfig, run_beam

    config = BeamRunConfig(
        data=data,
        out=out,
        store=store,
        mode=mode,
        llm=llm,
        judge=judge,
        judge_max_tokens=judge_max_tokens,
        build=build,
        abilities=_split(abilities),
        conversations=_split(conversations),
        limit=limit,
        concurrency=concurrency,
        embedder=embedder,
        cache=cache,
        cache_mode=cache_mode,
        retrieval=retrieval_config(
            budget_turns, budget_episodes, budget_facts, budget_tokens, pool_tokens=pool_tokens
        ),
        background_tokens=background_tokens_of(background_tokens),
        rag_turns=rag_turns,
        window_tokens=window_tokens,
        calibrate_rule=calibrate_rule_of(calibrate_rule),
    )
    with phase_bars(as_json) as progress:
        result = run_beam(config, progress)
    if as_json:
        print_json({"out": str(out), "failures": result.failures, **result.summary})
        return
    show_beam_run(result, out)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}"


def show_beam_run(result: RunResult, out: Path) -> None:
    """Scores by ability, coverage and cost of a BEAM run, and its failures."""
    summary = result.summary
    coverage = summary["coverage"]
    table = Table(
        "ability",
        "score %",
        "95% CI",
        "evidence <= 8k tok %",
        "<= 16k tok %",
        "without ev.",
        title=f"BEAM, mode {summary['mode']}",
    )
    score = summary["score"] or {"by_ability": {}}
    rows = [("all", score, coverage["overall"])]
    rows += [(a, score["by_ability"].get(a, {}), c) for a, c in coverage["by_ability"].items()]
    for name, block, cover in rows:
        ci = block.get("ci95")
        tokens = cover.get("tokens", {})
        table.add_row(
            name,
            _pct(block.get("overall", block.get("score"))),
            "" if not ci else f"{_pct(ci[0])}-{_pct(ci[1])}",
            _pct(tokens.get("8000")),
            _pct(tokens.get("16000")),
            str(cover["without_evidence"]),
        )
    console.print(table)
    cost = summary["cost"]
    console.print(
        f"per probe: method input tokens {cost.get('method_input_tokens_per_probe')}, "
        f"cost {cost.get('method_cost_usd_per_probe')} USD; judge input tokens "
        f"{cost.get('judge_input_tokens_per_probe')}"
    )
    console.print(
        f"answered {result.answered}, resumed {result.skipped}, provider calls "
        f"{result.provider_calls}, cached {result.cached_calls}; report: {out / 'report.md'}"
    )
    for failure in result.failures:
        err_console.print(f"[yellow]failed (rerun to retry):[/] {failure}")


def longmemeval(
    data: DataOpt,
    out: OutOpt,
    store: RunStoreOpt = None,
    mode: ModeOpt = "full",
    llm: AnswererOpt = None,
    judge: JudgeOpt = None,
    judge_max_tokens: JudgeTokensOpt = DEFAULT_JUDGE_MAX_TOKENS,
    build: BuildOpt = True,
    calibrate_rule: CalibrateOpt = "complete",
    types: Annotated[
        str, typer.Option("--types", help="Comma-separated question types (all).")
    ] = "",
    limit: LimitOpt = None,
    concurrency: ConcurrencyOpt = 4,
    embedder: EmbedderOpt = None,
    cache: CacheOpt = None,
    cache_mode: CacheModeOpt = None,
    background_tokens: BackgroundTokensOpt = BACKGROUND_TOKENS,
    rag_turns: RagTurnsOpt = DEFAULT_RAG_TURNS,
    window_tokens: WindowOpt = DEFAULT_WINDOW_TOKENS,
    as_json: JsonOpt = False,
) -> None:
    """Answer and judge (per-type rules) the questions of a `qemem data longmemeval` file,
    each over its own history; write results.jsonl, summary.json and report.md."""
    from qemem.eval.longmemeval import LongMemEvalRunConfig, run_longmemeval

    config = LongMemEvalRunConfig(
        data=data,
        out=out,
        store=store,
        mode=mode,
        llm=llm,
        judge=judge,
        judge_max_tokens=judge_max_tokens,
        build=build,
        types=_split(types),
        limit=limit,
        concurrency=concurrency,
        embedder=embedder,
        cache=cache,
        cache_mode=cache_mode,
        background_tokens=background_tokens_of(background_tokens),
        rag_turns=rag_turns,
        window_tokens=window_tokens,
        calibrate_rule=calibrate_rule_of(calibrate_rule),
    )
    with phase_bars(as_json) as progress:
        result = run_longmemeval(config, progress)
    if as_json:
        print_json({"out": str(out), "failures": result.failures, **result.summary})
        return
    show_lme_run(result, out)


def show_lme_run(result: RunResult, out: Path) -> None:
    """Accuracy of a LongMemEval run: all, per type and abstention, and its failures."""
    summary = result.summary
    table = Table(
        "questions", "n", "accuracy %", "95% CI", title=f"LongMemEval, mode {summary['mode']}"
    )
    rows = [("all", summary["accuracy"]), *summary["by_type"].items()]
    for name, block in [*rows, ("abstention", summary["abstention"])]:
        ci = block.get("ci95")
        table.add_row(
            name,
            str(block["n"]),
            _pct(block["accuracy"]),
            "" if not ci else f"{_pct(ci[0])}-{_pct(ci[1])}",
        )
    console.print(table)
    console.print(
        f"task-averaged accuracy {_pct(summary['task_averaged_accuracy'])}%; answered "
        f"{result.answered}, resumed {result.skipped}; report: {out / 'report.md'}"
    )
    for failure in result.failures:
        err_console.print(f"[yellow]failed (rerun to retry):[/] {failure}")


def register(eval_app: typer.Typer) -> None:
    """Add ``eval beam`` and ``eval longmemeval`` to the ``eval`` commands."""
    eval_app.command("beam")(beam)
    eval_app.command("longmemeval")(longmemeval)
