"""Adapters of qemem to agent frameworks, each behind its own extra: the top layer of the
package (nothing in qemem imports them). They call the public memory API (``Memory``,
``MemoryAPI``, the remote clients) and nothing below it.

- :mod:`qemem.integrations.openai_agents`: the OpenAI Agents SDK (``qemem[openai-agents]``).
- :mod:`qemem.integrations.langgraph`: LangGraph and LangChain agents (``qemem[langgraph]``).
- :mod:`qemem.integrations.llamaindex`: a LlamaIndex memory block (``qemem[llamaindex]``).
"""
