"""Test doubles of qemem, beside the library: the offline LLM for tests, demos and
``QEMEM_LLM=fake``, and ``BlockingLLM`` (the offline LLM behind a gate a test opens, to hold an
operation at a known point while the test acts). ``qemem.testing.chat_model`` (not imported
here: it needs langchain-core, the ``langgraph`` extra) holds ``ScriptedChatModel``, a
LangChain chat model whose replies a script gives, for the framework adapters' tests and
examples.

This package may import anything in qemem; nothing in the library imports it, except the one
lazy import in ``qemem.llm.spec.make_provider`` that resolves the ``fake`` spec string.
"""

from qemem.testing.blocking import BlockingLLM
from qemem.testing.generic import ID_PATTERN, generic_instance, generic_text
from qemem.testing.offline import ANSWERERS, OfflineLLM, base_stage, offline_answer

__all__ = [
    "ANSWERERS",
    "ID_PATTERN",
    "BlockingLLM",
    "OfflineLLM",
    "base_stage",
    "generic_instance",
    "generic_text",
    "offline_answer",
]
