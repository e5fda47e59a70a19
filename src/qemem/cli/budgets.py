"""Retrieval budget options shared by the commands that build a pool (per space, in items,
and a cap in tokens)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from qemem.retrieve.pool import RetrievalConfig

BudgetTurnsOpt = Annotated[
    int | None, typer.Option("--budget-turns", help="Turn hits kept (default 40).")
]
BudgetEpisodesOpt = Annotated[
    int | None, typer.Option("--budget-episodes", help="Episodes kept (default 2).")
]
BudgetFactsOpt = Annotated[
    int | None, typer.Option("--budget-facts", help="Semantic facts kept (default 4).")
]
BudgetTokensOpt = Annotated[
    int | None,
    typer.Option("--budget-tokens", help="Cap on the pool's turn tokens (default: no cap)."),
]


def retrieval_config(
    turns: int | None = None,
    episodes: int | None = None,
    facts: int | None = None,
    tokens: int | None = None,
) -> RetrievalConfig | None:
    """The default retrieval settings with the budgets given on the command line; None when
    none was given (the library default applies)."""
    given = {
        "budget_turns": turns,
        "budget_episodes": episodes,
        "budget_facts": facts,
        "budget_tokens": tokens,
    }
    changes = {k: v for k, v in given.items() if v is not None}
    return replace(RetrievalConfig(), **changes) if changes else None  # type: ignore[arg-type]
