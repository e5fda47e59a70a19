"""``qemem eval …``: evaluation commands (thin wrappers over qemem.eval)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.table import Table

from qemem.build.config import CalibrateRule
from qemem.cli.audit import audit_app
from qemem.cli.budgets import (
    BudgetEpisodesOpt,
    BudgetFactsOpt,
    BudgetTokensEpisodesOpt,
    BudgetTokensFactsOpt,
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
    LLMOpt,
    OptionalStoreOpt,
    PromptLayoutChoice,
    PromptLayoutOpt,
    background_tokens_of,
    console,
    input_path,
    not_blank,
    output_file,
    output_folder,
    phase_bars,
    print_json,
    progress_bar,
    write_output,
)
from qemem.cli.eval_show import (
    check_coverage_flags,
    show_against_baseline,
    show_categories,
    show_curves,
    show_errata,
    show_gaps,
    show_milestones,
    show_run,
)
from qemem.cli.flags import FlagGroup
from qemem.errors import InputError, LLMError
from qemem.eval.bench_reports import rebuild_bench_report
from qemem.eval.coverage import (
    TOKEN_BUDGETS,
    CoverageReport,
    PoolCoverageReport,
    evaluate_coverage,
    evaluate_pool_coverage,
    turns_only,
)
from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS
from qemem.eval.manifest import run_info
from qemem.eval.runs import run_benchmark
from qemem.memory import Memory
from qemem.memory.api import Progress
from qemem.retrieve.budgets import RetrievalConfig

if TYPE_CHECKING:
    from qemem.answer.ask import Mode
    from qemem.evidence.layout import Layout

eval_app = typer.Typer(help="Evaluate on LoCoMo-format data.", no_args_is_help=True, cls=FlagGroup)

DataOpt = Annotated[
    Path, typer.Option("--data", "-d", help="LoCoMo JSON file.", callback=input_path)
]
CategoriesOpt = Annotated[str, typer.Option("--categories", help="Comma-separated QA categories.")]


def parse_categories(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(c) for c in value.split(",") if c.strip())
    except ValueError:
        raise typer.BadParameter("use numbers such as 1,2,3,4", param_hint="--categories") from None


def parse_budgets(value: str) -> tuple[int, ...]:
    """The token budgets of ``--token-budgets`` (none when empty)."""
    try:
        budgets = tuple(int(b) for b in value.split(",") if b.strip())
    except ValueError:
        budgets = (0,)
    if any(b < 1 for b in budgets):
        raise typer.BadParameter(
            "use positive numbers such as 8000,16000", param_hint="--token-budgets"
        )
    return budgets


ConversationsOpt = Annotated[
    str, typer.Option("--conversations", help="Comma-separated conversation ids (all).")
]


def _pool_coverage(
    memory: Memory,
    data: Path,
    config: RetrievalConfig | None,
    baseline: str | None,
    planner: bool,
    categories: Sequence[int],
    conversations: Sequence[str],
    token_budgets: str,
    progress: Progress,
) -> PoolCoverageReport:
    """``eval coverage --pool``: the pool's coverage (planned with the memory's LLM when
    ``planner``), with the ``baseline`` the options name."""
    client = memory.llm if planner else None
    if planner and client is None:
        raise LLMError("--planner needs an LLM: set QEMEM_LLM or pass --llm")
    return evaluate_pool_coverage(
        memory,
        data,
        config=config,
        baseline=turns_only(config or RetrievalConfig()) if baseline == "turns" else None,
        baseline_plan=baseline != "no-plan",
        categories=categories,
        conversations=conversations,
        llm=client,
        token_budgets=parse_budgets(token_budgets) or TOKEN_BUDGETS,
        progress=progress,
    )


@eval_app.command()
def coverage(
    data: DataOpt,
    store: OptionalStoreOpt = None,
    embedder: EmbedderOpt = None,
    categories: CategoriesOpt = "1,2,3,4",
    conversations: ConversationsOpt = "",
    pool: Annotated[
        bool, typer.Option("--pool", help="Rank turns by the full evidence pool (all spaces).")
    ] = False,
    planner: Annotated[
        bool, typer.Option("--planner", help="Plan queries with the LLM (implies --pool).")
    ] = False,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="With --pool: 'turns' also measures the turns-only pool (no episodes or "
            "facts), 'no-plan' (with --planner) the same pool without planning (the question "
            "alone, rule flags), on the same questions; prints both and their difference.",
        ),
    ] = None,
    no_plan: Annotated[
        bool,
        typer.Option(
            "--no-plan",
            help="With --pool: the question alone as the query set with rule flags (the "
            "planning ablation; the default without --planner).",
        ),
    ] = False,
    budget_turns: BudgetTurnsOpt = None,
    budget_episodes: BudgetEpisodesOpt = None,
    budget_facts: BudgetFactsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_tokens_episodes: BudgetTokensEpisodesOpt = None,
    budget_tokens_facts: BudgetTokensFactsOpt = None,
    pool_tokens: PoolTokensOpt = None,
    token_budgets: Annotated[
        str,
        typer.Option(
            "--token-budgets",
            help="With --pool: the token budgets of the token curves (comma-separated; "
            "default 300 to 3600 in steps of 300).",
        ),
    ] = "",
    llm: LLMOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Share of questions whose annotated evidence turns all rank within B turns (B=10..120);
    with --pool, the evidence of a long turn is its passage that best matches the answer."""
    cats = parse_categories(categories)
    convs = tuple(c.strip() for c in conversations.split(",") if c.strip())
    check_coverage_flags(baseline, planner, no_plan)
    config = retrieval_config(
        budget_turns,
        budget_episodes,
        budget_facts,
        budget_tokens,
        budget_tokens_episodes,
        budget_tokens_facts,
        pool_tokens,
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = store or Path(tmp) / "coverage.db"
        memory = Memory.open(path, embedder=embedder, llm=llm)
        with memory, progress_bar("questions", as_json) as p:
            if pool or planner or baseline or no_plan:
                report: CoverageReport | PoolCoverageReport = _pool_coverage(
                    memory, data, config, baseline, planner, cats, convs, token_budgets, p
                )
                ranking = "full pool, " + ("LLM-planned queries" if planner else "question only")
            else:
                report = evaluate_coverage(
                    memory, data, categories=cats, conversations=convs, progress=p
                )
                ranking = "hybrid turns, question only (dense + BM25, RRF k=60)"
            result = {
                "run": run_info(
                    data,
                    embedder=memory.embedder.id,
                    categories=categories,
                    conversations=list(convs) or "all",
                    ranking=ranking,
                    planning=planner,
                    baseline=baseline,
                    llm=memory.llm.describe() if planner and memory.llm else None,
                ),
                **report.to_dict(),
            }
    if as_json:
        print_json(result)
        return
    if isinstance(report, PoolCoverageReport) and report.baseline is not None:
        show_against_baseline(report, data)
    else:
        show_curves(report, data)
    if isinstance(report, PoolCoverageReport):
        show_categories(report)
    show_milestones(report)
    if isinstance(report, PoolCoverageReport):
        console.print(f"complete evidence anywhere in the pool: {report.whole_pool:.3f}")
    apart = f" ({report.without_evidence} without evidence, not counted)"
    console.print(
        f"questions: {report.questions}{apart if report.without_evidence else ''}   "
        f"AUC: {report.auc:.4f}"
    )
    console.print_json(data=result["run"])


OutOpt = Annotated[
    Path,
    typer.Option("--out", "-o", help="Run folder (results, report).", callback=output_folder),
]
RunStoreOpt = Annotated[
    str | None,
    typer.Option("--store", "-s", help="Store (default OUT/memory.db).", callback=not_blank),
]
ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode", help="full, respond, no-refine, direct, matched, nemori-baseline or retrieval."
    ),
]
AnswererOpt = Annotated[
    str | None, typer.Option("--llm", envvar="QEMEM_LLM", help="Answerer LLM spec.")
]
JudgeOpt = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help="Judge LLM spec (default: the answerer's own model, which the report flags; "
        "the published protocol uses a separate judge).",
    ),
]
JudgeRunsOpt = Annotated[int, typer.Option("--judge-runs", help="Judge runs per answer.")]
JudgeTokensOpt = Annotated[
    int,
    typer.Option(
        "--judge-max-tokens", help="Output-token limit per judge call (reasoning included)."
    ),
]
BuildOpt = Annotated[
    bool,
    typer.Option(
        "--build/--no-build",
        help="Build episodes and facts first; --no-build answers from what the store holds "
        "(turns only when nothing was built) to measure the query-time stages alone.",
    ),
]


