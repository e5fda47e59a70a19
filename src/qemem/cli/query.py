"""Memory construction and query-time commands: build, import-nemori, ask, context, check,
time."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from qemem.answer import Answer, AskConfig
from qemem.answer.ask import Mode
from qemem.answer.check import CheckResult
from qemem.answer.wire import answer_to_json, check_to_json, context_to_json
from qemem.build import BuildConfig, BuildReport
from qemem.build.config import CalibrateRule
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
    ConversationOpt,
    EmbedderOpt,
    JsonOpt,
    LLMOpt,
    ManyConversationsOpt,
    NamespaceOpt,
    PromptLayoutChoice,
    PromptLayoutOpt,
    StoreOpt,
    background_tokens_of,
    console,
    err_console,
    existing_store,
    markup_safe,
    output_file,
    plain,
    print_json,
    progress_bar,
    write_output,
)
from qemem.evidence.layout import Layout
from qemem.evidence.times import resolve_times
from qemem.lexicon import parse_anchor
from qemem.memory import Memory
from qemem.memory.api import CONTEXT_BUDGET, MAX_CONTEXT_BUDGET, ContextMode
from qemem.view import answer_html

SHOWN = 8


class AskMode(StrEnum):
    full = "full"
    respond = "respond"
    no_refine = "no-refine"
    direct = "direct"
    retrieval = "retrieval"
    matched = "matched"
    nemori_baseline = "nemori-baseline"


class CalibrateChoice(StrEnum):
    complete = "complete"
    method = "method"


def build(
    store: StoreOpt,
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Only this conversation.")
    ] = None,
    llm: LLMOpt = None,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Also replace memory another LLM built.")
    ] = False,
    calibrate_rule: Annotated[
        CalibrateChoice,
        typer.Option(
            "--calibrate-rule",
            help="complete: every durable fact not yet known; method: the published wording.",
        ),
    ] = CalibrateChoice.complete,
) -> None:
    """Build the episodes and semantic facts the store lacks, and rebuild degraded ones (needs
    an LLM; resumable). A conversation another process is building is left to it (and said
    so) when several are built. Exits with status 3 when any call degraded."""
    memory = Memory.open(existing_store(store), embedder=embedder, llm=llm, namespace=namespace)
    with memory, progress_bar("building", as_json) as progress:
        config = BuildConfig(calibrate_rule=cast(CalibrateRule, str(calibrate_rule)))
        reports = memory.build(conversation, progress=progress, rebuild=rebuild, config=config)
    if as_json:
        print_json([r.to_dict() for r in reports])
        _exit_if_degraded(reports)
        return
    table = Table("conversation", "step", "calls", "tokens in", "tokens out", "cost USD")
    for r in reports:
        if r.busy is not None:
            console.print(f"{markup_safe(r.conversation)}: not built here: {markup_safe(r.busy)}")
            continue
        for step, tally in r.llm.items():
            cost = tally.cost_spent_usd
            table.add_row(
                plain(r.conversation),
                step,
                str(tally.calls),
                str(tally.input_tokens),
                str(tally.output_tokens),
                "-" if cost is None else f"{cost:.4f}",
            )
        console.print(
            f"{markup_safe(r.conversation)}: {r.episodes} episodes, {r.facts_added} facts "
            f"(+{r.facts_merged} merged, {r.facts_superseded} superseding a known fact, "
            f"{r.facts_corrected} superseded by a correction; "
            f"pronoun rule: {r.facts_rewritten} named, {r.facts_refused} refused), "
            f"{r.runs_merged} greeting/closing runs merged, "
            f"{len(r.fallbacks)} segmentation fallbacks, "
            f"{len(r.degraded)} degraded calls, {r.seconds:.1f} s"
        )
        if r.messages:
            rate = r.per_thousand()
            usd = "" if rate.cost_usd is None else f", ${rate.cost_usd:.2f}"
            console.print(
                f"  build cost per 1,000 messages ({r.messages} built): {rate.calls:,.0f} "
                f"calls, {rate.input_tokens:,.0f} tokens in, "
                f"{rate.output_tokens:,.0f} tokens out{usd}"
            )
    console.print(table)
    show_faults(memory)
    _exit_if_degraded(reports)


def _exit_if_degraded(reports: list[BuildReport]) -> None:
    """Summarise degraded calls on stderr and exit with status 3 when there are any."""
    bad = [r for r in reports if r.degraded or r.fallbacks]
    if not bad:
        return
    for r in bad:
        err_console.print(
            f"[yellow]{escape(r.conversation)}: {len(r.degraded)} degraded calls, "
            f"{len(r.fallbacks)} segmentation fallbacks[/]"
        )
        for line in [*r.degraded, *(f"session {f.session}: {f.reason}" for f in r.fallbacks)][:5]:
            err_console.print(f"  {escape(line)}")
    err_console.print(
        "degraded memory was stored and is rebuilt by the next build: fix the LLM "
        "(see docs/llm.md), then run qemem build again"
    )
    raise typer.Exit(3)


def show_faults(memory: Memory) -> None:
    """One line on the provider faults the LLM client retried or repaired, if any."""
    llm = memory.llm
    faults = llm.faults if llm is not None else {}
    if faults:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(faults.items()))
        console.print(f"LLM faults recovered: {sum(faults.values())} ({kinds})")
    injected = getattr(llm.provider, "injected", None) if llm is not None else None
    if injected is not None:
        console.print(f"faults injected (faulty:): {sum(injected.values())} {dict(injected)}")


def import_nemori(
    directory: Annotated[Path, typer.Argument(help="Folder with NEMORI's JSONL export.")],
    store: StoreOpt,
    conversation: ConversationOpt,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
) -> None:
    """Import NEMORI episodes and semantic memories onto an ingested conversation."""
    with Memory.open(existing_store(store), embedder=embedder, namespace=namespace) as memory:
        report = memory.import_nemori(directory, conversation)
    console.print(
        f"imported {report.episodes} episodes and {report.facts} facts; "
        f"{report.matched}/{report.messages} messages matched to turns"
    )
    if report.unmatched:
        console.print(f"[yellow]{len(report.unmatched)} unmatched messages (not imported)[/]")


def show_answer(answer: Answer) -> None:
    console.print(
        Panel(
            plain(answer.text or "(no answer: retrieval mode)", None),
            title=markup_safe(plain(answer.question, 200)),
        )
    )
    if answer.cards:
        table = Table("#", "claim", "sources", "quote", "time", "verified")
        for n, card in enumerate(answer.cards, start=1):
            table.add_row(
                str(n),
                plain(card.claim),
                plain(", ".join(card.sources)),
                plain(card.quote),
                plain(card.shown_time + (" (planned)" if card.planned else "")),
                "yes" if card.verified else "[red]no[/]",
            )
        console.print(table)
    if answer.citations:
        console.print(plain("cited turns: " + ", ".join(answer.citations), None))
    if answer.mode == "retrieval":
        # across conversations the pool times are keyed by the labels the prompts use
        across = answer.across
        labels = {ref: name for name, ref in across.labels.items()} if across else {}
        ranked = sorted(
            (item for item in answer.pool.turns if any(r.kind == "ranked" for r in item.reasons)),
            key=lambda item: -item.score,
        )
        table = Table(
            "id",
            "speaker",
            "text",
            "times",
            title=f"best {min(len(ranked), SHOWN)} of {len(answer.pool.turns)} pool "
            "turns (--json for the whole pool)",
        )
        for item in ranked[:SHOWN]:
            times = "; ".join(
                f"{t.expression} -> {t.phrase}"
                for t in answer.pool_times.get(labels.get(item.ref, item.id), [])
            )
            table.add_row(
                plain(labels.get(item.ref, item.id)),
                plain(getattr(item.record, "speaker", "")),
                plain(getattr(item.record, "text", "")),
                plain(times),
            )
        console.print(table)
    totals = answer.trace.totals.get("total", {}) if answer.trace.totals else {}
    stopped = answer.evidence.termination
    console.print(
        f"[dim]mode {answer.mode}; "
        + (f"termination {stopped}; " if stopped else "")
        + f"{totals.get('calls', 0)} LLM calls; {answer.trace.seconds:.2f} s[/]"
    )


def ask(
    question: Annotated[str, typer.Argument(help="A question about the conversation.")],
    store: StoreOpt,
    conversations: ManyConversationsOpt,
    mode: Annotated[AskMode, typer.Option("--mode", help="Operating point.")] = AskMode.full,
    budget_turns: BudgetTurnsOpt = None,
    budget_episodes: BudgetEpisodesOpt = None,
    budget_facts: BudgetFactsOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    budget_tokens_episodes: BudgetTokensEpisodesOpt = None,
    budget_tokens_facts: BudgetTokensFactsOpt = None,
    pool_tokens: PoolTokensOpt = None,
    no_plan: Annotated[
        bool,
        typer.Option(
            "--no-plan",
            help="Skip the planner: the question alone as the query set, rule-derived "
            "aggregate/temporal flags (the planning ablation).",
        ),
    ] = False,
    prompt_layout: PromptLayoutOpt = PromptLayoutChoice.paper,
    background_tokens: BackgroundTokensOpt = BACKGROUND_TOKENS,
    llm: LLMOpt = None,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the answer and its evidence as an HTML page.",
            callback=output_file,
        ),
    ] = None,
) -> None:
    """Answer a question with verified evidence cards and cited turns; with -c repeated,
    over several conversations ranked together (ids written conversation/id)."""
    memory = Memory.open(store, embedder=embedder, llm=llm, namespace=namespace, read_only=True)
    config = AskConfig(
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
        prompt_layout=cast(Layout, str(prompt_layout)),
        background_tokens=background_tokens_of(background_tokens),
    )
    with memory:
        chosen = cast(Mode, str(mode))
        if len(set(conversations)) > 1:
            answer = memory.ask_many(conversations, question, mode=chosen, config=config)
        else:
            answer = memory.ask(conversations[0], question, mode=chosen, config=config)
        offline = memory.llm is not None and memory.llm.provider.name == "fake"
    if html is not None:
        write_output(html, answer_html(answer_to_json(answer)))
        err_console.print(f"wrote {markup_safe(html)}")
    if as_json:
        print_json(answer_to_json(answer))
        return
    show_answer(answer)
    if offline and answer.mode != "retrieval":
        err_console.print(
            "[yellow]note:[/] the offline LLM (fake) wrote this answer: a placeholder that "
            "exercises the pipeline, not a real answer (set QEMEM_LLM to a model; docs/llm.md)"
        )


class ContextPlanner(StrEnum):
    rule = "rule"
    llm = "llm"


def context(
    question: Annotated[str, typer.Argument(help="A question about the conversation.")],
    store: StoreOpt,
    conversations: ManyConversationsOpt,
    budget: Annotated[
        int,
        typer.Option("--budget", min=1, max=MAX_CONTEXT_BUDGET, help="Tokens of the block."),
    ] = CONTEXT_BUDGET,
    mode: Annotated[
        ContextPlanner,
        typer.Option("--mode", help="rule: no LLM call; llm: the LLM planner (needs --llm)."),
    ] = ContextPlanner.rule,
    llm: LLMOpt = None,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Print a ready-to-paste evidence block for your own LLM: cited ids, dates, resolved
    times, cut to --budget tokens (no LLM call unless --mode llm); with -c repeated, one
    block over several conversations ranked together."""
    memory = Memory.open(store, embedder=embedder, llm=llm, namespace=namespace, read_only=True)
    planner = cast(ContextMode, str(mode))
    with memory:
        if len(set(conversations)) > 1:
            block = memory.context_many(conversations, question, budget_tokens=budget, mode=planner)
        else:
            block = memory.context(conversations[0], question, budget_tokens=budget, mode=planner)
    if as_json:
        print_json(context_to_json(block))
        return
    typer.echo(block.text)
    err_console.print(
        f"[dim]{block.tokens} of {block.budget_tokens} tokens; {len(block.items)} records "
        f"shown, {block.left_out} left out[/]"
    )


