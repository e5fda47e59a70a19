"""Top-level commands: ingest, conversations, delete, search, demo."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.table import Table

from qemem import __version__
from qemem.answer.ask import Mode
from qemem.answer.wire import pool_to_json
from qemem.cli.common import (
    EmbedderOpt,
    JsonOpt,
    LLMOpt,
    NamespaceOpt,
    OptionalStoreOpt,
    StoreOpt,
    console,
    err_console,
    existing_store,
    markup_safe,
    plain,
    print_json,
    progress_bar,
)
from qemem.cli.flags import FlagGroup, plain_flag_help
from qemem.errors import InputError, QememError
from qemem.ingest.reader import Format, read_conversations
from qemem.memory import Memory, SearchResult, check_ingest, reembed_store, reindex_store
from qemem.models import Plan, Pool, PoolItem, Turn, format_datetime, search_text
from qemem.store import redact, store_exists

app = typer.Typer(
    name="qemem",
    help="Long-term conversational memory with query-specific evidence construction.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=FlagGroup,
)


def _print_version(value: bool) -> None:
    if value:
        console.print(plain(f"qemem {__version__}"))
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print qemem's version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Long-term conversational memory with query-specific evidence construction."""


class InputFormat(StrEnum):
    auto = "auto"
    locomo = "locomo"
    jsonl = "jsonl"


def sample_path() -> Path:
    """The small original sample conversation shipped with the package (LoCoMo format)."""
    return Path(str(resources.files("qemem").joinpath("data/sample.json")))


@app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="LoCoMo JSON or generic JSON/JSONL chat file.")],
    store: StoreOpt,
    fmt: Annotated[str, typer.Option("--format", help="locomo, jsonl or auto (detect).")] = "auto",
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Add a file's conversations to the store (idempotent; new sessions are appended). A file
    without any message is refused (exit 2): it is almost always a failed export."""
    parsed = read_conversations(file, cast(Format, str(fmt)))  # a bad file creates no store
    if not any(session.turns for conv in parsed for session in conv.sessions):
        raise InputError("the file holds no messages: nothing to ingest", file=str(file))
    if not store_exists(store):
        check_ingest(parsed, str(file))  # nor does a file that a new store would refuse
    with (
        Memory.open(store, embedder=embedder, namespace=namespace) as memory,
        progress_bar("embedding", quiet) as p,
    ):
        report = memory.ingest(file, fmt=cast(Format, str(fmt)), progress=p)
    for cid, (sessions, turns) in report.added.items():
        console.print(f"{markup_safe(cid)}: +{sessions} sessions, +{turns} turns")
    if report.skipped:
        console.print(f"{report.skipped} turns were stored meanwhile by another writer: skipped")
    console.print(
        f"[green]ingested[/] {report.turns_added} turns in {report.seconds:.1f} s into "
        f"{markup_safe(redact(store))}"
    )


@app.command()
def conversations(
    store: StoreOpt, namespace: NamespaceOpt = "default", as_json: JsonOpt = False
) -> None:
    """List the conversations in the store, with when each was created (a conversation
    deleted and ingested again is a new one)."""
    with Memory.open(store, namespace=namespace, read_only=True) as memory:
        rows: list[dict[str, Any]] = [
            {
                "id": c.id,
                "created_at": c.created_at.isoformat() if c.created_at else None,
                "speakers": list(c.speakers),
                "sessions": len(c.sessions),
                "turns": len(memory.turns(c.id)),
                "episodes": len(memory.episodes(c.id)),
                "facts": len(memory.facts(c.id)),
                "first": c.sessions[0].date_time.isoformat() if c.sessions else None,
                "last": c.sessions[-1].date_time.isoformat() if c.sessions else None,
            }
            for c in memory.conversations()
        ]
    if as_json:
        print_json(rows)
        return
    table = Table(
        "id", "created (UTC)", "speakers", "sessions", "turns", "episodes", "facts", "span"
    )
    for r in rows:
        span = f"{(r['first'] or '')[:10]} .. {(r['last'] or '')[:10]}"
        table.add_row(
            plain(r["id"]),
            (r["created_at"] or "")[:19].replace("T", " "),
            plain(", ".join(r["speakers"])),
            str(r["sessions"]),
            str(r["turns"]),
            str(r["episodes"]),
            str(r["facts"]),
            span,
        )
    console.print(table)


@app.command()
def delete(
    conversation: Annotated[str, typer.Argument(help="Conversation id.")],
    store: StoreOpt,
    namespace: NamespaceOpt = "default",
) -> None:
    """Delete a conversation and everything derived from it."""
    with Memory.open(existing_store(store), namespace=namespace) as memory:
        if not memory.delete(conversation):
            raise QememError(f"no conversation {conversation!r} in {redact(store)}")
    console.print(plain(f"deleted {conversation}", None))


@app.command()
def reembed(
    store: StoreOpt,
    embedder: EmbedderOpt = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Records per embedding call.")] = 64,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Re-embed a whole store in place with --embedder (resumable: run it again after an
    interruption); the store keeps answering with its old embedder until the swap."""
    with progress_bar("embedding", quiet) as step:
        report = reembed_store(existing_store(store), embedder, batch=batch, progress=step)
    if report.unchanged:
        console.print(plain(f"{redact(store)} is already embedded with {report.after}", None))
        return
    counts = ", ".join(f"{n} {space}s" for space, n in report.embedded.items())
    again = " (resumed)" if report.resumed else ""
    console.print(plain(f"re-embedded {counts}{again}: {report.before} -> {report.after}", None))