def calibrate_rule_of(value: str) -> CalibrateRule:
    """The --calibrate-rule value, checked."""
    if value not in ("complete", "method"):
        raise typer.BadParameter("use complete or method", param_hint="--calibrate-rule")
    return cast(CalibrateRule, value)


CalibrateOpt = Annotated[
    str,
    typer.Option(
        "--calibrate-rule",
        help="Fact extraction of the build: complete (every durable fact not yet known) or "
        "method (the published wording); recorded in the manifest.",
    ),
]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", help="Only the first N selected questions.")
]
ConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", help="Questions (and LLM calls) in flight.")
]
CacheOpt = Annotated[
    Path | None,
    typer.Option("--cache", envvar="QEMEM_LLM_CACHE", help="LLM cache (OUT/llm-cache.db)."),
]
CacheModeOpt = Annotated[
    str | None,
    typer.Option("--cache-mode", envvar="QEMEM_CACHE_MODE", help="readwrite or replay."),
]
PlotsOpt = Annotated[bool, typer.Option("--plots/--no-plots", help="Write PNG plots.")]
NoPlanOpt = Annotated[
    bool,
    typer.Option(
        "--no-plan",
        help="Planning ablation: the question alone as the query set, rule-derived "
        "aggregate/temporal flags, no planner call; recorded in the manifest.",
    ),
]
ErrataOpt = Annotated[
    Path | None,
    typer.Option(
        "--errata",
        help="JSON file of known answer-key errors (question key -> corrected answer or "
        "excluded, with a reason): accuracy on the original and corrected gold side by side.",
        callback=input_path,
    ),
]


