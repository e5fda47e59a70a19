"""``qemem facts`` (current, or as of a date) and the single-record edits: ``delete-message``,
``redact-message``, ``delete-fact`` and ``correct-fact``."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from rich.table import Table

from qemem.cli.common import (
    ConversationOpt,
    EmbedderOpt,
    JsonOpt,
    NamespaceOpt,
    StoreOpt,
    console,
    existing_store,
    plain,
    print_json,
)
from qemem.memory import Forgotten, Memory

MessageArg = Annotated[str, typer.Argument(help="Message (turn) id, e.g. D3:12.")]
FactArg = Annotated[str, typer.Argument(help="Fact id, e.g. S14 (qemem facts lists them).")]


def facts(
    store: StoreOpt,
    conversation: ConversationOpt,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="ISO date or date-time: the facts known then."),
    ] = None,
    include_superseded: Annotated[
        bool, typer.Option("--all", help="Also the facts a later one superseded.")
    ] = False,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """List a conversation's current facts (or those known --as-of a date), with the
    episodes each was learned from and what superseded it."""
    with Memory.open(existing_store(store), namespace=namespace, read_only=True) as memory:
        found = memory.facts(conversation, as_of=as_of, include_superseded=include_superseded)
        by_old = {s.old: s for s in memory.supersessions(conversation)}
    shown = {f.id for f in found}
    later = {old: s for old, s in by_old.items() if old in shown and s.new in shown}
    if as_json:
        print_json(
            [
                dataclasses.asdict(f)
                | {"superseded_by": later[f.id].new if f.id in later else None}
                for f in found
            ]
        )
        return
    table = Table("id", "fact", "episodes", "superseded by")
    for fact in found:
        step = later.get(fact.id)
        note = f"{step.new} ({step.kind}: {', '.join(step.turn_ids) or 'by hand'})" if step else ""
        table.add_row(fact.id, plain(fact.content), " ".join(fact.episode_ids), plain(note))
    console.print(table)


def _show(done: Forgotten, as_json: bool) -> None:
    if as_json:
        print_json(dataclasses.asdict(done))
        return
    parts = [
        f"{len(done.deleted)} message(s) deleted" if done.deleted else "",
        f"{len(done.redacted)} message(s) redacted" if done.redacted else "",
        f"episodes removed: {' '.join(done.episodes) or 'none'}",
        f"facts removed: {' '.join(done.facts) or 'none'}",
        f"facts that lost an episode: {' '.join(done.unlinked) or 'none'}",
        f"supersessions removed: {' '.join(done.supersessions) or 'none'}",
        f"current again: {' '.join(done.restored)}" if done.restored else "",
        f"session {done.sessions[0]} left empty and removed" if done.sessions else "",
    ]
    console.print(plain("; ".join(p for p in parts if p), None))


def delete_message(
    message: MessageArg,
    store: StoreOpt,
    conversation: ConversationOpt,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Delete one message with the episodes citing it and the facts only they gave (the next
    build makes the episodes of its neighbours again)."""
    with Memory.open(existing_store(store), namespace=namespace) as memory:
        _show(memory.delete_message(conversation, message), as_json)


def redact_message(
    message: MessageArg,
    store: StoreOpt,
    conversation: ConversationOpt,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Replace one message's text by a marker (its id and place kept), removing what was
    derived from it as delete-message does."""
    with Memory.open(existing_store(store), embedder=embedder, namespace=namespace) as memory:
        _show(memory.redact_message(conversation, message), as_json)


def delete_fact(
    fact: FactArg,
    store: StoreOpt,
    conversation: ConversationOpt,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Delete one fact: a fact it superseded is current again (deleting a correction
    restores the fact it corrected); a correction of it stays."""
    with Memory.open(existing_store(store), namespace=namespace) as memory:
        _show(memory.delete_fact(conversation, fact), as_json)


def correct_fact(
    fact: FactArg,
    content: Annotated[str, typer.Argument(help="The fact as it should read.")],
    store: StoreOpt,
    conversation: ConversationOpt,
    turn: Annotated[
        list[str] | None, typer.Option("--turn", help="A turn id that shows it (repeatable).")
    ] = None,
    embedder: EmbedderOpt = None,
    namespace: NamespaceOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Correct one fact by hand: a new fact supersedes it (a manual supersession; the old
    fact keeps its provenance and shows with qemem facts --all)."""
    with Memory.open(existing_store(store), embedder=embedder, namespace=namespace) as memory:
        done = memory.correct_fact(conversation, fact, content, turns=turn or ())
    if as_json:
        print_json(dataclasses.asdict(done))
        return
    console.print(plain(f"{done.new} supersedes {done.old} (manual)", None))


def register(app: typer.Typer) -> None:
    app.command()(facts)
    app.command(name="delete-message")(delete_message)
    app.command(name="redact-message")(redact_message)
    app.command(name="delete-fact")(delete_fact)
    app.command(name="correct-fact")(correct_fact)