@app.command()
def reindex(
    store: StoreOpt,
    embedder: EmbedderOpt = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Passages per embedding call.")] = 64,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Build the passages of a store's long messages (stores made before passages search each
    message whole until this runs); resumable: run it again after an interruption."""
    with progress_bar("passages", quiet) as step:
        report = reindex_store(existing_store(store), embedder, batch=batch, progress=step)
    if report.unchanged:
        console.print(plain(f"{redact(store)}: every message already has its passages", None))
        return
    turns, passages = sum(report.turns.values()), sum(report.passages.values())
    where = len([n for n in report.turns.values() if n])
    console.print(
        plain(f"reindexed {turns} messages of {where} conversations: {passages} passages", None)
    )


def _turn_dict(result: SearchResult) -> dict[str, object]:
    record = result.record
    out: dict[str, object] = {
        "space": result.hit.space,
        "conversation": result.conversation,
        "id": record.id,
        "score": round(result.hit.score, 6),
        "ranks": result.hit.ranks,
    }
    if isinstance(record, Turn):
        out |= {
            "session": record.session,
            "date": record.timestamp.isoformat(),
            "speaker": record.speaker,
            "text": record.text,
        }
        if result.hit.span is not None:  # a long message: the passage that matched
            out |= {"span": list(result.hit.span), "passage": record.excerpt(result.hit.span)}
    else:
        out["text"] = getattr(record, "content", "")
    return out


def show_results(results: list[SearchResult], title: str, conversations: bool = False) -> None:
    """A table of search results; with ``conversations``, a column naming each one's."""
    table = Table(
        *(["conversation"] if conversations else []),
        "id",
        "date",
        "speaker",
        "text",
        "score",
        "ranks",
        title=markup_safe(title),
        show_lines=False,
    )
    for r in results:
        d = _turn_dict(r)
        ranks = " ".join(f"{k}#{v}" for k, v in r.hit.ranks.items())
        date = format_datetime(r.record.timestamp) if isinstance(r.record, Turn) else ""
        table.add_row(
            *([plain(r.conversation)] if conversations else []),
            plain(d["id"]),
            date,
            plain(d.get("speaker", "")),
            plain(d.get("passage", d["text"])),
            f"{r.hit.score:.4f}",
            ranks,
        )
    console.print(table)