@eval_app.command()
def locomo(
    data: DataOpt,
    out: OutOpt,
    store: RunStoreOpt = None,
    mode: ModeOpt = "full",
    llm: AnswererOpt = None,
    judge: JudgeOpt = None,
    judge_runs: JudgeRunsOpt = 1,
    judge_max_tokens: JudgeTokensOpt = DEFAULT_JUDGE_MAX_TOKENS,
    build: BuildOpt = True,
    calibrate_rule: CalibrateOpt = "complete",
    categories: CategoriesOpt = "1,2,3,4",
    conversations: ConversationsOpt = "",
    limit: LimitOpt = None,
    concurrency: ConcurrencyOpt = 4,
    embedder: EmbedderOpt = None,
    cache: CacheOpt = None,
    cache_mode: CacheModeOpt = None,
    plots: PlotsOpt = True,
    budget_turns: BudgetTurnsOpt = None,
    budget_episodes: BudgetEpisodesOpt = None,
    budget_facts: BudgetFactsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_tokens_episodes: BudgetTokensEpisodesOpt = None,
    budget_tokens_facts: BudgetTokensFactsOpt = None,
    pool_tokens: PoolTokensOpt = None,
    no_plan: NoPlanOpt = False,
    errata: ErrataOpt = None,
    prompt_layout: PromptLayoutOpt = PromptLayoutChoice.paper,
    background_tokens: BackgroundTokensOpt = BACKGROUND_TOKENS,
    as_json: JsonOpt = False,
) -> None:
    """Answer, judge and score LoCoMo questions; write results.jsonl, summary.json, report.md.

    Resumable: a rerun with the same --out skips the questions already answered."""
    from qemem.eval.locomo import LocomoRunConfig, run_locomo

    config = LocomoRunConfig(
        data=data,
        out=out,
        store=store,
        mode=cast("Mode", mode),
        llm=llm,
        judge=judge,
        judge_runs=judge_runs,
        judge_max_tokens=judge_max_tokens,
        build=build,
        calibrate_rule=calibrate_rule_of(calibrate_rule),
        categories=parse_categories(categories),
        conversations=tuple(c.strip() for c in conversations.split(",") if c.strip()),
        limit=limit,
        concurrency=concurrency,
        embedder=embedder,
        cache=cache,
        cache_mode=cache_mode,
        plots=plots,
        retrieval=retrieval_config(
            budget_turns,
            budget_episodes,
            budget_facts,
            budget_tokens,
            budget_tokens_episodes,
            budget_tokens_facts,
            pool_tokens,
        ),
        plan=not no_plan,
        errata=errata,
        prompt_layout=cast("Layout", str(prompt_layout)),
        background_tokens=background_tokens_of(background_tokens),
    )
    with phase_bars(as_json) as progress:
        result = run_locomo(config, progress)
    if as_json:
        print_json({"out": str(out), "failures": result.failures, **result.summary})
        return
    show_run(result, mode, out)


