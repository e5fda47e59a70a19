"""Ingestion: parsers for LoCoMo and the generic chat format, and the idempotent ingest plan."""

from qemem.ingest.generic import parse_generic
from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions, parse_locomo
from qemem.ingest.plan import IngestReport, plan_conversation
from qemem.ingest.reader import read_conversations

__all__ = [
    "IngestReport",
    "LocomoQuestion",
    "load_locomo",
    "locomo_questions",
    "parse_generic",
    "parse_locomo",
    "plan_conversation",
    "read_conversations",
]
