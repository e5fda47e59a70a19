"""qemem: query-specific evidence construction over long-term conversational memory.

Start with :class:`Memory`::

    from qemem import Memory
    memory = Memory.open("memory.db")
    memory.ingest("locomo10.json")
    memory.search("conv-26", "When did Caroline go to the support group?")
"""

from qemem.errors import QememError
from qemem.evidence.quotes import QuoteCheck, verify_quote
from qemem.evidence.times import TimeResolution, resolve_times
from qemem.memory import Memory, SearchResult
from qemem.models import (
    Conversation,
    Episode,
    Plan,
    Pool,
    PoolItem,
    SemanticFact,
    Session,
    Turn,
)
from qemem.remote import AsyncRemoteMemory, RemoteMemory

__version__ = "0.1.0"

__all__ = [
    "AsyncRemoteMemory",
    "Conversation",
    "Episode",
    "Memory",
    "Plan",
    "Pool",
    "PoolItem",
    "QememError",
    "QuoteCheck",
    "RemoteMemory",
    "SearchResult",
    "SemanticFact",
    "Session",
    "TimeResolution",
    "Turn",
    "__version__",
    "resolve_times",
    "verify_quote",
]
