"""Adapters of qemem to agent frameworks, each behind its own extra: the top layer of the
package (nothing in qemem imports them). They call the public memory API (``Memory``,
``MemoryAPI``, the remote clients) and nothing below it."""
