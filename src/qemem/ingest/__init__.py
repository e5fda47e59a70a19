"""Ingestion: parsers for LoCoMo and the generic chat format, and what an ingest adds."""

from qemem.ingest.additions import IngestReport, find_additions
from qemem.ingest.generic import parse_generic
from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions, parse_locomo
from qemem.ingest.reader import read_conversations

__all__ = [
    "IngestReport",
    "LocomoQuestion",
    "find_additions",
    "load_locomo",
    "locomo_questions",
    "parse_generic",
    "parse_locomo",
    "read_conversations",
]
