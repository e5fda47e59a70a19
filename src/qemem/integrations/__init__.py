"""Adapters of qemem to agent frameworks, each behind its own extra: a layer above the
library, calling only its public API (``Memory``, ``MemoryAPI``, the remote clients).

- :mod:`qemem.integrations.openai_agents`: the OpenAI Agents SDK (``qemem[openai-agents]``).
"""
