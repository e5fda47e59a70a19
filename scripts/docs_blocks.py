"""Regenerate, or check, the generated blocks of README.md and docs/*.md.

Every figure and every generated table of the documentation sits between two markers and is
written by this script (or by ``qemem reproduce --readme``), never by hand:

    <!-- reproduce: NAMES data=LABEL ... -->      pinned figures of qemem reproduce's
    ...                                           conditions (qemem.reproduce.report)
    <!-- /reproduce -->

    <!-- generated: KIND [ARGS] -->
    ...
    <!-- /generated -->

with KIND one of
    measurement FILE      a table of a measurement file (benchmarks/measurements/*.yaml)
    capable-model RUN...  summary figures of run folders measured with a capable model
                          (read from --results DIR, QEMEM_RESULTS_DIR or ../shared/results)
    capable-model-headline RUN   the first few of those figures (the README)
    layers                the import layers of pyproject.toml's import-linter contract
    operations            the operation table (qemem.operations)
    example-answer        an answer with its cards, from the bundled sample conversation
                          (the offline LLM and the hash embedder)

    python scripts/docs_blocks.py             # rewrite the blocks that differ
    python scripts/docs_blocks.py --check     # exit 1 naming each block that differs

Capable-model blocks are left alone (and named as not checked) when the run folders are not
there. tests/test_docs.py runs the same checks.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from qemem.reproduce.conditions import load_conditions, load_pinned
from qemem.reproduce.report import render_readme

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(
    r"<!-- generated: (?P<args>[^>]*?) -->\n(?P<body>.*?)<!-- /generated -->", re.DOTALL
)
NUMERIC = re.compile(r"^[-+~]?[\d,.]+\s*(%|ms|s|x|MiB|MB|cents)?$")


class Unavailable(Exception):
    """A block whose sources are not on this machine (it is left as it is)."""


@dataclass(frozen=True)
class Sources:
    """Where the blocks' sources are: the repository and the capable-model run folders."""

    repo: Path = REPO
    results: Path | None = None


def default_results(repo: Path = REPO) -> Path | None:
    """The capable-model run folders: ``QEMEM_RESULTS_DIR``, else ``../shared/results``
    beside the repository; None when neither exists."""
    named = os.environ.get("QEMEM_RESULTS_DIR")
    candidate = Path(named) if named else repo.parent / "shared" / "results"
    return candidate if candidate.is_dir() else None


def doc_files(repo: Path = REPO) -> list[Path]:
    """README.md and every Markdown page of docs/."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; columns whose every cell reads as a number are right-aligned."""

    def numeric(i: int) -> bool:
        cells = [str(row[i]) for row in rows if str(row[i]).strip()]
        return bool(cells) and all(NUMERIC.match(c.replace("**", "")) for c in cells)

    align = ["---:" if numeric(i) else "---" for i in range(len(columns))]
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- measurement files ---------------------------------------------------------------------


def render_measurement(path: Path) -> str:
    """A measurement file as Markdown: what was measured and how, its tables, its notes.

    The file (YAML, every value read as text so figures keep the form they were printed in)
    has ``title``, ``command`` (one or a list), ``setting``, ``tables`` (each ``columns``,
    ``rows`` and an optional ``caption``) and optional ``notes``."""
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    commands = data["command"] if isinstance(data["command"], list) else [data["command"]]
    shown = ", ".join(f"`{c}`" for c in commands)
    parts = [f"**{data['title']}** ({shown}): {_flow(data['setting'])}\n"]
    for table in data["tables"]:
        width = len(table["columns"])
        if bad := [row for row in table["rows"] if len(row) != width]:
            raise ValueError(f"{path}: rows of {width} cells expected, got {bad[0]}")
        if table.get("caption"):
            parts.append(_flow(table["caption"]) + "\n")
        parts.append(markdown_table(table["columns"], table["rows"]))
    if data.get("notes"):
        parts.append(_flow(data["notes"]) + "\n")
    return "\n".join(parts)


