"""Retrieval budget options shared by the commands that build a pool: per space, in tokens
(the defaults), and as counts of candidates (options)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from qemem.retrieve.pool import RetrievalConfig

_DEFAULT = RetrievalConfig()


def _default(value: int | None) -> str:
    return "no limit" if value is None else f"{value:,}"


BudgetTurnsOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-turns",
        help="Turn hits kept, a count (default "
        f"{_default(_DEFAULT.budget_turns)}); replaces the default --budget-tokens.",
    ),
]
BudgetEpisodesOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-episodes",
        help="Episodes kept, a count (default "
        f"{_default(_DEFAULT.budget_episodes)}); replaces the default --budget-tokens-episodes.",
    ),
]
BudgetFactsOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-facts",
        help="Semantic facts kept, a count (default "
        f"{_default(_DEFAULT.budget_facts)}); replaces the default --budget-tokens-facts.",
    ),
]
BudgetTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-tokens",
        help="Tokens of turn passages the pool holds (default "
        f"{_default(_DEFAULT.budget_tokens)}; aggregate questions get more).",
    ),
]
BudgetTokensEpisodesOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-tokens-episodes",
        help="Tokens the pool's episodes may take (default "
        f"{_default(_DEFAULT.budget_tokens_episodes)}).",
    ),
]
BudgetTokensFactsOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-tokens-facts",
        help="Tokens the pool's semantic facts may take (default "
        f"{_default(_DEFAULT.budget_tokens_facts)}).",
    ),
]


def retrieval_config(
    turns: int | None = None,
    episodes: int | None = None,
    facts: int | None = None,
    tokens: int | None = None,
    tokens_episodes: int | None = None,
    tokens_facts: int | None = None,
) -> RetrievalConfig | None:
    """The default retrieval settings with the budgets given on the command line; None when
    none was given (the library default applies). A count given for a space replaces that
    space's default token budget unless a token budget is given for it too (``--budget-turns
    25`` keeps 25 turn hits, whatever they cost)."""
    given = {
        "budget_turns": turns,
        "budget_episodes": episodes,
        "budget_facts": facts,
        "budget_tokens": tokens,
        "budget_tokens_episodes": tokens_episodes,
        "budget_tokens_facts": tokens_facts,
    }
    changes: dict[str, int | None] = {k: v for k, v in given.items() if v is not None}
    for token, counted in (
        ("budget_tokens", turns),
        ("budget_tokens_episodes", episodes),
        ("budget_tokens_facts", facts),
    ):
        if counted is not None and given[token] is None:
            changes[token] = None
    return replace(RetrievalConfig(), **changes) if changes else None  # type: ignore[arg-type]
