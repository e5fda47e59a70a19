"""Memory construction: episodes and semantic facts built from stored turns (NEMORI recipe),
with provenance, incrementally; and import of a NEMORI memory export."""

from qemem.construct.build import build_memory
from qemem.construct.config import STEPS, BuildConfig, BuildReport, Fallback
from qemem.construct.nemori import ImportReport, import_nemori
from qemem.construct.provenance import episode_turns, fact_episodes
from qemem.construct.segment import repair_groups, windows

__all__ = [
    "STEPS",
    "BuildConfig",
    "BuildReport",
    "Fallback",
    "ImportReport",
    "build_memory",
    "episode_turns",
    "fact_episodes",
    "import_nemori",
    "repair_groups",
    "windows",
]
