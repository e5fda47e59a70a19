"""The LLM seam of qemem: every stage calls an :class:`LLMClient`, never an SDK.

``open_llm()`` builds one from a spec string (or env QEMEM_LLM); see docs/llm.md.
"""

from __future__ import annotations

from qemem.llm.cache import LLMCache, cache_key
from qemem.llm.client import LLMClient, Structured
from qemem.llm.jsonx import extract_json
from qemem.llm.ledger import Ledger, Tally, stage_group
from qemem.llm.prices import DEFAULT_PRICES, PriceTable
from qemem.llm.spec import make_provider, open_cache, open_llm
from qemem.llm.types import LLMRequest, LLMResponse, Message, Provider

__all__ = [
    "DEFAULT_PRICES",
    "LLMCache",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "Ledger",
    "Message",
    "PriceTable",
    "Provider",
    "Structured",
    "Tally",
    "cache_key",
    "extract_json",
    "make_provider",
    "open_cache",
    "open_llm",
    "stage_group",
]