def _flow(text: str) -> str:
    """YAML folded text as one Markdown paragraph per blank-line-separated part."""
    return "\n\n".join(" ".join(p.split()) for p in text.strip().split("\n\n"))


# --- architecture: layers and operations -----------------------------------------------------


def render_layers(repo: Path) -> str:
    """The import layers, top to bottom, each module with the first line of its docstring,
    and the other contracts, from pyproject.toml."""
    config = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    [layers] = [c for c in contracts if c["type"] == "layers"]
    rows = []
    for depth, layer in enumerate(layers["layers"], 1):
        for name in (m.strip() for m in layer.split("|")):
            rows.append([str(depth), f"`{name}`", _summary(name)])
    parts = [markdown_table(["layer", "module", "what it holds"], rows)]
    others = [f"- **{c['name']}**: {_contract(c)}" for c in contracts if c is not layers]
    ignored = [f"`{i}`" for i in layers.get("ignore_imports", [])]
    parts.append("Exceptions to the layers: " + ", ".join(ignored) + ".\n")
    parts.append("Other contracts:\n\n" + "\n".join(others) + "\n")
    return "\n".join(parts)


def _summary(module: str) -> str:
    """The first paragraph of a module's docstring, its reST code markup as Markdown's."""
    doc = importlib.import_module(module).__doc__ or ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    first = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", first).replace("``", "`")
    return first.replace("|", "\\|")


def _contract(contract: dict[str, Any]) -> str:
    if contract["type"] == "forbidden":
        sources = ", ".join(f"`{m}`" for m in contract["source_modules"])
        forbidden = ", ".join(f"`{m}`" for m in contract["forbidden_modules"])
        return f"{sources} may not import {forbidden}."
    if contract["type"] == "acyclic_siblings":
        return "no import cycles between the modules of one package."
    return f"a `{contract['type']}` contract."


def render_operations() -> str:
    """The operation table: each public operation with its scope, HTTP route, MCP tool and
    command."""
    from qemem.operations import OPERATIONS, route_of

    rows = []
    for op in OPERATIONS:
        route = route_of(op)
        http = f"`{route.method} {route.path}`" if route else "(composed by the clients)"
        if op.via and op.fixed:
            http += " with " + ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in op.fixed.items())
        llm = "yes" if op.llm else ""
        tool = f"`{op.tool}`" if op.tool else ""
        cli = f"`qemem {op.cli}`" if op.cli else ""
        rows.append([f"`{op.name}`", op.scope, http, tool, cli, llm])
    return markdown_table(["operation", "scope", "HTTP", "MCP tool", "command", "LLM"], rows)


# --- the README's example answer -------------------------------------------------------------

EXAMPLE_QUESTION = "When did Priya go to her first pottery class?"


def render_example() -> str:
    """One answer of the full method with its cards, from the bundled sample conversation,
    with the offline LLM and the hash embedder (exact on every machine)."""
    from qemem import Memory
    from qemem.cli.app import DEMO_ID, sample_path

    with Memory.open(None, embedder="hash", llm="fake") as memory:
        memory.ingest(sample_path())
        memory.build(DEMO_ID)
        answer = memory.ask(DEMO_ID, EXAMPLE_QUESTION)
    lines = [f"question  {EXAMPLE_QUESTION}", f"answer    {answer.text}"]
    for i, card in enumerate(answer.cards, 1):
        checked = f"verified against the {card.grounded_in}" if card.verified else "not verified"
        time = f"; time: {card.shown_time}" if card.shown_time else ""
        lines.append(f"card {i}    {', '.join(card.sources)}: {checked}{time}")
        lines.append(f"          quote: {json.dumps(card.quote, ensure_ascii=False)}")
    lines.append(f"calls     {len(answer.trace.calls)} LLM calls; cited {answer.citations}")
    return "```text\n" + "\n".join(lines) + "\n```\n"


# --- capable-model runs ----------------------------------------------------------------------


def render_capable(results: Path | None, runs: Sequence[str], headline: bool = False) -> str:
    """Summary figures of run folders (no question or conversation text): every table, or
    (``headline``) the first few figures of the first run."""
    if results is None:
        raise Unavailable("the capable-model run folders are not on this machine")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import results_page  # benchmarks/results_page.py

    if headline:
        return str(results_page.headline(results / runs[0]))
    return str(results_page.render_runs([results / run for run in runs]))


# --- blocks ----------------------------------------------------------------------------------


KINDS = (
    "measurement",
    "layers",
    "operations",
    "example-answer",
    "capable-model",
    "capable-model-headline",
)


def render_block(args: str, sources: Sources) -> str:
    """The body of the block ``<!-- generated: ARGS -->``."""
    kind, *rest = shlex.split(args)
    renderers: dict[str, Callable[[], str]] = {
        "measurement": lambda: render_measurement(sources.repo / _one(rest, kind)),
        "layers": lambda: render_layers(sources.repo),
        "operations": render_operations,
        "example-answer": render_example,
        "capable-model": lambda: render_capable(sources.results, rest),
        "capable-model-headline": lambda: render_capable(sources.results, rest, headline=True),
    }
    if kind not in renderers:
        raise ValueError(f"unknown generated block kind {kind!r} (known: {', '.join(KINDS)})")
    return renderers[kind]()


def _one(rest: list[str], kind: str) -> str:
    if len(rest) != 1:
        raise ValueError(f"a {kind} block names one file: {rest}")
    return rest[0]


@dataclass
class Outcome:
    """A file's text with its blocks regenerated, the blocks that changed and those whose
    sources are missing."""

    text: str
    changed: list[str]
    unavailable: list[str]


def regenerate(text: str, sources: Sources, only: Sequence[str] | None = None) -> Outcome:
    """``text`` with its blocks regenerated (those of the kinds in ``only``, when given)."""
    changed: list[str] = []
    unavailable: list[str] = []

    def one(m: re.Match[str]) -> str:
        args = m.group("args")
        if only is not None and shlex.split(args)[0] not in only:
            return m.group(0)
        try:
            body = render_block(args, sources)
        except Unavailable:
            unavailable.append(args)
            return m.group(0)
        if body != m.group("body"):
            changed.append(args)
        return f"<!-- generated: {args} -->\n{body}<!-- /generated -->"

    new = BLOCK.sub(one, text)
    if only is None or "reproduce" in only:
        conditions = load_conditions()
        rendered = render_readme(new, conditions, load_pinned(conditions.pinned_path))
        if rendered != new:
            changed.append("reproduce tables")
        new = rendered
    return Outcome(new, changed, unavailable)


def blocks(text: str) -> Iterator[str]:
    """The arguments of a text's generated blocks."""
    return (m.group("args") for m in BLOCK.finditer(text))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="Change nothing; exit 1 if stale.")
    parser.add_argument("--results", type=Path, help="The capable-model run folders.")
    parser.add_argument("files", nargs="*", type=Path, help="Default: README.md, docs/*.md.")
    options = parser.parse_args(argv)
    sources = Sources(REPO, options.results or default_results())
    stale = 0
    for path in options.files or doc_files():
        text = path.read_text(encoding="utf-8")
        outcome = regenerate(text, sources)
        for args in outcome.unavailable:
            print(f"{path}: not checked (sources missing): {args}")
        for args in outcome.changed:
            print(f"{path}: {'stale' if options.check else 'regenerated'}: {args}")
        stale += len(outcome.changed)
        if outcome.changed and not options.check:
            path.write_text(outcome.text, encoding="utf-8")
    return 1 if stale and options.check else 0


if __name__ == "__main__":
    sys.exit(main())