def show_check(result: CheckResult) -> None:
    """Each claim with its label and reason, then its cited turns with their quotes."""
    table = Table("#", "claim", "label", "reason", "turns")
    for n, claim in enumerate(result.claims, start=1):
        cited = [
            f"{c.turn} {c.stance} {c.quote!r}" + ("" if c.verified else " (quote NOT verified)")
            for c in claim.citations
        ]
        cited += [f"{raw} (unknown id)" for raw in claim.unknown]
        table.add_row(
            str(n),
            plain(claim.text + ("" if claim.core else " (aux)")),
            claim.label,
            plain(claim.reason),
            plain("\n".join(cited) or "-", None),
        )
    console.print(table)
    for problem in result.degradations:
        err_console.print(f"[yellow]degraded:[/] {markup_safe(problem)}")
    calls = result.trace.totals.get("total", {}).get("calls", 0) if result.trace.totals else 0
    console.print(f"[dim]{calls} LLM calls; {result.trace.seconds:.2f} s[/]")


def check(
    text: Annotated[str, typer.Argument(help="An answer or statement to check.")],
    store: StoreOpt,
    conversation: ConversationOpt,
    llm: LLMOpt = None,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Check a statement against a conversation: each claim labelled supported, unsupported,
    contradicted or unverifiable, with the turns that support or contradict it and verified
    quotes (needs an LLM)."""
    memory = Memory.open(store, embedder=embedder, llm=llm, namespace=namespace, read_only=True)
    with memory:
        result = memory.check(conversation, text)
        offline = memory.llm is not None and memory.llm.provider.name == "fake"
    if as_json:
        print_json(check_to_json(result))
        return
    show_check(result)
    if offline:
        err_console.print(
            "[yellow]note:[/] the offline LLM (fake) labelled these claims by word overlap, "
            "not by reading them (set QEMEM_LLM to a model; docs/llm.md)"
        )


def time(
    text: Annotated[str, typer.Argument(help="Text with relative time expressions.")],
    anchor: Annotated[
        str, typer.Option("--anchor", help="Session date, e.g. '1:56 pm on 8 May, 2023'.")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Resolve relative time expressions against a session date (deterministic)."""
    found = resolve_times(text, parse_anchor(anchor))
    if as_json:
        print_json([t.to_dict() for t in found])
        return
    table = Table("expression", "phrase", "start", "end", "granularity")
    for t in found:
        table.add_row(
            plain(t.expression),
            plain(t.phrase),
            t.start.isoformat(),
            t.end.isoformat(),
            t.granularity,
        )
    console.print(table if found else "no relative time expression found")


def register(app: typer.Typer) -> None:
    app.command()(build)
    app.command(name="import-nemori")(import_nemori)
    app.command()(ask)
    app.command()(context)
    app.command()(check)
    app.command()(time)
