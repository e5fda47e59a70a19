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


def prompt_hashes() -> dict[str, str]:
    """sha256 (first 12 hex digits) of every template, for run manifests."""
    folder = resources.files(__package__)
    return {
        entry.name.removesuffix(".txt"): hashlib.sha256(entry.read_bytes()).hexdigest()[:12]
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".txt")
    }
