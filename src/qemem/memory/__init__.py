"""The memory API: ``MemoryAPI`` (what every memory offers) and ``Memory`` (the embedded one).
The CLI, the service and the evaluation harness call this and nothing deeper."""

from qemem.memory.api import (
    IDEMPOTENCY_HEADER,
    MAX_CHECK_CHARS,
    MAX_QUESTION_CHARS,
    Appended,
    Forgotten,
    MemoryAPI,
    Progress,
    SearchResult,
    check_query,
)
from qemem.memory.appending import IDEMPOTENCY_HOURS
from qemem.memory.auditing import AUDIT_SAMPLE
from qemem.memory.facade import EMBED_CHARS, Memory
from qemem.memory.ingesting import check_ingest
from qemem.memory.items import MAX_ITEM_CHARS, MAX_ITEMS, MAX_MESSAGE_CHARS
from qemem.memory.jobs import Job
from qemem.memory.reembed import ReembedReport, reembed, reembed_store
from qemem.memory.reindex import ReindexReport, reindex, reindex_store
from qemem.memory.searching import MAX_CONVERSATIONS

__all__ = [
    "AUDIT_SAMPLE",
    "EMBED_CHARS",
    "IDEMPOTENCY_HEADER",
    "IDEMPOTENCY_HOURS",
    "MAX_CHECK_CHARS",
    "MAX_CONVERSATIONS",
    "MAX_ITEMS",
    "MAX_ITEM_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_QUESTION_CHARS",
    "Appended",
    "Forgotten",
    "Job",
    "Memory",
    "MemoryAPI",
    "Progress",
    "ReembedReport",
    "ReindexReport",
    "SearchResult",
    "check_ingest",
    "check_query",
    "reembed",
    "reembed_store",
    "reindex",
    "reindex_store",
]
