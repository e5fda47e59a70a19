"""Budget options of the commands that build a pool: a budget given for a space replaces both
of that space's defaults (its count and its token budget) unless both are given."""

from __future__ import annotations

from qemem.cli.budgets import retrieval_config
from qemem.retrieve.budgets import RetrievalConfig

DEFAULT = RetrievalConfig()


def test_no_option_keeps_the_library_default() -> None:
    assert retrieval_config() is None


def test_a_count_alone_replaces_that_spaces_token_budget() -> None:
    config = retrieval_config(turns=40)
    assert config is not None
    assert (config.budget_turns, config.budget_tokens) == (40, None)
    assert config.budget_episodes == DEFAULT.budget_episodes
    assert config.budget_facts == DEFAULT.budget_facts


def test_a_token_budget_alone_replaces_that_spaces_count() -> None:
    config = retrieval_config(tokens=8000, tokens_facts=300)
    assert config is not None
    assert (config.budget_turns, config.budget_tokens) == (None, 8000)
    assert (config.budget_facts, config.budget_tokens_facts) == (None, 300)
    assert config.budget_episodes == DEFAULT.budget_episodes
    assert config.max_tokens is None  # the default cap would contradict the budget given


def test_a_count_keeps_the_cap_on_the_whole_pool() -> None:
    config = retrieval_config(turns=40, episodes=0)
    assert config is not None and config.max_tokens == DEFAULT.max_tokens


def test_both_given_keep_both() -> None:
    config = retrieval_config(turns=30, tokens=5000, episodes=1, tokens_episodes=400)
    assert config is not None
    assert (config.budget_turns, config.budget_tokens) == (30, 5000)
    assert (config.budget_episodes, config.budget_tokens_episodes) == (1, 400)


def test_the_pool_cap_given_holds_even_beside_a_token_budget() -> None:
    alone = retrieval_config(pool_tokens=3000)
    assert alone is not None and alone.max_tokens == 3000
    assert alone.budget_turns == DEFAULT.budget_turns
    beside = retrieval_config(tokens=8000, pool_tokens=4000)
    assert beside is not None and (beside.budget_tokens, beside.max_tokens) == (8000, 4000)
