"""Memory construction: episodes and semantic facts built from stored turns (NEMORI recipe),
with provenance, incrementally; and import of a NEMORI memory export."""

from qemem.build.config import STEPS, BuildConfig, BuildReport, Fallback
from qemem.build.nemori import ImportReport, import_nemori
from qemem.build.pipeline import build_memory
from qemem.build.provenance import episode_turns, fact_episodes
from qemem.build.segment import repair_groups, windows

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
