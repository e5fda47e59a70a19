"""Every prompt of qemem, as text templates in this folder (``NAME.txt``), in our own words.

Templates use ``str.format`` fields (``{question}``); literal braces are doubled.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from typing import Any

from qemem.errors import ConfigError


@cache
def load_prompt(name: str) -> str:
    """The text of template ``name`` (without ``.txt``)."""
    try:
        return resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no prompt template named {name!r} in qemem/prompts") from None


def render(name: str, **fields: Any) -> str:
    """Template ``name`` with its fields filled in."""
    return load_prompt(name).format(**fields)


def as_data(text: str) -> str:
    """Stored text (a message, a name, a memory) as prompts quote it: on one line, every run
    of whitespace (newlines included) made one space. Each record is one line of its prompt
    behind a prefix qemem writes, so no text can start a line of the prompt's own structure
    (a section header, a fake message, a ``Question:`` or ``FINAL ANSWER:`` line)."""
    return " ".join(text.split())


CONTINUATION = "  | "
"""Opens each line of a stored text that spans lines, in a prompt (:func:`as_lines`)."""


def as_lines(text: str) -> str:
    """Stored text that may span lines (a message, a quote) as it follows a record's prefix
    in a prompt: a text of one line as :func:`as_data` quotes it, after a space; a text of
    several lines on lines of its own, each behind :data:`CONTINUATION`, so line breaks and
    indentation (code, lists) survive and still no line of the text can start a line of the
    prompt's own structure. Each line keeps its indentation, other runs of whitespace become
    one space; blank lines at either end go and runs of blank lines become one."""
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw[: len(raw) - len(raw.lstrip(" \t"))] + " ".join(raw.split())
        if line.strip() or (lines and lines[-1]):
            lines.append(line if line.strip() else "")
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) <= 1:
        return f" {as_data(text)}"
    return "".join(f"\n{CONTINUATION}{line}".rstrip() for line in lines)


def prompt_hashes() -> dict[str, str]:
    """sha256 (first 12 hex digits) of every template, for run manifests."""
    folder = resources.files(__package__)
    return {
        entry.name.removesuffix(".txt"): hashlib.sha256(entry.read_bytes()).hexdigest()[:12]
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".txt")
    }
