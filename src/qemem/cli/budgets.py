"""Retrieval budget options shared by the commands that build a pool: per space, in tokens
(the defaults), and as counts of candidates (options)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from qemem.retrieve.budgets import RetrievalConfig

_DEFAULT = RetrievalConfig()


def _default(value: int | None) -> str:
    return "no limit" if value is None else f"{value:,}"


BudgetTurnsOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-turns",
        help="Turn hits kept, a count (default "
        f"{_default(_DEFAULT.budget_turns)}); given alone, no token budget for turns.",
    ),
]
BudgetEpisodesOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-episodes",
        help="Episodes kept, a count (default "
        f"{_default(_DEFAULT.budget_episodes)}); given alone, no token budget for episodes.",
    ),
]
BudgetFactsOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-facts",
        help="Semantic facts kept, a count (default "
        f"{_default(_DEFAULT.budget_facts)}); given alone, no token budget for facts.",
    ),
]
BudgetTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-tokens",
        help="Tokens of turn passages the pool holds (default "
        f"{_default(_DEFAULT.budget_tokens)}; aggregate questions get more); given alone, no "
        f"count of turn hits; any token budget lifts the {_DEFAULT.max_tokens:,}-token cap on "
        "the whole pool.",
    ),
]
BudgetTokensEpisodesOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-tokens-episodes",
        help="Tokens the pool's episodes may take (default "
        f"{_default(_DEFAULT.budget_tokens_episodes)}); given alone, no count of episodes.",
    ),
]
BudgetTokensFactsOpt = Annotated[
    int | None,
    typer.Option(
        "--budget-tokens-facts",
        help="Tokens the pool's semantic facts may take (default "
        f"{_default(_DEFAULT.budget_tokens_facts)}); given alone, no count of facts.",
    ),
]
PoolTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--pool-tokens",
        help=f"Cap on the whole pool in tokens (default {_default(_DEFAULT.max_tokens)}); "
        "given, it holds even beside a token budget.",
    ),
]


_PER_SPACE = (
    ("budget_turns", "budget_tokens"),
    ("budget_episodes", "budget_tokens_episodes"),
    ("budget_facts", "budget_tokens_facts"),
)
"""Each space's count and token budget (``RetrievalConfig`` fields)."""


def retrieval_config(
    turns: int | None = None,
    episodes: int | None = None,
    facts: int | None = None,
    tokens: int | None = None,
    tokens_episodes: int | None = None,
    tokens_facts: int | None = None,
    pool_tokens: int | None = None,
) -> RetrievalConfig | None:
    """The default retrieval settings with the budgets given on the command line; None when
    none was given (the library default applies). A budget given for a space replaces both
    of that space's defaults, its count and its token budget, unless both are given:
    ``--budget-tokens 8000`` keeps turn hits while their passages fit in 8,000 tokens,
    however many that is, and ``--budget-turns 40`` keeps 40 hits, whatever they cost. A token
    budget given also lifts the default cap on the whole pool (``max_tokens``): the pool is
    then as large as the budgets given make it; ``pool_tokens`` sets that cap."""
    given = {
        "budget_turns": turns,
        "budget_episodes": episodes,
        "budget_facts": facts,
        "budget_tokens": tokens,
        "budget_tokens_episodes": tokens_episodes,
        "budget_tokens_facts": tokens_facts,
    }
    changes: dict[str, int | None] = {k: v for k, v in given.items() if v is not None}
    for count, token in _PER_SPACE:
        if given[count] is not None and given[token] is None:
            changes[token] = None
        elif given[token] is not None and given[count] is None:
            changes[count] = None
    if any(given[token] is not None for _, token in _PER_SPACE):
        changes["max_tokens"] = None
    if pool_tokens is not None:
        changes["max_tokens"] = pool_tokens
    return replace(RetrievalConfig(), **changes) if changes else None  # type: ignore[arg-type]