ConversationsOpt = Annotated[
    list[str],
    typer.Option(
        "--conversation",
        "-c",
        help="Conversation id, e.g. conv-26; repeat it to search several of the namespace "
        "together (turn search, not --pool).",
    ),
]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    store: StoreOpt,
    conversations: ConversationsOpt,
    k: Annotated[
        int | None,
        typer.Option("--k", "-k", min=1, help="How many results (per space with --pool)."),
    ] = None,
    pool: Annotated[
        bool, typer.Option("--pool", help="Show the evidence pool over all three spaces.")
    ] = False,
    plan: Annotated[
        bool, typer.Option("--plan", help="Plan queries with the LLM first (with --pool).")
    ] = False,
    llm: LLMOpt = None,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Hybrid turn search (dense + BM25, RRF k = 60) of one conversation or, with -c repeated,
    of several ranked together; or with --pool the multi-granular evidence pool (episodes,
    facts, turns with context) of one conversation."""
    several = len(set(conversations)) > 1
    if several and (pool or plan):
        raise InputError("--pool and --plan search one conversation: give -c once")
    memory = Memory.open(store, embedder=embedder, llm=llm, namespace=namespace, read_only=True)
    with memory:
        if pool or plan:
            _search_pool(memory, conversations[0], query, k, plan, as_json)
            return
        if several:
            results = memory.search_many(conversations, query, k=k or 10)
        else:
            results = memory.search(conversations[0], query, k=k or 10)
    if as_json:
        print_json([_turn_dict(r) for r in results])
    else:
        show_results(results, f"{', '.join(dict.fromkeys(conversations))}: {query}", several)


def _search_pool(
    memory: Memory, conversation: str, query: str, k: int | None, plan: bool, as_json: bool
) -> None:
    """Show the evidence pool of ``query`` (planned by the LLM with ``plan``), ``k`` best
    per space."""
    the_plan = memory.plan(conversation, query) if plan else None
    found = memory.retrieve(conversation, query, plan=the_plan)
    if k is not None:
        found = replace(
            found,
            episodes=_best(found.episodes, k),
            facts=_best(found.facts, k),
            turns=_best(found.turns, k),
        )
    if as_json:
        print_json({"plan": vars(the_plan) if the_plan else None, "pool": pool_to_json(found)})
    else:
        show_pool(found, the_plan)


def _best(items: list[PoolItem], k: int) -> list[PoolItem]:
    """The ``k`` best-scored items, in their pool order."""
    keep = {id(item) for item in sorted(items, key=lambda item: -item.score)[:k]}
    return [item for item in items if id(item) in keep]


def show_pool(pool: Pool, plan: Plan | None) -> None:
    if plan is not None:
        console.print(
            f"[bold]plan[/] ({plan.source}): {markup_safe(plan.need)} [dim]type={plan.answer_type} "
            f"aggregate={plan.aggregate} temporal={plan.temporal}[/]"
        )
    console.print(plain("queries: " + " | ".join(pool.queries), None))
    for title, items in (("episodes", pool.episodes), ("facts", pool.facts), ("turns", pool.turns)):
        table = Table("id", "text", "score", "why", title=f"{title} ({len(items)})")
        for item in items:
            why = ", ".join(
                f"q{r.query}:{r.method}#{r.rank}" if r.kind == "ranked" else f"{r.kind}<-{r.via}"
                for r in item.reasons
            )
            table.add_row(plain(item.id), plain(search_text(item.record)), f"{item.score:.4f}", why)
        if items:
            console.print(table)


@app.command()
def demo(
    store: OptionalStoreOpt = None,
    embedder: EmbedderOpt = None,
    llm: LLMOpt = None,
) -> None:
    """Ingest the bundled sample conversation and answer a few questions about it."""
    from qemem.cli.query import show_answer

    with tempfile.TemporaryDirectory() as tmp:
        path = store or Path(tmp) / "demo.db"
        with Memory.open(path, embedder=embedder, llm=llm) as memory:
            with progress_bar("embedding") as p:
                report = memory.ingest(sample_path(), progress=p)
            console.print(
                f"sample conversation: {len(memory.turns(DEMO_ID))} turns "
                f"({report.turns_added} new) in {path}"
            )
            if memory.llm is None:
                console.print(
                    "[yellow]no LLM configured (QEMEM_LLM): answering in retrieval mode, "
                    "which shows the evidence pool and resolved times without an answer. "
                    "Try QEMEM_LLM=fake for an offline run of the whole pipeline.[/]"
                )
                mode: Mode = "retrieval"
            else:
                with progress_bar("building memory") as p:
                    [built] = memory.build(DEMO_ID, progress=p)
                console.print(
                    f"memory built with {memory.llm.provider.name}:{memory.llm.provider.model}: "
                    f"{len(memory.episodes(DEMO_ID))} episodes, "
                    f"{len(memory.facts(DEMO_ID))} facts ({built.llm_calls} new calls)"
                )
                mode = "full"
                if memory.llm.provider.name == "fake":
                    console.print(
                        "[yellow]QEMEM_LLM=fake: the answers below come from qemem's offline "
                        "fake LLM, which echoes spans of the prompt; they are placeholders, "
                        "not a model's answers. Set QEMEM_LLM to a real model for real answers.[/]"
                    )
            for question in DEMO_QUESTIONS:
                show_answer(memory.ask(DEMO_ID, question, mode=mode))


DEMO_ID = "demo-1"
DEMO_QUESTIONS = (
    "What books has Priya read?",
    "When did Priya go to her first pottery class?",
    "What pottery pieces has Priya made?",
)


def main() -> None:
    """Console entry point: user-facing errors print one line and exit with status 2."""
    try:
        app()
    except QememError as exc:
        # a message may quote an argument the shell decoded with surrogate escapes
        message = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
        err_console.print(f"[bold red]error:[/] {markup_safe(message)}")
        sys.exit(2)


def _register_subcommands() -> None:
    from qemem.cli import eval_bench, jobs, memory_io, query, records, reproduce, serve
    from qemem.cli.data import data_app
    from qemem.cli.eval import eval_app

    query.register(app)
    memory_io.register(app)
    records.register(app)
    serve.register(app)
    jobs.register(app)
    reproduce.register(app)
    eval_bench.register(eval_app)
    app.add_typer(eval_app, name="eval")
    app.add_typer(data_app, name="data")
    plain_flag_help(app)


_register_subcommands()
