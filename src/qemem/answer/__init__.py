"""Answering: evidence assembly, the answer call, and ``ask`` (the method end to end)."""

from qemem.answer.ask import MODES, Answer, AskConfig, Mode, Trace, ask
from qemem.answer.assemble import Assembly, assemble, assemble_pool
from qemem.answer.extract import ABSTENTION_PATTERNS, extract_final_answer, is_abstention
from qemem.answer.reply import Reply, answer_question

__all__ = [
    "ABSTENTION_PATTERNS",
    "MODES",
    "Answer",
    "AskConfig",
    "Assembly",
    "Mode",
    "Reply",
    "Trace",
    "answer_question",
    "ask",
    "assemble",
    "assemble_pool",
    "extract_final_answer",
    "is_abstention",
]
