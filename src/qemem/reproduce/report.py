"""Markdown of a reproduction: the results table, and the README tables of pinned figures."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from qemem.errors import InputError
from qemem.reproduce.conditions import Conditions
from qemem.reproduce.grading import format_value
from qemem.reproduce.runner import ConditionResult


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _reference(values: dict[str, float | str] | None) -> str:
    if not values:
        return ""
    if set(values) == {"*"}:
        return format_value(values["*"])
    return ", ".join(f"{k} {format_value(v)}" for k, v in values.items())


def markdown_report(results: Sequence[ConditionResult]) -> str:
    """One Markdown table: condition, figure, measured, pinned, grade, published, note."""
    lines = [
        "| condition | figure | measured | pinned | grade | published | note |",
        "| --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    for result in results:
        if result.skipped:
            lines.append(f"| {result.condition.name} | | | | SKIP | | {_cell(result.skipped)} |")
            continue
        for f in result.figures:
            tol = f" (±{format_value(f.tolerance)})" if f.tolerance else ""
            lines.append(
                f"| {result.condition.name} | {_cell(f.name)} | {format_value(f.measured)} | "
                f"{format_value(f.expected)}{tol} | {f.grade} | {_cell(_reference(f.reference))} | "
                f"{_cell(f.note)} |"
            )
    return "\n".join(lines) + "\n"


MARKER = re.compile(
    r"<!-- reproduce: (?P<args>[^>]*?) -->\n(?P<body>.*?)<!-- /reproduce -->", re.DOTALL
)


def pinned_table(
    conditions: Conditions,
    pinned: dict[str, list[dict[str, Any]]],
    names: Sequence[str],
    data: str,
    columns: Sequence[str] | None = None,
    path: str = "FILE",
) -> str:
    """A Markdown table of the pinned figures of ``names`` on data ``data`` (its label or the
    start of its sha256): one row per condition, one column per figure (``columns``: those)."""
    rows = []
    for name in names:
        if name not in conditions.conditions:
            raise InputError(f"the README names condition {name!r}, which the file lacks")
        records = [
            r for r in pinned.get(name, []) if data in (r["data"], r["data_sha256"][: len(data)])
        ]
        if len(records) != 1:
            raise InputError(f"condition {name!r} has {len(records)} pinned records on {data!r}")
        rows.append((conditions.conditions[name], records[0]["figures"]))
    figures = list(columns or dict.fromkeys(f for _, figs in rows for f in figs))
    lines = [
        "| condition | command | " + " | ".join(figures) + " |",
        "| --- | --- |" + " ---: |" * len(figures),
    ]
    option = "" if data == "sample" else f" --data {path}"
    for condition, values in rows:
        cells = [format_value(values.get(f)) for f in figures]
        command = f"`qemem reproduce -c {condition.name}{option}`"
        lines.append(f"| {_cell(condition.title)} | {command} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _block_args(args: str) -> tuple[list[str], str, list[str] | None, str]:
    words = shlex.split(args)
    options = dict(w.split("=", 1) for w in words if "=" in w)
    names = [w for w in words if "=" not in w]
    if not names or "data" not in options:
        raise InputError(f"a README marker needs condition names and data=LABEL: {args!r}")
    columns = options["columns"].split(",") if "columns" in options else None
    return names, options["data"], columns, options.get("path", "FILE")


def render_readme(
    text: str, conditions: Conditions, pinned: dict[str, list[dict[str, Any]]]
) -> str:
    """``text`` with every ``<!-- reproduce: NAMES data=LABEL [columns="a,b c"] [path=DEV] -->``
    ... ``<!-- /reproduce -->`` block regenerated from the pinned figures (``path``: how the
    commands name the data file)."""

    def one(m: re.Match[str]) -> str:
        names, data, columns, path = _block_args(m.group("args"))
        table = pinned_table(conditions, pinned, names, data, columns, path)
        return f"<!-- reproduce: {m.group('args')} -->\n{table}<!-- /reproduce -->"

    return MARKER.sub(one, text)


def readme_blocks(text: str) -> list[str]:
    """The argument strings of the README's reproduce markers."""
    return [m.group("args") for m in MARKER.finditer(text)]