@eval_app.command("report")
def report_command(
    out: Annotated[
        Path,
        typer.Argument(
            help="Run folder of `qemem eval locomo`, `beam` or `longmemeval`.",
            callback=input_path,
        ),
    ],
    errata: ErrataOpt = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="With --errata: the judge LLM spec that grades answers against corrected "
            "gold (default: the run's judge; its cache is OUT/llm-cache.db or --cache).",
        ),
    ] = None,
    cache: CacheOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rebuild summary.json, report.md and the plots from results.jsonl and manifest.json
    (no LLM call; byte-identical to what the run wrote; BEAM and LongMemEval runs too). With
    --errata, first score the run on the corrected gold too (judging the corrected questions)
    and record the file's hash."""
    from qemem.eval.errata import apply_errata
    from qemem.eval.report import rebuild_report

    benchmark = run_benchmark(out)
    if errata is not None:
        if benchmark != "LoCoMo":
            raise InputError(f"--errata applies to LoCoMo runs; {out} is a {benchmark} run")
        apply_errata(out, errata, judge=judge, cache=cache)
    summary = rebuild_report(out) if benchmark == "LoCoMo" else rebuild_bench_report(out)
    if as_json:
        print_json(summary)
        return
    count = summary.get("questions", summary.get("probes"))
    console.print(f"rebuilt {out / 'summary.json'} and {out / 'report.md'} from {count} records")
    if summary.get("errata"):
        show_errata(summary["errata"])


@eval_app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="First run folder (A).", callback=input_path)],
    run_b: Annotated[Path, typer.Argument(help="Second run folder (B).", callback=input_path)],
    metric: Annotated[
        str, typer.Option("--metric", help="judge, f1, f1_locomo or visible.")
    ] = "judge",
    resamples: Annotated[int, typer.Option("--resamples", help="Bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write compare.json to this file.", callback=output_file),
    ] = None,
    per_question: Annotated[
        bool, typer.Option("--per-question", help="Also list A - B for every shared question.")
    ] = False,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="evidence_turns, sessions or span: the A-B gap on high- minus low-complexity "
            "questions, with a conversation-cluster bootstrap and leave-one-out values.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """A minus B over shared questions: paired and conversation-cluster bootstraps (95%).

    With a matched-mode run as B, this gives full - matched or direct - matched."""
    from qemem.eval.compare import compare_gaps, compare_runs

    if by is not None:
        gaps = compare_gaps(run_a, run_b, by=by, metric=metric, n_resamples=resamples, seed=seed)
        if out is not None:
            write_output(out, json.dumps(gaps.to_dict(), indent=2, sort_keys=True) + "\n")
        if as_json:
            print_json(gaps.to_dict())
        else:
            show_gaps(gaps)
        return
    result = compare_runs(run_a, run_b, metric=metric, n_resamples=resamples, seed=seed)
    data = result.to_dict()
    if out is not None:
        write_output(out, json.dumps(data, indent=2, sort_keys=True) + "\n")
    if as_json:
        print_json(data)
        return
    table = Table("analysis", "A - B", "95% interval", "p (sign)", title=f"{metric}: A - B")
    for label, boot in (("paired (questions)", result.paired), ("cluster", result.cluster)):
        if boot is None:
            table.add_row(label, "n/a", "n/a", "n/a")
        else:
            table.add_row(
                f"{label}, n={boot.n_units}",
                f"{boot.difference:+.4f}",
                f"[{boot.ci_low:+.4f}, {boot.ci_high:+.4f}]",
                f"{boot.p_value:.4f}",
            )
    for conv, diff in (result.leave_one_out or {}).items():
        table.add_row(f"without {conv}", f"{diff:+.4f}", "", "")
    console.print(table)
    if per_question:
        rows = Table(
            "conversation",
            "question",
            "A",
            "B",
            "A - B",
            title=f"{result.mode_a} - {result.mode_b}",
        )
        for row in result.per_question:
            rows.add_row(
                row["conversation"],
                str(row["index"]),
                f"{row['a']:.3f}",
                f"{row['b']:.3f}",
                f"{row['difference']:+.3f}",
            )
        console.print(rows)
    console.print(
        f"A ({result.mode_a}) {result.mean_a:.4f} vs B ({result.mode_b}) {result.mean_b:.4f} "
        f"over {result.questions} shared "
        f"questions (only A {result.only_a}, only B {result.only_b}). {result.note}"
    )


eval_app.add_typer(audit_app, name="audit")
