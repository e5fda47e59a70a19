"""``qemem import-memory`` and ``qemem export-memory``: the ``qemem-memory/2`` file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qemem.cli.common import (
    ConversationOpt,
    EmbedderOpt,
    JsonOpt,
    NamespaceOpt,
    StoreOpt,
    console,
    existing_store,
    output_file,
    print_json,
    write_output,
)
from qemem.memory import Memory
from qemem.memory_file import dumps, load


def import_memory(
    file: Annotated[
        Path, typer.Argument(help="A qemem-memory/2 (or /1) file (qemem export-memory).")
    ],
    store: StoreOpt,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Add a file's episodes and facts to its (already ingested) conversation; idempotent."""
    memory_file = load(file)
    with Memory.open(existing_store(store), embedder=embedder, namespace=namespace) as memory:
        report = memory.import_memory(memory_file)
    if as_json:
        print_json({k: v for k, v in vars(report).items() if k != "added_ids"})
        return
    console.print(
        f"{report.conversation}: +{report.episodes_added} episodes, +{report.facts_added} facts, "
        f"+{report.supersessions_added} supersessions "
        f"({report.episodes_unchanged} episodes and {report.facts_unchanged} facts already "
        f"stored) in {report.seconds:.1f} s"
    )


def export_memory(
    store: StoreOpt,
    conversation: ConversationOpt,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write here instead of to stdout.", callback=output_file),
    ] = None,
    namespace: NamespaceOpt = "default",
) -> None:
    """Write a conversation's episodes, facts and supersessions as a qemem-memory/2 file
    (no vectors)."""
    with Memory.open(store, namespace=namespace, read_only=True) as memory:
        text = dumps(memory.export_memory(conversation))
    if out is None:
        typer.echo(text, nl=False)
    else:
        write_output(out, text)


def register(app: typer.Typer) -> None:
    app.command(name="import-memory")(import_memory)
    app.command(name="export-memory")(export_memory)
