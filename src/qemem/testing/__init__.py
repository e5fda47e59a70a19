"""Test doubles of qemem, beside the library: the offline LLM for tests, demos and
``QEMEM_LLM=fake``.

This package may import anything in qemem; nothing in the library imports it, except the one
lazy import in ``qemem.llm.spec.make_provider`` that resolves the ``fake`` spec string.
"""

from qemem.testing.generic import ID_PATTERN, generic_instance, generic_text
from qemem.testing.offline import ANSWERERS, OfflineLLM, base_stage, offline_answer

__all__ = [
    "ANSWERERS",
    "ID_PATTERN",
    "OfflineLLM",
    "base_stage",
    "generic_instance",
    "generic_text",
    "offline_answer",
]
